"""Where the CPU time of rtcudb.md's query API example goes: the example, statement by
statement, with the CPU seconds of this process (user + system, getrusage) taken between the
steps and printed on stderr. numba, DuckDB, PyArrow and pandas are imported at marks of their
own (the example imports them on the way: through the first kernel, the DuckDB check and
``to_pandas``)."""

import resource
import sys


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


marks = [("interpreter start", cpu())]
import indexzoo  # noqa: E402
from indexzoo import query as q  # noqa: E402
from indexzoo.query import ssb  # noqa: E402

marks.append(("import numpy, indexzoo.query (pydantic, core)", cpu()))
table = ssb.generate(0.002)
spec = q.Query(
    where=[q.col("c_region").eq("AMERICA"), q.col("s_region").eq("AMERICA"),
           q.col("p_mfgr").isin(["MFGR#1", "MFGR#2"])],
    group_by=["d_year", "c_nation"],
    select=[q.sum(q.col("lo_revenue") - q.col("lo_supplycost"), "profit"), q.count()],
    order_by=["d_year", "c_nation"], limit=5)
marks.append(("generate the table", cpu()))
engine = indexzoo.query_engine("rtcudb", device="cpu")
marks.append(("query_engine (load the 14 plugins)", cpu()))
import numba  # noqa: E402, F401

marks.append(("import numba", cpu()))
view = engine.prepare(table, [spec])
marks.append(("prepare (numba CPU init, kernel loads, BVH)", cpu()))
result = engine.run(view, spec)
marks.append(("run", cpu()))
print(result.columns["c_nation"], result.order_skipped)
import duckdb  # noqa: E402, F401
import pyarrow  # noqa: E402, F401

marks.append(("import duckdb, pyarrow", cpu()))
import pandas  # noqa: E402, F401

marks.append(("import pandas", cpu()))
assert result.rows() == ssb.duckdb_answer(table, spec).rows()
marks.append(("duckdb_answer", cpu()))
df = result.to_pandas()
marks.append(("to_pandas", cpu()))
prev = 0.0
for name, t in marks:
    print(f"{name:55s} {t - prev:6.3f}", file=sys.stderr)
    prev = t
print(f"{'total':55s} {prev:6.3f}", file=sys.stderr)
