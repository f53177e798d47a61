#!/usr/bin/env bash
# One device call that validates the CUDA backend on the H200 before anything is measured or merged:
#   1. builds the tuning shim (scripts/cuda/tune_shim.cu) and the package (scripts/build.py) in parallel;
#   2. scripts/cuda/tune.py --check: every tile config x {whole tiles, stream-K} on ragged shapes and layouts;
#   3. the GPU tests (no -x: every failure is listed), the error tests on their own, then the slow ones;
#   4. compute-sanitizer memcheck over scripts/cuda/sanitizer_cases.py.
# Each step is time-boxed so a hang costs minutes, not the call. Logs: one tarball in $OUT (the device
# tool brings back at most 8 files), a summary on stdout.
#   device call: carry [".whl"], command "bash scripts/cuda/h200_validate.sh", timeout_s 600
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
LOG="$(mktemp -d)"  # only the tarball goes to $OUT (the device tool brings back at most 8 files)
export PYTHONUNBUFFERED=1 LOCAL_KERNELS="kernels-community/gemm=$ROOT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
step() {  # step NAME SECONDS CMD...: runs CMD under a time limit, logs it, prints one summary line
  local name="$1" limit="$2"
  shift 2
  timeout "$limit" "$@" >"$LOG/$name.log" 2>&1
  local rc=$?
  echo "== $name: rc $rc$([ "$rc" = 124 ] && echo " (timed out after ${limit}s)")"
  grep -E "FAIL|passed|failed|ERROR SUMMARY|^exit code" "$LOG/$name.log" | tail -n 12
}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nvcc -std=c++17 -O3 -shared -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a \
  -o /tmp/libtune.so scripts/cuda/tune_shim.cu gemm/cuda/gemm_launcher.cu >"$LOG/nvcc.log" 2>&1 &
python3 scripts/build.py -j "$(nproc)" >"$LOG/build.log" 2>&1 &
wait
step check 150 python3 scripts/cuda/tune.py /tmp/libtune.so --check
step gpu_tests 240 python3 -m pytest -q -m "not slow" -p no:cacheprovider tests/cuda tests/test_gemm.py \
  tests/test_quant.py tests/test_compile.py tests/test_reference.py
step error_tests 60 python3 -m pytest -q -p no:cacheprovider tests/test_errors.py
step slow_tests 120 python3 -m pytest -q -m slow -p no:cacheprovider tests/cuda
step sanitizer 120 bash scripts/cuda/run_sanitizer.sh "$LOG/sanitizer.txt"
tar czf "${OUT:-/tmp}/validate_logs.tgz" -C "$LOG" .
