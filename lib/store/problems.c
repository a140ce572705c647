/* problems.c: problems merged from firings, ledgers, journals and hosts; the archive's ledger. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc-util.h"
#include "base/io-util.h"
#include "base/json-util.h"
#include "base/macro.h"
#include "base/strv.h"
#include "store/problems.h"

/* The ledger read at most (it is rewritten past PROBLEMS_LEDGER_MAX; a bigger one was not written by us). */
#define LEDGER_READ_MAX (8U * PROBLEMS_LEDGER_MAX)

void problem_done(Problem *p) {
        if (!p)
                return;
        free(p->title);
        strv_free(p->hosts);
        for (size_t i = 0; i < p->n_processes; i++) {
                free(p->processes[i].comm);
                free(p->processes[i].host);
        }
        free(p->processes);
        free(p->days);
        free(p->first_id);
        free(p->latest_id);
        free(p->first_host);
        free(p->latest_host);
        *p = (Problem) {};
}

void problem_table_done(ProblemTable *t) {
        for (size_t i = 0; i < t->n; i++)
                problem_done(&t->items[i]);
        free(t->items);
        *t = (ProblemTable) {};
}

Problem *problem_table_find(const ProblemTable *t, const char *signature) {
        for (size_t i = 0; i < t->n; i++)
                if (streq(t->items[i].signature, signature))
                        return &t->items[i];
        return NULL;
}

static int set_string(char **dst, const char *src) {
        char *c = NULL;

        if (src && !(c = strdup(src)))
                return -ENOMEM;
        free(*dst);
        *dst = c;
        return 0;
}

static int add_process(Problem *p, const ProblemProcess *q) {
        ProblemProcess *n;

        for (size_t i = 0; i < p->n_processes; i++)
                if (p->processes[i].pid == q->pid && streq_ptr(p->processes[i].host, q->host))
                        return 0;
        if (p->n_processes >= PROBLEM_PROCESSES_MAX)
                return 0;
        n = reallocarray(p->processes, p->n_processes + 1, sizeof *n);
        if (!n)
                return -ENOMEM;
        p->processes = n;
        n[p->n_processes] = (ProblemProcess) { .pid = q->pid };
        if (set_string(&n[p->n_processes].comm, q->comm) < 0 || set_string(&n[p->n_processes].host, q->host) < 0) {
                free(n[p->n_processes].comm);
                return -ENOMEM;
        }
        p->n_processes++;
        return 0;
}

static int add_day(Problem *p, const char *day, uint64_t count) {
        ProblemDay *n;
        size_t k;

        for (k = 0; k < p->n_days; k++) {
                int c = strcmp(p->days[k].day, day);

                if (c == 0) {
                        p->days[k].count += count;
                        return 0;
                }
                if (c > 0)
                        break;
        }
        if (p->n_days >= PROBLEM_DAYS_MAX) {
                if (k == 0)
                        return 0; /* older than every day kept */
                memmove(p->days, p->days + 1, --k * sizeof *p->days);
                p->n_days--;
        }
        n = reallocarray(p->days, p->n_days + 1, sizeof *n);
        if (!n)
                return -ENOMEM;
        p->days = n;
        memmove(n + k + 1, n + k, (p->n_days - k) * sizeof *n);
        n[k] = (ProblemDay) { .count = count };
        snprintf(n[k].day, sizeof n[k].day, "%s", day);
        p->n_days++;
        return 0;
}

static bool day_is_valid(const char *d) {
        unsigned y, m, dd;
        char end;

        return d && strlen(d) == 10 && sscanf(d, "%4u-%2u-%2u%c", &y, &m, &dd, &end) == 3 && m >= 1 && m <= 12 &&
               dd >= 1 && dd <= 31;
}

