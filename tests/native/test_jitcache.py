"""The kernel cache (``indexzoo.native.jitcache``, on by default in the user's cache folder,
moved or turned off by ``INDEXZOO_KERNEL_CACHE``): a kernel compiled in one process is loaded,
not compiled, in the next; an entry only ever answers for the exact kernel it was made from
(body, closure values, the globals and functions it reaches, argument types, versions, the
CPU), so a cache can never hand a test code other than the code it would compile; kernels it
cannot describe are compiled as without it. A damaged file is compiled over and removed, the
folder stays under its size limit (least recently used out first), and a home or folder that
cannot hold the cache leaves every kernel compiling as without it, silently."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import textwrap
import threading
import types
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numba.extending import register_jitable

from indexzoo.native import jitcache
from indexzoo.native.targets import Kernel

#: A program that runs one kernel of tests/native/jitcache_bodies.py and says whether it was
#: compiled or loaded.
PROGRAM = textwrap.dedent("""
    import sys
    import numpy as np
    sys.path.insert(0, {folder!r})
    import jitcache_bodies as b
    from indexzoo.native.targets import Kernel

    b.OFFSET = {offset}

    kernel = Kernel(b.make({factor}))
    x = np.arange(10, dtype=np.{dtype})
    out = np.zeros_like(x)
    kernel("cpu", 10, x, out)
    stats = kernel._get("cpu-serial").stats
    print(out.tolist(), "hits", sum(stats.cache_hits.values()),
          "misses", sum(stats.cache_misses.values()))
