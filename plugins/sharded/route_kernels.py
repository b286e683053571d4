"""The GPU side of routing a chunk of point lookups and of putting its answers back: CUDA C++
through CuPy (the rest of the package's routing is NumPy-style code that runs on both).

* :func:`split` cuts a CuPy chunk into one piece a shard in two passes over it, where
  :func:`~.partition.route_points` and a gather take one pass of arithmetic, a
  ``flatnonzero`` (a scan, a scatter and a wait) a shard and a gather a shard. Each block
  of a pass takes a stretch of the chunk, whole tiles of 4,096 lookups (``BLOCKS_PER_SM``
  blocks a multiprocessor, so a block walks many tiles and the grid is small). Pass one
  counts the stretch's lookups of each shard (the order does not matter there: 16-byte
  loads where the chunk is aligned and nothing is marked outside); one block's scan of the
  counts (a third, tiny kernel) gives each block's place in each piece and the pieces'
  sizes; pass two walks its stretch a tile at a time and writes every lookup and its
  position (4 bytes where the chunk has under 2^31 lookups) into the pieces of the shards it
  goes to, in the chunk's order: within a tile a warp's lookups of one shard side by side
  (a ballot and a population count), the warps' counts summed by one warp a shard, a
  running offset a shard carried from tile to tile, and the next tile's loads in flight
  while a tile is placed. So the pieces equal what ``flatnonzero`` and the gather give. A
  lookup goes to every shard whose bit its mask sets: under the range scheme every shard
  whose smallest and largest key hold it, under the hash scheme (without heavy keys) the
  one shard of its hash. The kernels are compiled for each shard count and scheme (the loops
  over the shards unroll, the bounds sit in registers, the hash's modulo is by a constant).
  The pieces lie one after another in one allocation (and their positions in another), the
  shards' bounds are copied to the GPU once per routing, so a call sends nothing to the GPU
  and waits once, for the pieces' sizes. (Timings: ``docs/plugins/sharded.md``.)
* :func:`place` adds a shard's answers (counts or sums) into the chunk's answer at their
  positions with atomic adds, so shards whose pieces overlap (a key on a boundary) add up as
  ``acc[idx] += answer`` does, in one pass, straight into the answer's dtype.

Used for 2 to :data:`MOST_SHARDS` shards and integer lookups of 4 or 8 bytes; anything else
routes as before.
"""

from __future__ import annotations

import functools
import itertools
from typing import Any

import numpy as np

from .partition import MIX_CUDA

__all__ = ["MOST_SHARDS", "adds", "place", "split", "takes"]

#: Shards a lookup's mask can name (one bit each).
MOST_SHARDS = 8
_THREADS = 512
_ITEMS = 8  # lookups a thread holds of a tile: a tile is 4,096

_TYPES = {np.dtype(np.int32): "int", np.dtype(np.uint32): "unsigned int",
          np.dtype(np.int64): "long long", np.dtype(np.uint64): "unsigned long long"}
#: The positions' type: 4 bytes where a chunk's positions fit them.
_POSITIONS = {np.dtype(np.int32): "int", np.dtype(np.int64): "long long"}
_SCAN_THREADS = 1024
#: Blocks a multiprocessor a pass launches: each walks a stretch of tiles.
BLOCKS_PER_SM = 2
#: A cap on the blocks (None: :data:`BLOCKS_PER_SM` a multiprocessor); tests lower it so that
#: small chunks make blocks walk several tiles.
_MOST_BLOCKS: int | None = None