int problem_table_merge(ProblemTable *t, const Problem *src) {
        Problem *p;
        bool newer, older;
        int r;

        if (!archive_signature_is_valid(src->signature))
                return -EINVAL;
        p = problem_table_find(t, src->signature);
        if (!p) {
                if (!GREEDY_REALLOC(t->items, t->n_allocated, t->n + 1))
                        return -ENOMEM;
                p = &t->items[t->n++];
                *p = (Problem) { .first_usec = src->first_usec, .last_usec = src->last_usec };
                memcpy(p->signature, src->signature, sizeof p->signature);
        }
        newer = src->last_usec >= p->last_usec;
        older = src->first_usec <= p->first_usec;
        p->count += src->count;
        p->snapshots += src->snapshots;
        p->open = p->open || src->open;
        p->first_usec = MIN(p->first_usec, src->first_usec);
        p->last_usec = MAX(p->last_usec, src->last_usec);
        if ((newer || !p->title) && src->title && (r = set_string(&p->title, src->title)) < 0)
                return r;
        if (src->latest_id && (newer || !p->latest_id) &&
            ((r = set_string(&p->latest_id, src->latest_id)) < 0 || (r = set_string(&p->latest_host, src->latest_host)) < 0))
                return r;
        if (src->first_id && (older || !p->first_id) &&
            ((r = set_string(&p->first_id, src->first_id)) < 0 || (r = set_string(&p->first_host, src->first_host)) < 0))
                return r;
        for (size_t i = 0; src->hosts && src->hosts[i]; i++)
                if (!strv_contains(p->hosts, src->hosts[i]) && strv_length(p->hosts) < PROBLEM_HOSTS_MAX &&
                    strv_extend(&p->hosts, src->hosts[i]) < 0)
                        return -ENOMEM;
        for (size_t i = 0; i < src->n_processes; i++)
                if ((r = add_process(p, &src->processes[i])) < 0)
                        return r;
        for (size_t i = 0; i < src->n_days; i++)
                if ((r = add_day(p, src->days[i].day, src->days[i].count)) < 0)
                        return r;
        return 0;
}

static void day_of(uint64_t usec, ProblemDay *ret) {
        time_t sec = (time_t) (usec / 1000000);
        struct tm tm;

        ret->day[0] = 0;
        if (gmtime_r(&sec, &tm))
                strftime(ret->day, sizeof ret->day, "%Y-%m-%d", &tm);
}

Problem problem_of_firing(const char *signature, const char *title, uint64_t time_usec, pid_t pid, const char *comm,
                          const char *host, const char *snapshot_id) {
        /* Borrowed strings: static storage for the one process, day and host (a firing is merged or written at
         * once, never kept). */
        static ProblemProcess proc;
        static ProblemDay day;
        static char *hosts[2];
        Problem p = {
                .title = (char *) title,
                .count = 1,
                .first_usec = time_usec,
                .last_usec = time_usec,
                .latest_id = (char *) snapshot_id,
                .first_id = (char *) snapshot_id,
        };

        snprintf(p.signature, sizeof p.signature, "%s", signature ?: "");
        proc = (ProblemProcess) { .pid = pid, .comm = (char *) comm };
        p.processes = pid > 0 ? &proc : NULL;
        p.n_processes = pid > 0;
        day_of(time_usec, &day);
        day.count = 1;
        p.days = day.day[0] ? &day : NULL;
        p.n_days = day.day[0] != 0;
        hosts[0] = (char *) host;
        hosts[1] = NULL;
        p.hosts = host ? hosts : NULL;
        return p;
}

int problem_table_add_snapshots(ProblemTable *t, const ArchiveSummary *list, size_t n) {
        int r;

        /* Which snapshots there are is the listing's to say: the ids a firing named may have rotated out. */
        for (size_t i = 0; i < t->n; i++) {
                t->items[i].first_id = mfree(t->items[i].first_id);
                t->items[i].latest_id = mfree(t->items[i].latest_id);
                t->items[i].snapshots = 0;
        }

        for (size_t i = 0; i < n; i++) {
                const ArchiveSummary *s = &list[i];
                Problem *p;

                if (!s->signature || !archive_signature_is_valid(s->signature))
                        continue;
                p = problem_table_find(t, s->signature);
                if (!p) {
                        /* A snapshot whose firing is not counted yet (its job has just ended): one firing, on
                         * the host that took it. */
                        Problem one = problem_of_firing(s->signature, s->title, s->timestamp_usec, s->pid, s->comm,
                                                        s->host, NULL);

                        r = problem_table_merge(t, &one);
                        if (r < 0)
                                return r;
                        p = problem_table_find(t, s->signature);
                }
                /* LIST is oldest first. */
                p->snapshots++;
                if (p->snapshots == 1 && (r = set_string(&p->first_id, s->id)) < 0)
                        return r;
                if ((r = set_string(&p->latest_id, s->id)) < 0)
                        return r;
                if (!p->title && (r = set_string(&p->title, s->title)) < 0)
                        return r;
        }
        return 0;
}

static int cmp_problem(const void *a, const void *b) {
        const Problem *x = a, *y = b;

        if (x->last_usec != y->last_usec)
                return x->last_usec < y->last_usec ? -1 : 1;
        return strcmp(x->signature, y->signature);
}

void problem_table_sort(ProblemTable *t) {
        if (t->n > 1)
                qsort(t->items, t->n, sizeof *t->items, cmp_problem);
}

