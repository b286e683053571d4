"""Running the checks outside pytest (``indexzoo check``) and summarising them per group."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, TextIO

from indexzoo import GpuIndex, IndexSpec, Unsupported
from indexzoo.devices import resolve_device
from indexzoo.registry import lookup

from .checks import GROUPS, Check, Context, applicable

__all__ = ["CheckResult", "make_context", "resolve_index", "run_checks", "summary"]

Status = Literal["passed", "failed", "error"]


@dataclass(frozen=True)
class CheckResult:
    check: Check
    status: Status
    message: str
    seconds: float

    @property
    def label(self) -> str:
        return f"{self.check.group}/{self.check.name}"


def resolve_index(index: Any, params: dict[str, Any] | None = None
                  ) -> tuple[type[GpuIndex], dict[str, Any]]:
    """(class, params) from a registered name, an IndexSpec/dict, or a GpuIndex subclass."""
    params = dict(params or {})
    if isinstance(index, dict):
        index = IndexSpec.model_validate(index)
    if isinstance(index, IndexSpec):
        return lookup(index.index), {**index.params, **params}
    if isinstance(index, str):
        return lookup(index), params
    if isinstance(index, type) and issubclass(index, GpuIndex):
        return index, params
    raise TypeError(f"index must be a name, an IndexSpec or a GpuIndex subclass, got {index!r}")


def make_context(index: Any, *, device: str = "cpu", size: str = "small",
                 params: dict[str, Any] | None = None,
                 hypothesis_profile: str | None = None) -> Context:
    """A check context for ``index`` on ``device``; Unsupported if it cannot run there."""
    cls, base = resolve_index(index, params)
    dev = resolve_device(device)
    if dev not in cls.capabilities.devices:
        raise Unsupported(f"index {cls.name!r} does not run on {dev!r}")

    def factory(**override: Any) -> GpuIndex:
        return cls({**base, **override}, device=dev)

    return Context(factory=factory, caps=cls.capabilities, device=dev, size=size,  # type: ignore[arg-type]
                   name=cls.name, hypothesis_profile=hypothesis_profile)


def run_checks(ctx: Context, groups: Iterable[str] | None = None,
               progress: TextIO | None = None) -> list[CheckResult]:
    """Run every applicable check (optionally only some groups); never raises for a failure."""
    wanted = set(groups) if groups else set(GROUPS)
    results = []
    for chk in applicable(ctx.caps):
        if chk.group not in wanted:
            continue
        t0 = time.perf_counter()
        try:
            chk(ctx)
            status: Status = "passed"
            message = ""
        except AssertionError as exc:
            status, message = "failed", str(exc) or repr(exc)
        except Exception as exc:  # a crash is a failure of the plugin too
            status, message = "error", f"{type(exc).__name__}: {exc}"
        res = CheckResult(chk, status, message, time.perf_counter() - t0)
        results.append(res)
        if progress is not None:
            mark = {"passed": "ok", "failed": "FAILED", "error": "ERROR"}[status]
            progress.write(f"  {mark:<6} {res.label} ({res.seconds:.2f} s)\n")
            progress.flush()
    return results


def summary(results: list[CheckResult]) -> str:
    """Per group: passed/total; then every failure with its message."""
    lines = []
    for group in GROUPS:
        rs = [r for r in results if r.check.group == group]
        if not rs:
            continue
        ok = sum(r.status == "passed" for r in rs)
        secs = sum(r.seconds for r in rs)
        flag = "" if ok == len(rs) else "   <-- FAILED"
        lines.append(f"  {group:<13} {ok:>3}/{len(rs):<3} passed  ({secs:6.2f} s){flag}")
    bad = [r for r in results if r.status != "passed"]
    for r in bad:
        lines.append(f"\n{r.status.upper()} {r.label}: {r.check.doc}\n" +
                     "\n".join("    " + ln for ln in r.message.splitlines()[:25]))
    passed = len(results) - len(bad)
    lines.append(f"\n{passed} passed, {len(bad)} failed, {len(results)} checks")
    return "\n".join(lines)
