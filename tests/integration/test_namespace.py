"""Modules from the process's own view: a process in another mount namespace (as in any container, or under the
unit's PrivateTmp=) whose binary exists only there, and one where a different binary sits at the same path on the
host. Both must show their own function names and build-id, never ?? or the host file's."""
import os
import re
import subprocess

import pytest

from conftest import FIXTURES, STACKCTL, stackctl, wait_until

# In a private mount namespace: a tmpfs over DIR, the fixture copied there as "app", run from there.
SETUP = """set -eu
mount -t tmpfs tmpfs "$1"
cp "$2" "$1/app"
exec "$1/app"
"""


def build_id(path):
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True, check=True).stdout
    return re.search(r"Build ID: ([0-9a-f]+)", out).group(1)


@pytest.fixture
def in_namespace(tmp_path):
    started = []

    def start(binary):
        d = tmp_path / f"ns{len(started)}"
        d.mkdir(exist_ok=True)
        p = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", SETUP, "sh", str(d),
                              binary], stdout=subprocess.PIPE, stdin=subprocess.PIPE,
                             env=dict(os.environ, FIXTURE_LIFETIME="120"))
        started.append(p)
        assert p.stdout.readline().strip() == b"READY"
        wait_until(lambda: "pipe_read" in open(f"/proc/{p.pid}/wchan").read(), what="the app in read()")
        return p, d
    yield start
    for p in started:
        p.kill()
        p.wait()


def main_frames(pid):
    import json
    doc = json.loads(stackctl("dump", "--json", "--no-kernel", pid, check_rc=0).stdout)
    t = next(t for t in doc["threads"] if t["tid"] == pid)
    mods = doc["modules"]
    return [(f["function"], mods[f["module"]]["path"] if f["module"] is not None else None, f.get("method"))
            for f in t["frames"]], mods


def test_a_binary_that_exists_only_in_the_target_namespace(in_namespace):
    block_read = os.path.join(FIXTURES, "block-read")
    p, d = in_namespace(block_read)
    app = str(d / "app")
    assert not os.path.exists(app)  # not on the host: only the target's mount namespace has it
    frames, mods = main_frames(p.pid)
    names = [f[0] for f in frames]
    assert "br_level_20" in names and "br_level_01" in names and "main" in names, frames
    assert all(f[1] == app for f in frames if f[0] and f[0].startswith("br_level")), frames
    mod = next(m for m in mods if m["path"] == app)
    assert mod["build_id"] == build_id(block_read)


def test_a_different_binary_at_the_same_host_path(in_namespace, tmp_path):
    block_read, busy = os.path.join(FIXTURES, "block-read"), os.path.join(FIXTURES, "busy-loop")
    # The host has busy-loop at the path; the target's namespace has block-read there.
    (tmp_path / "ns0").mkdir()
    host_app = tmp_path / "ns0" / "app"
    host_app.write_bytes(open(busy, "rb").read())
    p, d = in_namespace(block_read)
    assert build_id(str(host_app)) != build_id(block_read)
    frames, mods = main_frames(p.pid)
    names = [f[0] for f in frames if f[0]]
    assert "br_level_20" in names, frames
    assert not any(n.startswith("bl_") or "busy" in n for n in names), frames
    mod = next(m for m in mods if m["path"] == str(host_app))
    assert mod["build_id"] == build_id(block_read)
    text = stackctl("dump", "--no-kernel", "--modules", p.pid, check_rc=0).stdout.decode()
    assert build_id(block_read) in text and build_id(str(host_app)) not in text


# The binary's mount goes away under the running process (umount -l in its namespace): no path reaches the file.
UNMOUNTED = """set -eu
mount -t tmpfs tmpfs "$1"
cp "$2" "$1/app"
chmod 755 "$1"
$3 "$1/app" &
app=$!
read -r _ <&3
umount -l "$1"
echo UNMOUNTED
wait $app
"""


