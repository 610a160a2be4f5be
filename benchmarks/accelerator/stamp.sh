#!/usr/bin/env bash
# A digest of chute's package sources (what prepare.sh builds its wheels from): prints
# one line. Run from the repository root. Same tree, same line, on any machine.
set -euo pipefail
find packages -path '*/src/*' -type f -name '*.py' -o -name pyproject.toml -path 'packages/*' |
    LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1
