"""What "make install" puts where, and that the pieces work where they land: the configuration where the daemon
reads it, the example rules the documentation points to, the hooks, the journal catalog (journalctl
--update-catalog and --list-catalog on it) and the tmpfiles.d entry (systemd-tmpfiles --create on it); and that
configure honours an explicit unit directory."""
import os
import re
import shutil
import subprocess

import pytest

from conftest import BUILDDIR, SRCDIR, STACKWATCHD


def clean_env():
    """The environment without the outer make's jobserver (this runs inside "make check")."""
    return {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}


def make_var(name, _vars={}):
    """Variable NAME of the build's Makefile, with the ${...} and $(...) it refers to expanded."""
    if not _vars:
        with open(os.path.join(BUILDDIR, "Makefile")) as f:
            _vars.update(re.findall(r"^([A-Za-z_][A-Za-z0-9_]*) = (.*)$", f.read(), re.M))
    value = _vars[name]
    for _ in range(8):
        value = re.sub(r"\$[{(]([A-Za-z_][A-Za-z0-9_]*)[})]", lambda m: _vars.get(m.group(1), ""), value)
    return value.strip()


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    dest = str(tmp_path_factory.mktemp("destdir"))
    r = subprocess.run(["make", "-C", BUILDDIR, "install", f"DESTDIR={dest}"], capture_output=True, text=True,
                       env=clean_env(), timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return dest


def test_config_is_installed_where_the_daemon_reads_it(installed):
    sysconfdir = (make_var("sysconfdir"))
    conf = os.path.join(installed + sysconfdir, "stackwatch", "stackwatch.yaml")
    assert os.path.isfile(conf), conf
    out = subprocess.run([STACKWATCHD, "--help"], capture_output=True, text=True).stdout
    assert f"(default {sysconfdir}/stackwatch/stackwatch.yaml)" in out, out
    # The example rules the docs point to are installed where the docs say, and are valid as they are.
    examples = os.path.join(installed + sysconfdir, "stackwatch", "rules.d", "examples")
    names = sorted(os.listdir(examples))
    assert names == sorted(os.listdir(os.path.join(SRCDIR, "conf", "rules.d", "examples"))), names
    r = subprocess.run([STACKWATCHD, "--check-config", "--config", conf, "--rules-dir", examples],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "configuration OK" in r.stdout, r


def test_prometheus_examples_are_installed(installed):
    share = make_var("pkgdatadir")
    for f in ("prometheus.yml", "stackwatch-rules.yml"):
        assert os.path.isfile(os.path.join(installed + share, "prometheus", f)), f


def test_hooks_are_installed_and_runnable(installed):
    libexec = (make_var("pkglibexecdir"))
    for hook in ("post-json", "alertmanager"):
        p = os.path.join(installed + libexec, "hooks", hook)
        assert os.access(p, os.X_OK), p
    r = subprocess.run([os.path.join(installed + libexec, "hooks", "alertmanager")], capture_output=True, text=True)
    assert r.returncode == 2 and "usage" in r.stderr


def test_journal_catalog_is_valid_and_lists_our_message_ids(installed, tmp_path):
    prefix = (make_var("prefix"))
    cat = os.path.join(installed + prefix, "lib", "systemd", "catalog", "stackwatch.catalog")
    assert os.path.isfile(cat), cat
    # journalctl reads catalogs from /usr/lib/systemd/catalog below --root.
    root = tmp_path / "root"
    os.makedirs(root / "usr/lib/systemd/catalog")
    shutil.copy(cat, root / "usr/lib/systemd/catalog")
    r = subprocess.run(["journalctl", f"--root={root}", "--update-catalog"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    listed = subprocess.run(["journalctl", f"--root={root}", "--list-catalog"], capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    with open(os.path.join(SRCDIR, "daemon", "journal.h")) as f:
        ids = re.findall(r'#define SW_MESSAGE_\w+ "([0-9a-f]{32})"', f.read())
    assert len(ids) >= 5
    for mid in ids:
        assert mid in listed.stdout, f"message id {mid} has no catalog entry:\n{listed.stdout}"
    entry = subprocess.run(["journalctl", f"--root={root}", "--dump-catalog", ids[0]], capture_output=True, text=True)
    assert "stackctl show @STACKWATCH_SNAPSHOT_ID@" in entry.stdout, entry.stdout
    # Durations as people read them ("2m5s", STACKWATCH_DURATION=), never "1013651 us".
    assert "@STACKWATCH_DURATION@" in entry.stdout and "_USEC@ us" not in open(cat).read()


def test_tmpfiles_entry_creates_the_directories(installed, tmp_path):
    prefix = (make_var("prefix"))
    conf = os.path.join(installed + prefix, "lib", "tmpfiles.d", "stackwatch.conf")
    root = tmp_path / "root"
    root.mkdir()
    r = subprocess.run(["systemd-tmpfiles", "--create", f"--root={root}", conf], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    st = os.stat(root / "var/lib/stackwatch")
    assert st.st_mode & 0o777 == 0o750
    assert os.path.isdir(root / "run/stackwatch")


def test_configure_honours_an_explicit_unit_directory(tmp_path):
    """configure alone, in a copy of what it reads (the source tree may be configured already, and read-only)."""
    if not os.access(os.path.join(SRCDIR, "configure"), os.X_OK):
        pytest.skip("no configure script in the source tree")
    for f in ("configure", "Makefile.in", "build-config.h.in", "lib/base/macro.h"):
        os.makedirs(os.path.dirname(tmp_path / f), exist_ok=True)
        shutil.copy(os.path.join(SRCDIR, f), tmp_path / f)
    shutil.copytree(os.path.join(SRCDIR, "build-aux"), tmp_path / "build-aux")

    def unitdir(*args):
        r = subprocess.run(["./configure", "--prefix=/opt/sw", "--with-libunwind", *args], cwd=tmp_path,
                           capture_output=True, text=True, env=clean_env(), timeout=300)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
        with open(tmp_path / "Makefile") as f:
            return re.search(r"^systemdsystemunitdir = (.*)$", f.read(), re.M).group(1)
    assert unitdir("--with-systemdsystemunitdir=/etc/sw-units") == "/etc/sw-units"
    # Without it, below the prefix.
    assert unitdir() == "${prefix}/lib/systemd/system"
