/* stackctl-http.c: one HTTP GET to stackwatchd, over its unix socket or TCP, with libcurl (opened on first use). */
#include <curl/curl.h>
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/alloc-util.h"
#include "base/log.h"
#include "base/parse-util.h"
#include "serve/api.h"
#include "stackctl-http.h"

/* libcurl is opened on the first request, not linked: its dependencies (OpenSSL, GnuTLS, Kerberos, LDAP, ssh2,
 * 28 libraries in all) more than doubled the start-up of every stackctl, also of a local dump that never talks
 * HTTP (median 8.4 → 18.5 ms for "dump PID --no-source"). Its soname has been libcurl.so.4 since 2006. */
#define LIBCURL_SONAME "libcurl.so.4"

/* The entry points, resolved once by dlopen_curl(); the handle stays open until exit. */
static void *curl_dl = NULL;
static typeof(curl_global_init) *sym_curl_global_init;
static typeof(curl_global_cleanup) *sym_curl_global_cleanup;
static typeof(curl_easy_init) *sym_curl_easy_init;
static typeof(curl_easy_cleanup) *sym_curl_easy_cleanup;
static typeof(curl_easy_setopt) *sym_curl_easy_setopt;
static typeof(curl_easy_perform) *sym_curl_easy_perform;
static typeof(curl_easy_getinfo) *sym_curl_easy_getinfo;
static typeof(curl_easy_strerror) *sym_curl_easy_strerror;
static typeof(curl_easy_escape) *sym_curl_easy_escape;
static typeof(curl_free) *sym_curl_free;
static typeof(curl_slist_append) *sym_curl_slist_append;
static typeof(curl_slist_free_all) *sym_curl_slist_free_all;

#define DLSYM(dl, name) (sym_##name = (typeof(sym_##name)) dlsym(dl, #name))

static int dlopen_curl(void) {
        void *dl;

        if (curl_dl)
                return 0;
        dl = dlopen(LIBCURL_SONAME, RTLD_NOW | RTLD_LOCAL);
        if (!dl)
                return log_error_errno(SYNTHETIC_ERRNO(EOPNOTSUPP),
                                       "Talking to stackwatchd needs libcurl (apt-get install libcurl4): %s",
                                       dlerror());
        if (!DLSYM(dl, curl_global_init) || !DLSYM(dl, curl_global_cleanup) || !DLSYM(dl, curl_easy_init) ||
            !DLSYM(dl, curl_easy_cleanup) || !DLSYM(dl, curl_easy_setopt) || !DLSYM(dl, curl_easy_perform) ||
            !DLSYM(dl, curl_easy_getinfo) || !DLSYM(dl, curl_easy_strerror) || !DLSYM(dl, curl_easy_escape) ||
            !DLSYM(dl, curl_free) || !DLSYM(dl, curl_slist_append) || !DLSYM(dl, curl_slist_free_all)) {
                log_error("%s lacks a function stackctl needs: %s", LIBCURL_SONAME, dlerror());
                dlclose(dl);
                return -EOPNOTSUPP;
        }
        curl_dl = dl;
        return 0;
}

static void curl_easy_cleanupp(CURL **c) {
        if (*c)
                sym_curl_easy_cleanup(*c);
}

static void curl_slist_free_allp(struct curl_slist **l) {
        if (*l)
                sym_curl_slist_free_all(*l);
}

static void curl_freep(char **p) {
        if (*p)
                sym_curl_free(*p);
}

typedef struct Reply {
        HttpResponse *resp;
        size_t allocated;
        bool too_big;
        bool oom;
} Reply;

void http_response_done(HttpResponse *r) {
        if (!r)
                return;
        r->body = mfree(r->body);
        r->content_type = mfree(r->content_type);
        r->size = 0;
}

const char *http_target_name(const HttpTarget *t) {
        return t->base_url ?: t->socket_path;
}

int http_query_append(char **path, const char *key, const char *value) {
        _cleanup_(curl_freep) char *escaped = NULL;
        char *p;
        int r;

        r = dlopen_curl();
        if (r < 0)
                return r;
        /* libcurl ignores the handle here (it used it for a character set conversion that is gone). */
        escaped = sym_curl_easy_escape(NULL, value, 0);
        if (!escaped)
                return log_oom();
        if (asprintf(&p, "%s%c%s=%s", *path, strchr(*path, '?') ? '&' : '?', key, escaped) < 0)
                return log_oom();
        free(*path);
        *path = p;
        return 0;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *userdata) {
        Reply *rp = userdata;
        HttpResponse *r = rp->resp;
        size_t n = size * nmemb;

        if (n > HTTP_BODY_MAX - r->size) {
                rp->too_big = true;
                return 0;
        }
        if (!GREEDY_REALLOC(r->body, rp->allocated, r->size + n + 1)) {
                rp->oom = true;
                return 0;
        }
        memcpy(r->body + r->size, data, n);
        r->size += n;
        r->body[r->size] = 0;
        return n;
}

