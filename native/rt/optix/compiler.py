"""CUDA C++ to PTX for OptiX modules, with NVRTC (``cuda.bindings.nvrtc``), cached on disk per
source hash and GPU architecture.

IEEE float arithmetic (no fast math: the sphere test relies on exact rounding). What OptiX
needs (checked on the GPU machine, see ``docs/rt-engine.md``): ``-rdc true`` (the ``params``
variable stays visible to ``optixModuleCreate``), PTX and not OptiX-IR, and no ``ptxas`` step
(OptiX resolves its intrinsics itself). The headers come from ``OptiX_INSTALL_DIR``/include and
CUDA's own include folder.

The cache lives in ``$INDEXZOO_CACHE_DIR/optix`` (default ``~/.cache/indexzoo/optix``); a file
is named by the SHA-256 of the source, the options and the architecture, written to a
temporary name and renamed, so concurrent compiles of one source never see a partial file.
"""

from __future__ import annotations

import hashlib
import os
import tempfile

from indexzoo.envvars import CACHE_DIR

__all__ = ["CompileError", "cache_dir", "ptx"]


class CompileError(RuntimeError):
    """NVRTC rejected a program source; the message holds its log."""


def cache_dir() -> str:
    base = CACHE_DIR.value() or os.path.join(
        os.path.expanduser("~"), ".cache", "indexzoo")
    return os.path.join(base, "optix")


def _options(arch: str, include: list[str]) -> list[bytes]:
    opts = ["-std=c++17", "-rdc", "true", "-default-device",
            f"--gpu-architecture={arch}"]
    return [o.encode() for o in opts] + [f"-I{d}".encode() for d in include]


def ptx(source: str, name: str, arch: str, include: list[str]) -> bytes:
    """The PTX of ``source`` for ``arch`` (e.g. ``compute_90``), from the cache or NVRTC."""
    opts = _options(arch, include)
    key = hashlib.sha256(source.encode() + b"\0" + b" ".join(opts[:-len(include) or None])
                         + arch.encode()).hexdigest()
    folder = cache_dir()
    path = os.path.join(folder, f"{name}-{key[:32]}.ptx")
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        pass
    out = _nvrtc(source, name, opts)
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".part")
        with os.fdopen(fd, "wb") as f:
            f.write(out)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only home: compile each time
    return out


def _nvrtc(source: str, name: str, opts: list[bytes]) -> bytes:
    from cuda.bindings import nvrtc

    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), f"{name}.cu".encode(), 0, [], [])
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise CompileError(f"nvrtcCreateProgram: {err}")
    try:
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, size = nvrtc.nvrtcGetProgramLogSize(prog)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, log)
            raise CompileError(f"NVRTC could not compile {name}.cu:\n"
                               + log.decode(errors="replace"))
        _, size = nvrtc.nvrtcGetPTXSize(prog)
        out = b" " * size
        nvrtc.nvrtcGetPTX(prog, out)
        return out
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
