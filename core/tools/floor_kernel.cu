// The scan floor: the least a scan of key columns must do, as plain CUDA C++ with 16-byte loads
// (indexzoo.tools.floor_kernel compiles it with CuPy's RawKernel).
//
// * floor_read: every 32-bit word of up to four columns read once and summed mod 2^32 (so no
//   load can be dropped); one sum per block. A column's words before its first 16-byte
//   boundary and after its last whole 16 bytes are read one word a thread.
// * floor_bitmap: bit r of the bitmap is set iff c_j[r] < t_j for every column j: the columns
//   read once (16-byte loads where a column starts on a 16-byte boundary, a key a load
//   otherwise and in the last partial group of rows), one 32-bit word written per 32 rows,
//   padding bits zero: what a scan that writes a bitmap must do at least.
//
// The bodies are templates; the kernels CuPy launches are the extern "C" instances below,
// chosen with -DIZ_D=<columns> -DIZ_UNROLL=<loads in flight> (and -DIZ_WIDE=1 for uint64 keys
// in floor_bitmap). The tests run the bodies on the CPU with IZ_FLOOR_HOST defined: they bring
// their own iz_load (which checks alignment and counts the bytes read), shuffles and barriers.

#ifndef IZ_D
#define IZ_D 1
#endif
#ifndef IZ_UNROLL
#define IZ_UNROLL 4
#endif
#ifndef IZ_WIDE
#define IZ_WIDE 0
#endif

#ifndef IZ_FLOOR_HOST
template <typename T>
__device__ __forceinline__ T iz_load(const T* p) { return *p; }
#endif

__device__ __forceinline__ bool iz_aligned16(const void* p) {
  return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0ull;
}

__device__ __forceinline__ unsigned int iz_words(const uint4& v) {
  return v.x + v.y + v.z + v.w;
}

// The sum of one column's `words` 32-bit words over the grid-stride share of thread `tid`
// (of `threads`): the head words up to the first 16-byte boundary and the tail words after the
// last whole 16 bytes one a thread, the rest UNROLL 16-byte loads in flight at a time.
template <int UNROLL>
__device__ __forceinline__ unsigned int iz_column_sum(const unsigned int* __restrict__ c,
                                                      long long words, long long tid,
                                                      long long threads) {
  long long head = (long long)(((16u - (unsigned int)(reinterpret_cast<unsigned long long>(c) & 15ull))
                                & 15u) >> 2);
  if (head > words) head = words;
  const long long vecs = (words - head) >> 2;
  const long long tail = words - head - (vecs << 2);
  const uint4* __restrict__ v = reinterpret_cast<const uint4*>(c + head);
  unsigned int acc = 0u;
  long long i = tid;
  for (; i + (long long)(UNROLL - 1) * threads < vecs; i += (long long)UNROLL * threads) {
    uint4 r[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) r[u] = iz_load(v + i + (long long)u * threads);
#pragma unroll
    for (int u = 0; u < UNROLL; u++) acc += iz_words(r[u]);
  }
  for (; i < vecs; i += threads) acc += iz_words(iz_load(v + i));
  if (tid < head) acc += iz_load(c + tid);
  if (tid < tail) acc += iz_load(c + head + (vecs << 2) + tid);
  return acc;
}

// The sum of `a` over the block, in thread 0 (blockDim.x a multiple of 32, at most 1024).
__device__ __forceinline__ unsigned int iz_block_sum(unsigned int a) {
  __shared__ unsigned int part[32];
  const unsigned int lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
  if (lane == 0u) part[warp] = a;
  __syncthreads();
  a = 0u;
  if (warp == 0u) {
    a = lane < (blockDim.x >> 5) ? part[lane] : 0u;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) a += __shfl_xor_sync(0xffffffffu, a, o);
  }
  return a;
}

template <int D, int UNROLL>
__device__ __forceinline__ void iz_floor_read(const unsigned int* const* cols,
                                              const long long* words, unsigned int* out) {
  const long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const long long threads = (long long)gridDim.x * blockDim.x;
  unsigned int acc = 0u;
#pragma unroll
  for (int j = 0; j < D; j++) acc += iz_column_sum<UNROLL>(cols[j], words[j], tid, threads);
  acc = iz_block_sum(acc);
  if (threadIdx.x == 0) out[blockIdx.x] = acc;
}

// A key type's 16-byte vector and how many keys it holds.
template <typename K> struct iz_vec;
template <> struct iz_vec<unsigned int> {
  typedef uint4 type;
  static const int rows = 4;
};
template <> struct iz_vec<unsigned long long> {
  typedef ulonglong2 type;
  static const int rows = 2;
};

