"""The ``indexzoo`` command line.

    indexzoo list                 registered indexes: name, capabilities, description
    indexzoo info NAME            an index's parameters (types, defaults, bounds, docs)
    indexzoo run SPEC_FILE        build from a key file or a workload, run lookups, summarise
    indexzoo bench [--preset P]   compare indexes on a workload: table, JSON and plots
    indexzoo check NAME           run the conformance suite on one index
    indexzoo recommend KEYS_FILE  measure the installed indexes on your keys; write the winner
    indexzoo doctor               devices, driver, CUDA libraries, OptiX, threading, indexes
    indexzoo cache info|clear     the compiled kernels and programs kept on disk: where, how many
    indexzoo --version            indexzoo's version (``python -m indexzoo`` runs the same command)

``--json`` makes ``list``, ``info``, ``doctor``, ``check`` and ``recommend`` print one JSON
object instead of text.

Exit codes: 0 success, 2 usage or configuration error, 1 any other error (out of memory
included), 130 interrupted (Ctrl-C or SIGTERM). Errors are one line on stderr: ``indexzoo:
error: ...`` for usage and configuration errors, ``indexzoo: <ErrorClass>: ...`` for the others.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import textwrap
import typing
import warnings
from collections.abc import Sequence
from typing import Any, TextIO

from indexzoo import __version__, catalog
from indexzoo.buildtime import set_progress
from indexzoo.display import byte_size, one_line, plain, printable
from indexzoo.errors import ConfigError, IndexZooError, InvalidInput

from . import interrupts

__all__ = ["main"]

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

def _cells(rows: list[list[str]]) -> list[str]:
    """Rows of cells as text, each column padded to its widest cell (blank cells too, so
    the columns after them stay aligned)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]


def _capability_cells(rows: list[str]) -> list[str]:
    """Capability summaries (``point range dup | uint32 uint64 | cpu cuda | 64-d``) with each
    ``|``-separated part padded to its widest, so parts line up across rows; a part a row
    lacks (``64-d`` of a one-column index) is blank."""
    parts = [r.split(" | ") for r in rows]
    n = max((len(p) for p in parts), default=0)
    widths = [max((len(p[i]) for p in parts if i < len(p)), default=0) for i in range(n)]
    out = []
    for p in parts:
        cells = [(p[i] if i < len(p) else "").ljust(widths[i]) for i in range(n)]
        seps = [" | " if i < len(p) else "   " for i in range(1, n)]
        out.append((cells[0] + "".join(s + c for s, c in zip(seps, cells[1:], strict=True)))
                   .rstrip())
    return out


#: The narrowest description column ``list`` makes; a narrower terminal gets each description
#: on the lines under its row instead.
MIN_DESCRIPTION_WIDTH = 40


def _with_descriptions(heads: list[str], descriptions: list[str], under: int) -> str:
    """Rows (``heads``, the header first) with their descriptions wrapped to the terminal's
    width (``COLUMNS``, else the terminal, else 100): in a third column where it can be at
    least :data:`MIN_DESCRIPTION_WIDTH` wide, continuation lines indented under it; else on
    the lines under each row, indented to column ``under``."""
    width = shutil.get_terminal_size((100, 24)).columns
    column = len(heads[0]) + 2
    if width - column >= MIN_DESCRIPTION_WIDTH:
        return "".join(f"{head}  {_wrapped(desc, column, width)}\n"
                       for head, desc in zip(heads, descriptions, strict=True))
    return "".join(f"{head.rstrip()}\n{' ' * under}{_wrapped(desc, under, width)}\n"
                   for head, desc in zip(heads, descriptions, strict=True))


def _wrapped(text: str, indent: int, width: int) -> str:
    """``text`` wrapped at word boundaries to ``width`` columns, starting at column
    ``indent``: continuation lines indented to that column (at least 30 characters a line)."""
    lines = textwrap.wrap(text, max(width - indent, 30), break_long_words=False,
                          break_on_hyphens=False) or [""]
    return ("\n" + " " * indent).join(lines)


def _type_name(annotation: Any) -> str:
    if typing.get_origin(annotation) is typing.Literal:
        return " | ".join(repr(a) for a in typing.get_args(annotation))
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


# ---------------------------------------------------------------------- commands
def _registry_listing() -> catalog.Listing:
    from indexzoo.registry import listed

    return listed()


