"""`python -m chute.cli`: the `chute` command line (as is `python -m chute`)."""

import sys

from . import main

__all__: list[str] = []

if __name__ == "__main__":
    sys.exit(main())
