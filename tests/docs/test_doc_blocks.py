"""Every code block of README.md and docs/**/*.md does what it shows.

* ``python`` blocks run, a document's blocks in order in one namespace (a later block may use
  what an earlier one made), in a temporary working directory of the document's own;
* ``yaml``, ``toml`` and ``json`` blocks parse, and one whose first line names a file
  (``# index.yaml``) is written there for the blocks after it;
* ``bash``/``sh`` blocks: every ``indexzoo ...`` command parses with the command line's own
  argument parser, and the quick ones (``list``, ``info``, ``doctor``) run.

A block is marked by an HTML comment on the line before its fence: ``<!-- needs: gpu -->`` or
``<!-- needs: optix -->`` runs it where that exists and skips it with the reason elsewhere;
``<!-- not-run: why -->`` marks a fragment (a method shown apart from its class), skipped with
that reason; ``<!-- main-command -->`` and ``<!-- test-command -->`` mark the README's two
commands, which CI runs (``.ci/run``) and this file only parses. Nothing is skipped silently.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import sys
import textwrap
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w+-]*)[ \t]*$")
MARKER = re.compile(r"^\s*<!--\s*(?P<kind>[\w-]+)\s*(?::\s*(?P<detail>.*?))?\s*-->\s*$")
MARKERS = ("needs", "not-run", "main-command", "test-command")
NEEDS = ("gpu", "optix")
SHELL = ("bash", "sh", "shell", "console")
DATA = ("yaml", "toml", "json")
#: ``indexzoo`` sub-commands quick enough to run here (the others are parsed only).
QUICK = ("list", "info", "doctor")
#: Fragments allowed in all the docs (each with its reason): a guide shows a method or two
#: apart from its class; anything else should run.
MAX_FRAGMENTS = 5
FILE_COMMENT = re.compile(r"^#\s*(?P<name>[\w.-]+\.(?:ya?ml|toml|json))\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it is, its language, its code (dedented), and its marker."""

    doc: Path
    line: int  # of the opening fence, 1-based
    lang: str
    code: str
    marker: str | None = None  # needs, not-run, main-command, test-command
    detail: str = ""  # what a "needs" block needs, or why a block is not run

    @property
    def label(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"

    @property
    def needs(self) -> list[str]:
        return [n.strip() for n in self.detail.split(",") if n.strip()] \
            if self.marker == "needs" else []


def _marker(lines: list[str], fence: int) -> tuple[str | None, str]:
    """The marker on the line before the fence at index ``fence`` (None, "" without one)."""
    if fence == 0:
        return None, ""
    m = MARKER.match(lines[fence - 1])
    if not m or m.group("kind") not in MARKERS:
        return None, ""
    return m.group("kind"), (m.group("detail") or "").strip()


def blocks_of(doc: Path) -> list[Block]:
    """The fenced code blocks of a Markdown file, in order (indented fences included)."""
    lines = doc.read_text(encoding="utf-8").splitlines()
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, start = m.group("indent"), i
        end = next((j for j in range(i + 1, len(lines))
                    if lines[j].strip() == "```" and lines[j].startswith(indent)), None)
        assert end is not None, f"{doc.relative_to(ROOT)}:{i + 1}: the code block is never closed"
        code = textwrap.dedent("\n".join(ln[len(indent):] if ln.startswith(indent) else ln
                                         for ln in lines[start + 1:end]))
        marker, detail = _marker(lines, start)
        out.append(Block(doc, start + 1, m.group("lang").lower(), code + "\n", marker, detail))
        i = end + 1
    return out


BLOCKS = [b for doc in DOCUMENTS for b in blocks_of(doc)]
PYTHON = [b for b in BLOCKS if b.lang == "python"]


# ---------------------------------------------------------------------- what is missing here
def _missing(need: str) -> str | None:
    """Why ``need`` ("gpu", "optix") is not available here; None when it is."""
    from indexzoo import devices

    if need == "gpu":
        ok, why = devices.cuda_status()
        return None if ok else f"no usable GPU: {why}"
    if need == "optix":
        from indexzoo.native.rt import optix

        got = optix.status()
        return None if got.usable else f"OptiX engine not usable: {got.reason}"
    raise AssertionError(f"unknown need {need!r}; known: {', '.join(NEEDS)}")


def skip_reason(block: Block) -> str | None:
    """Why ``block`` does not run here (None: it runs)."""
    if block.marker == "not-run":
        return f"{block.label} is a fragment, not run: {block.detail}"
    if block.marker in ("main-command", "test-command"):
        return f"{block.label} is the README's {block.marker}, run by .ci/run"
    missing = [why for why in map(_missing, block.needs) if why]
    return f"{block.label} needs {block.detail}: {'; '.join(missing)}" if missing else None


# ---------------------------------------------------------------------- running a document
class Document:
    """One document's namespace (a module of its own, so classes its blocks define resolve
    their annotations), working directory, and how far its blocks have run."""

    def __init__(self, doc: Path, folder: Path) -> None:
        name = "indexzoo_docs_" + re.sub(r"\W", "_", str(doc.relative_to(ROOT)).removesuffix(".md"))
        self.module = types.ModuleType(name)
        self.module.__file__ = str(doc)
        sys.modules[name] = self.module
        self.folder = folder
        self.blocks = [b for b in BLOCKS if b.doc == doc]
        self.done = 0  # blocks handled so far, in order
        self.failed: str | None = None

    def run_until(self, block: Block) -> None:
        """Handle every block before ``block`` not handled yet (a test run alone still gets
        what the blocks before it make); fail if one of them failed."""
        index = self.blocks.index(block)
        while self.done < index:
            earlier = self.blocks[self.done]
            self.done += 1
            if self.failed is None and skip_reason(earlier) is None:
                try:
                    self.handle(earlier)
                except Exception as exc:
                    self.failed = f"{earlier.label} failed ({type(exc).__name__}: {exc})"
        if self.failed:
            pytest.fail(f"an earlier block of this document failed: {self.failed}")
        self.done = index + 1

    def handle(self, block: Block) -> None:
        """Run a python block; write a data block that names its file."""
        if block.lang == "python":
            padded = "\n" * (block.line) + block.code  # tracebacks point at the doc's lines
            exec(compile(padded, str(block.doc), "exec"), self.module.__dict__)
        elif block.lang in DATA:
            first = block.code.splitlines()[0] if block.code.strip() else ""
            m = FILE_COMMENT.match(first)
            if m:
                (self.folder / m.group("name")).write_text(block.code, encoding="utf-8")


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[Path, Document]]:
    made: dict[Path, Document] = {}
    for doc in DOCUMENTS:
        made[doc] = Document(doc, tmp_path_factory.mktemp(doc.stem))
    yield made
    for d in made.values():
        sys.modules.pop(d.module.__name__, None)


