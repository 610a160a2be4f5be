#!/usr/bin/env bash
# chute on a machine with an accelerator and many cores: one prepared run.
#
#   bash benchmarks/accelerator/prepare.sh          # here first: wheels for that machine
#   bash benchmarks/accelerator/run.sh              # there, from the repository root
#   bash benchmarks/accelerator/run.sh --dry-run    # anywhere: CPU backend, small sizes
#
# Installs chute's layers (the wheels prepare.sh built from this tree) and what the
# Python there lacks into a folder of its own, with no index, then runs
# `python -m benchmarks.accelerator.measure`: host-to-device, worker scaling, input wait.
# Writes accelerator.json and accelerator.md under $OUT (the device tool's folder that
# comes back), or under --out DIR, or a temporary folder it names. PYTHON picks the
# interpreter (python3 by default). Takes under 5 minutes on 16 cores and one GPU.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

here=benchmarks/accelerator
wheels=$here/wheels
python=${PYTHON:-python3}
out=${OUT:-}
args=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        --dry-run) args+=(--dry-run) ;;
        --out) out=$2; shift ;;
        *) echo "run.sh: unknown argument '$1' (use --dry-run, --out DIR)" >&2; exit 2 ;;
    esac
    shift
done
out=${out:-$(mktemp -d -t chute-accelerator-out-XXXXXX)}

if [[ ! -f $wheels/stamp ]]; then
    echo "run.sh: no wheels in $wheels: run 'bash $here/prepare.sh' first (where a package index is)" >&2
    exit 2
fi
if [[ "$(bash "$here/stamp.sh")" != "$(cat "$wheels/stamp")" ]]; then
    echo "run.sh: chute's sources changed since prepare.sh built $wheels: run it again" >&2
    exit 2
fi

# pip where the interpreter has it (the accelerator image); uv's where it has not (a uv venv).
install() {
    if "$python" -m pip --version >/dev/null 2>&1; then
        "$python" -m pip install --quiet --no-index --no-deps --no-cache-dir --target "$site" "$@"
    else
        uv pip install --quiet --no-index --no-deps --python "$python" --target "$site" "$@"
    fi
}
site=$(mktemp -d -t chute-accelerator-site-XXXXXX)
trap 'rm -rf "$site"' EXIT
install "$wheels"/chute/*.whl
for wheel in "$wheels"/cp312/*.whl; do  # Each only where its module is missing.
    module=$(basename "$wheel" | cut -d- -f1 | tr '[:upper:]' '[:lower:]')
    if ! "$python" -c "import $module" 2>/dev/null; then
        install "$wheel"
    fi
done
export PYTHONPATH=$site${PYTHONPATH:+:$PYTHONPATH}
# chute from the wheels, not from a checkout or an environment elsewhere on the path.
"$python" - "$site" <<'PY'
import sys
try:
    import chute, chute_core, jax, numpy
except ImportError as error:
    sys.exit(f"run.sh: this Python lacks {error.name!r}, which the run needs; add its wheel "
             "to prepare.sh (it reaches no package index here)")
site = sys.argv[1]
for module in (chute_core, chute):
    if not module.__file__.startswith(site):
        sys.exit(f"run.sh: {module.__name__} imports from {module.__file__}, not {site}")
PY

echo "run.sh: $("$python" -V) at $(command -v "$python"), results to $out"
PYTHONUNBUFFERED=1 "$python" -m benchmarks.accelerator.measure --out "$out" "${args[@]}"
