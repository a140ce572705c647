"""Capture fast, parse later: a snapshot taken while the debuginfo was missing (a stripped binary, its debuginfo
only under a build-id path the daemon did not look in) is shown again with the debuginfo found today, from its pcs
and build-ids; which frames changed is reported; a module whose file no longer has that build-id is not used."""
import os
import shutil

from conftest import DEBUGDIR, FIXTURES, Fixture, stackctl, wait_until

RULES = """
poll_interval: 200ms
archive:
  directory: "@ARCHIVE@"
rules:
  - name: rs-blocked
    class: blocked
    for: 500ms
    comm: "{comm}"
    peers: 0
"""


def take(daemon, tmp_path, binary, comm):
    d = daemon(RULES.format(comm=comm))
    fx = Fixture(binary, ("--name", comm))
    fx.wait_line()
    fx.wait_wchan("pipe_read")
    snap = wait_until(lambda: d.snapshots("--pid", str(fx.pid)), timeout=20, what="the snapshot")[0]
    return d, fx, snap["id"]


def test_a_snapshot_is_resymbolized_with_debuginfo_installed_later(daemon, tmp_path):
    d, fx, sid = take(daemon, tmp_path, "block-read-stripped", "rs-stripped")
    try:
        before = stackctl("--archive", d.archive, "show", "--no-kernel", sid, check_rc=0).stdout.decode()
        assert "br_level_20" not in before and "?? - " in before
        r = stackctl("--archive", d.archive, "show", "--no-kernel", "--resymbolize", "--debuginfo-path", DEBUGDIR, sid,
                     check_rc=0)
        after, report = r.stdout.decode(), r.stderr.decode()
        assert "br_level_20+0x" in after and "block-read.c:" in after, after
        assert "?? -> br_level_20" in report and "frame(s) resolve differently now" in report, report
        n = int(report.strip().splitlines()[-1].split()[0])
        assert n >= 20, report
        # The stored snapshot is not changed, and without the debuginfo nothing changes.
        assert stackctl("--archive", d.archive, "show", "--no-kernel", sid, check_rc=0).stdout.decode() == before
        r = stackctl("--archive", d.archive, "show", "--no-kernel", "--resymbolize", "--debuginfo-path", "/nonexistent",
                     sid, check_rc=0)
        assert "br_level" not in r.stdout.decode() and "-> br_level" not in r.stderr.decode()
    finally:
        fx.kill()


def test_a_module_whose_build_id_changed_is_not_used(daemon, tmp_path):
    # The binary at the snapshot's path is replaced after the capture by another build (busy-loop).
    app = tmp_path / "bin" / "block-read-stripped"
    app.parent.mkdir()
    shutil.copy(os.path.join(FIXTURES, "block-read-stripped"), app)
    d = daemon(RULES.format(comm="rs-moved"))
    import subprocess
    p = subprocess.Popen([str(app), "--name", "rs-moved"], stdout=subprocess.PIPE, stdin=subprocess.PIPE,
                         env=dict(os.environ, FIXTURE_LIFETIME="120"))
    try:
        assert p.stdout.readline().strip() == b"READY"
        sid = wait_until(lambda: d.snapshots("--pid", str(p.pid)), timeout=20, what="the snapshot")[0]["id"]
    finally:
        p.kill()
        p.wait()
    app.unlink()
    shutil.copy(os.path.join(FIXTURES, "busy-loop"), app)
    r = stackctl("--archive", d.archive, "show", "--no-kernel", "--resymbolize", "--debuginfo-path", DEBUGDIR, sid,
                 check_rc=0)
    out = r.stdout.decode()
    assert "bl_level" not in out and "br_level" not in out, out
    assert "-> b" not in r.stderr.decode()  # no frame of the app's module resolved, to either binary's names


def test_debuginfo_installed_after_the_hang_serves_the_api_too(daemon, tmp_path):
    """The usual order on a server: the hang, then apt-get install …-dbgsym. Here the fixture's debuginfo is
    installed under /usr/lib/debug/.build-id after the snapshot; GET /snapshots/ID?resymbolize=1 uses it."""
    d, fx, sid = take(daemon, tmp_path, "block-read-stripped", "rs-api")
    fx.kill()
    rel = None
    for root, _, files in os.walk(os.path.join(DEBUGDIR, ".build-id")):
        for f in files:
            rel = os.path.relpath(os.path.join(root, f), DEBUGDIR)
    assert rel, DEBUGDIR
    target = os.path.join("/usr/lib/debug", rel)
    assert not os.path.exists(target)
    code, _, plain = d.get(f"/snapshots/{sid}?format=text")
    assert code == 200 and b"br_level_20" not in plain
    os.makedirs(os.path.dirname(target), exist_ok=True)
    shutil.copy(os.path.join(DEBUGDIR, rel), target)
    try:
        code, _, body = d.get(f"/snapshots/{sid}?format=text&resymbolize=1")
        assert code == 200 and b"br_level_20+0x" in body, body[:2000]
        out = stackctl("--archive", d.archive, "show", "--resymbolize", sid, check_rc=0).stdout
        assert b"br_level_20+0x" in out
        code, _, err = d.get(f"/snapshots/{sid}?resymbolize=yes")
        assert code == 400 and b"resymbolize is 0 or 1" in err
    finally:
        os.unlink(target)