@pytest.mark.parametrize("block", PYTHON, ids=lambda b: b.label)
def test_python_block_runs(block: Block, documents: dict[Path, Document],
                           monkeypatch: pytest.MonkeyPatch) -> None:
    doc = documents[block.doc]
    monkeypatch.chdir(doc.folder)
    doc.run_until(block)
    why = skip_reason(block)
    if why is not None:
        pytest.skip(why)
    try:
        doc.handle(block)
    except Exception as exc:
        doc.failed = f"{block.label} failed ({type(exc).__name__}: {exc})"
        raise


# ---------------------------------------------------------------------- data and commands
@pytest.mark.parametrize("block", [b for b in BLOCKS if b.lang in DATA], ids=lambda b: b.label)
def test_data_block_parses(block: Block) -> None:
    if block.lang == "yaml":
        assert isinstance(yaml.safe_load(block.code), dict)
    elif block.lang == "toml":
        try:
            import tomllib
        except ImportError:  # Python 3.10
            import tomli as tomllib
        assert tomllib.loads(block.code)
    else:
        json.loads(block.code)


def commands(block: Block) -> list[list[str]]:
    """The ``indexzoo`` commands of a shell block: each as its arguments after ``indexzoo``
    (lines joined at a trailing backslash, comments dropped, ``&&``/``;``/``|`` chains split;
    ``.venv/bin/indexzoo`` counts)."""
    text = re.sub(r"\\\n", " ", block.code)
    found = []
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        part: list[str] = []
        for w in [*words, ";"]:
            if w in ("&&", "||", ";", "|"):
                if part and Path(part[0]).name == "indexzoo":
                    found.append(part[1:])
                part = []
            else:
                part.append(w)
    return found


COMMANDS = [(b, argv) for b in BLOCKS if b.lang in SHELL for argv in commands(b)]


@pytest.mark.parametrize("block, argv", COMMANDS,
                         ids=[f"{b.label}:{' '.join(a[:1])}" for b, a in COMMANDS])
def test_indexzoo_command_parses_and_quick_ones_run(block: Block, argv: list[str],
                                                    tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from indexzoo.tools.cli import _parser, main

    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            _parser().parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"{block.label}: `indexzoo {shlex.join(argv)}` does not parse (exit "
                    f"{exc.code}): {err.getvalue().strip()}")
    if argv[0] not in QUICK:
        return
    why = skip_reason(block)
    if why is not None:
        pytest.skip(why)
    monkeypatch.chdir(tmp_path)
    assert main(argv, out=io.StringIO()) == 0, f"{block.label}: indexzoo {shlex.join(argv)}"


# ---------------------------------------------------------------------- the markers themselves
def test_every_python_fence_is_found() -> None:
    for doc in DOCUMENTS:
        fences = sum(1 for ln in doc.read_text(encoding="utf-8").splitlines()
                     if ln.strip() == "```python")
        assert fences == sum(b.doc == doc for b in PYTHON), doc


def test_every_marker_is_known_and_sits_right_before_a_fence() -> None:
    for doc in DOCUMENTS:
        lines = doc.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            m = MARKER.match(line)
            if not m or m.group("kind") not in MARKERS:
                continue
            where = f"{doc.relative_to(ROOT)}:{i + 1}"
            assert i + 1 < len(lines) and FENCE.match(lines[i + 1]), \
                f"{where}: a marker must be on the line right before a code block's fence"
    for b in BLOCKS:
        if b.marker == "needs":
            assert b.needs and set(b.needs) <= set(NEEDS), f"{b.label}: needs {b.detail!r}"


def test_fragments_are_few_and_each_says_why() -> None:
    fragments = [b for b in BLOCKS if b.marker == "not-run"]
    assert all(len(b.detail) >= 10 for b in fragments), \
        [b.label for b in fragments if len(b.detail) < 10]
    assert len(fragments) <= MAX_FRAGMENTS, [b.label for b in fragments]


def test_blocks_that_need_a_device_are_python_or_shell() -> None:
    """A marker on a block no test runs would skip nothing and promise too much."""
    marked: list[Any] = [b for b in BLOCKS if b.marker == "needs"]
    assert all(b.lang in ("python", *SHELL) for b in marked), [b.label for b in marked]
