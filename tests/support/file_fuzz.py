"""Structure-aware fuzzing of saved indexes: the helpers of tests/core/test_file_fuzz.py (run
as a script, the child process that loads the mutated files).

For every built-in index a small saved file is the original (:func:`build_corpus`, with the
answers of its lookups). Each case mutates it (:data:`MUTATIONS`) and a child process loads the
result and, if the load succeeds, runs every lookup (point and range, every out mode its
capabilities offer). Cases run in batches in one child (:func:`run_cases`), so a segfault or a
hang is seen by the parent as a failure of the case that was running, not as a crash of pytest,
and the child is started again after it.

Outcomes of a case:

* ``refused``: the load raised IndexFileError;
* ``equal``: every answer equals the original's;
* ``different``: answers differ but are those of some index (``consistent``: each lookup's
  count is its number of rowIDs, each rowID below the loaded index's row count and met once,
  its sum the sum of their values, its rowid one of them or the miss value, its bitmap their
  bits). Only a mutation that makes another well-formed file can get there (a key changed in
  order, a box's coordinate, a param): ``kind == "value"``. Zip tricks and raw corruption
  must be refused or answer equally;
* a **failure**: a crash (signal), a hang, any exception but IndexFileError from the load or
  any exception from a lookup, inconsistent answers, or different answers where the kind does
  not allow them.
"""

from __future__ import annotations

import io
import json
import os
import pickle
import queue
import random
import subprocess
import sys
import threading
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

#: One configuration of every built-in index (name, params), by case-name prefix.
CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    name: (name, {}) for name in (
        "sorted-array", "searchsorted", "warpcore-hash", "btree", "lightweight", "ao-bs",
        "eo-bs", "ao-pb-bs", "eo-ks", "ao-pb-ks", "rx", "rx-opt", "cgrx", "cgrx-5x4",
        "cgrx-8x4", "rtscan", "rtscan-rt", "rtc1", "rtc3", "rtscan-noenc", "rtscan-nosieve",
        "rtscan-direct", "rtscan-paper", "fused-scan")}
CONFIGS["sharded"] = ("sharded", {"shards": 2})
#: More layouts of the same indexes, for the exhaustive run.
EXTRA_CONFIGS: dict[str, tuple[str, dict[str, Any]]] = {
    "btree-paired": ("btree", {"leaf_layout": "paired", "leaf_fill": 0.5, "node_width": 8}),
    "btree-interleaved": ("btree", {"leaf_layout": "interleaved", "node_width": 8}),
    "warpcore-soa": ("warpcore-hash", {"layout": "soa", "group_size": 1}),
    "lightweight-eo-aos": ("lightweight", {"configuration": "given", "layout": "eo",
                                           "memory_layout": "aos"}),
    "rx-generated": ("rx", {"geometry": "generated"}),
    "rx-aabb": ("rx", {"primitive": "aabb"}),
    "rx-sphere-naive": ("rx", {"primitive": "sphere", "key_mode": "naive"}),
    "rx-opt-one": ("rx-opt", {"partitions": 1, "compress_duplicates": False}),
    "cgrx-stored": ("cgrx", {"geometry": "stored"}),
    "sharded-hash": ("sharded", {"shards": 3, "partitioning": "hash",
                                 "inner": {"index": "warpcore-hash"}}),
}
_MULTI = 3  # columns of a multi-column original
_N = 40


@dataclass
class Original:
    """A saved index and the answers of its lookups."""

    config: str
    index: str
    data: bytes
    probes: dict[str, Any]
    answers: dict[str, Any]


# ---------------------------------------------------------------------- lookups
def probes_for(dims: int, dtype: Any, rng: np.random.Generator) -> dict[str, Any]:
    """Point lookups and ranges over the originals' keys (0 .. 49) and past them."""
    if dims == 1:
        q = np.arange(0, 60, dtype=dtype)
        lo = rng.integers(0, 55, 16).astype(dtype)
        hi = (lo + rng.integers(0, 12, 16)).astype(dtype)
        lo[0], hi[0] = 0, np.iinfo(dtype).max
        lo[1], hi[1] = 9, 3  # empty
    else:
        q = rng.integers(0, 50, (24, dims)).astype(dtype)
        lo = rng.integers(0, 40, (16, dims)).astype(dtype)
        hi = (lo + rng.integers(0, 20, (16, dims))).astype(dtype)
        lo[0], hi[0] = 0, np.iinfo(dtype).max
    return {"point": (q,), "range": (lo, hi)}


