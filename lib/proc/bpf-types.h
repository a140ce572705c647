/* bpf-types.h: the fixed-width types the BPF programs (*.bpf.c) and libbpf's helper headers name, without the kernel's
 * headers (a CO-RE program carries its own view of the kernel's types). For the BPF target only. */
#pragma once

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef signed int __s32;
typedef signed long long __s64;
typedef __u16 __be16; /* named by bpf_helper_defs.h */
typedef __u32 __be32, __wsum;
typedef _Bool bool;
#define true 1
#define false 0
