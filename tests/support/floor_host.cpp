// The bodies of core/tools/floor_kernel.cu run on the CPU, one OS thread per CUDA thread, so that
// their logic (heads, tails, grid strides, shuffles) is tested where there is no GPU:
// tests/tools/test_floor_kernel.py compiles this file with the host C++ compiler and calls
// emu_read / emu_bitmap through ctypes.
//
// Every load goes through iz_load, which here checks that the address is aligned to the size
// loaded (16 bytes for the vectors) and counts every byte it reads inside the region the caller
// names (and the 16-byte loads); a load outside it is counted and not made. With no region
// named (a null base) every load is made and only misalignment is counted. Blocks run one after the other (so a
// function's static array stands for the block's shared memory); the threads of a block run
// at once, a warp's shuffles meet at a barrier of its 32 threads, __syncthreads at one of the
// block's. A barrier that waits more than 20 s is taken as broken (a shuffle some lanes of a
// warp never reach): every wait returns at once from then on and the launch reports -1.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#define IZ_FLOOR_HOST 1
#define __device__
#define __forceinline__ inline
#define __global__
#define __shared__ static

struct alignas(16) uint4 {
  unsigned int x, y, z, w;
};
struct alignas(16) ulonglong2 {
  unsigned long long x, y;
};
struct iz_dim {
  unsigned int x;
};
thread_local iz_dim threadIdx, blockIdx;
iz_dim blockDim, gridDim;

static const unsigned char* g_base = nullptr;
static size_t g_size = 0;
static std::unique_ptr<std::atomic<unsigned char>[]> g_counts;
static std::atomic<long long> g_misaligned{0}, g_outside{0}, g_vectors{0};
static std::atomic<bool> g_broken{false};

