"""Shared cases of the ``rx`` tests (tests/plugins/rx/test_rx.py, test_rx_optix.py): the index
wrapper that runs the conformance suite in naive and extended mode (see test_rx.py's docstring),
the configurations the suite runs, every valid lookup configuration, and a workload per key mode.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

import indexzoo
from indexzoo.persist import Array, StateSchema, Value
from indexzoo.plugins.rx import RxIndex
from indexzoo.plugins.rx.index import RxState

from .helpers import assert_identical, rowid_sets

__all__ = ["LIMIT", "SUITE_CONFIGS", "VALID", "InDomain", "_label", "_same", "_workload"]

LIMIT = {"naive": 1 << 23, "extended": 1 << 29}


class InDomainState(RxState):
    image: tuple[Any, Any] | None  # (distinct keys, their images), or None: keys fit the mode


class InDomain(RxIndex):
    """``rx`` for the conformance suite in naive and extended mode (see the module docstring)."""

    State = InDomainState
    #: rx's saved state and the image (a file's image is only read by this test wrapper).
    state_schema = StateSchema(*RxIndex.state_schema.specs,
                               Value("image", tuple, optional=True),
                               Array("image[*]", dtype="uint64", shape=(None,)))

    def _build(self, st: Any, keys: Any) -> None:
        xp, limit = st.xp, LIMIT[self.params.key_mode]
        st.image = None
        if keys.shape[0] and int(keys.max()) >= limit:
            u = xp.unique(keys).astype(np.uint64)
            step = max(2, (limit - 4) // (u.shape[0] + 1))
            g = xp.empty(u.shape[0], dtype=np.uint64)
            g[:1] = 1 + min(int(u[0]), step)
            g[1:] = g[0] + xp.cumsum(xp.minimum(xp.diff(u), np.uint64(step)))
            assert int(g[-1]) + 2 < limit
            st.image = (u, g)
            keys = g[xp.searchsorted(u, keys)].astype(keys.dtype)
        super()._build(st, keys)

    def _update(self, old: Any, new: Any, positions: Any, new_keys: Any) -> None:
        # Keys that fit the mode reach rx's update unchanged; a key set that needs the image
        # (before or after) is built again from its original keys with a new image
        if old.image is None and not (new_keys.shape[0] and int(new_keys.max()) >= LIMIT[
                self.params.key_mode]):
            new.image = None
            super()._update(old, new, positions, new_keys)
            return
        xp, keys = old.xp, self._keys(old)
        if old.image is not None:
            u, g = old.image
            keys = u[xp.searchsorted(g, keys.astype(np.uint64))]
        keys = keys.astype(np.uint64)  # a copy
        keys[positions] = new_keys
        self._build(new, keys)

    @staticmethod
    def _points(st: Any, q: Any) -> Any:
        if st.image is None:
            return q
        xp, (u, g) = st.xp, st.image
        m = u.shape[0]
        i = xp.searchsorted(u, q)
        j = xp.minimum(i, m - 1)
        hit = (i < m) & (u[j] == q)
        gap = xp.where(i < m, g[j] - np.uint64(1), g[-1] + np.uint64(1))
        return xp.where(hit, g[j], gap).astype(q.dtype)

    @staticmethod
    def _ranges(st: Any, lo: Any, hi: Any) -> tuple[Any, Any]:
        if st.image is None:
            return lo, hi
        xp, (u, g) = st.xp, st.image
        m = u.shape[0]
        a = xp.searchsorted(u, lo, side="left")
        b = xp.searchsorted(u, hi, side="right")
        empty = (a >= b) | (lo > hi)
        ai, bi = xp.minimum(a, m - 1), xp.maximum(b - 1, 0)
        glo = xp.where(u[ai] == lo, g[ai], g[ai] - np.uint64(1))
        ghi = xp.where(u[bi] == hi, g[bi], g[bi] + np.uint64(1))
        return (xp.where(empty, 1, glo).astype(lo.dtype), xp.where(empty, 0, ghi).astype(hi.dtype))

    def _answer(self, st: Any, op: Any, *arrays: Any) -> Any:
        mapped = (self._points(st, arrays[0]),) if op.kind == "point" else \
            self._ranges(st, *arrays)
        return super()._answer(st, op, *mapped)


SUITE_CONFIGS: list[dict[str, Any]] = []
for _k, (_mode, _prim, _point, _range) in enumerate(itertools.product(
        ["3d", "naive", "extended"], ["triangle", "sphere", "aabb"], ["perpendicular", "parallel"],
        ["offset", "zero"])):
    if _mode == "extended" and (_prim == "sphere" or _range == "offset"):
        continue
    if (_mode, _prim, _point, _range) == ("3d", "triangle", "perpendicular", "offset"):
        continue
    _refit = _k % 2 == 1
    SUITE_CONFIGS.append(dict(key_mode=_mode, primitive=_prim, point_ray=_point, range_ray=_range,
                              compact=not _refit, update="refit" if _refit else "rebuild"))
SUITE_CONFIGS.append(dict(x_bits=22, y_bits=22, z_bits=20))  # the artifact's split
SUITE_CONFIGS.append(dict(geometry="generated", leaf_size=8))  # the engine's fastest RX scene
SUITE_CONFIGS.append(dict(geometry="generated", leaf_size=24))  # the lean preset


def _label(cfg: dict[str, Any]) -> str:
    return "_".join(str(v) for v in cfg.values()).replace("-", "_")



def _workload(mode: str, n: int, seed: int) -> tuple[np.ndarray, ...]:
    """Keys the mode holds (with duplicates, the mode's last key and its neighbourhood),
    lookups (hits, gaps, beyond the mode's keys) and ranges of every width."""
    rng = np.random.default_rng(seed)
    top = LIMIT.get(mode, 1 << 64) - 1
    if mode == "3d":
        keys = rng.integers(0, top, n, dtype=np.uint64, endpoint=True)
        keys[: n // 2] = rng.integers(2**23 - 200, 2**23 + 200, n // 2).astype(np.uint64)
        edge = [0, 1, 2**23 - 1, 2**23, 2**46 - 1, 2**46, 2**64 - 1]
    else:
        keys = rng.integers(0, top, n, dtype=np.uint64, endpoint=True)
        keys[: n // 2] = rng.integers(top - 300, top, n // 2, endpoint=True).astype(np.uint64)
        edge = [0, 1, top - 1, top]
    keys[: len(edge)] = edge
    keys[len(edge): len(edge) + 40] = keys[len(edge) + 40: len(edge) + 80]  # duplicates
    keys = keys[rng.permutation(n)]
    beyond = [top + 1, top + 2, 2**40] if mode != "3d" else [2**64 - 2]
    q = np.concatenate([keys[:150], keys[:60] + np.uint64(1), np.array(edge + beyond, np.uint64)])
    lo = np.concatenate([rng.choice(keys, 60), np.array([0, top - 5, 2**23 - 3], np.uint64)])
    width = rng.integers(0, 2**rng.integers(1, 60, lo.shape[0]), dtype=np.uint64)
    hi = np.where(lo > np.uint64(2**64 - 1) - width, np.uint64(2**64 - 1), lo + width)
    hi[-3:] = [2**64 - 1, 2**45, 2**23 + 2]
    hi[5] = lo[5] - np.uint64(1) if lo[5] else 0  # an inverted range
    return keys, q, lo.astype(np.uint64), hi.astype(np.uint64)


VALID = [dict(key_mode=m, primitive=p, point_ray=pr, range_ray=rr)
         for m, p, pr, rr in itertools.product(["naive", "extended", "3d"],
                                                ["triangle", "sphere", "aabb"],
                                                ["perpendicular", "parallel"], ["offset", "zero"])
         if not (m == "extended" and (p == "sphere" or rr == "offset"))]


def _same(a: indexzoo.LookupResult, b: indexzoo.LookupResult, label: str) -> None:
    """Identical answers; ``rowids`` per lookup as sets, ``rowid`` as any match."""
    if a.out == "rowids":
        for i, (x, y) in enumerate(zip(rowid_sets(a), rowid_sets(b), strict=True)):
            np.testing.assert_array_equal(x, y, err_msg=f"{label} lookup {i}")
    elif a.out != "rowid":
        assert_identical(a, b, label)
