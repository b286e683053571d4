"""``indexzoo run SPEC_FILE``: build one index from a key file or a generated workload, run
its lookups, and print a summary.

A spec file (YAML, TOML or JSON) holds an index spec and what to run::

    index: sorted-array
    params: {threads_per_block: 256}
    device: auto
    keys: data/keys.npy          # optional: .npy (any key dtype), .txt/.csv (one per line),
                                 # or .parquet / .arrow / .feather with {path, column|columns}
    workload:                    # keys (unless a key file is given) and lookups
      n_keys: 1048576
      n_lookups: 1048576
      hit_rate: 0.9
    out: rowid                   # optional, default rowid (points) or count (ranges)
    repeats: 3
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any, TextIO

import numpy as np
import pydantic
from pydantic import BaseModel, ConfigDict, Field, model_validator

from indexzoo.buildtime import NOTE_FROM_S, predicted_seconds
from indexzoo.config import IndexSpec, check_regular_file, format_validation, read_config_file
from indexzoo.contract import GpuIndex
from indexzoo.devices import array_module, to_device, to_numpy
from indexzoo.display import duration, one_line, printable, shown, shown_path
from indexzoo.errors import ConfigError, IndexZooError, MissingDependency
from indexzoo.keys import KeyMap
from indexzoo.reading import read_column
from indexzoo.registry import create
from indexzoo.resources import check_fits, estimate_workload
from indexzoo.results import LookupResult, Out

from . import interrupts
from .progress import Progress
from .timing import synchronize, time_call
from .workloads import (
    Dataset,
    KeySpace,
    Workload,
    fit_misses,
    generate_keys,
    generate_lookups,
    key_space,
)

__all__ = ["RunSpec", "load_keys", "plan_lines", "run_spec"]


#: Key files read as tables (with PyArrow), by suffix.
TABLE_SUFFIXES = {".parquet": "Parquet", ".arrow": "Arrow IPC", ".feather": "Arrow IPC",
                  ".ipc": "Arrow IPC"}


class KeyFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    path: str
    dtype: str = Field("uint64", description="dtype of text key files (.npy files carry their own)")
    column: str | None = Field(None, description="Parquet/Arrow key files: the key column "
                               "(may be left out when the file has one column)")
    columns: list[str] | None = Field(None, min_length=1, description="Parquet/Arrow key "
                                      "files: the key columns of a multi-column index")

    @model_validator(mode="after")
    def _one_way(self) -> KeyFile:
        if self.column is not None and self.columns is not None:
            raise ValueError("give `column` (one key column) or `columns` (several), not both")
        if (self.column is not None or self.columns is not None) and \
                Path(self.path).suffix.lower() not in TABLE_SUFFIXES:
            raise ValueError("`column`/`columns` name columns of a Parquet or Arrow IPC key "
                             f"file ({', '.join(TABLE_SUFFIXES)}), not of {Path(self.path).name!r}")
        return self


class RunSpec(IndexSpec):
    """An index spec plus what ``indexzoo run`` should do with it."""

    keys: KeyFile | None = None
    workload: Workload = Workload()
    out: Out | None = None
    repeats: int = Field(3, ge=1, le=1000)


def load_run_spec(path: str | Path) -> RunSpec:
    data = read_config_file(path)
    if isinstance(data, dict) and isinstance(data.get("keys"), str):
        data = {**data, "keys": {"path": data["keys"]}}
    try:
        spec = RunSpec.model_validate(data)
    except pydantic.ValidationError as exc:
        raise ConfigError(f"{shown_path(path)[1:-1]}: invalid run spec: "
                          f"{format_validation(exc, RunSpec)}") from None
    if spec.keys is not None and not Path(spec.keys.path).is_absolute():
        spec = spec.model_copy(update={"keys": spec.keys.model_copy(
            update={"path": str(Path(path).parent / spec.keys.path)})})
    return spec


def check_something_to_run(spec: RunSpec, path: str | Path) -> None:
    """ConfigError unless the spec says what to run: a key file, a workload, or both (an
    index spec alone is for ``indexzoo.create``; no default workload is made up for it)."""
    if spec.keys is None and "workload" not in spec.model_fields_set:
        raise ConfigError(f"{shown_path(path)[1:-1]}: nothing to run: give `keys` (a key file) "
                          "or `workload` (n_keys, n_lookups, ...), or both; see docs/cli.md")


_LINE_LIMIT = 4096  # longest line of a text key file looked at when explaining an error


def _text_dtype(kf: KeyFile) -> np.dtype:
    try:
        return np.dtype(kf.dtype)
    except TypeError:
        raise ConfigError(f"key file {shown_path(kf.path)}: dtype {shown(kf.dtype, 40)} is not "
                          "a NumPy dtype; e.g. uint64, int32, float64") from None


def _brief(exc: BaseException) -> str:
    text = one_line(str(exc)) or type(exc).__name__
    return text if len(text) <= 120 else text[:117] + "..."


def _pyarrow(what: str) -> Any:
    try:
        import pyarrow
        import pyarrow.feather
        import pyarrow.parquet
    except ImportError:
        raise MissingDependency("pyarrow", "test", f"reading {what} key files") from None
    return pyarrow


def _read_table(p: Path, kf: KeyFile) -> Any:
    """The key columns of a Parquet or Arrow IPC (Feather v2) file, as an Arrow table."""
    kind = TABLE_SUFFIXES[p.suffix.lower()]
    pa = _pyarrow(kind)
    name = shown_path(p)
    try:
        schema = pa.parquet.read_schema(p) if kind == "Parquet" else pa.ipc.open_file(p).schema
    except MemoryError:
        raise
    except Exception as exc:
        raise ConfigError(f"key file {name} is not a {kind} file PyArrow can read: "
                          f"{_brief(exc)}") from None
    names = list(schema.names)
    wanted = kf.columns if kf.columns is not None else [kf.column] if kf.column else None
    if wanted is None:
        if len(names) != 1:
            raise ConfigError(f"key file {name} has {len(names)} columns "
                              f"({shown(names, 200)}); name the key column with `column:` "
                              "(or several with `columns:`)")
        wanted = names
    missing = [c for c in wanted if c not in names]
    if missing:
        raise ConfigError(f"key file {name} has no column {shown(missing[0])}; its columns: "
                          f"{shown(names, 200)}")
    try:
        if kind == "Parquet":
            return pa.parquet.read_table(p, columns=wanted)
        return pa.feather.read_table(p, columns=wanted)
    except MemoryError:
        raise
    except Exception as exc:
        raise ConfigError(f"key file {name} cannot be read as {kind}: {_brief(exc)}") from None


def load_key_columns(kf: KeyFile) -> list[np.ndarray]:
    """The key columns of a key file: one for .npy, text and ``column:`` files, those named
    by ``columns:`` for a Parquet or Arrow IPC file."""
    p = Path(kf.path)
    if p.suffix.lower() not in TABLE_SUFFIXES:
        return [load_keys(kf)]
    check_regular_file(p, "key file")
    table = _read_table(p, kf)
    cols = []
    for label in table.column_names:
        try:
            col = read_column(table.column(label), f"column {label}")
        except IndexZooError as exc:
            raise ConfigError(f"key file {shown_path(p)}, column {label!r}: {exc}") from None
        if col.nulls is not None:
            pos = int(np.argmax(col.nulls))
            raise ConfigError(f"key file {shown_path(p)}, column {label!r}: null at position "
                              f"{pos}; drop or fill the nulls")
        arr = col.values
        cols.append(np.asarray(arr) if col.tz is None else arr)
    if table.num_rows == 0:
        raise ConfigError(f"key file {shown_path(p)} holds no keys")
    return cols


def load_keys(kf: KeyFile) -> np.ndarray:
    """Keys from a .npy file, a text file with one key per line, or one column of a Parquet
    or Arrow IPC file (a regular file: never a directory or a device)."""
    p = Path(kf.path)
    if p.suffix.lower() in TABLE_SUFFIXES:
        if kf.columns is not None and len(kf.columns) > 1:
            raise ConfigError(f"key file {shown_path(p)}: `columns` names "
                              f"{len(kf.columns)} columns; this needs one (`column:`)")
        return load_key_columns(kf)[0]
    check_regular_file(p, "key file")
    name = shown_path(p)
    if p.suffix.lower() == ".npy":
        try:
            arr = np.load(p, allow_pickle=False)
        except MemoryError:
            raise
        except Exception as exc:
            raise ConfigError(f"key file {name} is not a .npy file NumPy can read: "
                              f"{_brief(exc)}") from None
        if not isinstance(arr, np.ndarray):  # an .npz archive under a .npy name
            arr.close()
            raise ConfigError(f"key file {name} is an .npz archive, not a .npy array")
    else:
        arr = _load_text_keys(p, _text_dtype(kf), name)
    if arr.ndim != 1:
        raise ConfigError(f"key file {name} holds a {arr.ndim}-D array; expected 1-D")
    if arr.shape[0] == 0:
        raise ConfigError(f"key file {name} holds no keys")
    return arr


def _load_text_keys(p: Path, dtype: np.dtype, name: str) -> np.ndarray:
    try:
        with warnings.catch_warnings():  # "input contained no data": reported as no keys
            warnings.simplefilter("ignore", UserWarning)
            return np.loadtxt(p, dtype=dtype, ndmin=1, delimiter=",", encoding="utf-8")
    except MemoryError:
        raise
    except Exception as exc:
        # NumPy's message quotes the offending text; say where it is instead, without it
        why = _first_bad_line(p, dtype)
        what = "integer" if dtype.kind in "iu" else "number" if dtype.kind == "f" else "key"
        if why:
            raise ConfigError(f"key file {name} is not a text file of {dtype} keys (one {what} "
                              f"per line): {why}") from None
        raise ConfigError(f"key file {name} cannot be read as text of {dtype} keys "
                          f"({type(exc).__name__})") from None


def _first_bad_line(p: Path, dtype: np.dtype) -> str | None:
    """What is wrong with the first line NumPy cannot read, in words (no file content)."""
    fields0: tuple[int, int] | None = None  # (line, number of values) of the first data line
    try:
        with p.open("rb") as f:
            for no in range(1, 1 << 62):
                raw = f.readline(_LINE_LIMIT + 1)
                if not raw:
                    return None
                if len(raw) > _LINE_LIMIT and not raw.endswith(b"\n"):
                    return f"line {no} is longer than {_LINE_LIMIT} characters"
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError:
                    return f"line {no} is not UTF-8 text"
                line = line.split("#", 1)[0].strip()
                if not line:
                    continue
                values = [v.strip() for v in line.split(",")]
                for v in values:
                    problem = _value_problem(v, dtype)
                    if problem:
                        return f"line {no} {problem}"
                if fields0 is None:
                    fields0 = (no, len(values))
                elif len(values) != fields0[1]:
                    return (f"line {no} holds {len(values)} comma-separated values, line "
                            f"{fields0[0]} holds {fields0[1]}")
    except OSError as exc:
        return f"it cannot be read ({exc.strerror or exc})"
    return None


def _value_problem(v: str, dtype: np.dtype) -> str | None:
    if not v:
        return "has an empty value"
    if dtype.kind in "iu":
        try:
            x = int(v, 10)
        except ValueError:
            return "is not an integer"
        info = np.iinfo(dtype)
        if not int(info.min) <= x <= int(info.max):
            return f"is outside the range of {dtype} [{info.min}, {info.max}]"
        return None
    if dtype.kind == "f":
        try:
            float(v)
        except ValueError:
            return "is not a number"
        return None
    try:
        dtype.type(v)
    except (ValueError, TypeError, OverflowError):
        return f"cannot be read as {dtype}"
    return None


def _key_file_size(kf: KeyFile) -> tuple[int, int] | None:
    """(number of keys at most, bytes per key) of a key file, read cheaply (the .npy header,
    or the number of lines); None if that fails (loading reports why)."""
    p = Path(kf.path)
    try:
        check_regular_file(p, "key file")
        if p.suffix.lower() in TABLE_SUFFIXES:
            table = _read_table(p, kf)
            return int(table.num_rows), max(8, int(table.nbytes // max(table.num_rows, 1)))
        with p.open("rb") as f:
            if p.suffix.lower() == ".npy":
                version = np.lib.format.read_magic(f)
                read = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
                    np.lib.format.read_array_header_2_0
                shape, _fortran, dtype = read(f)
                return int(np.prod(shape, dtype=object)), int(dtype.itemsize)
            lines, last = 0, b"\n"
            while chunk := f.read(1 << 22):
                interrupts.check()
                lines += chunk.count(b"\n")
                last = chunk[-1:]
            return lines + (last != b"\n"), int(_text_dtype(kf).itemsize)
    except (ConfigError, OSError, ValueError, TypeError):
        return None


def check_memory(spec: RunSpec, device: str) -> None:
    """ResourceError before anything is allocated if the run cannot fit (see
    :mod:`indexzoo.resources`)."""
    n_keys = key_bytes = None
    what = f"this run ({spec.workload.describe()})"
    if spec.keys is not None:
        size = _key_file_size(spec.keys)
        if size is None:
            return
        n_keys, key_bytes = size
        what = (f"this run ({n_keys:,} keys from {shown_path(spec.keys.path)}, "
                f"{spec.workload.n_lookups:,} lookups)")
    check_fits(estimate_workload(spec.workload, spec.out, n_keys=n_keys, key_bytes=key_bytes),
               device, what)


def _lookup_bounds(km: KeyMap) -> tuple[int, int]:
    """The smallest and the largest encoding of a value of the key file's dtype: where the
    misses may fall (uint16 keys are held as uint32, text as its ranks in the dictionary)."""
    if km.dictionary is not None:
        return 0, int(km.dictionary.shape[0]) - 1
    src = km.source
    if km.kind == "float":
        ends = np.array([-np.inf, np.inf], dtype=src)
    elif km.kind == "datetime":  # the smallest int64 is NaT
        ends = np.array([np.iinfo(np.int64).min + 1, np.iinfo(np.int64).max]).view(src)
    elif km.kind == "bytes":
        ends = np.array([b"", b"\xff" * src.itemsize], dtype=src)
    elif src == np.bool_:
        ends = np.array([False, True])
    else:
        ends = np.array([np.iinfo(src).min, np.iinfo(src).max], dtype=src)
    lo, hi = km.encode(ends).tolist()
    return int(lo), int(hi)


def _fitted(spec: RunSpec, space: KeySpace, notes: list[str]) -> Workload:
    """The spec's workload with its misses where the keys have room for them
    (:func:`~indexzoo.tools.workloads.fit_misses`); what was changed goes to ``notes``."""
    w = spec.workload
    what = (f"the keys of {printable(spec.keys.path)}" if spec.keys is not None
            else f"the {w.distribution} keys")
    w, note = fit_misses(w, space, what, w.model_fields_set)
    if note is not None:
        notes.append(note)
    return w


def _dataset(spec: RunSpec, device: str, notes: list[str] | None = None) -> tuple[Any, Dataset]:
    """(keys to build on, lookups), on ``device`` where the dtype allows (bytes and datetime
    keys stay on the host); keys keep a key file's dtype. A workload whose misses do not fit
    the keys is adapted where the user left the field to its default, and says so in
    ``notes``."""
    notes = [] if notes is None else notes
    xp = array_module(device)
    if spec.keys is None:
        keys, space = generate_keys(spec.workload, device)
        w = _fitted(spec, space, notes)
        q, lo, hi, n_hit = generate_lookups(w, keys, xp, space)
        return keys, Dataset(w, keys, q, lo, hi, n_hit)
    cols = load_key_columns(spec.keys)
    keys = cols[0]
    km = KeyMap.for_keys(keys)
    host_only = km.kind in ("datetime", "bytes", "strings")
    ukeys = to_device(km.encode(keys), device)
    space = key_space(ukeys, xp, _lookup_bounds(km))
    w = _fitted(spec, space, notes)
    q, lo, hi, n_hit = generate_lookups(w, ukeys, xp, space)

    def back(a: Any) -> Any:  # lookups in the key file's dtype (host-only dtypes on the host)
        if a is None:
            return None
        out = km.decode(to_numpy(a) if host_only else a)
        return out if getattr(keys, "tz", None) is None else _zoned_like(keys, out)

    data = Dataset(w.model_copy(update={"n_keys": int(keys.shape[0])}), ukeys,
                   back(q), back(lo), back(hi), n_hit)
    if len(cols) > 1:
        return cols, _other_columns(data, cols, ukeys)
    if not host_only:
        keys = to_device(keys, device)
    return keys, data


def _zoned_like(keys: Any, values: Any) -> Any:
    """``values`` (UTC timestamps) in the time zone of ``keys``."""
    out = np.asarray(values).view(type(keys))
    out.tz = keys.tz
    return out


def _other_columns(data: Dataset, cols: list[Any], ukeys: Any) -> Dataset:
    """Lookups of a multi-column run: the workload's lookups on the first column; a point
    lookup takes the other columns from a row whose first column equals it (that of the
    first row where none does), a range leaves the other columns unconstrained."""
    if data.queries is None:
        others: list[Any] = [None] * (len(cols) - 1)
        return Dataset(data.workload, ukeys, None, [data.lo, *others], [data.hi, *others],
                       data.n_hits)
    first = to_numpy(ukeys)
    order = np.argsort(first, kind="stable")
    km = KeyMap.for_keys(cols[0])
    enc = to_numpy(km.encode_points(data.queries)[0]).astype(first.dtype)
    at = np.minimum(np.searchsorted(first[order], enc), first.shape[0] - 1)
    row = np.where(first[order][at] == enc, order[at], 0)
    return Dataset(data.workload, ukeys, [data.queries, *(c[row] for c in cols[1:])],
                   None, None, data.n_hits)


def _hits(res: LookupResult) -> int:
    host = res.to_host()
    if res.out == "rowid":
        return int((host.rowid != np.iinfo(host.rowid.dtype).max).sum())
    if res.out == "count":
        return int((host.count > 0).sum())
    if res.out == "rowids":
        return int((np.diff(host.offsets) > 0).sum())
    if res.out == "bitmap":
        return int(host.bitmap.any(axis=1).sum())
    return -1  # sums do not tell hits from misses


def _count(n: int) -> str:
    """``16,777,216 (2^24)`` for powers of two, ``1,000`` otherwise."""
    return f"{n:,} (2^{n.bit_length() - 1})" if n > 1 and n & (n - 1) == 0 else f"{n:,}"


def plan_lines(spec: RunSpec, index: GpuIndex) -> list[str]:
    """What ``run`` is about to do, in two lines: the index and where it runs; the keys, the
    lookups and how often each is timed."""
    w = spec.workload
    point = w.range_hits is None
    out = spec.out or ("rowid" if point else "count")
    if spec.keys is None:
        keys = (f"{_count(w.n_keys)} {w.distribution} u{w.key_bits} keys, generated"
                + (f" ({w.multiplicity} copies of each)" if w.multiplicity > 1 else ""))
    else:
        keys = f"the keys of {printable(spec.keys.path)}"
    kind = "point" if point else f"range ({w.range_hits} keys each)"
    return [
        f"plan       {printable(index.name)} on {index.device}, params "
        f"{printable(str(index.params.model_dump()))}",
        f"           build on {keys}; then {_count(w.n_lookups)} {kind} lookups (hit rate "
        f"{w.hit_rate:g}, out={out}, {w.batches} batch(es)); each timed {spec.repeats} "
        "time(s) after a warm-up",
    ]


def _data_step(spec: RunSpec, dev: str) -> str:
    w = spec.workload
    if spec.keys is None:
        return f"generating {_count(w.n_keys)} keys and {_count(w.n_lookups)} lookups on {dev}"
    return f"reading {printable(spec.keys.path)}, generating {_count(w.n_lookups)} lookups"


def _about(index: GpuIndex, keys: Any) -> str:
    """``, about 38 s each`` where a build of ``keys`` (an array, or a list of columns) is
    predicted to take longer than a few seconds (:mod:`indexzoo.buildtime`), else ``""``."""
    n = len(keys[0]) if isinstance(keys, list) else len(keys)
    predicted = predicted_seconds(type(index).build_rate, index.device, n)
    return f", about {duration(predicted)} each" if predicted and predicted > NOTE_FROM_S else ""


def run_spec(path: str | Path, stream: TextIO, device: str | None = None,
             steps: Progress | None = None) -> int:
    """Run a spec file and write the plan and then the summary to ``stream``; returns an exit
    code. Each step shows its progress on ``steps`` (default: on standard error, when it is a
    terminal)."""
    spec = load_run_spec(path)
    index: GpuIndex = create(spec, device=device)
    check_something_to_run(spec, path)
    dev = index.device
    steps = steps if steps is not None else Progress()
    stream.write("\n".join(plan_lines(spec, index)) + "\n")
    stream.flush()
    check_memory(spec, dev)
    t0 = time.perf_counter()
    notes: list[str] = []
    with steps.step(_data_step(spec, dev)):
        keys, data = _dataset(spec, dev, notes)
        synchronize(dev)
    interrupts.check()
    if notes:
        stream.write("".join(f"note       {n}\n" for n in notes))
        stream.flush()
    prepare_s = time.perf_counter() - t0
    point = data.queries is not None
    out: Out = spec.out or ("rowid" if point else "count")
    with steps.step(f"building {printable(index.name)}{_about(index, keys)}") as st:
        build = time_call(st.calls(lambda: index.build(keys), spec.repeats), dev,
                          repeats=spec.repeats)
    fp = index.memory_footprint()
    batches = data.batches()

    def lookups() -> list[LookupResult]:
        if point:
            return [index.point(b[0], out=out) for b in batches]
        return [index.range(b[0], b[1], out=out) for b in batches]

    with steps.step(f"{_count(data.n_lookups)} lookups") as st:
        t = time_call(st.calls(lookups, spec.repeats), dev, repeats=spec.repeats)
    with steps.step("counting the hits"):
        results = lookups()
        synchronize(dev)
        interrupts.check()
        hits = sum(_hits(r) for r in results)
    n = data.n_lookups
    kind = "point" if point else f"range ({spec.workload.range_hits} keys each)"
    lines = [
        f"index      {printable(index.name)}  on {dev}  params "
        f"{printable(str(index.params.model_dump()))}",
        f"keys       {len(index):,} of dtype {index.key_dtype}"
        + (f" from {printable(spec.keys.path)}" if spec.keys else f"  ({spec.workload.describe()})"),
        f"data       {prepare_s * 1e3:.1f} ms to generate or load and move to {dev} (untimed below)",
        f"build      {build.median * 1e3:.3f} ms (median of {spec.repeats})",
        f"footprint  {fp}",
        f"lookups    {n:,} {kind}, out={out}, {spec.workload.batches} batch(es): "
        f"{t.median * 1e3:.3f} ms (median of {spec.repeats}) = "
        f"{n / t.median / 1e6 if t.median > 0 else float('inf'):.1f} M lookups/s",
    ]
    if hits >= 0:
        lines.append(f"hits       {hits:,} of {n:,} (workload built for {data.n_hits:,})")
    stream.write("\n".join(lines) + "\n")
    return 0
