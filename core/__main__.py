"""``python -m indexzoo``: the ``indexzoo`` command, for an environment whose scripts folder is
not on the PATH."""

from __future__ import annotations

import sys

from indexzoo.tools.cli import main

if __name__ == "__main__":
    sys.exit(main())
