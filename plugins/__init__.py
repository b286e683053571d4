"""The built-in indexes, one subpackage per index family.

Each subpackage registers its indexes through the ``indexzoo`` entry-point group declared in
the project's ``pyproject.toml``, exactly as a third-party plugin does. A plugin never imports
another plugin; shared machinery lives in ``indexzoo.native`` and ``indexzoo`` (core).
"""