/* Only Retry-After is of interest: the seconds form, as stackwatchd sends it. */
static size_t on_header(char *data, size_t size, size_t nmemb, void *userdata) {
        static const char name[] = "Retry-After:";
        Reply *rp = userdata;
        size_t n = size * nmemb, len;
        char value[24];
        uint64_t v;

        if (n <= strlen(name) || strncasecmp(data, name, strlen(name)) != 0)
                return n;
        data += strlen(name);
        len = n - strlen(name);
        while (len > 0 && (*data == ' ' || *data == '\t'))
                data++, len--;
        while (len > 0 && (data[len - 1] == '\r' || data[len - 1] == '\n' || data[len - 1] == ' '))
                len--;
        if (len > 0 && len < sizeof value) {
                memcpy(value, data, len);
                value[len] = 0;
                if (safe_atou64(value, &v) >= 0)
                        rp->resp->retry_after_sec = v;
        }
        return n;
}

/* Why a connection to a unix socket failed. libcurl keeps the connect() errno; when it has none, look at the
 * socket file ourselves. */
static int socket_connect_errno(const char *path, long os_errno) {
        struct stat st;

        if (os_errno > 0)
                return (int) os_errno;
        if (stat(path, &st) < 0)
                return errno;
        if (!S_ISSOCK(st.st_mode))
                return ECONNREFUSED;
        if (access(path, W_OK) < 0)
                return errno;
        return ECONNREFUSED;
}

static int connect_failed(const HttpTarget *t, long os_errno, const char *detail) {
        int e = t->base_url ? (int) os_errno : socket_connect_errno(t->socket_path, os_errno);

        switch (e) {
        case ENOENT:
        case ENOTDIR:
        case ECONNREFUSED:
                log_error("stackwatchd is not running (no daemon listening on %s)", http_target_name(t));
                return -ECONNREFUSED;
        case EACCES:
        case EPERM:
                log_error("Permission denied on %s: run as root or as a member of the socket's group",
                          http_target_name(t));
                return -EACCES;
        default:
                if (e > 0)
                        return log_error_errno(e, "Failed to connect to stackwatchd on %s: %m", http_target_name(t));
                log_error("Failed to connect to stackwatchd on %s: %s", http_target_name(t), detail);
                return -EIO;
        }
}

