/* fuzz-http.c: the HTTP API's request handling: an input is a request head as a client sends it (the seeds are the
 * heads stackctl and curl sent to a real stackwatchd). The harness plays libmicrohttpd's part the way 0.9.75 does it
 * (request line, headers, path and query split and %-decoded through our unescape callback, the handler called
 * until it answers), and everything from there on is ours: http.c's head and NUL checks, the bearer tokens
 * (a head with an Authorization header comes in on a TCP listener, any other on the unix socket), the route table,
 * every route's parameters, the replies, and a suspended request resumed as the event loop would.
 *
 * What lies beyond the API is faked, deterministically: the daemon's state is a small fixed scan, a capture or a
 * render "finishes" with a result chosen from its pid or id, and the existence of /proc/PID is decided from PID
 * (stat() is wrapped at link time), so nothing here reads /proc, forks or opens a socket. The connection functions of
 * libmicrohttpd are defined here (ours take precedence over the library's); its response objects are real. */
#include <math.h>
#include <sys/syscall.h>

#include "../daemon/http.c"
#include "../daemon/http-routes.h"
#include "config/config.h"
#include "fuzz.h"
#include "base/intmap.h"
#include "base/string-table.h"

/* ---- the connection, as libmicrohttpd keeps it ---- */

#define FUZZ_VALUES_MAX 64U

typedef struct FuzzValue {
        enum MHD_ValueKind kind;
        const char *key, *value;        /* into the connection's copy of the head (or static) */
        size_t key_size, value_size;
} FuzzValue;

struct MHD_Connection {
        FuzzValue values[FUZZ_VALUES_MAX];
        size_t n_values;
        size_t header_size;
        void *socket_context;
        struct sockaddr_in peer;
        /* As libmicrohttpd 0.9.75 has them: one place per kind of information, not one shared by all. */
        union MHD_ConnectionInfo info_context, info_header_size, info_fd, info_address;
        unsigned replies;               /* responses queued */
        unsigned status;
        bool suspended;
};

const char *MHD_lookup_connection_value(struct MHD_Connection *c, enum MHD_ValueKind kind, const char *key) {
        /* Any kind, header or argument, is looked up without regard to case. */
        for (size_t i = 0; i < c->n_values; i++)
                if ((c->values[i].kind & kind) && key && strcasecmp(c->values[i].key, key) == 0)
                        return c->values[i].value;
        return NULL;
}

int MHD_get_connection_values(struct MHD_Connection *c, enum MHD_ValueKind kind, MHD_KeyValueIterator it, void *cls) {
        int n = 0;

        for (size_t i = 0; i < c->n_values; i++)
                if (c->values[i].kind & kind) {
                        n++;
                        if (it && it(cls, c->values[i].kind, c->values[i].key, c->values[i].value) != MHD_YES)
                                break;
                }
        return n;
}

int MHD_get_connection_values_n(struct MHD_Connection *c, enum MHD_ValueKind kind, MHD_KeyValueIteratorN it,
                                void *cls) {
        int n = 0;

        for (size_t i = 0; i < c->n_values; i++)
                if (c->values[i].kind & kind) {
                        const FuzzValue *v = &c->values[i];
                        n++;
                        if (it && it(cls, v->kind, v->key, v->key_size, v->value, v->value_size) != MHD_YES)
                                break;
                }
        return n;
}

static enum MHD_Result fuzz_add_value(struct MHD_Connection *c, enum MHD_ValueKind kind, const char *key,
                                      size_t key_size, const char *value, size_t value_size) {
        if (c->n_values >= FUZZ_VALUES_MAX)
                return MHD_NO;
        c->values[c->n_values++] = (FuzzValue) { kind, key, value, key_size, value_size };
        return MHD_YES;
}

enum MHD_Result MHD_set_connection_value(struct MHD_Connection *c, enum MHD_ValueKind kind, const char *key,
                                         const char *value) {
        return fuzz_add_value(c, kind, key, strlen(key), value, value ? strlen(value) : 0);
}

