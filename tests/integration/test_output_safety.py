"""Hostile names through every format and route: processes whose comm, argv, executable path, FIFO and socket
names hold terminal escapes, newlines, bytes that are not UTF-8, the folded format's separators and a bidi
override. Text must stay inert and on its lines, JSON must be UTF-8 that a strict parser takes and that gives the
bytes back, folded stacks must keep one thread per line."""
import json
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET

import pytest

from conftest import stackctl, wait_until

# Bytes no output may carry raw: ESC, BEL, CR, C1 CSI (as UTF-8), U+202E (RLO), U+2028, and 0xff (not UTF-8).
RAW_FORBIDDEN = [b"\x1b", b"\x07", b"\r", b"\xc2\x9b", b"\xe2\x80\xae", b"\xe2\x80\xa8"]
FORGED = b"FORGED"

DIR_NAME = b"d\x1b]0;pwn\x07\n" + FORGED + b"\xff\xc2\x9b;x y"
EXE_NAME = b"py\x1b[2J\n" + FORGED + b"\xff;\xe2\x80\xae \\q\""
ARGV0 = b"argv0\x1b[31m\r\n" + FORGED + b"\xff"
ARG = b"x\x1b\n\xff\xe2\x80\xa8"
CLIENT_COMM = b"c\x1b\n\xff\xfe;\x07 \\"
SOCK_NAME = b"s\x1b\n\xff"
FIFO_NAME = b"f\x1b\n\xff"

SERVER = r'''
import os, socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(os.fsencode(sys.argv[1])); s.listen(4)
w = os.open(os.fsencode(sys.argv[2]), os.O_RDWR)
print("READY", flush=True)
c, _ = s.accept()
c.recv(1)
'''
CLIENT = r'''
import os, socket, sys
open("/proc/self/comm", "wb").write(%r)
c = socket.socket(socket.AF_UNIX); c.connect(os.fsencode(sys.argv[1]))
print("READY", flush=True)
c.recv(1)
''' % CLIENT_COMM
READER = r'''
import os, sys
fd = os.open(os.fsencode(sys.argv[1]), os.O_RDONLY)
print("READY", flush=True)
os.read(fd, 1)
'''

RULES = """
poll_interval: 200ms
archive:
  directory: @ARCHIVE@
capture:
  max_per_minute: 60
rules:
  - name: hostile
    class: blocked
    for: 1s
    exe: "{base}/*"
    peers: 1
    cooldown: 1h
"""


@pytest.fixture
def hostile(tmp_path):
    """A server, a client blocked on it over a unix socket and a reader blocked on its FIFO, all run from a copy
    of python3 at a hostile path, with hostile argv (and comm, for the client)."""
    base = os.fsencode(str(tmp_path / "hostile"))
    d = os.path.join(base, DIR_NAME)
    os.makedirs(d)
    exe = os.path.join(d, EXE_NAME)
    shutil.copy(os.path.realpath("/usr/bin/python3"), exe)
    sock, fifo = os.path.join(d, SOCK_NAME), os.path.join(d, FIFO_NAME)
    os.mkfifo(fifo)
    procs = []

    def start(code, *args):
        p = subprocess.Popen([ARGV0, b"-c", code.encode(), *args, ARG], executable=exe, stdout=subprocess.PIPE)
        procs.append(p)
        assert p.stdout.readline() == b"READY\n"
        return p.pid

    try:
        pids = {"server": start(SERVER, sock, fifo)}
        pids["client"] = start(CLIENT, sock)
        pids["reader"] = start(READER, fifo)
        yield {"base": base, "exe": exe, "sock": sock, "fifo": fifo, "pids": pids}
    finally:
        for p in procs:
            p.kill()
            p.wait()


