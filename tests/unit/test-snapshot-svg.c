/* test-snapshot-svg.c: the SVG pictures of snapshots read from JSON documents (tests/unit/data/svg-*.json, written
 * by svg-fixtures.py), against committed goldens; every picture well-formed XML (xmllint); hostile names escaped.
 * STACKWATCH_UPDATE_GOLDEN=1 writes the goldens instead of comparing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/escape.h"
#include "base/json-util.h"
#include "base/macro.h"
#include "render/snapshot-json.h"
#include "render/snapshot-svg.h"
#include "unit.h"

static const char *srcdir(void) {
        return getenv("STACKWATCH_SRCDIR") ?: getenv("srcdir") ?: ".";
}

static char *slurp(const char *path, size_t *ret_n) {
        FILE *f = fopen(path, "re");
        char *buf;
        long n;

        if (!f)
                return NULL;
        ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
        n = ftell(f);
        rewind(f);
        buf = malloc((size_t) n + 1);
        ck_assert_ptr_nonnull(buf);
        ck_assert_uint_eq(fread(buf, 1, (size_t) n, f), (size_t) n);
        buf[n] = '\0';
        fclose(f);
        *ret_n = (size_t) n;
        return buf;
}

static Snapshot *load(const char *name) {
        char path[4096];
        _cleanup_free_ char *text = NULL;
        Snapshot *s = NULL;
        json_object *j = NULL;
        const char *why = NULL;
        size_t n;

        snprintf(path, sizeof path, "%s/tests/unit/data/%s.json", srcdir(), name);
        text = slurp(path, &n);
        ck_assert_msg(text, "%s", path);
        ck_assert_int_ge(json_parse_bounded(text, n, &j, &why), 0);
        ck_assert_msg(snapshot_from_json(j, &s, &why) >= 0, "%s: %s", path, why ?: "?");
        json_object_put(j);
        return s;
}

/* Draw NAME.json with O, check the picture with xmllint and against GOLDEN.svg; the picture is returned. */
static char *draw(const char *name, const char *golden, const SvgOptions *o) {
        _cleanup_snapshot_free_ Snapshot *s = load(name);
        char path[4096], tmp[] = "/tmp/test-snapshot-svg.XXXXXX", cmd[256];
        _cleanup_free_ char *want = NULL;
        char *svg = NULL;
        size_t size = 0, n;
        FILE *f;
        int fd;

        f = open_memstream(&svg, &size);
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(snapshot_print_svg(s, o, f), 0);
        ck_assert_int_eq(fclose(f), 0);

        /* Well-formed XML, as a browser's SVG parser wants it. */
        fd = mkstemp(tmp);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(write(fd, svg, size), (ssize_t) size);
        close(fd);
        ck_assert_msg(access("/usr/bin/xmllint", X_OK) == 0, "xmllint is missing (Debian: libxml2-utils)");
        snprintf(cmd, sizeof cmd, "/usr/bin/xmllint --noout %s", tmp);
        ck_assert_msg(system(cmd) == 0, "%s: not well-formed (kept in %s)", golden, tmp);
        unlink(tmp);

        snprintf(path, sizeof path, "%s/tests/unit/data/%s.svg", srcdir(), golden);
        if (getenv("STACKWATCH_UPDATE_GOLDEN")) {
                f = fopen(path, "we");
                ck_assert_ptr_nonnull(f);
                ck_assert_uint_eq(fwrite(svg, 1, size, f), size);
                ck_assert_int_eq(fclose(f), 0);
                return svg;
        }
        want = slurp(path, &n);
        ck_assert_msg(want, "no golden %s (STACKWATCH_UPDATE_GOLDEN=1 writes it)", path);
        ck_assert_msg(n == size && memcmp(want, svg, n) == 0,
                      "%s differs from %s (STACKWATCH_UPDATE_GOLDEN=1 rewrites it)", golden, path);
        return svg;
}

static size_t count(const char *hay, const char *needle) {
        size_t n = 0;

        for (const char *p = hay; (p = strstr(p, needle)); p++)
                n++;
        return n;
}

