"""Plugin ``sharded``: any registered index, split into shards over a Dask cluster.

Design
------
The index is an ordinary :class:`~indexzoo.GpuIndex`: the base class validates input, maps
keys to uint32/uint64, handles nulls, sorted probes, chunking and the out modes derived from
``rowids`` (``bitmap``), exactly as for one process. Its hooks see native keys and do three
things: cut the rows into shards (``partition``), build one inner index per shard on a
worker (``worker.build_shard``; the shards stay there, the client holds futures), and route
each lookup batch to the shards that can answer, combining their answers in the caller's
order (``ShardedIndex._answer``). The inner index is made through the registry
(``indexzoo.create``), never imported: any registered index can be sharded.

* rowIDs are global: a shard keeps the global rowID of each of its rows and answers with it;
  the inner index's values are the global values (or the global rowIDs), so sums need no
  translation. Counts and sums add up over shards, ``rowid`` takes the first shard's match,
  ``rowids`` are joined per lookup into one CSR, bitmaps are derived from it over all rows.
* Partitioning (``partition``): ``range`` for an inner index with range lookups (splitters
  drawn from a sample; runs of a key heavy enough to span splitters are dealt out over those
  shards), ``hash`` for one without (heavy keys dealt out over every shard), ``rows`` for a
  multi-column inner index. Lookups are routed by each shard's actual key bounds.
* Builds from a Dask array, a Dask DataFrame column or Parquet files (``sources``) encode,
  sample and cut the partitions on the workers; only the sample (``sample_per_shard`` keys
  per shard) and the partition lengths reach the client.
* The client: ``client=`` to the constructor, else the ``address`` parameter, else the
  one set with :func:`use_client`, else the process's default ``Client``, else a local
  cluster shared by the process, made from the ``cluster`` parameters and started with
  worker threads when a script starts it outside its ``__main__`` guard (``cluster``).
* A batch in memory is routed on the caller's side and each shard's part scattered to its
  worker (never inside the task graph); a Dask array of lookups is routed, answered and
  reassembled on the workers, chunk by chunk, and answered with a Dask array
  (``dask_lookups``).

Decisions
---------
* [AMBIG] The registered class declares the capabilities of its default inner index
  (``sorted-array``). Making an index creates it as the subclass for its inner index, whose
  capabilities are the inner index's (without updates), so ``index.capabilities``,
  ``Unsupported`` and the conformance suite follow the inner index.
  ``ShardedIndex.over(inner, **defaults)`` gives that class with those parameter defaults,
  for ``ConformanceSuite.index``.
* [AMBIG] A Dask client cannot live in the parameters: it is passed as ``client=`` or set for
  the process with ``use_client``; the parameters hold only an ``address``.
* [AMBIG] Updates are not offered (a moved key may change shards); build again.
* [AMBIG] A lost worker: the lookup raises :class:`ShardLost` (a ``DeviceUnavailable``) and
  returns nothing; later lookups raise it too until the index is built or loaded again. No
  retry: the client keeps no copy of a shard's rows to rebuild it from. A build, load or
  save that loses a worker raises ShardLost too and publishes (or writes) nothing, whatever
  Dask raised (``lost``).
* [AMBIG] Saving and pickling gather every shard's saved form (the inner index's own) to the
  caller; loading sends them to the workers of the current client. So a sharded index saves
  and pickles like any other, at the cost of moving every shard once.
* [AMBIG] The inner index runs on the sharded index's device; ``inner.device`` may only be
  ``auto`` or that device.
* [AMBIG] A point lookup goes to every shard whose key bounds hold it; a range to every shard
  it overlaps; under ``hash`` and ``rows`` ranges go to every shard.
"""

from __future__ import annotations

from typing import Any

from indexzoo.hookspecs import hookimpl

from .cluster import use_client
from .index import ShardedIndex, ShardedParams
from .lost import ShardLost

__all__ = ["ShardLost", "ShardedIndex", "ShardedParams", "use_client"]


@hookimpl
def indexzoo_register_indexes(register: Any) -> None:
    register(ShardedIndex)
