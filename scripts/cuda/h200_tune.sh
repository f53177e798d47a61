#!/usr/bin/env bash
# One device call that gathers what the CUDA heuristic and the notes are fitted to, before the full
# validation (h200_validate.sh) and benchmark (benchmarks/h200.sh) calls:
#   1. builds the tuning shim and the package in parallel;
#   2. tune.py --check (every tile config, ragged shapes, layouts, output strides);
#   3. the error tests (with a cuda-gdb backtrace if the process dies);
#   4. tune.py --sweep: every config, whole tiles and stream-K, on the DeepSeek-V3 + challenge shapes, and cuBLAS;
#   5. ncu on 4096x7168x16384 for the configs named in PROFILE_CONFIGS;
#   6. the accuracy diagnostic (tests' rule, challenge rule vs cuBLAS), then the GPU tests.
# Each step is time-boxed. Everything lands in $OUT (sweep.jsonl, ncu text, a tarball of the logs).
#   device call: carry [".whl"], command "bash scripts/cuda/h200_tune.sh", timeout_s 600
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
OUT_DIR="${OUT:-/tmp/h200_tune}"
LOG="$(mktemp -d)"  # logs reach $OUT as one tarball (the device tool brings back at most 8 files)
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1 LOCAL_KERNELS="kernels-community/gemm=$ROOT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
step() {  # step NAME SECONDS CMD...: runs CMD under a time limit, logs it, prints a summary
  local name="$1" limit="$2"
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" >"$LOG/$name.log" 2>&1
  local rc=$?
  echo "== $name: rc $rc in $((SECONDS - t0)) s$([ "$rc" = 124 ] && echo " (timed out after ${limit}s)")"
  grep -E "^FAIL|FAILS|passed|failed|Segmentation|SIGSEGV|Error" "$LOG/$name.log" | tail -n 8
  return $rc
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader
nvcc -std=c++17 -O3 -shared -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a \
  -o /tmp/libtune.so scripts/cuda/tune_shim.cu gemm/cuda/gemm_launcher.cu >"$LOG/nvcc.log" 2>&1 &
python3 scripts/build.py -j "$(nproc)" >"$LOG/build.log" 2>&1 &
wait
tail -n 3 "$LOG/build.log"
step check 90 python3 scripts/cuda/tune.py /tmp/libtune.so --check
if ! step error_tests 60 python3 -X faulthandler -m pytest -q -p no:cacheprovider tests/test_errors.py; then
  step error_gdb 90 cuda-gdb -batch -ex run -ex bt -ex "info sharedlibrary" --args \
    python3 -m pytest -x -q -p no:cacheprovider tests/test_errors.py
  grep -E "^#[0-9]+" "$LOG/error_gdb.log" | head -n 30
fi
step sweep 240 python3 scripts/cuda/tune.py /tmp/libtune.so --sweep "$OUT_DIR/sweep.jsonl" --iters 10
grep -E "^SWEEP" "$LOG/sweep.log" | cut -c1-150
for cfg in ${PROFILE_CONFIGS:-}; do
  step "ncu_$cfg" 90 ncu --clock-control none --launch-skip 1 --launch-count 1 -k regex:fp8_gemm \
    --section SpeedOfLight --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
    --section Occupancy python3 scripts/cuda/tune.py /tmp/libtune.so --profile "4096,7168,16384,$cfg"
  cp "$LOG/ncu_$cfg.log" "$OUT_DIR/ncu_$cfg.txt"
done
for cfg in ${STALL_CONFIGS:-}; do  # warp stall reasons (all warps: producer and math)
  step "stall_$cfg" 90 ncu --clock-control none --launch-skip 1 --launch-count 1 -k regex:fp8_gemm \
    --section WarpStateStats --print-details all python3 scripts/cuda/tune.py /tmp/libtune.so --profile "4096,7168,16384,$cfg"
  grep -iE "stall|cycles per" "$LOG/stall_$cfg.log" | head -n 40
done
step accuracy 90 python3 scripts/cuda/diag_accuracy.py
grep -E "^seed" "$LOG/accuracy.log" | head -n 40
step gpu_tests 150 python3 -m pytest -q -m "not slow" -p no:cacheprovider tests/cuda tests/test_gemm.py
tar czf "$OUT_DIR/logs.tgz" -C "$LOG" .
