"""``indexzoo.join``: an index nested-loop inner join, checked against a NumPy sort-merge join
on duplicates, misses, empty sides and every key dtype the key map accepts."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from indexzoo import InvalidInput, Unsupported
from indexzoo.join import join


def merge_join(left: np.ndarray, right: np.ndarray) -> set[tuple[int, int]]:
    """The reference: sort the right side, find each left key's run, expand."""
    order = np.argsort(right, kind="stable")
    sr = right[order]
    a = np.searchsorted(sr, left, side="left")
    b = np.searchsorted(sr, left, side="right")
    return {(i, int(order[j])) for i in range(left.shape[0]) for j in range(a[i], b[i])}


def pairs(res: Any) -> set[tuple[int, int]]:
    h = res.to_host()
    got = list(zip(h.left.tolist(), h.right.tolist(), strict=True))
    assert len(got) == len(set(got)), "a pair is reported twice"
    return set(got)


rng = np.random.default_rng(4)
CASES = {
    "uint64 with duplicates and misses": (rng.integers(0, 50, 300).astype(np.uint64),
                                         rng.integers(0, 70, 120).astype(np.uint64)),
    "int32 against int64": (rng.integers(-20, 20, 80).astype(np.int32),
                            rng.integers(-30, 30, 90).astype(np.int64)),
    "float64 with -0.0": (np.array([0.0, -0.0, 1.5, 2.5, np.inf]),
                          np.array([-0.0, 1.5, 1.5, -np.inf, np.inf])),
    "bytes": (np.array([b"ab", b"c", b"ab", b"zz"], dtype="S3"),
              np.array([b"ab", b"zz", b"q"], dtype="S2")),
    "datetime64": (np.array(["2026-01-01", "2026-01-02", "2026-01-01"], dtype="datetime64[D]"),
                   np.array(["2026-01-01", "2025-12-31"], dtype="datetime64[D]")),
    "empty left": (np.zeros(0, np.uint64), rng.integers(0, 5, 10).astype(np.uint64)),
    "empty right": (rng.integers(0, 5, 10).astype(np.uint64), np.zeros(0, np.uint64)),
    "no match": (np.arange(10, dtype=np.uint64), np.arange(10, 20, dtype=np.uint64)),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
@pytest.mark.parametrize("index", ["sorted-array", "warpcore-hash", "rx-opt", "linear-scan"])
@pytest.mark.parametrize("build", ["auto", "left", "right"])
def test_join_equals_a_sort_merge_join(case: str, index: str, build: str) -> None:
    left, right = CASES[case]
    res = join(left, right, index=index, device="cpu", build=build)  # type: ignore[arg-type]
    assert pairs(res) == merge_join(left, right)
    if build == "auto":
        assert res.built_on == ("left" if left.shape[0] <= right.shape[0] else "right")


def test_pairs_come_grouped_by_the_probing_side() -> None:
    left = np.array([3, 1, 3, 2], np.uint64)
    right = np.array([3, 3, 1, 9, 2, 2, 3], np.uint64)
    res = join(left, right, device="cpu").to_host()
    assert res.built_on == "left"
    assert (np.diff(res.right) >= 0).all()  # probes: the right side, in rowID order


def test_an_index_without_rowids_cannot_join_and_bad_input_is_refused() -> None:
    spec = {"index": "searchsorted", "device": "cpu"}
    assert len(join([1, 2], [2, 2], index=spec)) == 2
    with pytest.raises(InvalidInput, match="'build'"):
        join([1], [1], build="middle")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="'left_keys'"):
        join(np.zeros((2, 2)), [1])
    from indexzoo.plugins.sorted_array import SortedArrayIndex

    class PointOnly(SortedArrayIndex):
        name = "point-only-join"
        narrows = True  # sorted-array without its list and sum answers, on purpose
        capabilities = SortedArrayIndex.capabilities.model_copy(
            update={"out_modes": ("rowid", "count")})

    import indexzoo

    mod = type(indexzoo)("point_only_join")

    @indexzoo.hookimpl
    def indexzoo_register_indexes(register: Any) -> None:
        register(PointOnly)

    mod.indexzoo_register_indexes = indexzoo_register_indexes  # type: ignore[attr-defined]
    from indexzoo import registry

    indexzoo.register_plugin(mod, name="point-only-join")
    try:
        with pytest.raises(Unsupported, match="needs point lookups with out='rowids'"):
            join([1], [1], index="point-only-join", device="cpu")
    finally:
        registry.unregister_plugin("point-only-join")