def lookups(index: Any, probes: dict[str, Any]) -> dict[str, Any]:
    """Every lookup the index offers on ``probes``: (kind, out) -> host arrays."""
    caps = index.capabilities
    out: dict[str, Any] = {}
    for kind in ("point", "range"):
        if not getattr(caps, kind):
            continue
        for mode in caps.out_modes:
            res = getattr(index, kind)(*probes[kind], out=mode).to_host()
            if mode == "rowids":
                out[f"{kind} {mode}"] = (np.asarray(res.offsets), np.asarray(res.rowids))
            else:
                out[f"{kind} {mode}"] = np.asarray(getattr(res, mode))
    return out


def same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    if a.keys() != b.keys():
        return False
    for k in a:
        x, y = a[k], b[k]
        pairs = zip(x, y, strict=True) if isinstance(x, tuple) else [(x, y)]
        if not all(np.array_equal(u, v) for u, v in pairs):
            return False
    return True


def inconsistency(got: dict[str, Any], n: int, miss: int, sums: bool = True) -> str | None:
    """What makes ``got`` the answers of no index of ``n`` rows (values = rowIDs), or None.
    ``sums=False``: the index keeps values a file may set to anything a user could have built
    it with (the sharded index's shards hold them), so sums are not compared with rowIDs."""
    for kind in ("point", "range"):
        if f"{kind} rowids" not in got:
            continue
        offsets, rowids = got[f"{kind} rowids"]
        sets = [rowids[offsets[i]:offsets[i + 1]] for i in range(len(offsets) - 1)]
        for i, s in enumerate(sets):
            if len(s) and (int(s.max()) >= n or len(np.unique(s)) != len(s)):
                return f"{kind} {i}: rowIDs {s.tolist()[:8]} (n = {n})"
            checks = {
                "count": lambda v, s=s: int(v) == len(s),
                "sum": lambda v, s=s: int(v) == int(s.astype(np.uint64).sum(dtype=np.uint64)),
                "rowid": lambda v, s=s: (int(v) == miss) if not len(s) else int(v) in set(
                    s.tolist()),
                "bitmap": lambda v, s=s: sorted(np.flatnonzero(np.unpackbits(
                    v.view(np.uint8), bitorder="little")).tolist()) == sorted(s.tolist()),
            }
            if not sums:
                del checks["sum"]
            for mode, ok in checks.items():
                key = f"{kind} {mode}"
                if key in got and not ok(got[key][i]):
                    return f"{key} {i}: {got[key][i]!r} against rowIDs {s.tolist()[:8]}"
    return None


# ---------------------------------------------------------------------- the corpus
def _keys(dims: int, rng: np.random.Generator) -> np.ndarray:
    if dims == 1:
        return rng.integers(0, 50, _N).astype(np.uint64)
    return np.asfortranarray(rng.integers(0, 50, (_N, dims)).astype(np.uint32))


def build_corpus(configs: dict[str, tuple[str, dict[str, Any]]]) -> list[Original]:
    """Each configuration built over small keys with duplicates, saved, and its answers."""
    import indexzoo

    out = []
    for config, (name, params) in configs.items():
        rng = np.random.default_rng(zlib.crc32(config.encode()))
        index = indexzoo.create(name, device="cpu", **params)
        dims = _MULTI if index.capabilities.dims > 1 else 1
        keys = _keys(dims, rng)
        index.build(keys)
        probes = probes_for(dims, keys.dtype, rng)
        out.append(Original(config, name, _saved_bytes(index), probes, lookups(index, probes)))
    return out


def _saved_bytes(index: Any) -> bytes:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "index.izo"
        index.save(path)
        return path.read_bytes()


