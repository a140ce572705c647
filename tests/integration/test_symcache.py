"""The debuginfo cache, as a user meets it: the stripped fixture's debuginfo is compressed as Debian ships debuginfo;
the first dump stores it inflated, by build-id, and later dumps read it from there (even once the original is gone),
with the same frames. Beside it, each build-id's resolved addresses (<build-id>.pcs): a later dump of the same pcs
opens no debuginfo at all. Concurrent dumps, a damaged entry and a full file system never cost a dump its output."""
import glob
import os
import re
import subprocess

from conftest import DEBUGDIR, STACKCTL, stackctl, wait_until

NOWHERE = ":/nonexistent"  # a --debuginfo-path under which no debuginfo is found: only the cache can resolve


def fixture_debuginfo():
    (path,) = glob.glob(os.path.join(DEBUGDIR, ".build-id", "*", "*.debug"))
    bid = path.split(".build-id/")[1].replace("/", "").replace(".debug", "")
    return path, bid


def compressed_sections(path):
    out = subprocess.run(["readelf", "-S", "-W", path], capture_output=True, text=True).stdout
    # Section lines: "  [Nr] Name Type Address Off Size ES Flg ..."; C in Flg marks a compressed section.
    return [ln.split()[1] for ln in out.splitlines()
            if ln.lstrip().startswith("[") and "]" in ln and " C " in ln.split("]", 1)[1] and ".debug" in ln]


def dump(pid, cache, debuginfo_path=DEBUGDIR, *args, check_rc=0):
    r = stackctl("dump", "--no-kernel", "--debug", "--cache-dir", cache, "--debuginfo-path", debuginfo_path, *args,
                 pid, check_rc=check_rc)
    return r.stdout.decode(), r.stderr.decode()


def resolved(out):
    return "br_level_20+0x" in out and "block-read.c:" in out


def memos(cache):
    return sorted(n for n in os.listdir(cache) if n.endswith(".pcs"))


def drop_memos(cache):
    """Forget the resolved addresses, so that the next dump reads the debuginfo entries."""
    for n in memos(cache):
        os.unlink(os.path.join(cache, n))


def memo_counts(err):
    m = re.search(r"addresses: (\d+) hits, (\d+) misses; debuginfo cache: (\d+) hits, \d+ stored; "
                  r"resolved addresses cache: (\d+) read, (\d+) modules stored", err)
    assert m, err
    return dict(zip(("addr_hits", "addr_misses", "debuginfo_hits", "read", "stored"), map(int, m.groups())))


def test_first_dump_stores_then_later_dumps_read_the_cache(fixture, tmp_path):
    src, bid = fixture_debuginfo()
    assert compressed_sections(src), "the fixture's debuginfo should be compressed, as Debian's is"
    fx = fixture("block-read-stripped").wait_wchan("pipe_read")
    cache = str(tmp_path / "cache" / "symbols")  # created, parents too

    cold, err = dump(fx.pid, cache)
    assert resolved(cold), cold
    # The fixture's debuginfo, and libc's too where libc6-dbg is installed.
    assert "debuginfo cache: 0 hits," in err and " 0 stored" not in err, err
    entry = os.path.join(cache, bid + ".debug")
    assert os.path.isfile(entry)
    assert compressed_sections(entry) == [], "stored inflated"
    assert os.path.getsize(entry) > os.path.getsize(src)

    assert bid + ".pcs" in memos(cache), os.listdir(cache)

    # Warm: every pc from the memo, no debuginfo opened, not even the cached copy.
    warm, err = dump(fx.pid, cache)
    c = memo_counts(err)
    assert c["read"] > 0 and c["addr_misses"] == 0 and c["debuginfo_hits"] == 0 and c["stored"] == 0, err
    assert warm == cold  # the same frames, lines and columns
    # The memo alone resolves it: neither the original debuginfo nor the cached copy is there.
    os.rename(entry, entry + ".away")
    alone, err = dump(fx.pid, cache, NOWHERE)
    assert alone == cold, err
    os.rename(entry + ".away", entry)
    # The debuginfo entry alone resolves it too: the original debuginfo is out of reach now.
    drop_memos(cache)
    alone, err = dump(fx.pid, cache, NOWHERE)
    assert alone == cold and re.search(r"debuginfo cache: [12] hits", err), err
    # Without the cache, and without the original: unresolved, as before.
    out, _ = dump(fx.pid, cache, NOWHERE, "--no-cache")
    assert "br_level_20" not in out
    fx.assert_untouched()


