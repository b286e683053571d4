"""CPU kernels are safe to call from several threads under every numba threading layer.

numba falls back to its ``workqueue`` layer where neither TBB nor OpenMP is installed; that
layer aborts the process when two threads enter parallel code at once. The kernels then take a
lock (``indexzoo.native.targets.WORKQUEUE_LOCK``): concurrent lookups run one at a time, and
nothing aborts.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import threading
    import numba
    import numpy as np
    import indexzoo

    keys = np.random.default_rng(0).integers(0, 2**40, 50_000, dtype=np.uint64)
    indexes = [indexzoo.create(name, device="cpu").build(keys)
               for name in ("sorted-array", "btree", "eo-ks")]
    q = keys[:3000]
    for index in indexes:
        index.point(q, out="count")
    print("layer", numba.threading_layer(), flush=True)
    errors = []

    def work(index):
        try:
            for _ in range(40):
                assert int(index.point(q, out="count").count.min()) >= 1
        except Exception as exc:
            errors.append(repr(exc))

    threads = [threading.Thread(target=work, args=(ix,)) for ix in indexes * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("errors", errors)
""")


@pytest.mark.parametrize("layer", ["workqueue", "default"])
def test_concurrent_lookups_do_not_abort_under_any_threading_layer(layer: str) -> None:
    env = dict(os.environ)
    env.pop("NUMBA_THREADING_LAYER", None)
    # the lookups of 3000 keys on the thread pool (the tests keep kernels serial otherwise)
    env.update(INDEXZOO_CPU_SERIAL_BELOW="1024", INDEXZOO_CPU_SERIAL_BELOW_RAYS="1024")
    if layer != "default":
        env["NUMBA_THREADING_LAYER"] = layer
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    if layer != "default":
        assert f"layer {layer}" in proc.stdout
    assert "errors []" in proc.stdout, proc.stdout
