/* snapshot-svg.c: a snapshot as SVG: a flame graph of its threads (flamegraph.pl's picture, drawn here, the width
 * of a frame its threads) and its wait chain as a row of boxes with the waits between them as arrows and arcs. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "base/escape.h"
#include "base/macro.h"
#include "base/string-table.h"
#include "model/thread-class.h"
#include "render/snapshot-svg.h"

static const char *const svg_picture_table[_SVG_PICTURE_MAX] = {
        [SVG_PICTURE_ALL] = "all",
        [SVG_PICTURE_FLAME] = "flame",
        [SVG_PICTURE_CHAIN] = "chain",
};
DEFINE_STRING_TABLE_LOOKUP(svg_picture, SvgPicture);

/* The flame graph's geometry, in pixels: flamegraph.pl's defaults. */
#define FLAME_WIDTH 1200
#define FLAME_PAD 10
#define FLAME_ROW 16
#define FLAME_HEAD 52           /* title and the controls above the frames */
#define FLAME_FOOT 24           /* the details line below them */
#define CHAR_WIDTH 7            /* of a 12 px Verdana character, roughly: how many fit a frame */
/* The wait chain's. */
#define BOX_WIDTH 200
#define BOX_HEIGHT 54
#define BOX_GAP 90              /* room for an arrow's label ("unix-socket") */
#define BOX_CHARS 27
#define CHAIN_HEAD 44

/* What a flame graph's rectangle stands for; the colours tell them apart. */
typedef enum FlameKind {
        FLAME_CLASS,            /* the bottom bar: the threads' classes */
        FLAME_PROCESS,
        FLAME_KERNEL,
        FLAME_NATIVE,
        FLAME_INTERPRETER,      /* an interpreter's or a runtime's own machinery (libpython, the JVM, Go's runtime.) */
        FLAME_RUNTIME,          /* the program's own code in a runtime: Python, Java, Go functions */
        _FLAME_KIND_MAX,
} FlameKind;

static const char *const flame_kind_table[_FLAME_KIND_MAX] = {
        [FLAME_CLASS] = "class",
        [FLAME_PROCESS] = "process",
        [FLAME_KERNEL] = "kernel",
        [FLAME_NATIVE] = "native",
        [FLAME_INTERPRETER] = "interpreter",
        [FLAME_RUNTIME] = "runtime",
};

typedef struct FlameNode {
        char *name;
        FlameKind kind;
        int order;              /* FLAME_CLASS: problems first; 0 for the others, which go by name */
        size_t count;           /* threads */
        size_t start;           /* the first of them, in the laid-out order */
        const char *file;       /* of the first frame merged here (borrowed from the snapshot) */
        unsigned line;
        const char *module;
        bool line_mixed, file_mixed, module_mixed;
        struct FlameNode **children;
        size_t n_children;
} FlameNode;

static FlameNode *flame_node_free(FlameNode *n) {
        if (!n)
                return NULL;
        for (size_t i = 0; i < n->n_children; i++)
                flame_node_free(n->children[i]);
        free(n->children);
        free(n->name);
        return mfree(n);
}

static int flame_node_cmp(const FlameNode *a, FlameKind kind, int order, const char *name) {
        if (a->order != order)
                return a->order < order ? -1 : 1;
        int c = strcmp(a->name, name);
        if (c != 0)
                return c;
        return a->kind == kind ? 0 : a->kind < kind ? -1 : 1;
}

/* The child of P called NAME (taken over), added in order when there is none; NULL on OOM. */
static FlameNode *flame_child(FlameNode *p, FlameKind kind, int order, char *name) {
        _cleanup_free_ char *owned = name;
        FlameNode *n, **a;
        size_t i;
        int c = 1;

        if (!name)
                return NULL;
        for (i = 0; i < p->n_children; i++) {
                c = flame_node_cmp(p->children[i], kind, order, name);
                if (c >= 0)
                        break;
        }
        if (i < p->n_children && c == 0)
                return p->children[i];
        n = calloc(1, sizeof *n);
        if (!n)
                return NULL;
        a = reallocarray(p->children, p->n_children + 1, sizeof *a);
        if (!a) {
                free(n);
                return NULL;
        }
        p->children = a;
        memmove(a + i + 1, a + i, (p->n_children - i) * sizeof *a);
        a[i] = n;
        p->n_children++;
        *n = (FlameNode) { .name = TAKE_PTR(owned), .kind = kind, .order = order };
        return n;
}

/* Count one more thread at N, with the place of the frame it has there. */
static void flame_count(FlameNode *n, const char *file, unsigned line, const char *module) {
        if (n->count++ == 0) {
                n->file = file;
                n->line = line;
                n->module = module;
                return;
        }
        n->file_mixed = n->file_mixed || !streq_ptr(n->file, file);
        n->line_mixed = n->line_mixed || n->file_mixed || n->line != line;
        n->module_mixed = n->module_mixed || !streq_ptr(n->module, module);
}

/* A thread's class as far as one snapshot tells (a class needs a window of samples, which a snapshot does not
 * keep): the rule's thread has the class it fired on, a deadlock's threads are blocked, and the others go by their
 * state, D blocked, on CPU running, asleep waiting. */