def assert_inert_text(out, what):
    """OUT is text a terminal may show: UTF-8, nothing raw that acts, no line forged by a name."""
    for b in RAW_FORBIDDEN:
        assert b not in out, f"{what}: raw {b!r} in {out[:2000]!r}"
    out.decode("utf-8")  # strict: raises on any byte that is not UTF-8
    for line in out.split(b"\n"):
        assert not line.startswith(FORGED), f"{what}: a name started a line: {line!r}"


def strict_json(out, what):
    """OUT parsed as a strict JSON parser does: UTF-8 bytes first, then JSON without control characters."""
    assert_inert_text(out, what)
    return json.loads(out.decode("utf-8"), strict=True)


def raw(s):
    """The bytes behind a JSON string (invalid bytes come as \\udcNN, Python's surrogateescape)."""
    return s.encode("utf-8", "surrogateescape")


def strings_of(o):
    """Every string in the JSON value O."""
    if isinstance(o, str):
        yield o
    elif isinstance(o, dict):
        for v in o.values():
            yield from strings_of(v)
    elif isinstance(o, list):
        for v in o:
            yield from strings_of(v)


def check_snapshot_json(doc, hostile, pid, what):
    assert doc["process"]["pid"] == pid
    assert raw(doc["process"]["exe"]) == hostile["exe"], what
    assert [raw(a) for a in doc["process"]["cmdline"]][:1] == [ARGV0], what
    assert ARG in [raw(a) for a in doc["process"]["cmdline"]], what
    if pid == hostile["pids"]["client"]:
        assert raw(doc["process"]["comm"]) == CLIENT_COMM, what
    else:
        assert raw(doc["process"]["comm"]) == EXE_NAME[:15], what


def check_folded(out, what):
    assert_inert_text(out, what)
    lines = out.decode().splitlines()
    assert lines, what
    for ln in lines:
        # One thread per line, ending in its count; a name cannot add a frame or a line.
        stack, _, count = ln.rpartition(" ")
        assert count == "1", (what, ln)
        assert " " not in stack, (what, ln)
    return lines


def check_svg(out, what):
    """OUT is an SVG picture: inert text, well-formed XML (xmllint), no element but those we draw."""
    assert_inert_text(out, what)
    xmllint = shutil.which("xmllint")
    if xmllint:
        r = subprocess.run([xmllint, "--noout", "-"], input=out, capture_output=True, timeout=30)
        assert r.returncode == 0, (what, r.stderr[:2000])
    ours = {"svg", "defs", "marker", "path", "style", "rect", "g", "title", "text", "script"}
    for e in ET.fromstring(out).iter():
        assert e.tag.split("}")[-1] in ours, (what, e.tag)
    assert b"\\e[2J\\nFORGED\\xff;\\xe2\\x80\\xae \\\\q&quot;" in out, what


def test_stackctl_dump_all_formats(hostile):
    pids = hostile["pids"]
    for who, pid in pids.items():
        out = stackctl("dump", "--peers", "1", str(pid), check_rc=0).stdout
        assert_inert_text(out, f"dump {who}")
        # The names are there, escaped as documented.
        assert b"\\e[2J\\nFORGED\\xff;\\xe2\\x80\\xae \\\\q\"" in out, who
        doc = strict_json(stackctl("dump", "--json", "--peers", "1", str(pid), check_rc=0).stdout, f"json {who}")
        check_snapshot_json(doc, hostile, pid, f"dump --json {who}")
        check_folded(stackctl("dump", "--folded", "--peers", "1", str(pid), check_rc=0).stdout, f"folded {who}")
        check_svg(stackctl("dump", "--svg", "--peers", "1", str(pid), check_rc=0).stdout, f"svg {who}")
    # The chains name the socket's and the FIFO's paths, escaped.
    out = stackctl("dump", "--peers", "1", str(pids["client"]), check_rc=0).stdout
    assert b"/s\\e\\n\\xff)" in out
    out = stackctl("dump", "--peers", "1", str(pids["reader"]), check_rc=0).stdout
    assert b"fifo " in out and b"/f\\e\\n\\xff" in out
    doc = strict_json(stackctl("dump", "--json", "--peers", "1", str(pids["reader"]), check_rc=0).stdout, "chain")
    assert any(hostile["fifo"] in raw(v) for v in strings_of(doc)), "the FIFO's path, byte for byte"


