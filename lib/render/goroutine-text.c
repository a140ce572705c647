/* goroutine-text.c: goroutines in Go's own traceback format (runtime/traceback.go), grouped. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc-util.h"
#include "base/escape.h"
#include "base/macro.h"
#include "render/goroutine-text.h"

/* Goroutine ids listed in a group's header at most. */
#define GROUP_IDS_SHOWN 16U
/* Wait objects and creation sites summed up at most. */
#define SUMMARY_LINES 5U
/* A creation site is named as a possible leak from this many live goroutines. */
#define LEAK_GOROUTINES 100U
#define USEC_PER_MINUTE INT64_C(60000000)

static const char *reason_of(const Goroutine *g) {
        return g->wait_reason ?: go_status_to_string(g->status) ?: "unknown";
}

static bool same_group(const Goroutine *a, const Goroutine *b) {
        /* Those without frames go by why they have none. */
        return a->stack == b->stack && (a->stack >= 0 || streq_ptr(a->error, b->error)) && a->status == b->status &&
               a->locked == b->locked &&
               streq_ptr(a->wait_reason, b->wait_reason) && streq_ptr(a->created_by.function, b->created_by.function);
}

typedef struct Group {
        size_t first;           /* index of its first goroutine */
        size_t count;
        int64_t wait_min, wait_max;     /* usec, -1 when not known */
} Group;

static const Snapshot *sort_snapshot;

static int cmp_group_member(const void *a, const void *b) {
        const Goroutine *x = &snapshot_go(sort_snapshot)->goroutines[*(const size_t *) a];
        const Goroutine *y = &snapshot_go(sort_snapshot)->goroutines[*(const size_t *) b];
        int c;

        /* Members of a group next to each other: by stack, state, reason, creator, error; then by goid. */
        if (x->stack != y->stack)
                return x->stack < y->stack ? -1 : 1;
        if (x->status != y->status)
                return x->status < y->status ? -1 : 1;
        if (x->locked != y->locked)
                return x->locked ? 1 : -1;
        c = strcmp(x->wait_reason ?: "", y->wait_reason ?: "");
        if (c == 0)
                c = strcmp(x->created_by.function ?: "", y->created_by.function ?: "");
        if (c == 0)
                c = strcmp(x->error ?: "", y->error ?: "");
        if (c == 0)
                c = x->goid < y->goid ? -1 : x->goid > y->goid;
        return c;
}

static int cmp_group(const void *a, const void *b) {
        const Group *x = a, *y = b;

        /* The longest waiting first, then the largest, then by goid. */
        if (x->wait_max != y->wait_max)
                return x->wait_max > y->wait_max ? -1 : 1;
        if (x->count != y->count)
                return x->count > y->count ? -1 : 1;
        return x->first < y->first ? -1 : x->first > y->first;
}

static void print_frames(const Snapshot *s, const GoStack *st, FILE *f) {
        for (size_t i = 0; i < st->n_frames; i++) {
                const UserFrame *u = &st->frames[i];

                if (u->function) {
                        fputs_escaped(u->function, f);
                        fputs("(...)\n", f);
                } else
                        fprintf(f, "?? (0x%" PRIx64 ")\n", u->pc);
                fputc('\t', f);
                if (u->file) {
                        fputs_escaped(u->file, f);
                        fprintf(f, ":%u", u->line);
                } else if (snapshot_frame_module(s, u))
                        fputs_escaped(snapshot_frame_module(s, u)->path, f);
                else
                        fputs("?", f);
                /* Go gives the offset of the physical frame's pc, not of its inlined calls. */
                if (!u->inlined && u->function)
                        fprintf(f, " +0x%" PRIx64, u->function_offset);
                fputc('\n', f);
        }
        if (st->truncated)
                fputs("...additional frames elided...\n", f);
}

