"""An on-disk cache of the CPU kernels numba compiles, shared by every process that compiles the
same kernels again (a script run twice, a test run and its subprocesses, Dask workers): on by
default, in ``kernels/`` of the user's cache folder (``~/.cache/indexzoo/kernels``,
``$XDG_CACHE_HOME/indexzoo/kernels``, ``~/Library/Caches/indexzoo/kernels`` on macOS,
``%LOCALAPPDATA%\\indexzoo\\Cache\\kernels`` on Windows; ``INDEXZOO_CACHE_DIR`` moves the
cache folder, :mod:`indexzoo.cachedirs`). ``INDEXZOO_KERNEL_CACHE`` names another folder for
the kernels, or turns them off (``off``, ``0``, ``no``, ``false``, ``none``).

numba's own cache (``cache=True``) cannot serve these kernels: :class:`~.targets.Kernel`
generates each CPU function from one template (there is no source file to key on, and every
kernel of the template has the same bytecode), its body is a closure made per configuration,
and numba checks only the cached function's own source file, not those of the functions it
calls. So an entry here is keyed by everything the compiled code is made from:

* the kernel's identity: the bytecode, constants, default arguments, closure contents and
  referenced globals of the generated function and, recursively, of every Python function
  they can reach (a module's attributes included), with the values numba freezes into the
  code (numbers, arrays, dtypes, tuples), the source files those functions live in, and the
  jit options. A value of a kind not known here makes the kernel uncacheable: it compiles as
  it would without the cache;
* the versions of Python (``sys.version``: version, build and compiler), numba, llvmlite and
  NumPy, the platform, and numba's configuration (``NUMBA_OPT``, ``NUMBA_BOUNDSCHECK``,
  ``NUMBA_CPU_NAME``, ``NUMBA_CPU_FEATURES``, ...; not the few settings that only choose what
  runs the code, such as the thread pool or the CUDA simulator);
* as in numba's own cache, the argument types and the target machine: LLVM's target triple,
  CPU name and CPU features (``codegen().magic_tuple()``), so a folder shared by machines of
  different CPUs (a home folder on a network) never hands one machine another's code.

Concurrency and damage. An entry is one file, written under a temporary name and renamed into
place, so processes filling the folder at once never see a partial file; the file holds its
whole key, compared on load, so a file can never answer for another key. A file that cannot
be read as an entry of its key (damaged, truncated, foreign, of another format) is a miss: the
kernel is compiled, and the file removed (best-effort, and only if it is still the file that
was read). numba refuses some compiled functions (those using dynamic globals, or object-mode
lifted loops); they are not stored. Entries are pickles: the folder is trusted as the user's
own (it is created readable by its owner alone).

Loading. A load links the stored code into this process with what linking it needs (numba's
runtime and hash-secret symbols: :func:`_ready_to_link`), not with numba's refresh of every
typing and lowering registry of the CPU target, which its own cache pays on a load and which
only compiling needs (numba's compiler refreshes before it compiles): a process that only
loads kernels starts about 0.3 to 0.4 s of CPU sooner.

Size. The folder holds at most ``INDEXZOO_KERNEL_CACHE_SIZE`` MiB of entries (default 1024).
Loading an entry touches its modification time, so the time says when it was last used; a
process checks the folder's size after its first write and again after each tenth of the limit
it writes (one listing of the folder, never at a load), and when the entries exceed the limit
removes the least recently used first, down to the limit. Two processes pruning at once
remove what they find; a file already gone is skipped. Temporary files older than an hour
(left by a process that died while writing) are removed then too.

Where there is no place for it, the cache stays out of the way: no home folder, a folder that
cannot be created (a read-only home, a path under a file) and a folder that cannot be written
all compile as without the cache, silently (a readable folder that cannot be written is still
read). ``indexzoo cache info`` says where the folder is, whether it is used and why, and its
entries; ``indexzoo cache clear`` empties it.

GPU kernels. A ``cuda.jit`` kernel launched through CuPy (:mod:`~.cudalaunch`: every
:class:`~.targets.Kernel` and ``GroupKernel`` on ``cuda`` whose arguments it can take) is kept
as its PTX and entry name (:func:`cuda_entry`), keyed as a CPU kernel is plus the argument
types, the compute capability and the versions of numba-cuda, NVVM and the CUDA driver; a
process that finds it loads the PTX into a CuPy module and compiles nothing. Kernels launched
by numba itself (the fallback where CuPy cannot take the arguments) compile in each process:
numba-cuda's ``cache=True`` has the same blind spots as the CPU's. Compiled OptiX programs are
kept, by source hash, in ``optix/`` of the same cache folder
(:mod:`indexzoo.native.rt.optix.compiler`). Functions made with :func:`~.targets.njit_cached`
use numba's own cache, in numba's places.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import sys
import threading
import time
import types
import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np

from indexzoo.cachedirs import cache_root
from indexzoo.envvars import CACHE_DIR, KERNEL_CACHE, KERNEL_CACHE_OFF, KERNEL_CACHE_SIZE

__all__ = ["ENTRY_SUFFIX", "CudaEntry", "Location", "Usage", "attach", "clear", "cuda_entry",
           "identity", "location", "prune", "state", "usage"]

#: Bumped when the format of an entry or of the key changes.
FORMAT = 3

#: The name ending of an entry, and of a file being written (``<entry>.<random>.tmp``).
ENTRY_SUFFIX = ".nbk"
TEMP_SUFFIX = ".tmp"

#: A temporary file this old was left by a process that died while writing it.
STALE_TEMP_S = 3600.0

#: A process lists the folder again (to prune it) after writing this share of the limit.
PRUNE_EVERY = 0.1

_MIB = 1 << 20


class Uncacheable(Exception):
    """A value a kernel depends on that the identity cannot describe."""


_SCALARS = (type(None), bool, int, float, complex, str, bytes)
_files: dict[str, str] = {}
_files_lock = threading.Lock()


def _file_digest(path: str) -> str:
    """SHA-256 of a source file (kept per process: sources do not change under a run)."""
    with _files_lock:
        got = _files.get(path)
    if got is None:
        try:
            with open(path, "rb") as f:
                got = hashlib.sha256(f.read()).hexdigest()
        except OSError:
            got = "no-file"
        with _files_lock:
            _files[path] = got
    return got


#: Packages whose functions and classes are named, not walked: their versions are part of the
#: key (the standard library's with Python's).
_LIBRARIES = frozenset({"numba", "numpy", "llvmlite"})


def _library(module: str | None) -> bool:
    top = (module or "").partition(".")[0]
    return top in _LIBRARIES or top in sys.stdlib_module_names or top == "builtins"


def _code_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _code_names(c)
    return names


def _dispatcher_like(obj: Any) -> bool:
    """A numba dispatcher of another target (numba-cuda's ``CUDADispatcher`` need not derive
    from numba's own): a Python function to walk and the options it compiles with."""
    return (isinstance(getattr(obj, "py_func", None), types.FunctionType)
            and isinstance(getattr(obj, "targetoptions", None), dict))


class _Walk:
    """The identity of a value: a string that changes whenever anything numba would compile
    into a kernel from it changes (:class:`Uncacheable` where that cannot be told)."""

    def __init__(self) -> None:
        self.functions: dict[int, str] = {}
        self.keep: list[Any] = []  # keeps the walked objects alive, so no id is reused

    def value(self, obj: Any) -> str:
        from numba.core.dispatcher import Dispatcher
        from numba.core.extending import _Intrinsic

        if isinstance(obj, Dispatcher) or _dispatcher_like(obj):
            # a jitted function of ours or of a user's (CPU or CUDA): walked
            options = sorted((k, repr(v)) for k, v in obj.targetoptions.items())
            return f"dispatcher:{options}:{self.function(obj.py_func)}"
        if isinstance(obj, _Intrinsic):
            return f"intrinsic:{self.function(obj._defn)}"
        if isinstance(obj, _SCALARS):
            return f"{type(obj).__name__}:{obj!r}"
        if isinstance(obj, np.generic):
            return f"np:{obj.dtype.str}:{obj.tobytes().hex()}"
        if isinstance(obj, np.dtype):
            return f"dtype:{obj.descr!r}"
        if isinstance(obj, np.ndarray):
            data = np.ascontiguousarray(obj)
            return (f"array:{obj.dtype.descr!r}:{obj.shape}:{obj.strides}:"
                    f"{hashlib.sha256(data.tobytes()).hexdigest()}")
        if isinstance(obj, (tuple, list, frozenset, set)):
            items = sorted(obj, key=repr) if isinstance(obj, (frozenset, set)) else obj
            return (f"{type(obj).__module__}.{type(obj).__qualname__}("
                    + ",".join(self.value(x) for x in items) + ")")
        if isinstance(obj, types.ModuleType):
            return f"module:{obj.__name__}"
        if isinstance(obj, type):
            name = f"type:{obj.__module__}.{obj.__qualname__}"
            if _library(obj.__module__):
                return name
            # a class of ours (a record type, say): its fields and the file defining it
            module = sys.modules.get(obj.__module__)
            where = getattr(module, "__file__", None) or "no-file"
            return f"{name}:{getattr(obj, '_fields', None)}:{_file_digest(where)}"
        if isinstance(obj, types.FunctionType):
            if _library(obj.__module__):  # fixed by the library's version
                return f"library-function:{obj.__module__}.{obj.__qualname__}"
            return self.function(obj)
        if isinstance(obj, (types.BuiltinFunctionType, np.ufunc)) or (
                _library(type(obj).__module__) and callable(obj)
                and isinstance(getattr(obj, "__name__", None), str)):
            # a builtin, a ufunc, a NumPy function (an array-function dispatcher), ...
            return (f"library:{type(obj).__module__}.{type(obj).__qualname__}:"
                    f"{getattr(obj, '__module__', None)}.{obj.__name__}")
        return self.numba_object(obj)

    def numba_object(self, obj: Any) -> str:
        from numba.core import types as nbtypes

        if isinstance(obj, nbtypes.Type):
            return f"numba-type:{obj}"
        raise Uncacheable(f"{type(obj).__module__}.{type(obj).__qualname__}")

    def code(self, code: types.CodeType) -> str:
        consts = ",".join(self.code(c) if isinstance(c, types.CodeType) else self.value(c)
                          for c in code.co_consts)
        return (f"code:{code.co_code.hex()}:{code.co_names}:{code.co_varnames}:"
                f"{code.co_freevars}:{code.co_cellvars}:{code.co_argcount}:{consts}")

    def function(self, fn: types.FunctionType) -> str:
        key = id(fn)
        done = self.functions.get(key)
        if done is not None:
            return done
        # a function that reaches itself (recursion) refers to itself by name
        self.functions[key] = f"function:{fn.__module__}.{fn.__qualname__}:recursive"
        self.keep.append(fn)
        parts = [fn.__module__ or "", fn.__qualname__, _file_digest(fn.__code__.co_filename),
                 self.code(fn.__code__), self.value(fn.__defaults__),
                 self.value(tuple(sorted((fn.__kwdefaults__ or {}).items())))]
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True):
            try:
                contents = cell.cell_contents
            except ValueError:  # a cell not filled yet
                parts.append(f"{name}=<empty>")
                continue
            parts.append(f"{name}={self.value(contents)}")
        names = sorted(_code_names(fn.__code__))
        for name in names:
            if name not in fn.__globals__:
                continue  # a builtin, or an attribute name
            value = fn.__globals__[name]
            parts.append(f"{name}={self.value(value)}")
            if isinstance(value, types.ModuleType):  # module.attribute: the attributes read
                for attr in names:
                    if attr in vars(value):
                        parts.append(f"{name}.{attr}={self.value(vars(value)[attr])}")
        digest = hashlib.sha256("\n".join(parts).encode()).hexdigest()
        self.functions[key] = f"function:{digest}"
        return self.functions[key]


