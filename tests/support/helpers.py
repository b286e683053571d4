"""Small helpers for the project's tests: a NumPy reference for lookups on sorted pairs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from indexzoo import LookupResult


def host(res: LookupResult) -> LookupResult:
    return res.to_host()


def reference(keys: np.ndarray, lo: np.ndarray, hi: np.ndarray,
              values: np.ndarray | None = None) -> dict[str, Any]:
    """Exact answers for ranges [lo, hi] (points: lo == hi), by brute force."""
    keys = np.asarray(keys)
    sets = [np.nonzero((keys >= a) & (keys <= b))[0] for a, b in zip(lo, hi, strict=True)]
    vals = np.arange(len(keys), dtype=np.uint64) if values is None else \
        np.asarray(values).astype(np.uint64)
    return {
        "sets": sets,
        "count": np.array([len(s) for s in sets], dtype=np.int64),
        "sum": np.array([vals[s].sum(dtype=np.uint64) for s in sets], dtype=np.uint64),
    }


def rowid_sets(res: LookupResult) -> list[np.ndarray]:
    """The matches of each lookup, sorted (from CSR rowids or from a bitmap)."""
    h = res.to_host()
    if h.out == "bitmap":
        return [h.matches(i) for i in range(len(h))]
    return [np.sort(h.rowids[h.offsets[i]:h.offsets[i + 1]]).astype(np.int64)
            for i in range(len(h.offsets) - 1)]


def bitmap_of(sets: list[np.ndarray], n: int) -> np.ndarray:
    """The contract's packed bits of these rowID sets over ``n`` rows (LSB-first)."""
    words = (n + 31) // 32
    out = np.zeros((len(sets), words), dtype=np.uint32)
    for i, s in enumerate(sets):
        mask = np.zeros(words * 32, dtype=bool)
        mask[np.asarray(s, dtype=np.int64)] = True
        out[i] = np.packbits(mask, bitorder="little").view("<u4")
    return out


def assert_matches(res_by_mode: dict[str, LookupResult], ref: dict[str, Any], miss: int) -> None:
    """Every out mode agrees with the reference."""
    for mode, res in res_by_mode.items():
        h = res.to_host()
        if mode == "rowid":
            for i, s in enumerate(ref["sets"]):
                got = int(h.rowid[i])
                assert (got == miss) if len(s) == 0 else (got in set(s.tolist())), (i, got, s)
        elif mode == "count":
            np.testing.assert_array_equal(h.count.astype(np.int64), ref["count"])
        elif mode == "sum":
            np.testing.assert_array_equal(h.sum, ref["sum"])
        elif mode == "bitmap":
            n = int(h.bitmap.shape[1]) * 32
            want = bitmap_of(ref["sets"], n)
            np.testing.assert_array_equal(h.bitmap, want)
        else:
            got = rowid_sets(res)
            for i, s in enumerate(ref["sets"]):
                np.testing.assert_array_equal(got[i], s, err_msg=f"query {i}")


def assert_identical(a: LookupResult, b: LookupResult, label: str = "") -> None:
    """Bit-identical results (e.g. the CPU twin and the GPU kernels of one index)."""
    ha, hb = a.to_host(), b.to_host()
    assert ha.out == hb.out, (ha.out, hb.out)
    for attr in ("rowid", "count", "sum", "offsets", "rowids", "bitmap"):
        if getattr(ha, attr) is not None:
            np.testing.assert_array_equal(getattr(ha, attr), getattr(hb, attr),
                                          err_msg=f"{label} {attr}")


def general_path_calls(monkeypatch: Any, ix: Any, with_out: bool = False) -> list[str]:
    """Record every lookup call of ``ix`` that reaches the general path (``_lookup``, the
    pipeline): its kind, or with ``with_out`` its kind and out mode (``"range count"``)."""
    seen: list[str] = []
    run = ix._lookup

    def spy(kind: str, out: str, raw: Any) -> Any:
        seen.append(f"{kind} {out}" if with_out else kind)
        return run(kind, out, raw)

    monkeypatch.setattr(ix, "_lookup", spy)
    return seen