// Bit k set iff key k of the vector is below t.
__device__ __forceinline__ unsigned int iz_below(const uint4& v, unsigned int t) {
  return (unsigned int)(v.x < t) | ((unsigned int)(v.y < t) << 1)
       | ((unsigned int)(v.z < t) << 2) | ((unsigned int)(v.w < t) << 3);
}
__device__ __forceinline__ unsigned int iz_below(const ulonglong2& v, unsigned long long t) {
  return (unsigned int)(v.x < t) | ((unsigned int)(v.y < t) << 1);
}

// Bits of the rows g*R .. g*R+R-1 of one column that are below t (rows from n on: 0 bits).
template <typename K>
__device__ __forceinline__ unsigned int iz_group_bits(const K* __restrict__ c, K t, long long g,
                                                      long long n, bool aligned) {
  typedef typename iz_vec<K>::type V;
  const int R = iz_vec<K>::rows;
  const long long r = g * R;
  if (aligned && r + R <= n) return iz_below(iz_load(reinterpret_cast<const V*>(c + r)), t);
  unsigned int b = 0u;
#pragma unroll
  for (int k = 0; k < R; k++)
    if (r + k < n && iz_load(c + r + k) < t) b |= 1u << k;
  return b;
}

// Each lane takes one group of R rows (one 16-byte load per column); 32/R lanes OR their bits
// into one word. A warp takes UNROLL steps of 32 groups at a time, grid-stride; where every
// column is aligned and every group of those steps is whole, all D*UNROLL loads come first.
template <typename K, int D, int UNROLL>
__device__ __forceinline__ void iz_floor_bitmap(const K* const* cols, const K* bounds, long long n,
                                                unsigned int* out) {
  typedef typename iz_vec<K>::type V;
  const int R = iz_vec<K>::rows;
  const int LANES = 32 / R;  // lanes per bitmap word
  const unsigned int lane = threadIdx.x & 31u;
  const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
  const long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
  const long long groups = (n + R - 1) / R;
  const long long step = warps * 32;
  bool aligned[D];
  bool all_aligned = true;
#pragma unroll
  for (int j = 0; j < D; j++) {
    aligned[j] = iz_aligned16(cols[j]);
    all_aligned = all_aligned && aligned[j];
  }
  for (long long base = warp * 32; base < groups; base += step * UNROLL) {
    unsigned int bits[UNROLL];
    if (all_aligned && (base + (long long)(UNROLL - 1) * step + 32) * R <= n) {
      V v[UNROLL][D];
#pragma unroll
      for (int u = 0; u < UNROLL; u++)
#pragma unroll
        for (int j = 0; j < D; j++)
          v[u][j] = iz_load(reinterpret_cast<const V*>(cols[j]) + base + u * step + lane);
#pragma unroll
      for (int u = 0; u < UNROLL; u++) {
        unsigned int b = iz_below(v[u][0], bounds[0]);
#pragma unroll
        for (int j = 1; j < D; j++) b &= iz_below(v[u][j], bounds[j]);
        bits[u] = b;
      }
    } else {
#pragma unroll
      for (int u = 0; u < UNROLL; u++) {
        const long long g = base + u * step + lane;
        unsigned int b = iz_group_bits<K>(cols[0], bounds[0], g, n, aligned[0]);
#pragma unroll
        for (int j = 1; j < D; j++) b &= iz_group_bits<K>(cols[j], bounds[j], g, n, aligned[j]);
        bits[u] = b;
      }
    }
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
      const long long g = base + u * step + lane;
      unsigned int word = bits[u] << (R * (int)(lane % LANES));
#pragma unroll
      for (int o = 1; o < LANES; o <<= 1) word |= __shfl_xor_sync(0xffffffffu, word, o);
      if (lane % LANES == 0u && g * R < n) out[g / LANES] = word;
    }
  }
}

#if IZ_WIDE
typedef unsigned long long iz_key;
#else
typedef unsigned int iz_key;
#endif

extern "C" __global__ void floor_read(const unsigned int* __restrict__ c0,
                                      const unsigned int* __restrict__ c1,
                                      const unsigned int* __restrict__ c2,
                                      const unsigned int* __restrict__ c3,
                                      long long w0, long long w1, long long w2, long long w3,
                                      unsigned int* __restrict__ out) {
  const unsigned int* cols[4] = {c0, c1, c2, c3};
  const long long words[4] = {w0, w1, w2, w3};
  iz_floor_read<IZ_D, IZ_UNROLL>(cols, words, out);
}

extern "C" __global__ void floor_bitmap(const iz_key* __restrict__ c0,
                                        const iz_key* __restrict__ c1,
                                        const iz_key* __restrict__ c2,
                                        const iz_key* __restrict__ c3,
                                        iz_key t0, iz_key t1, iz_key t2, iz_key t3, long long n,
                                        unsigned int* __restrict__ out) {
  const iz_key* cols[4] = {c0, c1, c2, c3};
  const iz_key bounds[4] = {t0, t1, t2, t3};
  iz_floor_bitmap<iz_key, IZ_D, IZ_UNROLL>(cols, bounds, n, out);
}