#: numba settings that choose only what runs the compiled code, never the code itself: the
#: CUDA simulator (CPU kernels are the same under it), and the thread pool of parallel loops
#: (its layer and size are looked up when the code runs, as in numba's own cache).
_RUNTIME_SETTINGS = frozenset({"ENABLE_CUDASIM", "NUMBA_NUM_THREADS", "NUMBA_DEFAULT_NUM_THREADS",
                               "THREADING_LAYER", "THREADING_LAYER_PRIORITY", "CACHE_DIR",
                               "DEBUG_CACHE"})


def _environment() -> str:
    import llvmlite
    import numba
    from numba.core import config

    settings = sorted((k, repr(v)) for k, v in vars(config).items()
                      if k.isupper() and not callable(v) and k not in _RUNTIME_SETTINGS)
    return repr((FORMAT, sys.version, sys.platform, numba.__version__, llvmlite.__version__,
                 np.__version__, settings))


def identity(dispatcher: Any) -> str | None:
    """The key of everything ``dispatcher`` (a numba CPU dispatcher) compiles from, as a hex
    digest, argument types and target machine aside; None where it cannot be told."""
    walk = _Walk()
    try:
        text = walk.value(dispatcher)
    except Uncacheable:
        return None
    return hashlib.sha256((_environment() + text).encode()).hexdigest()


