"""The GPU side of routing a chunk of point lookups and of putting its answers back: CUDA C++
through CuPy (the rest of the package's routing is NumPy-style code that runs on both).

* :func:`split` cuts a CuPy chunk into one piece a shard in two passes over it, where
  :func:`~.partition.route_points` and a gather take one pass of arithmetic, a
  ``flatnonzero`` (a scan, a scatter and a wait) a shard and a gather a shard. Pass one
  counts each block's lookups of each shard; one block's scan of the counts (a third, tiny
  kernel) gives each block's place in each piece and the pieces' sizes; pass two writes every
  lookup and its position (4 bytes where the chunk has under 2^31 lookups) into the pieces
  of the shards it goes to, a warp's lookups of one shard side by side (a ballot and a
  population count), so the pieces keep the chunk's order and equal what ``flatnonzero`` and
  the gather give. A lookup goes to every shard whose bit its mask sets: under the range
  scheme every shard whose smallest and largest key hold it, under the hash scheme (without
  heavy keys) the one shard of its hash. The pieces lie one after another in one allocation
  (and their positions in another), the shards' bounds are copied to the GPU once per
  routing, so a call sends nothing to the GPU and waits once, for the pieces' sizes. The
  hash scheme's modulo is by a constant in each case of 2-8 shards (a 64-bit division by a
  variable is a long routine on the GPU), and a thread's per-shard counts stay in registers.
  Both passes read a thread's lookups of a tile (and their ``outside`` marks) with every
  load issued before the first mask is made (``tile_masks``), so each thread keeps
  ``ITEMS`` reads in flight instead of one. (Timings: ``docs/plugins/sharded.md``.)
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
_ITEMS = 8  # lookups a thread handles in each pass: a block covers 4,096

_TYPES = {np.dtype(np.int32): "int", np.dtype(np.uint32): "unsigned int",
          np.dtype(np.int64): "long long", np.dtype(np.uint64): "unsigned long long"}
#: The positions' type: 4 bytes where a chunk's positions fit them.
_POSITIONS = {np.dtype(np.int32): "int", np.dtype(np.int64): "long long"}
_SCAN_THREADS = 1024

_SOURCE = r"""
#define THREADS 512
#define ITEMS 8
#define WARPS (THREADS / 32)
#define MOST 8

// z % shards with a constant divisor in each case (multiplies and shifts): a 64-bit division
// by a variable is a long software routine on the GPU
__device__ __forceinline__ unsigned modulo(unsigned long long z, int shards) {
  switch (shards) {
    case 2: return (unsigned)(z % 2ull);
    case 3: return (unsigned)(z % 3ull);
    case 4: return (unsigned)(z % 4ull);
    case 5: return (unsigned)(z % 5ull);
    case 6: return (unsigned)(z % 6ull);
    case 7: return (unsigned)(z % 7ull);
    case 8: return (unsigned)(z % 8ull);
    default: return (unsigned)(z % (unsigned long long)shards);
  }
}

template<typename T>
__device__ __forceinline__ unsigned mask_of(T v, const T* lo, const T* hi, int shards,
                                            int hashed) {
  if (hashed) {
    unsigned long long z = (unsigned long long)v;
    MIX
    return 1u << modulo(z, shards);
  }
  unsigned m = 0;
  for (int s = 0; s < shards; ++s) m |= (unsigned)(lo[s] <= v && v <= hi[s]) << s;
  return m;
}

// a thread's lookups of a tile (item j at base + j * THREADS + threadIdx.x) and their masks:
// every load is issued before any mask is made, so a thread keeps ITEMS reads in flight; a
// lookup past the chunk's end or marked in `outside` goes to no shard (mask 0)
template<typename T>
__device__ __forceinline__ void tile_masks(const T* __restrict__ q,
                                           const bool* __restrict__ outside, long long base,
                                           long long n, const T* __restrict__ lo,
                                           const T* __restrict__ hi, int shards, int hashed,
                                           T (&v)[ITEMS], unsigned (&m)[ITEMS]) {
  bool skip[ITEMS];
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) {
    long long i = base + j * THREADS + threadIdx.x;
    v[j] = i < n ? q[i] : (T)0;
    skip[j] = i >= n || (outside != nullptr && outside[i]);
  }
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) m[j] = skip[j] ? 0u : mask_of(v[j], lo, hi, shards, hashed);
}

