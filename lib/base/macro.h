/* macro.h: cleanup attributes, ownership transfer and small helpers used everywhere. */
#pragma once

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _noreturn_ __attribute__((noreturn))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _likely_(x) __builtin_expect(!!(x), 1)
#define _unlikely_(x) __builtin_expect(!!(x), 0)

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define assert_cc(expr) _Static_assert(expr, #expr)
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* Take ownership of a pointer or fd, leaving the cleanup variable inert. */
#define TAKE_PTR(p)                                     \
        ({                                              \
                __typeof__(p) _p_ = (p);                \
                (p) = NULL;                             \
                _p_;                                    \
        })
#define TAKE_FD(fd)                                     \
        ({                                              \
                int _fd_ = (fd);                        \
                (fd) = -EBADF;                          \
                _fd_;                                   \
        })

/* Close an fd if valid, preserving errno; returns -EBADF for "fd = safe_close(fd)". */
static inline int safe_close(int fd) {
        if (fd >= 0) {
                int saved = errno;
                close(fd);
                errno = saved;
        }
        return -EBADF;
}

static inline void freep(void *p) {
        free(*(void **) p);
}
static inline void closep(int *fd) {
        safe_close(*fd);
}
static inline void fclosep(FILE **f) {
        if (*f)
                fclose(*f);
}
static inline void closedirp(DIR **d) {
        if (*d)
                closedir(*d);
}

#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)
#define _cleanup_fclose_ _cleanup_(fclosep)
#define _cleanup_closedir_ _cleanup_(closedirp)

/* Define "static inline void namep(type *p)" calling func(*p) when *p is non-NULL. */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)         \
        static inline void func##p(type *p) {           \
                if (*p)                                 \
                        func(*p);                       \
        }

/* Turn a libc "-1 and errno" result into "-errno", never 0 for a failure. */
static inline int negative_errno(void) {
        return errno > 0 ? -errno : -EIO;
}

static inline bool streq(const char *a, const char *b) {
        return a && b && __builtin_strcmp(a, b) == 0;
}

/* Equal, with NULL equal only to NULL. */
static inline bool streq_ptr(const char *a, const char *b) {
        return a == b || streq(a, b);
}

/* Free and return NULL: "p = mfree(p)". */
static inline void *mfree(void *p) {
        free(p);
        return NULL;
}

#define DIV_ROUND_UP(x, y) (((x) + (y) - 1) / (y))

static inline bool startswith(const char *s, const char *prefix) {
        return s && __builtin_strncmp(s, prefix, __builtin_strlen(prefix)) == 0;
}

/* Whether S ends with SUFFIX, and has more before it. */
static inline bool endswith(const char *s, const char *suffix) {
        size_t n = s ? __builtin_strlen(s) : 0, k = __builtin_strlen(suffix);
        return n > k && __builtin_strcmp(s + n - k, suffix) == 0;
}

static inline const char *strna(const char *s) {
        return s ?: "n/a";
}

#define USEC_PER_SEC 1000000ULL
#define NSEC_PER_USEC 1000ULL
#define USEC_PER_MSEC 1000ULL

/* A 64-bit key (an address) mixed into a table index: the finalizer of MurmurHash3, whose low bits depend on all
 * of the key's, so that aligned addresses spread over a power-of-two table. */
static inline size_t hash_u64(uint64_t a) {
        a ^= a >> 33;
        a *= 0xff51afd7ed558ccdULL;
        a ^= a >> 33;
        return (size_t) a;
}