@dataclass(frozen=True)
class Location:
    """Where the kernel cache is, if anywhere, and why: ``folder`` None where it is off."""

    folder: str | None
    why: str
    limit: int  # bytes


def location() -> Location:
    """The kernel cache's folder as the environment says, and why; not created here
    (ConfigError for a malformed ``INDEXZOO_KERNEL_CACHE`` or ``INDEXZOO_KERNEL_CACHE_SIZE``)."""
    setting = KERNEL_CACHE.value()
    limit = KERNEL_CACHE_SIZE.value() * _MIB
    if setting == KERNEL_CACHE_OFF:
        text = os.environ.get(KERNEL_CACHE.name, "").strip()
        return Location(None, f"{KERNEL_CACHE.name}={text}", limit)
    if setting:
        return Location(os.path.abspath(os.path.expanduser(setting)), f"set by {KERNEL_CACHE.name}",
                        limit)
    root = cache_root()
    if root is None:
        return Location(None, f"no home folder to keep it in; {KERNEL_CACHE.name} can name one",
                        limit)
    where = "of " + CACHE_DIR.name if CACHE_DIR.value() else "of the user's cache folder"
    return Location(os.path.join(root, "kernels"), f"the default: kernels/ {where}", limit)


def state(folder: str) -> tuple[str, str | None]:
    """Whether ``folder`` can serve as the cache, told without changing anything: ``"on"``
    (a folder that can be read and written, or one that can be created), ``"read only"`` (read,
    never written) or ``"off"``, with the reason where it is not ``"on"``."""
    path = folder
    while not os.path.lexists(path):  # the nearest part of the path that exists
        parent = os.path.dirname(path)
        if parent == path:
            return "off", f"{folder} cannot be created"
        path = parent
    if not os.path.isdir(path):
        return "off", f"{folder} cannot be created: {path} is not a folder"
    if path != folder:
        if not os.access(path, os.W_OK | os.X_OK):
            return "off", f"{folder} cannot be created: {path} cannot be written"
        return "on", None
    if not os.access(path, os.R_OK | os.X_OK):
        return "off", f"{folder} cannot be read"
    if not os.access(path, os.W_OK):
        return "read only", f"{folder} cannot be written: kernels are read from it, none written"
    return "on", None


