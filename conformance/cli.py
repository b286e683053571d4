"""``indexzoo check NAME [--device cpu|cuda] [--size small|large]``."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, TextIO

from indexzoo.errors import MissingDependency

__all__ = ["add_cli"]


def add_cli(sub: Any) -> None:
    s = sub.add_parser("check", help="run the conformance suite on one index")
    s.add_argument("name", help="registered index name (see `indexzoo list`)")
    s.add_argument("--device", default="cpu", choices=("auto", "cpu", "cuda"))
    s.add_argument("--size", default="small", choices=("small", "large"),
                   help="small: quick (CI); large: bigger key sets, many more hypothesis examples")
    s.add_argument("--group", action="append", help="only this check group (repeatable)")
    s.set_defaults(func=cmd_check)


def cmd_check(args: argparse.Namespace, out: TextIO) -> int:
    try:
        import hypothesis  # noqa: F401
    except ImportError:
        raise MissingDependency("hypothesis", "test", "indexzoo check") from None
    from .checks import GROUPS
    from .runner import make_context, run_checks, summary

    if args.group:
        unknown = sorted(set(args.group) - set(GROUPS))
        if unknown:
            from indexzoo.errors import ConfigError

            raise ConfigError(f"unknown check groups {unknown}; allowed: {', '.join(GROUPS)}")
    ctx = make_context(args.name, device=args.device, size=args.size)
    from indexzoo.bench import device_name, environment

    env = environment(ctx.device)
    out.write(f"indexzoo check {ctx.name} on {ctx.device} ({device_name(ctx.device)}), "
              f"size {args.size}, commit {env['commit']}\n")
    out.flush()
    t0 = time.perf_counter()
    results = run_checks(ctx, groups=args.group, progress=sys.stderr)
    out.write(summary(results) + f"  ({time.perf_counter() - t0:.1f} s)\n")
    return 0 if all(r.ok for r in results) else 1
