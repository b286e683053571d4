"""The sharded index passes the whole conformance suite over indexes of each kind, on a local
cluster of worker processes: ordered (btree: range partitioning), hash-only (warpcore-hash:
hash partitioning), ray-traced (rx), and multi-column (rtscan: row partitioning), and over
btree with two copies of each shard (every answer from one copy per shard, the footprint
counting both). The suite has no fault checks (they need a cluster whose workers a test may
kill): test_sharded_faults.py runs those with one and two copies.

``sharded`` over its default inner index (sorted-array) runs in
tests/conformance/test_builtin_conformance.py like every built-in index, on the local cluster
a sharded index starts by itself; these run under the ``exhaustive`` marker (CI's exhaustive
tier) to keep the README's test command short.
"""

from __future__ import annotations

import pytest

from indexzoo.conformance import ConformanceSuite
from indexzoo.plugins.sharded import ShardedIndex

pytestmark = pytest.mark.exhaustive


class TestShardedOverBtree(ConformanceSuite):
    index = ShardedIndex.over("btree", shards=3)


class TestShardedOverBtreeWithTwoCopies(ConformanceSuite):
    index = ShardedIndex.over("btree", shards=3, replicas=2)


class TestShardedOverWarpcoreHash(ConformanceSuite):
    index = ShardedIndex.over("warpcore-hash", shards=3)


class TestShardedOverRx(ConformanceSuite):
    index = ShardedIndex.over("rx", shards=2)


class TestShardedOverRtscan(ConformanceSuite):
    index = ShardedIndex.over("rtscan", shards=2)