static void print_header(const Goroutine *g, const Group *gr, const size_t *members, FILE *f) {
        int64_t lo = gr->wait_min >= 0 ? gr->wait_min / USEC_PER_MINUTE : 0;
        int64_t hi = gr->wait_max >= 0 ? gr->wait_max / USEC_PER_MINUTE : 0;

        if (gr->count == 1)
                fprintf(f, "goroutine %" PRIu64 " [", g->goid);
        else
                fprintf(f, "%zu goroutines [", gr->count);
        fputs_escaped(reason_of(g), f);
        if (hi >= 1 && lo != hi && gr->count > 1)
                fprintf(f, ", %" PRId64 "~%" PRId64 " minutes", lo, hi);
        else if (hi >= 1)
                fprintf(f, ", %" PRId64 " minutes", hi);
        if (g->locked)
                fputs(", locked to thread", f);
        fputs("]:", f);
        if (gr->count > 1) {
                for (size_t i = 0; i < MIN(gr->count, (size_t) GROUP_IDS_SHOWN); i++)
                        fprintf(f, " %" PRIu64, snapshot_go(sort_snapshot)->goroutines[members[gr->first + i]].goid);
                if (gr->count > GROUP_IDS_SHOWN)
                        fputs(" …", f);
        }
        fputc('\n', f);
}

static void print_created_by(const Goroutine *g, FILE *f) {
        if (!g->created_by.function)
                return;
        fputs("created by ", f);
        fputs_escaped(g->created_by.function, f);
        if (g->parent_goid)
                fprintf(f, " in goroutine %" PRIu64, g->parent_goid);
        fputs("\n\t", f);
        if (g->created_by.file) {
                fputs_escaped(g->created_by.file, f);
                fprintf(f, ":%u", g->created_by.line);
        } else
                fputs("?", f);
        fprintf(f, " +0x%" PRIx64 "\n", g->created_by.function_offset);
}

/* What two or more goroutines wait on together ("12 goroutines wait on the same sync.Mutex 0x…"), and the creation
 * sites with many live goroutines (a leak's signature). */
static void print_summary(const GoRuntime *gr, FILE *f) {
        typedef struct Count {
                const char *kind, *function;
                uint64_t address;
                size_t n;
                int64_t oldest;
        } Count;
        _cleanup_free_ Count *objs = calloc(gr->n_goroutines ?: 1, sizeof *objs);
        _cleanup_free_ Count *sites = calloc(gr->n_goroutines ?: 1, sizeof *sites);
        size_t n_objs = 0, n_sites = 0, shown;

        if (!objs || !sites)
                return;
        for (size_t i = 0; i < gr->n_goroutines; i++) {
                const Goroutine *g = &gr->goroutines[i];
                size_t k;

                if (g->wait_kind) {
                        for (k = 0; k < n_objs; k++)
                                if (objs[k].address == g->wait_address && streq(objs[k].kind, g->wait_kind))
                                        break;
                        if (k == n_objs)
                                objs[n_objs++] = (Count) { .kind = g->wait_kind, .address = g->wait_address,
                                                           .oldest = -1 };
                        objs[k].n++;
                        objs[k].oldest = MAX(objs[k].oldest, g->wait_usec);
                }
                if (g->created_by.function) {
                        for (k = 0; k < n_sites; k++)
                                if (streq(sites[k].function, g->created_by.function))
                                        break;
                        if (k == n_sites)
                                sites[n_sites++] = (Count) { .function = g->created_by.function };
                        sites[k].n++;
                }
        }
        for (shown = 0; shown < SUMMARY_LINES; shown++) {
                Count *best = NULL;

                for (size_t k = 0; k < n_objs; k++)
                        if (objs[k].n >= 2 && (!best || objs[k].n > best->n))
                                best = &objs[k];
                if (!best)
                        break;
                fprintf(f, "  %zu goroutines wait on the same ", best->n);
                fputs_escaped(best->kind, f);
                fprintf(f, " 0x%" PRIx64, best->address);
                if (best->oldest >= USEC_PER_MINUTE)
                        fprintf(f, ", the oldest for %" PRId64 " minutes", best->oldest / USEC_PER_MINUTE);
                else if (best->oldest >= 0)
                        fprintf(f, ", the oldest for %.0f s", (double) best->oldest / 1e6);
                fputc('\n', f);
                best->n = 0;
        }
        for (shown = 0; shown < SUMMARY_LINES; shown++) {
                Count *best = NULL;

                for (size_t k = 0; k < n_sites; k++)
                        if (sites[k].n >= LEAK_GOROUTINES && (!best || sites[k].n > best->n))
                                best = &sites[k];
                if (!best)
                        break;
                fprintf(f, "  %zu goroutines created by ", best->n);
                fputs_escaped(best->function, f);
                fputs(" are alive (a leak, if they should have ended)\n", f);
                best->n = 0;
        }
}