""")

BODIES = '''
from numba.extending import register_jitable

OFFSET = 0


def make(factor):
    @register_jitable
    def scale_item(i, x, out):
        out[i] = x[i] * factor + OFFSET

    return scale_item
'''


def _command(folder: Path, cache: Path | str | None, factor: int = 2, dtype: str = "int64",
             offset: int = 0, **env: str | None) -> tuple[list[str], dict[str, str]]:
    """The program's command line and environment: the cache in ``cache`` ("off" where None,
    the default where ""), the variables ``env`` set (removed where None)."""
    (folder / "jitcache_bodies.py").write_text(BODIES)
    env = {"INDEXZOO_KERNEL_CACHE": "off" if cache is None else str(cache), **env}
    full = {k: v for k, v in os.environ.items() if k not in env}
    full.update({k: v for k, v in env.items() if v is not None})
    return [sys.executable, "-c", PROGRAM.format(folder=str(folder), factor=factor, dtype=dtype,
                                                 offset=offset)], full


def _read(stdout: str) -> tuple[list[int], int, int]:
    words = stdout.split()
    out = [int(w.strip("[],")) for w in words[:10]]
    return out, int(words[11]), int(words[13])


def _run(folder: Path, cache: Path | str | None, factor: int = 2, dtype: str = "int64",
         offset: int = 0, **env: str | None) -> tuple[list[int], int, int]:
    """Run the program: its output, cache hits and misses; it writes nothing on stderr (no
    warning either)."""
    command, full = _command(folder, cache, factor, dtype, offset, **env)
    res = subprocess.run(command, capture_output=True, text=True, env=full, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""
    return _read(res.stdout)


DOUBLED = [2 * i for i in range(10)]


def test_a_second_process_loads_the_kernel_the_first_compiled(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    assert _run(tmp_path, cache) == ([2 * i for i in range(10)], 0, 1)
    assert any(cache.iterdir())
    assert _run(tmp_path, cache) == ([2 * i for i in range(10)], 1, 0)
    # turned off, nothing is read: the kernel is compiled
    assert _run(tmp_path, None) == (DOUBLED, 0, 1)


def test_an_entry_answers_only_for_its_own_closure_globals_and_argument_types(
        tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    assert _run(tmp_path, cache, factor=2)[1:] == (0, 1)
    # another value in the body's closure: another kernel, compiled
    assert _run(tmp_path, cache, factor=3) == ([3 * i for i in range(10)], 0, 1)
    # another value of a global the body reads (numba freezes it into the code): compiled
    assert _run(tmp_path, cache, factor=2, offset=5) == ([2 * i + 5 for i in range(10)], 0, 1)
    # other argument types: compiled
    assert _run(tmp_path, cache, factor=2, dtype="int32")[1:] == (0, 1)
    # and each of them is found again
    assert _run(tmp_path, cache, factor=3)[1:] == (1, 0)
    assert _run(tmp_path, cache, factor=2, offset=5)[1:] == (1, 0)


def test_a_damaged_truncated_or_foreign_entry_is_compiled_over_and_removed(
        tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _run(tmp_path, cache)
    (entry,) = cache.iterdir()
    good = entry.read_bytes()
    for damaged in (b"not a cache entry", good[:len(good) // 2], b""):
        entry.write_bytes(damaged)
        assert _run(tmp_path, cache) == (DOUBLED, 0, 1)
        # the kernel was written anew under its name
        assert _run(tmp_path, cache) == (DOUBLED, 1, 0)
    # a valid entry of another kernel moved to this kernel's name is refused (its key differs)
    _run(tmp_path, cache, factor=3)
    mine = sorted(cache.iterdir(), key=lambda p: p.stat().st_mtime)
    mine[-1].replace(mine[0])
    assert _run(tmp_path, cache) == (DOUBLED, 0, 1)
    assert _run(tmp_path, cache) == (DOUBLED, 1, 0)


def test_a_file_that_is_no_entry_is_removed_unless_replaced_meanwhile(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INDEXZOO_KERNEL_CACHE", str(tmp_path))
    fn = Kernel(_add_item)._make("cpu-serial")
    cache = fn._cache
    from numba.core import types as nbtypes

    sig = (nbtypes.int64, nbtypes.Array(nbtypes.int64, 1, "C"), nbtypes.Array(nbtypes.int64, 1, "C"))
    key = cache._key(sig, fn.targetctx.codegen().magic_tuple())
    assert key is not None
    path = Path(key[1])
    for damaged in (b"junk", b"", b"\x80\x05"):
        path.write_bytes(damaged)
        assert cache.load_overload(sig, fn.targetctx) is None
        assert not path.exists()
    # a file another process put in place after this one read a damaged one is kept
    path.write_bytes(b"junk")
    read = os.stat(path)
    (tmp_path / "new").write_bytes(b"an entry, say")
    os.replace(tmp_path / "new", path)
    jitcache._discard(str(path), read)
    assert path.read_bytes() == b"an entry, say"


def test_it_is_on_by_default_in_the_users_cache_folder(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env: dict[str, str | None] = {"HOME": str(home), "XDG_CACHE_HOME": None,
                                  "INDEXZOO_CACHE_DIR": None}
    assert _run(tmp_path, "", **env) == (DOUBLED, 0, 1)
    folder = home / ".cache" / "indexzoo" / "kernels"
    assert [p.suffix for p in folder.iterdir()] == [".nbk"]
    assert _run(tmp_path, "", **env) == (DOUBLED, 1, 0)
    # XDG_CACHE_HOME moves the user's cache folder, INDEXZOO_CACHE_DIR indexzoo's
    assert _run(tmp_path, "", **{**env, "XDG_CACHE_HOME": str(tmp_path / "xdg")})[1:] == (0, 1)
    assert any((tmp_path / "xdg" / "indexzoo" / "kernels").iterdir())
    assert _run(tmp_path, "", **{**env, "INDEXZOO_CACHE_DIR": str(tmp_path / "iz")})[1:] == (0, 1)
    assert any((tmp_path / "iz" / "kernels").iterdir())


def test_processes_compiling_at_once_all_succeed(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    command, env = _command(tmp_path, cache)
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env) for _ in range(3)]
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0 and err == "", err
        assert _read(out)[0] == DOUBLED
    assert [p.suffix for p in cache.iterdir()] == [".nbk"]  # one entry, no temporary left
    assert _run(tmp_path, cache) == (DOUBLED, 1, 0)


def test_a_load_touches_the_entry_and_a_full_folder_loses_its_least_recently_used(
        tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _run(tmp_path, cache)
    (entry,) = cache.iterdir()
    os.utime(entry, (1_000_000, 1_000_000))
    assert _run(tmp_path, cache)[1:] == (1, 0)
    assert entry.stat().st_mtime > 1_000_000  # used now
    # the folder over its limit (1 MiB): the next write prunes the oldest first
    old, older = cache / "old-0.nbk", cache / "older-0.nbk"
    old.write_bytes(b"x" * 600_000)
    older.write_bytes(b"x" * 600_000)
    os.utime(old, (2_000_000, 2_000_000))
    os.utime(older, (1_500_000, 1_500_000))
    assert _run(tmp_path, cache, factor=5, INDEXZOO_KERNEL_CACHE_SIZE="1")[1:] == (0, 1)
    assert not older.exists() and old.exists() and entry.exists()
    assert len(list(cache.glob("scale-*.nbk"))) == 2


@register_jitable
def _add_item(i, x, out):  # type: ignore[no-untyped-def]
    out[i] = x[i] + 1


@register_jitable
def _sub_item(i, x, out):  # type: ignore[no-untyped-def]
    out[i] = x[i] - 1


def _factory(flag: bool):  # type: ignore[no-untyped-def]
    @register_jitable
    def flagged_item(i, x, out):  # type: ignore[no-untyped-def]
        out[i] = x[i] + (1 if flag else 2)

    return flagged_item


def test_kernels_of_one_template_have_identities_of_their_bodies() -> None:
    def ident(body):  # type: ignore[no-untyped-def]
        return jitcache.identity(Kernel(body)._make("cpu-serial"))

    assert ident(_add_item) == ident(_add_item)
    assert ident(_add_item) != ident(_sub_item)
    assert ident(_factory(True)) == ident(_factory(True))
    assert ident(_factory(True)) != ident(_factory(False))
    assert (jitcache.identity(Kernel(_add_item)._make("cpu"))
            != jitcache.identity(Kernel(_add_item)._make("cpu-serial")))


def test_a_value_it_cannot_describe_makes_the_kernel_uncacheable() -> None:
    opaque = types.SimpleNamespace(k=1)

    @register_jitable
    def odd_item(i, x, out):  # type: ignore[no-untyped-def]
        out[i] = x[i] + opaque.k

    assert jitcache.identity(Kernel(odd_item)._make("cpu-serial")) is None


def test_arrays_in_the_code_are_part_of_the_identity() -> None:
    def with_table(table):  # type: ignore[no-untyped-def]
        @register_jitable
        def lookup_item(i, x, out):  # type: ignore[no-untyped-def]
            out[i] = table[x[i] % 4]

        return jitcache.identity(Kernel(lookup_item)._make("cpu-serial"))

    a = np.arange(4, dtype=np.int64)
    assert with_table(a) == with_table(a.copy())
    assert with_table(a) != with_table(a[::-1].copy())


def test_the_test_run_keeps_its_kernels_out_of_the_users_cache_folder() -> None:
    """tests/conftest.py: unset, the variable names a folder in pytest's temporary folder
    of the run, which this process and every process the tests start use."""
    from indexzoo.cachedirs import user_cache_root

    folder = jitcache.location().folder
    root = user_cache_root()
    assert folder is not None and os.environ["INDEXZOO_KERNEL_CACHE"].strip()
    assert root is None or not folder.startswith(root)


@pytest.mark.parametrize("word", ["off", "0", "no", "FALSE", " none "])
def test_the_words_of_off_turn_it_off(word: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INDEXZOO_KERNEL_CACHE", word)
    assert jitcache.location().folder is None
    fn = Kernel(_add_item)._make("cpu-serial")
    assert type(fn._cache).__name__ == "NullCache"


RECORD_PROGRAM = textwrap.dedent("""
    import collections
    import numpy as np
    from numba.extending import register_jitable
    from indexzoo.native.targets import Kernel

    def record_class():  # made per call, as a launch record's class is: pickled by value
        return collections.namedtuple("Launch", ["keys", "shift"])

    @register_jitable
    def shifted_item(i, rec, out):
        out[i] = rec.keys[i] + rec.shift

    kernel = Kernel(shifted_item)
    rec = record_class()(np.arange(10, dtype=np.int64), 5)
    out = np.zeros(10, dtype=np.int64)
    for _ in range(3):
        kernel("cpu", 10, rec, out)
    stats = kernel._get("cpu-serial").stats
    print(out.tolist() == list(range(5, 15)), "hits", sum(stats.cache_hits.values()),
          "misses", sum(stats.cache_misses.values()))
