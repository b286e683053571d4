"""The stateful check runs any sequence of the contract's operations against a model, and its
failure message is a few lines of Python that replay the shrunk sequence."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
from support.broken_indexes import OffByOneRangeBound

from indexzoo.conformance import make_context, run_checks, summary

LABEL = "differential/any_sequence_of_operations_answers_like_the_model"


def test_a_correct_index_passes() -> None:
    results = run_checks(make_context("sorted-array", device="cpu", seed=5), labels=[LABEL])
    assert [(r.label, r.status) for r in results] == [(LABEL, "passed")], summary(results)


def test_a_wrong_range_bound_fails_with_a_replay_that_shows_the_wrong_answer() -> None:
    results = run_checks(make_context(OffByOneRangeBound, device="cpu", seed=5), labels=[LABEL])
    assert [(r.label, r.status) for r in results] == [(LABEL, "failed")], summary(results)
    message = results[0].message
    code = [line.strip() for line in message.split("replayed by:\n", 1)[1].splitlines()]
    assert code[:2] == ["import pickle, numpy as np, indexzoo",
                        "from support.broken_indexes import OffByOneRangeBound"], message
    assert len(code) <= 6, message  # shrunk: the imports, the index, a build and a lookup
    # the replay runs, and its last lookup answers unlike NumPy over the keys it built
    space: dict[str, Any] = {}
    exec("\n".join(code[:-1]), space)
    built = next(line for line in reversed(code) if line.startswith("index.build("))
    keys = eval(built.removeprefix("index.build(")[:-1], space)
    last = code[-1]
    arrays = [eval(a, space) for a in re.findall(r"np\.array\(\[[^]]*\], dtype=np\.\w+\)", last)]
    lo, hi = (arrays[0], arrays[0]) if last.startswith("index.point(") else arrays
    counts = np.array([np.count_nonzero((keys >= a) & (keys <= b)) for a, b in zip(lo, hi, strict=True)])
    mode = re.search(r"out='(\w+)'", last)
    assert mode is not None and mode.group(1) in ("count", "rowid"), message
    got = np.asarray(eval(last, space).to_host())
    if mode.group(1) == "count":
        assert not np.array_equal(got, counts), message
    else:
        assert not np.array_equal(got != space["index"].miss, counts > 0), message
