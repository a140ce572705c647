"""A fleet through the journal, with the real pipeline: two "hosts" (each a private mount and UTS namespace with its
own hostname, machine-id and systemd-journald, and its own stackwatchd with archive.journal: full) ship their
journals with systemd-journal-upload to a systemd-journal-remote on loopback; on the central directory,
stackctl list --journal shows both hosts' snapshots, and show prints each byte-identical to its host's archive."""
import os
import signal
import subprocess
import uuid

import pytest

from conftest import Server, free_port, stackctl, wait_until

JOURNALD = "/lib/systemd/systemd-journald"
REMOTE = "/lib/systemd/systemd-journal-remote"
UPLOAD = "/lib/systemd/systemd-journal-upload"
FIRED = "5b6a1e30c8f84d5a9f8c1e2d7a4b3c01"

# One host: a hostname and a machine-id of its own, journald without the test's NOTIFY_SOCKET, then the daemon.
HOST = """#!/bin/sh
set -eu
hostname "$FLEET_HOST"
echo "$FLEET_MACHINE_ID" > "$FLEET_DIR/machine-id"
mount --bind "$FLEET_DIR/machine-id" /etc/machine-id
mkdir -p /run/systemd/journal /run/log/journal
mount -t tmpfs tmpfs /run/systemd/journal
mount --bind "$FLEET_DIR/journal" /run/log/journal
if [ -d /var/log/journal ]; then mount -t tmpfs tmpfs /var/log/journal; fi
env -u NOTIFY_SOCKET %s &
echo $! > "$FLEET_DIR/journald.pid"
i=0
while [ ! -S /run/systemd/journal/socket ]; do
        i=$((i + 1)); [ $i -lt 500 ] || { echo "journald did not start" >&2; exit 1; }
        sleep 0.01
done
exec "$@"
"""

RULES = """
poll_interval: 200ms
archive:
  directory: "@ARCHIVE@"
  journal: full
rules:
  - name: fleet-blocked
    class: blocked
    for: 1s
    comm: "{comm}"
    actions: [snapshot, log]
"""

needs_remote = pytest.mark.skipif(not all(os.access(p, os.X_OK) for p in (JOURNALD, REMOTE, UPLOAD)),
                                  reason="systemd-journal-remote is not installed (apt-get install "
                                         "systemd-journal-remote)")


def journal_records(jdir, *matches):
    import json
    # --all: without it journalctl writes a field over 4096 bytes (a whole stack often is) as null.
    r = subprocess.run(["journalctl", "-D", str(jdir), "-o", "json", "--all", "--no-pager", *matches],
                       capture_output=True, text=True, timeout=30)
    return [json.loads(ln) for ln in r.stdout.splitlines() if ln.strip()]


@needs_remote
def test_two_hosts_ship_snapshots_to_a_central_journal(daemon, fixture, tmp_path):
    hosts = {}
    pids = []
    try:
        for name, comm in (("fleet-a", "fa-hang"), ("fleet-b", "fb-hang")):
            hdir = tmp_path / name
            (hdir / "journal").mkdir(parents=True)
            setup = hdir / "host-ns"
            setup.write_text(HOST % JOURNALD)
            setup.chmod(0o755)
            env = {"FLEET_HOST": name, "FLEET_MACHINE_ID": uuid.uuid4().hex, "FLEET_DIR": str(hdir)}
            d = daemon(RULES.format(comm=comm), env=env, args=("--log-target=journal",),
                       wrapper=("unshare", "--mount", "--uts", "--propagation", "private", "--", str(setup)))
            fx = fixture("block-read", "--name", comm).wait_wchan("pipe_read")
            hosts[name] = (d, hdir, fx, env["FLEET_MACHINE_ID"])
        # Each host's own journal has its firing, under its own hostname and machine-id.
        for name, (d, hdir, fx, mid) in hosts.items():
            rec = wait_until(lambda: journal_records(hdir / "journal", f"MESSAGE_ID={FIRED}",
                                                     f"STACKWATCH_PID={fx.pid}"),
                             timeout=30, interval=0.1, what=f"{name}'s firing record")[0]
            assert rec["_HOSTNAME"] == name and rec["_MACHINE_ID"] == mid
            pids.append(int((hdir / "journald.pid").read_text()))

        # The central host: journal-remote on loopback; each host uploads its journal directory.
        central = tmp_path / "central"
        central.mkdir()
        port = free_port()
        remote = subprocess.Popen([REMOTE, f"--listen-http=127.0.0.1:{port}", f"--output={central}/all.journal",
                                   "--split-mode=none"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            wait_until(lambda: subprocess.run(["bash", "-c", f"exec 3<>/dev/tcp/127.0.0.1/{port}"],
                                              capture_output=True).returncode == 0,
                       timeout=15, interval=0.1, what="journal-remote listening")
            for name, (d, hdir, fx, mid) in hosts.items():
                jfiles = list((hdir / "journal").rglob("*.journal"))
                assert jfiles, f"{name} has no journal files"
                up = subprocess.run([UPLOAD, f"--url=http://127.0.0.1:{port}", f"--directory={jfiles[0].parent}",
                                     "--follow=no", f"--save-state={hdir}/upload.state"], capture_output=True,
                                    text=True, timeout=60)
                assert up.returncode == 0, up.stderr[-2000:]
            # Both hosts' snapshots, from the central directory, with the HOST column.
            out = wait_until(lambda: (lambda r: r.stdout.decode() if r.returncode == 0 and all(
                n in r.stdout.decode() for n in hosts) else None)(
                stackctl("list", "--journal", "-D", central, "--no-legend")), timeout=20, interval=0.2,
                what="both hosts in the central journal")
            for name, (d, hdir, fx, mid) in hosts.items():
                snaps = d.snapshots("--pid", str(fx.pid))  # (the two daemons share the test's archive)
                assert len(snaps) == 1
                sid = snaps[0]["id"]
                line = next(ln for ln in out.splitlines() if ln.endswith(sid))
                assert line.split()[2] == name, line  # TIME is two words, then HOST
                # Shown on the central host byte-identical to the host's own archive.
                for fmt in ((), ("--json",)):
                    here = stackctl("--archive", d.archive, "show", *fmt, sid, check_rc=0).stdout
                    there = stackctl("show", "--journal", "-D", central, *fmt, sid, check_rc=0).stdout
                    assert there == here, name
                # And by host name, as coredumpctl users match.
                only = stackctl("list", "--journal", "-D", central, "--host", name, "--json", check_rc=0).stdout
                import json
                assert [s["id"] for s in json.loads(only)] == [sid]
        finally:
            remote.send_signal(signal.SIGTERM)
            remote.wait(timeout=10)
    finally:
        for d, *_ in hosts.values():
            d.stop()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
