"""The plugin-author guide's minimal RT index (docs/examples/rt_boxes.py) is real code: the
guide shows the file verbatim, and the conformance suite certifies it."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

from indexzoo.conformance import ConformanceSuite

DOCS = Path(__file__).parents[2] / "docs"


def _load(path: Path) -> object:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


rt_boxes = _load(DOCS / "examples" / "rt_boxes.py")


class TestRtBoxes(ConformanceSuite):
    index = rt_boxes.RtBoxIndex  # type: ignore[attr-defined]


def test_the_guide_shows_the_example_verbatim() -> None:
    guide = (DOCS / "plugin-authors.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", guide, flags=re.S)
    source = (DOCS / "examples" / "rt_boxes.py").read_text(encoding="utf-8")
    body = source.split('"""', 2)[2].lstrip("\n")  # the file without its module docstring
    assert any(b.strip() == body.strip() for b in blocks), \
        "docs/plugin-authors.md must show docs/examples/rt_boxes.py (after its docstring)"
