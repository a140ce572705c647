/* bpf-log.h: libbpf's own messages (it prints its warnings to stderr otherwise) into our debug log. */
#pragma once

/* Route libbpf's messages, but its debug ones, to log_debug() ("libbpf: …"). A no-op in a build without BPF. */
void bpf_log_to_debug(void);
