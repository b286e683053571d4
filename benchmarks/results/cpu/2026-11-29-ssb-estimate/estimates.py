"""The duration estimate of ``bench --preset ssb`` alone, every engine, at SF 0.1 and SF 1."""

import time

from indexzoo import query_engines
from indexzoo.query import ssb
from indexzoo.tools.ssb_bench import estimate_ssb

engines = list(query_engines())
engines = ["crystal", *(e for e in engines if e != "crystal")]
for sf in (0.1, 1.0):
    t = time.perf_counter()
    est = estimate_ssb([sf], engines, "cpu", 5, list(ssb.QUERIES))
    assert est is not None
    print(f"SF {sf}: {est.describe()}  (estimating took {time.perf_counter() - t:.1f} s)",
          flush=True)
