"""A griffe extension for indexzoo's docstrings, which are written in reStructuredText's
conventions, for the API reference (``mkdocs.yml`` names it among the Python handler's
``extensions``).

* A role, ``:class:`GpuIndex``` or ``:data:`~indexzoo.plugin_api.PLUGIN_API```, becomes a
  cross-reference: a link where the site documents the object it names, else the name as code
  (an optional reference, which ``--strict`` accepts unresolved). A short name is resolved in
  the scope of the docstring's object, as Python would resolve it there; ``~`` shows the last
  part of the name only.
* A paragraph that ends in ``::`` (a literal block follows) ends in ``:``.
* ``#:`` comments right above an attribute without a docstring become its docstring.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|attr|mod|data|exc|obj|const):`(?P<text>[^`]+)`")
_EXPLICIT = re.compile(r"^(?P<title>.*?)\s*<(?P<target>[^<>]+)>$")
_LITERAL = re.compile(r"(?<=\S)::$", re.M)
_BARE_LITERAL = re.compile(r"^\s*::\n", re.M)


def _reference(text: str, obj: griffe.Object) -> str:
    explicit = _EXPLICIT.match(text)
    target = explicit.group("target") if explicit else text
    short = target.startswith("~")
    target = target.lstrip("~.").removesuffix("()")
    if explicit:
        title = explicit.group("title")
    elif short:
        title = target.rsplit(".", 1)[-1]
    else:
        title = target
    if text.removesuffix("()") != text:
        title += "()"
    try:
        head, _, rest = target.partition(".")
        resolved = obj.resolve(head)
        identifier = f"{resolved}.{rest}" if rest else resolved
    except (griffe.NameResolutionError, ValueError, KeyError, AttributeError):
        identifier = target
    return f'<autoref identifier="{identifier}" optional><code>{title}</code></autoref>'


def _rewrite(value: str, obj: griffe.Object) -> str:
    value = _ROLE.sub(lambda m: _reference(m.group("text"), obj), value)
    value = _BARE_LITERAL.sub("\n", value)
    return _LITERAL.sub(":", value)


def _comment_docstring(attr: griffe.Attribute) -> str | None:
    """The ``#:`` lines right above ``attr``'s first line, without their markers."""
    if attr.lineno is None:
        return None
    try:
        lines = attr.module.lines
    except (ValueError, AttributeError):
        return None
    found: list[str] = []
    number = attr.lineno - 2  # the line above, 0-based
    while number >= 0 and lines[number].strip().startswith("#:"):
        found.append(lines[number].strip()[2:].strip())
        number -= 1
    return "\n".join(reversed(found)) or None


class RstDocstrings(griffe.Extension):
    """Reads roles, literal-block markers and ``#:`` comments, once the package is loaded."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        self._visit(pkg, seen=set())

    def _visit(self, obj: griffe.Object, seen: set[str]) -> None:
        if obj.path in seen:
            return
        seen.add(obj.path)
        if obj.is_attribute and obj.docstring is None:
            comment = _comment_docstring(obj)  # type: ignore[arg-type]
            if comment:
                obj.docstring = griffe.Docstring(comment, parent=obj)
        if obj.docstring is not None:
            obj.docstring.value = _rewrite(obj.docstring.value, obj)
        for member in obj.members.values():
            if not member.is_alias:
                self._visit(member, seen)  # type: ignore[arg-type]
