"""Result files are published safely: ``bench`` (JSON and PNGs) and ``recommend --out`` write
each file to a temporary created exclusively in the target folder (an unpredictable name,
never through a link), then rename it into place; a link planted at the old predictable
temporary name or at the final name is never written through; two runs never share a result
file; ``recommend`` does not replace a file that appeared at ``--out`` while it measured.

These tests run as whoever runs pytest (root on CI). That tests the same thing as an
unprivileged user would: ``O_EXCL``/``O_NOFOLLOW``, ``link`` and ``rename`` treat symbolic
links alike for every user, and no permission check is what stops the link from being
followed (the victim files here are writable by the test anyway)."""

from __future__ import annotations

import contextlib
import datetime
import errno
import io
import json
import os
import signal
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import indexzoo.files as files_module
from indexzoo.tools import bench, interrupts, recommend
from indexzoo.tools import publish as publish_module
from indexzoo.tools.cli import main
from indexzoo.tools.publish import Member, numbered, publish, rewrite

pytestmark = pytest.mark.skipif(os.name != "posix", reason="symbolic links as on POSIX")

STAMP = "20240506-070809"


class _FrozenClock:
    """Stands in for bench's ``datetime`` module: every run starts in the same second."""

    class datetime:
        @staticmethod
        def now() -> datetime.datetime:
            return datetime.datetime(2024, 5, 6, 7, 8, 9, 123456)


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "_dt", _FrozenClock)


