#!/usr/bin/env bash
# Installs the Python packages that building, testing and benchmarking gemm need, and only those
# that are missing (or at the wrong pinned version), so it runs offline when everything is there
# (e.g. on a device machine, whose image brings its own torch). Idempotent.
set -euo pipefail

PYTHON="${PYTHON:-python3}"
TORCH_VERSION=2.13.0
# PyTorch's own index holds the CPU-only wheels; PyPI's Linux torch is the CUDA build.
TORCH_CPU_INDEX=https://download.pytorch.org/whl/cpu
# Exact pins: the loader API and ABI checks the tests rely on.
PINNED=(kernels==0.17.2 kernel-abi-check==0.14.1)
# Any version will do.
UNPINNED=(pytest numpy matplotlib tqdm tabulate)

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
