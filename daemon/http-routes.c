/* http-routes.c: the route table and its handlers: /stacks/<pid> (a live capture through the rules' budget, the
 * connection suspended meanwhile), /processes, /snapshots[/<id>], /rules, /metrics, /healthz. */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/json-util.h"
#include "base/log.h"
#include "base/parse-util.h"
#include "base/time-util.h"
#include "chain/peers.h"
#include "render/snapshot-json.h"
#include "render/snapshot-svg.h"
#include "render/snapshot-text.h"
#include "serve/api.h"
#include "store/archive.h"
#include "store/problems.h"
#include "http-routes.h"

/* The kernel's PID_MAX_LIMIT on 64-bit: no pid or tid is larger. */
#define HTTP_PID_MAX 4194304
#define JSON_FLAGS (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
/* Characters of a client-supplied string quoted back in an error message. */
#define HTTP_QUOTE_MAX 64

/* Stored snapshots rendered at once; more get a 429. Each is a child process of its own (capture-job.c). */
#define HTTP_RENDERS_MAX 2U
/* A render still running after this is killed. */
#define HTTP_RENDER_TIMEOUT_USEC (20ULL * USEC_PER_SEC)

typedef struct HttpPending HttpPending;

/* A reply body kept until the next scan. */
typedef struct HttpCachedBody {
        char *body;
        size_t len;
        uint64_t scan;                  /* ScanStats.scans when it was built */
        uint64_t python_frames_changed; /* and Scanner.python_frames_changed: a capture that ended since changes it */
} HttpCachedBody;

/* A request waiting on a child: a live capture (GET /stacks/PID), or the render of a stored snapshot (GET
 * /snapshots/ID): never parsed or rendered on the event loop, where a hostile or huge file would stall the scan
 * and the watchdog ping. */
struct HttpPending {
        HttpPending *next;
        Http *http;                     /* the transport that resumes it */
        struct MHD_Connection *connection;
        int fd;                         /* the memfd the child renders into */
        pid_t pid;                      /* a live capture's */
        CaptureJob *render;             /* a render's job, until it ended */
        char id[ARCHIVE_ID_MAX + 1];    /* a render's snapshot id (or "latest") */
        RenderFormat format;
        bool done, cancelled;
        int error;
};

struct HttpRoutes {
        HttpRoutesDaemon daemon;
        HttpPending *pending;           /* suspended requests, a list */
        /* /processes without filters, default and ?all=1, serialized once per scan: at 5k threads a body is
         * ~1 MB and ~40 ms of json-c, which many clients must not multiply. */
        HttpCachedBody processes_cache[2];
};

/* The daemon's state now, from HttpRoutesDaemon.view. */
static DaemonView routes_view(HttpRoutes *rt) {
        DaemonView v;

        rt->daemon.view(rt->daemon.userdata, &v);
        return v;
}

/* ---- parameters ---- */

static const char *query(struct MHD_Connection *c, const char *key) {
        return MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, key);
}

/* A pid or tid (lib/parse-util.c: 1..2^22 in decimal); -EINVAL or -ERANGE otherwise. */
static int http_parse_pid(const char *s, pid_t *ret) {
        int v, r = parse_pid(s, &v);

        if (r < 0)
                return r;
        *ret = (pid_t) v;
        return 0;
}

static bool parse_flag(const char *s) {
        bool b;
        return s && (streq(s, "1") || (config_parse_bool(s, &b) >= 0 && b));
}

/* A client string, cut short for an error message (json-c escapes it). */
static const char *clip(const char *s, char *buf, size_t size) {
        snprintf(buf, size, "%.*s%s", HTTP_QUOTE_MAX, s, strlen(s) > HTTP_QUOTE_MAX ? "…" : "");
        return buf;
}

typedef struct ParamCheck {
        const char *const *allowed;
        const char *bad;
} ParamCheck;

static enum MHD_Result check_param(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
        ParamCheck *pc = cls;

        for (size_t i = 0; pc->allowed && pc->allowed[i]; i++)
                if (streq(pc->allowed[i], key))
                        return MHD_YES;
        pc->bad = key;
        return MHD_NO;
}

/* ---- /stacks/<pid> ---- */

static bool proc_exists(pid_t pid, pid_t tid) {
        char path[64];
        struct stat st;

        if (tid > 0)
                snprintf(path, sizeof path, "/proc/%d/task/%d", (int) pid, (int) tid);
        else
                snprintf(path, sizeof path, "/proc/%d", (int) pid);
        return stat(path, &st) == 0;
}

static void pending_free(HttpRoutes *rt, HttpPending *p) {
        for (HttpPending **pp = &rt->pending; *pp; pp = &(*pp)->next)
                if (*pp == p) {
                        *pp = p->next;
                        break;
                }
        capture_job_free(p->render);
        safe_close(p->fd);
        free(p);
}

static void on_live_done(CaptureJob *job, const CaptureJobResult *res, void *userdata) {
        HttpPending *p = userdata;

        p->done = true;
        p->error = res->error;
        p->render = capture_job_free(p->render); /* done with it; freeing from here is allowed */
        MHD_resume_connection(p->connection);
        http_kick(p->http);
}

/* A suspended request with a memfd for its child's output. */
static HttpPending *pending_new(Http *h, struct MHD_Connection *c, RenderFormat format, int *ret_error) {
        HttpPending *p = calloc(1, sizeof *p);

        if (!p) {
                *ret_error = -ENOMEM;
                return NULL;
        }
        *p = (HttpPending) { .http = h, .connection = c, .format = format };
        p->fd = memfd_create("stackwatch-reply", MFD_CLOEXEC);
        if (p->fd < 0) {
                *ret_error = negative_errno();
                free(p);
                return NULL;
        }
        return p;
}

static enum MHD_Result pending_suspend(HttpRoutes *rt, struct MHD_Connection *c, HttpPending *p,
                                       void **con_cls) {
        p->next = rt->pending;
        rt->pending = p;
        *con_cls = p;
        MHD_suspend_connection(c);
        return MHD_YES;
}