/* The request itself, between curl_global_init() and curl_global_cleanup(). */
static int perform(const HttpTarget *t, const char *url, const char *auth, const char *path_and_query,
                   HttpResponse *ret) {
        _cleanup_(curl_easy_cleanupp) CURL *c = NULL;
        _cleanup_(curl_slist_free_allp) struct curl_slist *headers = NULL;
        _cleanup_(http_response_done) HttpResponse r = {};
        Reply rp = { .resp = &r };
        char errbuf[CURL_ERROR_SIZE] = "";
        const char *detail, *ct = NULL;
        long os_errno = 0;
        CURLcode cc;

        c = sym_curl_easy_init();
        if (!c)
                return log_oom();
        if (auth && !(headers = sym_curl_slist_append(NULL, auth)))
                return log_oom();
        /* The daemon is never behind a proxy: a proxy from the environment would only get to see the token. */
        if (sym_curl_easy_setopt(c, CURLOPT_URL, url) != CURLE_OK ||
            (!t->base_url && sym_curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, t->socket_path) != CURLE_OK) ||
            sym_curl_easy_setopt(c, CURLOPT_NOPROXY, "*") != CURLE_OK ||
            sym_curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK ||
            sym_curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long) CURL_HTTP_VERSION_1_1) != CURLE_OK ||
            sym_curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
            sym_curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                                 (long) (HTTP_CONNECT_TIMEOUT_USEC / USEC_PER_MSEC)) != CURLE_OK ||
            sym_curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long) (t->timeout_usec / USEC_PER_MSEC)) != CURLE_OK ||
            sym_curl_easy_setopt(c, CURLOPT_USERAGENT, "stackctl/" PACKAGE_VERSION) != CURLE_OK ||
            sym_curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers) != CURLE_OK ||
            sym_curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf) != CURLE_OK ||
            sym_curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body) != CURLE_OK ||
            sym_curl_easy_setopt(c, CURLOPT_WRITEDATA, &rp) != CURLE_OK ||
            sym_curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header) != CURLE_OK ||
            sym_curl_easy_setopt(c, CURLOPT_HEADERDATA, &rp) != CURLE_OK ||
            (t->cacert && sym_curl_easy_setopt(c, CURLOPT_CAINFO, t->cacert) != CURLE_OK))
                return log_error_errno(SYNTHETIC_ERRNO(EIO), "Failed to set up the request: %s", errbuf);

        log_debug("GET %s%s%s", url, t->base_url ? "" : " on ", t->base_url ? "" : t->socket_path);
        cc = sym_curl_easy_perform(c);
        detail = errbuf[0] ? errbuf : sym_curl_easy_strerror(cc);
        (void) sym_curl_easy_getinfo(c, CURLINFO_OS_ERRNO, &os_errno);
        switch (cc) {
        case CURLE_OK:
                break;
        case CURLE_COULDNT_CONNECT:
                return connect_failed(t, os_errno, detail);
        case CURLE_OPERATION_TIMEDOUT: {
                curl_off_t connected = 0;

                /* A unix socket connects at once or fails; over TCP the connect timeout may be what struck. */
                (void) sym_curl_easy_getinfo(c, CURLINFO_CONNECT_TIME_T, &connected);
                if (t->base_url && connected == 0)
                        return log_error_errno(SYNTHETIC_ERRNO(ETIMEDOUT),
                                               "Could not connect to stackwatchd on %s within %llu s.",
                                               http_target_name(t), HTTP_CONNECT_TIMEOUT_USEC / USEC_PER_SEC);
                return log_error_errno(SYNTHETIC_ERRNO(ETIMEDOUT),
                                       "stackwatchd on %s did not answer within %.1f s (--timeout raises the limit).",
                                       http_target_name(t), (double) t->timeout_usec / USEC_PER_SEC);
        }
        case CURLE_WRITE_ERROR:
                if (rp.oom)
                        return log_oom();
                if (rp.too_big)
                        return log_error_errno(SYNTHETIC_ERRNO(EFBIG),
                                               "The reply of stackwatchd is larger than %u MiB.",
                                               HTTP_BODY_MAX / 1024 / 1024);
                return log_error_errno(SYNTHETIC_ERRNO(EIO), "Failed to receive the reply of stackwatchd: %s", detail);
        case CURLE_URL_MALFORMAT:
        case CURLE_UNSUPPORTED_PROTOCOL:
                return log_error_errno(SYNTHETIC_ERRNO(EINVAL), "Invalid daemon URL '%s': %s", url, detail);
        case CURLE_OUT_OF_MEMORY:
                return log_oom();
        default:
                return log_error_errno(SYNTHETIC_ERRNO(EIO), "Failed to get %s from stackwatchd on %s: %s",
                                       path_and_query, http_target_name(t), detail);
        }

        (void) sym_curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
        (void) sym_curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
        if (ct && !(r.content_type = strdup(ct)))
                return log_oom();
        if (!r.body && !(r.body = strdup("")))
                return log_oom();
        log_debug("HTTP %ld, %zu bytes of %s", r.status, r.size, strna(r.content_type));
        *ret = r;
        r = (HttpResponse) {};
        return 0;
}

int http_get(const HttpTarget *t, const char *path_and_query, HttpResponse *ret) {
        _cleanup_free_ char *url = NULL, *auth = NULL;
        CURLcode cc;
        int r;

        if (path_and_query[0] != '/')
                return -EINVAL;
        if (strlen(path_and_query) > API_URL_MAX)
                return log_error_errno(SYNTHETIC_ERRNO(E2BIG),
                                       "The request is longer than %d bytes; use shorter filters.", API_URL_MAX);
        if (asprintf(&url, "%s%s", t->base_url ?: "http://localhost", path_and_query) < 0)
                return log_oom();
        if (t->token && asprintf(&auth, "Authorization: Bearer %s", t->token) < 0)
                return log_oom();
        r = dlopen_curl();
        if (r < 0)
                return r;

        /* Initialised here and not at start-up, so that the local verbs do not pay for it. */
        cc = sym_curl_global_init(CURL_GLOBAL_DEFAULT);
        if (cc != CURLE_OK)
                return log_error_errno(SYNTHETIC_ERRNO(EIO), "Failed to initialise libcurl: %s",
                                       sym_curl_easy_strerror(cc));
        r = perform(t, url, auth, path_and_query, ret);
        sym_curl_global_cleanup();
        return r;
}
