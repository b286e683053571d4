"""The error classes of indexzoo.

Every error raised on purpose derives from :class:`IndexZooError`, so callers can catch the
whole family at once, and each one also derives from the built-in exception a Python user
would expect (``ValueError`` for bad input or configuration, ``RuntimeError`` for state and
device problems), so generic handlers keep working.

Messages name the argument, the value or dtype that was received, and what is allowed.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "DeviceUnavailable",
    "DuplicatePlugin",
    "IndexFileError",
    "IndexZooError",
    "InvalidInput",
    "MissingDependency",
    "NotBuilt",
    "OutOfRange",
    "PluginError",
    "ResourceError",
    "UnknownIndexInFile",
    "Unsupported",
]


class IndexZooError(Exception):
    """Base class of every error indexzoo raises on purpose."""


class InvalidInput(IndexZooError, ValueError):
    """A key, value or lookup array is unusable: wrong dtype or shape, NaN, mismatched length,
    or a key outside what the index (or the chosen mode) can represent."""


class OutOfRange(InvalidInput):
    """A value of a query's expression leaves its SQL type (``a * b`` of two BIGINT columns
    past 2^63, say) on a row the query reads: the query is refused, as DuckDB refuses it,
    rather than answered with a wrapped value. The message names the expression, its type and
    the values."""


class IndexFileError(IndexZooError, ValueError):
    """A saved index cannot be read: not a saved index, truncated, corrupted (a checksum
    mismatch), written in a newer format version, or saved by another state layout of its
    plugin; or an index cannot be saved (its state holds something the format does not
    store). The message names the file and what is wrong; nothing is loaded."""


class Unsupported(IndexZooError, NotImplementedError):
    """The index lacks a capability that was asked for (e.g. range lookups on a hash table,
    an ``out`` mode, a key width or a device it does not implement)."""


class ConfigError(IndexZooError, ValueError):
    """Bad configuration: unknown index name, unknown parameter, out-of-range value,
    malformed spec file. Raised before any device work starts."""


class PluginError(ConfigError):
    """A plugin cannot be used: it failed to load, its register hook failed, or an index class
    it registers breaks the plugin contract (a misspelled hook, a hook with the wrong
    signature, a plugin API this indexzoo cannot take). The message names the plugin or the
    class and every problem; the other plugins stay usable."""


class UnknownIndexInFile(IndexFileError, ConfigError):
    """A saved index names an index that cannot be used here (not installed, or registered
    twice): refused as a file (an IndexFileError) and, as the registry's own error for that
    name, a ConfigError. The message names the file, the index and the registry's reason."""


class DuplicatePlugin(PluginError):
    """Two plugins registered the same index name. The message names both providers; that
    name is unusable until one of them is removed, every other name stays usable."""


class NotBuilt(IndexZooError, RuntimeError):
    """A lookup or footprint query on an index whose ``build`` has not completed."""


class DeviceUnavailable(IndexZooError, RuntimeError):
    """The requested device cannot be used here; the message says why (no GPU, no driver,
    missing CuPy or numba-cuda, and which extra to install)."""


class ResourceError(IndexZooError, RuntimeError):
    """A run would need more memory (host or GPU) than is available; raised before anything
    is allocated. The message says how much is needed, for what, and how much is free."""


class MissingDependency(IndexZooError, ImportError):
    """An optional dependency is missing; the message names the extra it belongs to and a pip
    command that installs it (:func:`indexzoo.extras.install_line`)."""

    def __init__(self, package: str, extra: str, purpose: str):
        from .extras import install_line

        self.package = package
        self.extra = extra
        super().__init__(
            f"{purpose} needs the optional package {package!r} (indexzoo's {extra} extra), "
            f"which is not installed; install it with: {install_line(extra, package)}"
        )