START_TEST(test_crowd) {
        _cleanup_free_ char *svg = draw("svg-crowd", "svg-crowd", &(SvgOptions) { .kernel = true });

        /* 40 threads: 24 alike, 12 alike, 3 in D state, 1 on a CPU; merged from the outermost frame up, under their
         * class (the 36 waiting ones here). */
        ck_assert_ptr_nonnull(strstr(svg, "data-name=\"pthread_cond_wait\"><title>pthread_cond_wait\n"
                                          "pthread_cond_wait.c:618\nin /usr/lib/x86_64-linux-gnu/libc.so.6\n"
                                          "24 threads, 60.0%</title>"));
        ck_assert_ptr_nonnull(strstr(svg, "<title>worker\ncrowd.c:40\nin /usr/bin/crowd\n36 threads, 90.0%</title>"));
        ck_assert_ptr_nonnull(strstr(svg, "<title>start_thread\npthread_create.c:442\n"
                                          "in /usr/lib/x86_64-linux-gnu/libc.so.6\n36 threads, 90.0%</title>"));
        /* The bottom bar: the problem class first (the three in D state, the rule's thread among them). */
        ck_assert_ptr_nonnull(strstr(svg, "data-kind=\"class\" data-s=\"0\" data-n=\"3\" data-d=\"0\" "
                                          "data-name=\"blocked\""));
        ck_assert_ptr_nonnull(strstr(svg, "data-kind=\"class\" data-s=\"3\" data-n=\"1\" data-d=\"0\" "
                                          "data-name=\"running\""));
        ck_assert_ptr_nonnull(strstr(svg, "data-kind=\"class\" data-s=\"4\" data-n=\"36\" data-d=\"0\" "
                                          "data-name=\"waiting\""));
        ck_assert_ptr_nonnull(strstr(svg, "data-kind=\"kernel\""));
        /* No chain asked: none drawn. The script attaches listeners; no inline handler. */
        ck_assert_ptr_null(strstr(svg, "sw-chain"));
        ck_assert_uint_eq(count(svg, "<script"), 1);
        ck_assert_ptr_nonnull(strstr(svg, "addEventListener('click'"));
        ck_assert_ptr_null(strstr(svg, "onclick"));
        ck_assert_ptr_null(strstr(svg, "onmouseover"));
}
END_TEST

START_TEST(test_crowd_icicle) {
        _cleanup_free_ char *svg = draw("svg-crowd", "svg-crowd-icicle",
                                        &(SvgOptions) { .picture = SVG_PICTURE_FLAME, .icicle = true });

        ck_assert_ptr_nonnull(strstr(svg, "Icicle graph of crowd (4100): 40 threads"));
        ck_assert_ptr_null(strstr(svg, "data-kind=\"kernel\""));
        /* Upside down: the bottom bar is the top row. */
        ck_assert_ptr_nonnull(strstr(svg, "data-name=\"blocked\"><title>blocked\n3 threads, 7.5%</title>"
                                          "<rect x=\"10.00\" y=\"52\""));
}
END_TEST

START_TEST(test_deadlock) {
        _cleanup_free_ char *svg = draw("svg-deadlock", "svg-deadlock", &(SvgOptions) { .kernel = false });
        _cleanup_free_ char *chain = draw("svg-deadlock", "svg-deadlock-chain",
                                          &(SvgOptions) { .picture = SVG_PICTURE_CHAIN });

        /* Both tellers red, both mutex waits red, the pipe to the logger not. */
        ck_assert_uint_eq(count(svg, "<g class=\"box culprit\""), 2);
        ck_assert_uint_eq(count(svg, "<g class=\"edge deadlock\" data-kind=\"mutex\" "), 2);
        ck_assert_ptr_nonnull(
                strstr(svg, "<g class=\"edge\" data-kind=\"pipe\" data-from=\"4200/4200\" data-to=\"4300/4300\">"));
        ck_assert_ptr_nonnull(
                strstr(svg, "<g class=\"edge\" data-kind=\"child\" data-from=\"4300/4300\" data-to=\"nobody\">"));
        ck_assert_ptr_nonnull(
                strstr(svg, "DEADLOCK: thread 4201 of 4200 → thread 4202 of 4200 → thread 4201 of 4200"));
        /* The back edge is an arc below the row. */
        ck_assert_ptr_nonnull(strstr(svg, " C"));
        /* The flame graph holds the peer's thread too. */
        ck_assert_ptr_nonnull(strstr(svg, "data-name=\"logger (4300)\""));
        ck_assert_ptr_nonnull(strstr(svg, "in 2 processes"));
        ck_assert_ptr_null(strstr(chain, "sw-flame"));
        ck_assert_ptr_null(strstr(chain, "<script"));
        ck_assert_ptr_nonnull(strstr(chain, "sw-chain"));
}
END_TEST

