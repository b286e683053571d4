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
* Replicas (the ``replicas`` parameter, module ``replicas``): each shard's inner index lives
  on ``replicas`` distinct workers, each copy a future of its own. Every lookup asks one live
  copy per shard (the first in the table); when Dask fails it because a worker is lost, the
  lost copies are dropped and the parts they had are asked again of the shards' other
  copies, so the caller gets the whole answer or, once a shard has no copy left,
  :class:`ShardLost`. The lost copies are made again on other live workers by a background
  thread, each packed into bytes on a surviving copy's worker and unpacked on its new one
  (worker to worker, never through the client).

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
* [AMBIG] A lost worker, with ``replicas = 1`` (the default): the lookup raises
  :class:`ShardLost` (a ``DeviceUnavailable``) and returns nothing; later lookups raise it
  too until the index is built or loaded again. No retry: the client keeps no copy of a
  shard's rows to rebuild it from. With ``replicas >= 2``: the lookup answers in full from
  the shards' other copies (a batch in memory asks them again from the client; a Dask array
  of lookups asks them from the workers, ``dask_lookups.ask_copies``), and no error reaches
  the caller while every shard has a copy; the lost copies are made again in the background
  (``replicas``); once every copy of a shard is lost, ShardLost as with one copy, for good.
  A build, load or save that loses a worker raises ShardLost too and publishes (or writes)
  nothing, whatever Dask raised (``lost``), with any number of copies: a build makes every
  copy before it publishes, and is simply done again.
* [AMBIG] A shard's copies are made by building it once, on worker ``s mod W``, and copying
  the built shard worker to worker, not by building it on each: a copy costs a transfer, not
  a build, and copies are the same index. A copy is made by a task pinned to the source's
  worker that packs the shard into bytes and one pinned to the new worker that unpacks them
  (``replicas.copy_shard_to``), not by a task on the new worker taking the source's future:
  that would leave a replica of the source's key on the new worker, which Dask's active
  memory manager may keep instead of the original, so that two "copies" lived on one
  worker. Shard ``s``'s copies go to workers ``s, s+1, ..., s+R-1`` (modulo ``W``, the
  workers in sorted order). ``replicas`` above the cluster's workers is a
  ConfigError at build (or load), naming the field and the workers there are: the
  parameters cannot know the cluster.
* [AMBIG] Lookups always ask a shard's first live copy (no balancing over copies: the copies
  are for losses, and the first copies are already spread over the workers). A loss is a copy
  whose worker has left the cluster or whose future is no longer held; a Dask failure that no
  copy can be blamed for (none after waiting up to ``LOSS_NOTICED_S`` for the scheduler) is
  taken as a loss for good, as with one copy.
* [AMBIG] Re-replication puts a missing copy on the live worker holding no copy of that shard
  with the fewest copies, one background thread per index state; it waits up to ten minutes
  (``replicas.REPAIR_PATIENCE_S``) for such a worker to join (a cluster with fewer workers
  than ``replicas``), and any later lookup starts it again. Lookups never wait for it.
  ``shard_copies()`` lists each shard's live copies; ``replicating()`` says whether it runs.
* [AMBIG] A Dask array answered with several copies asks the copies that are live when the
  call is made (by key); copies made later are not known to it. Computing it after the index
  was built or loaded again finds the old build's copies released: compute the answers an
  index gave before building it again.
* [AMBIG] Saving and pickling gather every shard's saved form (the inner index's own) to the
  caller, from one live copy each; loading sends them to the workers of the current client
  and makes ``replicas`` copies of each there. So a sharded index saves and pickles like any
  other, at the cost of moving every shard once, and its file does not grow with replicas.
* [AMBIG] ``memory_footprint`` counts every live copy: with ``replicas >= 2`` each copy's
  bytes appear as ``shard{s}.copy{r}.{part}`` (with one copy, ``shard{s}.{part}`` as before);
  while lost copies are being made again the footprint counts the copies held.
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