def test_concurrent_cold_dumps(fixture, tmp_path):
    _, bid = fixture_debuginfo()
    fx = fixture("block-read-stripped").wait_wchan("pipe_read")
    cache = str(tmp_path / "cache")
    procs = [subprocess.Popen([STACKCTL, "dump", "--no-kernel", "--cache-dir", cache, "--debuginfo-path", DEBUGDIR,
                               str(fx.pid)], stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(6)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0] * 6, [e for _, e in outs]
    assert len({o for o, _ in outs}) == 1 and resolved(outs[0][0].decode())
    # The entry, whole, and no writer's temporary file left behind (libc's entry too with libc6-dbg).
    left = os.listdir(cache)
    assert bid + ".debug" in left and bid + ".pcs" in left, left
    assert all(n.endswith((".debug", ".pcs")) and not n.startswith(".") for n in left), left
    alone, _ = dump(fx.pid, cache, NOWHERE)
    assert alone == outs[0][0].decode()


def test_a_damaged_entry_is_not_used_and_is_replaced(fixture, tmp_path):
    _, bid = fixture_debuginfo()
    fx = fixture("block-read-stripped").wait_wchan("pipe_read")
    cache = str(tmp_path / "cache")
    good, _ = dump(fx.pid, cache)
    entry = os.path.join(cache, bid + ".debug")
    size = os.path.getsize(entry)
    drop_memos(cache)  # else the memo answers and the entry is never opened

    os.truncate(entry, size // 2)  # a disk that filled up under another tool, a copy cut short
    out, err = dump(fx.pid, cache, NOWHERE)
    assert "br_level_20" not in out and "read+0x" in out  # not used: the frames are unresolved, not wrong
    assert "damaged" in err and not os.path.exists(entry)

    with open(entry, "wb") as f:  # garbage under the name
        f.write(b"\x7fELF" + os.urandom(4096))
    out, err = dump(fx.pid, cache)
    assert out == good and " 0 stored" not in err  # the original used, and the entry written again
    assert os.path.getsize(entry) == size
    drop_memos(cache)

    # A whole, valid ELF file of another build under this build-id's name is not this build's debuginfo.
    with open("/usr/bin/true", "rb") as f, open(entry, "wb") as g:
        g.write(f.read())
    out, err = dump(fx.pid, cache, NOWHERE)
    assert "br_level_20" not in out and not os.path.exists(entry)


def test_a_full_file_system_costs_the_cache_not_the_dump(fixture, tmp_path):
    fx = fixture("block-read-stripped").wait_wchan("pipe_read")
    cache = tmp_path / "cache"
    cache.mkdir()
    # A private mount namespace with a tmpfs too small for the inflated copy (it fits the compressed one).
    script = ('mount -t tmpfs -o size=12k tmpfs "$1" || exit 99; shift; "$@"; rc=$?; '
              'echo "LEFT:$(ls -A "$CACHE" | tr "\\n" " ")" >&2; exit $rc')
    r = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", str(cache),
                        STACKCTL, "dump", "--no-kernel", "--debug", "--cache-dir", str(cache), "--debuginfo-path",
                        DEBUGDIR, str(fx.pid)], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, CACHE=str(cache)))
    assert r.returncode == 0, r.stderr
    assert resolved(r.stdout)
    assert "debuginfo cache: 0 hits, 0 stored" in r.stderr
    # Nothing half-written: no debuginfo entry (it did not fit), no writer's temporary file; the small memos fit.
    left = r.stderr.rsplit("LEFT:", 1)[1].split()
    assert all(n.endswith(".pcs") and not n.startswith(".") for n in left), r.stderr


def test_an_unusable_cache_directory_is_a_warning_not_a_failure(fixture, tmp_path):
    fx = fixture("block-read-stripped").wait_wchan("pipe_read")
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    r = stackctl("dump", "--no-kernel", "--cache-dir", str(blocker / "symbols"), "--debuginfo-path", DEBUGDIR,
                 fx.pid, check_rc=0)
    assert resolved(r.stdout.decode())
    assert "Cannot use the debuginfo cache" in r.stderr.decode()
    r = stackctl("dump", "--cache-dir", "relative", fx.pid, check_rc=2)
    assert "absolute path" in r.stderr.decode()