const union MHD_ConnectionInfo *MHD_get_connection_info(struct MHD_Connection *c, enum MHD_ConnectionInfoType type,
                                                        ...) {
        switch (type) {
        case MHD_CONNECTION_INFO_SOCKET_CONTEXT:
                c->info_context.socket_context = c->socket_context;
                return &c->info_context;
        case MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE:
                c->info_header_size.header_size = c->header_size;
                return &c->info_header_size;
        case MHD_CONNECTION_INFO_CONNECTION_FD:
                c->info_fd.connect_fd = -1; /* getsockopt() on it fails: a unix peer of unknown uid */
                return &c->info_fd;
        case MHD_CONNECTION_INFO_CLIENT_ADDRESS:
                c->info_address.client_addr = (struct sockaddr *) &c->peer;
                return &c->info_address;
        default:
                return NULL;
        }
}

enum MHD_Result MHD_queue_response(struct MHD_Connection *c, unsigned status, struct MHD_Response *r) {
        if (!r || status < 100 || status > 599)
                abort();
        c->replies++;
        c->status = status;
        return MHD_YES;
}

void MHD_suspend_connection(struct MHD_Connection *c) {
        if (c->suspended)
                abort();
        c->suspended = true;
}

void MHD_resume_connection(struct MHD_Connection *c) {
        if (!c->suspended)
                abort(); /* resumed before it was suspended, or twice */
        c->suspended = false;
}

/* ---- the daemon behind the API ---- */

struct CaptureJob {
        int unused;
};

/* A capture or render in flight: it "ends" when the harness runs the event loop, never inside the call. */
static struct {
        CaptureJobDone done;
        void *userdata;
        CaptureJobResult result;
} fuzz_job;

static void fuzz_job_start(int output_fd, int error, CaptureJobDone done, void *userdata) {
        static const char out[] = "{\"schema\":\"stackwatch.snapshot/1\"}\n";

        /* A render's -EBADMSG says why in place of the output. */
        if (error == 0 || error == -EBADMSG)
                (void) write(output_fd, error == 0 ? out : "not a stackwatch snapshot",
                             error == 0 ? sizeof out - 1 : strlen("not a stackwatch snapshot"));
        fuzz_job.done = done;
        fuzz_job.userdata = userdata;
        fuzz_job.result = (CaptureJobResult) { .error = error };
}

int capture_job_start(sd_event *e, const CaptureJobSpec *spec, CaptureJobDone done, void *userdata,
                      CaptureJob **ret) {
        static const int outcomes[] = { 0, -ENOENT, -EBADMSG, -ENOMEM, -ETIME, -ECHILD, -EIO, -EMFILE };
        int error = outcomes[strlen(spec->render_id) % ELEMENTSOF(outcomes)];

        if (error == -EMFILE)
                return error; /* the job did not start */
        *ret = calloc(1, sizeof **ret);
        if (!*ret)
                abort();
        fuzz_job_start(spec->output_fd, error, done, userdata);
        return 0;
}

CaptureJob *capture_job_free(CaptureJob *j) {
        free(j);
        return NULL;
}

void capture_job_symbols(const Config *c, SymbolizerSettings *ret) {
        *ret = (SymbolizerSettings) {};
}

static int fuzz_capture_live(void *userdata, pid_t pid, pid_t tid, unsigned peers, int output_fd,
                             RenderFormat format, SvgPicture picture, CaptureJobDone done, void *done_userdata,
                             uint64_t *ret_retry_usec) {
        static const int outcomes[] = { 0, -ESRCH, -EACCES, -ETIME, -ECHILD, -EIO, -EAGAIN, -EBUSY, -ESHUTDOWN };
        int error = outcomes[(unsigned) (pid + tid) % ELEMENTSOF(outcomes)];

        if (error == -EAGAIN || error == -EBUSY || error == -ESHUTDOWN) {
                *ret_retry_usec = 1500 * USEC_PER_MSEC;
                return error;
        }
        fuzz_job_start(output_fd, error, done, done_userdata);
        return 0;
}