# ---------------------------------------------------------------------- the container
@dataclass
class Saved:
    """A saved file taken apart: metadata, arrays (name -> array, in file order)."""

    meta: dict[str, Any]
    arrays: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def parse(cls, data: bytes) -> Saved:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            meta = json.loads(zf.read("indexzoo.json"))
            arrays = {n[len("arrays/"):-len(".npy")]: np.load(io.BytesIO(zf.read(n)))
                      for n in zf.namelist() if n.startswith("arrays/")}
        return cls(meta, arrays)

    def members(self) -> list[tuple[str, bytes]]:
        """The members, with the array table of the metadata made to match the arrays."""
        meta = dict(self.meta)
        meta["arrays"] = {k: {"dtype": a.dtype.str, "shape": list(a.shape)}
                          for k, a in self.arrays.items()}
        out = [("indexzoo.json", json.dumps(meta).encode())]
        for k, a in self.arrays.items():
            b = io.BytesIO()
            np.lib.format.write_array(b, a, allow_pickle=False)
            out.append((f"arrays/{k}.npy", b.getvalue()))
        return out


def pack(members: list[tuple[str, bytes]], compressed: frozenset[str] = frozenset()) -> bytes:
    """A zip of ``members`` with valid checksums (``compressed``: the members deflated)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        for name, data in members:
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED if name in compressed else zipfile.ZIP_STORED
            zf.writestr(info, data)
    return buf.getvalue()


# ---------------------------------------------------------------------- mutations
Mutation = Callable[[random.Random, bytes], bytes]


def _scalar(rng: random.Random, value: Any) -> Any:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return rng.choice([0, 1, -1, value + 1, value - 1, value * 2, 1 << 62, 1 << 70,
                           value + rng.randint(-5, 5)])
    if isinstance(value, str):
        return rng.choice(["", "x", value[::-1], value + "x", "$array", "a0", "1e999"])
    if value is None:
        return rng.choice([0, "a", [], {}])
    return rng.choice([None, 0, "x"])


def _nodes(tree: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    yield path, tree
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from _nodes(v, (*path, k))
    elif isinstance(tree, list):
        for i, v in enumerate(tree):
            yield from _nodes(v, (*path, i))


def _set(tree: Any, path: tuple[Any, ...], value: Any) -> None:
    for p in path[:-1]:
        tree = tree[p]
    tree[path[-1]] = value


def meta_lie(rng: random.Random, data: bytes) -> bytes:
    """One node of the metadata changed: a scalar to another value or type, a key dropped,
    a container emptied or nested deeper (checksums valid)."""
    s = Saved.parse(data)
    nodes = [(p, v) for p, v in _nodes(s.meta) if p and p[0] != "arrays"]
    path, value = rng.choice(nodes)
    action = rng.random()
    if action < 0.6 and not isinstance(value, (dict, list)):
        _set(s.meta, path, _scalar(rng, value))
    elif action < 0.75 and isinstance(path[-1], str):
        parent = s.meta
        for p in path[:-1]:
            parent = parent[p]
        del parent[path[-1]]
    elif action < 0.9:
        _set(s.meta, path, rng.choice([[], {}, [value], {"$tuple": [value]}, "x"]))
    else:  # nested deeper than any reader should follow (written as text: json cannot)
        _set(s.meta, path, "@DEEP@")
        members = s.members()
        depth = rng.choice([70, 3000, 100_000])
        name, body = members[0]
        members[0] = (name, body.replace(b'"@DEEP@"', b"[" * depth + b"0" + b"]" * depth))
        return pack(members)
    return pack(s.members())


def array_value_lie(rng: random.Random, data: bytes) -> bytes:
    """One element of one array set to an edge value (checksums valid)."""
    s = Saved.parse(data)
    name = rng.choice([k for k, a in s.arrays.items() if a.size] or list(s.arrays))
    a = s.arrays[name].copy()
    if a.size:
        flat = a.reshape(-1, order="A")
        i = rng.randrange(flat.size)
        if a.dtype.kind == "f":
            flat[i] = rng.choice([np.nan, np.inf, -np.inf, 0.0, flat[i] + 1, -flat[i], 1e30])
        elif a.dtype.kind in "iu":
            info = np.iinfo(a.dtype)
            pick = rng.choice([0, 1, info.max, info.max - 1, info.min, int(flat[i]) + 1,
                               int(flat[i]) - 1, _N, _N - 1, 3_000_000_000,
                               int(flat[rng.randrange(flat.size)])])
            flat[i] = min(max(pick, int(info.min)), int(info.max))
        elif a.dtype.kind == "b":
            flat[i] = not flat[i]
        a = flat.reshape(a.shape, order="F" if a.flags.f_contiguous and a.ndim > 1 else "C")
    s.arrays[name] = a
    return pack(s.members())


def array_shape_lie(rng: random.Random, data: bytes) -> bytes:
    """One array cut short, grown, emptied, reshaped or given another dtype (checksums,
    header and array table all consistent with the lie)."""
    s = Saved.parse(data)
    name = rng.choice(list(s.arrays))
    a = s.arrays[name]
    action = rng.randrange(5)
    if action == 0 and a.shape and a.shape[0]:
        a = a[: rng.randrange(a.shape[0])]
    elif action == 1 and a.shape:
        extra = np.zeros((rng.choice([1, 2, 1000]), *a.shape[1:]), dtype=a.dtype)
        a = np.concatenate([a, extra])
    elif action == 2:
        a = a[:0] if a.ndim else a.reshape(1)[:0]
    elif action == 3 and a.size:
        a = a.reshape(-1)
    elif a.dtype.kind in "iuf":
        a = a.astype(rng.choice(["<u4", "<u8", "<i8", "<i4", "<f8", "<u2"]))
    s.arrays[name] = np.ascontiguousarray(a)
    return pack(s.members())


def array_swap(rng: random.Random, data: bytes) -> bytes:
    """Two elements of one array swapped, or two arrays' names swapped (checksums valid)."""
    s = Saved.parse(data)
    names = list(s.arrays)
    if rng.random() < 0.3 and len(names) > 1:
        x, y = rng.sample(names, 2)
        s.arrays[x], s.arrays[y] = s.arrays[y], s.arrays[x]
        return pack(s.members())
    name = rng.choice(names)
    a = s.arrays[name].copy()
    flat = a.reshape(-1)
    if flat.size > 1:
        i, j = rng.randrange(flat.size), rng.randrange(flat.size)
        flat[i], flat[j] = flat[j].copy(), flat[i].copy()
    s.arrays[name] = flat.reshape(a.shape)
    return pack(s.members())


