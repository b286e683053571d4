"""Text and byte strings are exact keys, NULs included: ``"a"``, ``"a\\x00"`` and
``"a\\x00\\x00"`` are three keys in every index and in ``join``, whichever library held them
(NumPy's ``U``/``S`` dtypes drop trailing NULs, so text is read as Python objects), and a
lookup of a NUL variant that was not built misses. The oracle is Python's own ``==`` and
``<`` on the values (code point order for text, byte order for bytes)."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import indexzoo
from indexzoo.join import join
from indexzoo.reading import read_column

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
try:  # an optional reader (the GPU machine's image lacks it): its inputs are left out there
    import polars as pl
except ImportError:
    pl = None

TEXT = ["", "\x00", "a", "a\x00", "a\x00b", "a\x00\x00", "é", "\U0001F600", "a", "b\x00"]
#: lookups: the keys, and NUL variants (and neighbours) that no key equals
TEXT_MISSES = ["a\x00\x00\x00", "\x00\x00", "é\x00", "b", "\U0001F600\x00", "a\x01"]
BYTES = [b"", b"\x00", b"a", b"a\x00", b"a\x00b", b"a\x00\x00", b"\xff", b"abcdefgh\x00",
         b"a", b"abcdefghij"]
BYTES_MISSES = [b"a\x00\x00\x00", b"\x00\x00", b"abcdefgh", b"\xff\x00", b"b"]

Maker = Callable[[list[Any]], Any]

TEXT_INPUTS: dict[str, Maker] = {
    "list": list,
    "numpy object": lambda v: np.array(v, dtype=object),
    "pandas object": lambda v: pd.Series(v, dtype=object),
    "pandas str (default)": pd.Series,
    "pandas string[python]": lambda v: pd.Series(v, dtype="string[python]"),
    "pandas string[pyarrow]": lambda v: pd.Series(v, dtype="string[pyarrow]"),
    "pandas categorical": lambda v: pd.Series(v, dtype="category"),
    "arrow string": lambda v: pa.array(v, pa.string()),
    "arrow large_string": lambda v: pa.array(v, pa.large_string()),
    "arrow dictionary": lambda v: pa.array(v, pa.string()).dictionary_encode(),
    "arrow chunked": lambda v: pa.chunked_array([v[:3], v[3:]], pa.string()),
}
if pl is not None:
    TEXT_INPUTS["polars"] = lambda v: pl.Series(v, dtype=pl.String)
    TEXT_INPUTS["polars categorical"] = lambda v: pl.Series(v, dtype=pl.Categorical)
if hasattr(getattr(np, "dtypes", None), "StringDType"):  # NumPy 2: variable-width text
    TEXT_INPUTS["numpy StringDType"] = lambda v: np.array(v, dtype=np.dtypes.StringDType())
BYTES_INPUTS: dict[str, Maker] = {
    "list": list,
    "numpy object": lambda v: np.array(v, dtype=object),
    "pandas object": lambda v: pd.Series(v, dtype=object),
    "arrow binary": lambda v: pa.array(v, pa.binary()),
    "arrow large_binary": lambda v: pa.array(v, pa.large_binary()),
    "arrow dictionary": lambda v: pa.array(v, pa.binary()).dictionary_encode(),
}
if pl is not None:
    BYTES_INPUTS["polars"] = lambda v: pl.Series(v, dtype=pl.Binary)


def _rowids(res: Any) -> list[list[int]]:
    h = res.to_host()
    return [sorted(h.rowids[h.offsets[i]:h.offsets[i + 1]].tolist())
            for i in range(h.offsets.shape[0] - 1)]


def _want_points(keys: list[Any], queries: list[Any]) -> list[list[int]]:
    return [[i for i, k in enumerate(keys) if k == q] for q in queries]


def _want_ranges(keys: list[Any], lo: list[Any], hi: list[Any]) -> list[list[int]]:
    return [[i for i, k in enumerate(keys) if a <= k <= b] for a, b in zip(lo, hi, strict=True)]


def _bounds(values: list[Any]) -> tuple[list[Any], list[Any]]:
    """Every pair (a, b) with a <= b over ``values``: ranges that start or end on a NUL
    variant, present or not."""
    pairs = [(a, b) for a in values for b in values if a <= b]
    return [a for a, _ in pairs], [b for _, b in pairs]


def _check_exact(index: Any, keys: list[Any], misses: list[Any]) -> None:
    queries = keys + misses
    assert _rowids(index.point(queries, out="rowids")) == _want_points(keys, queries)
    want_count = [len(r) for r in _want_points(keys, queries)]
    assert index.point(queries, out="count").to_host().count.tolist() == want_count
    if index.capabilities.range:
        lo, hi = _bounds(sorted(set(queries)))
        assert _rowids(index.range(lo, hi, out="rowids")) == _want_ranges(keys, lo, hi)


# ---------------------------------------------------------------------- the order promised
def test_python_order_is_code_point_order_and_numpy_keeps_it_on_objects() -> None:
    values = np.array(["b", "a\x00\x00", "a", "a\x00", "a\x00b"], dtype=object)
    uniq = np.unique(values)
    assert uniq.tolist() == ["a", "a\x00", "a\x00\x00", "a\x00b", "b"]
    found = np.searchsorted(uniq, np.array(["a\x00", "a\x00\x00\x00", "b"], dtype=object))
    assert found.tolist() == [1, 3, 4]


# ---------------------------------------------------------------------- reading
#: every text and every byte-string input, with the values it is made of
READ_CASES: dict[str, tuple[Maker, list[Any]]] = {
    **{f"text {k}": (make, TEXT) for k, make in TEXT_INPUTS.items()},
    **{f"bytes {k}": (make, BYTES) for k, make in BYTES_INPUTS.items()}}


@pytest.mark.parametrize("case", list(READ_CASES))
def test_read_column_gives_text_and_byte_strings_as_python_str_and_bytes_with_their_nuls(
        case: str) -> None:
    make, values = READ_CASES[case]
    got = read_column(make(values), "keys").values
    assert got.dtype == np.dtype(object)
    assert all(type(v) is type(values[0]) for v in got)
    assert got.tolist() == values
    uniq, codes = np.unique(got, return_inverse=True)  # what the query engines do
    assert uniq.tolist() == sorted(set(values)) and uniq[codes].tolist() == values


def test_numpy_fixed_width_arrays_are_read_as_they_are() -> None:
    u, s = np.array(["a", "a\x00b"]), np.array([b"a", b"a\x00b"])
    assert read_column(u, "keys").values is u and read_column(s, "keys").values is s


def test_an_empty_text_column_says_its_kind() -> None:
    assert read_column(pd.Series([], dtype="string"), "keys").values.dtype == np.dtype("U1")
    assert read_column(pa.array([], pa.binary()), "keys").values.dtype == np.dtype("S1")
    index = indexzoo.create("sorted-array", device="cpu").build(pa.array([], pa.string()))
    assert index.point(["a"], out="count").count.tolist() == [0]


# ---------------------------------------------------------------------- every input
@pytest.mark.parametrize("kind", list(TEXT_INPUTS))
def test_text_keys_with_nuls_are_distinct_from_every_input(kind: str) -> None:
    index = indexzoo.create("sorted-array", device="cpu").build(TEXT_INPUTS[kind](TEXT))
    _check_exact(index, TEXT, TEXT_MISSES)


@pytest.mark.parametrize("kind", list(TEXT_INPUTS))
def test_text_lookups_with_nuls_are_exact_from_every_input(kind: str) -> None:
    index = indexzoo.create("sorted-array", device="cpu").build(TEXT)
    queries = TEXT + TEXT_MISSES
    got = index.point(TEXT_INPUTS[kind](queries), out="count").to_host().count.tolist()
    assert got == [len(r) for r in _want_points(TEXT, queries)]


@pytest.mark.parametrize("kind", list(BYTES_INPUTS))
def test_byte_string_keys_with_nuls_are_distinct_from_every_input(kind: str) -> None:
    index = indexzoo.create("sorted-array", device="cpu").build(BYTES_INPUTS[kind](BYTES))
    _check_exact(index, BYTES, BYTES_MISSES)


def test_numpy_text_arrays_hold_what_numpy_holds_and_lookups_stay_exact() -> None:
    # NumPy made "a" of "a\x00": the keys are "a" twice; a lookup of "a\x00" from a list misses
    index = indexzoo.create("sorted-array", device="cpu").build(np.array(["a", "a\x00", "b"]))
    assert index.point(["a", "a\x00", np.str_("b")], out="count").count.tolist() == [2, 0, 1]
    assert index.range(["a\x00"], ["b"], out="count").count.tolist() == [1]
    assert index.point(np.array(["a\x00"]), out="count").count.tolist() == [2]


def test_short_numpy_byte_keys_compare_exactly_with_python_bytes_lookups() -> None:
    # S arrays of up to 8 bytes keep their bit map; Python bytes lookups ending in NUL miss
    keys = [b"a", b"ab", b"abcdefgh", b"b"]
    index = indexzoo.create("sorted-array", device="cpu").build(np.array(keys))
    _check_exact(index, keys, [b"a\x00", b"ab\x00\x00", b"abcdefgh\x00", b"abcdefgh\x00x",
                               b"\x00", b""])


# ---------------------------------------------------------------------- every index
def _text_indexes() -> list[str]:
    """Every registered index (each takes text through the base class's key map); the
    sharded one needs a cluster and is checked in tests/plugins/sharded."""
    return sorted(name for name in indexzoo.available() if name != "sharded")


def _create(name: str, device: str) -> Any:
    if device not in indexzoo.available()[name].capabilities.devices:
        pytest.skip(f"{name} does not run on {device}")
    return indexzoo.create(name, device=device)


@pytest.mark.parametrize("name", _text_indexes())
def test_every_index_tells_text_keys_apart_by_their_nuls(name: str, device: str) -> None:
    index = _create(name, device).build(TEXT)
    _check_exact(index, TEXT, TEXT_MISSES)


@pytest.mark.parametrize("name", _text_indexes())
def test_every_index_tells_byte_string_keys_apart_by_their_nuls(name: str, device: str
                                                                 ) -> None:
    index = _create(name, device).build(pa.array(BYTES, pa.binary()))
    _check_exact(index, BYTES, BYTES_MISSES)


# ---------------------------------------------------------------------- join
def _pairs(res: Any) -> set[tuple[int, int]]:
    h = res.to_host()
    return set(zip(h.left.tolist(), h.right.tolist(), strict=True))


@pytest.mark.parametrize("kind", list(TEXT_INPUTS))
@pytest.mark.parametrize("build", ["left", "right"])
def test_join_pairs_text_only_where_equal_nuls_included(kind: str, build: str, device: str
                                                        ) -> None:
    right = TEXT_MISSES + TEXT[::2]
    res = join(TEXT_INPUTS[kind](TEXT), right, build=build,  # type: ignore[arg-type]
               device=device)
    want = {(i, j) for i, a in enumerate(TEXT) for j, b in enumerate(right) if a == b}
    assert _pairs(res) == want


@pytest.mark.parametrize("kind", list(BYTES_INPUTS))
@pytest.mark.parametrize("index", ["sorted-array", "warpcore-hash"])
def test_join_pairs_byte_strings_only_where_equal_nuls_included(kind: str, index: str,
                                                                device: str) -> None:
    right = BYTES_MISSES + BYTES[1::2]
    res = join(BYTES_INPUTS[kind](BYTES), right, index=index, device=device)
    want = {(i, j) for i, a in enumerate(BYTES) for j, b in enumerate(right) if a == b}
    assert _pairs(res) == want


# ---------------------------------------------------------------------- saved and moved
def test_a_saved_or_pickled_index_keeps_text_with_nuls(tmp_path: Path, device: str) -> None:
    keys = [*TEXT, "\ud800"]  # a lone surrogate too
    index = indexzoo.create("btree", device=device).build(keys)
    index.save(tmp_path / "t.izo")
    for back in (indexzoo.load(tmp_path / "t.izo"), pickle.loads(pickle.dumps(index))):
        assert back.device == device
        assert back.state.keymap == index.state.keymap
        _check_exact(back, keys, TEXT_MISSES)


def test_a_saved_index_keeps_byte_strings_with_nuls(tmp_path: Path) -> None:
    indexzoo.create("btree", device="cpu").build(BYTES).save(tmp_path / "b.izo")
    _check_exact(indexzoo.load(tmp_path / "b.izo"), BYTES, BYTES_MISSES)


def test_decoded_keys_are_the_exact_values() -> None:
    index = indexzoo.create("sorted-array", device="cpu").build(TEXT)
    km = index.state.keymap
    assert km.decode(km.encode(np.array(TEXT, dtype=object))).tolist() == TEXT