static void routes_cancel_all(void *userdata) {
        HttpRoutes *rt = userdata;

        for (HttpPending *p = rt->pending; p; p = p->next)
                if (!p->done) {
                        p->cancelled = p->done = true;
                        MHD_resume_connection(p->connection);
                }
}

static const char *format_content_type(RenderFormat f) {
        return f == RENDER_SVG ? API_CONTENT_SVG
             : f == RENDER_JSON ? API_CONTENT_JSON
             : f == RENDER_PPROF ? API_CONTENT_PPROF
                                 : API_CONTENT_TEXT;
}

/* ?format=V and ?picture=V of C: the picture narrows format=svg to one, so a page can fetch each alone; with another
 * format it would be ignored, so it is refused. 0, or an error reply queued. */
static int render_query(Http *h, struct MHD_Connection *c, RenderFormat *format, SvgPicture *picture,
                        enum MHD_Result *ret_reply) {
        char q[HTTP_QUOTE_MAX + 8];
        const char *v;

        *format = RENDER_JSON;
        *picture = SVG_PICTURE_ALL;
        if ((v = query(c, API_Q_FORMAT)) && (int) (*format = render_format_from_string(v)) < 0) {
                *ret_reply = http_reply_error(h, c, MHD_HTTP_BAD_REQUEST,
                                              "unknown format \"%s\" (expected json, text, folded, svg or pprof)",
                                              clip(v, q, sizeof q));
                return -EINVAL;
        }
        if ((v = query(c, API_Q_PICTURE)) && ((int) (*picture = svg_picture_from_string(v)) < 0 ||
                                               *format != RENDER_SVG)) {
                *ret_reply = http_reply_error(h, c, MHD_HTTP_BAD_REQUEST,
                                              "picture is flame, chain or all, with format=svg; not \"%s\"",
                                              clip(v, q, sizeof q));
                return -EINVAL;
        }
        return 0;
}

typedef struct MappedReply {
        void *addr;
        size_t size;
} MappedReply;

static void mapped_reply_free(void *cls) {
        MappedReply *m = cls;

        (void) munmap(m->addr, m->size);
        free(m);
}

/* The child's output, from the memfd, mapped: MHD sends a buffer with writes as large as the socket takes. (From
 * an fd, libmicrohttpd 0.9.75 in epoll mode sends 4 KiB per wakeup and then waits for its timer: a 17 MB reply
 * took 53 s.) */
static enum MHD_Result reply_from_fd(HttpRoutes *rt, Http *h, struct MHD_Connection *c, HttpPending *p) {
        struct MHD_Response *resp;
        enum MHD_Result r;
        MappedReply *m;
        off_t size;

        size = lseek(p->fd, 0, SEEK_END);
        if (size < 0)
                return http_reply_error(h, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "reply lost: %s", strerror(errno));
        if (size == 0)
                return http_reply(h, c, MHD_HTTP_OK, format_content_type(p->format), "", 0);
        m = calloc(1, sizeof *m);
        if (!m)
                return http_reply_error(h, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
        m->size = (size_t) size;
        m->addr = mmap(NULL, m->size, PROT_READ, MAP_SHARED, p->fd, 0);
        if (m->addr == MAP_FAILED) {
                free(m);
                return http_reply_error(h, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "reply lost: %s", strerror(errno));
        }
        resp = MHD_create_response_from_buffer_with_free_callback_cls(m->size, m->addr, mapped_reply_free, m);
        if (!resp) {
                mapped_reply_free(m);
                return MHD_NO;
        }
        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, format_content_type(p->format));
        (void) MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        r = MHD_queue_response(c, MHD_HTTP_OK, resp);
        MHD_destroy_response(resp);
        metrics_count_http(rt->daemon.metrics, MHD_HTTP_OK);
        return r;
}

static enum MHD_Result render_resumed(HttpRoutes *rt, Http *h, struct MHD_Connection *c, HttpPending *p) {
        char why[256] = "";
        ssize_t n;

        switch (p->error) {
        case 0:
                return reply_from_fd(rt, h, c, p);
        case -ENOENT:
                return http_reply_error(h, c, MHD_HTTP_NOT_FOUND, "no snapshot %s", p->id);
        case -EBADMSG:
                /* The child wrote why in place of the output. */
                n = pread(p->fd, why, sizeof why - 1, 0);
                why[MAX(n, 0)] = 0;
                return http_reply_error(h, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "stored snapshot %s unreadable: %s",
                                        p->id, why[0] ? why : "corrupt file");
        case -ENOMEM:
                return http_reply_error(h, c, MHD_HTTP_INTERNAL_SERVER_ERROR,
                                        "rendering stored snapshot %s needs more memory than its budget (%llu "
                                        "MiB and %llu bytes per byte of JSON, at most %llu MiB)",
                                        p->id, CAPTURE_JOB_RENDER_MEMORY_BASE >> 20,
                                        CAPTURE_JOB_RENDER_MEMORY_PER_BYTE, CAPTURE_JOB_RENDER_MEMORY_MAX >> 20);
        case -ETIME:
                return http_reply_error(h, c, MHD_HTTP_INTERNAL_SERVER_ERROR,
                                        "rendering stored snapshot %s took longer than its %llu s", p->id,
                                        HTTP_RENDER_TIMEOUT_USEC / USEC_PER_SEC);
        case -ECHILD:
                return http_reply_error(h, c, MHD_HTTP_INTERNAL_SERVER_ERROR,
                                        "rendering stored snapshot %s crashed", p->id);
        default:
                return http_reply_error(h, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "failed to read snapshot %s: %s", p->id,
                                        strerror(-p->error));
        }
}

static enum MHD_Result routes_resumed(void *userdata, Http *h, struct MHD_Connection *c, void *request) {
        HttpRoutes *rt = userdata;
        HttpPending *p = request;