""")


def _printed(program: str, cache: Path) -> str:
    """What ``program`` prints, run in a new process with the kernel cache in ``cache``."""
    env = {**os.environ, "INDEXZOO_KERNEL_CACHE": str(cache)}
    res = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True,
                         env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


def test_a_kernel_of_a_record_made_per_call_is_loaded_once_not_at_every_call(
        tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    assert _printed(RECORD_PROGRAM, cache) == "True hits 0 misses 1"
    # three calls, one load: filed under the asked types
    assert _printed(RECORD_PROGRAM, cache) == "True hits 1 misses 0"


#: Compiled functions that call numba's runtime (NRT: an array made inside) and the hash secret
#: (a string's hash), and one that calls neither: a process loading one sets up only what its
#: entry names. (The index kernels are compiled without NRT, ``_nrt=False``, so none of them
#: calls either; the cache takes any numba CPU function.)
RUNTIME_BODIES = '''
import numpy as np


def plain(x):
    return x + 1


def alloc(x):
    tmp = np.empty(2, dtype=np.int64)
    tmp[0] = x
    tmp[1] = 3
    return tmp.sum()


def hashed(x):
    return hash(str(x))
'''

RUNTIME_PROGRAM = textwrap.dedent("""
    import sys
    from numba import njit
    sys.path.insert(0, {folder!r})
    import runtime_bodies as b
    from indexzoo.native import jitcache

    hits = []
    for name in ("plain", "alloc", "hashed"):
        fn = jitcache.attach(njit(getattr(b, name)))
        got = fn(7)
        want = getattr(b, name)(7)  # in Python: this process's hash secret
        assert got == want, (name, got, want)
        hits.append(sum(fn.stats.cache_hits.values()))
    print(*hits)
