"""The sharded index passes the whole conformance suite over indexes of each kind, on a local
cluster of worker processes: ordered (btree: range partitioning), hash-only (warpcore-hash:
hash partitioning), ray-traced (rx), and multi-column (rtscan: row partitioning).

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


class TestShardedOverWarpcoreHash(ConformanceSuite):
    index = ShardedIndex.over("warpcore-hash", shards=3)


class TestShardedOverRx(ConformanceSuite):
    index = ShardedIndex.over("rx", shards=2)


class TestShardedOverRtscan(ConformanceSuite):
    index = ShardedIndex.over("rtscan", shards=2)