def cmd_list(args: argparse.Namespace, out: TextIO) -> int:
    found = catalog.listing(_registry_listing)
    if args.json:
        json.dump({e.name: {"description": e.description, "capabilities": e.capabilities,
                            "provider": e.provider} for e in found.entries}, out, indent=2)
        out.write("\n")
        return EXIT_OK
    caps = _capability_cells([e.summary for e in found.entries])
    rows = [["name", "capabilities"],
            *([printable(e.name), c] for e, c in zip(found.entries, caps, strict=True))]
    w0, w1 = (max(len(r[i]) for r in rows) for i in (0, 1))
    descriptions = ["description", *(e.description for e in found.entries)]
    out.write(_with_descriptions(_cells(rows), descriptions, w0 + 2))
    details = found.details if args.verbose else {}
    for name, why in found.errors.items():
        out.write(f"{printable(name):<{w0}}  {'(unusable)':<{w1}}  {printable(why)}\n")
        if name in details:
            out.write("".join(f"    {printable(line)}\n"
                              for line in details[name].rstrip().splitlines()))
    engines = [e.name for e in found.entries if e.engine]
    if engines:
        out.write(f"\nray-tracing engines ({', '.join(engines)}: parameter engine): "
                  + "; ".join(f"{e}: {text}" for e, text in _engines(short=True)) + "\n")
    return EXIT_OK


def _engines(short: bool = False) -> list[tuple[str, str]]:
    """The ray tracers an index with an ``engine`` parameter can use here: whether OptiX's
    bindings and headers are installed, found without importing them or touching a GPU
    (``indexzoo doctor`` goes on to the device)."""
    from indexzoo.native.rt import optix

    got = optix.installed()
    why = got.reason.split(";")[0] if short else got.reason
    return [("software", "usable (cpu, and cuda where a GPU is usable)"),
            ("optix", ("installed: " if got.usable else "not usable: ") + why)]


def cmd_info(args: argparse.Namespace, out: TextIO) -> int:
    from indexzoo.config import describe_bounds
    from indexzoo.contract import check_plugin_class
    from indexzoo.registry import available, lookup, providers

    if args.system:
        if args.name is not None:
            raise ConfigError("info: give an index NAME or --system, not both")
        return cmd_doctor(args, out)
    if args.name is None:
        raise ConfigError("info: give an index NAME (see `indexzoo list`) or --system")
    cls = lookup(args.name)
    if args.json:
        return _info_json(cls, out)
    caps = cls.capabilities
    out.write(f"{printable(cls.name)}: {catalog.describe(cls)}\n")
    out.write(f"provider:     {printable(providers()[cls.name])}\n")
    out.write(f"class:        {printable(f'{cls.__module__}.{cls.__qualname__}')}\n")
    out.write(f"capabilities: {caps.summary()}; out modes: {', '.join(caps.out_modes)}\n")
    resolution = check_plugin_class(cls)
    out.write(f"plugin API:   {resolution.api}\n")
    out.write("operations:\n")
    for route in resolution.routes.values():
        out.write(f"  {route.describe()}\n")
    out.write("parameters:\n")
    for fname, field in cls.Params.model_fields.items():
        bounds = describe_bounds(field)
        default = field.get_default(call_default_factory=True)
        out.write(f"  {fname}: {_type_name(field.annotation)} = {default!r}"
                  + (f"  ({bounds})" if bounds else "") + "\n")
        if field.description:
            out.write(f"      {plain(field.description)}\n")
    presets = cls.Params.presets
    if presets:
        out.write("presets (params: {preset: NAME}, or --set preset=NAME; the parameters "
                  "given beside it win):\n")
        registered = available()
        for pname, values in presets.items():
            also = f"  (also the index {printable(pname)})" if pname in registered else ""
            out.write(f"  {printable(pname)}: {printable(_values(values))}{also}\n")
    if "engine" in cls.Params.model_fields:
        out.write("engines:\n")
        for engine, text in _engines():
            out.write(f"  {engine}: {text}\n")
    return EXIT_OK


def _values(values: Any) -> str:
    """A preset's values as ``key_mode='naive', x_bits=23``; ``(the defaults)`` for none."""
    return ", ".join(f"{k}={v!r}" for k, v in values.items()) or "(the defaults)"


def _info_json(cls: Any, out: TextIO) -> int:
    """``info NAME --json``: what ``info`` prints, as one JSON object (parameter defaults that
    JSON cannot hold are given as their ``repr``)."""
    from indexzoo.config import describe_bounds
    from indexzoo.contract import check_plugin_class
    from indexzoo.registry import providers

    resolution = check_plugin_class(cls)
    params = {}
    for fname, field in cls.Params.model_fields.items():
        params[fname] = {"type": _type_name(field.annotation),
                         "default": field.get_default(call_default_factory=True),
                         "bounds": describe_bounds(field) or None,
                         "description": plain(field.description) if field.description else None}
    got: dict[str, Any] = {
        "name": cls.name, "description": catalog.describe(cls), "provider": providers()[cls.name],
        "class": f"{cls.__module__}.{cls.__qualname__}",
        "capabilities": cls.capabilities.model_dump(mode="json"),
        "plugin_api": str(resolution.api),
        "operations": [route.describe() for route in resolution.routes.values()],
        "parameters": params,
        "presets": {name: dict(values) for name, values in cls.Params.presets.items()},
    }
    if "engine" in cls.Params.model_fields:
        got["engines"] = dict(_engines())
    json.dump(got, out, indent=2, default=repr)
    out.write("\n")
    return EXIT_OK