def test_daemon_routes_and_archive(daemon, hostile):
    base = hostile["base"].decode()
    d = daemon(RULES.format(base=base))
    pids = hostile["pids"]
    # The client and the server wait on each other (one problem: one snapshot, of whichever fired first, the other
    # its peer); the reader waits on the server. Each is captured with its peer into the archive.
    def captured():
        snaps = {s["pid"] for s in d.snapshots()}
        return snaps & {pids["client"], pids["server"]} and pids["reader"] in snaps
    try:
        wait_until(captured, timeout=30, what="snapshots of the deadlock and of the reader")
    except AssertionError as e:
        # What the daemon made of them, for the failure to say why.
        threads = [t for t in d.get_json("/processes?all=1")["threads"] if t["pid"] in pids.values()]
        raise AssertionError(f"{e}; snapshots {d.snapshots()}; threads {threads}") from None

    routes = ["/processes", "/processes?all=1", "/snapshots", "/rules", "/metrics", "/healthz"]
    for pid in pids.values():
        routes += [f"/stacks/{pid}?peers=1", f"/stacks/{pid}?format=text&peers=1",
                   f"/stacks/{pid}?format=folded&peers=1", f"/stacks/{pid}?format=svg&peers=1"]
    for s in d.snapshots():
        routes += [f"/snapshots/{s['id']}", f"/snapshots/{s['id']}?format=text",
                   f"/snapshots/{s['id']}?format=folded", f"/snapshots/{s['id']}?format=svg"]
    for r in routes:
        code, headers, body = d.get(r)
        assert code == 200, (r, body[:300])
        if "format=folded" in r:
            check_folded(body, r)
        elif "format=svg" in r:
            check_svg(body, r)
        elif "format=text" in r or r == "/metrics":
            assert_inert_text(body, r)
        else:
            doc = strict_json(body, r)
            if r.startswith("/stacks/"):
                check_snapshot_json(doc, hostile, int(r.split("/")[2].split("?")[0]), r)
            if r == "/processes?all=1":
                comms = {t["tid"]: raw(t["comm"]) for t in doc["threads"]}
                assert comms[pids["client"]] == CLIENT_COMM, r
                assert comms[pids["server"]] == EXE_NAME[:15], r

    # The metrics label says what text says.
    metrics = d.get("/metrics")[2]
    assert b'comm="c\\\\e\\\\n\\\\xff\\\\xfe;\\\\x07 \\\\\\\\"' in metrics

    # The same snapshots read from the archive by stackctl, in every format, and the JSON round trip keeps bytes.
    for s in d.snapshots():
        assert_inert_text(stackctl("--archive", d.archive, "show", s["id"], check_rc=0).stdout, "show")
        check_folded(stackctl("--archive", d.archive, "show", "--folded", s["id"], check_rc=0).stdout, "show -f")
        doc = strict_json(stackctl("--archive", d.archive, "show", "--json", s["id"], check_rc=0).stdout, "show -j")
        check_snapshot_json(doc, hostile, s["pid"], "show --json")
        assert raw(s["exe"]) == hostile["exe"]
    # A problem's title holds the names as the processes gave them: escaped in the table as list escapes a comm.
    for args in (["list"], ["list", "--json"], ["problems"], ["problems", "--json"]):
        out = stackctl("--archive", d.archive, *args, check_rc=0).stdout
        if "--json" in args:
            strict_json(out, " ".join(args))
        else:
            assert_inert_text(out, args[0])
    for args in (["ps"], ["ps", "--json"], ["ps", "-a"], ["status"]):
        out = stackctl("--socket", d.socket, *args, check_rc=0).stdout
        if "--json" in args:
            strict_json(out, " ".join(args))
        else:
            assert_inert_text(out, " ".join(args))