        if (p->cancelled || !p->done)
                return http_reply_error(h, c, MHD_HTTP_SERVICE_UNAVAILABLE, "stackwatchd is stopping");
        if (p->id[0])
                return render_resumed(rt, h, c, p);
        switch (p->error) {
        case 0:
                return reply_from_fd(rt, h, c, p);
        case -ESRCH:
                return http_reply_error(h, c, MHD_HTTP_NOT_FOUND, "process %d exited before it was captured",
                                        (int) p->pid);
        case -EACCES:
        case -EPERM:
                return http_reply_error(h, c, MHD_HTTP_FORBIDDEN, "stackwatchd may not read process %d: %s",
                                        (int) p->pid, strerror(-p->error));
        case -ETIME:
                return http_reply_error(h, c, MHD_HTTP_GATEWAY_TIMEOUT, "the capture of process %d timed out",
                                        (int) p->pid);
        case -ECHILD:
                return http_reply_error(h, c, MHD_HTTP_INTERNAL_SERVER_ERROR,
                                        "the capture of process %d crashed", (int) p->pid);
        default:
                return http_reply_error(h, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "the capture of process %d failed: %s",
                                        (int) p->pid, strerror(-p->error));
        }
}

static enum MHD_Result route_stacks(HttpRoutes *rt, Http *h, struct MHD_Connection *c, const char *arg,
                                    void **con_cls) {
        const char *v;
        char q[HTTP_QUOTE_MAX + 8];
        pid_t pid, tid = 0;
        enum MHD_Result reply;
        RenderFormat format;
        SvgPicture picture;
        unsigned peers = 0;
        uint64_t retry = 0;
        HttpPending *p;
        int r;

        if (http_parse_pid(arg, &pid) < 0)
                return http_reply_error(h, c, MHD_HTTP_BAD_REQUEST, "malformed pid \"%s\" (expected 1..%d)",
                                        clip(arg, q, sizeof q), HTTP_PID_MAX);
        if ((v = query(c, API_Q_TID)) && http_parse_pid(v, &tid) < 0)
                return http_reply_error(h, c, MHD_HTTP_BAD_REQUEST, "malformed tid \"%s\"", clip(v, q, sizeof q));
        if (render_query(h, c, &format, &picture, &reply) < 0)
                return reply;
        if ((v = query(c, API_Q_PEERS)) && (safe_atou(v, &peers) < 0 || peers > CONFIG_PEERS_MAX))
                return http_reply_error(h, c, MHD_HTTP_BAD_REQUEST, "malformed peers \"%s\" (expected 0..%d)",
                                        clip(v, q, sizeof q), CONFIG_PEERS_MAX);
        if (!proc_exists(pid, 0))
                return http_reply_error(h, c, MHD_HTTP_NOT_FOUND, "no process %d", (int) pid);
        if (tid > 0 && !proc_exists(pid, tid))
                return http_reply_error(h, c, MHD_HTTP_NOT_FOUND, "process %d has no thread %d", (int) pid, (int) tid);

        p = pending_new(h, c, format, &r);
        if (!p)
                return http_reply_error(h, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "no reply buffer: %s", strerror(-r));
        p->pid = pid;
        r = rt->daemon.capture_live(rt->daemon.userdata, pid, tid, peers, p->fd, format, picture, on_live_done, p,
                                    &retry);
        if (r < 0) {
                safe_close(p->fd);
                free(p);
                if (r == -EAGAIN)
                        return http_reply_retry(h, c, retry, "the API's capture budget is spent (%u per minute, "
                                                "http.max_captures_per_minute)",
                                                routes_view(rt).config->http_max_captures_per_minute);
                if (r == -EBUSY)
                        return http_reply_retry(h, c, retry, "too many captures in flight (%u)", rt->daemon.captures_max);
                if (r == -ESHUTDOWN)
                        return http_reply_error(h, c, MHD_HTTP_SERVICE_UNAVAILABLE, "stackwatchd is stopping");
                return http_reply_error(h, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "failed to start the capture: %s",
                                        strerror(-r));
        }
        return pending_suspend(rt, c, p, con_cls);
}

/* ---- /processes ---- */

static bool class_unhealthy(ThreadClass c) {
        return c == THREAD_CLASS_BLOCKED || c == THREAD_CLASS_BUSY_LOOP || c == THREAD_CLASS_SYSCALL_SPIN ||
               c == THREAD_CLASS_STOPPED || c == THREAD_CLASS_ZOMBIE || c == THREAD_CLASS_LOCK_RETRY;
}

static int compare_threads(const void *a, const void *b) {
        const ThreadEntry *x = *(ThreadEntry *const *) a, *y = *(ThreadEntry *const *) b;

        if (x->pid != y->pid)
                return x->pid < y->pid ? -1 : 1;
        return x->tid < y->tid ? -1 : x->tid > y->tid;
}

static void add_double(json_object *o, const char *key, double d) {
        if (d == d) /* not NaN: NaN means "not measured yet" and is left out */
                json_object_object_add(o, key, json_object_new_double(d));
}

static json_object *scan_json(const DaemonView *m, bool by_class) {
        const ScanStats *st = &m->scanner->stats;
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        json_object_object_add(o, API_K_SCANS, json_object_new_uint64(st->scans));
        json_object_object_add(o, API_K_LAST_SCAN_AGE_MS,
                               json_object_new_uint64(st->scans ? (now_usec(CLOCK_MONOTONIC) - st->last_scan_usec) /
                                                                          USEC_PER_MSEC
                                                                : 0));
        json_object_object_add(o, API_K_LAST_SCAN_DURATION_US, json_object_new_uint64(st->last_duration_usec));
        json_object_object_add(o, API_K_POLL_INTERVAL_MS, json_object_new_uint64(m->poll_interval_usec / USEC_PER_MSEC));
        json_object_object_add(o, API_K_LAST_SCAN_CPU_US, json_object_new_uint64(st->last_cpu_usec));
        json_object_object_add(o, API_K_LAST_POLL_CPU_US, json_object_new_uint64(m->last_poll_cpu_usec));
        json_object_object_add(o, API_K_SOURCE, json_object_new_string(scan_source_to_string(m->scanner->source)));
        json_object_object_add(o, API_K_SOURCE_WHY,
                               m->scanner->source_why ? json_object_new_string(m->scanner->source_why) : NULL);
        json_object_object_add(o, API_K_THREADS, json_object_new_int64(st->threads));
        json_object_object_add(o, API_K_PROCESSES, json_object_new_int64(st->processes));
        if (by_class) {
                json_object *bc = json_object_new_object();
                for (ThreadClass c = 0; bc && c < _THREAD_CLASS_MAX; c++)
                        json_object_object_add(bc, thread_class_to_string(c), json_object_new_int64(st->by_class[c]));
                json_object_object_add(o, API_K_BY_CLASS, bc);
        }
        return o;
}

