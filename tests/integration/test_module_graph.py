"""The module graph stays one-way: tests/module-graph passes on our tree and fails on a tree with a cycle."""
import os
import subprocess
import textwrap

from conftest import BUILDDIR, SRCDIR

SCRIPT = os.path.join(SRCDIR, "tests", "module-graph")
README = """\
| file | layer | concern |
| --- | --- | --- |
| `a.[ch]` | base | a |
| `b.[ch]` | {b_layer} | b |
"""


def run(srcdir, builddir):
    return subprocess.run([SCRIPT, "--srcdir", srcdir, "--builddir", builddir, "--print"],
                          capture_output=True, text=True, timeout=60)


def test_our_tree_has_no_cycle():
    p = run(SRCDIR, BUILDDIR)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "no cycle" in p.stdout
    # The graph it printed names the modules the daemon is wired from, the manager last of its own.
    lines = p.stdout.splitlines()
    assert any(line.startswith("daemon/manager") for line in lines)
    assert any(line.startswith("lib/macro [base]") for line in lines)


def make_tree(tmp_path, a_src, b_src, b_layer="base"):
    """lib/a.[ch] and lib/b.[ch] built as the program objects the script reads."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "README.md").write_text(README.format(b_layer=b_layer))
    (lib / "a.h").write_text("int a(int x);\n")
    (lib / "b.h").write_text("int b(int x);\n")
    (lib / "a.c").write_text(textwrap.dedent(a_src))
    (lib / "b.c").write_text(textwrap.dedent(b_src))
    for m in ("a", "b"):
        subprocess.run(["cc", "-c", "-o", str(lib / f"libstackwatch_a-{m}.o"), str(lib / f"{m}.c")], check=True)
    return str(tmp_path)


def test_a_call_cycle_fails_naming_the_files(tmp_path):
    # Neither header includes the other: the cycle is only in the objects' symbols.
    tree = make_tree(tmp_path,
                     "int b(int x);\nint a(int x) { return x ? b(x - 1) : 0; }\n",
                     "int a(int x);\nint b(int x) { return x ? a(x - 1) : 1; }\n")
    p = run(tree, tree)
    assert p.returncode == 1, p.stdout
    assert "cycle between lib/a, lib/b" in p.stdout
    assert "lib/a.c uses a() from lib/a.c" not in p.stdout
    assert "lib/a.c uses b() from lib/b.c" in p.stdout
    assert "lib/b.c uses a() from lib/a.c" in p.stdout


def test_an_include_cycle_fails(tmp_path):
    tree = make_tree(tmp_path, '#include "b.h"\nint a(int x) { return x; }\n',
                     '#include "a.h"\nint b(int x) { return x; }\n')
    p = run(tree, tree)
    assert p.returncode == 1, p.stdout
    assert "lib/a.c includes lib/b.h" in p.stdout and "lib/b.c includes lib/a.h" in p.stdout


def test_one_way_is_fine_and_a_later_layer_is_not(tmp_path):
    one_way = make_tree(tmp_path, '#include "b.h"\nint a(int x) { return b(x); }\n', "int b(int x) { return x; }\n",
                        b_layer="store")
    p = run(one_way, one_way)
    # a (base) uses b (store): no cycle, but a layer broken.
    assert p.returncode == 1, p.stdout
    assert "cycle" not in p.stdout.replace("no cycle", "")
    assert "lib/a (base) must not depend on lib/b (store)" in p.stdout
    with open(os.path.join(one_way, "lib", "README.md"), "w") as f:
        f.write(README.format(b_layer="base"))
    p = run(one_way, one_way)
    assert p.returncode == 0, p.stdout
    assert "2 modules, 1 dependencies, no cycle" in p.stdout


def test_a_module_missing_from_the_readme_fails(tmp_path):
    tree = make_tree(tmp_path, "int a(int x) { return x; }\n", "int b(int x) { return x; }\n")
    (tmp_path / "lib" / "c.h").write_text("int c;\n")
    p = run(tree, tree)
    assert p.returncode == 1
    assert "lib/c has no row" in p.stdout
