"""``warpcore-hash``: open addressing with cooperative probing, in the style of WarpCore
(Jünger et al.), the hash-table baseline of the RX paper (section 4.1) and of the
lightweight-indexing paper (section 5.1).

Paper / WarpCore -> code
------------------------
* "Cooperative probing: a group of threads probes neighbouring slots" (group size 8 in both
  papers): ``group_size`` G in {1, 2, 4, 8, 16, 32}; a window of G slots is read by G adjacent
  threads, which vote with ``ballot_sync`` (:mod:`indexzoo.native.hashing_cuda`).
* "Target load factor 0.8": ``load_factor``; the table has ``next_prime(n / (lf * G))``
  windows, so the realised load factor is just under the target.
* Windows advance by double hashing (:mod:`indexzoo.native.hashing`): MurmurHash3's fmix64;
  its upper half picks the first window, its lower half the step, both by multiply-shift range
  reduction; a prime number of windows makes every step visit all.
* Multi-value: every (key, rowID) pair takes its own slot (like WarpCore's MultiValueHashTable),
  so ``rowids`` returns all matches and ``count``/``sum`` are exact; a lookup stops at the first
  window with an empty slot.
* Bulk build on the GPU: one group per pair, compare-and-swap on the lowest empty lane of the
  window; a lost race moves to the next empty lane. On the CPU the twin inserts one pair after
  another with the same probing order.
* ``layout``: ``soa`` (keys and rowIDs in two arrays: a probe reads keys only and touches the
  rowID of a match) or ``aos`` (WarpCore's (key, value) pairs in one array).

Decisions where the papers are silent
-------------------------------------
* [AMBIG] The baseline's empty/tombstone sentinels (``key(-2)``, ``key(-1)``) make the two
  largest keys unusable; here the empty sentinel is the key dtype's maximum and rows with that
  key are kept out of band (a sorted rowID list answered on the host side of each lookup), so
  the whole key domain works. No deletions, hence no tombstone.
* [AMBIG] The papers give no hash function: fmix64 (documented, bijective), split into the
  start (upper 32 bits) and the step (lower 32 bits).
* [AMBIG] WarpCore's single-value table "cannot hold duplicates"; the paper does not say how HT
  ran its multiplicity experiment. This plugin stores each pair, so heavy duplicates cost
  probing proportional to the multiplicity (each copy sits one slot further along the sequence).
* ``rowid`` returns the match in the lowest lane of the first window with a match; on the GPU
  the build's races decide which duplicate that is, so it may differ from the CPU twin's (any
  matching rowID is allowed); counts, sums and rowID sets are identical.
* Range lookups raise ``Unsupported`` (a hash table has no order).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field

from indexzoo import BuildState, Capabilities, Footprint, GpuIndex, IndexParams, InvalidInput
from indexzoo.native import hashing
from indexzoo.native.csr import offsets_from_counts
from indexzoo.native.targets import KernelParams, values_arg

__all__ = ["WarpcoreHashIndex"]


class WarpcoreHashParams(KernelParams):
    """Parameters of ``warpcore-hash``."""

    group_size: Literal[1, 2, 4, 8, 16, 32] = Field(
        default=8, description="Threads probing one key together (slots per window)."
    )
    load_factor: float = Field(
        default=0.8, ge=0.05, le=0.95,
        description="Target share of occupied slots; the table has n / load_factor slots.",
    )
    layout: Literal["soa", "aos"] = Field(
        default="soa",
        description="soa: keys and rowIDs in two arrays; aos: (key, rowID) pairs in one array.",
    )


class WarpcoreHashState(BuildState):
    """One build of ``warpcore-hash``: the table and the out-of-band rows."""

    tkeys: Any          # key slots (a strided view of ``table`` for the aos layout)
    tvals: Any          # rowID slots
    table: Any          # the aos array, or None
    stride: int
    oob: Any            # rowIDs of the keys equal to the empty sentinel
    empty: Any
    n_windows: int
    group: int
    peak: int


class WarpcoreHashIndex(GpuIndex[WarpcoreHashState]):
    """Open addressing, cooperative probing by groups of G threads, double hashing (WarpCore)."""

    name: ClassVar[str] = "warpcore-hash"
    Params: ClassVar[type[IndexParams]] = WarpcoreHashParams
    capabilities: ClassVar[Capabilities] = Capabilities(point=True, range=False, duplicates=True)
    params: WarpcoreHashParams

    # -------------------------------------------------------------- build
    def _kernels(self) -> tuple[Any, int]:
        """The kernel module of the device and the threads per lookup."""
        if self.device == "cpu":
            return hashing, 1
        from indexzoo.native import hashing_cuda

        return hashing_cuda, self.params.group_size

    def _build(self, st: WarpcoreHashState, keys: Any) -> None:
        xp, n = st.xp, int(keys.shape[0])
        p = self.params
        wide = keys.dtype == np.uint64 or (p.layout == "aos" and st.rowid_dtype == np.uint64)
        tdtype = np.dtype(np.uint64 if wide else np.uint32)
        empty = tdtype.type(np.iinfo(tdtype).max)
        tkeys_in = keys.astype(tdtype, copy=False)
        rowids = xp.arange(n, dtype=st.rowid_dtype)
        is_empty = tkeys_in == empty
        n_oob = int(is_empty.sum())
        if n_oob:
            st.oob = rowids[is_empty]
            inside = ~is_empty
            tkeys_in, rowids = tkeys_in[inside], rowids[inside]
        else:
            st.oob = rowids[:0]
        m = int(tkeys_in.shape[0])
        g = p.group_size
        n_windows = next_prime_windows(m, p.load_factor, g)
        cap = n_windows * g
        if p.layout == "soa":
            st.tkeys = xp.full(cap, empty, dtype=tdtype)
            st.tvals = xp.empty(cap, dtype=st.rowid_dtype)
            st.table = None
            st.stride = 1
        else:
            st.table = xp.full(2 * cap, empty, dtype=tdtype)
            st.tkeys, st.tvals = st.table, st.table[1:]
            st.stride = 2
        st.empty, st.n_windows, st.group = empty, n_windows, g
        if m:
            if self.device == "cpu":
                hashing.build_cpu(st.tkeys, st.tvals, st.stride, tkeys_in, rowids,
                                  n_windows, g, empty)
            else:
                from indexzoo.native import hashing_cuda

                hashing_cuda.INSERT("cuda", m * g, st.tkeys, st.tvals, st.stride,
                                    tkeys_in, rowids, n_windows, g, empty,
                                    threads_per_block=p.threads_per_block)
        table_bytes = sum(self._table_breakdown(st).values())
        temporaries = n * (st.rowid_dtype.itemsize + 1) + (
            n * tdtype.itemsize if tkeys_in is not keys else 0)
        st.peak = table_bytes + int(st.oob.nbytes) + temporaries

    @staticmethod
    def _table_breakdown(st: WarpcoreHashState) -> dict[str, int]:
        if st.table is not None:
            return {"table": int(st.table.nbytes)}
        return {"table_keys": int(st.tkeys.nbytes), "table_rowids": int(st.tvals.nbytes)}

    def _footprint(self, st: WarpcoreHashState) -> Footprint:
        return Footprint(breakdown={**self._table_breakdown(st), "out_of_band": int(st.oob.nbytes)},
                         peak_build_bytes=st.peak)

    @property
    def capacity(self) -> int:
        """Slots in the table."""
        st = self._live()
        return st.n_windows * st.group

    @property
    def load_factor(self) -> float:
        """Occupied share of the slots (after the build)."""
        st = self._live()
        cap = st.n_windows * st.group
        return (st.n - int(st.oob.shape[0])) / cap if cap else 0.0

    # -------------------------------------------------------------- lookups
    def _launch(self, name: str, q: Any, *args: Any) -> None:
        mod, per = self._kernels()
        kernel = getattr(mod, name)
        kernel(self.device, int(q.shape[0]) * per, *args,
               threads_per_block=self.params.threads_per_block)

    @staticmethod
    def _table_args(st: WarpcoreHashState) -> tuple[Any, ...]:
        return st.n_windows, st.group, st.empty

    @staticmethod
    def _oob_mask(st: WarpcoreHashState, qt: Any) -> Any:
        """Lookups of the out-of-band key, or None when there are none to answer."""
        if not st.oob.shape[0]:
            return None
        eq = qt == st.empty
        return eq if bool(eq.any()) else None

    def _point_rowid(self, st: WarpcoreHashState, q: Any) -> Any:
        qt = q.astype(st.tkeys.dtype, copy=False)
        out = st.xp.empty(q.shape[0], dtype=st.rowid_dtype)
        self._launch("FIND_ROWID", q, st.tkeys, st.tvals, st.stride, qt, out,
                     *self._table_args(st), st.miss)
        eq = self._oob_mask(st, qt)
        if eq is not None:
            out[eq] = st.oob[0]
        return out

    def _counts(self, st: WarpcoreHashState, qt: Any, dtype: Any) -> Any:
        out = st.xp.empty(qt.shape[0], dtype=dtype)
        self._launch("COUNT", qt, st.tkeys, st.stride, qt, out, *self._table_args(st))
        eq = self._oob_mask(st, qt)
        if eq is not None:
            out[eq] = st.oob.shape[0]
        return out

    def _point_count(self, st: WarpcoreHashState, q: Any) -> Any:
        return self._counts(st, q.astype(st.tkeys.dtype, copy=False), st.rowid_dtype)

    def _point_sum(self, st: WarpcoreHashState, q: Any) -> Any:
        qt = q.astype(st.tkeys.dtype, copy=False)
        out = st.xp.empty(q.shape[0], dtype=np.uint64)
        values, use_values = values_arg(st.values, st.xp)
        self._launch("SUM", q, st.tkeys, st.tvals, st.stride, values, use_values, qt,
                     out, *self._table_args(st))
        eq = self._oob_mask(st, qt)
        if eq is not None:
            picked = st.oob.astype(np.uint64) if st.values is None else st.values[st.oob]
            out[eq] = picked.sum(dtype=np.uint64)
        return out

    def _point_rowids(self, st: WarpcoreHashState, q: Any) -> tuple[Any, Any]:
        xp = st.xp
        qt = q.astype(st.tkeys.dtype, copy=False)
        offsets = offsets_from_counts(self._counts(st, qt, np.int64))
        out = xp.empty(int(offsets[-1]), dtype=st.rowid_dtype)
        if out.shape[0]:
            self._launch("FILL", q, st.tkeys, st.tvals, st.stride, qt, offsets, out,
                         *self._table_args(st))
        eq = self._oob_mask(st, qt)
        if eq is not None:
            starts = offsets[:-1][eq]
            n_oob = st.oob.shape[0]
            out[(starts[:, None] + xp.arange(n_oob)[None, :]).ravel()] = xp.tile(
                st.oob, int(starts.shape[0]))
        return offsets, out


def next_prime_windows(n: int, load_factor: float, group: int) -> int:
    """Windows for ``n`` pairs at ``load_factor``: the next prime >= n / (lf * G), at least 2,
    and enough that at least one slot stays empty."""
    need = max(math.ceil(n / (load_factor * group)), 2)
    while need * group <= n:
        need += 1
    if need >= (1 << 32) - 64:
        raise InvalidInput(
            f"argument 'keys': {n} keys need {need} windows of {group} slots at load factor "
            f"{load_factor}; at most 2^32 windows are supported (raise group_size or load_factor)")
    return hashing.next_prime(need)