/* S's goroutines in groups (same_group()), in the order they are shown: *RET_MEMBERS the goroutines' indexes with each
 * group's together, *RET_GROUPS into it. -ENOMEM. */
static int group_goroutines(const Snapshot *s, size_t **ret_members, Group **ret_groups, size_t *ret_n) {
        const GoRuntime *gr = snapshot_go(s);
        _cleanup_free_ size_t *members = calloc(gr->n_goroutines ?: 1, sizeof *members);
        _cleanup_free_ Group *groups = calloc(gr->n_goroutines ?: 1, sizeof *groups);
        size_t n_groups = 0;

        if (!members || !groups)
                return -ENOMEM;
        for (size_t i = 0; i < gr->n_goroutines; i++)
                members[i] = i;
        sort_snapshot = s;
        qsort(members, gr->n_goroutines, sizeof *members, cmp_group_member);
        for (size_t i = 0; i < gr->n_goroutines; i++) {
                const Goroutine *g = &gr->goroutines[members[i]];
                Group *last = n_groups > 0 ? &groups[n_groups - 1] : NULL;

                if (!last || !same_group(&gr->goroutines[members[last->first]], g)) {
                        last = &groups[n_groups++];
                        *last = (Group) { .first = i, .wait_min = g->wait_usec, .wait_max = g->wait_usec };
                }
                last->count++;
                last->wait_min = MIN(last->wait_min, g->wait_usec);
                last->wait_max = MAX(last->wait_max, g->wait_usec);
        }
        qsort(groups, n_groups, sizeof *groups, cmp_group);
        *ret_members = TAKE_PTR(members);
        *ret_groups = TAKE_PTR(groups);
        *ret_n = n_groups;
        return 0;
}

void goroutines_print_text(const Snapshot *s, FILE *f) {
        const GoRuntime *gr = snapshot_go(s);
        _cleanup_free_ size_t *members = NULL;
        _cleanup_free_ Group *groups = NULL;
        size_t n_groups = 0;

        if (!gr)
                return;
        fputs("GOROUTINES", f);
        if (gr->version && gr->version[0]) {
                fputs(" of ", f);
                fputs_escaped(gr->version, f);
        }
        if (gr->error) {
                fputs(": not read: ", f);
                fputs_escaped(gr->error, f);
                fputc('\n', f);
                return;
        }
        if (group_goroutines(s, &members, &groups, &n_groups) < 0)
                return;
        sort_snapshot = s;
        fprintf(f, ": %zu in %zu groups", gr->n_goroutines, n_groups);
        if (gr->truncated)
                fprintf(f, " (of %" PRIu64 ": a budget cut the rest)", gr->total);
        fputc('\n', f);
        print_summary(gr, f);
        for (size_t i = 0; i < n_groups; i++) {
                const Goroutine *g = &gr->goroutines[members[groups[i].first]];

                fputc('\n', f);
                print_header(g, &groups[i], members, f);
                if (g->wait_kind && groups[i].count == 1) {
                        fputs("\t(waits on ", f);
                        fputs_escaped(g->wait_kind, f);
                        fprintf(f, " 0x%" PRIx64 ")\n", g->wait_address);
                }
                if (g->stack >= 0 && (size_t) g->stack < gr->n_stacks)
                        print_frames(s, &gr->stacks[g->stack], f);
                else {
                        fputs("\t(", f);
                        fputs_escaped(g->error ?: "its stack was not read", f);
                        fputs(")\n", f);
                }
                print_created_by(g, f);
        }
        sort_snapshot = NULL;
}

/* A goroutine's own place: its stack's innermost frame outside the runtime (gopark, chanrecv … are how it waits,
 * not where). */
static const UserFrame *own_frame(const GoRuntime *gr, const Goroutine *g) {
        const GoStack *st = g->stack >= 0 && (size_t) g->stack < gr->n_stacks ? &gr->stacks[g->stack] : NULL;

        for (size_t i = 0; st && i < st->n_frames; i++)
                if (st->frames[i].function && !startswith(st->frames[i].function, "runtime."))
                        return &st->frames[i];
        return st && st->n_frames > 0 ? &st->frames[0] : NULL;
}

