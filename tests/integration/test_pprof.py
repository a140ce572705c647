"""pprof export checked by a real consumer: `go tool pprof -top` and `-traces` (Debian's golang-go) on
`stackctl dump --pprof` of real fixtures, on `show --pprof` of a stored snapshot, and on the daemon's
`?format=pprof` over HTTP. Names are checked byte for byte in the profile itself, decoded here."""
import gzip
import os
import re
import shutil
import subprocess

import pytest

from conftest import stackctl, wait_until

GO = shutil.which("go") or ("/usr/bin/go" if os.path.exists("/usr/bin/go") else None)
needs_go = pytest.mark.skipif(GO is None, reason="go tool pprof needs Debian's golang-go: `go` is not installed")


@pytest.fixture
def pprof(tmp_path):
    """Run `go tool pprof ARGS…` offline, with a writable HOME and build cache of its own; returns its stdout."""
    home = tmp_path / "gohome"
    home.mkdir()
    env = dict(os.environ, HOME=str(home), GOCACHE=str(home / "cache"), GOTOOLCHAIN="local", GOPROXY="off",
               GOFLAGS="", PPROF_TMPDIR=str(home / "pprof"))

    def run(*args):
        r = subprocess.run([GO, "tool", "pprof", *args], capture_output=True, env=env, timeout=120)
        assert r.returncode == 0, r.stderr.decode(errors="replace")
        return r.stdout.decode(errors="replace")
    return run


def top(pprof, path):
    """{function: (flat, cum)} from `go tool pprof -top`, every node (none dropped for being small)."""
    out = pprof("-top", "-nodefraction=0", "-nodecount=100000", path)
    rows = {}
    for line in out.splitlines():
        m = re.match(r"\s*(\d+)\s+\S+%\s+\S+%\s+(\d+)\s+\S+%\s+(.+)$", line)
        if m:
            rows[m.group(3).strip()] = (int(m.group(1)), int(m.group(2)))
    assert rows, out
    return rows


def traces(pprof, path):
    """The traces of `go tool pprof -traces`: each a dict of its labels ({key: [values]}), its count and frames."""
    out = pprof("-traces", path)
    result = []
    for block in out.split("-----------+-------------------------------------------------------")[1:]:
        labels, frames, count = {}, [], None
        for line in block.strip("\n").splitlines():
            m = re.match(r"\s*([\w-]+):\s+(.*)$", line)
            if count is None and m and not re.match(r"\s*\d+\s", line):
                labels.setdefault(m.group(1), []).extend(v.strip() for v in m.group(2).split(" ") if v.strip())
                continue
            m = re.match(r"\s*(\d+)\s+(.+)$", line)
            if count is None and m:
                count = int(m.group(1))
                frames.append(m.group(2).strip())
            elif line.strip():
                frames.append(line.strip())
        if count is not None:  # the line after the last trace closes no trace
            result.append({"labels": labels, "count": count, "frames": frames})
    assert result, out
    return result


def read_varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7f) << shift
        shift += 7
        if not c & 0x80:
            return v, i


