/* token-file.h: the API's bearer token file, read the same way by stackwatchd and stackctl. */
#pragma once

#include <stddef.h>

/* Tokens a daemon's token file may hold at once: the one in use and, during a rotation, the next one. */
#define TOKEN_FILE_TOKENS_MAX 2

/* Read the token in PATH: one line, trailing newlines and spaces dropped; what is left must be 1..API_TOKEN_MAX
 * characters, none of them a space or a control character (it goes into a header as it is). The buffer it was read
 * into is wiped. -errno from open/read, -ENODATA when empty, -E2BIG when too long, -EINVAL for a space or a control
 * character (a second line too), -ENOMEM. */
int token_file_read(const char *path, char **ret);
/* The daemon's side: every token in PATH, one per line (empty lines and trailing spaces ignored), each as
 * token_file_read() wants it, at most TOKEN_FILE_TOKENS_MAX (-ETOOMANYREFS past that): a request with any of them
 * is let in, so that a token can be rotated without a moment when the clients' one is refused. RET gets them in
 * the file's order, the rest NULL; *RET_N how many. */
int token_file_read_all(const char *path, char *ret[static TOKEN_FILE_TOKENS_MAX], size_t *ret_n);
/* A message for the errors of token_file_read() and token_file_read_all() that are not errno's own ("empty",
 * "longer than 256 characters", ...); NULL for the others. */
const char *token_file_strerror(int error);
