// rx's programs for the OptiX engine (indexzoo.native.rt.optix), the twins of programs.py's
// rx_match, and rx's AABB intersection program (the ray-generation program, twin of
// keyprims.perpendicular_raygen, is native/rt/keyprims.cu, appended by programs.py). They
// read rx's launch record (RxRecord) by name: keys, x_kind, x_bits, y_bits, ray_lo, ray_hi,
// confirm; ray_data holds the lookup keys of generated perpendicular rays.

// A hit is rowID `prim` (primitives are in rowID order); sphere hits are confirmed against
// the ray's integer key bounds, as on the software engine (programs.py says why).
static __forceinline__ __device__ long long iz_match(unsigned int ray, unsigned int inst,
                                                     unsigned int prim) {
  if (params.confirm) {
    const unsigned long long key = (unsigned long long)params.keys[prim];
    if (key < params.ray_lo[ray] || key > params.ray_hi[ray]) return IZ_NO_MATCH;
  }
  return (long long)prim;
}

// AABB scenes: the box of a key is hit exactly when the key lies in the ray's integer bounds
// (ray_lo, ray_hi: the lookup's key or range) and, for a ray along x, in the ray's own row:
// OptiX may call an intersection program for any box near the ray (its BVH bounds are
// conservative), so a box of another row inside the range must not count here (its own
// row's ray counts it). The row of a ray along x is its origin's (y, z), exact integers. The
// hit is reported mid-segment: rx's operations never ask where along the ray a hit lies.
#define IZ_HAS_INTERSECTION 1
extern "C" __global__ void __intersection__iz() {
  const unsigned int ray = optixGetLaunchIndex().x;
  const unsigned long long key = (unsigned long long)params.keys[optixGetPrimitiveIndex()];
  if (key < params.ray_lo[ray] || key > params.ray_hi[ray]) return;
  if (optixGetObjectRayDirection().z == 0.0f) {
    const float3 o = optixGetObjectRayOrigin();
    const unsigned long long row = (unsigned long long)o.y
        | ((unsigned long long)o.z << (unsigned long long)params.y_bits);
    if ((key >> (unsigned long long)params.x_bits) != row) return;
  }
  optixReportIntersection(0.5f * (optixGetRayTmin() + optixGetRayTmax()), 0);
}
