// RTScan's refine programs for the OptiX engine (indexzoo.native.rt.optix), the twins of
// refine.py's refine_match, cube_intersection and plan_raygen over the query layer's BITMAP
// operation. They read RefineRecord by name: lc and the bounds plo/phi (element strides
// lc_row/lc_col, q_row/q_col), the group's columns col0..col2 and n_cols, the ray plan
// (12 int64 columns a slot, RTS_* below), the slots' running ray ends and their number, the
// launch's first ray, and the group's geometry (interval, period, spacing, pad).

// The slot of ray t: the first whose running end exceeds t.
static __forceinline__ __device__ long long rts_slot(long long t) {
  long long lo = 0, hi = params.n_slots;
  while (lo < hi) {
    const long long mid = (lo + hi) >> 1;
    if (params.ends[mid] <= t) lo = mid + 1; else hi = mid;
  }
  return lo;
}

static __forceinline__ __device__ long long rts_plan(long long b, int col) {
  return params.plan[b * RTS_PLAN_COLUMNS + col];
}

// Alg. 1's check on the hit row's exact codes: the row, if it satisfies the group's
// predicates of the ray's query (its bit is set), else -2 - row (its bit is cleared).
static __forceinline__ __device__ long long iz_match(unsigned int ray, unsigned int inst,
                                                     unsigned int prim) {
  const long long q = rts_plan(rts_slot(params.ray_base + (long long)ray), RTS_QUERY);
  const long long r = (long long)prim;
  for (long long k = 0; k < params.n_cols; ++k) {
    const long long j = k == 0 ? params.col0 : (k == 1 ? params.col1 : params.col2);
    const auto v = params.lc[r * params.lc_row + j * params.lc_col];
    const long long at = q * params.q_row + j * params.q_col;
    if (v < params.plo[at] || v > params.phi[at]) return -2 - r;
  }
  return r;
}

// A cube is hit when its box overlaps the ray on (tmin, tmax) (a cube holding the whole
// segment counts too): the software engine's slab test over the boxes the GAS keeps. The hit
// is reported inside the segment, where OptiX takes it; the refine never asks where.
#define IZ_HAS_INTERSECTION 1
extern "C" __global__ void __intersection__iz() {
  const unsigned long long j = 6ull * optixGetPrimitiveIndex();
  const float3 o = optixGetObjectRayOrigin();
  const float3 d = optixGetObjectRayDirection();
  const float tmin = optixGetRayTmin(), tmax = optixGetRayTmax();
  const float ov[3] = {o.x, o.y, o.z}, dv[3] = {d.x, d.y, d.z};
  const float inf = __int_as_float(0x7f800000);
  float tn = -inf, tf = inf;
  for (int k = 0; k < 3; ++k) {
    const float lo = params.iz_prims[j + k], hi = params.iz_prims[j + 3 + k];
    if (dv[k] == 0.0f) {
      if (!(lo <= ov[k] && ov[k] <= hi)) return;
      continue;
    }
    const float inv = 1.0f / dv[k];
    float a = (lo - ov[k]) * inv, b = (hi - ov[k]) * inv;
    if (a > b) { const float c = a; a = b; b = c; }
    tn = fmaxf(tn, a);
    tf = fminf(tf, b);
  }
  if (!(tn <= tf && tn < tmax && tf > tmin)) return;
  float t = 0.5f * (fmaxf(tn, tmin) + fminf(tf, tmax));
  if (!(t > tmin)) t = nextafterf(tmin, inf);
  if (t < tmax) optixReportIntersection(t, 0);
}

// Ray ray_base + i of the launch: ray k of its slot's box (layout.box_ray).
#define IZ_HAS_RAYGEN 1
static __forceinline__ __device__ void iz_raygen(unsigned int i, float3& o, float3& d,
                                                 float& tmin, float& tmax) {
  const long long t = params.ray_base + (long long)i;
  const long long b = rts_slot(t);
  const long long k = t - (params.ends[b] - rts_plan(b, RTS_RAYS));
  const long long ax = rts_plan(b, RTS_AXIS), nb = rts_plan(b, RTS_NB), nz = rts_plan(b, RTS_NZ);
  const long long iz = k % nz, rest = k / nz;
  const long long ib = rest % nb, ia = rest / nb;
  const long long step = params.interval;
  const long long off = (step - 1) / 2;  // step >= 1: C's division is the floor here
  const int a = (int)((ax + 1) % 3), c = (int)((ax + 2) % 3);
  const float ra = __ll2float_rn(rts_plan(b, RTS_LO + a) + ia * step + off);
  const float rc = __ll2float_rn(rts_plan(b, RTS_LO + c) + ib * step + off);
  const long long d0 = rts_plan(b, RTS_LO + (int)ax), d1 = rts_plan(b, RTS_HI + (int)ax);
  long long s0 = d0, s1 = d1;
  double sp = 0.0;
  if (params.period > 0) {
    s0 = d0 + iz * params.period;
    s1 = min(s0 + params.period - 1, d1);
    sp = 0.5 * (double)min(params.spacing, s1 - s0);
  }
  tmin = __double2float_rn((double)s0 - 0.5 + sp - params.pad);
  tmax = __double2float_rn((double)s1 + 0.5 - sp + params.pad);
  if (ax == 0) { o = make_float3(0.0f, ra, rc); d = make_float3(1.0f, 0.0f, 0.0f); }
  else if (ax == 1) { o = make_float3(rc, 0.0f, ra); d = make_float3(0.0f, 1.0f, 0.0f); }
  else { o = make_float3(ra, rc, 0.0f); d = make_float3(0.0f, 0.0f, 1.0f); }
}
