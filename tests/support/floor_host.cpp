// The bodies of core/tools/floor_kernel.cu run on the CPU under the emulation of cuda_host.h:
// tests/tools/test_floor_kernel.py compiles this file with the host C++ compiler and calls
// emu_read / emu_bitmap through ctypes.

#define IZ_FLOOR_HOST 1
#include "cuda_host.h"

#include "../../core/tools/floor_kernel.cu"

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
