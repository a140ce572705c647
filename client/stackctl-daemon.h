/* stackctl-daemon.h: asking stackwatchd: where it listens and with which token, its replies as exit codes. */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include <json-c/json.h>

#include "base/time-util.h"
#include "stackctl-http.h"

/* Set arg.host to S as a URL ("http://" implied, no trailing slash); a usage error is logged. */
int parse_host(const char *s);

/* A hosts file may not be larger than this. */
#define HOSTS_FILE_MAX (1024U * 1024U)

/* --host S: add S to arg.hosts, the daemon asked when it is the only one (parse_host()). Errors are logged. */
int hosts_add(const char *s);
/* --hosts FILE: add each line's daemon ("URL [TOKEN-FILE]", "#" comments, blank lines) to arg.hosts. Errors are
 * logged, naming FILE:LINE:COLUMN. */
int hosts_load(const char *path);
/* Ask host I of arg.hosts (or the one of them called NAME, else NAME as a URL) from now on: arg.host and its own
 * token file. A usage error is logged. */
int host_select(size_t i);
int host_select_name(const char *name);
/* The token file host I is asked with: its own, else --token-file's; NULL: none. */
const char *host_token_file(size_t i);
void hosts_done(void);

/* dump --via-daemon PID: the daemon captures, we print its reply. */
int dump_via_daemon(pid_t pid);
/* The route that asks a daemon for PID's stacks as the options say (format, --tid, --peers), into *RET (malloc'd).
 * Failures are logged. */
int stacks_path(pid_t pid, char **ret);

/* How long a request may take unless --timeout says otherwise; a live capture may wait for the budget's slot
 * and stop a busy process's threads one by one, so it gets longer. */
#define DAEMON_TIMEOUT_USEC (10 * USEC_PER_SEC)
#define DAEMON_CAPTURE_TIMEOUT_USEC (60 * USEC_PER_SEC)

/* GET PATH_AND_QUERY from the daemon the options name. Returns EXIT_OK with RET filled in for a 2xx reply and
 * for status ALSO_OK (0: none); anything else is reported here and returned as the EXIT_* code a script sees:
 * no daemon 6, permission or token 4, not found 3, the rest 1. */
int daemon_get(const char *path_and_query, uint64_t default_timeout_usec, long also_ok, HttpResponse *ret);

/* The same, and the body parsed as a JSON object into RET_JSON. */
int daemon_get_json(const char *path_and_query, long also_ok, HttpResponse *ret, json_object **ret_json);

/* Write a reply's body to stdout as it came, ending with a newline. EXIT_OK or EXIT_FAIL. */
int daemon_print_body(const HttpResponse *r);

/* An array of strings joined with ",", escaped for a terminal; "-" when empty. NULL on OOM. */
char *json_join_strings(json_object *array);
