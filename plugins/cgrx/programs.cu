// cgRX's program for the OptiX engine (indexzoo.native.rt.optix), the twin of programs.py's
// cg_match: a hit names its triangle's cgRX id, read from cgRX's launch record (CgRecord).
static __forceinline__ __device__ long long iz_match(unsigned int ray, unsigned int inst,
                                                     unsigned int prim) {
  return (long long)params.ids[prim];
}
