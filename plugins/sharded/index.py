"""The ``sharded`` index: any registered index, split into shards over a Dask cluster."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

import numpy as np
from pydantic import Field, create_model, field_validator

from indexzoo.config import IndexParams, IndexSpec, validate_params
from indexzoo.contract import BuildState, Capabilities, Footprint, GpuIndex, NullPolicy
from indexzoo.devices import to_device, to_numpy
from indexzoo.errors import ConfigError, IndexZooError, InvalidInput
from indexzoo.lookup import operation_for
from indexzoo.persist import StateSchema
from indexzoo.registry import lookup
from indexzoo.results import LookupResult, Out

from . import cluster, dask_lookups, handoff, hostshm, mailbox, partition, replicas, sources, worker
from .cluster import ClusterParams
from .lost import ShardLost, losing_workers, raised_by_a_task
from .replicas import Copies, Copy
from .saved import SHARDED_SCHEMA

__all__ = ["ShardLost", "ShardedIndex", "ShardedParams", "ShardedState"]

Partitioning = Literal["auto", "range", "hash", "rows"]


class ShardedParams(IndexParams):
    """The inner index, the number of shards, the partitioning and where the cluster is."""

    inner: IndexSpec = Field(
        default=IndexSpec(index="sorted-array"),
        description=("The index each shard holds: a registered name or a spec "
                     "({index, params}); it runs on the sharded index's device."))
    shards: int = Field(default=2, ge=1, le=4096, description="Number of shards.")
    replicas: int = Field(
        default=1, ge=1, le=64,
        description=("Copies of each shard, each on a different worker (at most the "
                     "cluster's workers). With 2 or more, a lost worker's shards are answered "
                     "by their other copies and copied again onto live workers in the "
                     "background; with 1, a lost worker's shards are lost (ShardLost)."))
    partitioning: Partitioning = Field(
        default="auto",
        description=("How rows go to shards. auto: range for an inner index with range "
                     "lookups, hash for one without, rows for a multi-column one; range: by "
                     "splitters drawn from a sample of the keys; hash: by a hash of the key; "
                     "rows: contiguous blocks of rows (every lookup asks every shard)."))
    sample_per_shard: int = Field(
        default=partition.SAMPLE_PER_SHARD, ge=16, le=1 << 24,
        description="Keys sampled per shard to draw the range splitters and find heavy keys.")
    address: str | None = Field(
        default=None,
        description=("A Dask scheduler address to connect to (e.g. 'tcp://10.0.0.5:8786'); "
                     "none: a client given to the index, the one set with use_client(), or "
                     "the default client, or a local cluster."))
    cluster: ClusterParams = Field(
        default=ClusterParams(),
        description=("How the local cluster is made when the index starts one (no client "
                     "given, set or default): workers, threads, processes, protocol, and on "
                     "cuda the RMM pool per GPU."))

    @field_validator("inner", mode="before")
    @classmethod
    def _spec(cls, value: Any) -> Any:
        if isinstance(value, str):
            return IndexSpec(index=value)
        return value


class ShardedState(BuildState):
    client: Any
    scheme: str
    copies: Copies  # each shard's live copies (futures of a worker.Shard), in shard order
    summaries: list[worker.ShardSummary]  # each shard's first copy, as built or loaded
    lo: np.ndarray  # per shard: smallest native key (an empty shard: lo > hi)
    hi: np.ndarray
    split: np.ndarray  # range splitters drawn at build (kept for the docs' cost model)
    heavy: np.ndarray  # heavy keys dealt out over every shard (hash scheme)
    shards: list[Any]  # only in the saved form: each shard's saved form (_save_state)


#: After Dask fails a lookup, how long to wait for the scheduler to name the lost worker
#: (it has, by the time a worker's death fails a task); a hang guard, not a time limit.
LOSS_NOTICED_S = 10.0

_classes: dict[Any, type[ShardedIndex]] = {}
_classes_lock = threading.RLock()


class ShardedIndex(GpuIndex[ShardedState]):
    """Any index split into shards over a Dask cluster (range- or hash-partitioned)."""

    name: ClassVar[str] = "sharded"
    Params: ClassVar[type[IndexParams]] = ShardedParams
    # [AMBIG] what the class declares: those of the default inner index (sorted-array); an
    # index made for another inner index is of a subclass declaring that index's capabilities
    capabilities: ClassVar[Capabilities] = Capabilities(point=True, range=True, duplicates=True)
    plugin_api: ClassVar[str] = "2.5"  # _class_for
    # bench and recommend over "builtin" leave it out: it wraps the others and needs a cluster
    selected_by_default: ClassVar[bool] = False
    #: each shard checked as a file of its inner index before it goes to a worker (saved.py)
    state_schema: ClassVar[StateSchema] = SHARDED_SCHEMA
    #: the inner index class this (sub)class was made for; None on the registered class
    inner_class: ClassVar[type[GpuIndex] | None] = None
    #: the arguments of ``over`` that made this class (None: not made by ``over``)
    over_args: ClassVar[tuple[Any, dict[str, Any]] | None] = None
    params: ShardedParams

    # ------------------------------------------------------------------ classes per inner
    def __new__(cls, params: Any = None, *, device: str = "auto", client: Any = None
                ) -> ShardedIndex:
        return super().__new__(cls._class_for(params))

    @classmethod
    def _class_for(cls, params: Any) -> type[ShardedIndex]:
        """The subclass for the inner index ``params`` name (its capabilities), or ``cls``
        where it is one already."""
        if cls.inner_class is not None:
            return cls
        p = validate_params(cls.Params, params, cls.name)
        return _for_inner(lookup(p.inner.index))  # type: ignore[attr-defined]

    @classmethod
    def over(cls, inner: str | IndexSpec | Mapping[str, Any], **defaults: Any
             ) -> type[ShardedIndex]:
        """The sharded index class over ``inner`` whose parameters default to ``inner`` and
        ``defaults``: what ``ConformanceSuite.index`` takes to certify ``sharded`` over an
        index (``ShardedIndex.over("btree", shards=3)``)."""
        spec = IndexSpec(index=inner) if isinstance(inner, str) else IndexSpec.model_validate(
            inner)
        key = json.dumps([spec.model_dump(mode="json"), defaults], sort_keys=True)
        with _classes_lock:
            got = _classes.get(key)
            if got is None:
                base = _for_inner(lookup(spec.index))
                fields: dict[str, Any] = {"inner": (IndexSpec, spec)}
                for k, v in defaults.items():
                    info = ShardedParams.model_fields[k]
                    fields[k] = (info.annotation, Field(default=v, description=info.description))
                params = create_model(f"ShardedParams_{spec.index}", __base__=ShardedParams,
                                      **fields)
                got = type(f"ShardedOver_{spec.index.replace('-', '_')}", (base,),
                           {"Params": params, "__module__": __name__, "__doc__": base.__doc__,
                            "over_args": (spec.model_dump(mode="json"), dict(defaults))})
                _classes[key] = got
            return got

    def __reduce__(self) -> Any:
        """Pickled by the class it was made as: the registered one for its inner index, or
        the one ``over`` made (classes made at run time cannot be pickled by name)."""
        return (_unpickle, (type(self).over_args, self.__getstate__()))

    def __init__(self, params: Any = None, *, device: str = "auto", client: Any = None):
        super().__init__(params, device=device)
        inner = self.params.inner
        if self.inner_class is not None and inner.index != self.inner_class.name:
            raise ConfigError(f"params.inner: {inner.index!r}; this class shards "
                              f"{self.inner_class.name!r}")
        if inner.device not in ("auto", self.device):
            raise ConfigError(f"params.inner.device = {inner.device!r}: the inner index runs "
                              f"on the sharded index's device ({self.device!r})")
        if self.params.partitioning == "range" and self.capabilities.dims > 1:
            raise ConfigError("params.partitioning = 'range': a multi-column inner index is "
                              "sharded by rows ('rows' or 'auto')")
        if self.params.cluster.rmm_pool_size is not None and self.device != "cuda":
            raise ConfigError("params.cluster.rmm_pool_size: an RMM pool is for GPU workers; "
                              f"this index runs on {self.device!r}")
        # resolve the client now: a missing Dask is an error here, before any build
        self._client = cluster.client_for(client, self.params.address, self.device,
                                          self.params.cluster)

    def __getstate__(self) -> dict[str, Any]:
        data = super().__getstate__()
        data["extra"] = {k: v for k, v in data["extra"].items() if k != "_client"}
        return data

    def __setstate__(self, data: dict[str, Any]) -> None:
        params = data["meta"]["params"]
        self._client = cluster.client_for(
            None, params.get("address"), data["meta"].get("device", "cpu"),
            cluster.ClusterParams.model_validate(params.get("cluster") or {}))
        super().__setstate__(data)

    @property
    def client(self) -> Any:
        """The ``distributed.Client`` this index builds and looks up through."""
        return self._client

    @property
    def scheme(self) -> str:
        """The partitioning in effect: ``range``, ``hash`` or ``rows``."""
        return _scheme(self.params.partitioning, self.capabilities)

    # ------------------------------------------------------------------ build
    def build(self, keys: Any, values: Any = None, *, nulls: NullPolicy = "refuse",
              columns: Sequence[str] | None = None) -> ShardedIndex:
        """Build from any column ``GpuIndex.build`` takes, or from a distributed one: a Dask
        array, a Dask DataFrame column (Series), a Dask DataFrame with ``columns=[name]``,
        or a list of Parquet files with ``columns=[name]``. A distributed column is encoded,
        sampled and cut into shards on the workers; its keys never meet on the client."""
        src = sources.distributed_source(keys, values, columns)
        if src is None:
            super().build(keys, values, nulls=nulls, columns=columns)
            return self
        if nulls != "refuse":
            raise InvalidInput("argument 'nulls': a build from a distributed column takes "
                               "nulls='refuse'")
        if self.capabilities.dims > 1 or self.scheme == "rows":
            raise InvalidInput("a multi-column sharded index builds from NumPy, CuPy or "
                               "table columns, not from a distributed source")
        self._build_distributed(src)
        return self

    def _build(self, st: ShardedState, keys: Any) -> None:
        host = np.asarray(to_numpy(keys))
        values = None if st.values is None else np.asarray(to_numpy(st.values))
        n, shards = int(host.shape[0]), self.params.shards
        if self._builds_on_workers(host):
            self._build_scattered(st, host, values)
            return
        rowids = np.arange(n, dtype=np.int64)
        scheme, split, heavy = self.scheme, _empty(host), _empty(host)
        if scheme == "rows":
            cuts = partition.row_blocks(n, shards)
            parts = [rowids[cuts[s]:cuts[s + 1]] for s in range(shards)]
        else:
            sample = np.sort(partition.sample_keys(host, self.params.sample_per_shard * shards))
            if scheme == "range":
                split = partition.splitters(sample, shards)
                where = partition.range_shard(host, rowids, sample, shards)
            else:
                heavy = partition.heavy_keys(sample, shards)
                where = partition.hash_shard(host, rowids, shards, heavy)
            parts = partition.shard_rows(where, shards)
        client = self._client
        futures: list[Any] = []
        with losing_workers("the build", futures):
            workers = self._workers()
            for s, rows in enumerate(parts):
                piece = (host[rows], rows, None if values is None else values[rows])
                at = [workers[s % len(workers)]]
                data = client.scatter([piece], workers=at, hash=False)[0]
                futures.append(client.submit(worker.build_shard, self._inner_spec(),
                                             self.device, data, workers=at, pure=False))
            # the client keeps no copy of the keys or values: the shards hold them
            st.values = None
            self._place(st, futures, workers, scheme, split, heavy)

    def _builds_on_workers(self, keys: np.ndarray) -> bool:
        """Whether a build from memory cuts its keys into shards on the workers (on their
        GPUs) rather than here: on ``cuda``, for one-column range or hash partitioning."""
        return self.device == "cuda" and keys.ndim == 1 and self.scheme != "rows"

    def _build_scattered(self, st: ShardedState, host: np.ndarray,
                         values: np.ndarray | None) -> None:
        """The build of ``host`` (native keys) as a distributed one: one contiguous slice
        of the keys (and values) to each worker (GPU to GPU from this process's GPU where it
        shares the host and its GPUs with the workers, else scattered), then sampled, cut
        into shards and built there, the pieces moving GPU to GPU
        (:meth:`_split_and_build`)."""
        client = self._client
        futures: list[Any] = []
        parcel = None
        with losing_workers("the build", futures):
            workers = self._workers()
            cuts = partition.row_blocks(int(host.shape[0]), len(workers))
            keys_at, values_at = [], []
            if hostshm.same_memory(client) and handoff.one_host(client) and mailbox.usable():
                # onto this process's GPU once, and from there GPU to GPU to each worker
                parcel = mailbox.Parcel([host] if values is None else [host, values])
                for i, w in enumerate(workers):
                    part = parcel.letter.items(int(cuts[i]), int(cuts[i + 1]))
                    keys_at.append(client.submit(mailbox.read_first, part.some([0]),
                                                 workers=[w], pure=False))
                    if values is not None:
                        values_at.append(client.submit(mailbox.read_first, part.some([1]),
                                                       workers=[w], pure=False))
            for i, w in enumerate(workers if parcel is None else ()):
                keys_at.append(client.scatter(host[cuts[i]:cuts[i + 1]], workers=[w],
                                              hash=False))
                if values is not None:
                    values_at.append(client.scatter(values[cuts[i]:cuts[i + 1]],
                                                    workers=[w], hash=False))
            futures += [*keys_at, *values_at]
            st.values = None  # the shards hold them
            try:
                self._split_and_build(st, workers, keys_at, values_at or None, cuts, futures)
            finally:
                if parcel is not None:
                    parcel.close()

    def _build_distributed(self, src: sources.Source) -> None:
        futures: list[Any] = []
        with losing_workers("the build", futures):
            self._build_on_workers(src, futures)

    def _build_on_workers(self, src: sources.Source, futures: list[Any]) -> None:
        """:meth:`_build_distributed`, each future it makes added to ``futures``."""
        client = self._client
        workers = self._workers()
        keymap = src.keymap.with_target(self._native_dtype(src.keymap))
        key_parts = client.compute(src.key_parts)
        encoded = [client.submit(worker.encode_part, p, keymap, "keys", pure=False)
                   for p in key_parts]
        futures += [*key_parts, *encoded]
        lengths = client.gather([client.submit(len, e, pure=False) for e in encoded])
        n = int(sum(lengths))
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        vals = None if src.value_parts is None else \
            [client.submit(worker.values_part, v, pure=False)
             for v in client.compute(src.value_parts)]
        futures += [v for v in vals or () if v is not None]
        st = self._new_state(keymap, n, None, rows=None, n_rows=n, nulls="refuse", names=None)
        self._split_and_build(st, workers, encoded, vals, offsets, futures)
        self._publish(st)

    def _split_and_build(self, st: ShardedState, workers: list[str], encoded: list[Any],
                         vals: list[Any] | None, offsets: np.ndarray,
                         futures: list[Any]) -> None:
        """Shards built from partitions of native keys on the workers (futures
        ``encoded``, values ``vals``; partition ``p``'s rows start at ``offsets[p]``): a
        sample of each drawn there and gathered here for the splitters (or heavy keys),
        each partition cut into one piece per shard where it is (on the GPU for cuda), each
        shard built on its worker from its pieces; ``st`` filled (:meth:`_place`)."""
        client, shards = self._client, self.params.shards
        keymap = st.keymap
        per = max(1, (self.params.sample_per_shard * shards) // max(1, len(encoded)))
        sample = np.concatenate(client.gather(
            [client.submit(worker.sample_part, e, per, i, pure=False)
             for i, e in enumerate(encoded)]) or [np.zeros(0, keymap.target)])
        scheme = self.scheme
        sample = np.sort(sample)
        split = partition.splitters(sample, shards) if scheme == "range" else _empty(sample)
        heavy = partition.heavy_keys(sample, shards) if scheme == "hash" else _empty(sample)
        vals = vals or [None] * len(encoded)
        ipc = self.device == "cuda" and handoff.one_host(client)
        cut = [client.submit(worker.split_part, e, v, int(off), scheme, shards, sample, heavy,
                             self.device, ipc, pure=False)
               for e, v, off in zip(encoded, vals, offsets[:-1], strict=True)]
        futures += cut
        built = []
        for s in range(shards):
            pieces = [client.submit(worker.piece, c, s, pure=False) for c in cut]
            built.append(client.submit(worker.build_shard, self._inner_spec(), self.device,
                                       *pieces, workers=[workers[s % len(workers)]],
                                       pure=False))
        futures += built
        self._place(st, futures, workers, scheme, split, heavy, first=built)

    def _inner_spec(self) -> dict[str, Any]:
        spec = self.params.inner.model_dump(mode="json")
        spec["device"] = self.device
        return spec

    def _workers(self) -> list[str]:
        """The cluster's workers (:func:`_workers`); ConfigError if they are fewer than the
        copies each shard needs."""
        workers = _workers(self._client)
        if self.params.replicas > len(workers):
            raise ConfigError(f"params.replicas = {self.params.replicas}: each copy of a shard "
                              f"needs a worker of its own, and the cluster has {len(workers)} "
                              f"(allowed: 1 to {len(workers)} here)")
        return workers

    def _place(self, st: ShardedState, futures: list[Any], workers: list[str], scheme: str,
               split: np.ndarray, heavy: np.ndarray, first: list[Any] | None = None) -> None:
        """Copy each shard onto its other workers, wait for every copy, note what routing
        needs, fill ``st`` (a failed shard build raises here, and nothing is published).

        ``first``: each shard's first copy, built or loaded on worker ``s mod W`` (default:
        ``futures``); the futures of the other copies are added to ``futures``."""
        client = self._client
        first = list(futures) if first is None else first
        where = replicas.placement(len(first), self.params.replicas, workers)
        table: list[list[Copy]] = []
        pending: list[tuple[Any, tuple[str, ...]]] = []
        for s, built in enumerate(first):
            copies = [Copy(where[s][0], built)]
            pending.append((built, (where[s][0],)))
            for w in where[s][1:]:
                # each further copy moves from the first worker to its own, packed (never
                # via the client)
                new, packed = replicas.copy_shard_to(client, copies[0], w)
                copies.append(Copy(w, new))
                pending.append((new, (where[s][0], w)))
                futures += [new, packed]
            table.append(copies)
        replicas.wait_pinned(client, pending)
        # on the shard's worker (loosely: elsewhere only if it is gone), so that the shard is
        # not fetched by another worker, which would hold a replica of it
        summaries = client.gather([client.submit(worker.summarise, f, workers=[where[s][0]],
                                                 allow_other_workers=True, pure=False)
                                   for s, f in enumerate(first)])
        dt = np.dtype(st.keymap.target)
        top = np.iinfo(dt).max
        lo = np.array([top if s.bounds is None else s.bounds[0] for s in summaries], dtype=dt)
        hi = np.array([0 if s.bounds is None else s.bounds[1] for s in summaries], dtype=dt)
        empty = np.array([s.bounds is None for s in summaries], dtype=bool)
        lo[empty], hi[empty] = top, 0
        st.client, st.scheme, st.summaries = client, scheme, summaries
        st.copies = Copies(table, self.params.replicas)
        st.lo, st.hi, st.split, st.heavy = lo, hi, split, heavy

    # ------------------------------------------------------------------ lookups
    def point(self, queries: Any, *, out: Out = "rowid") -> LookupResult:
        """As for every index; lookups given as a Dask array are answered where they live,
        with a Dask array of the same chunks (``out`` ``rowid``, ``count`` or ``sum``)."""
        if sources.is_dask(queries):
            return self._dask_lookup("point", out, [queries])
        return super().point(queries, out=out)

    def range(self, lo: Any, hi: Any = None, *, out: Out = "count") -> LookupResult:
        """As for every index; bounds given as Dask arrays are answered where they live, with
        a Dask array chunked like ``lo`` (``out`` ``rowid``, ``count`` or ``sum``)."""
        if sources.is_dask(lo) or sources.is_dask(hi):
            if not (sources.is_dask(lo) and sources.is_dask(hi)):
                raise InvalidInput("argument 'hi': give both bounds as Dask arrays, or both "
                                   "in memory")
            return self._dask_lookup("range", out, [lo, hi])
        return super().range(lo, hi, out=out)

    def _dask_lookup(self, kind: str, out: Out, arrays: list[Any]) -> LookupResult:
        """Lookups in Dask arrays: checked here, answered on the workers (dask_lookups)."""
        st = self._live()
        op = operation_for(self, kind, out)  # Unsupported or InvalidInput for what can't be
        if op.out not in dask_lookups.DASK_OUTS:
            raise InvalidInput(f"argument 'out': lookups given as a Dask array are answered "
                               f"with out='rowid', 'count' or 'sum', not {op.out!r}; compute "
                               "them first for the others")
        if st.dims > 1 or st.rows is not None:
            raise InvalidInput("lookups given as a Dask array need a one-column index built "
                               "without skipping nulls; compute them first")
        names = ("queries",) if kind == "point" else ("lo", "hi")
        for name, a in zip(names, arrays, strict=True):
            if getattr(a, "ndim", None) != 1 or not hasattr(a, "to_delayed"):
                raise InvalidInput(f"argument {name!r}: a Dask array of lookups is a 1-D "
                                   f"Dask array, got {type(a).__name__}")
        if kind == "range" and arrays[0].shape != arrays[1].shape:
            raise InvalidInput(f"arguments 'lo' and 'hi' differ in length: {arrays[0].shape} "
                               f"and {arrays[1].shape}")
        # a dtype no key map takes fails now, on the caller's side, not in a worker's task
        empty = [np.zeros(0, dtype=a.dtype) for a in arrays]
        if kind == "point":
            st.keymap.encode_points(empty[0], name="queries")
        else:
            st.keymap.encode_ranges(empty[0], empty[1])
        answer = self._on_workers(st, kind, op.out, arrays, encoded=False)
        return LookupResult(out=op.out, **{op.out: answer})

    def _on_workers(self, st: ShardedState, kind: str, out: Out, arrays: list[Any],
                    encoded: bool) -> Any:
        """The Dask array answering the Dask arrays ``arrays`` on the workers
        (:func:`dask_lookups.lookup`); ``encoded``: they hold native keys already."""
        copies = st.copies
        if copies.lost():
            raise ShardLost(_lost_message(copies.lost()))
        # GPU to GPU by CUDA IPC when every worker shares this host's GPUs (one short round
        # trip to the scheduler); else as Dask moves arrays (UCX where the cluster uses it)
        ipc = self.device == "cuda" and handoff.one_host(st.client)
        copies.repair(st.client)  # a shard still short of copies: try again
        live = [copies.of(s) for s in range(len(copies))]
        if any(not c for c in live):  # lost since: the table says so now
            raise ShardLost(_lost_message(copies.lost()))
        asked = () if copies.replicas > 1 else tuple(c[0].worker for c in live)
        routing = dask_lookups.Routing(st.keymap, st.scheme, st.lo, st.hi, st.heavy,
                                       [s.n > 0 for s in st.summaries], self.device, ipc,
                                       asked, encoded)
        return dask_lookups.lookup(st.client, live, copies.replicas > 1, routing, kind, out,
                                   st.rowid_dtype, self.device, arrays)

    # one hook per operation (not one marked method): a subclass for an inner index without
    # ranges inherits the range hooks from here, where the capabilities declare them
    def _point_rowid(self, st: ShardedState, q: Any) -> Any:
        return self._scatter_gather(st, "point", "rowid", q)

    def _point_count(self, st: ShardedState, q: Any) -> Any:
        return self._scatter_gather(st, "point", "count", q)

    def _point_sum(self, st: ShardedState, q: Any) -> Any:
        return self._scatter_gather(st, "point", "sum", q)

    def _point_rowids(self, st: ShardedState, q: Any) -> Any:
        return self._scatter_gather(st, "point", "rowids", q)

    def _range_rowid(self, st: ShardedState, lo: Any, hi: Any) -> Any:
        return self._scatter_gather(st, "range", "rowid", lo, hi)

    def _range_count(self, st: ShardedState, lo: Any, hi: Any) -> Any:
        return self._scatter_gather(st, "range", "count", lo, hi)

    def _range_sum(self, st: ShardedState, lo: Any, hi: Any) -> Any:
        return self._scatter_gather(st, "range", "sum", lo, hi)

    def _range_rowids(self, st: ShardedState, lo: Any, hi: Any) -> Any:
        return self._scatter_gather(st, "range", "rowids", lo, hi)

    def _scatter_gather(self, st: ShardedState, kind: str, out: Out, *arrays: Any) -> Any:
        """Route the batch to the shards that can answer, gather every answer, combine them
        in the caller's order (on the index's device)."""
        if (self._batches_on_workers() and out in dask_lookups.DASK_OUTS
                and arrays[0].ndim == 1 and st.scheme != "rows"):
            return self._batch_on_workers(st, kind, out, arrays)
        host = [np.asarray(to_numpy(a)) for a in arrays]
        q = int(host[0].shape[0])
        scheme = st.scheme if host[0].ndim == 1 else "rows"
        if kind == "point":
            routes = partition.route_points(scheme, host[0], len(st.copies), st.lo, st.hi,
                                            st.heavy)
        else:
            routes = partition.route_ranges(scheme, host[0], host[1], len(st.copies), st.lo,
                                            st.hi)
        asked = [(s, idx) for s, idx in enumerate(routes)
                 if idx.shape[0] and st.summaries[s].n]
        parts = self._gather(st, kind, out, host, asked)
        got = dask_lookups.combine(out, q, asked, parts, st.rowid_dtype)
        if isinstance(got, tuple):
            return tuple(to_device(a, self.device) for a in got)
        return to_device(got, self.device)

    def _batches_on_workers(self) -> bool:
        """Whether a batch in memory (answered ``rowid``, ``count`` or ``sum``) is routed on
        the workers (:meth:`_batch_on_workers`) rather than here: on ``cuda``, where the
        workers route on their GPUs and hand the pieces GPU to GPU."""
        return self.device == "cuda"

    def _batch_on_workers(self, st: ShardedState, kind: str, out: Out,
                          arrays: tuple[Any, ...]) -> Any:
        """A batch answered as a Dask array of lookups is (on ``cuda``): one contiguous
        slice sent to each worker, routed on its GPU, its pieces handed GPU to GPU to their
        shards, answered and put in order there; the answer brought back once. Nothing is
        routed or combined here. Where this process shares the host and its GPUs with the
        workers, the slices and the answer cross GPU to GPU (:meth:`_batch_mailed`); where
        it shares only the host's memory, through shared memory (:mod:`.hostshm`); else
        through Dask's comms (scattered, gathered)."""
        client = st.client
        n = int(arrays[0].shape[0])
        workers = _workers(client)
        cuts = partition.row_blocks(n, len(workers)) if n else np.zeros(2, dtype=np.int64)
        shared = hostshm.same_memory(client)
        if shared and handoff.one_host(client) and mailbox.usable():
            return self._batch_mailed(st, kind, out, arrays, workers, cuts)
        lookups = []
        sent: list[Any] = []
        buffers: list[hostshm.HostBuffer] = []
        done = False
        try:
            for a in arrays:
                dt = np.dtype(a.dtype)
                if shared:
                    buf = hostshm.lease(n * dt.itemsize)
                    buffers.append(buf)
                    hostshm.copy_into(buf.array(dt, n), a)
                blocks = []
                for i in range(len(cuts) - 1):
                    lo, hi = int(cuts[i]), int(cuts[i + 1])
                    at = [workers[i % len(workers)]]
                    if shared:
                        f = client.submit(hostshm.read_slice, buf.name, dt.str, n, lo, hi,
                                          self.device, workers=at, pure=False)
                    else:
                        f = client.scatter(a[lo:hi], workers=at, hash=False)
                    sent.append(f)
                    blocks.append(f)
                # the slices' futures as the chunks of a persisted array (nothing to compute)
                lookups.append(dask_lookups.from_futures(
                    blocks, np.diff(cuts).tolist(), dt,
                    dask_lookups.meta(self.device, dt) if shared else a[:0]))
            answer = self._on_workers(st, kind, out, lookups, encoded=True)
            if not shared:
                return to_device(answer.compute(scheduler=client), self.device)
            # each chunk of the answer written into shared memory by the worker holding it
            dt = np.dtype(answer.dtype)
            result = hostshm.lease(n * dt.itemsize)
            buffers.append(result)
            chunks = dask_lookups.held_chunks(client, answer)
            sent.extend(chunks)
            starts = np.concatenate([[0], np.cumsum(answer.chunks[0])])
            beside = dask_lookups.beside_inputs(client, workers)
            writes = [client.submit(hostshm.write_slice, result.name, dt.str, n, int(start),
                                    chunk, pure=False, **beside)
                      for start, chunk in zip(starts, chunks, strict=False)]
            sent.extend(writes)
            client.gather(writes)
            got = result.array(dt, n)
            # (a copy: the segment serves the next batch)
            answered = to_device(got, self.device) if self.device == "cuda" else got.copy()
            done = True
            return answered
        except IndexZooError:
            raise
        except Exception as exc:
            _lost_if_so(st, client, exc)
            raise
        finally:
            for f in sent:
                f.release()
            for b in buffers:
                # kept for the next batch once every task of this one is done with it; after
                # a failure a task may still write into it: removed
                if done:
                    hostshm.give_back(b)
                else:
                    b.close()

    def _batch_mailed(self, st: ShardedState, kind: str, out: Out, arrays: tuple[Any, ...],
                      workers: list[str], cuts: np.ndarray) -> Any:
        """:meth:`_batch_on_workers` where this process and the workers share the host and
        its GPUs: the batch goes onto this process's GPU (the one host -> GPU copy a single
        process makes too), each worker copies its slice from there GPU to GPU
        (:class:`~.mailbox.Parcel`), and each chunk of the answer comes back the same way
        from the worker's mailbox (:func:`~.mailbox.post`) onto this GPU."""
        import cupy

        client = st.client
        parcel = mailbox.Parcel(arrays)  # (NumPy: copied straight into it)
        sizes = np.diff(cuts).tolist()
        sent: list[Any] = []
        try:
            lookups = []
            for j, a in enumerate(arrays):
                dt = np.dtype(a.dtype)
                name = dask_lookups.answer_name("read_first")
                blocks = [client.submit(mailbox.read_first,
                                        parcel.letter.some([j]).items(int(cuts[i]),
                                                                      int(cuts[i + 1])),
                                        workers=[workers[i % len(workers)]], key=(name, i))
                          for i in range(len(cuts) - 1)]
                sent.extend(blocks)
                lookups.append(dask_lookups.from_futures(blocks, sizes, dt,
                                                         dask_lookups.meta("cuda", dt)))
            answer = self._on_workers(st, kind, out, lookups, encoded=True)
            chunks = dask_lookups.held_chunks(client, answer)
            sent.extend(chunks)
            me = f"{handoff.host_token()}|{os.getpid()}|{threading.get_ident()}"
            beside = dask_lookups.beside_inputs(client, workers)
            posted = [client.submit(mailbox.post_first, f"to-caller|{me}|{i}", c, pure=False,
                                    **beside) for i, c in enumerate(chunks)]
            sent.extend(posted)
            parts = [mailbox.read(letter)[0] for letter in client.gather(posted)]
            got = parts[0] if len(parts) == 1 else cupy.concatenate(parts)
            cupy.cuda.get_current_stream().synchronize()  # read before the workers post again
            return got
        except IndexZooError:
            raise
        except Exception as exc:
            _lost_if_so(st, client, exc)
            raise
        finally:
            for f in sent:
                f.release()
            parcel.close()

    def _gather(self, st: ShardedState, kind: str, out: Out, host: list[np.ndarray],
                asked: list[tuple[int, np.ndarray]]) -> list[Any]:
        """Every asked shard's answer, or ShardLost (never some of them). Each shard's part
        goes to one live copy; a part whose copy is lost under it goes again to another copy
        of its shard, until every part is answered or a shard has no copy left."""
        copies = st.copies
        if copies.lost():
            raise ShardLost(_lost_message(copies.lost()))
        client = st.client
        parts = {s: tuple(a[idx] for a in host) for s, idx in asked}
        flight: dict[int, _Asked] = {}  # the shards asked and not yet answered
        try:
            while True:
                try:
                    if copies.replicas > 1 and not flight:
                        # copies on workers that left since: dropped before their parts go
                        # there (one short round trip); a shard still short of copies:
                        # re-replication tried again
                        copies.drop_lost(client)
                        copies.repair(client)
                    for s, _ in asked:
                        if s not in flight:
                            flight[s] = self._ask(st, s, kind, out, parts[s])
                    got = client.gather([flight[s].future for s, _ in asked])
                    return list(got)
                except IndexZooError:
                    raise
                except Exception as exc:
                    if raised_by_a_task(exc, [a.future for a in flight.values()]):
                        raise
                    self._lose(st, exc, flight)
        finally:
            for a in flight.values():
                a.release()

    def _ask(self, st: ShardedState, s: int, kind: str, out: Out,
             part: tuple[np.ndarray, ...]) -> _Asked:
        """Shard ``s``'s part of a batch asked of its first live copy (ShardLost: none)."""
        copy = st.copies.pick(s)
        if copy is None:
            raise ShardLost(_lost_message(st.copies.lost()))
        client, at = st.client, [copy.worker]
        # the lookups go to the copy's worker as data, never inside the task graph
        sent = client.scatter([part], workers=at, hash=False)[0]
        future = client.submit(worker.lookup_scattered, copy.future, kind, out,
                               str(st.rowid_dtype), sent, workers=at, pure=False)
        return _Asked(copy, future, sent)

    def _lose(self, st: ShardedState, exc: Exception, flight: dict[int, _Asked]) -> None:
        """After Dask failed a gather: drop the lost copies and the parts asked of them
        (those are asked again); ShardLost if a shard has no copy left, or if no copy can
        be found lost (the failure is then one no copy can answer for)."""
        copies = st.copies
        deadline = time.monotonic() + LOSS_NOTICED_S
        while True:
            try:
                dropped = copies.drop_lost(st.client)
            except Exception:  # the scheduler out of reach: no copy can be named
                dropped = []
                break
            # the scheduler may lag the error; with one copy, no wait (nothing to answer from)
            if dropped or copies.replicas == 1 or time.monotonic() >= deadline:
                break
            time.sleep(0.1)
        if not dropped:
            copies.lose_unnamed(f"a shard ({type(exc).__name__}: {exc})")
        lost = copies.lost()
        if lost:
            raise ShardLost(_lost_message(lost)) from exc
        for s, asked in list(flight.items()):
            if asked.copy not in copies.of(s) or asked.future.status not in ("pending",
                                                                             "finished"):
                asked.release()
                del flight[s]

    # ------------------------------------------------------------------ memory
    def _footprint(self, st: ShardedState) -> Footprint:
        """Every shard's bytes (with several copies: every live copy's, as
        ``shard{s}.copy{r}.{part}``), and the routing arrays on the client."""
        breakdown: dict[str, int] = {}
        peak = 0
        for s, summary in enumerate(st.summaries):
            held = 1 if st.copies.replicas == 1 else len(st.copies.of(s))
            for r in range(held):
                at = f"shard{s}" if st.copies.replicas == 1 else f"shard{s}.copy{r}"
                for name, nbytes in summary.footprint.breakdown.items():
                    breakdown[f"{at}.{name}"] = nbytes
                peak += summary.footprint.peak_build_bytes
        breakdown["routing"] = int(st.lo.nbytes + st.hi.nbytes + st.split.nbytes
                                   + st.heavy.nbytes)
        return Footprint(breakdown=breakdown, peak_build_bytes=peak + breakdown["routing"])

    def shard_footprints(self) -> list[Footprint]:
        """Each shard's footprint (its inner index's, plus its global rowIDs), in shard order."""
        return [s.footprint for s in self._live().summaries]

    def shard_sizes(self) -> list[int]:
        """Rows held by each shard, in shard order."""
        return [s.n for s in self._live().summaries]

    def shard_copies(self) -> list[list[str]]:
        """Per shard, the workers holding its live copies (the first answers its lookups).
        With several copies, those on workers that have left are dropped first (one short
        round trip to the scheduler, which also starts re-replication if it is needed). After
        a lost worker the lists are short until re-replication has copied those shards again;
        a shard with none is lost."""
        st = self._live()
        if st.copies.replicas > 1:
            st.copies.drop_lost(st.client)
        return st.copies.workers()

    def replicating(self) -> bool:
        """Whether lost copies are being made again in the background now."""
        return self._live().copies.repairing()

    # ------------------------------------------------------------------ saving
    def _save_state(self, st: ShardedState) -> dict[str, Any]:
        """Every shard gathered from its worker in saved form (the inner index's own saved
        form and its global rowIDs), and the routing arrays."""
        client, copies = st.client, st.copies
        if copies.replicas > 1:  # copies lost since the last lookup: save from the others
            copies.drop_lost(client)
        if copies.lost():
            raise ShardLost(_lost_message(copies.lost()))
        chosen = [copies.pick(s) for s in range(len(copies))]
        held = [c for c in chosen if c is not None]
        if len(held) < len(chosen):  # lost meanwhile
            raise ShardLost(_lost_message(copies.lost()))
        with losing_workers("the save", [c.future for c in held]):
            # on each copy's worker (loosely), so that no other worker fetches the shard
            saved = client.gather([client.submit(worker.save_shard, c.future, workers=[c.worker],
                                                 allow_other_workers=True, pure=False)
                                   for c in held])
        return {"scheme": st.scheme, "lo": st.lo, "hi": st.hi, "split": st.split,
                "heavy": st.heavy,
                "shards": [{"meta": m, "arrays": a, "rows": r,
                            "bounds": None if b is None else list(b)}
                           for m, a, r, b in saved]}

    def _load_state(self, st: ShardedState, saved: dict[str, Any]) -> None:
        """Each saved shard sent to a worker and loaded there."""
        client = self._client
        # the file's fields are read here, before any worker is involved: an error in them is
        # the file's, never a lost worker. The arrays travel as host arrays (a load onto the
        # GPU read them onto the device; each worker puts its shard on its own device).
        payloads = [(shard["meta"], {k: to_numpy(a) for k, a in shard["arrays"].items()},
                     None if shard["rows"] is None else to_numpy(shard["rows"]),
                     shard["bounds"]) for shard in saved["shards"]]
        futures: list[Any] = []
        with losing_workers("the load", futures):
            workers = self._workers()
            for s, payload in enumerate(payloads):
                at = [workers[s % len(workers)]]
                data = client.scatter([payload], workers=at, hash=False)[0]
                futures.append(client.submit(_load_one, data, self.device, workers=at,
                                             pure=False))
            dt = np.dtype(st.keymap.target)
            self._place(st, futures, workers, saved["scheme"],
                        to_numpy(saved["split"]).astype(dt), to_numpy(saved["heavy"]).astype(dt))


