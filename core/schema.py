"""The shape of a plugin's saved state, declared once: :class:`StateSchema`.

A saved index is untrusted input: a file from anywhere can hold a rowID array longer or
shorter than its keys, a rowID past ``n``, offsets that run backwards, keys out of order.
Kernels index memory with these values and check nothing, so before any kernel reads a
loaded state, the loader checks it against the schema its plugin declares
(``GpuIndex.state_schema``) and refuses it with one
:class:`~indexzoo.errors.IndexFileError` naming the value (its path in the state and the
file's member) and what is wrong with it. A plugin writes, for example::

    state_schema = StateSchema(
        Array("pairs.keys", dtype="native", shape=("n",), order="nondecreasing"),
        Array("pairs.rowids", dtype="rowid", shape=("n",), permutation=True),
        Value("pairs.peak_bytes", int, at_least=0),
    )

The specs (paths and expressions: :mod:`indexzoo.schema_paths`):

* :class:`Array`: the array at a path: its ``dtype`` (a dtype, ``"native"`` for the native
  key dtype, ``"rowid"`` for the rowID dtype, or a tuple of allowed ones), its ``shape``
  (one expression or None per dimension), bounds of its values (``at_least``, ``below``),
  ``order`` (``"nondecreasing"`` or ``"increasing"`` along the first axis), ``permutation``
  (each of ``0 .. len - 1`` once), ``first``/``last`` (the first or last element equals an
  expression: offsets that start at 0 and end at their array's length), ``finite`` floats;
* :class:`Value`: a scalar or a record: its type (a record class: its fields' types too; or
  the class named as ``"module:Class"``, imported when a file is checked, for a class whose
  module the plugin imports only when an index is built or loaded), bounds, an expression it
  ``equals``, ``choices``; on a top-level name it replaces the type the state's annotation
  declares (for a part ``_save_state`` saves in another form, e.g. None for a scene built
  again on load);
* :class:`Nested`: specs relative to a record, for each item of a ``[*]`` path, or for a part
  that may be None (``optional=True``);
* :class:`Check`: a function for what the declarative specs cannot say (a tree's links, a hash
  table's probe sequences), given the :class:`Scope` and returning a one-line problem or None.

Every spec but :class:`Check` takes ``optional`` (the value may be None; inside a
:class:`Nested` spec, a field that a record of another kind lacks is skipped too) and
``absent`` (a top-level name that older files of the plugin do not have).

Specs run in the order given (a :class:`Check` after the fields it relies on). Beyond them the
loader refuses a state that has a top-level name the schema does not mention, lacks one it
requires, holds a value of another type than its annotation declares
(:mod:`indexzoo.schema_types`), or holds an array no :class:`Array` spec declares: a schema
covers its whole state. Every check works on NumPy and CuPy arrays alike (a load onto the GPU
is checked on the device, before any kernel runs).
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from .devices import xp_of
from .errors import IndexFileError
from .flatten import is_record, record_fields
from .schema_paths import MISSING, Expr, resolve, split_path
from .schema_types import mismatch

__all__ = ["Array", "Check", "LoadContext", "Nested", "Scope", "Spec", "StateSchema", "Value",
           "view_at"]

Bound = str | int | None
Order = Literal["nondecreasing", "increasing"]
DtypeSpec = str | np.dtype | type | tuple[Any, ...] | None


def _expr(value: Bound) -> Expr | None:
    return None if value is None else Expr(value)


@dataclass(frozen=True)
class Array:
    """An array of the saved state (see the module docstring)."""

    path: str
    dtype: DtypeSpec = None
    shape: tuple[Bound, ...] | None = None
    at_least: Bound = None
    below: Bound = None
    order: Order | None = None
    permutation: bool = False
    first: Bound = None
    last: Bound = None
    finite: bool = False
    optional: bool = False
    absent: bool = False
    _exprs: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        split_path(self.path)
        if self.order not in (None, "nondecreasing", "increasing"):
            raise ValueError(f"Array({self.path!r}): order {self.order!r}")
        shape = None if self.shape is None else tuple(_expr(s) for s in self.shape)
        object.__setattr__(self, "_exprs", {
            "shape": shape, "at_least": _expr(self.at_least), "below": _expr(self.below),
            "first": _expr(self.first), "last": _expr(self.last)})


@dataclass(frozen=True)
class Value:
    """A scalar or a record of the saved state: of type ``kind`` (``int`` takes NumPy integers
    too, ``float`` any real number; a record class or a typing form is checked field by
    field), within bounds, equal to an expression, or one of ``choices``."""

    path: str
    #: a type, a typing form (tuple[int, ...], a union), "module:Class", or a tuple of them
    kind: Any = int
    at_least: Bound = None
    below: Bound = None
    equals: Bound = None
    choices: tuple[Any, ...] | None = None
    optional: bool = False
    absent: bool = False
    _exprs: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        split_path(self.path)
        for kind in self.kind if isinstance(self.kind, tuple) else (self.kind,):
            if isinstance(kind, str) and not re.fullmatch(r"[\w.]+:[\w.]+", kind):
                raise ValueError(f"a kind named by a string is 'module:Class', not {kind!r}")
        object.__setattr__(self, "_exprs", {"at_least": _expr(self.at_least),
                                            "below": _expr(self.below),
                                            "equals": _expr(self.equals)})


@dataclass(frozen=True, init=False)
class Nested:
    """Specs whose paths (and the names in their expressions) are relative to the value at
    ``prefix``, checked once per item of a ``[*]`` prefix; ``optional``: the value may be None
    (then nothing inside is checked)."""

    prefix: str
    specs: tuple[Spec, ...]
    optional: bool
    absent: bool

    def __init__(self, prefix: str, *specs: Spec, optional: bool = False,
                 absent: bool = False) -> None:
        split_path(prefix)
        object.__setattr__(self, "prefix", prefix)
        object.__setattr__(self, "specs", tuple(specs))
        object.__setattr__(self, "optional", optional)
        object.__setattr__(self, "absent", absent)


@dataclass(frozen=True)
class Check:
    """A check the specs cannot express: ``fn(scope)`` returns None, or a one-line problem
    about the value at ``path`` (relative to the scope; ``""``: the scope's value itself). It
    may also raise ``scope.problem(path, text)`` itself."""

    fn: Callable[[Scope], str | None]
    path: str = ""


Spec = Array | Value | Nested | Check


@dataclass
class LoadContext:
    """What a schema's expressions and checks know of the load besides the state: the file,
    the base's fields and the index's parameters."""

    source: str
    n: int
    n_rows: int
    dims: int
    native: np.dtype
    rowid: np.dtype
    params: Any
    device: str
    keymaps: tuple[Any, ...] = ()
    label: str = "state"
    origins: dict[int, str] = field(default_factory=dict)
    #: extra names expressions may use (a plugin's check can add derived ones)
    names: dict[str, int] = field(default_factory=dict)


class Scope:
    """Where a spec is checked: the state's top (``root``), the record a :class:`Nested` spec
    is at (``here``, at path ``where``) and the load's context. Checks read values through
    :meth:`get` and :meth:`number`, and report through :meth:`problem`."""

    def __init__(self, root: Mapping[str, Any], here: Any, where: str, ctx: LoadContext) -> None:
        self.root, self.here, self.where, self.ctx = root, here, where, ctx

    # ------------------------------------------------------------------ reading
    def get(self, path: str) -> Any:
        """The value at ``path``, relative to this scope, else from the state's top; MISSING if
        neither has it (paths without ``[*]``)."""
        for base, at in ((self.here, self.where), (self.root, "")):
            for _, value in resolve(base, path, at):
                if value is not MISSING:
                    return value
        return MISSING

    def number(self, name: str) -> int | float:
        """An expression's name: ``n``, ``n_rows``, ``dims``, ``params.<field>``, a name the
        context adds, or an integer of the state."""
        ctx = self.ctx
        if name in ("n", "n_rows", "dims"):
            return int(getattr(ctx, name))
        if name in ctx.names:
            return ctx.names[name]
        if name.startswith("params."):
            value = getattr(ctx.params, name[len("params."):], MISSING)
        else:
            value = self.get(name)
        if isinstance(value, (bool, np.bool_)) or not isinstance(
                value, (int, float, np.integer, np.floating)):
            raise self.problem(name, f"is {_shown(value)}, not a number")
        return int(value) if isinstance(value, (int, np.integer)) else float(value)

    def array(self, name: str) -> Any:
        value = self.get(name)
        if not _is_array(value):
            raise self.problem(name, f"is {_shown(value)}, not an array")
        return value

    def eval(self, expr: Expr, what: str) -> int | float:
        try:
            return expr(self)
        except IndexFileError:
            raise
        except (ValueError, TypeError, ArithmeticError) as exc:
            raise self.problem(what, f"cannot be checked ({exc})") from None

    # ------------------------------------------------------------------ reporting
    def problem(self, path: str, text: str) -> IndexFileError:
        """The one-line IndexFileError about the value at ``path`` (relative to the scope)."""
        full = ".".join(p for p in (self.where, path) if p)
        try:
            value = self.get(path) if path else self.here
        except ValueError:  # a concrete path (``shards[3].rows``): no member to name
            value = None
        member = self.ctx.origins.get(id(value)) if _is_array(value) else None
        at = f"{self.ctx.label}.{full}" if full else self.ctx.label
        return IndexFileError(" ".join(
            f"{self.ctx.source}: {at}{f' ({member})' if member else ''}: {text}".split()))

    def nested(self, here: Any, where: str) -> Scope:
        return Scope(self.root, here, where, self.ctx)


def _address(a: Any) -> int:
    return int(a.__array_interface__["data"][0]) if isinstance(a, np.ndarray) else int(a.data.ptr)


def view_at(view: Any, base: Any, offset_items: int, step: int = 1) -> bool:
    """Whether ``view`` is ``base[offset_items::step]`` in memory (both 1-D; a check of an
    array saved as a view of another, e.g. the values of a pair table from its second word)."""
    return (_is_array(view) and _is_array(base) and type(view) is type(base)
            and view.ndim == 1 and base.ndim == 1 and view.dtype == base.dtype
            and view.strides[0] == base.strides[0] * step
            and _address(view) == _address(base) + offset_items * base.strides[0])


def _is_array(v: Any) -> bool:
    return isinstance(v, np.ndarray) or type(v).__module__.startswith("cupy")


def _shown(v: Any) -> str:
    if v is MISSING:
        return "missing"
    if v is None:
        return "None"
    if _is_array(v):
        return f"an array of {v.dtype} {list(v.shape)}"
    return f"a {type(v).__name__} ({str(v)[:40]})"


class StateSchema:
    """The saved state of one plugin, declared once (see the module docstring)."""

    def __init__(self, *specs: Spec) -> None:
        self.specs: tuple[Spec, ...] = tuple(specs)

    @functools.cached_property
    def _arrays(self) -> list[re.Pattern[str]]:
        """The declared array paths as patterns, made on the first check (a plugin declares
        its schema when its class is made, which listing the indexes does)."""
        return [re.compile(_pattern(p)) for p in self._array_paths(self.specs, "")]

    def __repr__(self) -> str:
        return f"StateSchema({len(self.specs)} specs)"

    @staticmethod
    def _array_paths(specs: Sequence[Spec], prefix: str) -> Iterator[str]:
        for s in specs:
            if isinstance(s, Array):
                yield f"{prefix}.{s.path}" if prefix else s.path
            elif isinstance(s, Nested):
                yield from StateSchema._array_paths(
                    s.specs, f"{prefix}.{s.prefix}" if prefix else s.prefix)

    @property
    def names(self) -> frozenset[str]:
        """The top-level names of the state the schema mentions."""
        return frozenset(split_path(s.prefix if isinstance(s, Nested) else s.path)[0][0]
                         for s in self.specs if not isinstance(s, Check))

    def _required(self) -> set[str]:
        """Top-level names a state must have (None where a spec allows it): all it mentions
        but those a spec lets be absent (a part older files lack)."""
        absent = {split_path(s.prefix if isinstance(s, Nested) else s.path)[0][0]
                  for s in self.specs if not isinstance(s, Check) and s.absent}
        return set(self.names) - absent

    # ------------------------------------------------------------------ checking
    def check(self, saved: Mapping[str, Any], ctx: LoadContext,
              hints: Mapping[str, Any] | None = None) -> None:
        """Check the saved state ``saved`` (name -> value, arrays in place) against this
        schema; IndexFileError on the first problem. ``hints``: the annotations of the state
        class, which every value must conform to."""
        top = Scope(saved, saved, "", ctx)
        unknown = sorted(set(saved) - self.names)
        if unknown:
            raise top.problem(unknown[0], "is not part of this index's state (the schema does "
                                          "not declare it)")
        missing = sorted(self._required() - set(saved))
        if missing:
            raise top.problem(missing[0], "is missing")
        typed = {s.path for s in self.specs if isinstance(s, Value)}
        for name, value in saved.items():
            if name in typed:  # the schema says what the saved form of this name is
                continue
            got = mismatch(value, (hints or {}).get(name, Any), name)
            if got is not None:
                raise top.problem(got[0], f"is {got[1]}")
        _run(self.specs, top)
        for path, value in _array_leaves(saved):
            if not any(p.fullmatch(path) for p in self._arrays):
                raise IndexFileError(
                    f"{ctx.source}: {ctx.label}.{path} ({ctx.origins.get(id(value), '?')}): an "
                    "array the index's schema does not declare")


def _pattern(path: str) -> str:
    """A regex of the concrete paths ``path`` names (:func:`_array_leaves` writes a dict's
    entries as ``[key]``, so a named segment matches ``.name`` or ``[name]``)."""
    out = []
    for i, (name, each) in enumerate(split_path(path)):
        seg = re.escape(name) if i == 0 else rf"(?:\.{re.escape(name)}|\[{re.escape(name)}\])"
        out.append(seg + (r"\[[^\]]*\]" if each else ""))
    return "".join(out)


def _array_leaves(saved: Mapping[str, Any]) -> Iterator[tuple[str, Any]]:
    """(path, array) for every array inside the state (dicts, lists, tuples, records)."""
    stack: list[tuple[str, Any]] = [(name, v) for name, v in saved.items()]
    while stack:
        at, value = stack.pop()
        if _is_array(value):
            yield at, value
        elif isinstance(value, dict):
            stack.extend((f"{at}[{k}]", v) for k, v in value.items())
        elif is_record(type(value)):
            stack.extend((f"{at}.{name}", getattr(value, name))
                         for name in record_fields(value))
        elif isinstance(value, (list, tuple)):
            stack.extend((f"{at}[{i}]", v) for i, v in enumerate(value))


#: What a check function may raise on a state it cannot read: the file's problem, not the
#: check's (an IndexFileError then names the check's place).
_CHECK_ERRORS = (TypeError, ValueError, AttributeError, KeyError, IndexError, ArithmeticError)


def _run(specs: Sequence[Spec], scope: Scope) -> None:
    for spec in specs:
        if isinstance(spec, Check):
            try:
                text = spec.fn(scope)
            except IndexFileError:
                raise
            except _CHECK_ERRORS as exc:  # a state too malformed for the check to read
                text = f"cannot be checked ({type(exc).__name__}: {exc})"
            if text:
                raise scope.problem(spec.path, text)
            continue
        path = spec.prefix if isinstance(spec, Nested) else spec.path
        for at, value in resolve(scope.here, path, scope.where):
            if (value is None and spec.optional) or (value is MISSING and spec.absent):
                continue
            if value is MISSING and spec.optional and "." in at:
                continue  # a field of a record of another kind (a GAS's, in an IAS)
            if value is MISSING:
                raise scope.nested(scope.root, "").problem(at, "is missing")
            if isinstance(spec, Nested):
                if value is None:
                    raise scope.nested(scope.root, "").problem(at, "is None")
                _run(spec.specs, scope.nested(value, at))
            elif isinstance(spec, Array):
                _check_array(spec, scope, scope.nested(value, at), value)
            else:
                _check_value(spec, scope, scope.nested(value, at), value)


# ---------------------------------------------------------------------- arrays
def _dtype_matches(spec: DtypeSpec, dt: np.dtype, ctx: LoadContext) -> str | None:
    if spec is None:
        return None
    options = spec if isinstance(spec, tuple) else (spec,)
    allowed = [ctx.native if o == "native" else ctx.rowid if o == "rowid" else np.dtype(o)
               for o in options]
    return None if dt in allowed else f"has dtype {dt}, not {' or '.join(map(str, allowed))}"


def _check_array(spec: Array, outer: Scope, scope: Scope, a: Any) -> None:
    """``a`` against ``spec``: its expressions are evaluated in ``outer`` (the scope the spec
    is declared in), its problems reported at ``scope`` (the array's own place)."""
    fail = scope.problem
    if not _is_array(a):
        raise fail("", f"is {_shown(a)}, not an array")
    wrong = _dtype_matches(spec.dtype, a.dtype, scope.ctx)
    if wrong:
        raise fail("", wrong)
    exprs = spec._exprs
    if exprs["shape"] is not None:
        want = exprs["shape"]
        if a.ndim != len(want):
            raise fail("", f"has {a.ndim} dimensions, not {len(want)}")
        for axis, e in enumerate(want):
            if e is not None:
                size = outer.eval(e, f"{spec.path} (its shape)")
                if int(a.shape[axis]) != size:
                    dim = f"length {a.shape[axis]}" if a.ndim == 1 else \
                        f"{a.shape[axis]} along axis {axis}"
                    raise fail("", f"has {dim}, not {e.text} = {size}")
    _check_values(spec, outer, scope, a)


def _check_values(spec: Array, outer: Scope, scope: Scope, a: Any) -> None:
    fail = scope.problem
    exprs = spec._exprs
    xp = xp_of(a)
    flat = a.reshape(-1) if a.ndim != 1 else a
    size = int(flat.shape[0])
    for key in ("first", "last"):
        e = exprs[key]
        if e is None:
            continue
        want = outer.eval(e, f"{spec.path} (its {key} element)")
        if size == 0:
            raise fail("", f"is empty; its {key} element must be {e.text} = {want}")
        got = flat[0 if key == "first" else -1].item()
        if got != want:
            raise fail("", f"has {key} element {got}, not {e.text} = {want}")
    if size == 0:
        return
    if spec.finite and a.dtype.kind == "f" and not bool(xp.isfinite(flat).all()):
        pos = int(xp.argmax(~xp.isfinite(flat)))
        raise fail("", f"holds {flat[pos].item()} at position {pos}, not a finite number")
    for key, below in (("at_least", False), ("below", True)):
        e = exprs[key]
        if e is None:
            continue
        bound = outer.eval(e, f"{spec.path} (its bounds)")
        extreme = flat.max() if below else flat.min()
        if (extreme.item() >= bound) if below else (extreme.item() < bound):
            bad = flat >= bound if below else flat < bound
            pos = int(xp.argmax(bad))
            rel = "is not below" if below else "is below"
            raise fail("", f"holds {flat[pos].item()} at position {pos}, which {rel} "
                           f"{e.text} = {bound}")
    if spec.order is not None and a.ndim == 1 and size > 1:
        bad = a[1:] < a[:-1] if spec.order == "nondecreasing" else a[1:] <= a[:-1]
        if bool(bad.any()):
            pos = int(xp.argmax(bad))
            word = "decreases" if spec.order == "nondecreasing" else "does not increase"
            raise fail("", f"{word} at position {pos + 1} ({a[pos].item()} then "
                           f"{a[pos + 1].item()}); it must be {spec.order}")
    if spec.permutation:
        _check_permutation(flat, xp, fail)


def _check_permutation(flat: Any, xp: Any, fail: Callable[[str, str], IndexFileError]) -> None:
    size = int(flat.shape[0])
    if flat.dtype.kind not in "iu":
        raise fail("", f"has dtype {flat.dtype}; a permutation holds integers")
    if int(flat.min()) < 0 or int(flat.max()) >= size:
        bad = (flat < 0) | (flat >= size)
        pos = int(xp.argmax(bad))
        raise fail("", f"holds {flat[pos].item()} at position {pos}, outside 0 .. {size - 1} "
                       "(it must hold each of them once)")
    seen = xp.zeros(size, dtype=bool)
    seen[flat.astype(np.int64, copy=False)] = True
    if not bool(seen.all()):
        gap = int(xp.argmax(~seen))
        raise fail("", f"does not hold {gap}: some value appears twice (it must hold each of "
                       f"0 .. {size - 1} once)")


# ---------------------------------------------------------------------- scalars
_KIND_OK: dict[type, Callable[[Any], bool]] = {
    int: lambda v: isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)),
    float: lambda v: isinstance(v, (int, float, np.integer, np.floating))
    and not isinstance(v, (bool, np.bool_)),
    bool: lambda v: isinstance(v, (bool, np.bool_)),
    str: lambda v: isinstance(v, str),
}


