"""``indexzoo run`` on keys without gaps (a file of dense IDs, generated dense keys): the
misses of a workload that left ``out_of_range_share`` to its default go outside
``[min, max]``, and a note says so; a setting the keys cannot meet is an error naming the
field and what is possible. Before, the docs' own run spec (``hit_rate: 0.9``) failed on a
file of dense IDs: "the keys have no gaps, so misses inside [min, max] are impossible"."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from indexzoo.errors import ConfigError
from indexzoo.tools.runner import run_spec

ROOT = Path(__file__).resolve().parents[2]


def docs_run_spec() -> dict[str, Any]:
    """The run spec of docs/cli.md (the first YAML block under "## `run`")."""
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    start = text.index("## `run`\n")
    block = re.search(r"^```yaml\n(.*?)^```", text[start:], re.M | re.S)
    assert block is not None
    return dict(yaml.safe_load(block.group(1)))


def _run(tmp_path: Path, spec: dict[str, Any]) -> str:
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = io.StringIO()
    assert run_spec(path, out) == 0
    return out.getvalue()


def _hits(text: str) -> tuple[int, int, int]:
    m = re.search(r"^hits +([\d,]+) of ([\d,]+) \(workload built for ([\d,]+)\)", text, re.M)
    assert m is not None, text
    hits, total, built = (int(g.replace(",", "")) for g in m.groups())
    return hits, total, built


def test_the_docs_run_spec_runs_on_a_file_of_dense_ids(tmp_path: Path) -> None:
    np.save(tmp_path / "keys.npy", np.arange(100_000))
    spec = docs_run_spec()
    assert spec["keys"] == "keys.npy" and spec["workload"]["hit_rate"] == 0.9
    spec.update(device="cpu", repeats=1)
    spec["workload"]["n_lookups"] = 20_000
    text = _run(tmp_path, spec)
    assert (f"note       the keys of {tmp_path / 'keys.npy'} have no gaps between them, so the "
            "2,000 misses fall outside [min, max]: workload.out_of_range_share 1 instead of "
            "0\n") in text
    assert _hits(text) == (18_000, 20_000, 18_000)


def test_generated_dense_keys_take_their_misses_outside_too(tmp_path: Path) -> None:
    text = _run(tmp_path, {"index": "sorted-array", "device": "cpu", "repeats": 1, "workload": {
        "n_keys": 4096, "distribution": "dense", "n_lookups": 1000, "hit_rate": 0.5}})
    assert "note       the dense keys have no gaps between them, so the 500 misses" in text
    assert _hits(text) == (500, 1000, 500)


def test_misses_outside_a_narrow_key_file_stay_in_its_dtype(tmp_path: Path) -> None:
    # uint16 keys are held as uint32: misses drawn above 65,535 would wrap onto keys and hit
    np.save(tmp_path / "ids.npy", np.arange(1000, dtype=np.uint16))
    text = _run(tmp_path, {"index": "sorted-array", "device": "cpu", "repeats": 1,
                           "keys": "ids.npy", "workload": {"n_lookups": 20_000, "hit_rate": 0.5}})
    assert "workload.out_of_range_share 1 instead of 0" in text
    assert _hits(text) == (10_000, 20_000, 10_000)


def test_a_workload_that_fits_the_keys_gets_no_note(tmp_path: Path) -> None:
    np.save(tmp_path / "keys.npy", np.arange(10_000))
    text = _run(tmp_path, {"index": "sorted-array", "device": "cpu", "repeats": 1,
                           "keys": "keys.npy", "workload": {
                               "n_lookups": 1000, "hit_rate": 0.9, "out_of_range_share": 1.0}})
    assert "note" not in text and _hits(text) == (900, 1000, 900)


def test_an_out_of_range_share_dense_keys_cannot_meet_is_an_error_naming_it(
        tmp_path: Path) -> None:
    np.save(tmp_path / "keys.npy", np.arange(10_000))
    path = tmp_path / "run.yaml"
    path.write_text("index: sorted-array\ndevice: cpu\nkeys: keys.npy\n"
                    "workload: {n_lookups: 1000, hit_rate: 0.9, out_of_range_share: 0.5}\n")
    with pytest.raises(ConfigError, match=r"^workload.out_of_range_share 0.5 cannot be met: "
                       r"the keys of \S+/keys.npy have no gaps between them; only "
                       r"out_of_range_share 1 is possible$"):
        run_spec(path, io.StringIO())


def test_keys_that_leave_no_room_for_a_miss_name_hit_rate(tmp_path: Path) -> None:
    # text keys are held as their ranks in the file's dictionary: every rank is a key
    np.save(tmp_path / "words.npy", np.array(["ant", "bee", "cat"]))
    path = tmp_path / "run.yaml"
    path.write_text("index: sorted-array\ndevice: cpu\nkeys: words.npy\n"
                    "workload: {n_lookups: 100, hit_rate: 0.9}\n")
    with pytest.raises(ConfigError, match=r"^workload.hit_rate 0.9 cannot be met: the keys of "
                       r"\S+/words.npy leave no value .*; only hit_rate 1 is possible$"):
        run_spec(path, io.StringIO())