/* The largest group blocked a minute or more, else the largest that waits at all: into *RET (its first member),
 * *RET_COUNT and *RET_WAIT_MAX; *RET NULL when none waits. */
static int stuck_group(const Snapshot *s, const Goroutine **ret, size_t *ret_count, int64_t *ret_wait_max) {
        _cleanup_free_ size_t *members = NULL;
        _cleanup_free_ Group *groups = NULL;
        const Group *best = NULL;
        const GoRuntime *gr = snapshot_go(s);
        size_t n_groups = 0;
        int r;

        *ret = NULL;
        if (!gr || gr->error)
                return 0;
        r = group_goroutines(s, &members, &groups, &n_groups);
        if (r < 0)
                return r;
        for (int pass = 0; pass < 2 && !best; pass++)
                for (size_t i = 0; i < n_groups; i++) {
                        const Goroutine *g = &gr->goroutines[members[groups[i].first]];

                        if (g->status != GO_STATUS_WAITING || (pass == 0 && groups[i].wait_min < USEC_PER_MINUTE))
                                continue;
                        if (!best || groups[i].count > best->count)
                                best = &groups[i];
                }
        if (!best)
                return 0;
        *ret = &gr->goroutines[members[best->first]];
        *ret_count = best->count;
        *ret_wait_max = best->wait_max;
        return 0;
}

int goroutines_stuck_stack(const Snapshot *s, const GoStack **ret) {
        const Goroutine *g;
        size_t count;
        int64_t wait_max;
        int r = stuck_group(s, &g, &count, &wait_max);

        *ret = NULL;
        if (r < 0)
                return r;
        if (g && g->stack >= 0 && (size_t) g->stack < snapshot_go(s)->n_stacks)
                *ret = &snapshot_go(s)->stacks[g->stack];
        return 0;
}

int goroutines_summary(const Snapshot *s, char **ret) {
        const GoRuntime *gr = snapshot_go(s);
        const Goroutine *g;
        const UserFrame *u;
        size_t count = 0, size = 0;
        int64_t wait_max = 0;
        char *text = NULL;
        FILE *f;
        int r;

        *ret = NULL;
        r = stuck_group(s, &g, &count, &wait_max);
        if (r < 0 || !g)
                return r;
        f = open_memstream(&text, &size);
        if (!f)
                return -ENOMEM;
        fprintf(f, "%zu goroutine%s [", count, count == 1 ? "" : "s");
        fputs_escaped(reason_of(g), f);
        if (wait_max >= USEC_PER_MINUTE)
                fprintf(f, ", %" PRId64 " minutes", wait_max / USEC_PER_MINUTE);
        fputc(']', f);
        u = own_frame(gr, g);
        if (u && u->function) {
                fputs(" in ", f);
                fputs_escaped(u->function, f);
                if (u->file) {
                        const char *b = strrchr(u->file, '/');

                        fputs(" (", f);
                        fputs_escaped(b ? b + 1 : u->file, f);
                        fprintf(f, ":%u)", u->line);
                }
        }
        if (fclose(f) != 0) {
                free(text);
                return -ENOMEM;
        }
        *ret = text;
        return 0;
}

void goroutines_print_folded(const Snapshot *s, FILE *f) {
        const GoRuntime *gr = snapshot_go(s);

        for (size_t i = 0; gr && !gr->error && i < gr->n_goroutines; i++) {
                const Goroutine *g = &gr->goroutines[i];
                const GoStack *st = g->stack >= 0 && (size_t) g->stack < gr->n_stacks ? &gr->stacks[g->stack] : NULL;

                fputs("go:", f);
                fputs_folded(reason_of(g), f);
                for (size_t k = st ? st->n_frames : 0; k > 0; k--) {
                        fputc(';', f);
                        if (st->frames[k - 1].function)
                                fputs_folded(st->frames[k - 1].function, f);
                        else
                                fprintf(f, "0x%" PRIx64, st->frames[k - 1].pc);
                }
                fputs(" 1\n", f);
        }
}
