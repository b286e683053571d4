"""An on-disk cache of the CPU kernels numba compiles, shared by processes that compile the
same kernels again (a test run and its subprocesses, Dask workers, two test runs of one
tree): off unless ``INDEXZOO_KERNEL_CACHE`` names a folder.

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
* the versions of Python, numba, llvmlite and NumPy, and numba's configuration
  (``NUMBA_OPT``, ``NUMBA_BOUNDSCHECK``, ...; not the few settings that only choose what runs
  the code, such as the thread pool or the CUDA simulator);
* as in numba's own cache, the argument types and the target machine (CPU name, features).

An entry is one file, written under a temporary name and renamed into place, so processes
filling the folder at once never see a partial file; the file holds its whole key, compared
on load, so a file can never answer for another key. numba refuses some compiled functions
(those using dynamic globals, or object-mode lifted loops); they are not stored.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import sys
import threading
import types
import uuid
from typing import Any

import numpy as np

from indexzoo.envvars import KERNEL_CACHE

__all__ = ["attach", "identity"]

#: Bumped when the format of an entry or of the key changes.
FORMAT = 1


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


class _Walk:
    """The identity of a value: a string that changes whenever anything numba would compile
    into a kernel from it changes (:class:`Uncacheable` where that cannot be told)."""

    def __init__(self) -> None:
        self.functions: dict[int, str] = {}
        self.keep: list[Any] = []  # keeps the walked objects alive, so no id is reused

    def value(self, obj: Any) -> str:
        from numba.core.dispatcher import Dispatcher
        from numba.core.extending import _Intrinsic

        if isinstance(obj, Dispatcher):  # a jitted function of ours or of a user's: walked
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
    return repr((FORMAT, sys.version, numba.__version__, llvmlite.__version__, np.__version__,
                 settings))


def identity(dispatcher: Any) -> str | None:
    """The key of everything ``dispatcher`` (a numba CPU dispatcher) compiles from, as a hex
    digest, argument types and target machine aside; None where it cannot be told."""
    walk = _Walk()
    try:
        text = walk.value(dispatcher)
    except Uncacheable:
        return None
    return hashlib.sha256((_environment() + text).encode()).hexdigest()


class _KernelCache:
    """numba's cache interface (``load_overload``/``save_overload``) over one folder."""

    def __init__(self, dispatcher: Any, folder: str) -> None:
        self._dispatcher = dispatcher
        self._folder = folder
        self._name = getattr(dispatcher.py_func, "__name__", "kernel")
        self._enabled = True
        self._asked: dict[str, str] = {}  # signature -> the key a load looked for (a miss)

    # the rest of numba's Cache interface
    @property
    def cache_path(self) -> str:
        return self._folder

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
        return full, os.path.join(self._folder, f"{self._name}-{digest[:40]}.nbk")

    def load_overload(self, sig: Any, target_context: Any) -> Any:
        from numba.core.compiler import CompileResult

        target_context.refresh()
        key = self._key(sig, target_context.codegen().magic_tuple())
        if key is None:
            return None
        full, path = key
        self._asked[str(sig)] = full
        try:
            with open(path, "rb") as f:
                stored, payload = pickle.load(f)
            if stored != full:  # another kernel's entry under this name: never used
                return None
            cres = CompileResult._rebuild(target_context, *payload)
        except Exception:  # missing, damaged or unreadable here: compiled instead
            return None
        return _as_asked(cres, sig)

    def save_overload(self, sig: Any, cres: Any) -> None:
        from numba.core.serialize import dumps

        if any(not x.can_cache for x in cres.lifted) or cres.library.has_dynamic_globals:
            return
        key = self._key(sig, cres.library.codegen.magic_tuple())
        if key is None:
            return
        full, path = key
        if self._asked.pop(str(sig), None) != full:  # a global changed while it compiled
            return
        try:
            data = dumps((full, cres._reduce()))
        except Exception:  # something in the result numba cannot serialise: not stored
            return
        tmp = f"{path}.{uuid.uuid4().hex[:12]}.tmp"
        try:
            os.makedirs(self._folder, exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
        except OSError:  # a full or read-only disk: the kernel stays compiled in memory
            with contextlib.suppress(OSError):
                os.unlink(tmp)


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


def attach(dispatcher: Any) -> Any:
    """``dispatcher`` (a numba CPU dispatcher), reading and filling the kernel cache where
    ``INDEXZOO_KERNEL_CACHE`` names a folder."""
    folder = KERNEL_CACHE.value()
    if folder:
        dispatcher._cache = _KernelCache(dispatcher, os.path.abspath(os.path.expanduser(folder)))
    return dispatcher