@pytest.fixture
def workload(tmp_path: Path) -> Path:
    wl = tmp_path / "w.yaml"
    wl.write_text("name: w\nn_keys: 4096\nn_lookups: 4096\n")
    return wl


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A file outside the output folder that a planted link points to."""
    outside = tmp_path / "outside"
    outside.mkdir()
    v = outside / "victim.txt"
    v.write_text("precious\n")
    return v


def run_bench(workload: Path, folder: Path, *extra: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["bench", "--workload", str(workload), "--device", "cpu", "--indexes",
                 "searchsorted", "--repeats", "1", "--output", str(folder), *extra], out=out)
    return code, out.getvalue()


def run_recommend(workload: Path, target: Path, *extra: str) -> tuple[int, str]:
    out = io.StringIO()
    code = main(["recommend", "--workload", str(workload), "--device", "cpu", "--indexes",
                 "searchsorted", "--repeats", "1", "--out", str(target), *extra], out=out)
    return code, out.getvalue()


def regular_files(folder: Path) -> list[str]:
    """Names of the regular files (not links) in ``folder``."""
    return sorted(p.name for p in folder.iterdir()
                  if stat.S_ISREG(os.lstat(p).st_mode))


def written(text: str) -> list[Path]:
    return [Path(line[len("wrote "):]) for line in text.splitlines() if line.startswith("wrote ")]


# ---------------------------------------------------------------------- bench
def test_bench_never_writes_through_a_link_at_the_old_temporary_name(
        frozen_clock: None, workload: Path, victim: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    for suffix in (".json", ".png"):  # the names bench used for its temporaries before
        (out / f".w-cpu-{STAMP}.part{suffix}").symlink_to(victim)
    code, text = run_bench(workload, out)
    assert code == 0, text
    assert victim.read_bytes() == b"precious\n"
    files = written(text)
    assert [f.suffix for f in files] == [".json", ".png"]
    for f in files:
        assert f.parent == out and stat.S_ISREG(os.lstat(f).st_mode)  # not a link
    assert json.loads(files[0].read_text())["records"]


def test_bench_never_replaces_or_follows_a_link_at_the_final_name(
        frozen_clock: None, workload: Path, victim: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    planted = out / f"w-cpu-{STAMP}.json"
    planted.symlink_to(victim)
    code, text = run_bench(workload, out, "--no-plot")
    assert code == 0, text
    assert victim.read_bytes() == b"precious\n"
    assert planted.is_symlink() and os.readlink(planted) == str(victim)  # left as it was
    (result,) = written(text)
    assert result != planted and stat.S_ISREG(os.lstat(result).st_mode)
    assert json.loads(result.read_text())["records"]


def test_two_bench_runs_in_the_same_second_keep_both_results(
        frozen_clock: None, workload: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = run_bench(workload, out)
    second = run_bench(workload, out)
    assert first[0] == 0 and second[0] == 0
    a, b = written(first[1]), written(second[1])
    assert len(a) == len(b) == 2 and not set(a) & set(b)
    assert regular_files(out) == sorted(p.name for p in a + b)  # four files, no temporaries
    for f in a + b:
        assert f.name.startswith(f"w-cpu-{STAMP}")


def test_a_workload_file_with_dots_keeps_its_whole_name_in_the_result_names(
        frozen_clock: None, tmp_path: Path) -> None:
    wl = tmp_path / "my.big.run.yaml"
    wl.write_text("name: w\nn_keys: 4096\nn_lookups: 4096\n")
    out = tmp_path / "out"
    first, second = run_bench(wl, out), run_bench(wl, out)
    assert first[0] == 0 and second[0] == 0
    names = [p.name for p in written(first[1]) + written(second[1])]
    assert names[:2] == [f"my.big.run-cpu-{STAMP}.json", f"my.big.run-cpu-{STAMP}.png"]
    assert len(set(names)) == 4 and all(n.startswith(f"my.big.run-cpu-{STAMP}") for n in names)


# ---------------------------------------------------------------------- recommend
def test_recommend_never_writes_through_a_link_at_the_old_temporary_name(
        workload: Path, victim: Path, tmp_path: Path) -> None:
    target = tmp_path / "picked.yaml"
    (tmp_path / ".picked.yaml.part").symlink_to(victim)
    code, text = run_recommend(workload, target)
    assert code == 0, text
    assert victim.read_bytes() == b"precious\n"
    assert stat.S_ISREG(os.lstat(target).st_mode)  # a file, not a link to the victim
    assert "index: \"searchsorted\"" in target.read_text()


def test_recommend_refuses_a_dangling_link_at_out_without_force(
        workload: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "picked.yaml"
    elsewhere = tmp_path / "outside" / "made.yaml"
    elsewhere.parent.mkdir()
    target.symlink_to(elsewhere)  # exists() is False for it: a dangling link
    code, _ = run_recommend(workload, target)
    assert code == 2
    err = capsys.readouterr().err
    assert "indexzoo: error: --out" in err and "--force" in err, err
    assert target.is_symlink() and not elsewhere.exists()


def test_recommend_force_replaces_a_link_at_out_itself(workload: Path, victim: Path,
                                                        tmp_path: Path) -> None:
    target = tmp_path / "picked.yaml"
    target.symlink_to(victim)
    code, text = run_recommend(workload, target, "--force")
    assert code == 0, text
    assert victim.read_bytes() == b"precious\n"  # never written through
    assert stat.S_ISREG(os.lstat(target).st_mode)


def _appears_while_measuring(monkeypatch: pytest.MonkeyPatch, target: Path,
                             folder: bool = False) -> None:
    measure = recommend.recommend_indexes

    def measuring(*args: Any, **kwargs: Any) -> Any:
        if folder:
            target.mkdir()  # someone else's folder, made meanwhile
        else:
            target.write_text("index: btree\n")  # someone else's file, written meanwhile
        return measure(*args, **kwargs)

    monkeypatch.setattr(recommend, "recommend_indexes", measuring)


def test_recommend_refuses_a_file_that_appeared_at_out_while_it_measured(
        workload: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "picked.yaml"
    _appears_while_measuring(monkeypatch, target)
    code, text = run_recommend(workload, target)
    assert code == 2
    err = capsys.readouterr().err
    assert "appeared" in err and "--force" in err, err
    assert target.read_text() == "index: btree\n"
    assert "pick: searchsorted" in text  # the measurement is not lost: it was printed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["picked.yaml", "w.yaml"]


def test_recommend_force_replaces_a_file_that_appeared_at_out(
        workload: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "picked.yaml"
    _appears_while_measuring(monkeypatch, target)
    code, text = run_recommend(workload, target, "--force")
    assert code == 0, text
    assert "searchsorted" in target.read_text()


def test_recommend_force_refuses_a_folder_that_appeared_at_out_in_one_line(
        workload: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "picked.yaml"
    _appears_while_measuring(monkeypatch, target, folder=True)
    code, text = run_recommend(workload, target, "--force")
    assert code == 2, text
    err = capsys.readouterr().err
    assert "is a directory" in err and "Traceback" not in err, err
    assert target.is_dir() and not any(target.iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["picked.yaml", "w.yaml"]


# ---------------------------------------------------------------------- the publish step
def _text(data: bytes) -> Member:
    return Member(".txt", lambda f: f.write(data))


@contextlib.contextmanager
def _handling(sig: int) -> Iterator[None]:
    """The command line's interrupt handling, checked to hold ``sig`` before a test raises it in
    this process (without it, a SIGTERM would end the test run)."""
    with interrupts.handling_interrupts():
        assert signal.getsignal(sig) not in (signal.SIG_DFL, signal.SIG_IGN, None)
        yield


def test_a_guessed_temporary_name_is_never_opened_or_written_through(
        tmp_path: Path, victim: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Even when the random part of the temporary's name is guessed (here: forced), what is
    planted there is not opened: the temporary is created exclusively (O_EXCL | O_NOFOLLOW),
    and another random name is drawn."""
    draws = iter(["guessed", "guessed", "fresh"])
    monkeypatch.setattr(files_module.secrets, "token_hex", lambda n: next(draws))
    planted = tmp_path / ".run.txt.guessed.tmp"
    planted.symlink_to(victim)
    (final,) = publish(tmp_path, ["run"], [_text(b"result\n")])
    assert victim.read_bytes() == b"precious\n" and planted.is_symlink()
    assert final == tmp_path / "run.txt" and final.read_bytes() == b"result\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".run.txt.guessed.tmp", "outside",
                                                          "run.txt"]