def cmd_doctor(args: argparse.Namespace, out: TextIO) -> int:
    from .doctor import report

    return report(out, as_json=args.json)


def cmd_run(args: argparse.Namespace, out: TextIO) -> int:
    from .runner import run_spec

    return run_spec(args.spec, out, device=args.device)


def cmd_cache_info(args: argparse.Namespace, out: TextIO) -> int:
    from indexzoo.envvars import KERNEL_CACHE_SIZE
    from indexzoo.native import jitcache
    from indexzoo.native.rt.optix import compiler

    where = jitcache.location()
    if where.folder is None:
        out.write(f"CPU kernels:    off ({printable(where.why)}); each process compiles its own\n")
    else:
        state, trouble = jitcache.state(where.folder)
        out.write(f"CPU kernels:    {state} ({printable(where.why)})\n")
        if trouble is not None:
            out.write(f"  {printable(trouble)}\n")
        used = jitcache.usage(where.folder)
        out.write(f"  folder:       {printable(where.folder)}\n")
        out.write(f"  entries:      {used.entries} ({byte_size(used.bytes)})\n")
        out.write(f"  limit:        {where.limit >> 20} MiB ({KERNEL_CACHE_SIZE.name}); "
                  "the least recently used go first\n")
    folder = compiler.cache_dir()
    if folder is None:
        out.write("OptiX programs: not kept (no home folder); each process compiles its own\n")
    else:
        count, nbytes = compiler.kept()
        out.write(f"OptiX programs: {printable(folder)}\n")
        out.write(f"  entries:      {count} ({byte_size(nbytes)})\n")
    out.write("CUDA kernels:   " + ("not kept; each process compiles its own" if where.folder is None
                                     else "kept with the CPU kernels, as PTX (those CuPy launches)")
              + "\n")
    kept = catalog.folder()
    out.write("index listing:  " + ("not kept (no cache folder)" if kept is None else
                                    f"{printable(kept)} (what `indexzoo list` found, by "
                                    "environment)") + "\n")
    return EXIT_OK


def cmd_cache_clear(args: argparse.Namespace, out: TextIO) -> int:
    from indexzoo.native import jitcache
    from indexzoo.native.rt.optix import compiler

    where = jitcache.location()
    if where.folder is None:
        out.write(f"CPU kernels: the cache is off ({printable(where.why)}); nothing removed\n")
    else:
        count, nbytes = jitcache.clear(where.folder)
        out.write(f"removed {count} kernel(s) ({byte_size(nbytes)}) from "
                  f"{printable(where.folder)}\n")
        left = jitcache.usage(where.folder).entries
        if left:
            out.write(f"  {left} could not be removed\n")
    folder = compiler.cache_dir()
    if folder is not None:
        count, nbytes = compiler.clear()
        out.write(f"removed {count} OptiX program(s) ({byte_size(nbytes)}) from "
                  f"{printable(folder)}\n")
    kept = catalog.folder()
    if kept is not None:
        count, nbytes = catalog.clear()
        out.write(f"removed {count} index listing(s) ({byte_size(nbytes)}) from "
                  f"{printable(kept)}\n")
    return EXIT_OK


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (no usage block; what was typed is shortened)."""

    def error(self, message: str) -> typing.NoReturn:
        text = one_line(message)
        if len(text) > 300:
            text = text[:200] + "..." + text[-80:]
        self.exit(EXIT_USAGE, f"indexzoo: error: {text} (see `{self.prog} --help`)\n")


def _parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; given the ``command`` about to run, one of those defined
    here (``list``, ``info``, ...), without the commands whose options live in their own modules
    (``bench``, ``check``, ``recommend``): a ``list`` imports none of them."""
    p = _Parser(
        prog="indexzoo",
        description="A zoo of GPU index structures behind one contract.",
        epilog="Exit codes: 0 success, 2 usage or configuration error, 1 other error, "
               "130 interrupted.",
    )
    p.add_argument("--version", action="version", version=f"indexzoo {__version__}",
                   help="print indexzoo's version and exit")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    s = sub.add_parser("list", help="list the registered indexes")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.add_argument("--verbose", action="store_true",
                   help="with each unusable plugin or index, the traceback behind it")
    s.set_defaults(func=cmd_list)
    s = sub.add_parser("info", help="show an index's parameters and capabilities")
    s.add_argument("name", nargs="?", help="registered index name (see `indexzoo list`)")
    s.add_argument("--system", action="store_true",
                   help="show this machine's devices and libraries instead (= `indexzoo doctor`)")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=cmd_info)
    s = sub.add_parser("doctor", help="what this machine offers: devices, NVIDIA driver and "
                       "CUDA version, CuPy, numba-cuda, OptiX, threading layer, indexes")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    s.set_defaults(func=cmd_doctor)
    s = sub.add_parser("run", help="build and query one index as a spec file says")
    s.add_argument("spec", help="YAML, TOML or JSON spec file")
    s.add_argument("--device", choices=("auto", "cpu", "cuda"), default=None,
                   help="override the spec's device")
    s.set_defaults(func=cmd_run)
    s = sub.add_parser("cache", help="the compiled kernels and OptiX programs kept on disk")
    actions = s.add_subparsers(dest="action", required=True, metavar="ACTION")
    a = actions.add_parser("info", help="where they are kept, whether the cache is on and why, "
                           "the entries, their size and the limit")
    a.set_defaults(func=cmd_cache_info)
    a = actions.add_parser("clear", help="remove every kept kernel and program (each is compiled "
                           "again when next used)")
    a.set_defaults(func=cmd_cache_clear)
    if command not in sub.choices:
        for extra in _EXTRA_COMMANDS:
            extra(sub)
    return p


