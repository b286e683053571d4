// rx-opt's programs for the OptiX engine (indexzoo.native.rt.optix), the twins of
// programs.py's optrx_match and optrx_intersect (the ray-generation program, twin of
// keyprims.perpendicular_raygen, is native/rt/keyprims.cu, appended by programs.py). They read
// rx-opt's launch record (OptRxRecord) by name: part_offsets, keys, x_kind, x_bits,
// y_bits, ray_lo, ray_hi, confirm; ray_data holds the keys of generated perpendicular rays.

// A hit names a position in the sorted primitive keys: its partition's (instance's) first
// position plus the primitive index within it. Sphere hits are confirmed against the ray's
// integer key bounds, as on the software engine.
#ifdef IZ_INSTANCED
#define OPTRX_INST() optixGetInstanceId()
#else
#define OPTRX_INST() 0u
#endif

static __forceinline__ __device__ long long optrx_position(unsigned int inst, unsigned int prim) {
  return params.part_offsets[inst] + (long long)prim;
}

static __forceinline__ __device__ long long iz_match(unsigned int ray, unsigned int inst,
                                                     unsigned int prim) {
  const long long pos = optrx_position(inst, prim);
  if (params.confirm) {
    const unsigned long long key = (unsigned long long)params.keys[pos];
    if (key < params.ray_lo[ray] || key > params.ray_hi[ray]) return IZ_NO_MATCH;
  }
  return pos;
}

// AABB scenes: the box of a key is hit exactly when the key lies in the ray's integer bounds
// (ray_lo, ray_hi: filled for AABB scenes on OptiX) and, for a ray along x, in the ray's own
// row (OptiX may hand this program boxes near the ray). The row of a ray along x is its
// object-space origin's (y, z): exact integers, never scaled (a far slice is scaled in x
// only). A ray along x reports the hit at the key's point, t = (X - origin.x) / d.x in world
// space (a far slice's scaling changes no t): the closest-hit lookups need the nearest key
// first. A perpendicular ray reports it mid-segment (it meets its own key only).
#define IZ_HAS_INTERSECTION 1
extern "C" __global__ void __intersection__iz() {
  const unsigned int ray = optixGetLaunchIndex().x;
  const long long pos = optrx_position(OPTRX_INST(), optixGetPrimitiveIndex());
  const unsigned long long key = (unsigned long long)params.keys[pos];
  if (key < params.ray_lo[ray] || key > params.ray_hi[ray]) return;
  const unsigned long long xb = (unsigned long long)params.x_bits;
  float t = 0.5f * (optixGetRayTmin() + optixGetRayTmax());
  if (optixGetObjectRayDirection().z == 0.0f) {
    const float3 o = optixGetObjectRayOrigin();
    const unsigned long long row = (unsigned long long)o.y
        | ((unsigned long long)o.z << (unsigned long long)params.y_bits);
    if ((key >> xb) != row) return;
    const unsigned long long x = key & ((1ull << xb) - 1ull);
    const float X = params.x_kind == 1 ? __uint_as_float((unsigned int)(2ull * x + 0x3F000000ull))
                                       : __ull2float_rn(x);
    t = (X - optixGetWorldRayOrigin().x) / optixGetWorldRayDirection().x;
  }
  optixReportIntersection(t, 0);
}
