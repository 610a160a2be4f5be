#!/usr/bin/env bash
# Prepares the accelerator run, here (with uv and a package index), before it travels.
#
#   bash benchmarks/accelerator/prepare.sh
#
# Fills benchmarks/accelerator/wheels/ (ignored by git; carried to the accelerator
# machine, which reaches no package index):
#   chute/   chute's layers, built as wheels from this working tree (pure Python);
#   cp312/   what the accelerator image may lack, for its Python 3.12 on x86-64:
#            array-record and cloudpickle (run.sh installs those missing there);
#   stamp    a digest of the packages' sources: run.sh refuses wheels older than the tree.
# Then run.sh, there: `bash benchmarks/accelerator/run.sh` (or `--dry-run` here).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

here=benchmarks/accelerator
wheels=$here/wheels
rm -rf "$wheels"
mkdir -p "$wheels/chute" "$wheels/cp312"

# chute's layers. chute-testing and chute-cli are not needed there.
for package in chute-core chute-sources chute-samplers chute-transforms chute-execution \
    chute-device chute-checkpoint chute; do
    uv build --quiet --wheel --package "$package" --out-dir "$wheels/chute"
done

# What the image's Python may lack, at the versions uv.lock pins (so both machines read
# files alike): array-record (chute-sources reads ArrayRecord with it; absl-py and etils,
# its own needs, are in the image) and cloudpickle (chute ships functions to workers with
# it). run.sh installs each only where it is missing.
if python3 -m pip --version >/dev/null 2>&1; then pip=(python3 -m pip); else pip=(uvx pip); fi
locked=$(uv export --frozen --no-hashes --all-packages 2>/dev/null)
for name in array-record cloudpickle; do
    version=$(sed -n "s/^$name==\([^ ;]*\).*/\1/p" <<<"$locked")
    "${pip[@]}" download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d "$wheels/cp312" "$name==${version:?$name is not in uv.lock}"
done

bash "$here/stamp.sh" >"$wheels/stamp"
ls -l "$wheels"/chute "$wheels"/cp312
echo "prepared: $(du -sh "$wheels" | cut -f1) in $wheels"
