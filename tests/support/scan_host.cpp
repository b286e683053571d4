// The body of plugins/fused_scan/vector_scan.cu run on the CPU under the emulation of
// cuda_host.h: tests/plugins/fused_scan/test_vector_body.py compiles this file with the host
// C++ compiler and calls emu_scan through ctypes.

#include "cuda_host.h"

#define FS_HOST 1
template <typename T>
inline T fs_load(const T* p) { return iz_load(p); }

#include "../../plugins/fused_scan/vector_scan.cu"

template <typename K, int D, int U>
static int scan_t(unsigned int grid, unsigned int grid_y, unsigned int block, const void* cols,
                  long long ld, int d, long long n, const void* lo, const void* hi,
                  long long queries, long long words, unsigned int* out,
                  const unsigned char* base, size_t size, unsigned char* counts,
                  long long* faults) {
  const K* c = static_cast<const K*>(cols);
  const K* l = static_cast<const K*>(lo);
  const K* h = static_cast<const K*>(hi);
  return launch2(grid, grid_y, block, base, size, counts, faults,
                 [=] { fs_scan<K, D, U>(c, ld, d, n, l, h, queries, words, out); });
}

typedef int (*scan_fn)(unsigned int, unsigned int, unsigned int, const void*, long long, int,
                       long long, const void*, const void*, long long, long long,
                       unsigned int*, const unsigned char*, size_t, unsigned char*, long long*);

#define FS_UNROLLS(K, D) \
  switch (unroll) { \
    case 1: return scan_t<K, D, 1>; \
    case 2: return scan_t<K, D, 2>; \
    case 4: return scan_t<K, D, 4>; \
    default: return nullptr; \
  }

template <typename K>
static scan_fn pick_scan(int written_out, int unroll) {
  switch (written_out) {
    case 0: FS_UNROLLS(K, 0)
    case 1: FS_UNROLLS(K, 1)
    case 2: FS_UNROLLS(K, 2)
    case 3: FS_UNROLLS(K, 3)
    default: return nullptr;
  }
}

extern "C" {

// fs_scan over the (ld, d) Fortran-order table at cols (wide: uint64 keys, else uint32), the
// body written out for `written_out` columns (0: the loop), `unroll` vectors in flight; grid x
// grid_y blocks of `block` threads. counts, faults and the return value as in cuda_host.h
// (-2: no such instance).
int emu_scan(int wide, int written_out, int unroll, unsigned int grid, unsigned int grid_y,
             unsigned int block, const void* cols, long long ld, int d, long long n,
             const void* lo, const void* hi, long long queries, long long words,
             unsigned int* out, const unsigned char* base, size_t size, unsigned char* counts,
             long long* faults) {
  scan_fn f = wide ? pick_scan<unsigned long long>(written_out, unroll)
                   : pick_scan<unsigned int>(written_out, unroll);
  return f ? f(grid, grid_y, block, cols, ld, d, n, lo, hi, queries, words, out, base, size,
               counts, faults)
           : -2;
}
}