def profile_strings(path):
    """The profile's string table (field 6), as bytes: what any reader of the file gets."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:2] == b"\x1f\x8b", "not gzipped"
    b = gzip.decompress(data)
    i, out = 0, []
    while i < len(b):
        key, i = read_varint(b, i)
        if key & 7 == 0:
            _, i = read_varint(b, i)
        else:
            assert key & 7 == 2, key
            n, i = read_varint(b, i)
            if key >> 3 == 6:
                out.append(b[i:i + n])
            i += n
    assert out[0] == b""
    return out


@needs_go
def test_threads64_counts_and_labels(fixture, tmp_path, pprof):
    fx = fixture("threads64")
    path = str(tmp_path / "t64.pb.gz")
    r = stackctl("dump", "--pprof", path, fx.pid, check_rc=0)
    assert r.stdout == b""
    size = os.path.getsize(path)
    print(f"threads64 profile: {size} bytes")
    assert 0 < size < 64 * 1024
    rows = top(pprof, path)
    # 64 threads park in t64_park, half of them on each side of every branch of the chain; main joins.
    assert rows["t64_park"][1] == 64
    assert rows["t64_common_01"][1] == 64
    for k in range(1, 7):
        assert rows[f"t64_k{k}_a"][1] == 32 and rows[f"t64_k{k}_b"][1] == 32
    assert rows["main"][1] == 1
    assert sum(flat for flat, _ in rows.values()) == 65
    ts = traces(pprof, path)
    assert sum(t["count"] for t in ts) == 65
    parked = [t for t in ts if "t64_park" in t["frames"]]
    assert len(parked) == 64
    # Each thread its own stack (its index in bits): one sample each, with its name, TID, state and syscall.
    names = sorted(n for t in parked for n in t["labels"]["thread"])
    assert names == [f"t{i:02d}" for i in range(64)]
    tids = {int(tid) for t in parked for tid in t["labels"]["tids"]}
    assert tids == {int(x) for x in os.listdir(f"/proc/{fx.pid}/task")} - {fx.pid}
    for t in parked:
        assert t["labels"]["state"] == ["S"] and t["labels"]["syscall"] == ["read"]
        assert t["labels"]["pid"] == [str(fx.pid)]
        # Leaf first: the kernel's read, then the fixture's chain up to the thread's start.
        assert t["frames"].index("t64_park") < t["frames"].index("t64_common_01") < t["frames"].index("t64_start")
    t00 = next(t for t in parked if t["labels"]["thread"] == ["t00"])
    assert [f for f in t00["frames"] if f.startswith("t64_k")] == [f"t64_k{k}_a" for k in range(6, 0, -1)]


@needs_go
def test_thread_crowd_groups(fixture, tmp_path, pprof):
    """Parked threads alike are one sample of their count; busy ones show in crowd_spin, running."""
    fx = fixture("thread-crowd", "30", "2", ready=False).wait_line(timeout=60)
    path = str(tmp_path / "crowd.pb.gz")
    stackctl("dump", "--pprof", path, fx.pid, check_rc=0)
    rows = top(pprof, path)
    assert rows["crowd_park"][1] == 30
    assert rows["crowd_spin"][1] == 2
    ts = traces(pprof, path)
    parked = [t for t in ts if "crowd_park" in t["frames"]]
    assert len(parked) == 1 and parked[0]["count"] == 30
    assert parked[0]["labels"]["state"] == ["S"]
    # 30 TIDs in ascending runs ("101-130"), each of them a thread of the process.
    runs = parked[0]["labels"]["tids"][0].split(",")
    tids = set()
    for run in runs:
        a, _, b = run.partition("-")
        tids |= set(range(int(a), int(b or a) + 1))
    assert len(tids) == 30 and tids <= {int(x) for x in os.listdir(f"/proc/{fx.pid}/task")}
    spinning = [t for t in ts if "crowd_spin" in t["frames"]]
    assert sum(t["count"] for t in spinning) == 2
    assert all(t["labels"]["state"] == ["R"] for t in spinning)


@needs_go
def test_peers_are_samples_of_their_own(fixture, tmp_path, pprof):
    """The process the wait chain reaches is in the same profile, its threads told apart by their pid label."""
    fx = fixture("thread-crowd", "10", "0", "--peer", "5", ready=False)
    parent, child = (int(x) for x in fx.wait_line_prefix(b"PIDS").split()[1:3])
    fx.wait_line(timeout=60)
    path = str(tmp_path / "peers.pb.gz")
    stackctl("dump", "--peers", "1", "--pprof", path, parent, check_rc=0)
    assert top(pprof, path)["crowd_park"][1] == 15
    parked = {t["labels"]["pid"][0]: t["count"] for t in traces(pprof, path) if "crowd_park" in t["frames"]}
    assert parked == {str(parent): 10, str(child): 5}


def test_pprof_usage_and_stdout(fixture, tmp_path):
    fx = fixture("block-read", "--name", "br\x1b[31m;<x>")
    # "-": stdout, the profile's bytes as they are; the hostile name in it byte for byte (a reader escapes it).
    r = stackctl("dump", "--pprof", "-", fx.pid, check_rc=0)
    path = tmp_path / "out.pb.gz"
    path.write_bytes(r.stdout)
    strings = profile_strings(str(path))
    assert b"br\x1b[31m;<x>" in strings and b"br_level_20" in strings and b"threads" in strings
    # One process per profile.
    r = stackctl("dump", "--pprof", str(tmp_path / "x"), fx.pid, fx.pid, check_rc=2)
    assert b"one process" in r.stderr
    r = stackctl("dump", "--pprof", str(tmp_path / "x"), "-o", str(tmp_path / "y"), fx.pid, check_rc=2)
    assert b"-o" in r.stderr


BLOCKED_RULES = """
poll_interval: 200ms
archive:
  directory: "@ARCHIVE@"
rules:
  - name: blocked-fixtures
    class: blocked
    for: 1s
    comm: br-pprof
    cooldown: 1h
"""


@needs_go
def test_daemon_format_pprof(daemon, fixture, tmp_path, pprof):
    d = daemon(BLOCKED_RULES)
    t64 = fixture("threads64")
    # A live capture over HTTP.
    code, headers, body = d.get(f"/stacks/{t64.pid}?format=pprof")
    assert code == 200 and headers["Content-Type"] == "application/octet-stream"
    assert body[:2] == b"\x1f\x8b"
    live = tmp_path / "live.pb.gz"
    live.write_bytes(body)
    rows = top(pprof, str(live))
    assert rows["t64_park"][1] == 64 and rows["t64_k3_b"][1] == 32
    # A stored snapshot, after a rule fired: the rule's thread's group says its class and the rule.
    br = fixture("block-read", "--name", "br-pprof").wait_wchan("pipe_read")
    snap = wait_until(lambda: d.get_json(f"/snapshots?pid={br.pid}")["snapshots"], timeout=15,
                      what="a snapshot of the blocked fixture")[0]
    code, headers, body = d.get(f"/snapshots/{snap['id']}?format=pprof")
    assert code == 200 and headers["Content-Type"] == "application/octet-stream"
    stored = tmp_path / "stored.pb.gz"
    stored.write_bytes(body)
    ts = traces(pprof, str(stored))
    culprit = [t for t in ts if t["labels"].get("tids") == [str(br.pid)]]
    assert len(culprit) == 1, ts
    assert culprit[0]["labels"]["class"] == ["blocked"] and culprit[0]["labels"]["rule"] == ["blocked-fixtures"]
    assert "br_level_20" in culprit[0]["frames"] and "main" in culprit[0]["frames"]
    # show --pprof of the same snapshot from the archive: the same samples.
    shown = tmp_path / "shown.pb.gz"
    stackctl("--archive", d.archive, "show", "--pprof", str(shown), snap["id"], check_rc=0)
    assert top(pprof, str(shown)) == top(pprof, str(stored))
    # dump --via-daemon --pprof: the daemon's bytes written as they came.
    via = tmp_path / "via.pb.gz"
    stackctl("--socket", d.socket, "dump", "--via-daemon", "--pprof", str(via), t64.pid, check_rc=0)
    assert top(pprof, str(via))["t64_park"][1] == 64
    # The error lists the formats.
    code, _, body = d.get(f"/stacks/{t64.pid}?format=pprofx")
    assert code == 400 and b"pprof" in body