@dataclass(frozen=True)
class Usage:
    """What a cache folder holds: its entries and their bytes, and temporary files."""

    entries: int
    bytes: int
    temporary: int


def _listing(folder: str) -> list[tuple[str, float, int, bool]]:
    """(path, mtime, size, is temporary) of the cache's regular files in ``folder``; empty
    where it cannot be listed. Files that vanish meanwhile are left out."""
    found = []
    try:
        with os.scandir(folder) as it:
            for item in it:
                temporary = item.name.endswith(TEMP_SUFFIX) and ENTRY_SUFFIX in item.name
                if not (item.name.endswith(ENTRY_SUFFIX) or temporary):
                    continue
                try:
                    if not item.is_file(follow_symlinks=False):
                        continue
                    st = item.stat(follow_symlinks=False)
                except OSError:  # removed by another process meanwhile
                    continue
                found.append((item.path, st.st_mtime, st.st_size, temporary))
    except OSError:  # no folder (yet), or not readable
        return []
    return found


def usage(folder: str) -> Usage:
    """The entries in ``folder`` and their total size."""
    files = _listing(folder)
    return Usage(sum(not t for *_, t in files), sum(size for _, _, size, t in files if not t),
                 sum(t for *_, t in files))


def _remove(path: str) -> bool:
    """Remove ``path``; False where it could not be (a file already gone counts as removed)."""
    try:
        os.unlink(path)
    except FileNotFoundError:  # another process removed it first
        return True
    except OSError:
        return False
    return True