/* Two processes, each reading the pipe only the other writes: a pipe's wait names the process at its other end, and
 * the chain goes on from that process's waiting thread: two boxes and the waits between them both ways, a cycle. */
START_TEST(test_pipe_deadlock) {
        _cleanup_free_ char *chain = draw("svg-pipe-deadlock", "svg-pipe-deadlock-chain",
                                          &(SvgOptions) { .picture = SVG_PICTURE_CHAIN });

        ck_assert_uint_eq(count(chain, "<g class=\"box"), 2);
        ck_assert_ptr_nonnull(strstr(chain, "<g class=\"box culprit\" data-pid=\"4700\" data-tid=\"4700\">"));
        ck_assert_ptr_nonnull(strstr(chain, "<g class=\"box culprit\" data-pid=\"4701\" data-tid=\"4701\">"));
        ck_assert_ptr_null(strstr(chain, "data-tid=\"0\""));
        ck_assert_ptr_nonnull(strstr(chain, "<g class=\"edge deadlock\" data-kind=\"pipe\" data-from=\"4700/4700\" "
                                            "data-to=\"4701/4701\">"));
        ck_assert_ptr_nonnull(strstr(chain, "<g class=\"edge deadlock\" data-kind=\"pipe\" data-from=\"4701/4701\" "
                                            "data-to=\"4700/4700\">"));
        /* The way back is an arc below the row. */
        ck_assert_ptr_nonnull(strstr(chain, " C"));
        ck_assert_ptr_nonnull(
                strstr(chain, "DEADLOCK: thread 4700 of 4700 → thread 4701 of 4701 → thread 4700 of 4700"));
}
END_TEST

START_TEST(test_runtimes) {
        _cleanup_free_ char *svg = draw("svg-runtimes", "svg-runtimes",
                                        &(SvgOptions) { .picture = SVG_PICTURE_FLAME });

        /* The program's code green (runtime), the interpreter's machinery yellow, the rest native. */
        ck_assert_ptr_nonnull(strstr(svg, "data-kind=\"runtime\" data-s=\"1\" data-n=\"1\" data-d=\"5\" "
                                          "data-name=\"Worker.run (app.py)\""));
        ck_assert_ptr_nonnull(strstr(svg, "data-kind=\"runtime\" data-s=\"0\" data-n=\"1\" data-d=\"5\" "
                                          "data-name=\"Hung.run (Hung.java)\""));
        ck_assert_ptr_nonnull(strstr(svg, "data-kind=\"runtime\" data-s=\"2\" data-n=\"1\" data-d=\"3\" "
                                          "data-name=\"main.(*Server).serve\""));
        ck_assert_ptr_nonnull(strstr(svg, "data-kind=\"interpreter\" data-s=\"2\" data-n=\"1\" data-d=\"2\" "
                                          "data-name=\"runtime.goexit\""));
        ck_assert_ptr_nonnull(strstr(svg, "data-kind=\"interpreter\" data-s=\"1\" data-n=\"1\" data-d=\"4\" "
                                          "data-name=\"Py_RunMain\""));
        ck_assert_ptr_nonnull(strstr(svg, "data-kind=\"interpreter\" data-s=\"0\" data-n=\"1\" data-d=\"4\" "
                                          "data-name=\"JavaCalls::call_helper\""));
        /* The interpreter's eval frame stands for the Python frames: not drawn, as in the folded form. */
        ck_assert_ptr_null(strstr(svg, "_PyEval_EvalFrameDefault"));
}
END_TEST