template <typename T>
inline T iz_load(const T* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  if (a % sizeof(T) != 0) g_misaligned++;
  if (sizeof(T) == 16) g_vectors++;
  const uintptr_t base = reinterpret_cast<uintptr_t>(g_base);
  T v{};
  if (g_base == nullptr) {  // no region named: every load made, none counted
    std::memcpy(&v, p, sizeof(T));
    return v;
  }
  if (a < base || a + sizeof(T) > base + g_size) {
    g_outside++;
    return v;
  }
  for (size_t i = 0; i < sizeof(T); i++) g_counts[a - base + i]++;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

class Barrier {
 public:
  explicit Barrier(int n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> lock(m_);
    if (g_broken) return;
    const long gen = gen_;
    if (++count_ == n_) {
      count_ = 0;
      gen_++;
      cv_.notify_all();
      return;
    }
    if (!cv_.wait_for(lock, std::chrono::seconds(20), [&] { return gen_ != gen || g_broken; })) {
      g_broken = true;
      cv_.notify_all();
    }
  }

 private:
  std::mutex m_;
  std::condition_variable cv_;
  const int n_;
  int count_ = 0;
  long gen_ = 0;
};

struct Warp {
  Barrier bar{32};
  unsigned long long slot[32];
};
static std::unique_ptr<Warp[]> g_warps;
static std::unique_ptr<Barrier> g_block;

template <typename T>
T __shfl_xor_sync(unsigned int, T v, int o) {
  Warp& w = g_warps[threadIdx.x >> 5];
  const unsigned int lane = threadIdx.x & 31u;
  w.slot[lane] = static_cast<unsigned long long>(v);
  w.bar.wait();
  const T r = static_cast<T>(w.slot[lane ^ static_cast<unsigned int>(o)]);
  w.bar.wait();
  return r;
}

inline void __syncthreads() { g_block->wait(); }

#include "../../core/tools/floor_kernel.cu"

template <typename F>
static int launch(unsigned int grid, unsigned int block, const unsigned char* base, size_t size,
                  unsigned char* counts, long long* faults, F body) {
  g_base = base;
  g_size = size;
  g_counts.reset(new std::atomic<unsigned char>[size]);
  for (size_t i = 0; i < size; i++) g_counts[i] = 0;
  g_misaligned = 0;
  g_outside = 0;
  g_vectors = 0;
  g_broken = false;
  gridDim.x = grid;
  blockDim.x = block;
  for (unsigned int b = 0; b < grid && !g_broken; b++) {
    g_warps.reset(new Warp[block / 32]);
    g_block.reset(new Barrier(static_cast<int>(block)));
    std::vector<std::thread> threads;
    for (unsigned int t = 0; t < block; t++)
      threads.emplace_back([=] {
        threadIdx.x = t;
        blockIdx.x = b;
        body();
      });
    for (auto& th : threads) th.join();
  }
  for (size_t i = 0; i < size && counts; i++) counts[i] = g_counts[i];
  faults[0] = g_misaligned;
  faults[1] = g_outside;
  faults[2] = g_vectors;
  return g_broken ? -1 : 0;
}

template <int D, int U>
static int read_t(unsigned int grid, unsigned int block, const unsigned int* const* cols,
                  const long long* words, unsigned int* out, const unsigned char* base,
                  size_t size, unsigned char* counts, long long* faults) {
  return launch(grid, block, base, size, counts, faults,
                [=] { iz_floor_read<D, U>(cols, words, out); });
}

template <typename K, int D, int U>
static int bitmap_t(unsigned int grid, unsigned int block, const void* const* cols,
                    const void* bounds, long long n, unsigned int* out,
                    const unsigned char* base, size_t size, unsigned char* counts,
                    long long* faults) {
  const K* c[4];
  for (int j = 0; j < 4; j++) c[j] = static_cast<const K*>(cols[j]);
  const K* t = static_cast<const K*>(bounds);
  return launch(grid, block, base, size, counts, faults,
                [=] { iz_floor_bitmap<K, D, U>(c, t, n, out); });
}

#define IZ_UNROLLS(F, ...) \
  switch (unroll) { \
    case 1: return F<__VA_ARGS__, 1>; \
    case 2: return F<__VA_ARGS__, 2>; \
    case 4: return F<__VA_ARGS__, 4>; \
    default: return nullptr; \
  }

typedef int (*read_fn)(unsigned int, unsigned int, const unsigned int* const*, const long long*,
                       unsigned int*, const unsigned char*, size_t, unsigned char*, long long*);
typedef int (*bitmap_fn)(unsigned int, unsigned int, const void* const*, const void*, long long,
                         unsigned int*, const unsigned char*, size_t, unsigned char*, long long*);

static read_fn pick_read(int d, int unroll) {
  switch (d) {
    case 1: IZ_UNROLLS(read_t, 1)
    case 2: IZ_UNROLLS(read_t, 2)
    case 3: IZ_UNROLLS(read_t, 3)
    case 4: IZ_UNROLLS(read_t, 4)
    default: return nullptr;
  }
}

template <typename K>
static bitmap_fn pick_bitmap(int d, int unroll) {
  switch (d) {
    case 1: IZ_UNROLLS(bitmap_t, K, 1)
    case 2: IZ_UNROLLS(bitmap_t, K, 2)
    case 3: IZ_UNROLLS(bitmap_t, K, 3)
    case 4: IZ_UNROLLS(bitmap_t, K, 4)
    default: return nullptr;
  }
}

extern "C" {

// floor_read over d columns (word pointers and word counts), grid x block threads; counts gets
// the times each byte of [base, base + size) was read, faults the misaligned loads, the loads
// outside that region and the 16-byte loads. -2: no such instance; -1: a barrier broke; 0: done.
int emu_read(int d, int unroll, unsigned int grid, unsigned int block,
             const unsigned int* const* cols, const long long* words, unsigned int* out,
             const unsigned char* base, size_t size, unsigned char* counts, long long* faults) {
  read_fn f = pick_read(d, unroll);
  return f ? f(grid, block, cols, words, out, base, size, counts, faults) : -2;
}

// floor_bitmap over d columns of n keys (wide: uint64, else uint32), bounds one key a column.
int emu_bitmap(int wide, int d, int unroll, unsigned int grid, unsigned int block,
               const void* const* cols, const void* bounds, long long n, unsigned int* out,
               const unsigned char* base, size_t size, unsigned char* counts, long long* faults) {
  bitmap_fn f = wide ? pick_bitmap<unsigned long long>(d, unroll)
                     : pick_bitmap<unsigned int>(d, unroll);
  return f ? f(grid, block, cols, bounds, n, out, base, size, counts, faults) : -2;
}
}
