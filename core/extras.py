"""The install lines indexzoo's messages give for an optional extra, as commands that work.

indexzoo is not on a package registry, so an install line that asks one for indexzoo and an
extra finds nothing. What works wherever indexzoo is installed from (a clone, a wheel built
with ``python -m build``) is installing the extra's own packages, read from the installed
distribution's metadata: ``pip install 'dask>=2024.1' 'distributed>=2024.1'``. Without that metadata (the
sources run uninstalled), the line is the clone's: ``pip install -e '.[dask]'`` in indexzoo's
source folder.
"""

from __future__ import annotations

import importlib.metadata
import re
import shlex

__all__ = ["extra_requirements", "install_line"]

_EXTRA = re.compile(r"""\bextra\s*==\s*["']([^"']+)["']""")
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def extra_requirements(extra: str) -> tuple[str, ...]:
    """The requirements the installed indexzoo declares for ``extra`` (``"dask>=2024.1"``,
    markers dropped), in the metadata's order; empty when indexzoo's metadata is not found."""
    try:
        declared = importlib.metadata.requires("indexzoo") or []
    except importlib.metadata.PackageNotFoundError:
        return ()
    out = []
    for line in declared:
        requirement, _, marker = line.partition(";")
        found = _EXTRA.search(marker)
        if found and _normal(found.group(1)) == _normal(extra):
            out.append(requirement.strip().replace(" ", ""))
    return tuple(out)


def install_line(extra: str, package: str | None = None) -> str:
    """A pip command that installs indexzoo's ``extra`` (only ``package`` of it, if given) and
    works today: the extra's requirements by name, else the clone's editable install. A
    ``package`` the extra does not declare is installed by its own name; a ``package`` named
    as the extra itself (``dask`` of the ``dask`` extra, which needs ``distributed`` too)
    stands for the whole extra."""
    wanted = extra_requirements(extra)
    if package is not None and _normal(package) != _normal(extra):
        name = _normal(package)
        chosen = tuple(r for r in wanted
                       if (m := _NAME.match(r)) is not None and _normal(m.group(1)) == name)
        return f"pip install {shlex.quote(chosen[0] if chosen else package)}"
    if wanted:
        return "pip install " + " ".join(shlex.quote(r) for r in wanted)
    return f"pip install -e '.[{extra}]' in indexzoo's source folder"
