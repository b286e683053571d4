// The query layer's OptiX programs (indexzoo.native.rt.optix), the twins of the software
// engine's in indexzoo.native.rt.query. Before this text come: <optix.h>, the launch struct
// `Params` written from the launch record, `params` itself, the IZ_* operation numbers and
// the index's programs: iz_match(ray, inst, prim) -> rowID or IZ_NO_MATCH (or, under IZ_BITMAP,
// -2 - rowID to clear a bit), __intersection__iz for AABB scenes, and iz_raygen with
// IZ_HAS_RAYGEN where the index makes rays from per-ray data.
//
// Payloads live in global memory (params.iz_payload, one uint64 per ray, set by the host to
// MISS or 0), as in the software engine, so every hit operation is the same code on both.

// The instance of the current hit (0 when one GAS is traced directly, as on the software engine).
#ifdef IZ_INSTANCED
#define IZ_INST() optixGetInstanceId()
#else
#define IZ_INST() 0u
#endif

// Ray `i` of the launch: from the ray arrays, or made by the index's ray-generation program.
// OptiX wants tmin >= 0; the software engine allows a negative tmin (RX's from-zero rays
// start at x = 0 with tmin = -0.5 for x part 0), so such a ray starts at its tmin instead:
// the same segment, the same hits.
static __forceinline__ __device__ void iz_ray(unsigned int i, float3& o, float3& d,
                                              float& tmin, float& tmax) {
#ifdef IZ_HAS_RAYGEN
  if (params.iz_generated) {
    iz_raygen(i, o, d, tmin, tmax);
  } else
#endif
  {
    const unsigned long long j = 3ull * i;
    o = make_float3(params.iz_origins[j], params.iz_origins[j + 1], params.iz_origins[j + 2]);
    d = make_float3(params.iz_directions[j], params.iz_directions[j + 1],
                    params.iz_directions[j + 2]);
    tmin = params.iz_tmin[i];
    tmax = params.iz_tmax[i];
  }
  if (tmin < 0.0f) {
    o = make_float3(o.x + d.x * tmin, o.y + d.y * tmin, o.z + d.z * tmin);
    tmax -= tmin;
    tmin = 0.0f;
  }
}

extern "C" __global__ void __raygen__iz() {
  const unsigned int i = optixGetLaunchIndex().x;
  if ((long long)i >= params.iz_n_rays) return;
  float3 o, d;
  float tmin, tmax;
  iz_ray(i, o, d, tmin, tmax);
  if (!(tmin < tmax)) return;  // an empty segment hits nothing
  unsigned int flags = OPTIX_RAY_FLAG_NONE;
  if (params.op != IZ_CLOSEST) flags |= OPTIX_RAY_FLAG_DISABLE_CLOSESTHIT;
  if (params.op == IZ_FIRST) flags |= OPTIX_RAY_FLAG_TERMINATE_ON_FIRST_HIT;
  optixTrace(params.iz_handle, o, d, tmin, tmax, 0.0f, OptixVisibilityMask(255), flags,
             0, 1, 0);
}

// One any-hit program serves every hit operation (the software layer's _anyhit and
// _bitmap_anyhit).
extern "C" __global__ void __anyhit__iz() {
  const unsigned int ray = optixGetLaunchIndex().x;
  const long long r = iz_match(ray, IZ_INST(), optixGetPrimitiveIndex());
  const long long op = params.op;
  if (op == IZ_BITMAP) {
    if (r != IZ_NO_MATCH) {
      const long long b = r >= 0 ? r : -2 - r;
      unsigned int* word = (unsigned int*)params.out + params.ray_offsets[ray] + (b >> 5);
      const unsigned int bit = 1u << (unsigned int)(b & 31);
      if (r >= 0) atomicOr(word, bit);
      else atomicAnd(word, ~bit);
    }
    optixIgnoreIntersection();
    return;
  }
  if (r < 0) {
    optixIgnoreIntersection();
    return;
  }
  if (op == IZ_CLOSEST) return;  // accepted: the closest-hit program records the closest
  unsigned long long* slot = params.iz_payload + ray;
  if (op == IZ_FIRST) {  // accepted; the ray terminates (TERMINATE_ON_FIRST_HIT)
    *slot = (unsigned long long)r;
    return;
  }
  if (op == IZ_COUNT) {
    *slot += 1ull;
  } else if (op == IZ_SUM) {
    *slot += params.use_values ? (unsigned long long)params.values[r] : (unsigned long long)r;
  } else {  // IZ_COLLECT: the ray's offset plus its running count
    params.out[params.ray_offsets[ray] + (long long)*slot] = r;
    *slot += 1ull;
  }
  optixIgnoreIntersection();
}