void metrics_count_http(Metrics *m, unsigned code) {
}

int metrics_render(Metrics *mt, const DaemonView *v, char **ret, size_t *ret_len) {
        *ret = strdup("# stackwatch metrics\n");
        if (!*ret)
                return -ENOMEM;
        *ret_len = strlen(*ret);
        return 0;
}

unsigned trigger_budget_used(Trigger *t, uint64_t now) {
        return 0;
}

const RuleStats *trigger_rule_stats(const Trigger *t, const char *rule) {
        return NULL;
}

int scanner_load_identity(Scanner *s, ProcessEntry *p) {
        return 0;
}

const char *scan_source_to_string(ScanSource v) {
        return v == SCAN_SOURCE_BPF ? "bpf" : "proc";
}

int peers_futex_mutex(pid_t pid, const ProcSyscall *sc, PeersMutex *ret) {
        *ret = (PeersMutex) { .what = "mutex", .address = sc->args[0], .owner = pid + 1 };
        return sc->nr == __NR_futex ? 1 : 0;
}

/* GET /stacks/PID asks whether /proc/PID[/task/TID] exists: it does when the last number in the path is odd. */
int __real_stat(const char *path, struct stat *st);
int __wrap_stat(const char *path, struct stat *st);
int __wrap_stat(const char *path, struct stat *st) {
        const char *digits;

        if (!startswith(path, "/proc/"))
                return __real_stat(path, st);
        digits = path + strlen(path);
        while (digits > path && digits[-1] >= '0' && digits[-1] <= '9')
                digits--;
        *st = (struct stat) { .st_mode = S_IFDIR | 0555 };
        if (*digits && (digits[strlen(digits) - 1] - '0') % 2 == 1)
                return 0;
        errno = ENOENT;
        return -1;
}

/* The daemon's state: a default configuration, an archive of two snapshots, and one scan that found a few
 * threads in different classes. */
static Config *fuzz_config;
static Archive *fuzz_archive;
static Scanner fuzz_scanner;
static Metrics fuzz_metrics;
static ProcessEntry fuzz_processes[2] = {
        { .pid = 100, .comm = "nginx", .identity_loaded = true, .unit = (char *) "nginx.service" },
        { .pid = 200, .comm = "postgres", .identity_loaded = true },
};
static ThreadEntry fuzz_threads[] = {
        { .pid = 100, .tid = 100, .process = &fuzz_processes[0], .comm = "nginx", .have_sample = true,
          .sample = { .state = 'D', .have_syscall = true,
                      .syscall = { .kind = PROC_SYSCALL_BLOCKED, .nr = 0, .args = { 3 } } },
          .cls = { .class = THREAD_CLASS_BLOCKED, .cpu_percent = NAN }, .wchan = "io_schedule" },
        { .pid = 100, .tid = 101, .process = &fuzz_processes[0], .comm = "nginx: worker", .have_sample = true,
          .sample = { .state = 'R' }, .cls = { .class = THREAD_CLASS_BUSY_LOOP, .cpu_percent = 99.5 } },
        { .pid = 200, .tid = 200, .process = &fuzz_processes[1], .comm = "postgres", .have_sample = true,
          .sample = { .state = 'S', .have_syscall = true,
                      .syscall = { .kind = PROC_SYSCALL_BLOCKED, .nr = 202, .args = { 0x7f0000001000 } } },
          .cls = { .class = THREAD_CLASS_WAITING, .cpu_percent = 0 } },
        { .pid = 200, .tid = 201, .process = &fuzz_processes[1], .comm = "bgwriter", .have_sample = true,
          .sample = { .state = 'S' }, .cls = { .class = THREAD_CLASS_SYSCALL_SPIN, .syscalls_per_sec = 4812 } },
};

