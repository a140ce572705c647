"""A Go program where users run it (issue 28): in a container's mount namespace, whose files the host does not
see, its goroutines are read through /proc/PID/root as from the host's copy."""
import json
import os
import shutil
import subprocess

import pytest

from conftest import stackctl
from test_go_goroutines import go_builds  # noqa: F401  (a fixture)


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason="needs root and unshare(1)")
@pytest.mark.parametrize("variant", ["dwarf", "nodwarf"])
def test_a_go_program_in_another_mount_namespace(go_builds, tmp_path, variant):
    """The Go binary copied onto a tmpfs mounted in a private mount namespace, over a directory that is empty
    outside it, as a container's files are: its symbols, DWARF or function table are read through /proc/PID/root,
    and its goroutines are the same as from the host's copy (the named ones, their reasons and own frames)."""
    ns = tmp_path / "ns"
    ns.mkdir()
    script = "\n".join([
        "set -e",
        f"mount -t tmpfs -o size=64m stackwatch-ns '{ns}'",
        f"cp '{go_builds.binary(variant)}' '{ns}/hung'",
        f"exec '{ns}/hung' -idle 50 -oracle '{ns}/oracle.txt'",
    ])
    p = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                         stdout=subprocess.PIPE, env=dict(os.environ, FIXTURE_LIFETIME="120"))
    try:
        line = p.stdout.readline().decode()
        assert line.startswith("ready "), line
        goids = dict(x.split(":") for x in line.split("goids=", 1)[1].split()[0].split(","))
        assert not os.path.exists(f"{ns}/hung"), "the binary must exist only inside the namespace"
        r = stackctl("dump", "--json", str(p.pid))
        assert r.returncode in (0, 5), r.stderr
        doc = json.loads(r.stdout)
        assert doc["go"]["layout"] == ("dwarf" if variant == "dwarf" else "table")
        gs = {g["goid"]: g for g in doc["goroutines"]}
        stacks = doc["goroutine_stacks"]
        for name, goid in goids.items():
            g = gs[int(goid)]
            fns = [f["function"] for f in stacks[g["stack"]]]
            assert f"main.{name}" in fns, (name, fns)
            own = next(f for f in stacks[g["stack"]] if f["function"] == f"main.{name}")
            assert own["file"].endswith("/hung/main.go") and own["line"] > 0, own
        assert sum(1 for g in gs.values() if g.get("wait_on", {}).get("kind") == "channel") >= 50
    finally:
        p.kill()
        p.wait()
