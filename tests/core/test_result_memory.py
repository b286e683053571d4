"""Results whose size follows from the input (the CSR of ``out="rowids"``, join pairs) are
refused with ResourceError before they are listed when they cannot fit: the message gives the
bytes needed, what for and what is free. The free memory is a monkeypatched figure here, never
a real huge allocation."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import indexzoo
from indexzoo import ResourceError, result_memory
from indexzoo.join import join


def _free(monkeypatch: pytest.MonkeyPatch, nbytes: int, check_from: int = 0) -> None:
    monkeypatch.setattr(result_memory, "available_memory",
                        lambda device: (nbytes, f"a test's {nbytes} B"))
    monkeypatch.setattr(result_memory, "CHECK_FROM", check_from)


def _listing_refused(name: str = "sorted-array") -> Any:
    """An index of ``name`` whose hooks that list matches fail the test if they run."""
    base = type(indexzoo.create(name, device="cpu"))

    class NeverLists(base):  # type: ignore[misc, valid-type]
        def _point_rowids(self, st: Any, q: Any) -> Any:
            raise AssertionError("the matches were listed before the memory check")

        def _range_rowids(self, st: Any, lo: Any, hi: Any) -> Any:
            raise AssertionError("the matches were listed before the memory check")

    return NeverLists(device="cpu")


def test_point_rowids_that_cannot_fit_are_refused_before_they_are_listed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    index = _listing_refused().build(np.zeros(1000, dtype=np.uint32))
    _free(monkeypatch, 100_000)
    with pytest.raises(ResourceError) as got:
        index.point(np.zeros(100, dtype=np.uint32), out="rowids")
    text = str(got.value)
    assert "out='rowids' for 100 point lookups over 1,000 rows (100,000 matches" in text
    assert "(400,808 bytes)" in text  # 100,000 4-byte rowIDs and 101 8-byte offsets
    assert "only 100.0 kB is available (a test's 100000 B)" in text


def test_range_rowids_that_cannot_fit_are_refused_before_they_are_listed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    index = _listing_refused().build(np.arange(1000, dtype=np.uint32))
    _free(monkeypatch, 50_000)
    lo, hi = np.zeros(20, dtype=np.uint32), np.full(20, 999, dtype=np.uint32)
    with pytest.raises(ResourceError, match=r"out='rowids' for 20 range lookups over 1,000 "
                                            r"rows \(20,000 matches.*80,168 bytes"):
        index.range(lo, hi, out="rowids")
    assert index.range(lo, hi, out="count").count.tolist() == [1000] * 20  # counts still go


def test_rowids_that_fit_are_answered_although_their_worst_case_would_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    index = indexzoo.create("sorted-array", device="cpu").build(np.arange(1000, dtype=np.uint32))
    _free(monkeypatch, 10_000)  # every lookup matching every row: 400 kB; the real CSR: 1.2 kB
    res = index.point(np.arange(100, dtype=np.uint32), out="rowids")
    assert res.to_host().rowids.tolist() == list(range(100))


def test_small_rowids_skip_the_free_memory_query(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_query(device: str) -> None:
        raise AssertionError("available_memory was queried for a small result")

    monkeypatch.setattr(result_memory, "available_memory", no_query)
    index = indexzoo.create("sorted-array", device="cpu").build(np.zeros(1000, np.uint32))
    assert index.point(np.zeros(10, np.uint32), out="rowids").offsets.tolist()[-1] == 10_000


def test_join_pairs_that_cannot_fit_are_refused_before_they_are_listed(
        monkeypatch: pytest.MonkeyPatch) -> None:
    _free(monkeypatch, 1_000_000)
    with pytest.raises(ResourceError) as got:
        join(np.zeros(1000, np.uint32), np.zeros(100, np.uint32), device="cpu")
    text = str(got.value)
    assert "join of 1,000 probes against 100 keys (100,000 pairs: 20 bytes per pair" in text
    assert "(2,008,008 bytes)" in text and "a test's 1000000 B" in text
    assert len(join(np.arange(1000), np.arange(100), device="cpu")) == 100  # fits: answered
