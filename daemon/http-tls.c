/* http-tls.c: the HTTPS certificate and key read and checked as a pair with GnuTLS (which libmicrohttpd uses), so
 * that a wrong file is named at --check-config, at start and at reload, not found out at the first handshake. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include "base/io-util.h"
#include "base/macro.h"
#include "http-tls.h"

/* A PEM file larger than this is not a certificate chain or a key. */
#define HTTP_TLS_PEM_MAX (1024 * 1024)

HttpTls *http_tls_free(HttpTls *t) {
        if (!t)
                return NULL;
        free(t->cert_pem);
        if (t->key_pem) /* the private key does not outlive its use in freed memory */
                explicit_bzero(t->key_pem, strlen(t->key_pem));
        free(t->key_pem);
        free(t);
        return NULL;
}

static int fail(char **ret_error, int error, const char *fmt, ...) _printf_(3, 4);
static int fail(char **ret_error, int error, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        if (vasprintf(ret_error, fmt, ap) < 0)
                *ret_error = NULL;
        va_end(ap);
        return *ret_error ? error : -ENOMEM;
}

static int read_pem(const char *what, const char *path, char **ret, char **ret_error) {
        _cleanup_free_ char *buf = NULL;
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        size_t size = 0;
        int r;

        r = fd < 0 ? -errno : read_full_fd(fd, HTTP_TLS_PEM_MAX, &buf, &size);
        if (r < 0)
                return fail(ret_error, r, "Failed to read the TLS %s '%s': %s", what, path, strerror(-r));
        if (strlen(buf) != size)
                return fail(ret_error, -EBADMSG, "The TLS %s '%s' holds a NUL byte: not a PEM file", what, path);
        *ret = TAKE_PTR(buf);
        return 0;
}

/* The SHA-256 id of a public key, from the certificate or from the private key. */
#define KEY_ID_MAX 64

int http_tls_read(const char *cert_path, const char *key_path, HttpTls **ret, char **ret_error) {
        _cleanup_(http_tls_freep) HttpTls *t = NULL;
        gnutls_x509_crt_t crt = NULL;
        gnutls_x509_privkey_t key = NULL;
        unsigned char crt_id[KEY_ID_MAX], key_id[KEY_ID_MAX];
        size_t crt_id_len = sizeof crt_id, key_id_len = sizeof key_id;
        gnutls_datum_t d;
        int g, r;

        *ret_error = NULL;
        t = calloc(1, sizeof *t);
        if (!t)
                return -ENOMEM;
        r = read_pem("certificate", cert_path, &t->cert_pem, ret_error);
        if (r < 0)
                return r;
        r = read_pem("key", key_path, &t->key_pem, ret_error);
        if (r < 0)
                return r;

        if (gnutls_x509_crt_init(&crt) < 0 || gnutls_x509_privkey_init(&key) < 0) {
                r = -ENOMEM;
                goto finish;
        }
        d = (gnutls_datum_t) { .data = (unsigned char *) t->cert_pem, .size = (unsigned) strlen(t->cert_pem) };
        g = gnutls_x509_crt_import(crt, &d, GNUTLS_X509_FMT_PEM);
        if (g < 0) {
                r = fail(ret_error, -EBADMSG, "The TLS certificate '%s' is not a PEM certificate: %s", cert_path,
                         gnutls_strerror(g));
                goto finish;
        }
        d = (gnutls_datum_t) { .data = (unsigned char *) t->key_pem, .size = (unsigned) strlen(t->key_pem) };
        g = gnutls_x509_privkey_import2(key, &d, GNUTLS_X509_FMT_PEM, /* password= */ NULL, 0);
        if (g < 0) {
                r = fail(ret_error, -EBADMSG, "The TLS key '%s' is not a PEM private key (or it is encrypted): %s",
                         key_path, gnutls_strerror(g));
                goto finish;
        }
        g = gnutls_x509_crt_get_key_id(crt, GNUTLS_KEYID_USE_SHA256, crt_id, &crt_id_len);
        if (g >= 0)
                g = gnutls_x509_privkey_get_key_id(key, GNUTLS_KEYID_USE_SHA256, key_id, &key_id_len);
        if (g < 0) {
                r = fail(ret_error, -EBADMSG, "The TLS key '%s' cannot be compared with the certificate '%s': %s",
                         key_path, cert_path, gnutls_strerror(g));
                goto finish;
        }
        if (crt_id_len != key_id_len || memcmp(crt_id, key_id, crt_id_len) != 0) {
                r = fail(ret_error, -EKEYREJECTED, "The TLS key '%s' is not the key of the certificate '%s'",
                         key_path, cert_path);
                goto finish;
        }
        r = 0;
        *ret = TAKE_PTR(t);
finish:
        /* unwind: the parsed certificate and key (the PEM texts go with T) */
        if (key)
                gnutls_x509_privkey_deinit(key);
        if (crt)
                gnutls_x509_crt_deinit(crt);
        return r;
}