def prune(folder: str, limit: int, *, now: float | None = None) -> list[str]:
    """Remove the least recently used entries of ``folder`` (oldest modification time first)
    until the rest hold at most ``limit`` bytes, and temporary files older than
    :data:`STALE_TEMP_S`; the paths removed. Safe beside other processes doing the same."""
    now = time.time() if now is None else now
    removed = []
    entries = []
    for path, mtime, size, temporary in _listing(folder):
        if temporary:
            if now - mtime > STALE_TEMP_S and _remove(path):
                removed.append(path)
        else:
            entries.append((mtime, path, size))
    total = sum(size for *_, size in entries)
    for _, path, size in sorted(entries):
        if total <= limit:
            break
        if _remove(path):
            removed.append(path)
            total -= size
    return removed


def clear(folder: str) -> tuple[int, int]:
    """Remove every entry of ``folder`` (and temporary files): the number removed and their
    bytes. Processes using the folder meanwhile compile what they miss."""
    count = size = 0
    for path, _, nbytes, temporary in _listing(folder):
        if _remove(path) and not temporary:
            count += 1
            size += nbytes
    return count, size


class _Folder:
    """One cache folder as this process uses it: whether it can be written, and the bytes
    written since it was last pruned."""

    def __init__(self, path: str, limit: int) -> None:
        self.path = path
        self.limit = limit
        self.writable = True
        self._written = 0
        self._pruned = False
        self._lock = threading.Lock()

    def wrote(self, size: int) -> None:
        """``size`` bytes were written: prune after the first write, and after each
        :data:`PRUNE_EVERY` of the limit written since the last prune."""
        with self._lock:
            self._written += size
            due = not self._pruned or self._written > self.limit * PRUNE_EVERY
            if due:
                self._pruned, self._written = True, 0
        if due:
            prune(self.path, self.limit)


_folders: dict[tuple[str, int], _Folder | None] = {}
_folders_lock = threading.Lock()


def _folder(path: str, limit: int) -> _Folder | None:
    """The folder ``path``, created if missing (once per process); None where it cannot be."""
    key = (path, limit)
    with _folders_lock:
        if key in _folders:
            return _folders[key]
        try:
            os.makedirs(path, mode=0o700, exist_ok=True)
            usable = os.path.isdir(path) and os.access(path, os.R_OK | os.X_OK)
        except (OSError, ValueError):  # a read-only home, a path under a file, a NUL byte
            usable = False
        got = _Folder(path, limit) if usable else None
        if got is not None and not os.access(path, os.W_OK):
            got.writable = False  # read, never written
        _folders[key] = got
        return got


class _KernelCache:
    """numba's cache interface (``load_overload``/``save_overload``) over one folder."""

    def __init__(self, dispatcher: Any, folder: _Folder) -> None:
        self._dispatcher = dispatcher
        self._folder = folder
        self._name = getattr(dispatcher.py_func, "__name__", "kernel")
        self._enabled = True
        self._asked: dict[str, str] = {}  # signature -> the key a load looked for (a miss)

    # the rest of numba's Cache interface
    @property
    def cache_path(self) -> str:
        return self._folder.path

    def enable(self) -> None:
        self._enabled = True

    def disable(self) -> None:
        self._enabled = False

    def flush(self) -> None:
        pass

    def _key(self, sig: Any, magic: Any) -> tuple[str, str] | None:
        """The whole key of the kernel compiled for ``sig`` and the path of its entry. Told
        again at each load and save (a few milliseconds): numba reads the globals at each
        compile, so a global changed since an earlier signature's compile changes the key."""
        if not self._enabled:
            return None
        ident = identity(self._dispatcher)
        if ident is None:
            return None
        full = repr((ident, str(sig), magic))
        digest = hashlib.sha256(full.encode()).hexdigest()
        return full, os.path.join(self._folder.path, f"{self._name}-{digest[:40]}{ENTRY_SUFFIX}")

    def load_overload(self, sig: Any, target_context: Any) -> Any:
        from numba.core.compiler import CompileResult

        key = self._key(sig, target_context.codegen().magic_tuple())
        if key is None:
            return None
        full, path = key
        self._asked[str(sig)] = full
        try:
            f = open(path, "rb")  # noqa: SIM115 (closed below; its inode is compared first)
        except (OSError, ValueError):  # missing, or unreadable here: a miss
            return None
        read = None
        try:
            with f:
                read = os.fstat(f.fileno())
                stored, needs, payload = pickle.load(f)
                if stored != full:  # another kernel's entry under this name: never used
                    raise ValueError("foreign entry")
                _ready_to_link(target_context, needs)
                result = CompileResult._rebuild(target_context, *payload)
        except Exception:  # damaged, truncated, foreign or of another format: compiled instead
            _discard(path, read)
            return None
        with contextlib.suppress(OSError):
            os.utime(path)  # its use, for the least-recently-used pruning
        return _as_asked(result, sig)

    def save_overload(self, sig: Any, cres: Any) -> None:
        from numba.core.serialize import dumps

        if not self._folder.writable:
            return
        if any(not x.can_cache for x in cres.lifted) or cres.library.has_dynamic_globals:
            return
        key = self._key(sig, cres.library.codegen.magic_tuple())
        if key is None:
            return
        full, path = key
        if self._asked.pop(str(sig), None) != full:  # a global changed while it compiled
            return
        try:
            data = dumps((full, _needs(cres.library), cres._reduce()))
        except Exception:  # something in the result numba cannot serialise: not stored
            return
        _write(self._folder, path, data)


