"""docs/cli.md against the command line: every option a subcommand's ``--help`` lists is in
the docs' synopsis line of that subcommand (and the synopsis names no option the command
lacks), and every preset and sweep ``bench`` accepts is in the docs' lists. The options are
read from the parser that prints ``--help``."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from indexzoo.tools.bench import PRESETS, SWEEPS
from indexzoo.tools.cli import _parser

DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
BENCHMARKS = DOCS.with_name("benchmarks.md")
_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(action.choices)


def _options(parser: argparse.ArgumentParser) -> set[str]:
    """The long options ``parser`` takes (its ``--help`` lists them), --help itself left out;
    with the options of its own subcommands, if any."""
    found = {o for a in parser._actions for o in a.option_strings
             if o.startswith("--") and o != "--help"}
    for a in parser._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sub in a.choices.values():
                found |= _options(sub)
    return found


def _synopsis() -> dict[str, set[str]]:
    """The options of each command in the synopsis block that opens docs/cli.md (a command's
    line and the indented lines under it)."""
    text = DOCS.read_text(encoding="utf-8")
    block = text.split("```", 2)[1]
    got: dict[str, set[str]] = {}
    command = ""
    for line in block.splitlines():
        if line.startswith("indexzoo "):
            first = line.split()[1]
            command = "" if first.startswith("-") else first
            got.setdefault(command, set())
        elif not line.strip():
            continue
        got[command] |= set(_OPTION.findall(line.split(" ", 1)[1] if line.startswith(
            "indexzoo ") else line))
    return got


def _backticked(text: str) -> set[str]:
    """The names in backticks in ``text`` (not options, paths or commands)."""
    return {n for n in re.findall(r"`([^`]+)`", text) if re.fullmatch(r"[a-z][a-z0-9_-]*", n)}


def _paragraph(start: str, docs: Path = DOCS) -> str:
    """The text of ``docs`` from ``start`` to the end of its paragraph."""
    text = docs.read_text(encoding="utf-8")
    at = text.index(start)
    end = text.find("\n\n", at)
    return text[at:end if end >= 0 else len(text)]


def test_every_subcommand_in_help_has_a_synopsis_line() -> None:
    commands = set(_subparsers(_parser()))
    documented = set(_synopsis()) - {""}
    assert commands - documented == set(), "commands missing from docs/cli.md's synopsis"
    assert documented - commands == set(), "docs/cli.md's synopsis names unknown commands"


def test_every_option_in_help_is_in_the_docs_synopsis_and_no_other() -> None:
    documented = _synopsis()
    parser = _parser()
    assert documented[""] == _options(parser) - set().union(
        *(_options(s) for s in _subparsers(parser).values()))
    for name, sub in _subparsers(parser).items():
        options = _options(sub)
        assert options - documented[name] == set(), \
            f"`indexzoo {name} --help` options missing from docs/cli.md's synopsis"
        assert documented[name] - options == set(), \
            f"docs/cli.md's synopsis of {name} names options `indexzoo {name}` lacks"


def test_every_bench_preset_is_in_the_docs_preset_list() -> None:
    bench = _subparsers(_parser())["bench"]
    (preset,) = [a for a in bench._actions if "--preset" in a.option_strings]
    accepted = set(preset.choices or ())
    assert accepted == {*PRESETS, "ssb"}
    listed = _backticked(_paragraph("Presets (").split("Sweeps:")[0])
    assert accepted - listed == set(), "presets missing from docs/cli.md's preset list"
    assert listed - accepted == set(), "docs/cli.md lists presets bench does not accept"
    table = _backticked(_paragraph("| preset | workload |", BENCHMARKS))
    assert table == accepted, "docs/benchmarks.md's preset table differs from bench's presets"


def test_every_bench_sweep_is_in_the_docs_sweep_list() -> None:
    listed = _backticked(_paragraph("Presets (").split("Sweeps:")[1].split(".", 1)[0])
    assert listed == set(SWEEPS)