static ThreadClass thread_class_of(const Snapshot *root, const Snapshot *s, const ThreadSnapshot *t) {
        pid_t pids[64], tids[64];
        size_t n = snapshot_deadlock_threads(root, pids, tids, ELEMENTSOF(pids));
        ThreadClass c;

        if (s == root && root->trigger && root->trigger->tid == t->tid &&
            (c = thread_class_from_string(root->trigger->klass)) >= 0)
                return c;
        for (size_t i = 0; i < n; i++)
                if (pids[i] == s->pid && tids[i] == t->tid)
                        return THREAD_CLASS_BLOCKED;
        switch (t->state) {
        case 'D':
                return THREAD_CLASS_BLOCKED;
        case 'T':
        case 't':
                return THREAD_CLASS_STOPPED;
        case 'Z':
                return THREAD_CLASS_ZOMBIE;
        case 'R':
                return THREAD_CLASS_RUNNING;
        default:
                return THREAD_CLASS_WAITING;
        }
}

/* The bottom bar's order: the problems first, as thread-groups.h orders groups. */
static int class_order(ThreadClass c) {
        static const ThreadClass order[] = {
                THREAD_CLASS_BLOCKED, THREAD_CLASS_BUSY_LOOP, THREAD_CLASS_SYSCALL_SPIN, THREAD_CLASS_LOCK_RETRY,
                THREAD_CLASS_FROZEN, THREAD_CLASS_STOPPED, THREAD_CLASS_ZOMBIE, THREAD_CLASS_RUNNING,
                THREAD_CLASS_WAITING,
        };
        for (size_t i = 0; i < ELEMENTSOF(order); i++)
                if (order[i] == c)
                        return (int) i;
        return (int) ELEMENTSOF(order);
}

/* A runtime's frame is the program's own code, but for its machinery (Go's runtime.); a native frame in a runtime's
 * interpreter (libpython, libjvm) is the interpreter's. */
static FlameKind user_frame_kind(const Snapshot *s, const UserFrame *u) {
        RuntimeKind r = frame_kind_runtime(u->kind);
        const ModuleInfo *m;

        if (r >= 0) {
                const char *machinery = runtime_traits[r].machinery;
                return machinery && u->function && startswith(u->function, machinery) ? FLAME_INTERPRETER
                                                                                       : FLAME_RUNTIME;
        }
        m = snapshot_frame_module(s, u);
        return m && runtime_of_interpreter_module(m->path) >= 0 ? FLAME_INTERPRETER : FLAME_NATIVE;
}

/* One thread's path from the bottom bar up: its class, its process, its user frames from the outermost, then its
 * kernel frames. */
static int flame_add_thread(FlameNode *root, const Snapshot *top, const Snapshot *s, const ThreadSnapshot *t,
                            bool kernel) {
        ThreadClass c = thread_class_of(top, s, t);
        FlameNode *n;
        char *name;

        n = flame_child(root, FLAME_CLASS, class_order(c), strdup(thread_class_to_string(c) ?: "?"));
        if (!n)
                return -ENOMEM;
        flame_count(n, NULL, 0, NULL);
        if (asprintf(&name, "%s (%d)", s->comm ?: "?", (int) s->pid) < 0)
                return -ENOMEM;
        n = flame_child(n, FLAME_PROCESS, 0, name);
        if (!n)
                return -ENOMEM;
        flame_count(n, NULL, 0, s->exe);
        for (size_t k = t->n_frames; k > 0; k--) {
                const UserFrame *u = &t->frames[k - 1];

                if (!user_frame_shown(u))
                        continue;
                n = flame_child(n, user_frame_kind(s, u), 0, snapshot_frame_name(s, u));
                if (!n)
                        return -ENOMEM;
                flame_count(n, u->file, u->line, snapshot_frame_module(s, u) ? snapshot_frame_module(s, u)->path : NULL);
        }
        if (kernel)
                for (size_t k = t->n_kframes; k > 0; k--) {
                        n = flame_child(n, FLAME_KERNEL, 0, strdup(t->kframes[k - 1].function ?: "?"));
                        if (!n)
                                return -ENOMEM;
                        flame_count(n, NULL, 0, t->kframes[k - 1].module);
                }
        return 0;
}

/* Each node's first thread, children left to right; the depth of the deepest. */
static size_t flame_layout(FlameNode *n, size_t start, size_t depth) {
        size_t max = depth;

        n->start = start;
        for (size_t i = 0; i < n->n_children; i++) {
                size_t d = flame_layout(n->children[i], start, depth + 1); /* MAX() evaluates twice */

                max = MAX(max, d);
                start += n->children[i]->count;
        }
        return max;
}

static uint32_t name_hash(const char *s) {
        uint32_t h = 2166136261u; /* FNV-1a: the same name, the same colour */

        for (; *s; s++)
                h = (h ^ (unsigned char) *s) * 16777619u;
        return h;
}

