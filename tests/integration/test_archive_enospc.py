"""The archive on a full file system: a 256 KiB tmpfs filled by test-archive's ENOSPC case, checked from outside."""
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile

import pytest

from conftest import BUILDDIR

TEST_ARCHIVE = os.environ.get("STACKWATCH_TEST_ARCHIVE") or os.path.join(BUILDDIR, "tests", "unit", "test-archive")
ID_RE = re.compile(r"^\d{8}T\d{6}\.\d{6}Z-[1-9]\d{0,6}(-[1-9]\d{0,2})?$")
SKIPPABLE_MAGIC = 0x184D2A50


@pytest.fixture
def small_tmpfs():
    """A 256 KiB tmpfs on a fresh temporary directory, unmounted and removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("needs root to mount a tmpfs")
    mnt = tempfile.mkdtemp(prefix="stackwatch-enospc-")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", mnt],
                       capture_output=True, text=True)
    if r.returncode != 0:
        os.rmdir(mnt)
        pytest.skip(f"cannot mount a tmpfs: {r.stderr.strip()}")
    try:
        yield mnt
    finally:
        if subprocess.run(["umount", mnt]).returncode != 0:
            subprocess.run(["umount", "-l", mnt], check=True)
        os.rmdir(mnt)


def read_summary(path):
    """The JSON summary in the skippable frame that leads a snapshot file."""
    with open(path, "rb") as f:
        head = f.read(8 + 4096)
    magic, size = struct.unpack_from("<II", head)
    assert magic == SKIPPABLE_MAGIC
    return json.loads(head[8:8 + size])


def test_enospc_clean_failure_vacuum_and_retry(small_tmpfs):
    if not os.access(TEST_ARCHIVE, os.X_OK):
        pytest.skip(f"{TEST_ARCHIVE} is not built")
    archive = os.path.join(small_tmpfs, "archive")
    env = dict(os.environ, STACKWATCH_TEST_ENOSPC_DIR=archive)
    r = subprocess.run([TEST_ARCHIVE], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr

    # The C side: -ENOSPC returned with nothing left behind, then room made for the newest and the retry done.
    m = re.search(r"archive-enospc: ok: (\d+) snapshot\(s\) fit before ENOSPC, (\d+) removed to make room", r.stdout)
    assert m, r.stdout
    assert int(m.group(1)) >= 3
    assert int(m.group(2)) >= 1

    # From outside: only complete snapshots under snapshot names, no temporaries, the file system usable again.
    names = sorted(os.listdir(archive))
    assert len(names) == 2, names
    for name in names:
        assert name.endswith(".json.zst") and ID_RE.match(name[:-len(".json.zst")]), name
        summary = read_summary(os.path.join(archive, name))
        assert summary["schema"] == "stackwatch.archive/1"
        assert summary["id"] == name[:-len(".json.zst")]
        assert summary["pid"] == 104
    assert os.statvfs(small_tmpfs).f_bavail > 0

    zstd = shutil.which("zstd")
    if not zstd:
        return
    for name in names:
        out = subprocess.run([zstd, "-d", "-c", "-q", os.path.join(archive, name)], capture_output=True, check=True)
        doc = json.loads(out.stdout)
        assert doc["schema"] == "stackwatch.snapshot/1"
        assert len(out.stdout) == read_summary(os.path.join(archive, name))["size"]