def test_a_group_takes_the_first_name_free_for_every_member(tmp_path: Path) -> None:
    (tmp_path / "run.png").write_text("someone else's\n")
    (tmp_path / "run-2.json").symlink_to(tmp_path / "nowhere")  # dangling: taken all the same
    members = [Member(".json", lambda f: f.write(b"{}")), Member(".png", lambda f: f.write(b"P"))]
    finals = publish(tmp_path, numbered("run"), members)
    assert [f.name for f in finals] == ["run-3.json", "run-3.png"]
    assert (tmp_path / "run.png").read_text() == "someone else's\n"
    assert not (tmp_path / "nowhere").exists() and (tmp_path / "run-2.json").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run-2.json", "run-3.json",
                                                          "run-3.png", "run.png"]


def test_when_every_name_is_taken_nothing_is_written(tmp_path: Path) -> None:
    (tmp_path / "run.txt").write_text("theirs\n")
    with pytest.raises(FileExistsError):
        publish(tmp_path, ["run"], [_text(b"ours\n")])
    assert [p.name for p in tmp_path.iterdir()] == ["run.txt"]
    assert (tmp_path / "run.txt").read_text() == "theirs\n"


def test_replace_replaces_a_link_itself_not_its_target(tmp_path: Path, victim: Path) -> None:
    (tmp_path / "run.txt").symlink_to(victim)
    (final,) = publish(tmp_path, ["run"], [_text(b"ours\n")], replace=True)
    assert stat.S_ISREG(os.lstat(final).st_mode) and final.read_bytes() == b"ours\n"
    assert victim.read_bytes() == b"precious\n"