/* A colour of N's family, varied by its name as flamegraph.pl varies its own (by a hash, not at random). */
static void put_fill(const FlameNode *n, FILE *f) {
        static const struct {
                const char *klass;
                const char *rgb;
        } classes[] = {
                { "blocked", "rgb(200,30,30)" },        { "busy-loop", "rgb(235,110,20)" },
                { "syscall-spin", "rgb(170,60,200)" },  { "lock-retry", "rgb(220,90,150)" },
                { "frozen", "rgb(120,170,230)" },       { "stopped", "rgb(150,110,70)" },
                { "zombie", "rgb(130,130,130)" },       { "running", "rgb(60,170,80)" },
                { "waiting", "rgb(110,140,190)" },
        };
        uint32_t h = name_hash(n->name);
        unsigned a = h & 0xff, b = (h >> 8) & 0xff, c = (h >> 16) & 0xff;

        switch (n->kind) {
        case FLAME_CLASS:
                for (size_t i = 0; i < ELEMENTSOF(classes); i++)
                        if (streq(classes[i].klass, n->name)) {
                                fputs(classes[i].rgb, f);
                                return;
                        }
                fputs("rgb(160,160,160)", f);
                return;
        case FLAME_PROCESS:
                fprintf(f, "rgb(%u,%u,%u)", 190 + a * 30 / 255, 190 + a * 30 / 255, 200 + b * 30 / 255);
                return;
        case FLAME_KERNEL: /* blue-green */
                fprintf(f, "rgb(%u,%u,%u)", 50 + a * 60 / 255, 160 + b * 60 / 255, 200 + c * 55 / 255);
                return;
        case FLAME_INTERPRETER: /* yellow */
                fprintf(f, "rgb(%u,%u,%u)", 200 + a * 55 / 255, 190 + b * 50 / 255, 40 + c * 50 / 255);
                return;
        case FLAME_RUNTIME: /* green */
                fprintf(f, "rgb(%u,%u,%u)", 50 + a * 70 / 255, 180 + b * 60 / 255, 50 + c * 70 / 255);
                return;
        case FLAME_NATIVE: /* flamegraph.pl's "hot": red to orange */
        default:
                fprintf(f, "rgb(%u,%u,%u)", 205 + a * 50 / 255, b * 130 / 255, c * 55 / 255);
                return;
        }
}

/* At most CHARS characters of S (UTF-8 counted by character), ".." at the end when cut, escaped. */
static void put_clipped(const char *s, size_t chars, FILE *f) {
        size_t i = 0, len = strlen(s), n = 0;

        if (chars < 3)
                return;
        while (i < len && n < chars) {
                size_t k = utf8_sequence_len(s + i, len - i, NULL);
                i += k ?: 1;
                n++;
        }
        if (i >= len) {
                fputs_xml(s, f);
                return;
        }
        /* Cut two characters earlier for the "..". */
        i = 0;
        for (size_t m = 0; m < chars - 2 && i < len; m++) {
                size_t k = utf8_sequence_len(s + i, len - i, NULL);
                i += k ?: 1;
        }
        fputs_xml_n(s, i, f);
        fputs("..", f);
}

typedef struct FlameLayout {
        double x0, width;       /* the frames' area */
        size_t total;
        size_t rows;
        double top;
        bool icicle;
} FlameLayout;

static void flame_print_node(const FlameNode *n, size_t depth, const FlameLayout *l, FILE *f) {
        double x = l->x0 + (double) n->start * l->width / (double) l->total,
               w = (double) n->count * l->width / (double) l->total,
               y = l->top + (double) ((l->icicle ? depth : l->rows - 1 - depth) * FLAME_ROW);

        fprintf(f, "<g class=\"frame\" data-kind=\"%s\" data-s=\"%zu\" data-n=\"%zu\" data-d=\"%zu\" data-name=\"",
                flame_kind_table[n->kind], n->start, n->count, depth);
        fputs_xml(n->name, f);
        fputs("\"><title>", f);
        fputs_xml(n->name, f);
        if (n->kind == FLAME_KERNEL)
                fputs(" [kernel]", f);
        if (n->file && !n->file_mixed) {
                fputc('\n', f);
                fputs_xml(n->file, f);
                if (n->line && !n->line_mixed)
                        fprintf(f, ":%u", n->line);
        }
        if (n->module && !n->module_mixed) {
                fputs("\nin ", f);
                fputs_xml(n->module, f);
        }
        fprintf(f, "\n%zu thread%s, %.1f%%</title><rect x=\"%.2f\" y=\"%.0f\" width=\"%.2f\" height=\"%d\" fill=\"",
                n->count, n->count == 1 ? "" : "s", 100.0 * (double) n->count / (double) l->total, x, y, w,
                FLAME_ROW - 1);
        put_fill(n, f);
        fprintf(f, "\"/><text x=\"%.2f\" y=\"%.0f\">", x + 3, y + 11);
        put_clipped(n->name, w > 6 ? (size_t) ((w - 6) / CHAR_WIDTH) : 0, f);
        fputs("</text></g>\n", f);
        for (size_t i = 0; i < n->n_children; i++)
                flame_print_node(n->children[i], depth + 1, l, f);
}

/* Click to zoom, search and a details line, as flamegraph.pl's own script does; but no inline handler attribute: the
 * listeners are attached here, so a page under a strict Content-Security-Policy can drop this script and attach its
 * own to the same frames. */