def flip_fixed(rng: random.Random, data: bytes) -> bytes:
    """Bits flipped inside one member, its checksum made again."""
    members = Saved.parse(data).members()
    k = rng.randrange(len(members))
    name, body = members[k]
    b = bytearray(body)
    for _ in range(rng.choice([1, 1, 2, 4])):
        b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    members[k] = (name, bytes(b))
    return pack(members)


def zip_trick(rng: random.Random, data: bytes) -> bytes:
    """The container lies: a compressed member (a small bomb among them), a member twice, an
    unknown member, the metadata not first, a member's declared size huge."""
    members = Saved.parse(data).members()
    action = rng.randrange(6)
    if action == 0:
        return pack(members, compressed=frozenset([rng.choice(members)[0]]))
    if action == 1:
        name, body = members[0]
        bomb = body[:-1] + b" " * (1 << 22) + body[-1:]
        return pack([(name, bomb), *members[1:]], compressed=frozenset([name]))
    if action == 2:
        extra = rng.choice(members)
        return pack([*members, extra])
    if action == 3:
        return pack([*members, (rng.choice(["arrays/zz.npy", "other.txt"]), b"x" * 10)])
    if action == 4 and len(members) > 1:
        return pack([*members[1:], members[0]])
    return _huge_size(rng, pack(members))


def _huge_size(rng: random.Random, data: bytes) -> bytes:
    """A central directory entry whose sizes claim far more than the file holds."""
    b = bytearray(data)
    at = [i for i in range(len(b) - 4) if b[i:i + 4] == b"PK\x01\x02"]
    i = rng.choice(at)
    big = rng.choice([0xFFFFFFF0, 1 << 30, len(b) * 4])
    b[i + 20:i + 24] = big.to_bytes(4, "little")
    b[i + 24:i + 28] = big.to_bytes(4, "little")
    return bytes(b)