static void fuzz_view(void *userdata, DaemonView *ret) {
        /* A scan that just ended, whatever the clock says: /healthz never sees the daemon stall. */
        fuzz_scanner.stats.last_scan_usec = now_usec(CLOCK_MONOTONIC);
        *ret = (DaemonView) {
                .config = fuzz_config,
                .scanner = &fuzz_scanner,
                .archive = fuzz_archive,
                .start_usec = 1,
                .archive_snapshots = 2,
        };
}

/* The transport as http_new() would set it up, minus the listeners; its handler, the routes, is wired at start. */
static Http fuzz_http = {
        .daemon = { .view = fuzz_view, .metrics = &fuzz_metrics },
        .token = { (char *) "capture-token-0123456789" },
        .read_token = { (char *) "read-token-0123456789" },
};
static HttpRoutes *fuzz_routes;

static void fuzz_cut(int fd) {
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        static const char doc[] = "{\"schema\":\"stackwatch.snapshot/1\"}";
        char dir[PATH_MAX];

        if (config_new_default(&fuzz_config) < 0 || config_add_builtin_rules(fuzz_config) < 0)
                abort();
        if (http_routes_new(&(HttpRoutesDaemon) { .view = fuzz_view, .capture_live = fuzz_capture_live,
                                                  .metrics = &fuzz_metrics, .captures_max = 4 },
                            &fuzz_routes) < 0)
                abort();
        fuzz_http.daemon.handler = http_routes_handler(fuzz_routes);
        snprintf(dir, sizeof dir, "%s/archive", fuzz_scratch());
        if (archive_open(dir, &fuzz_archive) < 0)
                abort();
        for (int i = 0; i < 2; i++) {
                ArchiveSummary s = { .timestamp_usec = 1700000000000000ULL + (uint64_t) i * USEC_PER_SEC,
                                     .pid = 100 * (i + 1), .comm = (char *) "nginx", .rule = (char *) "hung-task",
                                     .klass = (char *) "blocked" };
                if (archive_write(fuzz_archive, doc, strlen(doc), &s, NULL, NULL, NULL) < 0)
                        abort();
        }
        fuzz_scanner.stats.scans = 1;
        for (size_t i = 0; i < ELEMENTSOF(fuzz_threads); i++)
                if (intmap_put(&fuzz_scanner.threads, fuzz_threads[i].tid, &fuzz_threads[i]) < 0)
                        abort();
        return 0;
}

/* ---- libmicrohttpd's part ---- */

/* The next "\r\n"-terminated line at *P before END, cut at a NUL as libmicrohttpd 0.9.75 cuts it; NULL at the end. */
static char *next_line(char **p, char *end) {
        char *l = *p, *eol;

        if (l >= end)
                return NULL;
        eol = memmem(l, (size_t) (end - l), "\r\n", 2);
        if (!eol)
                eol = end;
        *eol = '\0';
        *p = eol + 2;
        return l;
}

/* "a=b&c": each argument '+'-decoded, then %-decoded by the daemon's unescape callback, as MHD does. */
static bool parse_args(struct MHD_Connection *c, char *args) {
        for (char *a = args, *next; a; a = next) {
                char *eq, *value = NULL;
                size_t key_size, value_size = 0;

                next = strchr(a, '&');
                if (next)
                        *next++ = '\0';
                if (*a == '\0')
                        continue;
                for (char *s = a; *s; s++)
                        if (*s == '+')
                                *s = ' ';
                eq = strchr(a, '=');
                if (eq) {
                        *eq = '\0';
                        value = eq + 1;
                        value_size = on_unescape(NULL, c, value);
                }
                key_size = on_unescape(NULL, c, a);
                if (fuzz_add_value(c, MHD_GET_ARGUMENT_KIND, a, key_size, value, value_size) != MHD_YES)
                        return false;
        }
        return true;
}

/* The head in BUF (SIZE bytes, NUL-terminated): request line and headers into C, the URI as it came. false when
 * libmicrohttpd would have refused it itself or still be waiting for its end. */