// pass 1: counts[s * blocks + b], block b's lookups that go to shard s
template<typename T>
__global__ void split_count(const T* q, const bool* outside, long long n, const T* lo,
                            const T* hi, int shards, int hashed, long long* counts) {
  __shared__ unsigned total[MOST];
  if (threadIdx.x < MOST) total[threadIdx.x] = 0;
  __syncthreads();
  long long base = (long long)blockIdx.x * (THREADS * ITEMS);
  T v[ITEMS];
  unsigned m[ITEMS];
  tile_masks(q, outside, base, n, lo, hi, shards, hashed, v, m);
  unsigned c[MOST] = {0, 0, 0, 0, 0, 0, 0, 0};  // registers: every index a constant
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) {
#pragma unroll
    for (int s = 0; s < MOST; ++s) c[s] += (m[j] >> s) & 1u;  // (no bit at or past shards)
  }
#pragma unroll
  for (int s = 0; s < MOST; ++s) {
    if (s < shards) {
      unsigned v = c[s];
      for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
      if ((threadIdx.x & 31) == 0 && v) atomicAdd(total + s, v);
    }
  }
  __syncthreads();
  if (threadIdx.x < shards)
    counts[(long long)threadIdx.x * gridDim.x + blockIdx.x] = total[threadIdx.x];
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
// (the pieces one after another in `pieces` and `positions`; starts[s * blocks + b]: where
// block b's lookups of shard s begin there)
template<typename T, typename P>
__global__ void split_write(const T* q, const bool* outside, long long n, const T* lo,
                            const T* hi, int shards, int hashed, const long long* starts,
                            T* pieces, P* positions) {
  __shared__ unsigned at[ITEMS][WARPS][MOST];
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  unsigned below = (1u << lane) - 1u;
  long long base = (long long)blockIdx.x * (THREADS * ITEMS);
  unsigned m[ITEMS];
  T v[ITEMS];  // each lookup read once, kept for its piece
  tile_masks(q, outside, base, n, lo, hi, shards, hashed, v, m);
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) {
    for (int s = 0; s < shards; ++s) {
      unsigned b = __ballot_sync(0xffffffffu, (m[j] >> s) & 1u);
      if (lane == 0) at[j][warp][s] = __popc(b);
    }
  }
  __syncthreads();
  if (threadIdx.x < shards) {  // each warp's place in the block's share of piece s
    int s = threadIdx.x;
    unsigned run = 0;
    for (int j = 0; j < ITEMS; ++j)
      for (int w = 0; w < WARPS; ++w) {
        unsigned k = at[j][w][s];
        at[j][w][s] = run;
        run += k;
      }
  }
  __syncthreads();
#pragma unroll
  for (int j = 0; j < ITEMS; ++j) {
    long long i = base + j * THREADS + threadIdx.x;
    for (int s = 0; s < shards; ++s) {
      unsigned b = __ballot_sync(0xffffffffu, (m[j] >> s) & 1u);
      if ((m[j] >> s) & 1u) {
        long long k = starts[(long long)s * gridDim.x + blockIdx.x] + at[j][warp][s]
                      + __popc(b & below);
        pieces[k] = v[j];
        positions[k] = (P)i;
      }
    }
  }
}
""".replace("MIX", MIX_CUDA)


@functools.cache
def _kernels() -> Any:
    import cupy

    names = ["split_starts", *(f"split_count<{t}>" for t in _TYPES.values()),
             *(f"split_write<{t}, {p}>" for t in _TYPES.values() for p in _POSITIONS.values())]
    return cupy.RawModule(code=_SOURCE, options=("-std=c++17",), name_expressions=names)


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
    blocks = max(1, -(-n // (_THREADS * _ITEMS)))
    nothing = np.uint64(0)  # (a null pointer: no lookup is outside)
    args = (q, nothing if outside is None else outside, np.int64(n), low, high,
            np.int32(shards), np.int32(hashed))
    # counts, then starts, then sizes: one allocation
    work = cupy.empty(2 * shards * blocks + shards, dtype=np.int64)
    counts, starts = work[:shards * blocks], work[shards * blocks:2 * shards * blocks]
    sizes = work[2 * shards * blocks:]
    mod = _kernels()
    name = _TYPES[dtype]
    mod.get_function(f"split_count<{name}>")((blocks,), (_THREADS,), (*args, counts))
    mod.get_function("split_starts")((1,), (_SCAN_THREADS,),
                                     (counts, np.int64(shards * blocks), np.int32(shards),
                                      np.int64(blocks), starts, sizes))
    sizes_here = sizes.get()  # the one wait: how much to allocate
    total = int(sizes_here.sum())
    pos_dtype = np.dtype(np.int32 if n <= np.iinfo(np.int32).max else np.int64)
    pieces = cupy.empty(total, dtype=dtype)
    positions = cupy.empty(total, dtype=pos_dtype)
    mod.get_function(f"split_write<{name}, {_POSITIONS[pos_dtype]}>")(
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