""")


def test_code_calling_numbas_runtime_or_hash_secret_is_loaded_with_them_set_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    (tmp_path / "runtime_bodies.py").write_text(RUNTIME_BODIES)
    program = RUNTIME_PROGRAM.format(folder=str(tmp_path))
    assert _printed(program, cache) == "0 0 0"
    monkeypatch.syspath_prepend(str(tmp_path))  # (an entry's payload names the module)
    needs = sorted(pickle.loads(p.read_bytes())[1] for p in cache.glob("*.nbk"))
    assert needs == [(), ("nrt",), ("nrt", "hash")]
    # each loaded in a process that sets up only what its entry names, and answers right
    # (with that process's hash secret: each process draws its own)
    assert _printed(program, cache) == "1 1 1"


@pytest.mark.parametrize("variable", ["", "  "])
def test_unset_it_is_kernels_in_the_cache_folder(variable: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INDEXZOO_KERNEL_CACHE", variable)
    monkeypatch.setenv("INDEXZOO_CACHE_DIR", str(tmp_path / "iz"))
    where = jitcache.location()
    assert where.folder == str(tmp_path / "iz" / "kernels")
    assert where.limit == 1024 << 20
    fn = Kernel(_add_item)._make("cpu-serial")
    assert fn._cache.cache_path == where.folder and (tmp_path / "iz" / "kernels").is_dir()
    monkeypatch.setenv("INDEXZOO_KERNEL_CACHE", "~/kernels")
    assert jitcache.location().folder == os.path.join(os.path.expanduser("~"), "kernels")


def _compiles_silently(monkeypatch: pytest.MonkeyPatch, *, cached: bool) -> None:
    """A new kernel compiles and runs, with no warning, and with a cache or without."""
    @register_jitable
    def silent_item(i, x, out):  # type: ignore[no-untyped-def]
        out[i] = x[i] * 7

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fn = Kernel(silent_item)._make("cpu-serial")
        x = np.arange(5, dtype=np.int64)
        out = np.zeros_like(x)
        fn(5, x, out)
    assert out.tolist() == [0, 7, 14, 21, 28]
    assert (type(fn._cache).__name__ == "_KernelCache") == cached


def test_a_folder_that_cannot_be_created_compiles_as_without_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("INDEXZOO_KERNEL_CACHE", str(blocker / "kernels"))
    _compiles_silently(monkeypatch, cached=False)
    state, why = jitcache.state(str(blocker / "kernels"))
    assert state == "off" and "is not a folder" in (why or "")
    assert jitcache.state(str(tmp_path / "new" / "kernels")) == ("on", None)
    # a home folder under a file: the default folder cannot be made either
    monkeypatch.setenv("INDEXZOO_KERNEL_CACHE", "")
    monkeypatch.delenv("INDEXZOO_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(blocker / "home"))
    assert jitcache.location().folder == str(blocker / "home" / ".cache" / "indexzoo" / "kernels")
    _compiles_silently(monkeypatch, cached=False)
    assert not (tmp_path / "home").exists()


def test_no_home_folder_at_all_turns_it_off(monkeypatch: pytest.MonkeyPatch) -> None:
    import pwd

    def nobody(uid: int) -> None:
        raise KeyError(uid)

    monkeypatch.setenv("INDEXZOO_KERNEL_CACHE", "")
    monkeypatch.delenv("INDEXZOO_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.setattr(pwd, "getpwuid", nobody)
    where = jitcache.location()
    assert where.folder is None and "no home folder" in where.why
    _compiles_silently(monkeypatch, cached=False)


def test_a_folder_that_cannot_be_written_is_read_and_never_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() == 0:
        pytest.skip("root may write into read-only folders")
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    monkeypatch.setenv("INDEXZOO_KERNEL_CACHE", str(folder))
    try:
        _compiles_silently(monkeypatch, cached=True)
        assert list(folder.iterdir()) == []
        state, why = jitcache.state(str(folder))
        assert state == "read only" and "cannot be written" in (why or "")
    finally:
        folder.chmod(0o700)


def test_a_write_that_fails_is_silent_and_the_process_writes_no_more(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What a read-only folder does to a root process (chmod does not stop root): the first
    write fails, the kernel runs compiled, and no later kernel tries again."""
    monkeypatch.setenv("INDEXZOO_KERNEL_CACHE", str(tmp_path / "full"))
    real_open = open
    tries = []

    def failing_open(path: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if str(path).startswith(str(tmp_path / "full")) and "x" in mode:
            tries.append(path)
            raise OSError(28, "No space left on device")
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr("builtins.open", failing_open)
    _compiles_silently(monkeypatch, cached=True)
    _compiles_silently(monkeypatch, cached=True)
    assert len(tries) == 1 and list((tmp_path / "full").iterdir()) == []


def test_the_key_holds_the_versions_and_the_target_machine() -> None:
    import llvmlite
    import numba

    environment = jitcache._environment()
    for part in (sys.version, sys.platform, numba.__version__, llvmlite.__version__,
                 np.__version__):
        assert repr(part) in environment, part
    for setting in ("OPT", "CPU_NAME", "CPU_FEATURES", "BOUNDSCHECK"):  # NUMBA_OPT, ...
        assert f"('{setting}', " in environment, setting
    fn = Kernel(_add_item)._make("cpu-serial")
    cache = jitcache._KernelCache(fn, jitcache._Folder("/nowhere", 1 << 20))
    magic = fn.targetctx.codegen().magic_tuple()  # (triple, CPU name, CPU features)
    assert magic[1] and magic[2]  # this machine's CPU name and features
    key = cache._key("(int64,)", magic)
    assert key is not None and key == cache._key("(int64,)", magic)
    other_cpu = cache._key("(int64,)", (magic[0], "another-cpu", magic[2]))
    other_features = cache._key("(int64,)", (magic[0], magic[1], magic[2] + ",+other"))
    assert other_cpu is not None and other_features is not None
    assert len({key[1], other_cpu[1], other_features[1]}) == 3


def _files(folder: Path, sizes: dict[str, int], mtimes: dict[str, float]) -> None:
    folder.mkdir(exist_ok=True)
    for name, size in sizes.items():
        (folder / name).write_bytes(b"x" * size)
        os.utime(folder / name, (mtimes[name], mtimes[name]))


def test_pruning_removes_the_least_recently_used_down_to_the_limit(tmp_path: Path) -> None:
    now = 10_000_000.0
    _files(tmp_path, {"a.nbk": 400, "b.nbk": 400, "c.nbk": 400, "d.nbk": 400,
                      "a.nbk.123.tmp": 50, "b.nbk.456.tmp": 50, "notes.txt": 10_000},
           {"a.nbk": now - 10, "b.nbk": now - 40, "c.nbk": now - 30, "d.nbk": now - 20,
            "a.nbk.123.tmp": now - 2 * jitcache.STALE_TEMP_S, "b.nbk.456.tmp": now - 1,
            "notes.txt": 0})
    assert jitcache.usage(str(tmp_path)) == jitcache.Usage(4, 1600, 2)
    removed = jitcache.prune(str(tmp_path), 900, now=now)
    assert sorted(Path(p).name for p in removed) == ["a.nbk.123.tmp", "b.nbk", "c.nbk"]
    # the newest kept; a temporary file being written kept; files not the cache's untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.nbk", "b.nbk.456.tmp", "d.nbk",
                                                          "notes.txt"]
    assert jitcache.prune(str(tmp_path), 900, now=now) == []
    assert jitcache.clear(str(tmp_path)) == (2, 800)
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]
    assert jitcache.prune(str(tmp_path / "missing"), 1) == []


