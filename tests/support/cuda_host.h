// The few CUDA features indexzoo's CUDA C++ bodies use, on the CPU: one OS thread per CUDA
// thread, so that their logic (heads, tails, grid strides, shuffles) is tested where there is no
// GPU. Included by floor_host.cpp (core/tools/floor_kernel.cu) and scan_host.cpp
// (plugins/fused_scan/vector_scan.cu), which the tests compile with the host C++ compiler and
// call through ctypes.
//
// Every load goes through iz_load, which here checks that the address is aligned to the size
// loaded (16 bytes for the vectors) and counts every byte it reads inside the region the caller
// names (and the 16-byte loads); a load outside it is counted and not made. With no region
// named (a null base) every load is made and only misalignment is counted. Blocks run one after the other (so a
// function's static array stands for the block's shared memory); the threads of a block run
// at once, a warp's shuffles meet at a barrier of its 32 threads, __syncthreads at one of the
// block's. A barrier that waits more than 20 s is taken as broken (a shuffle some lanes of a
// warp never reach): every wait returns at once from then on and the launch reports -1.

#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

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
  unsigned int x, y;
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

template <typename T>
T __shfl_sync(unsigned int, T v, int src) {
  Warp& w = g_warps[threadIdx.x >> 5];
  const unsigned int lane = threadIdx.x & 31u;
  w.slot[lane] = static_cast<unsigned long long>(v);
  w.bar.wait();
  const T r = static_cast<T>(w.slot[static_cast<unsigned int>(src) & 31u]);
  w.bar.wait();
  return r;
}

inline void __syncthreads() { g_block->wait(); }


// Runs body() as every thread of a grid x grid_y grid of blocks of `block` threads, blocks one
// after the other. counts, faults and the return value as documented at the top.
template <typename F>
static int launch2(unsigned int grid, unsigned int grid_y, unsigned int block,
                   const unsigned char* base, size_t size, unsigned char* counts,
                   long long* faults, F body) {
  g_base = base;
  g_size = size;
  g_counts.reset(new std::atomic<unsigned char>[size]);
  for (size_t i = 0; i < size; i++) g_counts[i] = 0;
  g_misaligned = 0;
  g_outside = 0;
  g_vectors = 0;
  g_broken = false;
  gridDim.x = grid;
  gridDim.y = grid_y;
  blockDim.x = block;
  for (unsigned int b = 0; b < grid * grid_y && !g_broken; b++) {
    g_warps.reset(new Warp[block / 32]);
    g_block.reset(new Barrier(static_cast<int>(block)));
    std::vector<std::thread> threads;
    for (unsigned int t = 0; t < block; t++)
      threads.emplace_back([=] {
        threadIdx.x = t;
        threadIdx.y = 0;
        blockIdx.x = b % grid;
        blockIdx.y = b / grid;
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

template <typename F>
static int launch(unsigned int grid, unsigned int block, const unsigned char* base, size_t size,
                  unsigned char* counts, long long* faults, F body) {
  return launch2(grid, 1, block, base, size, counts, faults, body);
}
