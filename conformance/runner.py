"""Running the checks outside pytest (``indexzoo check``) and summarising them per group."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal, TextIO

from indexzoo import GpuIndex, IndexSpec, Unsupported
from indexzoo.devices import resolve_device
from indexzoo.registry import lookup

from .catalog import CHECKS, GROUPS
from .context import Check, Context, skip_reason

__all__ = ["BAD", "CheckResult", "chosen_groups", "device_refusal", "expected_failures",
           "make_context", "resolve_index", "run_checks", "summary"]

Status = Literal["passed", "failed", "error", "skipped", "xfail", "xpass"]
#: Statuses that fail a certification (an expected failure that passes must be undeclared).
BAD: tuple[Status, ...] = ("failed", "error", "xpass")


@dataclass(frozen=True)
class CheckResult:
    """One check's outcome: ``skipped`` (with the reason: a capability the index lacks),
    ``xfail`` (failed as the plugin declared, with its reason), ``xpass`` (declared to fail but
    passed: a failure of the certification, so the declaration is removed), or passed, failed,
    error."""

    check: Check
    status: Status
    message: str
    seconds: float

    @property
    def label(self) -> str:
        return self.check.label

    @property
    def ok(self) -> bool:
        return self.status not in BAD


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


def expected_failures(cls: type[GpuIndex], extra: dict[str, str] | None = None
                      ) -> dict[str, str]:
    """The checks ``cls`` declares it fails (its ``conformance_expected_failures``, a mapping
    of check label to reason), plus ``extra``; TypeError for a label that names no check."""
    declared = {**dict(getattr(cls, "conformance_expected_failures", {}) or {}), **(extra or {})}
    labels = {c.label for c in CHECKS}
    unknown = sorted(set(declared) - labels)
    if unknown:
        raise TypeError(f"{cls.__name__}: expected failures name unknown checks {unknown}; "
                        "labels look like 'ranges/range_bounds_are_inclusive'")
    empty = sorted(k for k, v in declared.items() if not str(v).strip())
    if empty:
        raise TypeError(f"{cls.__name__}: expected failures need a reason: {empty}")
    return declared


def device_refusal(cls: type[GpuIndex], device: str) -> str | None:
    """Why ``cls`` is not certified on ``device`` (``cpu`` or ``cuda``): its capabilities do
    not list that device. None when they do (or for ``auto``, decided when it resolves)."""
    devices = cls.capabilities.devices
    if device == "auto" or device in devices:
        return None
    return (f"index {cls.name!r} does not run on {device!r}: its capabilities list the "
            f"devices {', '.join(devices)}")


def chosen_groups(groups: Iterable[str] | None, who: str) -> tuple[str, ...]:
    """The groups a pytest entry runs: ``groups`` (None: all); TypeError naming ``who`` for a
    name that is no group."""
    wanted = GROUPS if groups is None else tuple(groups)
    unknown = sorted(set(wanted) - set(GROUPS))
    if unknown:
        raise TypeError(f"{who} names no group: {unknown} (groups: {', '.join(GROUPS)})")
    return wanted


def make_context(index: Any, *, device: str = "cpu", size: str = "small",
                 params: dict[str, Any] | None = None,
                 hypothesis_profile: str | None = None,
                 expected: dict[str, str] | None = None, seed: int | None = None) -> Context:
    """A check context for ``index`` on ``device``; Unsupported if it cannot run there.
    ``expected``: more expected failures (label -> reason) besides the class's own;
    ``seed``: what the run draws its data from (None: a seed drawn at random, see
    :attr:`Context.seed`)."""
    cls, base = resolve_index(index, params)
    cls = cls._class_for(base)  # what these params make (``sharded``: its inner's capabilities)
    why = device_refusal(cls, device)  # before the device is resolved: no GPU needed to say so
    if why is None:
        dev = resolve_device(device)
        why = device_refusal(cls, dev)
    if why is not None:
        raise Unsupported(why)

    def factory(**override: Any) -> GpuIndex:
        return cls({**base, **override}, device=dev)

    ctx = Context(factory=factory, caps=cls.capabilities, device=dev, size=size,  # type: ignore[arg-type]
                  name=cls.name, hypothesis_profile=hypothesis_profile,
                  expected_failures=expected_failures(cls, expected), cls=cls)
    if seed is not None:
        ctx.seed = seed
    return ctx


def run_checks(ctx: Context, groups: Iterable[str] | None = None,
               progress: TextIO | None = None,
               labels: Iterable[str] | None = None) -> list[CheckResult]:
    """Run every check (optionally only some groups, or only the checks of some labels such
    as ``"ranges/range_bounds_are_inclusive"``) and report each one, skipped checks with their
    reason; never raises for a failure."""
    wanted = set(groups) if groups else set(GROUPS)
    only = None if labels is None else set(labels)
    if only is not None and (unknown := only - {c.label for c in CHECKS}):
        raise TypeError(f"unknown checks: {sorted(unknown)}")
    results = []
    for chk in CHECKS:
        if chk.group not in wanted or (only is not None and chk.label not in only):
            continue
        reason = skip_reason(chk, ctx.caps)
        t0 = time.perf_counter()
        status: Status
        if reason is not None:
            status, message = "skipped", reason
        else:
            try:
                chk(ctx)
                status, message = "passed", ""
            except AssertionError as exc:
                status, message = "failed", str(exc) or repr(exc)
            except Exception as exc:  # a crash is a failure of the plugin too
                status, message = "error", f"{type(exc).__name__}: {exc}"
            why = ctx.expected_failures.get(chk.label)
            if why is not None:
                if status == "passed":
                    status, message = "xpass", (f"declared as an expected failure ({why}) but "
                                                "passed: remove the declaration")
                else:
                    status, message = "xfail", f"{why} ({message.splitlines()[0][:200]})"
        res = CheckResult(chk, status, message, time.perf_counter() - t0)
        results.append(res)
        if progress is not None:
            mark = {"passed": "ok", "failed": "FAILED", "error": "ERROR", "skipped": "skip",
                    "xfail": "xfail", "xpass": "XPASS"}[status]
            note = f": {message}" if status in ("skipped", "xfail") else ""
            progress.write(f"  {mark:<6} {res.label} ({res.seconds:.2f} s){note}\n")
            progress.flush()
    return results


def summary(results: list[CheckResult]) -> str:
    """Per group: passed/run, skipped and expected failures; then every skip with its reason,
    every expected failure with its reason, and every failure with its message."""
    lines = []
    for group in GROUPS:
        rs = [r for r in results if r.check.group == group]
        if not rs:
            continue
        ran = [r for r in rs if r.status != "skipped"]
        ok = sum(r.status == "passed" for r in ran)
        skipped = len(rs) - len(ran)
        xfail = sum(r.status == "xfail" for r in ran)
        secs = sum(r.seconds for r in rs)
        extra = "".join([f", {skipped} skipped" if skipped else "",
                         f", {xfail} expected to fail" if xfail else ""])
        flag = "" if all(r.ok for r in rs) else "   <-- FAILED"
        lines.append(f"  {group:<13} {ok:>3}/{len(ran):<3} passed{extra}  ({secs:6.2f} s){flag}")
    for status, title in (("skipped", "skipped"), ("xfail", "expected to fail")):
        some = [r for r in results if r.status == status]
        if some:
            lines.append(f"\n{title}:")
            lines += [f"  {r.label}: {r.message}" for r in some]
    bad = [r for r in results if not r.ok]
    for r in bad:
        lines.append(f"\n{r.status.upper()} {r.label}: {r.check.doc}\n" +
                     "\n".join("    " + ln for ln in r.message.splitlines()[:25]))
    counts = {s: sum(r.status == s for r in results) for s in ("passed", "skipped", "xfail")}
    lines.append(f"\n{counts['passed']} passed, {len(bad)} failed, {counts['skipped']} skipped, "
                 f"{counts['xfail']} expected failures, {len(results)} checks")
    return "\n".join(lines)
