"""``indexzoo check NAME [--device cpu|cuda] [--size small|large] [--seed N] [--set PARAM=VALUE
...]``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, TextIO

from indexzoo.config import validate_params
from indexzoo.display import printable
from indexzoo.errors import ConfigError, MissingDependency
from indexzoo.registry import lookup

from .environment import device_name, environment
from .options import option_value

__all__ = ["add_cli"]


def add_cli(sub: Any) -> None:
    s = sub.add_parser("check", help="run the conformance suite on one index")
    s.add_argument("name", help="registered index name (see `indexzoo list`)")
    s.add_argument("--device", default="cpu", choices=("auto", "cpu", "cuda"))
    s.add_argument("--size", default="small", choices=("small", "large"),
                   help="small: quick (CI); large: bigger key sets, many more hypothesis examples")
    s.add_argument("--seed", type=_seed, default=None, metavar="N",
                   help="what the run draws its key sets and lookups from (default: drawn at "
                        "random and printed); give a printed seed to replay that run")
    s.add_argument("--group", action="append", help="only this check group (repeatable)")
    s.add_argument("--json", action="store_true",
                   help="machine-readable output: one JSON object with every check's outcome")
    s.add_argument("--set", action="append", default=[], metavar="PARAM=VALUE",
                   help="a parameter of the index under test (repeatable; VALUE as JSON or "
                        "text), e.g. --set engine=optix")
    s.set_defaults(func=cmd_check)


def _seed(text: str) -> int:
    value = int(text)
    if not 0 <= value < 2**63:
        raise argparse.ArgumentTypeError(f"{text}: a seed is a whole number from 0 to 2^63-1")
    return value


def _params(sets: list[str]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for text in sets:
        name, sep, value = text.partition("=")
        if not (sep and name and value):
            raise ConfigError(f"--set {text!r}: expected PARAM=VALUE, e.g. --set engine=optix")
        params[name] = option_value(value)
    return params


def cmd_check(args: argparse.Namespace, out: TextIO) -> int:
    try:
        import hypothesis  # noqa: F401
    except ImportError:
        raise MissingDependency("hypothesis", "test", "indexzoo check") from None
    # the suite imports hypothesis, an optional dependency: loaded once it is known to be there
    from indexzoo.conformance import GROUPS, make_context, run_checks, summary

    if args.group:
        unknown = sorted(set(args.group) - set(GROUPS))
        if unknown:
            raise ConfigError(f"unknown check groups {unknown}; allowed: {', '.join(GROUPS)}")
    params = _params(args.set)
    if params:
        cls = lookup(args.name)
        validate_params(cls.Params, params, cls.name)  # ConfigError before any check runs
    ctx = make_context(args.name, device=args.device, size=args.size, params=params,
                       seed=args.seed)
    env = environment(ctx.device)
    shown = "".join(f" {k}={v!r}" for k, v in params.items())
    if args.json:
        return _check_json(ctx, args, params, env["commit"], out)
    out.write(f"indexzoo check {printable(ctx.name + shown)} on {ctx.device} ({device_name(ctx.device)}), "
              f"size {args.size}, seed {ctx.seed}, commit {env['commit']}\n")
    out.flush()
    t0 = time.perf_counter()
    results = run_checks(ctx, groups=args.group, progress=sys.stderr)
    out.write(summary(results) + f"  ({time.perf_counter() - t0:.1f} s, seed {ctx.seed})\n")
    return 0 if all(r.ok for r in results) else 1


def _check_json(ctx: Any, args: argparse.Namespace, params: dict[str, Any], commit: str,
                out: TextIO) -> int:
    """``check --json``: the run as one JSON object (progress still goes to stderr): the
    index, params, device, size, commit, ``ok``, ``seconds``, per group ``passed``, ``run``,
    ``skipped`` and ``xfail``, and every check with its ``status`` and ``message``."""
    from indexzoo.conformance import GROUPS, run_checks

    t0 = time.perf_counter()
    results = run_checks(ctx, groups=args.group, progress=sys.stderr)
    groups = {}
    for group in GROUPS:
        rs = [r for r in results if r.check.group == group]
        if rs:
            ran = [r for r in rs if r.status != "skipped"]
            groups[group] = {"passed": sum(r.status == "passed" for r in ran), "run": len(ran),
                             "skipped": len(rs) - len(ran),
                             "xfail": sum(r.status == "xfail" for r in ran)}
    ok = all(r.ok for r in results)
    json.dump({"index": ctx.name, "params": params, "device": ctx.device, "size": args.size,
               "commit": commit, "ok": ok, "seconds": round(time.perf_counter() - t0, 3),
               "groups": groups,
               "checks": [{"label": r.label, "group": r.check.group, "status": r.status,
                           "message": r.message, "seconds": round(r.seconds, 3)}
                          for r in results]}, out, indent=2, default=repr)
    out.write("\n")
    return 0 if ok else 1