def test_pruning_beside_another_process_pruning_is_safe(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    _files(tmp_path, {f"{i}.nbk": 100 for i in range(6)}, {f"{i}.nbk": 1000.0 + i for i in range(6)})
    real_unlink = os.unlink

    def raced(path: Any) -> None:  # the other process removes each file first
        real_unlink(path)
        raise FileNotFoundError(path)

    monkeypatch.setattr(os, "unlink", raced)
    removed = jitcache.prune(str(tmp_path), 250)
    assert sorted(Path(p).name for p in removed) == ["0.nbk", "1.nbk", "2.nbk", "3.nbk"]
    monkeypatch.undo()
    # and two threads pruning one folder at once
    _files(tmp_path, {f"{i}.nbk": 100 for i in range(200)}, {f"{i}.nbk": 1000.0 + i for i in range(200)})
    errors: list[BaseException] = []

    def prune() -> None:
        try:
            jitcache.prune(str(tmp_path), 1000)
        except BaseException as exc:  # pragma: no cover - the failure this test looks for
            errors.append(exc)

    threads = [threading.Thread(target=prune) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and jitcache.usage(str(tmp_path)).bytes <= 1000


def test_a_process_prunes_after_its_first_write_then_per_tenth_of_the_limit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(jitcache, "prune", lambda path, limit: calls.append(limit) or [])
    folder = jitcache._Folder("/nowhere", 1000)
    folder.wrote(10)
    assert calls == [1000]
    for _ in range(10):
        folder.wrote(10)
    assert calls == [1000]  # 100 bytes written: not yet more than a tenth
    folder.wrote(1)
    assert calls == [1000, 1000]


def test_a_load_never_lists_the_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INDEXZOO_KERNEL_CACHE", str(tmp_path))
    x = np.arange(4, dtype=np.int64)
    Kernel(_sub_item)._make("cpu-serial")(4, x, np.zeros_like(x))  # compiled and written
    listed: list[Any] = []
    real = os.scandir

    def scandir(path: Any) -> Any:
        listed.append(path)
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    for _ in range(3):
        fn = Kernel(_sub_item)._make("cpu-serial")
        out = np.zeros_like(x)
        fn(4, x, out)
        assert out.tolist() == [-1, 0, 1, 2] and sum(fn.stats.cache_hits.values()) == 1
    assert listed == []


# ------------------------------------------------------------------ CUDA kernels (their PTX)
def _cuda_entry(monkeypatch: pytest.MonkeyPatch, fn: Any, cc: tuple[int, int] = (9, 0),
                versions: str = "numba-cuda 0.1, NVVM (2, 0), driver 13000") -> Any:
    # keyed by the kernel's identity like a CPU kernel (a CPU dispatcher stands in for a CUDA
    # one here), plus the versions a GPU machine would report
    monkeypatch.setattr(jitcache, "_cuda_environment", lambda: versions)
    from numba.core import types as nbtypes

    return jitcache.cuda_entry(fn, (nbtypes.int64, nbtypes.Array(nbtypes.int64, 1, "C")), cc)


def test_a_cuda_kernels_ptx_is_kept_for_the_next_process_under_everything_it_depends_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INDEXZOO_KERNEL_CACHE", str(tmp_path))
    fn = Kernel(_add_item)._make("cpu-serial")
    entry = _cuda_entry(monkeypatch, fn)
    assert entry is not None and entry.load() is None
    entry.save(b"// PTX of the kernel", "_Z6kernel")
    assert _cuda_entry(monkeypatch, fn).load() == (b"// PTX of the kernel", "_Z6kernel")
    assert jitcache.usage(str(tmp_path)).entries == 1  # counted, pruned and cleared with the rest
    # another device, another driver or numba-cuda, or other code: not this entry
    assert _cuda_entry(monkeypatch, fn, cc=(8, 0)).load() is None
    assert _cuda_entry(monkeypatch, fn, versions="numba-cuda 0.2").load() is None
    other = Kernel(_sub_item)._make("cpu-serial")
    assert _cuda_entry(monkeypatch, other).load() is None


def test_a_damaged_or_foreign_cuda_entry_is_compiled_over(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INDEXZOO_KERNEL_CACHE", str(tmp_path))
    fn = Kernel(_add_item)._make("cpu-serial")
    entry = _cuda_entry(monkeypatch, fn)
    for damaged in (b"junk", b"", pickle.dumps(("another key", b"ptx", "name"))):
        Path(entry.path).write_bytes(damaged)
        assert entry.load() is None and not os.path.exists(entry.path)


def test_no_cuda_entry_where_the_cache_is_off(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INDEXZOO_KERNEL_CACHE", "off")
    assert _cuda_entry(monkeypatch, Kernel(_add_item)._make("cpu-serial")) is None