json_object *problem_to_json(const Problem *p) {
        _cleanup_(json_object_putp) json_object *o = json_object_new_object();
        json_object *procs = json_object_new_array(), *days = json_object_new_object();

        if (!o || !procs || !days || json_add(o, "processes", procs) < 0 || json_add(o, "days", days) < 0) {
                if (!o || json_object_object_length(o) == 0) {
                        json_object_put(procs);
                        json_object_put(days);
                }
                return NULL;
        }
        if (json_add_string(o, "signature", p->signature) < 0 || json_add_string(o, "title", p->title) < 0 ||
            json_add_u64(o, "count", p->count) < 0 || json_add_u64(o, "first_usec", p->first_usec) < 0 ||
            json_add_u64(o, "last_usec", p->last_usec) < 0 ||
            json_add(o, "open", json_object_new_boolean(p->open)) < 0 ||
            json_add(o, "hosts", p->hosts ? json_new_strv(p->hosts) : json_object_new_array()) < 0 ||
            json_add_u64(o, "snapshots", p->snapshots) < 0 || json_add_string(o, "first_id", p->first_id) < 0 ||
            json_add_string(o, "latest_id", p->latest_id) < 0)
                return NULL;
        if (p->first_host && json_add_string(o, "first_host", p->first_host) < 0)
                return NULL;
        if (p->latest_host && json_add_string(o, "latest_host", p->latest_host) < 0)
                return NULL;
        for (size_t i = 0; i < p->n_processes; i++) {
                json_object *e = json_object_new_object();

                if (!e || json_object_array_add(procs, e) < 0) {
                        json_object_put(e);
                        return NULL;
                }
                if (json_add_int64(e, "pid", p->processes[i].pid) < 0 ||
                    json_add_string(e, "comm", p->processes[i].comm) < 0 ||
                    (p->processes[i].host && json_add_string(e, "host", p->processes[i].host) < 0))
                        return NULL;
        }
        for (size_t i = 0; i < p->n_days; i++)
                if (json_add_u64(days, p->days[i].day, p->days[i].count) < 0)
                        return NULL;
        return TAKE_PTR(o);
}

int problem_from_json(json_object *o, Problem *ret) {
        _cleanup_(problem_done) Problem p = {};
        const char *sig = json_get_string(o, "signature");
        json_object *a;
        int r;

        if (!json_object_is_type(o, json_type_object) || !archive_signature_is_valid(sig))
                return -EBADMSG;
        memcpy(p.signature, sig, sizeof p.signature);
        p.count = json_get_u64(o, "count");
        p.first_usec = json_get_u64(o, "first_usec");
        p.last_usec = json_get_u64(o, "last_usec");
        p.snapshots = json_get_u64(o, "snapshots");
        p.open = json_get_bool(o, "open");
        if ((r = json_dup_string(o, "title", &p.title)) < 0 || (r = json_dup_string(o, "first_id", &p.first_id)) < 0 ||
            (r = json_dup_string(o, "latest_id", &p.latest_id)) < 0 ||
            (r = json_dup_string(o, "first_host", &p.first_host)) < 0 ||
            (r = json_dup_string(o, "latest_host", &p.latest_host)) < 0)
                return r;
        /* Ids name files and pages: one not of our form is none. */
        if (p.first_id && !archive_id_is_valid(p.first_id))
                p.first_id = mfree(p.first_id);
        if (p.latest_id && !archive_id_is_valid(p.latest_id))
                p.latest_id = mfree(p.latest_id);
        if ((a = json_get_array(o, "hosts")))
                for (size_t i = 0; i < json_object_array_length(a) && i < PROBLEM_HOSTS_MAX; i++) {
                        json_object *h = json_object_array_get_idx(a, i);

                        if (json_object_is_type(h, json_type_string) &&
                            !strv_contains(p.hosts, json_object_get_string(h)) &&
                            strv_extend(&p.hosts, json_object_get_string(h)) < 0)
                                return -ENOMEM;
                }
        if ((a = json_get_array(o, "processes")))
                for (size_t i = 0; i < json_object_array_length(a); i++) {
                        json_object *e = json_object_array_get_idx(a, i);
                        ProblemProcess q = { .pid = (pid_t) json_get_u64(e, "pid"),
                                             .comm = (char *) json_get_string(e, "comm"),
                                             .host = (char *) json_get_string(e, "host") };

                        if (q.pid > 0 && (r = add_process(&p, &q)) < 0)
                                return r;
                }
        if ((a = json_get_object(o, "days"))) {
                json_object_object_foreach(a, day, v)
                        if (day_is_valid(day) && json_object_is_type(v, json_type_int) &&
                            (r = add_day(&p, day, (uint64_t) MAX(json_object_get_int64(v), 0))) < 0)
                                return r;
        }
        *ret = p;
        p = (Problem) {};
        return 0;
}

