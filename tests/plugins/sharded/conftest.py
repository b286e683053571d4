"""One local Dask cluster of worker processes (2 workers, 1 thread each, on the CPU) per test
module of this folder, shared by its tests and made the process's client for sharded indexes.
Closed after the module's last test: idle workers still take CPU for the rest of the run."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("distributed")


@pytest.fixture(scope="module")
def dask_client() -> Iterator[Any]:
    from distributed import Client, LocalCluster

    from indexzoo.plugins.sharded import use_client

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           dashboard_address=":0")
    client = Client(cluster, set_as_default=False)
    with use_client(client):
        yield client
    client.close()
    cluster.close()


@pytest.fixture(autouse=True)
def _sharded_on_the_test_cluster(dask_client: Any) -> None:
    """Every test here builds its sharded indexes on the shared test cluster."""
