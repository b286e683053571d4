"""The results of ``indexzoo bench`` (and ``bench --preset ssb``): :func:`write_json` (a run's
records and environment) and :class:`ResultsFile`, which writes it after each workload so that
a run that ends early keeps what it finished; the output folder checked before any work
(:func:`prepare_output`), the PNGs published after the JSON (:func:`publish_plots`), the
header line on standard error (:func:`header`) and the time in a result's name
(:func:`timestamp`)."""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO, TextIO

from indexzoo.config import check_writable_folder
from indexzoo.display import printable, shown, shown_path
from indexzoo.errors import ConfigError

from .compare import FORMAT_VERSION
from .publish import Member, numbered, publish, rewrite
from .records import Record

__all__ = ["ResultsFile", "header", "prepare_output", "publish_plots", "record_json",
           "remove_if_empty", "timestamp", "write_json"]

#: The fields of :class:`~indexzoo.tools.records.Record` the JSON does not hold as they are:
#: the medians (twins of the repetitions ``lookup_seconds`` and ``build_seconds``) and the
#: two names of the index, written as ``index`` (registered) and ``label`` (the table's).
_NOT_WRITTEN = ("index", "index_name", "lookup_s", "build_s")


def record_json(r: Record) -> dict[str, Any]:
    """One record as the JSON holds it (format
    :data:`~indexzoo.tools.compare.FORMAT_VERSION`): one name per field."""
    fields = {k: v for k, v in asdict(r).items() if k not in _NOT_WRITTEN}
    if not r.lookup_seconds:  # every record of a run has them; a median alone stands for one
        fields["lookup_seconds"] = [r.lookup_s]
    if not r.build_seconds:
        fields["build_seconds"] = [r.build_s]
    return {"index": r.index_name or r.index, "label": r.index, **fields,
            "throughput_per_byte": r.throughput_per_byte,
            "half_spread": r.half_spread, "ratio_to_raw": r.ratio_to_raw,
            "ratio_to_gather": r.ratio_to_gather, "ratio_to_scan": r.ratio_to_scan,
            "throughput_slowest": r.throughput_range[0],
            "throughput_fastest": r.throughput_range[1]}


def write_json(records: Sequence[Any], env: dict[str, Any], file: BinaryIO,
               complete: bool = True,
               to_json: Callable[[Any], dict[str, Any]] = record_json) -> None:
    """The run's records and environment as JSON, to an open binary file: format
    :data:`~indexzoo.tools.compare.FORMAT_VERSION` (each record as ``to_json`` gives it,
    :func:`record_json` for ``bench``'s); ``complete`` is false while workloads are still to
    run (and stays so in the file of a run that ended early)."""
    payload = {"format_version": FORMAT_VERSION, "complete": complete, "environment": env,
               "records": [to_json(r) for r in records]}
    file.write((json.dumps(payload, indent=2, default=str) + "\n").encode())


class ResultsFile:
    """The run's JSON, written after each workload: the first time under a name of its own
    (:func:`indexzoo.tools.publish.publish`: ``STEM.json`` or, where that is taken, ``STEM-2.json``,
    ...), then rewritten whole in place (:func:`indexzoo.tools.publish.rewrite`), so the file
    always holds the workloads finished so far. ``complete`` turns true with the last one.
    A name is taken only where the files to come after it (``also``: the PNGs' suffixes) are
    free as well. ``to_json`` turns a record into the JSON's (:func:`write_json`); ``unit``
    names a workload in the line on ``log`` (``bench --preset ssb``: a scale factor)."""

    def __init__(self, stem: Path, env: dict[str, Any], workloads: int,
                 log: TextIO | None = None, also: Sequence[str] = (),
                 to_json: Callable[[Any], dict[str, Any]] = record_json,
                 unit: str = "workload") -> None:
        self.stem, self.env, self.workloads, self.log = stem, env, workloads, log
        self.also, self.to_json, self.unit = also, to_json, unit
        self.path: Path | None = None
        self.done = 0

    def _names(self) -> Iterator[str]:
        folder = self.stem.parent
        return (n for n in numbered(self.stem.name)
                if not any(os.path.lexists(folder / (n + suffix)) for suffix in self.also))

    def update(self, records: Sequence[Any]) -> None:
        """Write the records of the workloads finished so far (one more than last time)."""
        self.done += 1
        write = partial(write_json, records, self.env, complete=self.done >= self.workloads,
                        to_json=self.to_json)
        if self.path is not None:
            rewrite(self.path, write)
            return
        try:
            (self.path,) = publish(self.stem.parent, self._names(), [Member(".json", write)])
        except FileExistsError:
            raise ConfigError(f"--output {shown_path(self.stem.parent)}: every name tried for "
                              f"this run's results is taken ({shown(self.stem.name, 60)}-2 to "
                              "-1000)") from None
        if self.log is not None and self.workloads > 1:
            self.log.write(printable(f"indexzoo bench: results so far in {self.path} (rewritten "
                                     f"after each {self.unit})") + "\n")

    @property
    def named_stem(self) -> Path:
        """The stem of the name the JSON got (the PNGs are named after it)."""
        assert self.path is not None
        return self.path.with_name(self.path.name[:-len(".json")])


def prepare_output(folder: Path) -> bool:
    """Make sure results can be written to ``folder`` before any work: create it, write and
    remove a probe file. ConfigError if it cannot be; returns whether it was created."""
    name = shown_path(folder)
    try:
        exists = folder.exists()
        if exists and not folder.is_dir():
            raise ConfigError(f"--output {name} exists and is not a directory")
        folder.mkdir(parents=True, exist_ok=True)
    except ConfigError:
        raise
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--output {name}: the directory cannot be created "
                          f"({getattr(exc, 'strerror', None) or exc})") from None
    check_writable_folder(folder, f"--output {name}")
    return not exists


def remove_if_empty(folder: Path) -> None:
    """Remove ``folder`` if it is empty (the run that created it wrote nothing)."""
    with contextlib.suppress(OSError):
        folder.rmdir()  # only succeeds when empty


def publish_plots(stem: Path, members: Sequence[Member]) -> list[Path]:
    """Publish ``members`` (a run's PNGs) as one group named after the JSON's ``stem``, never
    over a file there (:func:`indexzoo.tools.publish.publish`); ConfigError where a name is
    taken."""
    try:
        return publish(stem.parent, [stem.name], members)
    except FileExistsError:
        raise ConfigError(f"--output {shown_path(stem.parent)}: the plots' names after "
                          f"{shown(stem.name, 60)} are taken; the JSON is written") from None


def header(device: str, env: dict[str, Any], command: str = "indexzoo bench") -> str:
    """The line a run starts with on standard error: the command, the device and the commit
    measured (``indexzoo bench on cpu (NAME), commit abc123``)."""
    return f"{command} on {device} ({env['device_name']}), commit {env['commit']}"


def timestamp(now: _dt.datetime | None = None) -> str:
    """``YYYYmmdd-HHMMSS`` of ``now`` (default: the current time): the part of a result's
    name that tells runs apart."""
    return (_dt.datetime.now() if now is None else now).strftime("%Y%m%d-%H%M%S")
