// The RX family's ray-generation program for the OptiX engine (indexzoo.native.rt.optix),
// the twin of keyprims.perpendicular_raygen: an index's programs.py appends it to its own
// programs (keyprims.PERPENDICULAR_RAYGEN_CUDA). It reads the launch record's x_kind, x_bits,
// y_bits and ray_data (the lookup keys of generated perpendicular rays) by name.

// Perpendicular point rays (Table 2), made from the lookup key: from the key's point minus
// 0.5 in z, along z, for t in (0, 1). The key's point: x part -> X (float(x), or in extended
// mode the float with bit pattern 2x + 0x3F000000), high part -> (y, z).
#define IZ_HAS_RAYGEN 1
static __forceinline__ __device__ void iz_raygen(unsigned int i, float3& o, float3& d,
                                                 float& tmin, float& tmax) {
  const unsigned long long k = (unsigned long long)params.ray_data[i];
  const unsigned long long xb = (unsigned long long)params.x_bits;
  const unsigned long long yb = (unsigned long long)params.y_bits;
  const unsigned long long x = k & ((1ull << xb) - 1ull);
  const unsigned long long h = k >> xb;
  const float y = __ull2float_rn(h & ((1ull << yb) - 1ull));
  const float z = __ull2float_rn(h >> yb);
  const float X = params.x_kind == 1 ? __uint_as_float((unsigned int)(2ull * x + 0x3F000000ull))
                                     : __ull2float_rn(x);
  o = make_float3(X, y, z - 0.5f);
  d = make_float3(0.0f, 0.0f, 1.0f);
  tmin = 0.0f;
  tmax = 1.0f;
}