extern "C" __global__ void __closesthit__iz() {
  const unsigned int ray = optixGetLaunchIndex().x;
  params.iz_payload[ray] = (unsigned long long)iz_match(ray, IZ_INST(), optixGetPrimitiveIndex());
}

extern "C" __global__ void __miss__iz() {}

// Spheres (centres in params.iz_prims, one radius): pyoptix has no binding of OptiX's
// built-in sphere input, so spheres are custom primitives with the software engine's sphere
// test (indexzoo.native.rt.geometry.hit_sphere_c): the discriminant from the closest
// approach, not b^2 - ac, so long axis-parallel rays on integer coordinates stay exact.
extern "C" __global__ void __intersection__iz_sphere() {
  const unsigned int p = optixGetPrimitiveIndex();
  const float r = params.iz_radius;
  if (!(r > 0.0f)) return;
  const float3 o = optixGetObjectRayOrigin();
  const float3 d = optixGetObjectRayDirection();
  const float tmin = optixGetRayTmin(), tmax = optixGetRayTmax();
  const unsigned long long j = 3ull * p;
  const float fx = __fsub_rn(o.x, params.iz_prims[j]);
  const float fy = __fsub_rn(o.y, params.iz_prims[j + 1]);
  const float fz = __fsub_rn(o.z, params.iz_prims[j + 2]);
  const float a = d.x * d.x + d.y * d.y + d.z * d.z;
  if (!(a > 0.0f)) return;
  const float b = fx * d.x + fy * d.y + fz * d.z;
  const float s = b / a;
  const float lx = fx - s * d.x, ly = fy - s * d.y, lz = fz - s * d.z;
  const float disc = a * (r * r - (lx * lx + ly * ly + lz * lz));
  if (!(disc >= 0.0f)) return;
  const float tc = -b / a;
  const float h = sqrtf(disc) / a;
  const float t0 = tc - h, t1 = tc + h;
  if (tmin < t0 && t0 < tmax) optixReportIntersection(t0, 0);
  else if (tmin < t1 && t1 < tmax) optixReportIntersection(t1, 1);
}

// AABBs without an index's intersection program (the boxes kept in params.iz_prims, min xyz
// then max xyz): the software engine's default (geometry.hit_box), the entry into the closed
// box, or the exit when the entry lies at or before tmin.
#ifndef IZ_HAS_INTERSECTION
extern "C" __global__ void __intersection__iz_box() {
  const unsigned long long j = 6ull * optixGetPrimitiveIndex();
  const float3 o = optixGetObjectRayOrigin();
  const float3 d = optixGetObjectRayDirection();
  const float tmin = optixGetRayTmin(), tmax = optixGetRayTmax();
  const float ov[3] = {o.x, o.y, o.z}, dv[3] = {d.x, d.y, d.z};
  const float inf = __int_as_float(0x7f800000);
  float tnear = -inf, tfar = inf;
  bool moving = false;
  for (int k = 0; k < 3; ++k) {
    const float lo = params.iz_prims[j + k], hi = params.iz_prims[j + 3 + k];
    if (dv[k] == 0.0f) {
      if (!(lo <= ov[k] && ov[k] <= hi)) return;
    } else {
      moving = true;
      float t0 = __fdiv_rn(__fsub_rn(lo, ov[k]), dv[k]);
      float t1 = __fdiv_rn(__fsub_rn(hi, ov[k]), dv[k]);
      if (t1 < t0) { const float t = t0; t0 = t1; t1 = t; }
      if (t0 > tnear) tnear = t0;
      if (t1 < tfar) tfar = t1;
    }
  }
  if (!moving || !(tnear <= tfar)) return;
  if (tmin < tnear && tnear < tmax) optixReportIntersection(tnear, 0);
  else if (tnear <= tmin && tmin < tfar && tfar < tmax) optixReportIntersection(tfar, 1);
}
#endif
