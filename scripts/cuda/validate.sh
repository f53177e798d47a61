#!/usr/bin/env bash
# Validates the CUDA backend on an sm_90a GPU (H100/H200) before anything is measured or merged:
#   1. builds the tuning shim (scripts/cuda/tune_shim.cu) and the package (scripts/build.py) in parallel;
#   2. scripts/cuda/tune.py --check: every tile config x {whole tiles, stream-K, K split} on ragged
#      shapes and layouts, against an fp32 reference;
#   3. the GPU tests (no -x: every failure is listed; tests/cuda's launcher tests - UE8M0 scales bitwise
#      against fp32 ones on every plan, the quantizer bitwise against the Python reference, the grouped
#      GEMM - use the shim of step 1 through GEMM_CUDA_SHIM; then the ops and the public API, grouped
#      included), the error tests on their own, then the slow ones;
#   4. compute-sanitizer memcheck over scripts/cuda/sanitizer_cases.py.
# Each step is time-boxed so that a hang costs minutes. Needs nvcc, compute-sanitizer, torch, kernels and
# pytest. Usage: bash scripts/cuda/validate.sh [LOG_DIR]; prints one summary per step, keeps the full
# logs in LOG_DIR (default: a new temporary directory), exits non-zero if any step failed.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
LOG="${1:-$(mktemp -d)}"
mkdir -p "$LOG"
export PYTHONUNBUFFERED=1 LOCAL_KERNELS="${LOCAL_KERNELS:-kernels-community/gemm=$ROOT}"
failed=0
summary() {  # summary NAME RC [LIMIT]: one line per step, then the log's result lines
  echo "== $1: rc $2$([ "$2" = 124 ] && echo " (timed out after ${3}s)")"
  grep -E "FAIL|passed|failed|skipped|error:|ERROR SUMMARY|^exit code" "$LOG/$1.log" | tail -n 12
  [ "$2" = 0 ] || failed=$((failed + 1))
}
step() {  # step NAME SECONDS CMD...: runs CMD under a time limit and logs it
  local name="$1" limit="$2"
  shift 2
  timeout "$limit" "$@" >"$LOG/$name.log" 2>&1
  summary "$name" $? "$limit"
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
LIB="$LOG/libtune.so"
timeout 300 nvcc -std=c++17 -O3 -shared -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a \
  -o "$LIB" scripts/cuda/tune_shim.cu gemm/cuda/gemm_launcher.cu gemm/cuda/quantize_launcher.cu \
  >"$LOG/build_shim.log" 2>&1 &
shim=$!
timeout 300 python3 scripts/build.py -j "$(nproc)" >"$LOG/build_package.log" 2>&1 &
package=$!
wait "$shim"
summary build_shim $? 300
wait "$package"
summary build_package $? 300
export GEMM_CUDA_SHIM="$LIB"
step check 150 python3 scripts/cuda/tune.py "$LIB" --check
step gpu_tests 360 python3 -m pytest -q -m "not slow" -p no:cacheprovider tests/cuda tests/test_gemm.py \
  tests/test_quant.py tests/test_compile.py tests/test_reference.py tests/test_ops.py tests/test_matmul.py \
  tests/test_grouped.py tests/test_random_calls.py
step error_tests 60 python3 -m pytest -q -p no:cacheprovider tests/test_errors.py
step slow_tests 120 python3 -m pytest -q -m slow -p no:cacheprovider tests/cuda
step sanitizer 120 bash scripts/cuda/run_sanitizer.sh "$LOG/sanitizer.txt"
echo "logs in $LOG; $failed step(s) failed"
[ "$failed" = 0 ]