static const char flame_script[] =
        "<script type=\"text/ecmascript\"><![CDATA[\n"
        "(function () {\n"
        "  'use strict';\n"
        "  var root = document.getElementById('sw-flame');\n"
        "  if (!root)\n"
        "    return;\n"
        "  var x0 = +root.getAttribute('data-x'), full = +root.getAttribute('data-width'),\n"
        "      total = +root.getAttribute('data-total'), frames = root.querySelectorAll('g.frame'),\n"
        "      details = document.getElementById('sw-details'), reset = document.getElementById('sw-reset'),\n"
        "      matched = document.getElementById('sw-matched');\n"
        "  function num(e, a) { return +e.getAttribute(a); }\n"
        "  function place(e, x, w) {\n"
        "    var r = e.querySelector('rect'), t = e.querySelector('text'), n = e.getAttribute('data-name'),\n"
        "        c = Math.floor((w - 6) / 7);\n"
        "    r.setAttribute('x', x.toFixed(2));\n"
        "    r.setAttribute('width', w.toFixed(2));\n"
        "    t.setAttribute('x', (x + 3).toFixed(2));\n"
        "    t.textContent = c < 3 ? '' : n.length <= c ? n : n.slice(0, c - 2) + '..';\n"
        "  }\n"
        "  function zoom(s, n, d) {\n"
        "    for (var i = 0; i < frames.length; i++) {\n"
        "      var e = frames[i], fs = num(e, 'data-s'), fn = num(e, 'data-n'), below = num(e, 'data-d') < d,\n"
        "          show = below ? fs <= s && fs + fn >= s + n : fs >= s && fs + fn <= s + n;\n"
        "      e.style.display = show ? '' : 'none';\n"
        "      e.style.opacity = below ? '0.6' : '';\n"
        "      if (show)\n"
        "        place(e, below ? x0 : x0 + (fs - s) / n * full, below ? full : fn / n * full);\n"
        "    }\n"
        "    reset.style.display = n < total ? '' : 'none';\n"
        "  }\n"
        "  Array.prototype.forEach.call(frames, function (e) {\n"
        "    e.addEventListener('click', function () {\n"
        "      zoom(num(e, 'data-s'), num(e, 'data-n'), num(e, 'data-d'));\n"
        "    });\n"
        "    e.addEventListener('mouseover', function () {\n"
        "      details.textContent = e.getAttribute('data-name') + ' (' + num(e, 'data-n') + ' of ' +\n"
        "                total + ' threads)';\n"
        "    });\n"
        "    e.addEventListener('mouseout', function () { details.textContent = ' '; });\n"
        "  });\n"
        "  reset.addEventListener('click', function () { zoom(0, total, 0); });\n"
        "  document.getElementById('sw-search').addEventListener('click', function () {\n"
        "    var q = window.prompt('Search frames (a regular expression)', ''), re, cover = [], sum = 0, last = 0;\n"
        "    if (q === null)\n"
        "      return;\n"
        "    try { re = new RegExp(q); } catch (x) { return; }\n"
        "    Array.prototype.forEach.call(frames, function (e) {\n"
        "      var r = e.querySelector('rect'), hit = q !== '' && re.test(e.getAttribute('data-name'));\n"
        "      if (!r.hasAttribute('data-fill'))\n"
        "        r.setAttribute('data-fill', r.getAttribute('fill'));\n"
        "      r.setAttribute('fill', hit ? 'rgb(230,0,230)' : r.getAttribute('data-fill'));\n"
        "      if (hit)\n"
        "        cover.push([num(e, 'data-s'), num(e, 'data-s') + num(e, 'data-n')]);\n"
        "    });\n"
        "    cover.sort(function (a, b) { return a[0] - b[0]; });\n"
        "    cover.forEach(function (c) {\n"
        "      sum += Math.max(0, c[1] - Math.max(c[0], last));\n"
        "      last = Math.max(last, c[1]);\n"
        "    });\n"
        "    matched.textContent = q === '' ? ' ' : 'Matched: ' + (100 * sum / total).toFixed(1) + '%';\n"
        "  });\n"
        "})();\n"
        "]]></script>\n";

static size_t flame_height(size_t rows) {
        return FLAME_HEAD + rows * FLAME_ROW + FLAME_FOOT;
}

static int flame_build(const Snapshot *s, const SvgOptions *o, FlameNode **ret, size_t *ret_rows) {
        FlameNode *root = calloc(1, sizeof *root);
        int r = 0;

        if (!root || !(root->name = strdup("all"))) {
                free(root);
                return -ENOMEM;
        }
        for (size_t i = 0; i < s->n_threads && r >= 0; i++)
                r = flame_add_thread(root, s, s, &s->threads[i], o->kernel);
        for (size_t p = 0; p < s->n_peers && r >= 0; p++)
                for (size_t i = 0; i < s->peers[p]->n_threads && r >= 0; i++)
                        r = flame_add_thread(root, s, s->peers[p], &s->peers[p]->threads[i], o->kernel);
        if (r < 0) {
                flame_node_free(root);
                return r;
        }
        for (size_t i = 0; i < root->n_children; i++)
                root->count += root->children[i]->count;
        /* The root itself is not drawn: its children, the classes, are the bottom bar (depth 0). */
        *ret_rows = root->n_children > 0 ? flame_layout(root, 0, 0) : 1;
        *ret = root;
        return 0;
}