def _discard(path: str, read: os.stat_result | None) -> None:
    """Remove a file that is no entry, unless another process replaced it meanwhile."""
    with contextlib.suppress(OSError):
        now = os.stat(path)
        if read is not None and (now.st_ino, now.st_dev) == (read.st_ino, read.st_dev):
            os.unlink(path)


def _write(folder: _Folder, path: str, data: bytes) -> None:
    """Write an entry: under a temporary name, renamed into place (never seen half written).
    A full or read-only disk leaves the kernel compiled in memory only, and this process
    writes no more."""
    tmp = f"{path}.{uuid.uuid4().hex[:12]}{TEMP_SUFFIX}"
    try:
        os.makedirs(folder.path, mode=0o700, exist_ok=True)  # cleared meanwhile
        with open(tmp, "xb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as exc:
        if not isinstance(exc, FileNotFoundError):  # (not a folder removed meanwhile)
            folder.writable = False
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return
    folder.wrote(len(data))


#: The runtime parts a compiled kernel may call whose symbols numba adds only when they are
#: initialised or imported, by a name every one of their symbols starts with.
_RUNTIME_PARTS = {"nrt": "NRT_", "hash": "_numba_hashsecret_"}


def _needs(library: Any) -> tuple[str, ...]:
    """The parts of :data:`_RUNTIME_PARTS` the kernel's linked code names (declared or
    defined): what a process must set up before it links the kernel. Read from the whole
    module's text, so a part is never missed (at worst one is set up unneeded)."""
    text = library.get_llvm_str()
    return tuple(part for part, prefix in _RUNTIME_PARTS.items() if prefix in text)


def _ready_to_link(target_context: Any, needs: tuple[str, ...]) -> None:
    """What a kernel compiled by another process needs to be linked and run here, as
    :func:`_needs` told when it was saved: the LLVM symbols of numba's runtime (NRT:
    allocation, reference counts) and of the hash secret (hashing, sets, dicts), added when
    those are initialised and imported (together about 50 ms of a process on the 2-core
    machine, so only where the kernel names them).

    Not ``target_context.refresh()``, which numba's own cache calls: it imports and installs
    every typing and lowering registry of the CPU target (about 0.3 to 0.4 s of CPU, the
    largest part of a process that only loads kernels), which compiling needs and loading does
    not; numba's compiler refreshes the context itself before it compiles anything, so a
    process that loads some kernels and compiles others still compiles with every registry.
    The rest of what numba initialises (its helper library's symbols, the threading layer of a
    parallel kernel, which the loaded result starts itself) is there without a refresh."""
    if "hash" in needs:
        import numba.cpython.hashing  # noqa: F401 (its import adds the hash secret's symbols)
    if "nrt" in needs:
        from numba.core.runtime import rtsys

        rtsys.initialize(target_context)


def _as_asked(cres: Any, sig: Any) -> Any:
    """``cres`` under the argument types ``sig`` names, or None. numba files a loaded kernel
    under the argument types it was compiled for, as unpickled; a type made from a class
    that pickles by value (a launch record's named tuple, made per record layout) comes back
    equal in every field but not equal as a type, and the kernel, filed under a key no call
    asks for, would be loaded again at every call. The entry's key holds the types' text, so
    the same text names the same layout: the kernel is filed under the asked types."""
    from numba.core import sigutils

    asked, _ = sigutils.normalize_signature(sig)
    got = tuple(cres.signature.args)
    if got == tuple(asked):
        return cres
    if [str(t) for t in got] != [str(t) for t in asked]:
        return None  # not the kernel asked for: compiled instead
    return cres._replace(signature=cres.signature.replace(args=tuple(asked)))


class CudaEntry:
    """The cache's entry for one CUDA kernel: the PTX numba-cuda compiled for these argument
    types and this compute capability, and the kernel's entry name, so that another process
    launches it without compiling (:class:`~.cudalaunch.CupyLaunch` loads the PTX into a CuPy
    module). Keyed as a CPU kernel is (:func:`identity`), plus the argument types, the compute
    capability, and the versions of numba-cuda, NVVM and the CUDA driver. Made by
    :func:`cuda_entry`."""

    def __init__(self, folder: _Folder, name: str, key: str) -> None:
        self._folder = folder
        self._key = key
        digest = hashlib.sha256(key.encode()).hexdigest()
        self.path = os.path.join(folder.path, f"{name}-cuda-{digest[:40]}{ENTRY_SUFFIX}")

    def load(self) -> tuple[bytes, str] | None:
        """(PTX, entry name), or None: missing, or not an entry of this key (then removed)."""
        read = None
        try:
            with open(self.path, "rb") as f:
                read = os.fstat(f.fileno())
                stored, ptx, entry = pickle.load(f)
            if stored != self._key or not isinstance(ptx, bytes) or not isinstance(entry, str):
                raise ValueError("foreign entry")
        except FileNotFoundError:
            return None
        except Exception:  # damaged, truncated, foreign, unreadable: compiled instead
            _discard(self.path, read)
            return None
        with contextlib.suppress(OSError):
            os.utime(self.path)
        return ptx, entry

    def save(self, ptx: bytes, entry: str) -> None:
        if self._folder.writable:
            _write(self._folder, self.path, pickle.dumps((self._key, ptx, entry)))


def _cuda_environment() -> str:
    """The versions a CUDA kernel's PTX depends on besides its source: numba-cuda's (numba's
    where numba-cuda is not a package of its own), NVVM's and the CUDA driver's."""
    from importlib import metadata

    try:
        numba_cuda = metadata.version("numba-cuda")
    except metadata.PackageNotFoundError:
        import numba

        numba_cuda = f"numba {numba.__version__}"
    from numba.cuda.cudadrv import nvvm

    try:
        import cupy

        driver = cupy.cuda.runtime.driverGetVersion()
    except Exception:
        driver = None
    return repr((numba_cuda, tuple(nvvm.NVVM().get_version()), driver))


def cuda_entry(dispatcher: Any, argtypes: tuple[Any, ...],
               compute_capability: tuple[int, int]) -> CudaEntry | None:
    """The cache entry of CUDA dispatcher ``dispatcher`` compiled for ``argtypes`` (numba
    types) on a device of ``compute_capability``; None where the cache is off, its folder
    unusable, or the kernel cannot be keyed (then it compiles as without the cache)."""
    where = location()
    if where.folder is None:
        return None
    folder = _folder(where.folder, where.limit)
    if folder is None:
        return None
    ident = identity(dispatcher)
    if ident is None:
        return None
    try:
        env = _cuda_environment()
    except Exception:  # no NVVM to ask: nothing to key on
        return None
    key = repr((ident, env, tuple(str(t) for t in argtypes), tuple(compute_capability)))
    name = getattr(dispatcher.py_func, "__name__", "kernel")
    return CudaEntry(folder, name, key)


def attach(dispatcher: Any) -> Any:
    """``dispatcher`` (a numba CPU dispatcher), reading and filling the kernel cache where it
    is on (:func:`location`) and its folder can be created; else as it was, silently."""
    where = location()
    if where.folder is not None:
        folder = _folder(where.folder, where.limit)
        if folder is not None:
            dispatcher._cache = _KernelCache(dispatcher, folder)
    return dispatcher
