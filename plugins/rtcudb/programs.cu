// rtcudb's programs for the OptiX engine (indexzoo.native.rt.optix), the twins of
// kernels.layer_programs' numba match and ray-generation program over the query layer's COUNT
// operation. They read RtcudbRecord by name. Algorithm 1 runs inside iz_match, which then
// ignores the hit, so every triangle on a ray reaches it: the flag bit of the record (its
// first hit only), the re-check of the scan attributes Z does not hold, the record's group
// (its Y, group 0, or the spilled codes) and values (bits of its X, or the spilled words), and
// the adds into the group's COUNT, SUM, MIN and MAX words.

static __forceinline__ __device__ long long rtc_value(long long p, long long x, long long j) {
  const long long s = params.vshift[j];
  if (s >= 0) return ((x >> s) & params.vmask[j]) + params.voff[j];
  return params.spills[params.vspill[j] * params.spill_row + p];
}

static __forceinline__ __device__ long long iz_match(unsigned int ray, unsigned int inst,
                                                     unsigned int prim) {
  const long long p = (long long)prim;
  const unsigned int bit = 1u << (prim & 31u);
  if (atomicOr(params.words + (p >> 5), bit) & bit) return IZ_NO_MATCH;  // seen before
  for (long long j = 0; j < params.n_ridx; ++j) {
    const long long v = (long long)params.scan[params.ridx[j] * params.scan_row + p];
    bool ok = false;
    for (long long k = params.rstarts[j]; k < params.rstarts[j + 1]; ++k) {
      if (params.rlo[k] <= v && v <= params.rhi[k]) { ok = true; break; }
    }
    if (!ok) return IZ_NO_MATCH;
  }
  const long long x = (long long)params.tri[9 * p];
  const long long flag = params.ycol[0];
  const long long b = flag == RTC_ONE_GROUP ? 0
                      : (flag < 0 ? (long long)params.tri[9 * p + 1] : params.ycol[p]);
  const long long n = params.n_vals;
  for (long long j = 0; j < n; ++j) {
    const long long need = params.need[j];
    if (need == 0) continue;
    const long long v = rtc_value(p, x, j);
    const long long slot = b * n + j;
    if (need & 1) atomicAdd((unsigned long long*)params.sums + slot, (unsigned long long)v);
    if (need & 2) atomicMin(params.mins + slot, v);
    if (need & 4) atomicMax(params.maxs + slot, v);
  }
  atomicAdd((unsigned long long*)params.count + b, 1ull);
  return IZ_NO_MATCH;
}

// Ray ray_base + i: grid point (ix, iy) of the XY grid over Z-interval k, along +Z from one
// below the interval's first stretched code to one above its last.
#define IZ_HAS_RAYGEN 1
static __forceinline__ __device__ void iz_raygen(unsigned int i, float3& o, float3& d,
                                                 float& tmin, float& tmax) {
  const long long g = params.ray_base + (long long)i;
  const long long per = params.n_gx * params.n_gy;
  const long long k = g / per, r = g - k * per;
  const long long ix = r / params.n_gy, iy = r - ix * params.n_gy;
  const long long lo = params.zlo[k], hi = params.zhi[k], s = params.zscale;
  o = make_float3(__ll2float_rn(params.gx[ix]), __ll2float_rn(params.gy[iy]),
                  __ll2float_rn(lo * s - 1));
  d = make_float3(0.0f, 0.0f, 1.0f);
  tmin = 0.0f;
  tmax = __ll2float_rn((hi - lo) * s + 2);
}