START_TEST(test_hostile) {
        _cleanup_free_ char *svg = draw("svg-hostile", "svg-hostile", &(SvgOptions) { .kernel = true });

        ck_assert_ptr_null(strstr(svg, "<img"));
        ck_assert_ptr_null(strstr(svg, "<script>alert"));
        ck_assert_ptr_null(strstr(svg, "<script>x"));
        ck_assert_ptr_null(strstr(svg, "</text><script>"));
        ck_assert_ptr_null(strstr(svg, "<k>"));
        ck_assert_ptr_null(strstr(svg, "<reason>"));
        ck_assert_uint_eq(count(svg, "<script"), 1);
        ck_assert_ptr_nonnull(strstr(svg, "&lt;img src=x onerror=alert(1)&gt;"));
        ck_assert_ptr_nonnull(strstr(svg, "&quot;quoted&quot; &amp; &#39;apos&#39;"));
        ck_assert_ptr_nonnull(strstr(svg, "&lt;script&gt;alert(1)&lt;/script&gt;"));
        ck_assert_ptr_nonnull(strstr(svg, "a&amp;b&lt;c&gt;.c:7"));
        /* Controls, bidi overrides and bytes that are not UTF-8 made visible; no ]]> outside the script. */
        ck_assert_ptr_nonnull(strstr(svg, "esc\\e[2Jape\\nnew\u00a0line\\xe2\\x80\\xaetxt.exe"));
        ck_assert_ptr_nonnull(strstr(svg, "bad\\xffutf8"));
        ck_assert_ptr_nonnull(strstr(svg, "\\x07bell"));
        ck_assert_uint_eq(count(svg, "]]>"), 1);
        for (const unsigned char *p = (const unsigned char *) svg; *p; p++)
                ck_assert_msg(*p >= 0x20 || *p == '\n', "control byte 0x%02x in the picture", *p);
        ck_assert_uint_eq(utf8_sequence_len(svg, 1, NULL), 1);
        for (size_t i = 0, n = strlen(svg), k; i < n; i += k) {
                k = utf8_sequence_len(svg + i, n - i, NULL);
                ck_assert_msg(k > 0, "not UTF-8 at byte %zu", i);
        }
}
END_TEST

/* A deep stack is drawn in time linear in its frames (a layout that walked each subtree twice per level took
 * 2^depth). */
START_TEST(test_deep_stack) {
        _cleanup_snapshot_free_ Snapshot *s = snapshot_new();
        _cleanup_free_ char *svg = NULL;
        ThreadSnapshot *t;
        size_t size = 0;
        FILE *f;

        ck_assert_ptr_nonnull(s);
        s->pid = 7;
        t = snapshot_add_thread(s);
        ck_assert_ptr_nonnull(t);
        t->tid = 7;
        t->state = 'S';
        for (unsigned i = 0; i < 500; i++) {
                UserFrame *u = thread_add_frame(t);

                ck_assert_ptr_nonnull(u);
                u->module = -1;
                ck_assert_int_ge(asprintf(&u->function, "level_%03u", i), 0);
        }
        f = open_memstream(&svg, &size);
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(snapshot_print_svg(s, &(SvgOptions) { .picture = SVG_PICTURE_FLAME }, f), 0);
        ck_assert_int_eq(fclose(f), 0);
        ck_assert_uint_eq(count(svg, "<g class=\"frame\""), 502);
}
END_TEST

START_TEST(test_picture_names) {
        ck_assert_int_eq(svg_picture_from_string("all"), SVG_PICTURE_ALL);
        ck_assert_int_eq(svg_picture_from_string("flame"), SVG_PICTURE_FLAME);
        ck_assert_int_eq(svg_picture_from_string("chain"), SVG_PICTURE_CHAIN);
        ck_assert_int_eq(svg_picture_from_string("Flame"), -EINVAL);
        ck_assert_str_eq(svg_picture_to_string(SVG_PICTURE_CHAIN), "chain");
}
END_TEST

UNIT_TEST_MAIN("snapshot-svg", test_crowd, test_crowd_icicle, test_deadlock, test_pipe_deadlock, test_runtimes,
               test_hostile, test_deep_stack, test_picture_names)