def test_a_damaged_memo_is_removed_and_the_dump_is_the_same(fixture, tmp_path):
    _, bid = fixture_debuginfo()
    fx = fixture("block-read-stripped").wait_wchan("pipe_read")
    cache = str(tmp_path / "cache")
    good, _ = dump(fx.pid, cache)
    memo = os.path.join(cache, bid + ".pcs")
    with open(memo, "rb") as f:
        whole = f.read()
    flipped = bytearray(whole)
    flipped[-3] ^= 0x20  # one letter of a file name: the checksum catches what the structure cannot
    for bad in (whole[:len(whole) // 2], bytes(flipped), b"SWPCS1\n\0" + os.urandom(200), b""):
        with open(memo, "wb") as f:
            f.write(bad)
        out, err = dump(fx.pid, cache)
        assert out == good, err  # resolved from the debuginfo, never from the damaged memo
        c = memo_counts(err)
        assert c["addr_misses"] > 0 and c["stored"] >= 1, err
        with open(memo, "rb") as f:
            assert f.read() == whole  # removed, and written again whole


def test_no_memo_without_debuginfo_so_debuginfo_installed_later_is_used(fixture, tmp_path):
    _, bid = fixture_debuginfo()
    fx = fixture("block-read-stripped").wait_wchan("pipe_read")
    cache = str(tmp_path / "cache")
    before, _ = dump(fx.pid, cache, NOWHERE)
    assert "br_level_20" not in before
    assert bid + ".pcs" not in memos(cache)  # a symbols-only answer is not kept for later
    after, err = dump(fx.pid, cache)  # the debuginfo is there now
    assert resolved(after), after


def test_a_pc_the_memo_lacks_opens_the_module_and_extends_the_memo(fixture, tmp_path):
    cache = str(tmp_path / "cache")
    a = fixture("block-read").wait_wchan("pipe_read")
    first, _ = dump(a.pid, cache)
    sleeper = subprocess.Popen(["sleep", "300"])
    try:
        wait_until(lambda: open(f"/proc/{sleeper.pid}/wchan").read() == "hrtimer_nanosleep", what="sleep asleep")
        out, err = dump(sleeper.pid, cache)
        c = memo_counts(err)
        # libc's memo came from block-read's dump; sleep's nanosleep pcs were not in it.
        assert c["read"] > 0 and c["addr_misses"] > 0 and c["stored"] >= 1, err
        assert out == dump(sleeper.pid, cache, DEBUGDIR, "--no-cache")[0]
        again, err = dump(sleeper.pid, cache)
        c2 = memo_counts(err)
        # libc's memo has sleep's pcs now; sleep's own (no debuginfo here) are resolved each time, never stored.
        assert again == out and c2["read"] > c["read"] and c2["addr_misses"] < c["addr_misses"], err
        assert c2["stored"] == 0, err
    finally:
        sleeper.kill()
        sleeper.wait()
    assert dump(a.pid, cache)[0] == first


def test_no_source_answers_from_the_memo_with_its_own_output(fixture, tmp_path):
    cache = str(tmp_path / "cache")
    fx = fixture("inline-read").wait_wchan("pipe_read")
    full, _ = dump(fx.pid, cache)
    assert "inlined" in full  # the memo holds an inline chain
    plain, _ = dump(fx.pid, cache, DEBUGDIR, "--no-source", "--no-cache")
    out, err = dump(fx.pid, cache, DEBUGDIR, "--no-source")
    # The containing functions only, without file:line, exactly as a --no-source lookup of its own prints them.
    assert out == plain and "inlined" not in out and ".c:" not in out, out
    c = memo_counts(err)
    assert c["read"] > 0 and c["addr_misses"] == 0 and c["stored"] == 0, err
    # --no-demangle's answers are not the memo's: it neither reads nor writes it.
    _, err = dump(fx.pid, cache, DEBUGDIR, "--no-demangle")
    c = memo_counts(err)
    assert c["read"] == 0 and c["stored"] == 0, err
