// The fused scan's GPU body with 16-byte loads (indexzoo.plugins.fused_scan.vector compiles it
// with CuPy's RawKernel; numba cannot issue a 16-byte load from a 4-byte column).
//
// fs_scan: Q conjunctions of inclusive range predicates over the d key columns of a
// Fortran-order table whose column stride `ld` (rows) is a multiple of the keys a 16-byte
// vector holds (R: 4 uint32, 2 uint64) and whose base is 16-byte aligned, so that every
// column starts on a 16-byte boundary; rows n .. ld-1 are padding, read and never matched.
// Out: Q packed bitmaps of `words` = ceil(n/32) uint32 (bit r of word r/32, least significant
// first; padding bits zero), every word written.
//
// Work: a warp takes a chunk of 32 bitmap words (1,024 rows): STEPS = 32/R steps, each lane
// loading one vector (R rows) of every column per step, U steps in flight at a time. The
// 32/R lanes of one word OR their R bits with shuffles; lane L of the warp then holds word L
// of the chunk, and the warp stores its 32 words at once (128 bytes). One warp a chunk, no
// grid stride (the fastest grid of the floor read on an H200); grid.y is the query.
//
// A predicate lo <= x <= hi is one subtraction and one comparison, x - lo <= hi - lo in the
// key's unsigned arithmetic (a query with lo > hi in any column matches nothing).
//
// Measured on an H200 (docs/plugins/fused-scan.md): U steps of a chunk at a time, the groups
// one after the other (not unrolled into each other, which costs registers and occupancy), 8
// rows of each column in flight per lane (U = 2 vectors of uint32, 4 of uint64; 16 rows at one
// uint32 column, where 8 leave too few bytes in flight a warp), loads that
// evict first, 128 threads a block. Tried and not kept: several chunks a warp, stores that
// evict first, columns staggered off their natural distance.
//
// The body is a template; the kernel CuPy launches is the extern "C" instance at the end,
// chosen with -DFS_WIDE=<0|1> (uint32 | uint64 keys), -DFS_D=<columns; 0: any number, a loop
// over them> and -DFS_U=<steps in flight>. The tests run the body on the CPU with FS_HOST
// defined (tests/support/scan_host.cpp brings its own fs_load, shuffles and thread indices).

#ifndef FS_WIDE
#define FS_WIDE 0
#endif
#ifndef FS_D
#define FS_D 3
#endif
#ifndef FS_U
#define FS_U 2
#endif

#ifndef FS_HOST
// The scan reads each byte once: loads that evict first (ld.global.cs).
template <typename T>
__device__ __forceinline__ T fs_load(const T* p) { return __ldcs(p); }
#endif

template <typename K> struct fs_vec;
template <> struct fs_vec<unsigned int> {
  typedef uint4 type;
  static const int rows = 4;
};
template <> struct fs_vec<unsigned long long> {
  typedef ulonglong2 type;
  static const int rows = 2;
};

// Bit k set iff key k of the vector lies in [lo, lo + span].
__device__ __forceinline__ unsigned int fs_in(const uint4& v, unsigned int lo, unsigned int span) {
  return (unsigned int)(v.x - lo <= span) | ((unsigned int)(v.y - lo <= span) << 1)
       | ((unsigned int)(v.z - lo <= span) << 2) | ((unsigned int)(v.w - lo <= span) << 3);
}
__device__ __forceinline__ unsigned int fs_in(const ulonglong2& v, unsigned long long lo,
                                              unsigned long long span) {
  return (unsigned int)(v.x - lo <= span) | ((unsigned int)(v.y - lo <= span) << 1);
}