/* A thread in futex() on a mutex: the lock and the TID holding it (null when the lock names none), read from the
 * target now, without stopping it. */
static void add_lock(json_object *o, const ThreadEntry *t) {
        char object[64];
        json_object *l;
        PeersMutex m;

        if (peers_futex_mutex(t->pid, &t->sample.syscall, &m) != 1)
                return;
        l = json_object_new_object();
        if (!l)
                return;
        snprintf(object, sizeof object, "%s 0x%" PRIx64, m.what, m.address);
        json_object_object_add(l, API_K_OBJECT, json_object_new_string(object));
        json_object_object_add(l, API_K_OWNER, m.owner > 0 ? json_object_new_int(m.owner) : NULL);
        json_object_object_add(o, API_K_LOCK, l);
}

static json_object *thread_json(const ThreadEntry *t, uint64_t now) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        json_object_object_add(o, API_K_PID, json_object_new_int(t->pid));
        json_object_object_add(o, API_K_TID, json_object_new_int(t->tid));
        json_object_object_add(o, API_K_COMM, json_object_new_string(t->tid == t->pid ? t->process->comm : t->comm));
        json_object_object_add(o, API_K_PROCESS_COMM, json_object_new_string(t->process->comm));
        json_object_object_add(o, API_K_STATE, json_object_new_string_len(&t->sample.state, t->sample.state ? 1 : 0));
        json_object_object_add(o, API_K_CLASS, json_object_new_string(thread_class_to_string(t->cls.class)));
        json_object_object_add(o, API_K_FOR_MS, json_object_new_uint64((now - MIN(t->cls.since_usec, now)) /
                                                                        USEC_PER_MSEC));
        add_double(o, API_K_CPU_PERCENT, t->cls.cpu_percent);
        add_double(o, API_K_SYSCALLS_PER_SEC, t->cls.syscalls_per_sec);
        add_double(o, API_K_BYTES_PER_SEC, t->cls.bytes_per_sec);
        if (t->sample.have_syscall && t->sample.syscall.kind == PROC_SYSCALL_BLOCKED &&
            syscall_name(t->sample.syscall.nr))
                json_object_object_add(o, API_K_SYSCALL, json_object_new_string(syscall_name(t->sample.syscall.nr)));
        if (t->wchan[0])
                json_object_object_add(o, API_K_WCHAN, json_object_new_string(t->wchan));
        if (t->cls.class == THREAD_CLASS_BLOCKED && t->cls.owed_why)
                json_object_object_add(o, API_K_BLOCKED_BECAUSE, json_object_new_string(t->cls.owed_why));
        if (t->sample.have_syscall)
                add_lock(o, t);
        if (t->process->unit)
                json_object_object_add(o, API_K_UNIT, json_object_new_string(t->process->unit));
        if (t->process->frozen.version > 0) {
                const CgroupFrozen *z = &t->process->frozen;
                json_object *fr = json_object_new_object();

                if (fr) {
                        json_object_object_add(fr, API_K_CGROUP, json_object_new_string(z->cgroup));
                        json_object_object_add(fr, API_K_VERSION, json_object_new_int((int) z->version));
                        json_object_object_add(o, API_K_FROZEN_BY, fr);
                }
        }
        /* Kept from the last snapshot: a scan never reads a target's memory. */
        if (t->python_frame)
                json_object_object_add(o, API_K_PYTHON_FRAME, json_object_new_string(t->python_frame));
        return o;
}

