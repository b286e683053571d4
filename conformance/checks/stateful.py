"""The ``stateful`` conformance check: any sequence of the contract's operations (build, update
where declared, point and range lookups in every declared out mode, save and load, pickle, a
rebuild) answers as a NumPy model of the key column, and a failure prints the shrunk sequence
as a few lines of Python that replay it."""

from __future__ import annotations

import pickle
import tempfile
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from indexzoo import GpuIndex

from ..context import Context, check, verify
from .common import load_index

#: Keys are drawn from a small domain, so lookups hit, miss and repeat; plus the ends of
#: the key type, where bounds and sentinels go wrong.
_DOMAIN = 40


def _ends(ctx: Context) -> list[int]:
    bits = 64 if ctx.wide else 32
    return [2**bits - 1, 2**bits - 2, 2**(bits - 1), 2**(bits - 1) - 1]


def _keys(ctx: Context) -> st.SearchStrategy[list[int]]:
    one = st.one_of(st.integers(0, _DOMAIN), st.sampled_from(_ends(ctx)))
    return st.lists(one, min_size=0, max_size=24, unique=not ctx.caps.duplicates)


def _ops(ctx: Context) -> st.SearchStrategy[tuple[Any, ...]]:
    keys = _keys(ctx)
    lookups = st.lists(st.one_of(st.integers(0, _DOMAIN + 2), st.sampled_from(_ends(ctx))),
                       min_size=1, max_size=6)
    modes = st.sampled_from(ctx.modes)
    ops: list[st.SearchStrategy[tuple[Any, ...]]] = []
    if ctx.caps.point:
        ops.append(st.tuples(st.just("point"), lookups, modes))
    if ctx.caps.range:
        ops.append(st.tuples(st.just("range"), lookups, st.integers(0, 5), modes))
    if ctx.caps.updates:
        ops.append(st.tuples(st.just("update"), st.lists(st.integers(0, 23), max_size=4), keys))
    ops += [st.tuples(st.just("save_load")), st.tuples(st.just("pickle")),
            st.tuples(st.just("rebuild"), keys)]
    return st.one_of(ops)


class _Replay:
    """The operations run so far, as the lines of Python that replay them."""

    def __init__(self, ctx: Context, index: GpuIndex) -> None:
        cls = type(index)
        self.dtype = "uint64" if ctx.wide else "uint32"
        self.lines = ["import pickle, numpy as np, indexzoo",
                      f"from {cls.__module__} import {cls.__qualname__}",
                      f"index = {cls.__qualname__}({index.params.model_dump()!r}, "
                      f"device={index.device!r})"]

    def array(self, values: Any, dtype: str | None = None) -> str:
        return f"np.array({[int(v) for v in values]!r}, dtype=np.{dtype or self.dtype})"

    def add(self, line: str) -> None:
        self.lines.append(line)

    def text(self) -> str:
        return "\n".join(f"    {line}" for line in self.lines)


@check("differential")
def check_any_sequence_of_operations_answers_like_the_model(ctx: Context) -> None:
    """Build, update where declared, lookups in every declared out mode, save and load,
    pickle and rebuild, in any order, answer as a fresh build over the same keys would
    (hypothesis; a failure prints the shrunk sequence as Python)."""
    dtype = np.uint64 if ctx.wide else np.uint32

    @ctx.settings()
    @given(first=_keys(ctx), ops=st.lists(_ops(ctx), max_size=8))
    def prop(first: list[int], ops: list[tuple[Any, ...]]) -> None:
        index = ctx.new()
        replay = _Replay(ctx, index)
        try:
            keys = np.array(first, dtype=dtype)
            index.build(keys)
            replay.add(f"index.build({replay.array(first)})")
            for op in ops:
                index, keys = _step(ctx, index, keys, op, replay)
        except Exception as exc:
            raise AssertionError(f"{type(exc).__name__}: {exc}\nreplayed by:\n"
                                 f"{replay.text()}") from exc

    ctx.seeded(prop)()


def _step(ctx: Context, index: GpuIndex, keys: np.ndarray, op: tuple[Any, ...],
          replay: _Replay) -> tuple[GpuIndex, np.ndarray]:
    """Run one operation, check its answers against the model, and return the index and the
    key column after it."""
    dtype = keys.dtype
    kind = op[0]
    if kind == "point":
        q = np.array(op[1], dtype=dtype)
        replay.add(f"index.point({replay.array(op[1])}, out={op[2]!r})")
        verify(ctx, index, keys, points=q, modes=[op[2]], label="point")
    elif kind == "range":
        top = int(np.iinfo(dtype).max)
        lo = np.array(op[1], dtype=dtype)
        hi = np.array([min(int(v) + op[2], top) for v in op[1]], dtype=dtype)
        replay.add(f"index.range({replay.array(op[1])}, {replay.array(hi)}, out={op[3]!r})")
        verify(ctx, index, keys, rng=(lo, hi), modes=[op[3]], label="range")
    elif kind == "update":
        n = keys.shape[0]
        pos = np.array([p % n for p in op[1]] if n else [], dtype=np.int64)[:len(op[2])]
        new = np.array(op[2][:pos.shape[0]], dtype=dtype)
        after = keys.copy()
        for p, k in zip(pos, new, strict=True):  # a position given twice takes its last key
            after[p] = k
        if pos.shape[0] and (ctx.caps.duplicates or np.unique(after).shape[0] == n):
            replay.add(f"index.update({replay.array(pos, 'int64')}, {replay.array(new)})")
            index.update(pos, new)
            keys = after
    elif kind == "save_load":
        with tempfile.TemporaryDirectory() as tmp:
            replay.add("index.save('index.izo'); index = indexzoo.load('index.izo')")
            index.save(f"{tmp}/index.izo")
            index = load_index(index, f"{tmp}/index.izo", ctx.device)
    elif kind == "pickle":
        replay.add("index = pickle.loads(pickle.dumps(index))")
        index = pickle.loads(pickle.dumps(index))
    else:  # rebuild
        keys = np.array(op[1], dtype=dtype)
        replay.add(f"index.build({replay.array(op[1])})")
        index.build(keys)
    return index, keys