static void flame_print(const Snapshot *s, const FlameNode *root, size_t rows, const SvgOptions *o, double top,
                        FILE *f) {
        FlameLayout l = {
                .x0 = FLAME_PAD,
                .width = FLAME_WIDTH - 2 * FLAME_PAD,
                .total = root->count,
                .rows = rows,
                .top = top + FLAME_HEAD,
                .icicle = o->icicle,
        };

        fprintf(f, "<g id=\"sw-flame\" data-x=\"%d\" data-width=\"%d\" data-total=\"%zu\">\n", FLAME_PAD,
                FLAME_WIDTH - 2 * FLAME_PAD, root->count);
        fprintf(f, "<text class=\"title\" x=\"%d\" y=\"%.0f\" text-anchor=\"middle\">%s of ", FLAME_WIDTH / 2,
                top + 20, o->icicle ? "Icicle graph" : "Flame graph");
        fputs_xml(s->comm ?: "?", f);
        fprintf(f, " (%d): %zu thread%s", (int) s->pid, root->count, root->count == 1 ? "" : "s");
        if (s->n_peers > 0)
                fprintf(f, " in %zu processes", s->n_peers + 1);
        fputs("</text>\n", f);
        fprintf(f, "<text id=\"sw-reset\" class=\"control\" x=\"%d\" y=\"%.0f\" style=\"display:none\">"
                   "Reset zoom</text>\n",
                FLAME_PAD, top + 40);
        fprintf(f, "<text id=\"sw-search\" class=\"control\" x=\"%d\" y=\"%.0f\" text-anchor=\"end\">Search</text>\n",
                FLAME_WIDTH - FLAME_PAD, top + 40);
        if (root->count == 0)
                fprintf(f, "<text x=\"%d\" y=\"%.0f\">no threads</text>\n", FLAME_PAD, l.top + 12);
        for (size_t i = 0; i < root->n_children; i++)
                flame_print_node(root->children[i], 0, &l, f);
        fprintf(f, "<text id=\"sw-details\" x=\"%d\" y=\"%.0f\"> </text>\n", FLAME_PAD,
                l.top + (double) (rows * FLAME_ROW) + 17);
        fprintf(f, "<text id=\"sw-matched\" x=\"%d\" y=\"%.0f\" text-anchor=\"end\"> </text>\n",
                FLAME_WIDTH - FLAME_PAD, l.top + (double) (rows * FLAME_ROW) + 17);
        fputs("</g>\n", f);
}

/* A box of the wait chain: a thread (TID > 0) or a process, or, for an edge that leads to nobody, that edge's end. */
typedef struct ChainBox {
        pid_t pid, tid;
        const WaitEdge *nobody;
        size_t in, out;
        bool red;
} ChainBox;

typedef struct ChainArc {
        size_t from, to;
        double height;          /* of an arc above (forward, skipping boxes) or below (back) the row; 0: straight */
        bool red;
        const WaitEdge *edge;
} ChainArc;

typedef struct Chain {
        ChainBox boxes[SVG_CHAIN_BOXES_MAX];
        size_t n_boxes;
        ChainArc *arcs;
        size_t n_arcs;
        size_t undrawn;         /* edges past the box budget */
        double above, below;    /* the room the arcs take */
        pid_t dl_pids[64], dl_tids[64];
        size_t n_dl;
} Chain;

static bool chain_in_deadlock(const Chain *c, pid_t pid, pid_t tid) {
        for (size_t i = 0; i < c->n_dl; i++)
                if (c->dl_pids[i] == pid && (tid == 0 || c->dl_tids[i] == tid))
                        return true;
        return false;
}

static ssize_t chain_box(Chain *c, pid_t pid, pid_t tid, const WaitEdge *nobody) {
        for (size_t i = 0; i < c->n_boxes && !nobody; i++)
                if (!c->boxes[i].nobody && c->boxes[i].pid == pid && c->boxes[i].tid == tid)
                        return (ssize_t) i;
        if (c->n_boxes >= SVG_CHAIN_BOXES_MAX)
                return -1;
        c->boxes[c->n_boxes] = (ChainBox) { .pid = pid, .tid = tid, .nobody = nobody };
        return (ssize_t) c->n_boxes++;
}

/* The thread of process PID that the chain goes on from, for a wait that names only the process at its other end (a
 * pipe's or a socket's holders): the first that waits in turn, one of the deadlock's before any other. Without it a
 * deadlock of two processes would be drawn as two pairs of boxes, each process twice, and no cycle. 0: no thread of
 * PID waits on, and the box is the process's. */
static pid_t chain_next_thread(const Chain *c, const WaitChain *w, pid_t pid) {
        pid_t first = 0;

        for (size_t i = 0; i < w->n_edges; i++) {
                const WaitEdge *e = &w->edges[i];

                if (e->pid != pid || e->tid <= 0)
                        continue;
                if (chain_in_deadlock(c, e->pid, e->tid))
                        return e->tid;
                if (first == 0)
                        first = e->tid;
        }
        return first;
}

