"""The workloads of RTScan's evaluation (the RTScan paper's §5), as NumPy arrays.

* Columns (``columns``): ``uniform`` over [0, 2^32), ``zipf1.1``/``zipf1.3``/``zipf1.5``
  (``zipf(a, n) % (2^32 - 1)``, the artifact's generator), ``normal`` (mean 2^31, sd 1) and
  ``small_domain`` (uniform over [0, 2^6), run with 16 vectors), all uint32.
* Queries (``lt_query``): ``x_j < c_j`` on every column, ``c_j`` the value at rank
  ``s * N`` of column j: per-predicate selectivity ``s`` in 0.0 .. 1.0 (the artifact's 11
  queries); on skewed columns the achieved selectivity is lower where a value's run straddles
  the rank (reported by ``achieved``).
* TPC-H Q6 (``tpch_q6``): the three lineitem predicates ``l_shipdate >= 1994-01-01 and <
  1995-01-01``, ``l_discount between 0.05 and 0.07``, ``l_quantity < 24``, on a lineitem file
  of ``tpchgen-cli`` (scale factor 10 in the benchmark: ``tpchgen-cli -s 10 -T lineitem
  --format parquet``), as integers: dates in days since 1970-01-01, discounts in hundredths,
  quantities as they are. Parquet needs pyarrow or polars; ``.tbl`` (pipe-separated, the
  generator's default) and ``.csv`` (with a header) use pyarrow when installed; otherwise
  ``.tbl`` is parsed with vectorized NumPy (about 0.5 s per million lines) and ``.csv`` with
  Python's csv module (slow: for small files).
"""

from __future__ import annotations

import csv
import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import numpy as np

__all__ = ["KINDS", "SELECTIVITIES", "achieved", "columns", "lt_query", "tpch_q6",
           "write_lineitem_sample"]

KINDS = ("uniform", "zipf1.1", "zipf1.3", "zipf1.5", "normal", "small_domain")
SELECTIVITIES = tuple(i / 10 for i in range(11))
TOP32 = 2**32 - 1
EPOCH = dt.date(1970, 1, 1)


def columns(kind: str, n: int, d: int = 3, seed: int = 0) -> list[np.ndarray]:
    """``d`` uint32 columns of ``n`` rows of one kind (see the module docstring)."""
    rng = np.random.default_rng(seed)
    if kind == "uniform":
        return [rng.integers(0, TOP32, n, dtype=np.uint64, endpoint=True).astype(np.uint32)
                for _ in range(d)]
    if kind.startswith("zipf"):
        a = float(kind[4:])
        return [(rng.zipf(a, n) % TOP32).astype(np.uint32) for _ in range(d)]
    if kind == "normal":
        return [np.clip(rng.normal(2**31, 1, n), 0, TOP32).astype(np.uint32) for _ in range(d)]
    if kind == "small_domain":
        return [rng.integers(0, 64, n).astype(np.uint32) for _ in range(d)]
    raise ValueError(f"unknown column kind {kind!r}; use one of {', '.join(KINDS)}")


