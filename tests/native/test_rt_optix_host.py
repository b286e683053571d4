"""The OptiX engine's host side, on any machine: the PTX cache (NVRTC faked) and the assembly
of a program source. What runs on the GPU is in test_rt_optix.py (marker ``optix``)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from indexzoo.native.rt.optix import compiler, pipeline, record


@pytest.fixture
def fake_nvrtc(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    calls: list[str] = []

    def nvrtc(source: str, name: str, opts: list[bytes]) -> bytes:
        calls.append(source)
        return b"// PTX of " + source.encode()

    monkeypatch.setattr(compiler, "_nvrtc", nvrtc)
    monkeypatch.setenv("INDEXZOO_CACHE_DIR", str(tmp_path))
    return calls


def test_ptx_is_compiled_once_per_source_and_architecture(fake_nvrtc: list[str],
                                                          tmp_path: Path) -> None:
    a = compiler.ptx("int a;", "q", "compute_90", ["/opt/optix/include"])
    assert compiler.ptx("int a;", "q", "compute_90", ["/elsewhere/include"]) == a  # same source
    assert len(fake_nvrtc) == 1
    compiler.ptx("int a;", "q", "compute_80", [])
    compiler.ptx("int b;", "q", "compute_90", [])
    assert len(fake_nvrtc) == 3
    files = sorted(p.name for p in (tmp_path / "optix").iterdir())
    assert len(files) == 3 and all(f.startswith("q-") and f.endswith(".ptx") for f in files)


def test_an_unwritable_cache_still_compiles(fake_nvrtc: list[str], tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    if os.geteuid() == 0:
        pytest.skip("root may write into read-only directories")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    monkeypatch.setenv("INDEXZOO_CACHE_DIR", str(ro))
    try:
        assert compiler.ptx("int c;", "q", "compute_90", []).startswith(b"// PTX")
        assert compiler.ptx("int c;", "q", "compute_90", []).startswith(b"// PTX")
        assert len(fake_nvrtc) == 2  # nothing cached, nothing broken
    finally:
        ro.chmod(0o700)


def test_programs_are_kept_in_optix_of_the_user_cache_folder_and_nowhere_without_a_home(
        fake_nvrtc: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pwd

    monkeypatch.delenv("INDEXZOO_CACHE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "me"))
    assert compiler.cache_dir() == str(tmp_path / "me" / ".cache" / "indexzoo" / "optix")
    compiler.ptx("int d;", "q", "compute_90", [])
    assert compiler.kept()[0] == 1 and len(fake_nvrtc) == 1

    def nobody(uid: int) -> None:
        raise KeyError(uid)

    monkeypatch.delenv("HOME")
    monkeypatch.setattr(pwd, "getpwuid", nobody)
    assert compiler.cache_dir() is None
    assert compiler.ptx("int d;", "q", "compute_90", []).startswith(b"// PTX")
    assert compiler.ptx("int d;", "q", "compute_90", []).startswith(b"// PTX")
    assert len(fake_nvrtc) == 3 and compiler.kept() == (0, 0) and compiler.clear() == (0, 0)


def test_the_source_is_header_struct_params_index_programs_then_the_layer() -> None:
    lay = record.layout(("iz_handle", "keys"), (np.uint64(1), np.zeros(2, np.uint64)))
    src = pipeline.source(lay, "/* the index's programs */")
    order = [src.index(part) for part in (
        "#include <optix.h>", "struct Params {", '__constant__ Params params;',
        "#define IZ_NO_MATCH", "/* the index's programs */", "__raygen__iz")]
    assert order == sorted(order)
    assert "unsigned long long* keys;" in src


def test_a_launch_prepares_its_struct_and_source_once_per_field_types() -> None:
    names = ("iz_handle", "keys", "x_bits")
    a = pipeline.prepared("/* p */", names, (np.uint64(1), np.zeros(2, np.uint64), np.int64(3)))
    b = pipeline.prepared("/* p */", names, (np.uint64(9), np.ones(5, np.uint64), np.int64(7)))
    assert b is a  # other values, same types: nothing written again
    c = pipeline.prepared("/* p */", names, (np.uint64(1), np.zeros(2, np.uint32), np.int64(3)))
    assert c is not a and "unsigned int* keys;" in c[0].declaration
    assert "unsigned long long* keys;" in a[1] and len(a[2]) == 64
    assert pipeline.prepared("/* q */", names, (np.uint64(1), np.zeros(2, np.uint64),
                                                np.int64(3)))[1] != a[1]