def test_an_unmounted_binary_is_read_from_the_mapping_or_shown_missing(tmp_path):
    for who, user in (("root", ""), ("nobody", "setpriv --reuid=65534 --regid=65534 --clear-groups")):
        sub = tmp_path / who
        sub.mkdir()
        d = sub / "um"
        d.mkdir()
        (d / "app").write_bytes(open(os.path.join(FIXTURES, "busy-loop"), "rb").read())
        script = UNMOUNTED.replace('read -r _ <&3\n', 'sleep 0.3\n')
        p = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", str(d),
                              os.path.join(FIXTURES, "block-read"), user], stdout=subprocess.PIPE,
                             stdin=subprocess.DEVNULL, env=dict(os.environ, FIXTURE_LIFETIME="120"))
        try:
            lines = [p.stdout.readline().strip() for _ in range(2)]
            assert lines == [b"READY", b"UNMOUNTED"], lines
            app = int(subprocess.run(["pgrep", "-P", str(p.pid), "-x", "app"], capture_output=True,
                                     text=True).stdout.split()[0])
            maps = open(f"/proc/{app}/maps").read()
            assert " /app\n" in maps  # what is left of the path
            cmd = [*user.split(), STACKCTL, "dump", "--no-kernel", str(app)]
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=60).stdout
            assert "bl_level" not in out, out  # never the namesake's names
            if who == "root":
                # map_files still serves the mapped file: the real names.
                assert "br_level_20" in out, out
            else:
                # map_files needs CAP_SYS_ADMIN: nothing reaches the file, and the dump says so.
                # Still named by its build-id, read from the image the loader mapped.
                assert f"?? - /app [build-id {build_id(os.path.join(FIXTURES, 'block-read'))}, not found" in out, out
        finally:
            p.kill()
            subprocess.run(["pkill", "-P", str(p.pid)])
            p.wait()


# As SETUP, and the app's separate debuginfo installed only in the namespace, where a distribution puts it.
SETUP_DEBUG = """set -eu
mount -t tmpfs tmpfs "$1"
cp "$2" "$1/app"
mkdir -p /usr/lib/debug
mount -t tmpfs tmpfs /usr/lib/debug
mkdir -p "/usr/lib/debug/.build-id/$3"
cp "$4" "/usr/lib/debug/.build-id/$3/$5.debug"
exec "$1/app"
"""


def start_with_debuginfo(tmp_path, binary, debuginfo, bid):
    d = tmp_path / "nsdebug"
    d.mkdir()
    p = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", SETUP_DEBUG, "sh", str(d),
                          binary, bid[:2], debuginfo, bid[2:]], stdout=subprocess.PIPE, stdin=subprocess.PIPE,
                         env=dict(os.environ, FIXTURE_LIFETIME="120"))
    assert p.stdout.readline().strip() == b"READY"
    wait_until(lambda: "pipe_read" in open(f"/proc/{p.pid}/wchan").read(), what="the app in read()")
    return p


def test_separate_debuginfo_from_the_target_root_and_only_when_it_matches(tmp_path):
    from conftest import DEBUGDIR
    stripped = os.path.join(FIXTURES, "block-read-stripped")
    bid = build_id(stripped)
    own = os.path.join(DEBUGDIR, ".build-id", bid[:2], bid[2:] + ".debug")
    assert not os.path.exists(f"/usr/lib/debug/.build-id/{bid[:2]}/{bid[2:]}.debug")  # not on the host
    p = start_with_debuginfo(tmp_path, stripped, own, bid)
    try:
        names = [f[0] for f in main_frames(p.pid)[0]]
        assert "br_level_20" in names and "main" in names, names
    finally:
        p.kill()
        p.wait()
    # Another build's debuginfo at this build-id's path (a stale -dbgsym, a hand-copied file): never used.
    (tmp_path / "nsdebug").rename(tmp_path / "ns-old")
    p = start_with_debuginfo(tmp_path, stripped, os.path.join(FIXTURES, "busy-loop"), bid)
    try:
        names = [f[0] for f in main_frames(p.pid)[0] if f[0]]
        assert "br_level_20" not in names and not any(n.startswith("bl_") or "busy" in n for n in names), names
        assert "read" in names
    finally:
        p.kill()
        p.wait()
