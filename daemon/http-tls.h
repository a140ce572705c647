/* http-tls.h: the HTTPS certificate and key, read and checked as a pair (GnuTLS) before a listener is given them:
 * at start, at every reload, and by --check-config. */
#pragma once

#include "base/macro.h"

/* The PEM texts of a certificate and its private key, checked to match. */
typedef struct HttpTls {
        char *cert_pem;
        char *key_pem;
} HttpTls;

/* Read CERT_PATH and KEY_PATH and check them: each readable, the first a PEM certificate, the second a PEM private key
 * (not encrypted), and the key the certificate's. On failure -errno (-EBADMSG: not what it should be, -EKEYREJECTED:
 * a key that is not the certificate's) and, in *RET_ERROR, a sentence naming the file and what is wrong, for the
 * caller to log (and, on reload, to report). Nothing is logged here. */
int http_tls_read(const char *cert_path, const char *key_path, HttpTls **ret, char **ret_error);
/* NULL-safe; the key's text is wiped before it is freed. */
HttpTls *http_tls_free(HttpTls *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(HttpTls *, http_tls_free);
