"""The saved form of an RTScan build, as its ``state_schema`` declares it.

Queries are encoded through the mapping tables (a column's distinct values and first ranks,
found by offsets into flat arrays; the paper's layout) or through each column's sorted sample
and then its keys in ``lc`` by its order (the compact layout), the sieve's vectors are picked
through its borders and their codes, and a refine reads the rows ``order[a:b]`` of a rank
slab, or the rows a ray meets in a group's scene, and their codes or keys in ``lc``. So a
file's state is checked:

* **tables**: per column ``order`` holds each row once. Paper layout: with encoding,
  ``ranks`` is its inverse (and ``lc`` is ``ranks``); the distinct values ascend strictly,
  the first ranks ascend strictly from 0 to ``n``, the offsets and flat arrays line up with
  them (and the per-column ``uniq``/``starts`` are those slices); without encoding ``lc``
  holds the keys and each row's key is the value of its rank's run. Compact layout: ``lc``
  holds the keys, the order sorts each column (``lc[order[r], j]`` never decreases) and the
  sample is every ``stride``-th value of that sorted column;
* everything else follows from the tables and the params and must be exactly what they make:
  the coordinate shifts, the sieve's borders and their codes (:func:`.sieve.sieve_borders`,
  :func:`.sieve.fine_borders`; its vectors must have their shape, their bits are not read
  back), the groups' columns and geometry
  (:func:`.refine.group_geometry`), the plan kernel's inputs (:func:`.plan.plan_args`), and
  each group's scene: a BVH over ``n`` cubes (:mod:`indexzoo.native.rt.saved`) whose boxes
  are those of the rows' coordinates (a chunk at a time). A scene saved from OptiX is not in
  the file: the load builds it again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from indexzoo.devices import xp_of
from indexzoo.native.lazy import lazy_module
from indexzoo.native.rt.layout import AABBS
from indexzoo.native.rt.saved import CHUNK, bvh_problem, gas_specs
from indexzoo.persist import Array, Check, Nested, Scope, StateSchema, Value

from .encoding import (
    SAMPLE_STRIDE,
    ColumnTables,
    coordinate_shifts,
    group_columns,
    rank_dtype,
    ranks_of,
    run_starts,
    sorted_column,
)

if TYPE_CHECKING:
    from . import layout as layout_kernels
    from . import plan as plan_kernels
    from . import refine as refine_kernels
    from . import sieve as sieve_kernels
else:  # the checks of a saved state run when one is loaded
    layout_kernels = lazy_module("indexzoo.plugins.rtscan.layout")
    plan_kernels = lazy_module("indexzoo.plugins.rtscan.plan")
    refine_kernels = lazy_module("indexzoo.plugins.rtscan.refine")
    sieve_kernels = lazy_module("indexzoo.plugins.rtscan.sieve")

__all__ = ["RTSCAN_SCHEMA"]


def _same(a: Any, b: Any) -> bool:
    return a is not None and a.dtype == b.dtype and a.shape == b.shape and bool(
        xp_of(b).array_equal(a, b))


def _check_tables(scope: Scope) -> str | None:
    ctx, root = scope.ctx, scope.root
    t, lc, n, d = root["tables"], root["lc"], ctx.n, ctx.dims
    paper = isinstance(t, ColumnTables)
    if paper != (ctx.params.layout == "paper"):
        raise scope.problem("tables", f"are not the tables of the {ctx.params.layout} layout")
    rdt = rank_dtype(n)
    order = t.order
    if order is None or order.dtype != rdt or not order.flags.f_contiguous:
        raise scope.problem("tables.order", f"is not {rdt} in Fortran order")
    xp = xp_of(order)
    for j in range(d):
        col = order[:, j]
        seen = xp.zeros(n, dtype=bool)
        if n and int(col.max()) >= n:
            raise scope.problem("tables.order", f"holds a row past n = {n} in column {j}")
        seen[col.astype(np.int64)] = True
        if not bool(seen.all()):
            raise scope.problem("tables.order", f"holds a row twice in column {j}")
    if paper:
        _check_mapping(scope)
    else:
        _check_sorted(scope)
    if n == 0:
        tops = [0] * d
    elif paper:
        tops = [int(u[-1]) for u in t.uniq]
    else:
        tops = [int(lc[int(order[n - 1, j]), j]) for j in range(d)]
    if tuple(root["shifts"]) != coordinate_shifts(tops, ctx.params.encoding):
        raise scope.problem("shifts", "are not the coordinate shifts of the values")
    return None


def _check_sorted(scope: Scope) -> None:
    """The compact layout: the keys in ``lc``, sorted by each column's order, sampled."""
    ctx, root = scope.ctx, scope.root
    t, lc, n, d = root["tables"], root["lc"], ctx.n, ctx.dims
    if lc.dtype != ctx.native:
        raise scope.problem("lc", f"is not the keys of {ctx.native}")
    if t.stride != SAMPLE_STRIDE:
        raise scope.problem("tables.stride", f"is {t.stride}, not {SAMPLE_STRIDE}")
    xp = xp_of(t.order)
    m = -(-n // SAMPLE_STRIDE)
    if int(t.sample.shape[0]) != m * d or not bool(xp.array_equal(
            t.sample_offsets, xp.arange(d + 1, dtype=np.int64) * m)):
        raise scope.problem("tables.sample", f"is not {d} samples of {m} values")
    for j in range(d):
        srt = sorted_column(lc, t.order, j)
        if bool((srt[1:] < srt[:-1]).any()):
            raise scope.problem("tables.order", f"does not sort column {j}")
        if not bool(xp.array_equal(t.sample[j * m:(j + 1) * m], srt[::SAMPLE_STRIDE])):
            raise scope.problem("tables.sample", f"is not column {j}'s sorted sample")


def _check_mapping(scope: Scope) -> None:
    """The paper's layout: the mapping tables, and the codes (with encoding) or keys."""
    ctx, root = scope.ctx, scope.root
    t, lc, n, d = root["tables"], root["lc"], ctx.n, ctx.dims
    encoding = ctx.params.encoding
    rdt = rank_dtype(n)
    arr = t.ranks
    if arr is None and encoding:
        raise scope.problem("tables.ranks", "is missing")
    if arr is not None and (arr.dtype != rdt or not arr.flags.f_contiguous):
        raise scope.problem("tables.ranks", f"is {arr.dtype}, not {rdt} in Fortran order")
    if encoding and lc is not t.ranks:
        raise scope.problem("lc", "is not the codes (tables.ranks), which encoding keeps")
    if not encoding and (t.ranks is not None or lc.dtype != ctx.native):
        raise scope.problem("lc", f"is not the keys of {ctx.native}")
    xp = xp_of(t.order)
    offs = t.offsets
    total = int(t.values.shape[0])
    if len(t.uniq) != d or len(t.starts) != d or int(offs[-1]) != total or \
            int(t.flat_starts.shape[0]) != total + d or t.flat_starts.dtype != rdt:
        raise scope.problem("tables", f"do not line up with {d} columns of {total} values")
    ramp = xp.arange(n, dtype=rdt)
    for j in range(d):
        a, b = int(offs[j]), int(offs[j + 1])
        u, s = t.values[a:b], t.flat_starts[a + j:b + j + 1]
        if not (_same(t.uniq[j], u) and _same(t.starts[j], s)):
            raise scope.problem(f"tables.uniq[{j}]", "is not its column's slice of the tables")
        if (b - a == 0) != (n == 0) or int(s[0]) != 0 or int(s[-1]) != n or bool(
                (u[1:] <= u[:-1]).any()) or bool((s[1:] <= s[:-1]).any()):
            raise scope.problem(f"tables.starts[{j}]", "are not ascending runs over 0 .. n")
        col = t.order[:, j]
        if encoding and not bool((t.ranks[col.astype(np.int64), j] == ramp).all()):
            raise scope.problem("tables.ranks", f"are not the inverse of the order (column {j})")
        if not encoding and not bool(
                (lc[col.astype(np.int64), j] == xp.repeat(u, xp.diff(s.astype(np.int64)))).all()):
            raise scope.problem("lc", f"holds keys other than its tables say (column {j})")


def _starts(root: Mapping[str, Any]) -> tuple[Any, ...]:
    """Each column's run starts: the mapping tables', or made from the sorted keys."""
    t = root["tables"]
    if isinstance(t, ColumnTables):
        return tuple(t.starts)
    return tuple(run_starts(sorted_column(root["lc"], t.order, j))
                 for j in range(int(t.order.shape[1])))


def _check_sieve(scope: Scope) -> str | None:
    ctx, root = scope.ctx, scope.root
    sieve, t, n, k = root["sieve"], root["tables"], ctx.n, ctx.params.sieve_vectors
    if not k or n == 0:
        if sieve is not None:
            raise scope.problem("sieve", "is held, which the params do not build")
        return None
    if sieve is None:
        raise scope.problem("sieve", "is missing")
    fine = ctx.params.sieve_fine
    if isinstance(sieve, sieve_kernels.FineSieve) != bool(fine):
        raise scope.problem("sieve", f"has {'one level' if fine else 'two levels'}, not the "
                                     "params' levels")
    xp = xp_of(t.order)
    starts = _starts(root)
    words = (n + 31) // 32
    if fine:
        coarse, tables, kept = sieve_kernels.fine_borders(starts, n, k, fine)
        layout = sieve_kernels.fine_layout(coarse, tables, kept, n, fine)
        for name, arr in layout.items():
            if not _same(getattr(sieve, name), xp.asarray(arr)):
                raise scope.problem(f"sieve.{name}", "are not what the mapping tables make")
        if sieve.bins != fine:
            raise scope.problem("sieve.bins", f"is {sieve.bins}, not {fine}")
        total = sum(int(b.shape[0]) - 2 + int(g.shape[0])
                    for b, g in zip(coarse, kept, strict=True))
        if tuple(sieve.vectors.shape) != (total, words):
            raise scope.problem("sieve.vectors", f"are {list(sieve.vectors.shape)}, not "
                                                 f"[{total}, {words}]")
        return None
    borders, flat, offs, base = sieve_kernels.sieve_borders(starts, n, k)
    total = sum(int(b.shape[0]) for b in borders)
    lines = [flat[offs[j]:offs[j + 1]] for j in range(len(borders))]
    if sieve.base != base:
        raise scope.problem("sieve.bounds", "are not the borders the mapping tables make")
    if not _same(sieve.vector_base, xp.asarray(np.asarray(base, dtype=np.int64) - 1)):
        raise scope.problem("sieve.vector_base", "are not what the mapping tables make")
    if len(sieve.bounds) != len(lines) or not all(
            np.array_equal(np.asarray(sieve.bounds[j]), lines[j]) for j in range(len(lines))):
        raise scope.problem("sieve.bounds", "are not the borders the mapping tables make")
    for name, want in (("borders", xp.asarray(flat)), ("border_offsets", xp.asarray(offs))):
        if not _same(getattr(sieve, name), want):
            raise scope.problem(f"sieve.{name}", "are not what the mapping tables make")
    if tuple(sieve.vectors.shape) != (total, words):
        raise scope.problem("sieve.vectors", f"are {list(sieve.vectors.shape)}, not "
                                             f"[{total}, {words}]")
    return None


def _coords(root: Mapping[str, Any], j: int, encoding: bool) -> Any:
    """Column ``j``'s scene coordinates, as the index makes them (``_coords``)."""
    t = root["tables"]
    if encoding and t.ranks is None:
        return ranks_of(t.order, j)
    col, shift = root["lc"][:, j], root["shifts"][j]
    return (col >> col.dtype.type(shift)).astype(np.uint32) if shift else col


def _check_groups(scope: Scope) -> str | None:
    ctx, root = scope.ctx, scope.root
    p, n = ctx.params, ctx.n
    refine = root.get("refine", "rt" if p.refine == "auto" else p.refine)
    if p.refine != "auto" and refine != p.refine:
        raise scope.problem("refine", f"is {refine!r}; the params say {p.refine!r}")
    expected = group_columns(ctx.dims, p.group_size)
    groups = root["groups"]
    if [g.cols for g in groups] != expected:
        raise scope.problem("groups", f"group the columns as {[g.cols for g in groups]}, not "
                                      f"{expected}")
    for gi, g in enumerate(groups):
        coords = [_coords(root, j, p.encoding) for j in g.cols]
        if g.geom != refine_kernels.group_geometry(coords, n, p):
            raise scope.problem(f"groups[{gi}].geom", "is not the geometry its rows make")
        if g.gas is None:  # the direct refine, or saved from OptiX: built again on load
            continue
        if refine != "rt" or n == 0:
            raise scope.problem(f"groups[{gi}].gas", "is held, which this refine does not use")
        _check_scene(scope, gi, g, coords)
    if not _same_plan(root["plan_args"], plan_kernels.plan_args(xp_of(root["lc"]), groups, root["shifts"])):
        raise scope.problem("plan_args", "are not what the groups and shifts make")
    return None


def _check_scene(scope: Scope, gi: int, g: Any, coords: list[Any]) -> None:
    n, gas = scope.ctx.n, g.gas
    at = f"groups[{gi}].gas"
    if gas.kind != AABBS or gas.radius != 0.0:
        raise scope.problem(at, "is not a GAS of boxes")
    wrong = bvh_problem(gas.bvh, n)
    if wrong:
        raise scope.problem(f"{at}.bvh", wrong)
    if gas.data.dtype != np.float32 or tuple(gas.data.shape) != (n, 6):
        raise scope.problem(f"{at}.data", f"is {gas.data.dtype} {list(gas.data.shape)}, not "
                                          f"float32 [{n}, 6]")
    xp = xp_of(gas.data)
    order = gas.bvh.order
    for s in range(0, n, CHUNK):
        rows = order[s:s + CHUNK].astype(np.int64)
        padded = [c[rows] for c in coords] + [None] * (3 - len(coords))
        if not bool(xp.array_equal(gas.data[s:s + CHUNK],
                                   layout_kernels.cube_boxes(padded, g.geom, int(rows.shape[0])))):
            raise scope.problem(f"{at}.data", "are not the cubes of the rows' coordinates")


def _same_plan(got: Any, want: Any) -> bool:
    return all(_same(getattr(got, f), getattr(want, f))
               for f in ("group_cols", "geo", "shifts", "no_borders", "no_vectors"))


#: The state of RTScan and its presets (see the module docstring).
RTSCAN_SCHEMA = StateSchema(
    Array("lc", shape=("n", "dims")),
    Nested("tables",  # ColumnTables (paper) or SortedTables (compact): optional below are
           #            the fields of one kind, which the checks require of its kind
           Array("order", shape=("n", "dims")),
           Array("ranks", shape=("n", "dims"), optional=True),
           Array("values", dtype="native", shape=(None,), optional=True),
           Array("flat_starts", shape=(None,), optional=True),
           Array("offsets", dtype="int64", shape=("dims + 1",), first=0,
                 order="nondecreasing", optional=True),
           Array("uniq[*]", shape=(None,), optional=True),
           Array("starts[*]", shape=(None,), optional=True),
           Array("sample", dtype="native", shape=(None,), optional=True),
           Array("sample_offsets", dtype="int64", shape=("dims + 1",), first=0,
                 order="nondecreasing", optional=True),
           Value("stride", int, at_least=1, optional=True),
           Value("peak_bytes", int, at_least=0)),
    Value("shifts", tuple[int, ...]),
    Check(_check_tables),
    Nested("sieve",  # Sieve (one level) or FineSieve (two): optional as the tables' fields
           Array("vectors", dtype="uint32", shape=(None, None)),
           Array("vector_base", dtype="int64", shape=("dims",)),
           Array("bounds[*]", dtype="int64", shape=(None,), optional=True),
           Array("borders", dtype="int64", shape=(None,), optional=True),
           Array("border_offsets", dtype="int64", shape=("dims + 1",), optional=True),
           Array("coarse", dtype="int64", shape=(None,), optional=True),
           Array("coarse_offsets", dtype="int64", shape=("dims + 1",), optional=True),
           Array("fine", shape=(None,), optional=True),
           Array("fine_base", dtype="int64", shape=("dims",), optional=True),
           Array("fine_ids", dtype="int64", shape=("dims", None), optional=True),
           Value("bins", int, at_least=2, optional=True),
           optional=True),
    Check(_check_sieve),
    Value("refine", str, choices=("rt", "direct"), absent=True),  # absent: saved before auto
    Nested("groups[*]", gas_specs("gas", optional=True),
           Array("gas.data", shape=(None, None), optional=True)),
    Nested("plan_args",
           Array("group_cols", dtype="int64", shape=(None, 3)),
           Array("geo", dtype="int64", shape=(None, 2)),
           Array("shifts", dtype="int64", shape=("dims",)),
           Array("no_borders", dtype="int64", shape=(1,)),
           Array("no_vectors", dtype="uint32", shape=(1, 1))),
    Check(_check_groups),
    Value("peak", int, at_least=0),
)