def raw_flip(rng: random.Random, data: bytes) -> bytes:
    """Bits flipped anywhere in the file; checksums left as they were."""
    b = bytearray(data)
    for _ in range(rng.choice([1, 1, 2, 3])):
        b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
    return bytes(b)


def truncate(rng: random.Random, data: bytes) -> bytes:
    """The file cut anywhere."""
    return data[: rng.randrange(len(data))]


#: name -> (mutation, kind): ``value`` mutations may make another well-formed file (its
#: answers may differ, consistently); the others must be refused or answer equally.
MUTATIONS: dict[str, tuple[Mutation, str]] = {
    "meta-lie": (meta_lie, "value"),
    "array-value": (array_value_lie, "value"),
    "array-shape": (array_shape_lie, "value"),
    "array-swap": (array_swap, "value"),
    "flip-fixed-crc": (flip_fixed, "value"),
    "zip-trick": (zip_trick, "container"),
    "raw-flip": (raw_flip, "container"),
    "truncate": (truncate, "container"),
}


def case_seed(config: str, i: int, seed: int) -> int:
    return zlib.crc32(f"{seed}:{config}:{i}".encode())


def mutate(original: Original, i: int, seed: int) -> tuple[str, str, bytes]:
    """Case ``i`` of an original: (mutation name, kind, file bytes)."""
    rng = random.Random(case_seed(original.config, i, seed))
    name = list(MUTATIONS)[i % len(MUTATIONS)]
    fn, kind = MUTATIONS[name]
    return name, kind, fn(rng, original.data)


# ---------------------------------------------------------------------- the child
#: ``CONFIG:I``: the child aborts (or hangs) in that case (how the harness's tests make one).
CRASH_AT, HANG_AT = "FILE_FUZZ_CRASH_AT", "FILE_FUZZ_HANG_AT"


def _child(plan_path: str) -> None:
    """Run the cases of a plan, one line of JSON per case on stdout (``begin`` first, so a
    crash names its case)."""
    plan = json.loads(Path(plan_path).read_text())
    with open(plan["corpus"], "rb") as f:
        corpus = {o["config"]: Original(**o) for o in pickle.load(f)}
    import indexzoo

    path = Path(plan["folder"]) / f"case-{os.getpid()}.izo"
    crash, hang = os.environ.get(CRASH_AT), os.environ.get(HANG_AT)  # the harness's own tests
    for config, i in plan["cases"]:
        original = corpus[config]
        name, kind, data = mutate(original, i, plan["seed"])
        print(json.dumps({"begin": [config, i]}), flush=True)
        if crash == f"{config}:{i}":
            os.abort()
        if hang == f"{config}:{i}":
            threading.Event().wait()
        path.write_bytes(data)
        print(json.dumps({"case": [config, i], "mutation": name,
                          **_outcome(indexzoo, path, original, kind)}), flush=True)
    path.unlink(missing_ok=True)


#: The exhaustive tier's cases per configuration (default 300).
CASES = "FILE_FUZZ_CASES"
#: ``cuda``: the child loads each file onto the GPU (indexes that run there), so that the
#: checks run on device arrays and the GPU kernels answer.
DEVICE = "FILE_FUZZ_DEVICE"


def _outcome(indexzoo: Any, path: Path, original: Original, kind: str) -> dict[str, Any]:
    device = os.environ.get(DEVICE)
    if device and device not in indexzoo.available()[original.index].capabilities.devices:
        device = None
    try:
        index = indexzoo.load(path, device=device)
    except indexzoo.IndexFileError as exc:
        return {"outcome": "refused", "why": str(exc)[-160:]}
    except BaseException as exc:  # the load may raise nothing else
        return {"outcome": "failure", "why": f"load raised {type(exc).__name__}: {exc}"[:400]}
    try:
        got = lookups(index, original.probes)
    except BaseException as exc:
        return {"outcome": "failure", "why": f"a lookup raised {type(exc).__name__}: {exc}"[:400]}
    if same(got, original.answers):
        return {"outcome": "equal"}
    n = len(index) if index.capabilities.dims == 1 else index.state.n_rows
    wrong = inconsistency(got, n, int(index.state.miss), sums=original.index != "sharded")
    if wrong:
        return {"outcome": "failure", "why": f"inconsistent answers: {wrong}"}
    if kind != "value":
        return {"outcome": "failure", "why": "a container mutation answered differently"}
    return {"outcome": "different"}