static enum MHD_Result route_processes(HttpRoutes *rt, Http *h, struct MHD_Connection *c, const char *arg,
                                       void **con_cls) {
        DaemonView view = routes_view(rt), *m = &view;
        Scanner *s = m->scanner;
        const char *v, *unit = query(c, API_Q_UNIT), *comm = query(c, API_Q_COMM);
        bool all = parse_flag(query(c, API_Q_ALL));
        unsigned classes = 0;
        _cleanup_free_ ThreadEntry **list = NULL;
        size_t n = 0;
        uint64_t now = now_usec(CLOCK_MONOTONIC);
        char q[HTTP_QUOTE_MAX + 8];
        HttpCachedBody *cached = NULL;
        _cleanup_free_ char *body = NULL;
        size_t len = 0;
        enum MHD_Result r;
        json_object *o;
        bool ok;
        FILE *f;

        if ((v = query(c, API_Q_CLASS))) {
                _cleanup_free_ char *copy = strdup(v);
                char *save = NULL;

                if (!copy)
                        return http_reply_error(h, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
                for (char *w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
                        ThreadClass k = thread_class_from_string(w);
                        if (k < 0)
                                return http_reply_error(h, c, MHD_HTTP_BAD_REQUEST,
                                                        "unknown class \"%s\" (expected running, waiting, blocked, "
                                                        "busy-loop, syscall-spin, stopped, zombie, frozen or "
                                                        "lock-retry)",
                                                        clip(w, q, sizeof q));
                        classes |= 1U << k;
                }
                if (classes == 0)
                        return http_reply_error(h, c, MHD_HTTP_BAD_REQUEST, "empty class filter");
        }
        if (!classes && !unit && !comm) {
                cached = &rt->processes_cache[all];
                if (cached->body && cached->scan == s->stats.scans &&
                    cached->python_frames_changed == s->python_frames_changed)
                        return http_reply(h, c, MHD_HTTP_OK, API_CONTENT_JSON, cached->body, cached->len);
        }
        list = malloc(MAX(s->threads.size, (size_t) 1) * sizeof *list);
        if (!list)
                return http_reply_error(h, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
        for (size_t i = 0; i < s->threads.size; i++) {
                ThreadEntry *t;

                if (s->threads.keys[i] <= 0)
                        continue;
                t = s->threads.values[i];
                if (!t->have_sample || t->cls.class < 0)
                        continue;
                if (classes ? !(classes & (1U << t->cls.class)) : !all && !class_unhealthy(t->cls.class))
                        continue;
                if (comm && fnmatch(comm, t->process->comm, 0) != 0 && fnmatch(comm, t->comm, 0) != 0)
                        continue;
                if (unit) {
                        (void) scanner_load_identity(s, t->process);
                        if (!t->process->unit || fnmatch(unit, t->process->unit, 0) != 0)
                                continue;
                }
                list[n++] = t;
        }
        qsort(list, n, sizeof *list, compare_threads);

        /* One thread object at a time, serialized by json-c and freed: the peak is the body, not a tree of
         * thousands of objects (~2 KiB each). The keys around them are constants. */
        f = open_memstream(&body, &len);
        if (!f)
                return http_reply_error(h, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
        o = scan_json(m, false);
        ok = o && fprintf(f, "{\"%s\":", API_K_SCAN) > 0 && json_fputs(o, JSON_FLAGS, f) >= 0 &&
             fprintf(f, ",\"%s\":[", API_K_THREADS) > 0;
        json_object_put(o);
        for (size_t i = 0; ok && i < n; i++) {
                o = thread_json(list[i], now);
                ok = o && (i == 0 || fputc(',', f) != EOF) && json_fputs(o, JSON_FLAGS, f) >= 0;
                json_object_put(o);
        }
        ok = ok && fputs("]}", f) >= 0;
        if (fclose(f) != 0 || !ok)
                return http_reply_error(h, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
        r = http_reply(h, c, MHD_HTTP_OK, API_CONTENT_JSON, body, len);
        if (cached) {
                free(cached->body);
                cached->body = TAKE_PTR(body);
                cached->len = len;
                cached->scan = s->stats.scans;
                cached->python_frames_changed = s->python_frames_changed;
        }
        return r;
}

/* ---- /snapshots ---- */

/* What /snapshots and /problems page and filter by: ?since=USEC (0: all), ?limit=N (the newest N; UINT64_MAX: all)
 * and ?signature=KEY (NULL: any), into the RET_*; a 400 reply into *REPLY when one is malformed. */
static int paging_query(Http *h, struct MHD_Connection *c, uint64_t *ret_since, uint64_t *ret_limit,
                        const char **ret_signature, enum MHD_Result *reply) {
        char q[HTTP_QUOTE_MAX + 8];
        const char *v;

        *ret_since = 0;
        *ret_limit = UINT64_MAX;
        if ((v = query(c, API_Q_SINCE)) && safe_atou64(v, ret_since) < 0) {
                *reply = http_reply_error(h, c, MHD_HTTP_BAD_REQUEST,
                                          "malformed since \"%s\" (expected microseconds since the epoch)",
                                          clip(v, q, sizeof q));
                return -EINVAL;
        }
        if ((v = query(c, API_Q_LIMIT)) && (safe_atou64(v, ret_limit) < 0 || *ret_limit == 0)) {
                *reply = http_reply_error(h, c, MHD_HTTP_BAD_REQUEST,
                                          "malformed limit \"%s\" (expected 1 or more)", clip(v, q, sizeof q));
                return -EINVAL;
        }
        v = *ret_signature = query(c, API_Q_SIGNATURE);
        if (v && !archive_signature_is_valid(v)) {
                *reply = http_reply_error(h, c, MHD_HTTP_BAD_REQUEST,
                                          "malformed signature \"%s\" (expected %u lowercase hex digits)",
                                          clip(v, q, sizeof q), ARCHIVE_SIGNATURE_LENGTH);
                return -EINVAL;
        }
        return 0;
}

static enum MHD_Result route_snapshots(HttpRoutes *rt, Http *h, struct MHD_Connection *c, const char *arg,
                                       void **con_cls) {
        const char *v, *rule = query(c, API_Q_RULE), *sig;
        enum MHD_Result reply;
        ArchiveSummary *list = NULL;
        size_t n = 0, skipped = 0, first = 0, kept = 0;
        pid_t pid = 0;
        uint64_t since = 0, limit = UINT64_MAX;
        char q[HTTP_QUOTE_MAX + 8];
        json_object *o, *arr;
        int r;

        if ((v = query(c, API_Q_PID)) && http_parse_pid(v, &pid) < 0)
                return http_reply_error(h, c, MHD_HTTP_BAD_REQUEST, "malformed pid \"%s\"", clip(v, q, sizeof q));
        if (paging_query(h, c, &since, &limit, &sig, &reply) < 0)
                return reply;
        r = archive_list(routes_view(rt).archive, &list, &n, &skipped);
        if (r < 0)
                return http_reply_error(h, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "failed to list the archive: %s",
                                        strerror(-r));
        /* Filter in place (oldest first), then keep the newest LIMIT. */
        for (size_t i = 0; i < n; i++) {
                ArchiveSummary *s = &list[i];
                if ((pid && s->pid != pid) || (rule && !streq(s->rule, rule)) || s->timestamp_usec < since ||
                    (sig && !streq_ptr(s->signature, sig))) {
                        archive_summary_done(s);
                        continue;
                }
                if (i != kept) {
                        list[kept] = *s;
                        *s = (ArchiveSummary) {};
                }
                kept++;
        }
        if (kept > limit)
                first = kept - (size_t) limit;
        o = json_object_new_object();
        arr = json_object_new_array();
        for (size_t i = first; o && arr && i < kept; i++)
                json_object_array_add(arr, archive_summary_to_json(&list[i]));
        archive_summaries_free(list, n);
        if (!o || !arr) {
                json_object_put(o);
                json_object_put(arr);
                return http_reply_error(h, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
        }
        json_object_object_add(o, API_K_SNAPSHOTS, arr);
        json_object_object_add(o, API_K_SKIPPED, json_object_new_uint64(skipped));
        return http_reply_json(h, c, MHD_HTTP_OK, o);
}

/* ---- /problems ---- */

static bool view_firing_pid(const DaemonView *v, pid_t pid) {
        for (size_t i = 0; i < v->n_firing_pids; i++)
                if (v->firing_pids[i] == pid)
                        return true;
        return false;
}

/* The archive's problems: its ledger's firings and its snapshots, those open now marked; oldest first by last seen,
 * the newest LIMIT, as /snapshots pages. */
static enum MHD_Result route_problems(HttpRoutes *rt, Http *h, struct MHD_Connection *c, const char *arg,
                                      void **con_cls) {
        _cleanup_(problem_table_done) ProblemTable t = {};
        _cleanup_free_ bool *in_flight = NULL;
        DaemonView view = routes_view(rt);
        ArchiveSummary *list = NULL;
        size_t n = 0, skipped = 0, ledger_skipped = 0, first = 0;
        uint64_t since, limit;
        const char *sig;
        enum MHD_Result reply;
        json_object *o, *arr;
        int r;

        if (paging_query(h, c, &since, &limit, &sig, &reply) < 0)
                return reply;
        /* The daemon's own count (a copy: the snapshots are added to it); else, as a harness has it, the file. */
        r = 0;
        for (size_t i = 0; view.problems && i < view.problems->n && r >= 0; i++)
                r = problem_table_merge(&t, &view.problems->items[i]);
        if (!view.problems)
                r = problems_ledger_load(archive_dir_fd(view.archive), &t, &ledger_skipped);
        if (r >= 0)
                r = archive_list(view.archive, &list, &n, &skipped);
        if (r >= 0 && n > 0 && !(in_flight = calloc(n, sizeof *in_flight)))
                r = -ENOMEM;
        /* A snapshot whose firing is not counted yet: the capture that wrote it has not ended (its result is
         * counted as it ends), so the firing is in flight, and its problem open. */
        for (size_t i = 0; r >= 0 && i < n; i++)
                in_flight[i] = list[i].signature && !problem_table_find(&t, list[i].signature) &&
                               view_firing_pid(&view, list[i].pid);
        if (r >= 0)
                r = problem_table_add_snapshots(&t, list, n);
        for (size_t i = 0; r >= 0 && i < n; i++) {
                Problem *p = in_flight[i] ? problem_table_find(&t, list[i].signature) : NULL;
                if (p)
                        p->open = true;
        }
        archive_summaries_free(list, n);
        if (r < 0)
                return http_reply_error(h, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "failed to read the problems: %s",
                                        strerror(-r));
        for (size_t i = 0; view.alerts && i < view.alerts->n_active; i++) {
                Problem *p = view.alerts->active[i]->signature ? problem_table_find(&t, view.alerts->active[i]->signature)
                                                                : NULL;
                if (p)
                        p->open = true;
        }
        problem_table_sort(&t);
        /* Filter in place (oldest first), then keep the newest LIMIT. */
        size_t kept = 0;
        for (size_t i = 0; i < t.n; i++) {
                if (t.items[i].last_usec < since || (sig && !streq(t.items[i].signature, sig))) {
                        problem_done(&t.items[i]);
                        continue;
                }
                if (i != kept) {
                        t.items[kept] = t.items[i];
                        t.items[i] = (Problem) {};
                }
                kept++;
        }
        t.n = kept;
        if (kept > limit)
                first = kept - (size_t) limit;
        o = json_object_new_object();
        arr = json_object_new_array();
        for (size_t i = first; o && arr && i < kept; i++)
                json_object_array_add(arr, problem_to_json(&t.items[i]));
        if (!o || !arr) {
                json_object_put(o);
                json_object_put(arr);
                return http_reply_error(h, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
        }
        json_object_object_add(o, API_K_PROBLEMS, arr);
        json_object_object_add(o, API_K_SKIPPED, json_object_new_uint64(skipped + ledger_skipped));
        return http_reply_json(h, c, MHD_HTTP_OK, o);
}

static unsigned renders_running(const HttpRoutes *rt) {
        unsigned n = 0;

        for (const HttpPending *p = rt->pending; p; p = p->next)
                n += p->render != NULL;
        return n;
}

static enum MHD_Result route_snapshot(HttpRoutes *rt, Http *h, struct MHD_Connection *c, const char *arg,
                                      void **con_cls) {
        enum MHD_Result reply;
        RenderFormat format;
        SvgPicture picture;
        char q[HTTP_QUOTE_MAX + 8];
        const char *v;
        HttpPending *p;
        bool resymbolize;
        int r;

        /* Checked before anything touches the file system: an id is never a path. */
        if (!streq(arg, "latest") && !archive_id_is_valid(arg))
                return http_reply_error(h, c, MHD_HTTP_BAD_REQUEST,
                                        "malformed snapshot id \"%s\" (expected YYYYMMDDTHHMMSS.uuuuuuZ-PID or latest)",
                                        clip(arg, q, sizeof q));
        if (render_query(h, c, &format, &picture, &reply) < 0)
                return reply;
        if ((v = query(c, API_Q_RESYMBOLIZE)) && !streq(v, "0") && !streq(v, "1"))
                return http_reply_error(h, c, MHD_HTTP_BAD_REQUEST, "resymbolize is 0 or 1, not \"%s\"",
                                        clip(v, q, sizeof q));
        resymbolize = v && streq(v, "1");
        if (renders_running(rt) >= HTTP_RENDERS_MAX)
                return http_reply_retry(h, c, USEC_PER_SEC, "too many stored snapshots being read (%u)",
                                        HTTP_RENDERS_MAX);
        p = pending_new(h, c, format, &r);
        if (!p)
                return http_reply_error(h, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "no reply buffer: %s", strerror(-r));
        strncpy(p->id, arg, sizeof p->id - 1);
        CaptureJobSpec spec = { .archive_dir = routes_view(rt).config->archive_dir,
                                .render_id = p->id,
                                .resymbolize = resymbolize,
                                .output_fd = p->fd,
                                .format = format,
                                .picture = picture,
                                .timeout_usec = HTTP_RENDER_TIMEOUT_USEC };
        capture_job_symbols(routes_view(rt).config, &spec.symbols);
        r = capture_job_start(rt->daemon.event, &spec, on_live_done, p, &p->render);
        if (r < 0) {
                safe_close(p->fd);
                free(p);
                return http_reply_error(h, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "failed to read snapshot %s: %s", arg,
                                        strerror(-r));
        }
        return pending_suspend(rt, c, p, con_cls);
}

/* ---- /rules, /metrics, /healthz ---- */

static json_object *strings_json(unsigned bits, unsigned max, const char *(*name)(int)) {
        json_object *a = json_object_new_array();

        for (unsigned i = 0; a && i < max; i++)
                if (bits & (1U << i))
                        json_object_array_add(a, json_object_new_string(name((int) i)));
        return a;
}

static const char *class_name(int i) {
        return thread_class_to_string((ThreadClass) i);
}

static const char *action_name(int i) {
        return rule_action_type_to_string((RuleActionType) i);
}

static enum MHD_Result route_rules(HttpRoutes *rt, Http *h, struct MHD_Connection *c, const char *arg,
                                   void **con_cls) {
        DaemonView view = routes_view(rt), *m = &view;
        json_object *o = json_object_new_object(), *arr = json_object_new_array(), *b = json_object_new_object();

        if (!o || !arr || !b) {
                json_object_put(o);
                json_object_put(arr);
                json_object_put(b);
                return http_reply_error(h, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
        }
        for (size_t i = 0; i < m->config->n_rules; i++) {
                const Rule *r = &m->config->rules[i];
                const RuleStats *st = trigger_rule_stats(m->trigger, r->name);
                json_object *e = json_object_new_object();

                if (!e)
                        continue;
                json_object_object_add(e, API_K_NAME, json_object_new_string(r->name));
                json_object_object_add(e, API_K_FILE, json_object_new_string(r->file ?: ""));
                json_object_object_add(e, API_K_LINE, json_object_new_int((int) r->line));
                json_object_object_add(e, API_K_CLASSES, strings_json(r->classes, _THREAD_CLASS_MAX, class_name));
                json_object_object_add(e, API_K_FOR_MS, json_object_new_uint64(r->for_usec / USEC_PER_MSEC));
                json_object_object_add(e, API_K_STATES, r->states ? json_object_new_string(r->states) : NULL);
                json_object_object_add(e, API_K_ACTIONS, strings_json(r->actions, _RULE_ACTION_TYPE_MAX, action_name));
                json_object_object_add(e, API_K_COOLDOWN_MS, json_object_new_uint64(r->cooldown_usec / USEC_PER_MSEC));
                json_object_object_add(e, API_K_SEVERITY, json_object_new_string(rule_severity_to_string(r->severity)));
                json_object_object_add(e, API_K_PEERS, json_object_new_int((int) r->peers));
                json_object_object_add(e, API_K_DEADLOCK, json_object_new_boolean(r->deadlock));
                json_object_object_add(e, API_K_LOCK_HOLDER, json_object_new_boolean(r->lock_holder));
                json_object_object_add(e, API_K_FIRED, json_object_new_uint64(st ? st->fired : 0));
                json_object_object_add(e, API_K_LAST_FIRED_USEC, json_object_new_uint64(st ? st->last_fired_usec : 0));
                json_object_array_add(arr, e);
        }
        json_object_object_add(o, API_K_RULES, arr);
        json_object_object_add(b, API_K_MAX_PER_MINUTE, json_object_new_int((int) m->config->max_per_minute));
        json_object_object_add(b, API_K_USED,
                               json_object_new_int((int) trigger_budget_used(m->trigger, now_usec(CLOCK_MONOTONIC))));
        json_object_object_add(o, API_K_BUDGET, b);
        return http_reply_json(h, c, MHD_HTTP_OK, o);
}

static enum MHD_Result route_metrics(HttpRoutes *rt, Http *h, struct MHD_Connection *c, const char *arg,
                                     void **con_cls) {
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;

        DaemonView v = routes_view(rt);

        if (metrics_render(rt->daemon.metrics, &v, &buf, &len) < 0)
                return http_reply_error(h, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
        return http_reply(h, c, MHD_HTTP_OK, API_CONTENT_METRICS, buf, len);
}

/* The configuration in force, and whether the latest reload was refused. */
static json_object *config_json(const DaemonView *m) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        json_object_object_add(o, API_K_RELOAD,
                               json_object_new_string(m->reload_failed ? API_RELOAD_FAILED : API_RELOAD_OK));
        json_object_object_add(o, API_K_ERROR, json_new_string_or_null(m->reload_failed ? m->reload_error : NULL));
        json_object_object_add(o, API_K_LOADED_USEC, json_object_new_uint64(m->reload_success_usec));
        json_object_object_add(o, API_K_RELOAD_FAILURES, json_object_new_uint64(m->reload_failures));
        return o;
}

/* Stalled: no scan for API_STALLED_POLLS intervals (the one in force: auto stretches it up to 10 s on a big machine
 * scanned through /proc) plus a scan's own time, at least a second. */
static bool health_stalled(const DaemonView *m) {
        const ScanStats *st = &m->scanner->stats;
        uint64_t now = now_usec(CLOCK_MONOTONIC), age = st->scans ? now - st->last_scan_usec : now - m->start_usec;
        uint64_t interval = MAX(m->poll_interval_usec, m->config->poll_interval_usec);

        return age > API_STALLED_POLLS * interval + MAX(st->last_duration_usec, USEC_PER_SEC);
}

static enum MHD_Result routes_health_public(void *userdata, Http *h, struct MHD_Connection *c) {
        HttpRoutes *rt = userdata;
        DaemonView view = routes_view(rt);
        bool stalled = health_stalled(&view);
        json_object *o = json_object_new_object();

        if (!o)
                return http_reply_error(h, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
        json_object_object_add(o, API_K_STATUS, json_object_new_string(stalled ? API_STATUS_STALLED : API_STATUS_OK));
        return http_reply_json(h, c, stalled ? MHD_HTTP_SERVICE_UNAVAILABLE : MHD_HTTP_OK, o);
}

static enum MHD_Result route_healthz(HttpRoutes *rt, Http *h, struct MHD_Connection *c, const char *arg,
                                     void **con_cls) {
        DaemonView view = routes_view(rt), *m = &view;
        uint64_t now = now_usec(CLOCK_MONOTONIC);
        bool stalled = health_stalled(m);
        json_object *o = json_object_new_object(), *a = json_object_new_object();

        if (!o || !a) {
                json_object_put(o);
                json_object_put(a);
                return http_reply_error(h, c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
        }
        json_object_object_add(o, API_K_STATUS, json_object_new_string(stalled ? API_STATUS_STALLED : API_STATUS_OK));
        json_object_object_add(o, API_K_VERSION, json_object_new_string(PACKAGE_VERSION));
        json_object_object_add(o, API_K_API, json_object_new_int(API_VERSION));
        json_object_object_add(o, API_K_PID, json_object_new_int((int) getpid()));
        json_object_object_add(o, API_K_UPTIME_SEC, json_object_new_uint64((now - m->start_usec) / USEC_PER_SEC));
        json_object_object_add(o, API_K_SCAN, scan_json(m, true));
        json_object_object_add(o, API_K_SNAPSHOTS_WRITTEN, json_object_new_uint64(m->snapshots_written));
        json_object_object_add(o, API_K_CAPTURE_FAILURES, json_object_new_uint64(m->capture_failures));
        json_object_object_add(o, API_K_CAPTURES_RUNNING, json_object_new_uint64(m->captures_running));
        json_object_object_add(a, API_K_DIRECTORY, json_object_new_string(m->config->archive_dir));
        json_object_object_add(a, API_K_SNAPSHOTS, json_object_new_uint64(m->archive_snapshots));
        json_object_object_add(a, API_K_BYTES, json_object_new_uint64(m->archive_bytes));
        json_object_object_add(o, API_K_ARCHIVE, a);
        json_object_object_add(o, API_K_CONFIG, config_json(m));
        return http_reply_json(h, c, stalled ? MHD_HTTP_SERVICE_UNAVAILABLE : MHD_HTTP_OK, o);
}

/* ---- the table ---- */

typedef enum MHD_Result (*HttpRouteFn)(HttpRoutes *rt, Http *h, struct MHD_Connection *c, const char *arg,
                                       void **con_cls);

static const char *const stacks_params[] = { API_Q_FORMAT, API_Q_PICTURE, API_Q_TID, API_Q_PEERS, NULL };
static const char *const processes_params[] = { API_Q_ALL, API_Q_CLASS, API_Q_UNIT, API_Q_COMM, NULL };
static const char *const snapshots_params[] = { API_Q_PID, API_Q_RULE, API_Q_SINCE, API_Q_LIMIT, API_Q_SIGNATURE,
                                                NULL };
static const char *const problems_params[] = { API_Q_SINCE, API_Q_LIMIT, API_Q_SIGNATURE, NULL };
static const char *const snapshot_params[] = { API_Q_FORMAT, API_Q_PICTURE, API_Q_RESYMBOLIZE, NULL };

static const struct {
        const char *path;
        bool prefix;                    /* the rest of the path is the argument (checked by the route) */
        HttpRouteFn fn;
        const char *const *params;      /* the query parameters it takes */
} routes[] = {
        { API_ROUTE_STACKS, true, route_stacks, stacks_params },
        { API_ROUTE_PROCESSES, false, route_processes, processes_params },
        { API_ROUTE_SNAPSHOTS, false, route_snapshots, snapshots_params },
        { API_ROUTE_SNAPSHOTS "/", true, route_snapshot, snapshot_params },
        { API_ROUTE_PROBLEMS, false, route_problems, problems_params },
        { API_ROUTE_RULES, false, route_rules, NULL },
        { API_ROUTE_METRICS, false, route_metrics, NULL },
        { API_ROUTE_HEALTHZ, false, route_healthz, NULL },
};

static enum MHD_Result routes_dispatch(void *userdata, Http *h, struct MHD_Connection *c, const char *url,
                                       const char *method, void **con_cls) {
        HttpRoutes *rt = userdata;
        char q[HTTP_QUOTE_MAX + 8];

        for (size_t i = 0; i < ELEMENTSOF(routes); i++) {
                size_t n = strlen(routes[i].path);
                ParamCheck pc = { .allowed = routes[i].params };

                if (routes[i].prefix ? !startswith(url, routes[i].path) : !streq(url, routes[i].path))
                        continue;
                if (!streq(method, MHD_HTTP_METHOD_GET) && !streq(method, MHD_HTTP_METHOD_HEAD))
                        return http_reply_error(h, c, MHD_HTTP_METHOD_NOT_ALLOWED,
                                                "method %s not allowed (GET or HEAD)", clip(method, q, sizeof q));
                (void) MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, check_param, &pc);
                if (pc.bad)
                        return http_reply_error(h, c, MHD_HTTP_BAD_REQUEST, "unknown query parameter \"%s\" for %s",
                                                clip(pc.bad, q, sizeof q), routes[i].path);
                return routes[i].fn(rt, h, c, routes[i].prefix ? url + n : NULL, con_cls);
        }
        return http_reply_error(h, c, MHD_HTTP_NOT_FOUND, "no such route \"%s\" (try /processes, /stacks/PID, "
                                "/snapshots, /problems, /rules, /metrics or /healthz)", clip(url, q, sizeof q));
}

static void routes_request_done(void *userdata, void *request) {
        pending_free(userdata, request);
}

HttpHandler http_routes_handler(HttpRoutes *rt) {
        return (HttpHandler) {
                .userdata = rt,
                .dispatch = routes_dispatch,
                .resumed = routes_resumed,
                .health_public = routes_health_public,
                .request_done = routes_request_done,
                .cancel_all = routes_cancel_all,
        };
}

int http_routes_new(const HttpRoutesDaemon *d, HttpRoutes **ret) {
        HttpRoutes *rt = calloc(1, sizeof *rt);

        if (!rt)
                return -ENOMEM;
        rt->daemon = *d;
        *ret = rt;
        return 0;
}

HttpRoutes *http_routes_free(HttpRoutes *rt) {
        if (!rt)
                return NULL;
        while (rt->pending)
                pending_free(rt, rt->pending);
        for (size_t i = 0; i < ELEMENTSOF(rt->processes_cache); i++)
                free(rt->processes_cache[i].body);
        free(rt);
        return NULL;
}
