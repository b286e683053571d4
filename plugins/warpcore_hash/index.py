"""``warpcore-hash``: open addressing with cooperative probing, in the style of WarpCore
(Jünger et al.), the hash-table baseline of the RX paper (section 4.1) and of the
lightweight-indexing paper (section 5.1).

Paper / WarpCore -> code
------------------------
* "Cooperative probing: a group of threads probes neighbouring slots" (group size 8 in both
  papers): ``group_size`` G in {1, 2, 4, 8, 16, 32}; a window of G slots is read by G adjacent
  threads, which vote with ``ballot_sync`` (:mod:`indexzoo.plugins.warpcore_hash.kernels_cuda`).
* "Target load factor 0.8": ``load_factor``; the table has ``next_prime(k / (lf * G))``
  windows for ``k`` pairs (or, after a move, distinct keys; see below), so the realised load
  factor of unique keys is just under the target.
* Windows advance by double hashing (:mod:`indexzoo.plugins.warpcore_hash.kernels`): MurmurHash3's fmix64;
  its upper half picks the first window, its lower half the step, both by multiply-shift range
  reduction; a prime number of windows makes every step visit all.
* Multi-value: the table holds each distinct key once with one value word: the rowID of a key
  with one row, or a flagged offset into an overflow array of runs (row count, then the rowIDs)
  for a key with several. ``rowids`` returns all matches, ``count``/``sum`` are exact, and a
  lookup stops at its key's slot.
* Bulk build on the GPU: one group per pair, compare-and-swap on the lowest empty lane of the
  window; a lost race to the same key counts there, to another key moves to the next empty
  lane. On the CPU the twin inserts one pair after another with the same probing order.
* ``layout``: ``aos`` (WarpCore's (key, value) pairs in one array, the default) or ``soa``
  (keys and value words in two arrays: a probe reads keys only and touches the value word of
  a match).

Decisions where the papers are silent
-------------------------------------
* [AMBIG] Default ``group_size`` 4, not the papers' 8: four threads per key looked up fastest.
  Most lookups end in their first window, and a larger group spends more threads (each
  hashing, loading and comparing) on them; the kernel with groups of 8 was bound by the
  instructions it issued, not by memory (measured: ``docs/plugins/warpcore-hash.md``).
  ``group_size=8`` keeps the papers' configuration.
* [AMBIG] Default ``layout`` ``aos``, WarpCore's own: a slot's key and value word share a
  sector, so a hit reads one sector and an insert writes one, where ``soa`` sends a claim's
  compare-and-swap and the value word's write to two sectors; ``aos`` measured faster for both
  lookups and builds (measured: ``docs/plugins/warpcore-hash.md``). It costs memory with
  uint64 keys and uint32 value words (16 bytes a slot, not 12); with keys and words of one
  width the layouts take the same. Choose ``soa`` when memory matters more than speed.
* [AMBIG] The baseline's empty/tombstone sentinels (``key(-2)``, ``key(-1)``) make the two
  largest keys unusable; here the empty sentinel is the key dtype's maximum and rows with that
  key are kept out of band (a sorted rowID list answered on the host side of each lookup), so
  the whole key domain works. No deletions, hence no tombstone.
* [AMBIG] The papers give no hash function: fmix64 (documented, bijective), split into the
  start (upper 32 bits) and the step (lower 32 bits).
* [AMBIG] Duplicates: WarpCore's single-value table "cannot hold duplicates", its multi-value
  tables store a key per value or bucket lists; the paper does not say how HT ran its
  multiplicity experiment. Here each distinct key takes one slot and its rows go to a run of
  the overflow array, built in two linear passes: (1) insert-or-count (a temporary per-slot
  count of the copies beyond the first; a key's first pair stores its rowID as the value
  word), then, only if some count is non-zero, run offsets by an exclusive scan of the multi
  slots and (2) a second pass that appends every row of a multi key to its run. A build probes
  O(n) windows whatever the multiplicities (the previous layout, one slot per pair, walked
  copy j of a key past the j - 1 before it: quadratic in the multiplicity). Unique keys pay one
  insert pass plus a max-reduction over the counts.
* [AMBIG] The flag of a value word is its top bit. Value words are uint32 while every rowID and
  every run offset fit below 2^31: runs take at most ``n + n // 2`` words (``m + 1`` per key
  with ``m >= 2`` rows), so up to ``n + n // 2 <= 2^31``; above that (and with the uint64
  rowIDs of ``n >= 2^32 - 1``) they are uint64, the one size up the flag needs. The overflow
  array holds rowIDs and row counts, in the rowID dtype.
* [AMBIG] The per-slot counts are of the rowID dtype, not int32 (2^31 equal keys would overflow
  it), and count the copies beyond a key's first pair, so unique keys never touch them (no
  extra atomic in the unique-key build); the array is freed after the build and counted in its
  peak.
* [AMBIG] Table size: pass 1 must size the table before the distinct keys are known, for n
  pairs as before. When the keys' mean multiplicity is at least ``REHASH_MIN_MULTIPLICITY``
  (2), the distinct keys (with their value words) are inserted again into a table sized for
  them at the target load factor and the pass-1 table is freed, so heavy duplicates give a
  small table (a bool column: 2 windows) instead of one sized for every row; below that the
  pass-1 table stays, at a realised load factor between lf / 2 and lf.
* ``rowid`` returns a key's single rowID or the first of its run: on the CPU the smallest
  (runs are in rowID order), on the GPU the row whose pair pass 2 appended first (any matching
  rowID is allowed); counts, sums and rowID sets are identical.
* Range lookups raise ``Unsupported`` (a hash table has no order).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from indexzoo import (
    BuildState,
    Capabilities,
    Footprint,
    GpuIndex,
    IndexParams,
    InvalidInput,
    Operation,
)
from indexzoo.native.lazy import lazy_module
from indexzoo.native.targets import (
    DEFAULT_THREADS_PER_BLOCK,
    Slot,
    one_per_item,
    values_arg,
)
from indexzoo.persist import StateSchema

from .params import WarpcoreHashParams
from .saved import hash_schema

if TYPE_CHECKING:
    from indexzoo.native import csr

    from . import kernels as hashing
else:  # imported when a table is built or loaded: the registry lists the class without them
    csr = lazy_module("indexzoo.native.csr")
    hashing = lazy_module("indexzoo.plugins.warpcore_hash.kernels")

__all__ = ["REHASH_MIN_MULTIPLICITY", "HashTable", "WarpcoreHashIndex", "build_table",
           "next_prime_windows", "value_word_dtype"]

#: After pass 1, the distinct keys move into a table sized for them when their mean
#: multiplicity is at least this (the pass-1 table, sized for every pair, would be at most
#: half as full as the target load factor).
REHASH_MIN_MULTIPLICITY = 2
#: uint32 value words serve while every rowID and run offset lies below their flag, 2^31.
NARROW_VALUE_WORDS = 1 << 31


@dataclass(frozen=True, eq=False)
class HashTable:
    """A built table (see :mod:`indexzoo.plugins.warpcore_hash.kernels` for the layout)."""

    tkeys: Any          # key slots (the whole aos array, read with stride 2)
    tvals: Any          # value words (a view of the aos array from its second word)
    table: Any          # the aos array, or None
    stride: int
    n_windows: int
    group: int
    empty: Any          # the empty-slot key (the key word dtype's maximum)
    flag: Any           # value words >= flag are flag + offset of a run in ``overflow``
    overflow: Any       # runs: row count, then the rowIDs; empty without multi keys
    n_distinct: int     # keys in the table
    probes: int | None  # windows the build probed (CPU; None on the GPU)
    peak: int           # most bytes held at once by the build (table, counts, temporaries)

    @property
    def capacity(self) -> int:
        return self.n_windows * self.group

    def key_slots(self) -> Any:
        """The key of each slot (a view)."""
        return self.tkeys if self.table is None else self.table[0::2]

    def value_slots(self) -> Any:
        """The value word of each slot (a view)."""
        return self.tvals if self.table is None else self.table[1::2]

    def nbytes(self) -> int:
        if self.table is not None:
            return int(self.table.nbytes)
        return int(self.tkeys.nbytes) + int(self.tvals.nbytes)

    def record(self) -> hashing.TableRecord:
        """The kernels' view of the table, made once (the table is frozen; its arrays are
        filled in place): a lookup call builds no tuple and no scalars for it."""
        rec = self.__dict__.get("_record")
        if rec is None:
            rec = hashing.TableRecord(self.tkeys, self.tvals, np.int64(self.stride),
                                      self.overflow, self.flag, np.int64(self.n_windows),
                                      np.int64(self.group), self.empty)
            object.__setattr__(self, "_record", rec)
        return rec


@dataclass(frozen=True)
class BuildPasses:
    """Where the two build passes run: the device and the GPU block size."""

    device: str
    threads_per_block: int = DEFAULT_THREADS_PER_BLOCK

    def insert(self, tab: HashTable, counts: Any, keys: Any, vals: Any) -> int | None:
        return hashing.insert_or_count(self.device, tab.record(), counts, keys, vals,
                                       self.threads_per_block)

    def place(self, tab: HashTable, keys: Any, rowids: Any) -> int | None:
        return hashing.place_rows(self.device, tab.record(), keys, rowids,
                                  self.threads_per_block)


def value_word_dtype(n: int, rowid_dtype: Any) -> np.dtype:
    """uint32 value words while every rowID and run offset of ``n`` rows lies below the flag
    bit 2^31 (runs take at most ``n + n // 2`` words), else uint64."""
    narrow = np.dtype(rowid_dtype) == np.uint32 and n + n // 2 <= NARROW_VALUE_WORDS
    return np.dtype(np.uint32 if narrow else np.uint64)


def _empty_table(xp: Any, n_keys: int, load_factor: float, group: int, layout: str,
                 key_dtype: np.dtype, word_dtype: np.dtype, overflow: Any) -> HashTable:
    n_windows = next_prime_windows(n_keys, load_factor, group)
    cap = n_windows * group
    empty = key_dtype.type(np.iinfo(key_dtype).max)
    if layout == "soa":
        tkeys, tvals, table, stride = (xp.full(cap, empty, dtype=key_dtype),
                                       xp.empty(cap, dtype=word_dtype), None, 1)
    else:
        table = xp.full(2 * cap, empty, dtype=key_dtype)
        tkeys, tvals, stride = table, table[1:], 2
    return HashTable(tkeys=tkeys, tvals=tvals, table=table, stride=stride, n_windows=n_windows,
                     group=group, empty=empty, flag=hashing.value_flag(tvals.dtype),
                     overflow=overflow, n_distinct=0, probes=None, peak=0)


def _runs(xp: Any, extra: Any, dtype: np.dtype) -> tuple[Any, Any, Any]:
    """(overflow array, run offset of each entry, which entries are multi keys) for keys with
    ``extra`` rows beyond their first; ``overflow[offset] = 0`` for every run (pass 2 counts
    back up)."""
    multi = extra > 0
    # a run: its header (the row count: RUN_ROWS words), then its extra + 1 rows
    sizes = xp.where(multi, extra.astype(np.int64) + (1 + hashing.RUN_ROWS), 0)
    starts = csr.offsets_from_counts(sizes)
    overflow = xp.empty(int(starts[-1]), dtype=dtype)
    starts = starts[:-1]
    overflow[starts[multi] + hashing.RUN_COUNT] = 0
    return overflow, starts, multi


def _add_probes(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a + b


def build_table(xp: Any, keys: Any, rowids: Any, *, group: int, load_factor: float,
                layout: str, word_dtype: Any, passes: BuildPasses) -> HashTable:
    """The table of the pairs ``(keys[i], rowids[i])``: keys of the table's key dtype, none
    equal to its maximum (the empty sentinel); rowIDs increasing; ``word_dtype`` the value
    words' (for ``aos`` it must be the key dtype). Counts and overflow runs are of the rowID
    dtype."""
    key_dtype, word_dtype = np.dtype(keys.dtype), np.dtype(word_dtype)
    count_dtype = np.dtype(rowids.dtype)
    if layout == "aos" and word_dtype != key_dtype:
        raise ValueError("aos tables hold keys and value words of one dtype")
    m = int(keys.shape[0])
    none = xp.empty(0, dtype=count_dtype)
    tab = _empty_table(xp, m, load_factor, group, layout, key_dtype, word_dtype, none)
    if m == 0:
        return replace(tab, probes=0, peak=tab.nbytes())
    # pass 1: insert or count
    counts = xp.zeros(tab.capacity, dtype=count_dtype)
    probes = passes.insert(tab, counts, keys, rowids)
    peak = tab.nbytes() + int(counts.nbytes)
    if int(counts.max()) == 0:  # unique keys: done
        return replace(tab, n_distinct=m, probes=probes, peak=peak)
    n_distinct = m - int(counts.sum(dtype=np.int64))
    # nonzero() holds a bool mask of the slots; _runs() a flag, a size and an offset per entry
    peak += tab.capacity
    if n_distinct * REHASH_MIN_MULTIPLICITY <= m:
        # the distinct keys with their first rowIDs and extra counts ...
        slots = xp.nonzero(tab.key_slots() != tab.empty)[0]
        dkeys, words, extra = tab.key_slots()[slots], tab.value_slots()[slots], counts[slots]
        overflow, starts, multi = _runs(xp, extra, count_dtype)
        words[multi] = starts[multi].astype(word_dtype) | tab.flag
        held = int(dkeys.nbytes + words.nbytes + overflow.nbytes)
        peak += held + int(slots.nbytes + extra.nbytes + multi.nbytes + 2 * starts.nbytes)
        # ... into a table sized for them (the pass-1 table and counts are dropped first)
        del tab, counts, slots, extra, starts, multi
        tab = _empty_table(xp, n_distinct, load_factor, group, layout, key_dtype, word_dtype,
                           overflow)
        counts = xp.zeros(tab.capacity, dtype=count_dtype)
        peak = max(peak, held + tab.nbytes() + int(counts.nbytes))
        probes = _add_probes(probes, passes.insert(tab, counts, dkeys, words))
    else:  # the pass-1 table stays: flag the value words of its multi slots
        slots = xp.nonzero(counts)[0]
        overflow, starts, _ = _runs(xp, counts[slots], count_dtype)
        tab.value_slots()[slots] = starts.astype(word_dtype) | tab.flag
        peak += int(overflow.nbytes + slots.nbytes * 4)  # slots, their counts, sizes, offsets
        tab = replace(tab, overflow=overflow)
    del counts
    # pass 2: every row of a multi key into its run
    probes = _add_probes(probes, passes.place(tab, keys, rowids))
    return replace(tab, n_distinct=n_distinct, probes=probes, peak=peak)


class WarpcoreHashState(BuildState):
    """One build of ``warpcore-hash``: the table and the out-of-band rows."""

    ht: HashTable
    oob: Any            # rowIDs of the keys equal to the empty sentinel
    build_probes: int | None  # windows probed by the build (CPU only; None on the GPU)
    peak: int


class WarpcoreHashIndex(GpuIndex[WarpcoreHashState]):
    """Open addressing, cooperative probing by groups of G threads, double hashing (WarpCore)."""

    name: ClassVar[str] = "warpcore-hash"
    #: Keys a build makes per second (:mod:`indexzoo.buildtime`): the CPU's at 2^22
    #: keys (benchmarks/results/cpu/2026-11-29-build-rates/), an H200's at 2^26
    #: (benchmarks/results/h200/2026-11-28-restructure-324db91/paper-scan/: 8.5 ms).
    build_rate: ClassVar[dict[str, float]] = {"cpu": 5e6, "cuda": 7.9e9}
    Params: ClassVar[type[IndexParams]] = WarpcoreHashParams
    capabilities: ClassVar[Capabilities] = Capabilities(point=True, range=False, duplicates=True)
    plugin_api: ClassVar[str] = "2.0"
    #: the table, each probe's end and each value word checked (see saved.py)
    state_schema: ClassVar[StateSchema] = hash_schema(value_word_dtype)
    params: WarpcoreHashParams

    # -------------------------------------------------------------- build
    def _build(self, st: WarpcoreHashState, keys: Any) -> None:
        xp, n = st.xp, int(keys.shape[0])
        p = self.params
        word_dtype = value_word_dtype(n, st.rowid_dtype)
        key_dtype = np.dtype(np.uint64 if keys.dtype == np.uint64 else np.uint32)
        if p.layout == "aos":  # one word size for keys and values
            key_dtype = word_dtype = max(key_dtype, word_dtype, key=lambda d: d.itemsize)
        tkeys_in = keys.astype(key_dtype, copy=False)
        rowids = xp.arange(n, dtype=st.rowid_dtype)
        is_empty = tkeys_in == key_dtype.type(np.iinfo(key_dtype).max)
        temporaries = n * (st.rowid_dtype.itemsize + 1) + (
            n * key_dtype.itemsize if tkeys_in is not keys else 0)
        if int(is_empty.sum()):
            st.oob = rowids[is_empty]
            inside = ~is_empty
            tkeys_in, rowids = tkeys_in[inside], rowids[inside]
            temporaries += int(tkeys_in.nbytes + rowids.nbytes) + n
        else:
            st.oob = rowids[:0]
        st.ht = build_table(xp, tkeys_in, rowids, group=p.group_size,
                            load_factor=p.load_factor, layout=p.layout, word_dtype=word_dtype,
                            passes=BuildPasses(self.device, p.threads_per_block))
        st.build_probes = st.ht.probes
        st.peak = temporaries + st.ht.peak + int(st.oob.nbytes)

    @staticmethod
    def _table_breakdown(st: WarpcoreHashState) -> dict[str, int]:
        ht = st.ht
        if ht.table is not None:
            return {"table": int(ht.table.nbytes)}
        return {"table_keys": int(ht.tkeys.nbytes), "table_values": int(ht.tvals.nbytes)}

    def _footprint(self, st: WarpcoreHashState) -> Footprint:
        return Footprint(breakdown={**self._table_breakdown(st),
                                    "overflow": int(st.ht.overflow.nbytes),
                                    "out_of_band": int(st.oob.nbytes)},
                         peak_build_bytes=st.peak)

    @property
    def capacity(self) -> int:
        """Slots in the table."""
        return self._live().ht.capacity

    @property
    def load_factor(self) -> float:
        """Occupied share of the slots (distinct keys in the table / capacity)."""
        ht = self._live().ht
        return ht.n_distinct / ht.capacity if ht.capacity else 0.0

    # -------------------------------------------------------------- lookups
    def _launch(self, op: Any, q: Any, *args: Any) -> None:
        """A lookup operation: one thread per lookup on the CPU, a group of ``group_size``
        threads on the GPU."""
        op(self.device, int(q.shape[0]), *args, group=self.params.group_size,
           threads_per_block=self.params.threads_per_block)

    @staticmethod
    def _oob_mask(st: WarpcoreHashState, qt: Any) -> Any:
        """Lookups of the out-of-band key, or None when there are none to answer."""
        if not st.oob.shape[0]:
            return None
        eq = qt == st.ht.empty
        return eq if bool(eq.any()) else None

    def _prepared_point(self, st: WarpcoreHashState, op: Operation) -> Callable[[Any], Any] | None:
        """``rowid`` lookups with the table bound into the launch, where no lookup can need
        the out-of-band key (none was built) and lookups need no conversion to the table's
        key width: a call allocates the answer and launches (the small-batch path)."""
        ht = st.ht
        if op.out != "rowid" or st.oob.shape[0] or ht.tkeys.dtype != st.native_dtype:
            return None
        launch = hashing.FIND_ROWID.bind(
            self.device, ht.record(), Slot(ht.tkeys.dtype), Slot(st.rowid_dtype), st.miss,
            group=self.params.group_size, threads_per_block=self.params.threads_per_block)
        return one_per_item(launch, st.xp, st.rowid_dtype)

    def _point_rowid(self, st: WarpcoreHashState, q: Any) -> Any:
        ht = st.ht
        qt = q.astype(ht.tkeys.dtype, copy=False)
        out = st.xp.empty(q.shape[0], dtype=st.rowid_dtype)
        self._launch(hashing.FIND_ROWID, q, ht.record(), qt, out, st.miss)
        eq = self._oob_mask(st, qt)
        if eq is not None:
            out[eq] = st.oob[0]
        return out

    def _counts(self, st: WarpcoreHashState, qt: Any, dtype: Any) -> Any:
        ht = st.ht
        out = st.xp.empty(qt.shape[0], dtype=dtype)
        self._launch(hashing.COUNT, qt, ht.record(), qt, out)
        eq = self._oob_mask(st, qt)
        if eq is not None:
            out[eq] = st.oob.shape[0]
        return out

    def _point_count(self, st: WarpcoreHashState, q: Any) -> Any:
        return self._counts(st, q.astype(st.ht.tkeys.dtype, copy=False), st.rowid_dtype)

    def _point_sum(self, st: WarpcoreHashState, q: Any) -> Any:
        ht = st.ht
        qt = q.astype(ht.tkeys.dtype, copy=False)
        out = st.xp.empty(q.shape[0], dtype=np.uint64)
        values, use_values = values_arg(st.values, st.xp)
        self._launch(hashing.SUM, q, ht.record(), values, use_values, qt, out)
        eq = self._oob_mask(st, qt)
        if eq is not None:
            picked = st.oob.astype(np.uint64) if st.values is None else st.values[st.oob]
            out[eq] = picked.sum(dtype=np.uint64)
        return out

    def _point_rowids(self, st: WarpcoreHashState, q: Any) -> tuple[Any, Any]:
        xp, ht = st.xp, st.ht
        qt = q.astype(ht.tkeys.dtype, copy=False)
        offsets = csr.offsets_from_counts(self._counts(st, qt, np.int64))
        out = xp.empty(int(offsets[-1]), dtype=st.rowid_dtype)
        if out.shape[0]:
            self._launch(hashing.FILL, q, ht.record(), qt, offsets, out)
        eq = self._oob_mask(st, qt)
        if eq is not None:
            starts = offsets[:-1][eq]
            n_oob = st.oob.shape[0]
            out[(starts[:, None] + xp.arange(n_oob)[None, :]).ravel()] = xp.tile(
                st.oob, int(starts.shape[0]))
        return offsets, out


def next_prime_windows(n: int, load_factor: float, group: int) -> int:
    """Windows for ``n`` keys at ``load_factor``: the next prime >= n / (lf * G), at least 2,
    and enough that at least one slot stays empty."""
    need = max(math.ceil(n / (load_factor * group)), 2)
    while need * group <= n:
        need += 1
    if need >= (1 << 32) - 64:
        raise InvalidInput(
            f"argument 'keys': {n} keys need {need} windows of {group} slots at load factor "
            f"{load_factor}; at most 2^32 windows are supported (raise group_size or load_factor)")
    return hashing.next_prime(need)
