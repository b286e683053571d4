"""The loop the target scripts (``cgrx_targets.py``, ``rx_opt_targets.py``) share: run the chosen
steps in order, print each step's figures as it ends, hand the GPU's cached blocks back
between steps, and keep the JSON file up to date, so that a call cut by its time limit still
leaves every finished step behind."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from indexzoo.tools.timing import synchronize


def run_steps(steps: dict[str, Callable[[], Any]], names: str, device: str,
              results: dict[str, Any], json_path: str | None) -> None:
    """Run ``steps[name]()`` for each comma-separated name of ``names`` into ``results``."""
    for name in names.split(","):
        results[name] = steps[name]()
        synchronize(device)
        print(name, json.dumps(results[name], indent=1), flush=True)
        if device == "cuda":
            import cupy

            cupy.get_default_memory_pool().free_all_blocks()
        if json_path:
            with open(json_path, "w") as f:
                json.dump(results, f, indent=1)