# ---------------------------------------------------------------------- the parent
@dataclass
class Report:
    """Outcomes per configuration and the failures, with what made them."""

    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)

    def add(self, config: str, outcome: str, text: str = "") -> None:
        row = self.counts.setdefault(config, {"cases": 0, "refused": 0, "equal": 0,
                                              "different": 0, "failure": 0})
        row["cases"] += 1
        row[outcome] += 1
        if outcome == "failure":
            self.failures.append(text)

    def table(self) -> str:
        lines = [f"{'index':<22}{'cases':>7}{'refused':>9}{'equal':>7}{'different':>10}"
                 f"{'failed':>8}"]
        for config, r in sorted(self.counts.items()):
            lines.append(f"{config:<22}{r['cases']:>7}{r['refused']:>9}{r['equal']:>7}"
                         f"{r['different']:>10}{r['failure']:>8}")
        total = {k: sum(r[k] for r in self.counts.values())
                 for k in ("cases", "refused", "equal", "different", "failure")}
        lines.append(f"{'all':<22}{total['cases']:>7}{total['refused']:>9}{total['equal']:>7}"
                     f"{total['different']:>10}{total['failure']:>8}")
        return "\n".join(lines)


def run_cases(folder: Path, corpus: list[Original], per_config: int, seed: int,
              env: dict[str, str], case_limit: float) -> Report:
    """Every case of every original, in one child at a time (started again after a crash or
    a hang, from the case after the one that failed). ``case_limit``: the seconds one case
    may run (its first lookups may compile kernels) before it counts as a hang."""
    corpus_path = folder / "corpus.pickle"
    with open(corpus_path, "wb") as f:
        pickle.dump([vars(o) for o in corpus], f)
    todo = [(o.config, i) for o in corpus for i in range(per_config)]
    report = Report()
    while todo:
        plan = folder / "plan.json"
        plan.write_text(json.dumps({"corpus": str(corpus_path), "folder": str(folder),
                                    "seed": seed, "cases": todo}))
        out, code = _run_child(plan, env, case_limit)
        running: list[Any] | None = None
        done = 0
        for line in out.splitlines():
            if not line.startswith("{"):
                continue
            msg = json.loads(line)
            if "begin" in msg:
                running = msg["begin"]
                continue
            config, i = msg["case"]
            report.add(config, msg["outcome"],
                       f"{config} case {i} ({msg['mutation']}): {msg.get('why', '')}")
            running = None
            done += 1
        todo = todo[done:]
        if running is not None:  # the child died (or hung) inside this case
            config, i = running
            name = list(MUTATIONS)[i % len(MUTATIONS)]
            report.add(config, "failure", f"{config} case {i} ({name}): the child {code}")
            todo = todo[1:]
        elif todo:
            raise RuntimeError(f"the fuzz child stopped ({code}) before its cases: {out[-2000:]}")
    return report


#: The seconds a child may take to start (import, kernels loaded) before its first case.
START_LIMIT = 900


def _run_child(plan: Path, env: dict[str, str], limit: float) -> tuple[str, str]:
    """The child's output and how it ended; a child whose case runs for ``limit`` seconds (a
    hang) is killed."""
    proc = subprocess.Popen([sys.executable, __file__, str(plan)], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env)
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    out: list[str] = []
    in_case = False
    while True:
        try:
            line = lines.get(timeout=limit if in_case else max(limit, START_LIMIT))
        except queue.Empty:
            proc.kill()
            proc.wait()
            return "".join(out), f"hung (no progress for {limit:.0f} s; killed)"
        if line is None:
            break
        in_case = line.startswith('{"begin"')
        out.append(line)
    code = proc.wait()
    return "".join(out), ("exited" if code == 0 else f"died with exit status {code}")


if __name__ == "__main__":
    _child(sys.argv[1])