def test_rewrite_replaces_the_file_whole_and_a_link_itself(tmp_path: Path,
                                                             victim: Path) -> None:
    target = tmp_path / "run.json"
    target.write_text("first\n")
    rewrite(target, lambda f: f.write(b"second\n"))
    assert target.read_bytes() == b"second\n"
    target.unlink()
    target.symlink_to(victim)
    rewrite(target, lambda f: f.write(b"third\n"))
    assert stat.S_ISREG(os.lstat(target).st_mode) and target.read_bytes() == b"third\n"
    assert victim.read_bytes() == b"precious\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outside", "run.json"]


def test_an_error_while_rewriting_keeps_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "run.json"
    target.write_text("old\n")

    def half_written(f: Any) -> None:
        f.write(b"ne")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        rewrite(target, half_written)
    assert [p.name for p in tmp_path.iterdir()] == ["run.json"]
    assert target.read_text() == "old\n"


def test_results_get_the_usual_permissions_not_those_of_a_private_temporary(
        tmp_path: Path) -> None:
    umask = os.umask(0o022)
    try:
        (final,) = publish(tmp_path, ["run"], [_text(b"x")])
    finally:
        os.umask(umask)
    assert stat.S_IMODE(os.stat(final).st_mode) == 0o644


def test_without_hard_links_the_names_are_still_never_replaced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file system without hard links (FAT: link fails with EPERM) gets the files renamed in
    after an lstat check; a taken name still moves the whole group on."""
    def no_link(src: Any, dst: Any) -> None:
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(publish_module.os, "link", no_link)
    (tmp_path / "run.png").write_text("theirs\n")
    members = [Member(".json", lambda f: f.write(b"{}")), Member(".png", lambda f: f.write(b"P"))]
    finals = publish(tmp_path, numbered("run"), members)
    assert [f.name for f in finals] == ["run-2.json", "run-2.png"]
    assert [f.read_bytes() for f in finals] == [b"{}", b"P"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run-2.json", "run-2.png", "run.png"]
    assert (tmp_path / "run.png").read_text() == "theirs\n"


def test_an_error_while_writing_leaves_nothing(tmp_path: Path) -> None:
    def broken(f: Any) -> None:
        f.write(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match="No space"):
        publish(tmp_path, ["run"], [Member(".json", lambda f: f.write(b"{}")),
                                    Member(".png", broken)])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_a_member_is_written_leaves_nothing(tmp_path: Path, sig: int) -> None:
    """The signal is raised by the writer itself, in the command's own process: the same
    delivery as a ``kill`` from outside at that moment (the handler runs in the main thread at
    the next bytecode either way); ``test_interrupts`` sends it from outside to a bench."""
    def interrupted(f: Any) -> None:
        f.write(b"\x89PNG half-drawn")
        signal.raise_signal(sig)
        raise AssertionError("the signal did not interrupt the writer")

    with _handling(sig), pytest.raises(KeyboardInterrupt):
        publish(tmp_path, ["run"], [Member(".json", lambda f: f.write(b"{}")),
                                    Member(".png", interrupted)])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_the_group_is_named_removes_the_members_already_named(
        tmp_path: Path, sig: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The signal arrives after the JSON got its name, before the PNG did: naming finishes
    (a signal is held off meanwhile), then the whole group is removed and the interrupt goes
    on: no JSON without its PNG."""
    link = os.link

    def link_then_signal(src: Any, dst: Any) -> None:
        link(src, dst)
        if str(dst).endswith(".json"):
            signal.raise_signal(sig)

    monkeypatch.setattr(publish_module.os, "link", link_then_signal)
    members = [Member(".json", lambda f: f.write(b"{}")), Member(".png", lambda f: f.write(b"P"))]
    with _handling(sig), pytest.raises(KeyboardInterrupt):
        publish(tmp_path, ["run"], members)
    assert list(tmp_path.iterdir()) == []
