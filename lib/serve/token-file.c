/* token-file.c: the API's bearer token file, read the same way by stackwatchd and stackctl. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "base/macro.h"
#include "serve/api.h"
#include "serve/token-file.h"

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

int token_file_read(const char *path, char **ret) {
        _cleanup_close_ int fd = -EBADF;
        char buf[API_TOKEN_MAX + 2];
        ssize_t n;
        int r = 0;

        fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return negative_errno();
        n = read(fd, buf, sizeof buf - 1);
        if (n < 0)
                return negative_errno();
        buf[n] = 0;
        while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
                buf[--n] = 0;
        if (n == 0)
                r = -ENODATA;
        else if ((size_t) n > API_TOKEN_MAX)
                r = -E2BIG;
        for (ssize_t i = 0; r == 0 && i < n; i++)
                if ((unsigned char) buf[i] <= ' ' || buf[i] == 0x7f)
                        r = -EINVAL;
        if (r == 0 && !(*ret = strdup(buf)))
                r = -ENOMEM;
        explicit_bzero(buf, sizeof buf);
        return r;
}

const char *token_file_strerror(int error) {
        switch (error) {
        case -ENODATA:
                return "the file is empty";
        case -E2BIG:
                return "the token is longer than " STRINGIFY(API_TOKEN_MAX) " characters";
        case -EINVAL:
                return "it must hold one token without spaces or control characters";
        default:
                return NULL;
        }
}
