#!/usr/bin/env bash
# Installs what building, testing and benchmarking gemm need, and only what is missing (or at the
# wrong pinned version), so it runs offline when everything is there (e.g. on a device machine,
# whose image brings its own torch). Idempotent.
#   - Python packages (torch, the loader, the ABI checker, pytest, ...);
#   - the CUDA compiler tools the sm_90a SASS check needs (nvcc, cuobjdump), from PyPI into the
#     repository's ignored .toolchain/cuda/, when the machine lacks either. Offline, that step is
#     skipped with a warning (scripts/compile_checks.sh then says the check did not run); in CI
#     (CI=true) it is a failure.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-python3}"
TORCH_VERSION=2.13.0
# PyTorch's own index holds the CPU-only wheels; PyPI's Linux torch is the CUDA build.
TORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu
# Exact pins: the loader API and ABI checks the tests rely on, and the transformers release whose
# FP8 integration tests/test_transformers.py drives (it needs kernels >= 0.19.1, < 0.20, and pulls
# huggingface-hub >= 2.4 with it: pip resolves those).
PINNED=(kernels==0.19.1 kernel-abi-check==0.14.1 transformers==5.25.0)
# Any version will do. accelerate: transformers refuses to load any FP8 checkpoint without it.
UNPINNED=(pytest numpy matplotlib tqdm tabulate accelerate)

log() { echo "[setup] $*" >&2; }

pip_install() {
  local flags=(-q --disable-pip-version-check)
  # Debian's system Python refuses pip installs outside a venv (PEP 668); CI installs system-wide.
  if [ -z "${VIRTUAL_ENV:-}" ] && [ -f "$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')/EXTERNALLY-MANAGED" ]; then
    flags+=(--break-system-packages)
  fi
  "$PYTHON" -m pip install "${flags[@]}" "$@"
}

# Prints the installed version of a distribution, or nothing.
installed_version() {
  "$PYTHON" -c "import importlib.metadata as m, sys
try: print(m.version(sys.argv[1]))
except m.PackageNotFoundError: pass" "$1"
}

if [ -z "$(installed_version torch)" ]; then
  log "installing torch==$TORCH_VERSION (CPU)"
  pip_install "torch==$TORCH_VERSION" --index-url "$TORCH_CPU_INDEX" ||
    { log "PyTorch's CPU index unreachable: installing PyPI's torch==$TORCH_VERSION"; pip_install "torch==$TORCH_VERSION"; }
fi

missing=()
for spec in "${PINNED[@]}"; do
  [ "$(installed_version "${spec%%==*}")" = "${spec##*==}" ] || missing+=("$spec")
done
for name in "${UNPINNED[@]}"; do
  [ -n "$(installed_version "$name")" ] || missing+=("$name")
done
if [ "${#missing[@]}" -gt 0 ]; then
  log "installing ${missing[*]}"
  pip_install "${missing[@]}"
fi
log "python packages ready"

# Pinned to one release (nvcc 13.0, as on the H200 image); cuobjdump/nvdisasm start at 13.2 on
# PyPI and read sm_90a code the same. scripts/compile_checks.sh looks in CUDA_TOOLS_BIN.
CUDA_WHEELS=(
  nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88
  nvidia-cuda-runtime==13.0.88 nvidia-cuda-cccl==13.0.85
  nvidia-cuda-cuobjdump==13.2.51 nvidia-cuda-nvdisasm==13.2.51
)
CUDA_TOOLS_DIR="$PWD/.toolchain/cuda"
CUDA_TOOLS_BIN="$CUDA_TOOLS_DIR/nvidia/cu13/bin"

have_tool() { command -v "$1" >/dev/null 2>&1 || [ -x "$CUDA_TOOLS_BIN/$1" ]; }

if ! have_tool nvcc || ! have_tool cuobjdump; then
  log "installing the CUDA compiler tools from PyPI into $CUDA_TOOLS_DIR"
  if ! "$PYTHON" -m pip install -q --disable-pip-version-check --target "$CUDA_TOOLS_DIR" "${CUDA_WHEELS[@]}"; then
    if [ "${CI:-}" = true ]; then
      log "FAILED (CI): the CUDA tools could not be installed; the sm_90a check cannot run"
      exit 1
    fi
    log "WARNING: the CUDA tools could not be installed (offline?); the sm_90a check will be skipped"
  fi
fi
log "ready"