static int chain_build(const Snapshot *s, Chain *c) {
        const WaitChain *w = s->wait_chain;

        c->n_dl = snapshot_deadlock_threads(s, c->dl_pids, c->dl_tids, ELEMENTSOF(c->dl_pids));
        c->arcs = calloc(MAX(w->n_edges, 1u), sizeof *c->arcs);
        if (!c->arcs)
                return -ENOMEM;
        for (size_t i = 0; i < w->n_edges; i++) {
                const WaitEdge *e = &w->edges[i];
                ssize_t a = chain_box(c, e->pid, e->tid, NULL), b;
                pid_t peer_tid = e->peer_tid > 0 ? e->peer_tid : chain_next_thread(c, w, e->peer_pid);
                ChainArc *arc;
                size_t span;

                b = a < 0             ? -1
                    : e->peer_pid > 0 ? chain_box(c, e->peer_pid, peer_tid, NULL)
                                      : chain_box(c, 0, 0, e);
                if (a < 0 || b < 0) {
                        c->undrawn++;
                        continue;
                }
                arc = &c->arcs[c->n_arcs++];
                *arc = (ChainArc) { .from = (size_t) a, .to = (size_t) b, .edge = e };
                arc->red = chain_in_deadlock(c, e->pid, e->tid) && e->peer_pid > 0 &&
                           chain_in_deadlock(c, e->peer_pid, e->peer_tid);
                c->boxes[a].out++;
                c->boxes[b].in++;
                if (arc->to == arc->from + 1)
                        continue;
                /* Arcs over the same span nest: each one a little higher than the one before. */
                span = arc->to > arc->from ? arc->to - arc->from : arc->from - arc->to + 1;
                arc->height = 26.0 + 16.0 * (double) span;
                for (size_t k = 0; k + 1 < c->n_arcs; k++)
                        if ((c->arcs[k].from == arc->from && c->arcs[k].to == arc->to) ||
                            (c->arcs[k].from == arc->to && c->arcs[k].to == arc->from && arc->to > arc->from))
                                arc->height += 14.0;
                if (arc->to > arc->from)
                        c->above = MAX(c->above, arc->height * 0.75 + 14);
                else
                        c->below = MAX(c->below, arc->height * 0.75 + 14);
        }
        /* Red: a deadlock's threads; without one, the end of the chain, which waits on nobody we could find while
         * others wait on it. */
        for (size_t i = 0; i < c->n_boxes; i++) {
                ChainBox *b = &c->boxes[i];

                b->red = c->n_dl > 0 ? !b->nobody && chain_in_deadlock(c, b->pid, b->tid)
                                     : !b->nobody && b->in > 0 && b->out == 0;
        }
        return 0;
}

static double box_x(size_t i) {
        return (double) (FLAME_PAD + i * (BOX_WIDTH + BOX_GAP));
}

static void chain_print_box(const Snapshot *s, const Chain *c, size_t i, double y, FILE *f) {
        const ChainBox *b = &c->boxes[i];
        const Snapshot *p = b->nobody ? NULL : snapshot_process_of(s, b->pid);
        const ThreadSnapshot *t = p && b->tid > 0 ? snapshot_find_thread((Snapshot *) p, b->tid) : NULL;
        double x = box_x(i);
        char line[64];

        fprintf(f, "<g class=\"box%s\" data-pid=\"%d\" data-tid=\"%d\"><title>", b->red ? " culprit" : "",
                (int) b->pid, (int) b->tid);
        if (b->nobody) {
                fputs("nobody found: ", f);
                fputs_xml(b->nobody->reason ?: "no process holds the other end", f);
        } else {
                fprintf(f, "process %d (", (int) b->pid);
                fputs_xml(p ? p->comm : "?", f);
                fputc(')', f);
                if (b->tid > 0) {
                        fprintf(f, "\nthread %d", (int) b->tid);
                        if (t && t->comm) {
                                fputs(" (", f);
                                fputs_xml(t->comm, f);
                                fputc(')', f);
                        }
                }
                if (t && t->syscall.kind == PROC_SYSCALL_BLOCKED)
                        fprintf(f, "\nin %s", syscall_name(t->syscall.nr) ?: "a syscall");
                if (s->trigger && b->pid == s->pid && b->tid == s->trigger->tid)
                        fputs("\nthe rule fired on this thread", f);
                if (c->n_dl > 0 && b->red)
                        fputs("\npart of the deadlock", f);
                else if (b->red)
                        fputs("\nthe end of the chain: the others wait on it", f);
        }
        fprintf(f, "</title><rect x=\"%.0f\" y=\"%.0f\" width=\"%d\" height=\"%d\" rx=\"4\" fill=\"%s\" "
                   "stroke=\"%s\"%s/>",
                x, y, BOX_WIDTH, BOX_HEIGHT,
                b->red ? "rgb(255,225,225)" : b->nobody ? "rgb(245,245,245)" : "rgb(235,240,250)",
                b->red ? "rgb(200,0,0)" : b->nobody ? "rgb(150,150,150)" : "rgb(60,80,120)",
                b->red ? " stroke-width=\"2.5\"" : b->nobody ? " stroke-dasharray=\"4 3\"" : "");
        fprintf(f, "<text class=\"name\" x=\"%.0f\" y=\"%.0f\">", x + 8, y + 16);
        if (b->nobody) {
                fputs("nobody</text>", f);
                fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">", x + 8, y + 32);
                put_clipped(b->nobody->reason ?: "no process found", BOX_CHARS, f);
                fputs("</text></g>\n", f);
                return;
        }
        snprintf(line, sizeof line, " (%d)", (int) b->pid);
        put_clipped(p && p->comm ? p->comm : "?", BOX_CHARS - strlen(line), f);
        fprintf(f, "%s</text>", line);
        fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">", x + 8, y + 32);
        if (b->tid > 0) {
                snprintf(line, sizeof line, "thread %d ", (int) b->tid);
                fputs(line, f);
                if (t && t->comm)
                        put_clipped(t->comm, BOX_CHARS - strlen(line), f);
        } else
                fputs("process", f);
        fputs("</text>", f);
        if (t && t->syscall.kind == PROC_SYSCALL_BLOCKED)
                fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">%c in %s</text>", x + 8, y + 47,
                        (t->state >= 'A' && t->state <= 'Z') ? t->state : '?',
                        syscall_name(t->syscall.nr) ?: "a syscall");
        else if (t)
                fprintf(f, "<text x=\"%.0f\" y=\"%.0f\">%s</text>", x + 8, y + 47, thread_state_to_string(t->state));
        fputs("</g>\n", f);
}

