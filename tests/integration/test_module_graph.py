"""The module graph stays one-way: tests/module-graph passes on our tree and fails on a tree with a cycle, on a
lib/ module that reaches a later layer's folder, and on a file-level circle in client/ or daemon/."""
import os
import subprocess
import textwrap

from conftest import BUILDDIR, SRCDIR

SCRIPT = os.path.join(SRCDIR, "tests", "module-graph")
TABLE = "| files | concern |\n| --- | --- |\n"


def run(srcdir, builddir):
    return subprocess.run([SCRIPT, "--srcdir", srcdir, "--builddir", builddir, "--print"],
                          capture_output=True, text=True, timeout=60)


def test_our_tree_has_no_cycle():
    p = run(SRCDIR, BUILDDIR)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "no cycle" in p.stdout
    lines = p.stdout.splitlines()
    # The graph it printed names the modules the daemon is wired from, and lib/'s by their layer's folder.
    assert any(line.startswith("daemon/manager:") for line in lines)
    assert any(line.startswith("lib/base/macro") for line in lines)
    assert any(line.startswith("lib/unwind/unwind:") for line in lines)
    # The daemon's transport knows no routes; the client's snapshot sources do not know each other.
    http = next(line for line in lines if line.startswith("daemon/http:"))
    routes = next(line for line in lines if line.startswith("daemon/http-routes:"))
    assert "daemon/http-routes" not in http and "daemon/http" in routes
    # Nothing of ours sits at the top of lib/.
    assert not [f for f in os.listdir(os.path.join(SRCDIR, "lib")) if f.endswith((".c", ".h"))]


def compile_objects(tree, objects):
    """Build each (source, object) pair as the program objects the script reads."""
    for src, obj in objects:
        subprocess.run(["cc", "-c", "-I", str(tree / "lib"), "-o", str(tree / obj), str(tree / src)], check=True)


def make_lib(tmp_path, a_src, b_src, b_layer="base", rows=None):
    """lib/base/a.[ch] and lib/B_LAYER/b.[ch], with lib/README.md's module table."""
    lib = tmp_path / "lib"
    for d in {"base", b_layer}:
        (lib / d).mkdir(parents=True, exist_ok=True)
    (lib / "README.md").write_text(TABLE + "".join(f"| {r} | x |\n" for r in
                                                   (rows or ["`base/a.[ch]`", f"`{b_layer}/b.[ch]`"])))
    (lib / "base" / "a.h").write_text("int a(int x);\n")
    (lib / b_layer / "b.h").write_text("int b(int x);\n")
    (lib / "base" / "a.c").write_text(textwrap.dedent(a_src))
    (lib / b_layer / "b.c").write_text(textwrap.dedent(b_src))
    compile_objects(tmp_path, [("lib/base/a.c", "lib/base/libstackwatch_a-a.o"),
                               (f"lib/{b_layer}/b.c", f"lib/{b_layer}/libstackwatch_a-b.o")])
    return str(tmp_path)


def test_a_call_cycle_fails_naming_the_files(tmp_path):
    # Neither header includes the other: the cycle is only in the objects' symbols.
    tree = make_lib(tmp_path,
                    "int b(int x);\nint a(int x) { return x ? b(x - 1) : 0; }\n",
                    "int a(int x);\nint b(int x) { return x ? a(x - 1) : 1; }\n")
    p = run(tree, tree)
    assert p.returncode == 1, p.stdout
    assert "cycle between lib/base/a, lib/base/b" in p.stdout
    assert "lib/base/a.c uses a() from lib/base/a.c" not in p.stdout
    assert "lib/base/a.c uses b() from lib/base/b.c" in p.stdout
    assert "lib/base/b.c uses a() from lib/base/a.c" in p.stdout


def test_an_include_cycle_fails(tmp_path):
    tree = make_lib(tmp_path, '#include "base/b.h"\nint a(int x) { return x; }\n',
                    '#include "base/a.h"\nint b(int x) { return x; }\n')
    p = run(tree, tree)
    assert p.returncode == 1, p.stdout
    assert "lib/base/a.c includes lib/base/b.h" in p.stdout and "lib/base/b.c includes lib/base/a.h" in p.stdout


def test_an_include_of_a_later_layer_fails_and_one_of_an_earlier_passes(tmp_path):
    # a (base) includes b (store): no cycle, but a layer broken, found from the include alone.
    tree = make_lib(tmp_path, '#include "store/b.h"\nint a(int x) { return x; }\n', "int b(int x) { return x; }\n",
                    b_layer="store")
    p = run(tree, tree)
    assert p.returncode == 1, p.stdout
    assert "cycle" not in p.stdout.replace("no cycle", "")
    assert ("lib/base/a (base) must not depend on lib/store/b (store), a later layer: "
            "lib/base/a.c includes lib/store/b.h") in p.stdout


