"""torch tensors (CPU) as keys and lookups: read through DLPack, answered like NumPy arrays;
the dtypes and tensors NumPy cannot take are refused with the whole reason and the fix.
Skipped where torch is not installed (it is not in the test extra: a CPU build is 700 MB)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

import indexzoo
from indexzoo.errors import InvalidInput

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("dtype", ["int64", "int32", "float32", "float64"])
def test_a_tensor_answers_like_the_same_numpy_array(dtype: str) -> None:
    keys = torch.arange(0, 200, 2, dtype=getattr(torch, dtype))
    probe = torch.tensor([4, 5, 198, 300], dtype=keys.dtype)
    got = indexzoo.create("sorted-array", device="cpu").build(keys).point(probe, out="count")
    want = indexzoo.create("sorted-array", device="cpu").build(keys.numpy()).point(
        probe.numpy(), out="count")
    assert np.array_equal(got.count, want.count) and got.count.tolist() == [1, 0, 1, 0]


def test_wide_int64_keys_beside_a_float_column_stay_exact() -> None:
    a = torch.tensor([2**60, 2**60 + 1])
    b = torch.tensor([0.5, 0.5], dtype=torch.float64)
    index = indexzoo.create("rtscan", device="cpu").build([a, b])
    assert index.point([[2**60 + 1], [0.5]], out="count").count.tolist() == [1]
    assert index.point([[2**60], [0.5]], out="count").count.tolist() == [1]


def test_bfloat16_is_refused_with_the_whole_reason_and_the_fix() -> None:
    with pytest.raises(InvalidInput) as got:
        indexzoo.create("sorted-array", device="cpu").build(torch.arange(10, dtype=torch.bfloat16))
    text = str(got.value)
    assert "of dtype torch.bfloat16" in text
    assert text.endswith("convert bfloat16 to float32 first (tensor.float())")


def test_a_tensor_that_requires_grad_is_refused_with_detach_as_the_fix() -> None:
    keys = torch.arange(10, dtype=torch.float32).requires_grad_(True)
    with pytest.raises(InvalidInput) as got:
        indexzoo.create("sorted-array", device="cpu").build(keys)
    assert "with requires_grad=True" in str(got.value)
    assert str(got.value).endswith("pass tensor.detach()")


def test_an_index_built_from_tensors_pickles() -> None:
    index = indexzoo.create("btree", device="cpu").build(torch.arange(1000))
    again = pickle.loads(pickle.dumps(index))
    assert again.point(torch.tensor([5, 2000]), out="count").count.tolist() == [1, 0]
