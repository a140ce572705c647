/* token-file.h: the API's bearer token file, read the same way by stackwatchd and stackctl. */
#pragma once

/* Read the token in PATH: one line, trailing newlines and spaces dropped; what is left must be 1..API_TOKEN_MAX
 * characters, none of them a space or a control character (it goes into a header as it is). The buffer it was read
 * into is wiped. -errno from open/read, -ENODATA when empty, -E2BIG when too long, -EINVAL for a space or a control
 * character, -ENOMEM. */
int token_file_read(const char *path, char **ret);
/* A message for the errors of token_file_read() that are not errno's own ("empty", "longer than 256
 * characters", ...); NULL for the others. */
const char *token_file_strerror(int error);