_SOURCE = r"""
#define THREADS 512
#define ITEMS 8
#define TILE (THREADS * ITEMS)
#define WARPS (THREADS / 32)
#define PER_LANE (ITEMS * WARPS / 32)  // entries of the write pass's scan a lane takes
static_assert(ITEMS * WARPS % 32 == 0, "a tile's (item, warp) entries fill whole warps");

// a lookup's shards, as a mask of S bits: under the hash scheme (H) the one shard of its hash
// (modulo the constant S), under the range scheme every shard whose [lo, hi] holds it (the
// bounds kept in registers)
template<typename T, int S, bool H>
struct Router {
  T lo[S], hi[S];
  __device__ __forceinline__ void load(const T* l, const T* h) {
    if constexpr (!H) {
#pragma unroll
      for (int s = 0; s < S; ++s) { lo[s] = l[s]; hi[s] = h[s]; }
    }
  }
  __device__ __forceinline__ unsigned mask(T v) const {
    if constexpr (H) {
      unsigned long long z = (unsigned long long)v;
      MIX
      return 1u << (unsigned)(z % (unsigned long long)S);
    } else {
      unsigned m = 0;
#pragma unroll
      for (int s = 0; s < S; ++s) m |= (unsigned)(lo[s] <= v && v <= hi[s]) << s;
      return m;
    }
  }
};

template<int S>
__device__ __forceinline__ void add_mask(unsigned (&c)[S], unsigned m) {
#pragma unroll
  for (int s = 0; s < S; ++s) c[s] += (m >> s) & 1u;
}

// a thread's lookups of the tile at `base` (item j at base + j * THREADS + threadIdx.x), every
// load issued before any is used; a lookup at or past `last` or marked in `outside` is skipped
template<typename T>
__device__ __forceinline__ void load_tile(const T* __restrict__ q,
                                          const bool* __restrict__ outside, long long base,
                                          long long last, T (&v)[ITEMS], bool (&skip)[ITEMS]) {
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) {
    long long i = base + j * THREADS + threadIdx.x;
    bool in = i < last;
    v[j] = in ? q[i] : (T)0;
    skip[j] = !in || (outside != nullptr && outside[i]);
  }
}

// pass 1: counts[s * gridDim.x + b], the lookups of block b's stretch [b * per_block,
// (b + 1) * per_block) that go to shard s. The order does not matter here: without `outside`
// and with the chunk 16-byte aligned, 16-byte loads, four in flight a thread
template<typename T, int S, bool H>
__global__ void __launch_bounds__(THREADS) split_count(
    const T* __restrict__ q, const bool* __restrict__ outside, long long n,
    const T* __restrict__ lo, const T* __restrict__ hi, long long per_block,
    long long* __restrict__ counts) {
  Router<T, S, H> r;
  r.load(lo, hi);
  long long first = (long long)blockIdx.x * per_block;
  long long last = min(n, first + per_block);
  unsigned c[S];
#pragma unroll
  for (int s = 0; s < S; ++s) c[s] = 0;
  constexpr int V = 16 / sizeof(T);
  union Vec { uint4 w; T t[V]; };
  if (outside == nullptr && ((unsigned long long)q & 15ull) == 0) {
    // (per_block is a whole number of tiles, so q + first is as aligned as q)
    const uint4* qv = reinterpret_cast<const uint4*>(q + first);
    long long vecs = (last - first) / V;
    long long k = threadIdx.x;
    for (; k + 3 * THREADS < vecs; k += 4 * THREADS) {
      Vec a[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) a[u].w = qv[k + u * THREADS];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
#pragma unroll
        for (int e = 0; e < V; ++e) add_mask<S>(c, r.mask(a[u].t[e]));
      }
    }
    for (; k < vecs; k += THREADS) {
      Vec a;
      a.w = qv[k];
#pragma unroll
      for (int e = 0; e < V; ++e) add_mask<S>(c, r.mask(a.t[e]));
    }
    for (long long i = first + vecs * V + threadIdx.x; i < last; i += THREADS)
      add_mask<S>(c, r.mask(q[i]));
  } else {
    for (long long base = first; base < last; base += TILE) {
      T v[ITEMS];
      bool skip[ITEMS];
      load_tile(q, outside, base, last, v, skip);
#pragma unroll
      for (int j = 0; j < ITEMS; ++j)
        if (!skip[j]) add_mask<S>(c, r.mask(v[j]));
    }
  }
  __shared__ unsigned long long total[S];
  if (threadIdx.x < S) total[threadIdx.x] = 0;
  __syncthreads();
#pragma unroll
  for (int s = 0; s < S; ++s) {
    unsigned long long v = c[s];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if ((threadIdx.x & 31) == 0 && v) atomicAdd(total + s, v);
  }
  __syncthreads();
  if (threadIdx.x < S)
    counts[(long long)threadIdx.x * gridDim.x + blockIdx.x] = (long long)total[threadIdx.x];
}

// between the passes, one block: starts = the exclusive sum of counts in shard-major order
// (block b's lookups of shard s go after every shard before s and every block before b),
// sizes[s] = the lookups of shard s
__global__ void split_starts(const long long* counts, long long total_counts, int shards,
                             long long blocks, long long* starts, long long* sizes) {
  __shared__ long long warp_sum[32];
  long long per = (total_counts + blockDim.x - 1) / blockDim.x;
  long long a = min((long long)threadIdx.x * per, total_counts);
  long long b = min(a + per, total_counts);
  long long mine = 0;
  long long i = a;
  for (; i + 8 <= b; i += 8) {  // eight loads in flight at a time
    long long v[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = counts[i + k];
#pragma unroll
    for (int k = 0; k < 8; ++k) mine += v[k];
  }
  for (; i < b; ++i) mine += counts[i];
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  long long incl = mine;  // inclusive sum over the warp's threads, then over the warps
  for (int o = 1; o < 32; o <<= 1) {
    long long v = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += v;
  }
  if (lane == 31) warp_sum[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    int warps = blockDim.x >> 5;
    long long w = lane < warps ? warp_sum[lane] : 0;
    for (int o = 1; o < 32; o <<= 1) {
      long long v = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += v;
    }
    if (lane < warps) warp_sum[lane] = w;
  }
  __syncthreads();
  long long run = incl - mine + (warp > 0 ? warp_sum[warp - 1] : 0);
  for (i = a; i + 8 <= b; i += 8) {
    long long v[8];
#pragma unroll
    for (int k = 0; k < 8; ++k) v[k] = counts[i + k];
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      starts[i + k] = run;
      run += v[k];
    }
  }
  for (; i < b; ++i) {
    starts[i] = run;
    run += counts[i];
  }
  __syncthreads();
  if (threadIdx.x < shards) {
    int s = threadIdx.x;
    long long end = s + 1 < shards ? starts[(s + 1) * blocks]
                                   : warp_sum[(blockDim.x >> 5) - 1];
    sizes[s] = end - starts[s * blocks];
  }
}

// pass 2: each lookup and its position into the pieces of its shards, in the chunk's order
// (the pieces one after another in `pieces` and `positions`; starts[s * gridDim.x + b]: where
// block b's lookups of shard s begin there). A block walks its stretch a tile at a time, the
// next tile's loads issued before this tile's ballots, scan and writes; within a tile a
// lookup's place in a piece is its tile's offset, its (item, warp)'s exclusive sum of the
// warps' counts (one warp scans each shard's) and its lanes below it in the ballot
template<typename T, typename P, int S, bool H>
__global__ void __launch_bounds__(THREADS) split_write(
    const T* __restrict__ q, const bool* __restrict__ outside, long long n,
    const T* __restrict__ lo, const T* __restrict__ hi, long long per_block,
    const long long* __restrict__ starts, T* __restrict__ pieces, P* __restrict__ positions) {
  static_assert(S <= WARPS, "a warp scans each shard's counts");
  __shared__ long long at[2][ITEMS * WARPS][S];  // two tiles' worth: one barrier fewer a tile
  __shared__ long long offs[S];                  // where the block's next tile starts, a shard
  Router<T, S, H> r;
  r.load(lo, hi);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  unsigned below = (1u << lane) - 1u;
  long long first = (long long)blockIdx.x * per_block;
  long long last = min(n, first + per_block);
  if (threadIdx.x < S) offs[threadIdx.x] = starts[(long long)threadIdx.x * gridDim.x + blockIdx.x];
  T v[ITEMS];
  bool skip[ITEMS];
  load_tile(q, outside, first, last, v, skip);
  int buf = 0;
  // the next tile's loads go out after this tile's masks are made, but for 4-byte lookups
  // under the hash scheme, whose long masks they then overlap (the faster order of each,
  // measured: docs/plugins/sharded.md)
  constexpr bool loads_first = H && sizeof(T) == 4;
  for (long long base = first; base < last; base += TILE) {
    T vn[ITEMS];
    bool sn[ITEMS];
    if constexpr (loads_first) load_tile(q, outside, base + TILE, last, vn, sn);
    unsigned m[ITEMS];
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) m[j] = skip[j] ? 0u : r.mask(v[j]);
    if constexpr (!loads_first) load_tile(q, outside, base + TILE, last, vn, sn);
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
#pragma unroll
      for (int s = 0; s < S; ++s) {
        unsigned b = __ballot_sync(0xffffffffu, (m[j] >> s) & 1u);
        if (lane == 0) at[buf][j * WARPS + warp][s] = __popc(b);
      }
    }
    __syncthreads();
    if (warp < S) {  // warp s: the exclusive sum of shard s's counts
      int s = warp;
      long long x[PER_LANE], sum = 0;
#pragma unroll
      for (int e = 0; e < PER_LANE; ++e) {
        x[e] = at[buf][lane * PER_LANE + e][s];
        sum += x[e];
      }
      long long incl = sum;
      for (int o = 1; o < 32; o <<= 1) {
        long long y = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += y;
      }
      long long run = offs[s] + incl - sum;
#pragma unroll
      for (int e = 0; e < PER_LANE; ++e) {
        at[buf][lane * PER_LANE + e][s] = run;
        run += x[e];
      }
      __syncwarp();
      if (lane == 31) offs[s] = run;  // read again after the next tile's first barrier
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
      long long i = base + j * THREADS + threadIdx.x;
#pragma unroll
      for (int s = 0; s < S; ++s) {
        unsigned b = __ballot_sync(0xffffffffu, (m[j] >> s) & 1u);
        if ((m[j] >> s) & 1u) {
          long long k = at[buf][j * WARPS + warp][s] + __popc(b & below);
          pieces[k] = v[j];
          positions[k] = (P)i;
        }
      }
    }
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
      v[j] = vn[j];
      skip[j] = sn[j];
    }
    buf ^= 1;
  }
}
""".replace("MIX", MIX_CUDA)