template <typename K, int D, int U>
__device__ __forceinline__ void fs_scan(const K* __restrict__ cols, long long ld, int d,
                                        long long n, const K* __restrict__ lo,
                                        const K* __restrict__ hi, long long queries,
                                        long long words, unsigned int* __restrict__ out) {
  typedef typename fs_vec<K>::type V;
  const int R = fs_vec<K>::rows;
  const int LANES = 32 / R;  // lanes of one bitmap word
  const int STEPS = 32 / R;  // steps of a chunk: 32 lanes x R rows x STEPS = 1,024 rows
  const int DC = D > 0 ? D : 1;
  const unsigned int full = 0xffffffffu;
  const unsigned int lane = threadIdx.x & 31u;
  const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const long long groups = (n + R - 1) / R;  // vectors of a column holding rows < n
  const int cols_n = D > 0 ? D : d;
  const long long g0 = warp * 32 * STEPS;    // the chunk's first vector
  if (g0 >= groups) return;                  // the whole warp: nothing of it waits on a shuffle
  // One query a row of blocks (the host launches at most 65,535 rows at once, and again for
  // more): a loop over the queries here held 48 registers against 40 at one uint32 column
  // and cost a lone query there about 8% on an H200.
  const long long q = blockIdx.y;
  if (q >= queries) return;
  K base[DC], span[DC];
  bool none = false;
  if (D > 0) {
#pragma unroll
    for (int j = 0; j < DC; j++) {
      base[j] = lo[q * cols_n + j];
      const K h = hi[q * cols_n + j];
      none = none || base[j] > h;
      span[j] = h - base[j];
    }
  }
  unsigned int mine = 0u;
#pragma unroll 1
  for (int s0 = 0; s0 < STEPS; s0 += U) {
    unsigned int bits[U];
    if (D > 0) {
      V v[U][DC];
#pragma unroll
      for (int u = 0; u < U; u++) {
        const long long g = g0 + (long long)(s0 + u) * 32 + lane;
#pragma unroll
        for (int j = 0; j < DC; j++)
          if (g < groups) v[u][j] = fs_load(reinterpret_cast<const V*>(cols + j * ld) + g);
      }
#pragma unroll
      for (int u = 0; u < U; u++) {
        unsigned int b = (1u << R) - 1u;
#pragma unroll
        for (int j = 0; j < DC; j++) b &= fs_in(v[u][j], base[j], span[j]);
        bits[u] = b;
      }
    } else {  // any number of columns: one column's U vectors in flight at a time
#pragma unroll
      for (int u = 0; u < U; u++) bits[u] = (1u << R) - 1u;
      for (int j = 0; j < cols_n; j++) {
        const K b0 = lo[q * cols_n + j], h = hi[q * cols_n + j];
        none = none || b0 > h;
        V v[U];
#pragma unroll
        for (int u = 0; u < U; u++) {
          const long long g = g0 + (long long)(s0 + u) * 32 + lane;
          if (g < groups) v[u] = fs_load(reinterpret_cast<const V*>(cols + j * ld) + g);
        }
#pragma unroll
        for (int u = 0; u < U; u++) bits[u] &= fs_in(v[u], b0, (K)(h - b0));
      }
    }
#pragma unroll
    for (int u = 0; u < U; u++) {
      const long long r = (g0 + (long long)(s0 + u) * 32 + lane) * R;  // the lane's first row
      unsigned int b = bits[u];
      if (r + R > n) b = r >= n ? 0u : b & ((1u << (unsigned int)(n - r)) - 1u);
      unsigned int word = b << (R * (lane % LANES));
#pragma unroll
      for (int o = 1; o < LANES; o <<= 1) word |= __shfl_xor_sync(full, word, o);
      // lanes k*LANES .. k*LANES+LANES-1 now hold word k of this step, word
      // (s0 + u) * R + k of the chunk; lane L keeps word L
      const unsigned int w = __shfl_sync(full, word, (lane % R) * LANES);
      if (lane / R == (unsigned int)(s0 + u)) mine = w;
    }
  }
  if (none) mine = 0u;
  const long long at = warp * 32 + lane;
  if (at < words) out[q * words + at] = mine;
}

#if FS_WIDE
typedef unsigned long long fs_key;
#else
typedef unsigned int fs_key;
#endif

extern "C" __global__ void fused_scan(const fs_key* __restrict__ cols, long long ld, int d,
                                      long long n, const fs_key* __restrict__ lo,
                                      const fs_key* __restrict__ hi, long long queries,
                                      long long words, unsigned int* __restrict__ out) {
  fs_scan<fs_key, FS_D, FS_U>(cols, ld, d, n, lo, hi, queries, words, out);
}