static void chain_print_arc(const Chain *c, const ChainArc *a, double y, FILE *f) {
        const WaitEdge *e = a->edge;
        const ChainBox *from = &c->boxes[a->from], *to = &c->boxes[a->to];
        const char *colour = a->red ? "rgb(200,0,0)" : "rgb(60,60,60)";
        double x1, x2, y1, cy, lx, ly;

        /* Its ends as the boxes name them (data-pid/data-tid), so that a reader of the picture can follow it. */
        fprintf(f, "<g class=\"edge%s\" data-kind=\"%s\" data-from=\"%d/%d\" ", a->red ? " deadlock" : "",
                wait_kind_to_string(e->kind) ?: "?", (int) from->pid, (int) from->tid);
        if (to->nobody)
                fputs("data-to=\"nobody\"><title>", f);
        else
                fprintf(f, "data-to=\"%d/%d\"><title>", (int) to->pid, (int) to->tid);
        fprintf(f, "%d", (int) e->tid);
        fputs(" waits in ", f);
        fputs_xml(e->syscall ?: "?", f);
        if (e->fd >= 0)
                fprintf(f, " on fd %d", e->fd);
        fputs(": ", f);
        fputs_xml(e->object ?: "?", f);
        if (e->multiplexed)
                fputs(" (in its wait set)", f);
        if (e->reason) {
                fputs("\n", f);
                fputs_xml(e->reason, f);
        }
        fputs("</title>", f);
        if (a->to == a->from + 1) {
                x1 = box_x(a->from) + BOX_WIDTH;
                x2 = box_x(a->to);
                y1 = y + BOX_HEIGHT / 2.0;
                fprintf(f, "<path d=\"M%.0f,%.0f L%.0f,%.0f\" stroke=\"%s\" fill=\"none\" "
                           "marker-end=\"url(#sw-arrow%s)\"/>",
                        x1, y1, x2 - 2, y1, colour, a->red ? "-red" : "");
                lx = (x1 + x2) / 2;
                ly = y1 - 6;
        } else {
                bool back = a->to <= a->from;

                x1 = box_x(a->from) + BOX_WIDTH / 2.0 + (back ? -12 : 12);
                x2 = box_x(a->to) + BOX_WIDTH / 2.0 + (back ? 12 : -12);
                y1 = back ? y + BOX_HEIGHT : y;
                cy = back ? y1 + a->height : y1 - a->height;
                fprintf(f, "<path d=\"M%.0f,%.0f C%.0f,%.0f %.0f,%.0f %.0f,%.0f\" stroke=\"%s\" fill=\"none\" "
                        "marker-end=\"url(#sw-arrow%s)\"/>",
                        x1, y1, x1, cy, x2, cy, x2, back ? y1 + 2 : y1 - 2, colour, a->red ? "-red" : "");
                lx = (x1 + x2) / 2;
                ly = back ? y1 + a->height * 0.75 + 12 : y1 - a->height * 0.75 - 4;
        }
        fprintf(f, "<text class=\"kind\" x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\" fill=\"%s\">%s</text></g>\n", lx,
                ly, colour, wait_kind_to_string(e->kind) ?: "?");
}

static double chain_height(const Chain *c) {
        return CHAIN_HEAD + c->above + BOX_HEIGHT + c->below + 24;
}

static double chain_width(const Chain *c) {
        return c->n_boxes == 0 ? 0 : box_x(c->n_boxes - 1) + BOX_WIDTH + FLAME_PAD;
}

