"""`python -m chute_cli`: the `chute` command line (as is the `chute` console script)."""

import sys

from . import main

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
