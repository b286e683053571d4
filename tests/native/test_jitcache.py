"""The kernel cache (``indexzoo.native.jitcache``, on where ``INDEXZOO_KERNEL_CACHE`` names a
folder): a kernel compiled in one process is loaded, not compiled, in the next; an entry only
ever answers for the exact kernel it was made from (body, closure values, the globals and
functions it reaches, argument types), so a cache can never hand a test code other than the
code it would compile; kernels it cannot describe are compiled as without it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

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


def _run(folder: Path, cache: Path | None, factor: int = 2, dtype: str = "int64",
         offset: int = 0) -> tuple[list[int], int, int]:
    (folder / "jitcache_bodies.py").write_text(BODIES)
    env = {k: v for k, v in os.environ.items() if k != "INDEXZOO_KERNEL_CACHE"}
    if cache is not None:
        env["INDEXZOO_KERNEL_CACHE"] = str(cache)
    res = subprocess.run([sys.executable, "-c", PROGRAM.format(folder=str(folder), factor=factor,
                                                                dtype=dtype, offset=offset)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    words = res.stdout.split()
    out = [int(w.strip("[],")) for w in words[:10]]
    return out, int(words[11]), int(words[13])


def test_a_second_process_loads_the_kernel_the_first_compiled(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    assert _run(tmp_path, cache) == ([2 * i for i in range(10)], 0, 1)
    assert any(cache.iterdir())
    assert _run(tmp_path, cache) == ([2 * i for i in range(10)], 1, 0)
    # without the variable nothing is read: the kernel is compiled
    assert _run(tmp_path, None) == ([2 * i for i in range(10)], 0, 1)


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


def test_a_damaged_or_foreign_entry_is_compiled_over(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _run(tmp_path, cache)
    entries = list(cache.iterdir())
    for path in entries:
        path.write_bytes(b"not a cache entry")
    assert _run(tmp_path, cache) == ([2 * i for i in range(10)], 0, 1)
    # a valid entry of another kernel moved to this kernel's name is refused (its key differs)
    _run(tmp_path, cache, factor=3)
    mine = sorted(cache.iterdir(), key=lambda p: p.stat().st_mtime)
    mine[-1].replace(mine[0])
    assert _run(tmp_path, cache) == ([2 * i for i in range(10)], 0, 1)


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


@pytest.mark.parametrize("variable", ["", "  "])
def test_no_folder_no_cache(variable: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INDEXZOO_KERNEL_CACHE", variable)
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


def test_a_kernel_of_a_record_made_per_call_is_loaded_once_not_at_every_call(
        tmp_path: Path) -> None:
    env = {**os.environ, "INDEXZOO_KERNEL_CACHE": str(tmp_path / "cache")}

    def run() -> str:
        res = subprocess.run([sys.executable, "-c", RECORD_PROGRAM], capture_output=True,
                             text=True, env=env, timeout=300)
        assert res.returncode == 0, res.stderr
        return res.stdout.strip()

    assert run() == "True hits 0 misses 1"
    assert run() == "True hits 1 misses 0"  # three calls, one load: filed under the asked types
