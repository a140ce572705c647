/* token-file.c: the API's bearer token file, read the same way by stackwatchd and stackctl. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/macro.h"
#include "serve/api.h"
#include "serve/token-file.h"

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

/* Every line of the file with its own token, and the newline; a little more, to tell a longer file. */
#define TOKEN_FILE_BYTES_MAX (TOKEN_FILE_TOKENS_MAX * (API_TOKEN_MAX + 2))

/* The tokens of PATH, at most MAX of them (a line past those is -ETOOMANYREFS, or for MAX 1 -EINVAL: a line break is
 * a control character in the one token); RET[] are filled, the rest left NULL. */
static int read_tokens(const char *path, size_t max, char **ret, size_t *ret_n) {
        _cleanup_close_ int fd = -EBADF;
        char buf[TOKEN_FILE_BYTES_MAX + 2];
        size_t n_tokens = 0, want = (max == 1 ? API_TOKEN_MAX + 2 : sizeof buf) - 1;
        ssize_t n;
        int r = 0;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return negative_errno();
        n = read(fd, buf, want);
        if (n < 0)
                return negative_errno();
        /* More than MAX whole lines can hold: too much, whatever the rest says. */
        if (max > 1 && (size_t) n == want)
                r = -E2BIG;
        buf[n] = 0;
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
                buf[--n] = 0;
        for (char *line = buf, *end; r == 0 && line < buf + n; line = end + 1) {
                size_t len;

                /* One token for a client: the whole file is its line, and a line break in it is refused below. */
                end = max == 1 ? buf + n : strchrnul(line, '\n');
                *end = 0;
                len = strlen(line);
                while (max > 1 && len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' '))
                        line[--len] = 0;
                if (len == 0)
                        continue;
                if (len > API_TOKEN_MAX) {
                        r = -E2BIG;
                        break;
                }
                for (size_t i = 0; r == 0 && i < len; i++)
                        if ((unsigned char) line[i] <= ' ' || line[i] == 0x7f)
                                r = -EINVAL;
                if (r < 0)
                        break;
                if (n_tokens == max) {
                        r = -ETOOMANYREFS;
                        break;
                }
                ret[n_tokens] = strdup(line);
                if (!ret[n_tokens]) {
                        r = -ENOMEM;
                        break;
                }
                n_tokens++;
        }
        if (r == 0 && n_tokens == 0)
                r = -ENODATA;
        if (r < 0)
                for (size_t i = 0; i < n_tokens; i++) {
                        explicit_bzero(ret[i], strlen(ret[i]));
                        ret[i] = mfree(ret[i]);
                }
        else
                *ret_n = n_tokens;
        explicit_bzero(buf, sizeof buf);
        return r;
}

int token_file_read(const char *path, char **ret) {
        size_t n;

        return read_tokens(path, 1, ret, &n);
}

int token_file_read_all(const char *path, char *ret[static TOKEN_FILE_TOKENS_MAX], size_t *ret_n) {
        for (size_t i = 0; i < TOKEN_FILE_TOKENS_MAX; i++)
                ret[i] = NULL;
        return read_tokens(path, TOKEN_FILE_TOKENS_MAX, ret, ret_n);
}

const char *token_file_strerror(int error) {
        switch (error) {
        case -ENODATA:
                return "the file is empty";
        case -E2BIG:
                return "the token is longer than " STRINGIFY(API_TOKEN_MAX) " characters";
        case -EINVAL:
                return "it must hold one token without spaces or control characters";
        case -ETOOMANYREFS:
                return "it holds more than " STRINGIFY(TOKEN_FILE_TOKENS_MAX) " tokens (one per line: the one in "
                       "use and, while clients move over, the next one)";
        default:
                return NULL;
        }
}
