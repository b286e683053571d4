"""The ``indexzoo`` command line.

    indexzoo list                 registered indexes: name, capabilities, description
    indexzoo info NAME            an index's parameters (types, defaults, bounds, docs)
    indexzoo run SPEC_FILE        build from a key file or a workload, run lookups, summarise
    indexzoo bench [--preset P]   compare indexes on a workload: table, JSON and plot
    indexzoo check NAME           run the conformance suite on one index

Exit codes: 0 success, 2 usage or configuration error, 1 any other error.
"""

from __future__ import annotations

import argparse
import json
import sys
import typing
from collections.abc import Sequence
from typing import Any, TextIO

from .config import describe_bounds
from .errors import ConfigError, IndexZooError, InvalidInput
from .registry import available, load_errors, lookup, providers

__all__ = ["main"]

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


def _describe(cls: Any) -> str:
    doc = (cls.__doc__ or "").strip()
    return doc.splitlines()[0] if doc else ""


def _type_name(annotation: Any) -> str:
    if typing.get_origin(annotation) is typing.Literal:
        return " | ".join(repr(a) for a in typing.get_args(annotation))
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


# ---------------------------------------------------------------------- commands
def cmd_list(args: argparse.Namespace, out: TextIO) -> int:
    table = available()
    if args.json:
        json.dump({name: {"description": _describe(cls),
                          "capabilities": cls.capabilities.model_dump(mode="json"),
                          "provider": providers()[name]} for name, cls in table.items()},
                  out, indent=2)
        out.write("\n")
        return EXIT_OK
    rows = [(name, cls.capabilities.summary(), _describe(cls)) for name, cls in table.items()]
    w0 = max([len("name")] + [len(r[0]) for r in rows])
    w1 = max([len("capabilities")] + [len(r[1]) for r in rows])
    out.write(f"{'name':<{w0}}  {'capabilities':<{w1}}  description\n")
    for name, caps, desc in rows:
        out.write(f"{name:<{w0}}  {caps:<{w1}}  {desc}\n")
    for name, why in load_errors().items():
        out.write(f"{name:<{w0}}  {'(failed to load)':<{w1}}  {why}\n")
    return EXIT_OK


def cmd_info(args: argparse.Namespace, out: TextIO) -> int:
    cls = lookup(args.name)
    caps = cls.capabilities
    out.write(f"{cls.name}: {_describe(cls)}\n")
    out.write(f"provider:     {providers()[cls.name]}\n")
    out.write(f"class:        {cls.__module__}.{cls.__qualname__}\n")
    out.write(f"capabilities: {caps.summary()}; out modes: {', '.join(caps.out_modes)}\n")
    out.write("parameters:\n")
    for fname, field in cls.Params.model_fields.items():
        bounds = describe_bounds(field)
        default = field.get_default(call_default_factory=True)
        out.write(f"  {fname}: {_type_name(field.annotation)} = {default!r}"
                  + (f"  ({bounds})" if bounds else "") + "\n")
        if field.description:
            out.write(f"      {field.description}\n")
    return EXIT_OK


def cmd_run(args: argparse.Namespace, out: TextIO) -> int:
    from .runner import run_spec

    return run_spec(args.spec, out, device=args.device)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="indexzoo",
        description="A zoo of GPU index structures behind one contract.",
        epilog="Exit codes: 0 success, 2 usage or configuration error, 1 other error.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    s = sub.add_parser("list", help="list the registered indexes")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=cmd_list)
    s = sub.add_parser("info", help="show an index's parameters and capabilities")
    s.add_argument("name", help="registered index name (see `indexzoo list`)")
    s.set_defaults(func=cmd_info)
    s = sub.add_parser("run", help="build and query one index as a spec file says")
    s.add_argument("spec", help="YAML, TOML or JSON spec file")
    s.add_argument("--device", choices=("auto", "cpu", "cuda"), default=None,
                   help="override the spec's device")
    s.set_defaults(func=cmd_run)
    for extra in _EXTRA_COMMANDS:
        extra(sub)
    return p


def _add_bench(sub: Any) -> None:
    from .bench import add_cli

    add_cli(sub)


def _add_check(sub: Any) -> None:
    from indexzoo.conformance.cli import add_cli

    add_cli(sub)


_EXTRA_COMMANDS = [_add_bench, _add_check]


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Entry point of the ``indexzoo`` command; returns the exit code."""
    out = out or sys.stdout
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: 2 for usage errors, 0 for --help
        return int(exc.code or 0)
    try:
        return int(args.func(args, out))
    except (ConfigError, InvalidInput) as exc:
        print(f"indexzoo: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except IndexZooError as exc:
        print(f"indexzoo: {type(exc).__name__}: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("indexzoo: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