/* ---- the ledger ---- */

static int ledger_write_line(int fd, const Problem *p) {
        _cleanup_(json_object_putp) json_object *o = problem_to_json(p);
        _cleanup_free_ char *text = NULL;
        size_t len;
        int r;

        if (!o)
                return -ENOMEM;
        /* What only an archive listing knows is not the ledger's. */
        json_object_object_del(o, "snapshots");
        json_object_object_del(o, "first_id");
        json_object_object_del(o, "open");
        r = json_to_text(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &text, &len);
        if (r < 0)
                return r;
        text[len] = '\n';
        return loop_write(fd, text, len + 1);
}

/* Rewrite the ledger as one line per problem of T, the newest kept within half of PROBLEMS_LEDGER_MAX. */
static int ledger_compact(int dir_fd, ProblemTable *t) {
        const char *tmp = "." PROBLEMS_LEDGER ".new"; /* the daemon is the ledger's one writer */
        size_t total = 0, first;
        int fd, r = 0;

        problem_table_sort(t);
        /* From the newest back, as many as fit. */
        for (first = t->n; first > 0; first--) {
                _cleanup_(json_object_putp) json_object *o = problem_to_json(&t->items[first - 1]);
                size_t n = o ? strlen(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN)) + 1 : 0;

                if (!o)
                        return -ENOMEM;
                if (total + n > PROBLEMS_LEDGER_MAX / 2)
                        break;
                total += n;
        }
        fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0640);
        if (fd < 0)
                return negative_errno();
        for (size_t i = first; i < t->n && r >= 0; i++)
                r = ledger_write_line(fd, &t->items[i]);
        if (r >= 0 && fsync(fd) < 0)
                r = negative_errno();
        safe_close(fd);
        if (r >= 0 && renameat(dir_fd, tmp, dir_fd, PROBLEMS_LEDGER) < 0)
                r = negative_errno();
        if (r < 0)
                (void) unlinkat(dir_fd, tmp, 0);
        return r;
}

int problems_ledger_append(int dir_fd, const Problem *p) {
        struct stat st;
        int fd, r;

        fd = openat(dir_fd, PROBLEMS_LEDGER, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
        if (fd < 0)
                return negative_errno();
        r = ledger_write_line(fd, p);
        if (r >= 0 && fstat(fd, &st) < 0)
                r = negative_errno();
        safe_close(fd);
        if (r < 0)
                return r;
        if ((uint64_t) st.st_size > PROBLEMS_LEDGER_MAX) {
                _cleanup_(problem_table_done) ProblemTable t = {};

                r = problems_ledger_load(dir_fd, &t, NULL);
                if (r >= 0)
                        r = ledger_compact(dir_fd, &t);
        }
        return r;
}

int problems_ledger_parse(char *buf, ProblemTable *t, size_t *ret_skipped) {
        size_t skipped = 0;
        int r;

        for (char *line = buf, *nl; line && *line; line = nl ? nl + 1 : NULL) {
                _cleanup_(json_object_putp) json_object *o = NULL;
                _cleanup_(problem_done) Problem p = {};

                nl = strchr(line, '\n');
                if (nl)
                        *nl = 0;
                if (!*line)
                        continue;
                /* A line cut by a crash, or not ours: skipped, the others stand. */
                if (json_parse_bounded(line, strlen(line), &o, &(const char *) { NULL }) < 0 ||
                    problem_from_json(o, &p) < 0) {
                        skipped++;
                        continue;
                }
                r = problem_table_merge(t, &p);
                if (r < 0)
                        return r;
        }
        if (ret_skipped)
                *ret_skipped = skipped;
        return 0;
}

int problems_ledger_load(int dir_fd, ProblemTable *t, size_t *ret_skipped) {
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        struct stat st;
        int fd, r;

        if (ret_skipped)
                *ret_skipped = 0;
        fd = openat(dir_fd, PROBLEMS_LEDGER, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0)
                return errno == ENOENT ? 0 : negative_errno();
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                r = S_ISREG(st.st_mode) ? negative_errno() : -EBADMSG;
                safe_close(fd);
                return r;
        }
        r = read_full_fd(fd, LEDGER_READ_MAX, &buf, &len);
        safe_close(fd);
        if (r < 0)
                return r;
        return problems_ledger_parse(buf, t, ret_skipped);
}