static bool parse_head(struct MHD_Connection *c, char *buf, size_t size, char **ret_method, char **ret_uri,
                       char **ret_version) {
        char *end = memmem(buf, size, "\r\n\r\n", 4), *p = buf, *line, *method, *uri, *version;

        if (!end)
                return false;
        c->header_size = (size_t) (end - buf) + 4;
        end += 2;
        line = next_line(&p, end);
        method = line;
        uri = strchr(line, ' ');
        if (!uri)
                return false;
        *uri++ = '\0';
        version = strchr(uri, ' ');
        if (!version || *method == '\0')
                return false;
        *version++ = '\0';
        if (!streq(version, "HTTP/1.1") && !streq(version, "HTTP/1.0"))
                return false;
        while ((line = next_line(&p, end))) {
                char *colon = strchr(line, ':'), *v, *e;

                if (!colon || colon == line)
                        return false;
                *colon = '\0';
                v = colon + 1;
                while (*v == ' ' || *v == '\t')
                        v++;
                e = v + strlen(v);
                while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
                        *--e = '\0';
                if (fuzz_add_value(c, MHD_HEADER_KIND, line, strlen(line), v, (size_t) (e - v)) != MHD_YES)
                        return false;
        }
        *ret_method = method;
        *ret_uri = uri;
        *ret_version = version;
        return true;
}

/* The URI into the path (the URL the handler gets) and the query's arguments, both %-decoded. */
static bool parse_uri(struct MHD_Connection *c, char *uri) {
        char *q;

        (void) on_uri(NULL, uri, c);
        q = strchr(uri, '?');
        if (q) {
                *q++ = '\0';
                if (!parse_args(c, q))
                        return false;
        }
        (void) on_unescape(NULL, c, uri);
        return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *buf = fuzz_strndup(data, size);
        struct MHD_Connection c = { .peer = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) } };
        HttpListener l = { .http = &fuzz_http };
        char *method, *url, *version;
        void *con_cls = NULL;
        size_t upload = 0;
        enum MHD_Result r;

        if (!parse_head(&c, buf, size, &method, &url, &version))
                return 0;
        l.tcp = MHD_lookup_connection_value(&c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION) != NULL;
        http_admit_init(&l.admit, &(HttpAdmitLimits) { .max_connections = 8, .per_peer = 4,
                                                        .head_deadline_usec = HTTP_HEAD_DEADLINE_USEC });
        l.admit.cut_fd = fuzz_cut;
        on_connection(&l, &c, &c.socket_context, MHD_CONNECTION_NOTIFY_STARTED);
        if (!parse_uri(&c, url)) {
                on_connection(&l, &c, &c.socket_context, MHD_CONNECTION_NOTIFY_CLOSED);
                http_admit_done(&l.admit);
                return 0;
        }

        /* The first call sees the head; a request it did not answer gets the second, which routes it. */
        r = on_request(&l, &c, url, method, version, NULL, &upload, &con_cls);
        if (r == MHD_YES && c.replies == 0)
                r = on_request(&l, &c, url, method, version, NULL, &upload, &con_cls);
        /* A request waiting on a capture or a render: the job ends, the connection is resumed and called again. */
        if (r == MHD_YES && c.replies == 0 && c.suspended) {
                if (!fuzz_job.done)
                        abort(); /* suspended with nothing to wait for: it would hang */
                fuzz_job.done(NULL, &fuzz_job.result, fuzz_job.userdata);
                fuzz_job = (typeof(fuzz_job)) {};
                if (c.suspended)
                        abort();
                r = on_request(&l, &c, url, method, version, NULL, &upload, &con_cls);
        }
        /* Every request is answered, once; no job is left running for a request that is gone. */
        if ((r == MHD_YES && c.replies != 1) || fuzz_job.done)
                abort();

        on_completed(&l, &c, &con_cls, MHD_REQUEST_TERMINATED_COMPLETED_OK);
        on_connection(&l, &c, &c.socket_context, MHD_CONNECTION_NOTIFY_CLOSED);
        http_admit_done(&l.admit);
        /* A new scan for the next input: the /processes cache would make its answer depend on this one. */
        fuzz_scanner.stats.scans++;
        return 0;
}