def _add_bench(sub: Any) -> None:
    from .bench import add_cli

    add_cli(sub)


def _add_check(sub: Any) -> None:
    from .check import add_cli

    add_cli(sub)


def _add_recommend(sub: Any) -> None:
    from .recommend import add_cli

    add_cli(sub)


_EXTRA_COMMANDS = [_add_bench, _add_check, _add_recommend]


def _out_of_memory(exc: BaseException) -> bool:
    """MemoryError, CuPy's OutOfMemoryError or a CUDA out-of-memory error (the GPU modules are
    looked up only if something imported them already: no import here)."""
    if isinstance(exc, MemoryError):
        return True
    cupy = sys.modules.get("cupy")
    oom = getattr(getattr(getattr(cupy, "cuda", None), "memory", None), "OutOfMemoryError", None)
    if isinstance(oom, type) and isinstance(exc, oom):
        return True
    driver = sys.modules.get("numba.cuda.cudadrv.driver")
    api_error = getattr(driver, "CudaAPIError", None)
    return (isinstance(api_error, type) and isinstance(exc, api_error)
            and getattr(exc, "code", None) == 2)  # CUDA_ERROR_OUT_OF_MEMORY


def _error(text: str) -> None:
    print(printable(one_line(text)), file=sys.stderr)


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: TextIO | None = None, line: str | None = None) -> None:
    """Warnings as one line each, like errors (a plugin that fails to load, for one)."""
    with contextlib.suppress(Exception):
        print(printable(one_line(f"indexzoo: {category.__name__}: {message}")),
              file=file or sys.stderr)


def _exit_now(code: int) -> typing.NoReturn:
    """Leave at once, without finalizers: an interrupt that lands while numba compiles can
    leave llvmlite objects whose disposal crashes (a segmentation fault freeing an LLVM module
    the JIT already owns), once the interrupted frames are released or at interpreter exit.
    Result files were removed on the way up; standard streams are flushed here."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Entry point of the ``indexzoo`` command; returns the exit code.

    Called without ``argv`` (the console script, reading ``sys.argv``), an interrupted command
    ends the process at once with exit code 130 (see :func:`_exit_now`)."""
    out = out or sys.stdout
    with interrupts.handling_interrupts(), warnings.catch_warnings():
        warnings.showwarning = _show_warning
        try:
            try:
                given = sys.argv[1:] if argv is None else list(argv)
                try:
                    args = _parser(given[0] if given else None).parse_args(argv)
                except SystemExit as exc:  # argparse: 2 for usage errors, 0 for --help
                    return int(exc.code or 0)
                # the command's status lines show its builds: none writes lines of its own
                before = set_progress(False)
                try:
                    code = int(args.func(args, out))
                finally:
                    set_progress(before)
                interrupts.check()  # an interrupt swallowed on the way still counts
                return code
            except KeyboardInterrupt:
                raise
            except Exception as exc:
                if _out_of_memory(exc):
                    detail = one_line(str(exc)) or type(exc).__name__
                    _error(f"indexzoo: out of memory: {detail}")
                    return EXIT_ERROR
                raise
        except KeyboardInterrupt:
            interrupts.acknowledge()
            _error("indexzoo: interrupted")
            if argv is None:  # the command line owns this process
                _exit_now(EXIT_INTERRUPTED)
            return EXIT_INTERRUPTED
        except (ConfigError, InvalidInput) as exc:
            _error(f"indexzoo: error: {exc}")
            return EXIT_USAGE
        except IndexZooError as exc:
            _error(f"indexzoo: {type(exc).__name__}: {exc}")
            return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
