"""list and show read three snapshot sources through one interface: the archive directory, the journal, and a
daemon's archive through its API (--socket, or --host for one or several daemons). The daemon source shows exactly
what the archive source shows of the same snapshot; across several hosts the list merges them with a HOST column,
and a host that does not answer is named and sets the exit status without hiding the others."""
import json
import re

from conftest import free_port, stackctl, wait_until

CONFIG = """
poll_interval: 200ms
archive:
  directory: {archive}
http:
  socket: "@SOCKET@"
  listen: 127.0.0.1:0
  token_file: {token}
rules:
  - name: src-hang
    class: [blocked, waiting]
    for: 1s
    comm: [{comm}]
    cooldown: 1h
"""


def start(daemon, tmp_path, token, name):
    archive = tmp_path / f"archive-{name}"
    d = daemon(CONFIG.format(archive=archive, token=token, comm=f"src-{name}"))
    return d, str(archive)


def archive_list(archive):
    return json.loads(stackctl("--archive", archive, "list", "--json", check_rc=0).stdout)


def test_list_and_show_through_daemons_equal_their_archives(daemon, fixture, tmp_path):
    token = tmp_path / "token"
    token.write_text("sources-token\n")
    token.chmod(0o600)
    a, arch_a = start(daemon, tmp_path, token, "a")
    b, arch_b = start(daemon, tmp_path, token, "b")
    fixture("block-read", "--name", "src-a").wait_wchan("pipe_read")
    snap_a = wait_until(lambda: stackctl("--archive", arch_a, "list", "--json").returncode == 0 and archive_list(arch_a),
                        timeout=30, what="a snapshot in a's archive")[0]
    fixture("block-read", "--name", "src-b").wait_wchan("pipe_read")
    snap_b = wait_until(lambda: stackctl("--archive", arch_b, "list", "--json").returncode == 0 and archive_list(arch_b),
                        timeout=30, what="a snapshot in b's archive")[0]
    assert snap_b["timestamp_usec"] > snap_a["timestamp_usec"]

    # One daemon over its socket: the same list and the same document as its archive read directly.
    over_socket = json.loads(stackctl("--socket", a.socket, "list", "--json", check_rc=0).stdout)
    assert over_socket == archive_list(arch_a)
    for fmt in ([], ["--json"], ["--folded"]):
        direct = stackctl("--archive", arch_a, "show", *fmt, snap_a["id"], check_rc=0).stdout
        assert stackctl("--socket", a.socket, "show", *fmt, snap_a["id"], check_rc=0).stdout == direct
    assert b"src-a" in stackctl("--socket", a.socket, "show", "COMM=src-a", check_rc=0).stdout
    r = stackctl("--socket", a.socket, "list", "COMM=nothing-like-it", check_rc=3)
    assert "No snapshots match in the archive of stackwatchd at" in r.stderr.decode()

    # Several hosts: one list, oldest first, with the host each snapshot is on.
    hosts = ["%s:%d" % d.tcp_address() for d in (a, b)]
    many = ["--host", hosts[1], "--host", hosts[0], "--token-file", token]
    out = stackctl(*many, "list", check_rc=0).stdout.decode()
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["TIME", "HOST", "PID"], out
    assert [ln.split()[-1] for ln in lines[1:]] == [snap_a["id"], snap_b["id"]], out
    assert [ln.split()[2] for ln in lines[1:]] == hosts, out
    doc = json.loads(stackctl(*many, "list", "--json", check_rc=0).stdout)
    assert [(e["id"], e["host"]) for e in doc] == [(snap_a["id"], hosts[0]), (snap_b["id"], hosts[1])]
    # show: an id from the host that has it, the latest of all, the latest that matches.
    direct_b = stackctl("--archive", arch_b, "show", snap_b["id"], check_rc=0).stdout
    assert stackctl(*many, "show", snap_b["id"], check_rc=0).stdout == direct_b
    assert stackctl(*many, "show", check_rc=0).stdout == direct_b
    assert stackctl(*many, "show", "COMM=src-a", check_rc=0).stdout == \
        stackctl("--archive", arch_a, "show", snap_a["id"], check_rc=0).stdout
    r = stackctl(*many, "show", "20200101T000000.000000Z-1", check_rc=3)
    assert "No snapshot '20200101T000000.000000Z-1' in the archives of 2 hosts." in r.stderr.decode()

    # A host that is not there: named, and the exit status says so, but the others are listed.
    dead = f"127.0.0.1:{free_port()}"
    r = stackctl(*many, "--host", dead, "--timeout", "3", "list")
    assert r.returncode == 6, r
    assert [ln.split()[-1] for ln in r.stdout.decode().splitlines()[1:]] == [snap_a["id"], snap_b["id"]]
    assert re.search(rf"^{re.escape(dead)}: .*", r.stderr.decode(), re.M), r.stderr
    # A wrong token is refused by both, never shown as an empty archive.
    bad = tmp_path / "bad-token"
    bad.write_text("not-the-token\n")
    bad.chmod(0o600)
    r = stackctl("--host", hosts[0], "--host", hosts[1], "--token-file", bad, "list")
    assert r.returncode == 4, r
    assert r.stdout == b""


def test_options_that_name_no_such_source_are_usage_errors(tmp_path):
    token = tmp_path / "token"
    token.write_text("x\n")
    token.chmod(0o600)
    r = stackctl("--socket", tmp_path / "s.sock", "--journal", "list", check_rc=2)
    assert "use one" in r.stderr.decode()
    r = stackctl("--token-file", token, "list", check_rc=2)
    assert "--socket or --host" in r.stderr.decode()
    r = stackctl("--socket", tmp_path / "s.sock", "--archive", tmp_path, "show", check_rc=2)
    assert "--archive names a directory here" in r.stderr.decode()
    # Nothing listens there: the daemon source says so, as ps does.
    r = stackctl("--socket", tmp_path / "s.sock", "list", check_rc=6)