@dataclass
class _Asked:
    """A shard's part of a batch in flight: the copy asked, the lookup's future, the part."""

    copy: Copy
    future: Any
    sent: Any

    def release(self) -> None:
        self.future.release()
        self.sent.release()


def _load_one(data: tuple[Any, ...], device: str) -> worker.Shard:
    meta, arrays, rows, bounds = data
    return worker.load_shard(meta, arrays, rows, bounds, device)


def _unpickle(over_args: tuple[Any, dict[str, Any]] | None,
              data: dict[str, Any]) -> ShardedIndex:
    cls = ShardedIndex if over_args is None else ShardedIndex.over(over_args[0], **over_args[1])
    index = cls.__new__(cls, data["meta"].get("params"))
    index.__setstate__(data)
    return index


def _for_inner(inner: type[GpuIndex]) -> type[ShardedIndex]:
    """The subclass of :class:`ShardedIndex` for inner index class ``inner``: its capabilities
    are the inner index's (no updates), and so are its declared conformance failures."""
    with _classes_lock:
        got = _classes.get(inner)
        if got is None:
            caps = inner.capabilities.model_copy(update={"updates": False})
            expected = dict(getattr(inner, "conformance_expected_failures", {}) or {})
            got = type(f"Sharded_{inner.name.replace('-', '_')}", (ShardedIndex,),
                       {"capabilities": caps, "inner_class": inner, "__module__": __name__,
                        "__doc__": ShardedIndex.__doc__,
                        "conformance_expected_failures": expected,
                        # takes the inner index's capabilities, often narrower than its own
                        "narrows": True})
            _classes[inner] = got
        return got


def _scheme(asked: str, caps: Capabilities) -> str:
    if asked != "auto":
        return asked
    if caps.dims > 1:
        return "rows"
    return "range" if caps.range else "hash"


def _empty(like: np.ndarray) -> np.ndarray:
    return np.zeros(0, dtype=like.dtype)


def _workers(client: Any) -> list[str]:
    """The cluster's workers, in a fixed order (shard s goes to worker s modulo their
    number)."""
    got = sorted(client.scheduler_info()["workers"])
    if not got:
        client.wait_for_workers(1, timeout=60)
        got = sorted(client.scheduler_info()["workers"])
    return got


def _lost_if_so(st: ShardedState, client: Any, exc: Exception) -> None:
    """ShardLost (from ``exc``) when a batch failed because a worker holding the only copy of
    a shard was lost under it; else nothing (the caller re-raises ``exc``)."""
    st.copies.drop_lost(client)
    if st.copies.lost():
        raise ShardLost(_lost_message(st.copies.lost())) from exc


def _lost_message(lost: list[str]) -> str:
    return (f"sharded index lost {', '.join(lost)}: its worker died or left the cluster. The "
            "lookup returned nothing; build (or load) the index again to go on")
