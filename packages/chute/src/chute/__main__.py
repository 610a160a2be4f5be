"""`python -m chute`: says where the command line is, and exits with code 2.

The command line is the `chute` command, from the `chute-cli` package: a layer above
this one, which `chute` installs but never imports (so this module does not run it).
"""

import sys

__all__: list[str] = []

if __name__ == "__main__":
    args = " ".join(sys.argv[1:]) or "--help"
    print(
        "chute: `python -m chute` does not run the command line; it is in the chute-cli "
        f"package (installed with chute): run `chute {args}` or `python -m chute_cli {args}`",
        file=sys.stderr,
    )
    sys.exit(2)