static void chain_print(const Snapshot *s, const Chain *c, double top, FILE *f) {
        const WaitChain *w = s->wait_chain;
        double y = top + CHAIN_HEAD + c->above;

        fprintf(f, "<g id=\"sw-chain\">\n<text class=\"title\" x=\"%d\" y=\"%.0f\">Wait chain of ", FLAME_PAD,
                top + 20);
        fputs_xml(s->comm ?: "?", f);
        fprintf(f, " (%d)", (int) s->pid);
        if (w->n_edges == 0)
                fputs(": no thread waits on another process or a lock's holder", f);
        fputs("</text>\n", f);
        if (c->n_dl > 0) {
                fprintf(f, "<text class=\"deadlock\" x=\"%d\" y=\"%.0f\" fill=\"rgb(200,0,0)\">DEADLOCK:", FLAME_PAD,
                        top + 36);
                for (size_t i = 0; i <= c->n_dl; i++)
                        fprintf(f, "%s thread %d of %d", i ? " →" : "", (int) c->dl_tids[i % c->n_dl],
                                (int) c->dl_pids[i % c->n_dl]);
                fputs(" wait on each other</text>\n", f);
        }
        for (size_t i = 0; i < c->n_arcs; i++)
                chain_print_arc(c, &c->arcs[i], y, f);
        for (size_t i = 0; i < c->n_boxes; i++)
                chain_print_box(s, c, i, y, f);
        if (c->undrawn > 0 || w->truncated)
                fprintf(f, "<text x=\"%d\" y=\"%.0f\">%zu more wait%s not drawn%s</text>\n", FLAME_PAD,
                        y + BOX_HEIGHT + c->below + 16, c->undrawn, c->undrawn == 1 ? "" : "s",
                        w->truncated ? "; the chain was cut by a budget" : "");
        fputs("</g>\n", f);
}

int snapshot_print_svg(const Snapshot *s, const SvgOptions *o, FILE *f) {
        _cleanup_free_ ChainArc *arcs = NULL;
        FlameNode *root = NULL;
        Chain chain = {};
        bool with_chain, with_flame;
        size_t rows = 0;
        double width = FLAME_WIDTH, height = 0;
        int r;

        o = o ?: &(SvgOptions) {};
        with_chain = s->wait_chain && (o->picture == SVG_PICTURE_CHAIN || o->picture == SVG_PICTURE_ALL);
        with_flame = o->picture != SVG_PICTURE_CHAIN;
        if (with_chain) {
                r = chain_build(s, &chain);
                arcs = chain.arcs;
                if (r < 0)
                        return r;
                height += chain_height(&chain);
                width = MAX(width, chain_width(&chain));
        }
        if (with_flame) {
                r = flame_build(s, o, &root, &rows);
                if (r < 0)
                        return r;
                height += (double) flame_height(rows);
        }
        if (!with_chain && !with_flame)
                height = CHAIN_HEAD; /* a chain asked of a snapshot that has none: say so */

        fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"no\"?>\n"
                   "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                   "viewBox=\"0 0 %.0f %.0f\" class=\"stackwatch\">\n",
                width, height, width, height);
        fputs("<defs>"
              "<marker id=\"sw-arrow\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" "
              "markerHeight=\"7\" orient=\"auto\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"rgb(60,60,60)\"/></marker>"
              "<marker id=\"sw-arrow-red\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" "
              "markerHeight=\"7\" orient=\"auto\"><path d=\"M0,0 L10,5 L0,10 z\" fill=\"rgb(200,0,0)\"/></marker>"
              "</defs>\n"
              "<style>svg.stackwatch text { font-family: Verdana, sans-serif; font-size: 12px; fill: rgb(0,0,0); }\n"
              "svg.stackwatch text.title { font-size: 16px; }\n"
              "svg.stackwatch text.name { font-weight: bold; }\n"
              "svg.stackwatch text.kind { font-size: 11px; }\n"
              "svg.stackwatch text.deadlock { fill: rgb(200,0,0); font-weight: bold; }\n"
              "svg.stackwatch text.control { fill: rgb(0,80,200); cursor: pointer; }\n"
              "svg.stackwatch g.frame { cursor: pointer; }\n"
              "svg.stackwatch g.frame:hover rect { stroke: rgb(0,0,0); stroke-width: 0.5; }\n"
              "svg.stackwatch g.frame text { font-size: 11px; pointer-events: none; }</style>\n"
              "<rect x=\"0\" y=\"0\" width=\"100%\" height=\"100%\" fill=\"rgb(250,250,250)\"/>\n",
              f);
        if (with_chain)
                chain_print(s, &chain, 0, f);
        else if (!with_flame)
                fprintf(f, "<text class=\"title\" x=\"%d\" y=\"20\">No wait chain: the snapshot was taken without "
                           "following its waits</text>\n", FLAME_PAD);
        if (with_flame) {
                flame_print(s, root, rows, o, with_chain ? chain_height(&chain) : 0, f);
                fputs(flame_script, f);
                flame_node_free(root);
        }
        fputs("</svg>\n", f);
        return ferror(f) ? -EIO : 0;
}
