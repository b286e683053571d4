"""``indexzoo run`` reads Parquet and Arrow IPC (Feather) key files: one column named by
``column:`` (or the file's only column), several by ``columns:`` for a multi-column index;
misnamed columns, nulls and unreadable files are errors that say so. Before, a ``.parquet``
key file failed with "is not a text file ... line 1 is not UTF-8 text"."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest

from indexzoo.errors import ConfigError
from indexzoo.tools.runner import run_spec

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
feather = pytest.importorskip("pyarrow.feather")

IDS = np.arange(0, 3000, 3, dtype=np.int64)
TABLE = {"id": IDS, "when": pa.array(IDS * 1_000_000, pa.timestamp("us", tz="Europe/Paris")),
         "name": [f"n{i:05d}" for i in range(IDS.shape[0])], "x": IDS.astype(np.float64) / 7}


@pytest.fixture(params=["k.parquet", "k.feather", "k.arrow"])
def key_file(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    path = tmp_path / request.param
    table = pa.table(TABLE)
    if path.suffix == ".parquet":
        pq.write_table(table, path)
    else:
        feather.write_feather(table, path)
    return path


def _run(tmp_path: Path, keys: str, index: str = "sorted-array", hit_rate: float = 0.5) -> str:
    spec = tmp_path / "run.yaml"
    spec.write_text(f"index: {index}\ndevice: cpu\nkeys: {keys}\nrepeats: 1\n"
                    f"workload: {{n_lookups: 400, hit_rate: {hit_rate}}}\n")
    out = io.StringIO()
    assert run_spec(spec, out) == 0
    return out.getvalue()


def test_a_named_column_of_a_table_file_is_the_key_column(key_file: Path, tmp_path: Path,
                                                          ) -> None:
    text = _run(tmp_path, f"{{path: {key_file.name}, column: id}}")
    assert "1,000 of dtype int64" in text
    assert "hits       200 of 400" in text


@pytest.mark.parametrize(("column", "dtype"), [("name", "<U6"), ("when", "datetime64[us]")])
def test_text_and_time_zone_columns_run_too(key_file: Path, tmp_path: Path, column: str,
                                           dtype: str) -> None:
    text = _run(tmp_path, f"{{path: {key_file.name}, column: {column}}}", hit_rate=1.0)
    assert f"of dtype {dtype}" in text
    assert "hits       400 of 400" in text


def test_columns_feed_a_multi_column_index(key_file: Path, tmp_path: Path) -> None:
    text = _run(tmp_path, f"{{path: {key_file.name}, columns: [id, x]}}", index="fused-scan")
    assert "hits       200 of 400" in text


def test_a_file_of_one_column_needs_no_column_name(tmp_path: Path) -> None:
    pq.write_table(pa.table({"k": IDS}), tmp_path / "one.parquet")
    assert "hits       200 of 400" in _run(tmp_path, "one.parquet")


@pytest.mark.parametrize(("keys", "message"), [
    ("{path: k.parquet}", r"has 4 columns .*name the key column with `column:`"),
    ("{path: k.parquet, column: nope}", r"has no column 'nope'; its columns: \['id'"),
    ("{path: k.parquet, column: id, columns: [x]}", "not both"),
    ("{path: k.npy, column: id}", "name columns of a Parquet or Arrow IPC key file"),
    ("{path: nulls.parquet, column: k}", r"column 'k': null at position 1"),
    ("{path: bad.parquet, column: k}", "is not a Parquet file PyArrow can read"),
])
def test_bad_table_key_files_say_what_is_wrong(tmp_path: Path, keys: str, message: str,
                                               ) -> None:
    pq.write_table(pa.table(TABLE), tmp_path / "k.parquet")
    pq.write_table(pa.table({"k": [1, None, 3]}), tmp_path / "nulls.parquet")
    (tmp_path / "bad.parquet").write_text("id\n1\n2\n")
    np.save(tmp_path / "k.npy", IDS)
    with pytest.raises(ConfigError, match=message):
        _run(tmp_path, keys)