def skip_without_cuda_simulator() -> None:
    """Skip the calling test where no CUDA simulator can be had: numba bundles one in
    ``numba.cuda`` (up to at least 0.68), numba-cuda (the cuda12/cuda13 extras) brings its own;
    a numba that dropped its bundled target needs numba-cuda for these tests."""
    import importlib.util

    if importlib.util.find_spec("numba.cuda") is None:
        pytest.skip("no CUDA simulator: this numba has no numba.cuda; pip install numba-cuda "
                    "(or the cuda12/cuda13 extra) to run this test")


def agrees_in_the_simulator(script: str, marker: str = "simulator agrees") -> None:
    """Run ``script`` in a fresh interpreter with numba's CUDA simulator switched on (the tests
    folder importable, for ``support.cudasim_warp``); it must exit 0 and print ``marker``. Skips where
    there is no simulator (:func:`skip_without_cuda_simulator`)."""
    skip_without_cuda_simulator()
    tests = str(Path(__file__).parents[1])
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")]))}
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env=env, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    assert marker in res.stdout, res.stdout


def add_broken_entry_point(monkeypatch: Any) -> None:
    """Make ``importlib.metadata.entry_points`` list one more indexzoo plugin, ``broken``,
    whose module does not exist (a third-party plugin that fails to import)."""
    import importlib.metadata as md

    real = md.entry_points

    class BrokenEP:
        name, value, group, dist = "broken", "no_such_module_xyz", "indexzoo", None

        def load(self) -> Any:
            raise ImportError("No module named 'no_such_module_xyz'")

    def fake_entry_points(**kw: Any) -> Any:
        eps = list(real(**kw))
        return [*eps, BrokenEP()] if kw.get("group") == "indexzoo" else eps

    monkeypatch.setattr(md, "entry_points", fake_entry_points)


def one_index_plugin(name: str, doc: str, cls: str = "Tiny") -> str:
    """The source of a plugin module registering one index class ``cls``, named ``name``,
    whose docstring is ``doc`` (a brute-force stub: it builds and answers nothing)."""
    return f'''"""A third-party plugin of one index."""
from typing import Any, ClassVar

import indexzoo
from indexzoo import BuildState, Capabilities, Footprint, GpuIndex


class {cls}State(BuildState):
    keys: Any


class {cls}(GpuIndex[{cls}State]):
    """{doc}"""

    name: ClassVar[str] = {name!r}
    capabilities: ClassVar[Capabilities] = Capabilities(point=True, range=True)
    plugin_api: ClassVar[str] = "2.0"
    points_as_ranges: ClassVar[bool] = True

    def _build(self, st: Any, keys: Any) -> None:
        st.keys = keys

    def _footprint(self, st: Any) -> Footprint:
        return Footprint()

    def _range_rowids(self, st: Any, lo: Any, hi: Any) -> Any:
        raise NotImplementedError


@indexzoo.hookimpl
def indexzoo_register_indexes(register: Any) -> None:
    register({cls})
'''


def fake_distribution(root: Path, dist: str, entry_points: dict[str, str],
                      modules: dict[str, str]) -> Path:
    """A distribution ``dist`` installed in the folder ``root`` (put it on ``sys.path`` or
    ``PYTHONPATH``): its ``indexzoo`` entry points (name -> module) and its modules (name ->
    source). Found by ``importlib.metadata`` as a real install is."""
    info = root / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        "[indexzoo]\n" + "".join(f"{name} = {module}\n" for name, module in entry_points.items()))
    for name, source in modules.items():
        (root / f"{name}.py").write_text(source)
    return root


def killed_writer(script: str, *args: str) -> int:
    """Run ``script`` (``python -c``, with ``args``), which prints ``writing`` once it has
    begun writing a file and then waits; kill it there with SIGKILL; its pid."""
    child = subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE,
                             text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "writing"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    return child.pid
