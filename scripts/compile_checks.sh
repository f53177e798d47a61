#!/usr/bin/env bash
# Backend compile checks that `make test` runs before pytest (no GPU needed):
#   ROCm: set up the gfx942 toolchain (scripts/rocm/setup_toolchain.sh: apt + .deb downloads), then
#         compile the HIP sources for gfx942 (scripts/rocm/compile_check.py);
#   CUDA: compile for sm_90a and check the machine code (scripts/cuda/check_sass.sh; needs nvcc and
#         cuobjdump: the machine's own, else those scripts/setup.sh installed into .toolchain/cuda/).
# Locally, a check whose script or tool is missing is skipped with a warning. In CI (CI=true) that
# is a failure: a check that did not run must not look like one that passed.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON="${PYTHON:-python3}"

cannot_run() {
  if [ "${CI:-}" = true ]; then
    echo "[compile_checks] FAILED (CI): $1" >&2
    exit 1
  fi
  echo "[compile_checks] SKIPPED: $1" >&2
}

if [ ! -f scripts/rocm/setup_toolchain.sh ] || [ ! -f scripts/rocm/compile_check.py ]; then
  cannot_run "scripts/rocm/setup_toolchain.sh or scripts/rocm/compile_check.py is missing"
elif ! bash scripts/rocm/setup_toolchain.sh; then
  cannot_run "the gfx942 toolchain could not be set up (apt or the Debian mirror unreachable?)"
else
  "$PYTHON" scripts/rocm/compile_check.py
fi

# Appended: tools already on the machine keep precedence; only the missing ones come from here.
CUDA_TOOLS_BIN="$PWD/.toolchain/cuda/nvidia/cu13/bin"
export PATH="$PATH:$CUDA_TOOLS_BIN"
if ! command -v nvcc >/dev/null 2>&1 || [ "$(command -v nvcc)" = "$CUDA_TOOLS_BIN/nvcc" ]; then
  export CUDA_HOME="${CUDA_TOOLS_BIN%/bin}"
fi

if [ ! -f scripts/cuda/check_sass.sh ]; then
  cannot_run "scripts/cuda/check_sass.sh is missing"
elif ! command -v nvcc >/dev/null 2>&1 || ! command -v cuobjdump >/dev/null 2>&1; then
  cannot_run "sm_90a SASS check: nvcc or cuobjdump not found (scripts/setup.sh installs both from PyPI; offline?)"
else
  bash scripts/cuda/check_sass.sh
fi