def lt_query(cols: list[np.ndarray], sel: float,
             sorted_cols: list[np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Bounds (1, d) of ``x_j < c_j`` for all j, ``c_j`` at rank ``sel * N``: ``sel = 0``
    matches nothing, ``sel = 1`` everything."""
    srt = sorted_cols if sorted_cols is not None else [np.sort(c) for c in cols]
    n = cols[0].shape[0]
    lo, hi = [], []
    for s in srt:
        if sel >= 1:
            lo.append(0)
            hi.append(TOP32)
            continue
        c = int(s[min(int(sel * n), n - 1)])
        lo.append(1 if c == 0 else 0)
        hi.append(0 if c == 0 else c - 1)
    return np.array([lo], dtype=np.uint32), np.array([hi], dtype=np.uint32)


def achieved(cols: list[np.ndarray], lo: np.ndarray, hi: np.ndarray) -> list[float]:
    """Each predicate's selectivity on its own column."""
    return [float(((c >= lo[0, j]) & (c <= hi[0, j])).mean()) for j, c in enumerate(cols)]


# ---------------------------------------------------------------------- TPC-H Q6
def _days(d: dt.date) -> int:
    return (d - EPOCH).days


Q6_SHIPDATE = (_days(dt.date(1994, 1, 1)), _days(dt.date(1995, 1, 1)) - 1)
Q6_DISCOUNT = (5, 7)       # hundredths: 0.05 .. 0.07
Q6_QUANTITY = (0, 23)      # < 24

_TBL_FIELDS = {"l_quantity": 4, "l_discount": 6, "l_shipdate": 10}


def _from_text(values: dict[str, list[str]]) -> list[np.ndarray]:
    ship = np.array([_days(dt.date.fromisoformat(v)) for v in values["l_shipdate"]],
                    dtype=np.uint32)
    disc = np.rint(np.array(values["l_discount"], dtype=np.float64) * 100).astype(np.uint32)
    qty = np.rint(np.array(values["l_quantity"], dtype=np.float64)).astype(np.uint32)
    return [ship, disc, qty]


def _rows(path: Path, tbl: bool) -> Iterator[list[str]]:
    with path.open(newline="") as f:
        yield from csv.reader(f, delimiter="|" if tbl else ",")


def _read_text(path: Path, tbl: bool) -> list[np.ndarray]:
    try:
        import pyarrow.csv as pacsv

        names = None
        if tbl:
            names = [f"c{i}" for i in range(17)]
        table = pacsv.read_csv(path, read_options=pacsv.ReadOptions(column_names=names),
                               parse_options=pacsv.ParseOptions(delimiter="|" if tbl else ","),
                               convert_options=pacsv.ConvertOptions(strings_can_be_null=False))
        get = (lambda k: table.column(f"c{_TBL_FIELDS[k]}")) if tbl else table.column
        return _from_arrow(get("l_shipdate"), get("l_discount"), get("l_quantity"))
    except ImportError:
        pass
    if tbl:
        return _read_tbl_numpy(path)
    rows = _rows(path, tbl)
    if tbl:
        idx = _TBL_FIELDS
    else:
        header = next(rows)
        idx = {k: header.index(k) for k in _TBL_FIELDS}
    values: dict[str, list[str]] = {k: [] for k in idx}
    for row in rows:
        if not row:
            continue
        for k, i in idx.items():
            values[k].append(row[i])
    return _from_text(values)


def _field_bytes(buf: np.ndarray, start: np.ndarray, width: int) -> np.ndarray:
    """(lines, width) bytes from each start (past the buffer's end: '|')."""
    idx = start[:, None] + np.arange(width)
    out = np.full(idx.shape, ord("|"), dtype=np.uint8)
    ok = idx < buf.shape[0]
    out[ok] = buf[idx[ok]]
    return out


def _decimal(chars: np.ndarray, scale: int) -> np.ndarray:
    """A non-negative decimal field ('17', '0.04', '24.5') times 10**scale, rounded down to
    ``scale`` places; the field ends at the first byte that is neither a digit nor '.'."""
    digit = (chars >= ord("0")) & (chars <= ord("9"))
    dot = chars == ord(".")
    end = np.argmin(digit | dot, axis=1)                    # first terminator
    inside = np.arange(chars.shape[1]) < end[:, None]
    has_dot = (dot & inside).any(axis=1)
    dot_at = np.where(has_dot, np.argmax(dot & inside, axis=1), end)
    pos = np.arange(chars.shape[1])[None, :]
    val = np.zeros(chars.shape[0], dtype=np.int64)
    for j in range(chars.shape[1]):           # integer part, then `scale` fraction digits
        use = digit[:, j] & inside[:, j] & ((pos[0, j] < dot_at) | (pos[0, j] <= dot_at + scale))
        d = chars[:, j].astype(np.int64) - ord("0")
        val = np.where(use, val * 10 + d, val)
    frac = np.clip(end - dot_at - 1, 0, scale)
    return val * 10 ** (scale - np.where(has_dot, frac, 0))


def _parse_tbl_lines(buf: np.ndarray, path: Path) -> tuple[np.ndarray, ...]:
    """Q6's columns (shipdate days, discount hundredths, quantity) of whole ``.tbl`` lines."""
    need = max(_TBL_FIELDS.values())
    nl = np.flatnonzero(buf == ord("\n"))
    starts = np.concatenate([[0], nl + 1])
    starts = starts[starts < buf.shape[0]]
    pipes = np.flatnonzero(buf == ord("|"))
    first = np.searchsorted(pipes, starts)  # each line's first '|'
    if (first + need >= pipes.shape[0]).any():
        raise ValueError(f"{path}: a line with fewer than {need + 1} fields")

    def field(k: int, width: int) -> np.ndarray:
        beg = starts if k == 0 else pipes[first + k - 1] + 1
        return _field_bytes(buf, beg, width)

    d = field(_TBL_FIELDS["l_shipdate"], 10).astype(np.int64) - ord("0")
    year = d[:, 0] * 1000 + d[:, 1] * 100 + d[:, 2] * 10 + d[:, 3]
    month = d[:, 5] * 10 + d[:, 6]
    day = d[:, 8] * 10 + d[:, 9]
    months = ((year - 1970) * 12 + month - 1).astype("datetime64[M]")
    days = months.astype("datetime64[D]") + (day - 1).astype("timedelta64[D]")
    return (days.astype(np.int64).astype(np.uint32),
            _decimal(field(_TBL_FIELDS["l_discount"], 8), 2).astype(np.uint32),
            _decimal(field(_TBL_FIELDS["l_quantity"], 10), 0).astype(np.uint32))


def _read_tbl_numpy(path: Path, chunk: int = 1 << 28) -> list[np.ndarray]:
    """Q6's columns of a ``.tbl`` lineitem file, parsed with vectorized NumPy in chunks of
    whole lines (the csv module takes minutes on SF 10's 60 million lines)."""
    parts: list[tuple[np.ndarray, ...]] = []
    with path.open("rb") as f:
        rest = b""
        while True:
            data = f.read(chunk)
            blob = rest + data
            if not blob:
                break
            cut = blob.rfind(b"\n") + 1 if data else len(blob)
            rest = blob[cut:]
            if cut:
                parts.append(_parse_tbl_lines(np.frombuffer(blob[:cut], dtype=np.uint8), path))
            if not data:
                break
    if not parts:
        raise ValueError(f"{path}: no lines")
    return [np.concatenate([p[j] for p in parts]) for j in range(3)]


def _from_arrow(ship: object, disc: object, qty: object) -> list[np.ndarray]:
    import pyarrow as pa
    import pyarrow.compute as pc

    def num(col: object) -> np.ndarray:
        return np.asarray(pc.cast(col, pa.float64()).to_numpy(zero_copy_only=False))

    def days(col: object) -> np.ndarray:
        d = col if pa.types.is_date32(col.type) else pc.cast(col, pa.date32())
        return np.asarray(pc.cast(d, pa.int32()).to_numpy(zero_copy_only=False))

    return [days(ship).astype(np.uint32), np.rint(num(disc) * 100).astype(np.uint32),
            np.rint(num(qty)).astype(np.uint32)]


def tpch_q6(path: str | Path) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """The Q6 columns (shipdate days, discount hundredths, quantity; uint32) of a lineitem
    file and the query's (1, 3) inclusive bounds."""
    p = Path(path)
    if p.is_dir():
        found = sorted(p.glob("lineitem*"))
        if not found:
            raise FileNotFoundError(f"no lineitem file in {p}")
        p = found[0]
    suffix = p.suffix.lower()
    if suffix == ".parquet" or p.is_dir():
        try:
            import pyarrow.parquet as pq

            t = pq.read_table(p, columns=["l_shipdate", "l_discount", "l_quantity"])
            cols = _from_arrow(t.column("l_shipdate"), t.column("l_discount"),
                               t.column("l_quantity"))
        except ImportError:
            import polars as pl

            df = pl.read_parquet(p, columns=["l_shipdate", "l_discount", "l_quantity"])
            cols = [df["l_shipdate"].cast(pl.Date).cast(pl.Int32).to_numpy().astype(np.uint32),
                    np.rint(df["l_discount"].cast(pl.Float64).to_numpy() * 100).astype(
                        np.uint32),
                    np.rint(df["l_quantity"].cast(pl.Float64).to_numpy()).astype(np.uint32)]
    elif suffix in (".tbl", ".csv"):
        cols = _read_text(p, tbl=suffix == ".tbl")
    else:
        raise ValueError(f"{p}: expected a .parquet, .tbl or .csv lineitem file")
    lo = np.array([[Q6_SHIPDATE[0], Q6_DISCOUNT[0], Q6_QUANTITY[0]]], dtype=np.uint32)
    hi = np.array([[Q6_SHIPDATE[1], Q6_DISCOUNT[1], Q6_QUANTITY[1]]], dtype=np.uint32)
    return cols, lo, hi


def write_lineitem_sample(path: str | Path, n: int, seed: int = 0) -> Path:
    """A small lineitem ``.tbl`` with TPC-H's value ranges (ship dates 1992-01-02 ..
    1998-12-01, discounts 0.00 .. 0.10, quantities 1 .. 50): for the ``--small`` run and its
    test, never for measurements."""
    rng = np.random.default_rng(seed)
    p = Path(path)
    start = _days(dt.date(1992, 1, 2))
    span = _days(dt.date(1998, 12, 1)) - start
    with p.open("w") as f:
        for i in range(n):
            day = EPOCH + dt.timedelta(days=int(start + rng.integers(0, span + 1)))
            fields = [str(i + 1), "1", "1", "1", f"{int(rng.integers(1, 51))}.00", "1000.00",
                      f"0.{int(rng.integers(0, 11)):02d}", "0.02", "N", "O", day.isoformat(),
                      day.isoformat(), day.isoformat(), "NONE", "MAIL", "x"]
            f.write("|".join(fields) + "|\n")
    return p
