"""Where indexzoo keeps what it compiles: one folder per user, by the platform's convention for
caches (nothing there is needed; everything can be compiled again):

* Linux and other POSIX systems: ``$XDG_CACHE_HOME/indexzoo``, else ``~/.cache/indexzoo``;
* macOS: ``~/Library/Caches/indexzoo``;
* Windows: ``%LOCALAPPDATA%\\indexzoo\\Cache``.

``INDEXZOO_CACHE_DIR`` moves that folder. Under it, ``kernels/`` holds the compiled CPU
kernels (``indexzoo.native.jitcache``; ``INDEXZOO_KERNEL_CACHE`` moves or turns off that
folder alone) and ``optix/`` the compiled OptiX programs (``indexzoo.native.rt.optix``).
"""

from __future__ import annotations

import os
import sys

from .envvars import CACHE_DIR

__all__ = ["cache_root", "user_cache_root"]


def _home() -> str | None:
    """The user's home folder (``HOME``, else the password database); None where there is
    none to be told."""
    home = os.path.expanduser("~")
    return home if home != "~" and os.path.isabs(home) else None


def user_cache_root(platform: str | None = None) -> str | None:
    """indexzoo's folder in the user's cache folder, by the convention of ``platform``
    (default: this one, ``sys.platform``); None where no home folder can be told (no ``HOME``
    and no entry in the password database, say)."""
    platform = sys.platform if platform is None else platform
    if platform == "win32":
        base = os.environ.get("LOCALAPPDATA", "").strip()
        if not base:
            home = _home()
            if home is None:
                return None
            base = os.path.join(home, "AppData", "Local")
        return os.path.join(base, "indexzoo", "Cache")
    home = _home()
    if platform == "darwin":
        return None if home is None else os.path.join(home, "Library", "Caches", "indexzoo")
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    if xdg and os.path.isabs(xdg):  # the XDG spec: a relative value is ignored
        return os.path.join(xdg, "indexzoo")
    return None if home is None else os.path.join(home, ".cache", "indexzoo")


def cache_root() -> str | None:
    """indexzoo's cache folder: ``INDEXZOO_CACHE_DIR`` where set (``~`` expanded), else
    :func:`user_cache_root`. Not created here."""
    folder = CACHE_DIR.value()
    if folder:
        return os.path.abspath(os.path.expanduser(folder))
    return user_cache_root()