@functools.cache
def _kernels(name: str, shards: int, hashed: bool) -> Any:
    """The passes for lookups of C++ type ``name``, ``shards`` shards and one scheme: one
    module each, compiled at its first use (``shards`` and the scheme are constants in the
    code, so its loops over the shards unroll and the hash's modulo is by a constant)."""
    import cupy

    h = "true" if hashed else "false"
    names = ["split_starts", f"split_count<{name}, {shards}, {h}>",
             *(f"split_write<{name}, {p}, {shards}, {h}>" for p in _POSITIONS.values())]
    return cupy.RawModule(code=_SOURCE, options=("-std=c++17",), name_expressions=names)


def _grid(n: int) -> tuple[int, int]:
    """(blocks, lookups a block): each block a stretch of whole tiles, at most
    :data:`BLOCKS_PER_SM` blocks a multiprocessor (or :data:`_MOST_BLOCKS`) walking them."""
    from indexzoo.native.targets import sm_count

    tile = _THREADS * _ITEMS
    tiles = max(1, -(-n // tile))
    most = _MOST_BLOCKS if _MOST_BLOCKS is not None else sm_count() * BLOCKS_PER_SM
    per = -(-tiles // max(1, min(tiles, most)))
    return -(-tiles // per), per * tile


@functools.cache
def _placer() -> Any:
    import cupy

    return cupy.ElementwiseKernel("I at, A answer", "raw U out",
                                  "atomicAdd(&out[at], (U)answer)", "indexzoo_sharded_place")


def takes(q: Any, shards: int) -> bool:
    """Whether :func:`split` takes this chunk (a CuPy array of 4- or 8-byte integers) and
    this many shards."""
    return (type(q).__module__.startswith("cupy") and q.ndim == 1
            and np.dtype(q.dtype) in _TYPES and 2 <= shards <= MOST_SHARDS)


def split(q: Any, shards: int, lo: np.ndarray | None, hi: np.ndarray | None,
          outside: Any = None) -> list[tuple[Any, Any]]:
    """For each shard, (the positions in ``q`` of its lookups, int32 where ``q`` has fewer than
    2^31 lookups and int64 beyond, those lookups), in
    ``q``'s order: the lookups in its ``[lo[s], hi[s]]`` (range scheme), or, with ``lo`` and
    ``hi`` None, those whose hash is ``s`` (hash scheme, no heavy keys); ``outside`` (a CuPy
    bool array, or None) marks lookups no shard gets."""
    import cupy

    n = int(q.shape[0])
    dtype = np.dtype(q.dtype)
    hashed = lo is None
    low, high = _bounds(cupy.cuda.runtime.getDevice(), dtype.str,
                        None if hashed else np.asarray(lo).astype(dtype).tobytes(),
                        None if hashed else np.asarray(hi).astype(dtype).tobytes())
    blocks, per_block = _grid(n)
    nothing = np.uint64(0)  # (a null pointer: no lookup is outside)
    args = (q, nothing if outside is None else outside, np.int64(n), low, high,
            np.int64(per_block))
    # counts, then starts, then sizes: one allocation
    work = cupy.empty(2 * shards * blocks + shards, dtype=np.int64)
    counts, starts = work[:shards * blocks], work[shards * blocks:2 * shards * blocks]
    sizes = work[2 * shards * blocks:]
    name = _TYPES[dtype]
    h = "true" if hashed else "false"
    mod = _kernels(name, shards, hashed)
    mod.get_function(f"split_count<{name}, {shards}, {h}>")((blocks,), (_THREADS,),
                                                            (*args, counts))
    mod.get_function("split_starts")((1,), (_SCAN_THREADS,),
                                     (counts, np.int64(shards * blocks), np.int32(shards),
                                      np.int64(blocks), starts, sizes))
    sizes_here = sizes.get()  # the one wait: how much to allocate
    total = int(sizes_here.sum())
    pos_dtype = np.dtype(np.int32 if n <= np.iinfo(np.int32).max else np.int64)
    pieces = cupy.empty(total, dtype=dtype)
    positions = cupy.empty(total, dtype=pos_dtype)
    mod.get_function(f"split_write<{name}, {_POSITIONS[pos_dtype]}, {shards}, {h}>")(
        (blocks,), (_THREADS,), (*args, starts, pieces, positions))
    cuts = np.concatenate(([0], np.cumsum(sizes_here))).tolist()
    return [(positions[a:b], pieces[a:b]) for a, b in itertools.pairwise(cuts)]


@functools.lru_cache(maxsize=256)
def _bounds(device: int, dtype: str, lo: bytes | None, hi: bytes | None) -> tuple[Any, Any]:
    """The shards' smallest and largest keys on GPU ``device`` (a one-item placeholder each
    for the hash scheme), copied there once per routing: a call sends nothing to the GPU."""
    import cupy

    got = tuple(cupy.zeros(1, dtype=np.dtype(dtype)) if b is None
                else cupy.asarray(np.frombuffer(b, dtype=np.dtype(dtype))) for b in (lo, hi))
    cupy.cuda.get_current_stream().synchronize()  # there before another stream reads them
    return got


def adds(dtype: np.dtype) -> bool:
    """Whether :func:`place` adds into an answer of ``dtype`` (integers of 4 or 8 bytes)."""
    return dtype.kind in "iu" and dtype.itemsize in (4, 8)


def place(out: Any, at: Any, answer: Any) -> None:
    """``out[at] += answer`` for integer ``out`` of 4 or 8 bytes, in ``out``'s dtype (as
    unsigned: wrapping), positions repeated across calls adding up."""
    if at.shape[0] == 0:
        return
    target = out.view(np.dtype(f"u{out.dtype.itemsize}"))
    _placer()(at, answer, target)