def test_a_symbol_of_a_later_layer_fails(tmp_path):
    tree = make_lib(tmp_path, "int b(int x);\nint a(int x) { return b(x); }\n", "int b(int x) { return x; }\n",
                    b_layer="chain")
    p = run(tree, tree)
    assert p.returncode == 1, p.stdout
    assert "lib/base/a.c uses b() from lib/chain/b.c" in p.stdout


def test_the_other_way_round_passes(tmp_path):
    tree = make_lib(tmp_path, "int a(int x) { return x; }\n", '#include "base/a.h"\nint b(int x) { return a(x); }\n',
                    b_layer="store")
    p = run(tree, tree)
    assert p.returncode == 0, p.stdout
    assert "2 modules, 1 dependencies, no cycle" in p.stdout


def test_an_include_that_does_not_name_its_folder_fails(tmp_path):
    tree = make_lib(tmp_path, '#include "a.h"\nint a(int x) { return x; }\n', "int b(int x) { return x; }\n")
    p = run(tree, tree)
    assert p.returncode == 1, p.stdout
    assert 'lib/base/a.c includes "a.h": name its folder, "base/a.h"' in p.stdout


def test_a_file_outside_a_layer_or_missing_from_the_readme_fails(tmp_path):
    tree = make_lib(tmp_path, "int a(int x) { return x; }\n", "int b(int x) { return x; }\n")
    (tmp_path / "lib" / "base" / "c.h").write_text("int c;\n")
    (tmp_path / "lib" / "d.h").write_text("int d;\n")
    (tmp_path / "lib" / "misc").mkdir()
    (tmp_path / "lib" / "misc" / "e.h").write_text("int e;\n")
    p = run(tree, tree)
    assert p.returncode == 1
    assert "lib/base/c has no row in lib/README.md" in p.stdout
    assert "lib/d.h is in no layer" in p.stdout
    assert "lib/misc/e is in lib/misc/, which is not a layer" in p.stdout


# The two circles the old check passed because it made every client/stackctl-*.c one module and daemon/http-routes.c
# part of daemon/http, shaped as they stood: the archive verbs called the journal's list and show, the journal code
# called back into the archive file's matching and printing; the transport called the route table, the routes
# called the transport's reply functions.
CIRCLES = {
    "client": ("stackctl-archive", "stackctl-journal",
               "int journal_list(void);\nint matches(void) { return 1; }\nint verb_list(void) { return journal_list(); }\n",
               "int matches(void);\nint journal_list(void) { return matches(); }\n", "stackctl"),
    "daemon": ("http", "http-routes",
               '#include "http-routes.h"\nint http_reply(void) { return 0; }\nint http_serve(void) { return http_routes_dispatch(); }\n',
               '#include "http.h"\nint http_routes_dispatch(void) { return http_reply(); }\n', "stackwatchd"),
}


def make_circle(tmp_path, folder, declared):
    a, b, a_src, b_src, prog = CIRCLES[folder]
    (tmp_path / "lib" / "base").mkdir(parents=True)
    (tmp_path / "lib" / "README.md").write_text(TABLE)
    d = tmp_path / folder
    d.mkdir()
    (d / f"{a}.c").write_text(a_src)
    (d / f"{b}.c").write_text(b_src)
    if folder == "daemon":
        (d / "http.h").write_text("int http_reply(void);\n")
        (d / "http-routes.h").write_text("int http_routes_dispatch(void);\n")
    rows = [f"`{a}.c`, `{b}.c`"] if declared else [f"`{a}.c`", f"`{b}.c`"]
    if folder == "daemon":
        rows = ["`http.[ch]`, `http-routes.[ch]`"] if declared else ["`http.[ch]`", "`http-routes.[ch]`"]
    (d / "README.md").write_text(TABLE + "".join(f"| {r} | x |\n" for r in rows))
    compile_objects(tmp_path, [(f"{folder}/{m}.c", f"{folder}/{prog}-{m}.o") for m in (a, b)])
    return str(tmp_path)


def test_a_file_level_circle_in_client_fails(tmp_path):
    tree = make_circle(tmp_path, "client", declared=False)
    p = run(tree, tree)
    assert p.returncode == 1, p.stdout
    assert "cycle between client/stackctl-archive, client/stackctl-journal" in p.stdout
    assert "client/stackctl-archive.c uses journal_list() from client/stackctl-journal.c" in p.stdout
    assert "client/stackctl-journal.c uses matches() from client/stackctl-archive.c" in p.stdout


def test_a_file_level_circle_in_daemon_fails(tmp_path):
    tree = make_circle(tmp_path, "daemon", declared=False)
    p = run(tree, tree)
    assert p.returncode == 1, p.stdout
    assert "cycle between daemon/http, daemon/http-routes" in p.stdout
    assert "daemon/http-routes.c includes daemon/http.h" in p.stdout


def test_a_declared_private_part_is_one_module_with_its_owner(tmp_path):
    # What the old check did to every stackctl-*.c, now only where a README row says so.
    tree = make_circle(tmp_path, "client", declared=True)
    p = run(tree, tree)
    assert p.returncode == 0, p.stdout
    assert "1 modules, 0 dependencies, no cycle" in p.stdout
