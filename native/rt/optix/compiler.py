"""CUDA C++ to PTX for OptiX modules, with NVRTC (``cuda.bindings.nvrtc``), cached on disk per
source hash and GPU architecture.

IEEE float arithmetic (no fast math: the sphere test relies on exact rounding). What OptiX
needs (checked on the GPU machine, see ``docs/rt-engine.md``): ``-rdc true`` (the ``params``
variable stays visible to ``optixModuleCreate``), PTX and not OptiX-IR, and no ``ptxas`` step
(OptiX resolves its intrinsics itself). The headers come from ``OptiX_INSTALL_DIR``/include and
CUDA's own include folder.

The cache lives in ``optix/`` of indexzoo's cache folder (``$INDEXZOO_CACHE_DIR/optix``, by
default the user's cache folder, ``~/.cache/indexzoo/optix`` on Linux: :mod:`indexzoo.cachedirs`;
without a home folder nothing is kept, and each process compiles its programs); a file
is named by the SHA-256 of the source, the options and the architecture, written to a
temporary name and renamed, so concurrent compiles of one source never see a partial file.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile

from indexzoo.cachedirs import cache_root

__all__ = ["CompileError", "cache_dir", "clear", "kept", "ptx"]


class CompileError(RuntimeError):
    """NVRTC rejected a program source; the message holds its log."""


def cache_dir() -> str | None:
    """The folder of compiled programs (not created here); None where there is no cache
    folder (no home folder)."""
    base = cache_root()
    return None if base is None else os.path.join(base, "optix")


def _files(folder: str) -> list[tuple[str, int, bool]]:
    """(path, size, is temporary) of the compiled programs in ``folder``, and of the temporary
    files being written there; empty where it cannot be listed."""
    found = []
    try:
        with os.scandir(folder) as it:
            for item in it:
                temporary = item.name.endswith(".part")
                if not (item.name.endswith(".ptx") or temporary):
                    continue
                try:
                    if item.is_file(follow_symlinks=False):
                        found.append((item.path, item.stat(follow_symlinks=False).st_size,
                                      temporary))
                except OSError:  # removed meanwhile
                    continue
    except OSError:  # no folder (yet), or not readable
        return []
    return found


def kept() -> tuple[int, int]:
    """The compiled programs in the cache: their number and bytes."""
    folder = cache_dir()
    files = [] if folder is None else [f for f in _files(folder) if not f[2]]
    return len(files), sum(size for _, size, _ in files)


def clear() -> tuple[int, int]:
    """Remove the compiled programs from the cache: the number removed and their bytes."""
    folder = cache_dir()
    count = nbytes = 0
    for path, size, temporary in [] if folder is None else _files(folder):
        try:
            os.unlink(path)
        except OSError:  # removed meanwhile, or not ours to remove
            continue
        if not temporary:
            count, nbytes = count + 1, nbytes + size
    return count, nbytes


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
    if folder is None:
        return _nvrtc(source, name, opts)
    path = os.path.join(folder, f"{name}-{key[:32]}.ptx")
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        pass
    out = _nvrtc(source, name, opts)
    tmp = None
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".part")
        with os.fdopen(fd, "wb") as f:
            f.write(out)
        os.replace(tmp, path)
    except OSError:  # a read-only home: compile each time
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
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