def _class_named(kind: Any) -> Any:
    """The class a kind ``"module:Class"`` names (its module imported now); other kinds as
    they are."""
    if not isinstance(kind, str):
        return kind
    module, _, name = kind.partition(":")
    found: Any = importlib.import_module(module)
    for part in name.split("."):
        found = getattr(found, part)
    return found


def _check_value(spec: Value, outer: Scope, scope: Scope, v: Any) -> None:
    fail = scope.problem
    kinds = tuple(map(_class_named, spec.kind if isinstance(spec.kind, tuple) else (spec.kind,)))
    if not any(_KIND_OK[k](v) if k in _KIND_OK else mismatch(v, k, "") is None for k in kinds):
        names = " or ".join(getattr(k, "__name__", str(k)) for k in kinds)
        raise fail("", f"is {_shown(v)}, not a {names}")
    if spec.choices is not None and v not in spec.choices:
        raise fail("", f"is {str(v)[:40]!r}, not one of {list(spec.choices)}")
    exprs = spec._exprs
    for key, ok in (("at_least", lambda x, b: x >= b), ("below", lambda x, b: x < b),
                    ("equals", lambda x, b: x == b)):
        e = exprs[key]
        if e is None:
            continue
        bound = outer.eval(e, f"{spec.path} (its bounds)")
        if not ok(v, bound):
            rel = {"at_least": "is below", "below": "is not below", "equals": "is not"}[key]
            raise fail("", f"is {v}, which {rel} {e.text} = {bound}")
