#!/usr/bin/env bash
# The GPU benchmark run: build the CUDA variant, set up DeepGEMM from its offline bundle, run the
# side-by-side benchmark. Writes build.log and, per part, results.json, table.md, plot.png and bench.err
# to $OUT when set, else to bench_runs/gpu-<UTC time>/.
#   bash benchmarks/gpu.sh                     every suite, one process (and subfolder) per part in sequence:
#                                              gemm/, linear/, grouped/, grouped-masked/, each within PART_TIMEOUT_S
#   bash benchmarks/gpu.sh --suite linear      one process with these benchmarks.bench arguments, into $OUT itself
# Needs .peers/dg1_bundle.tar.gz (or DEEPGEMM_BUNDLE=path). RUN_BUDGET_S (seconds from the start, build
# included) caps every part's time limit at what is left, so that a run under an outer time limit still
# writes the rows it finished: e.g. RUN_BUDGET_S=570 under a 600 s limit.
# A failed build is reported and the peers are still measured (our rows then say why they are missing).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT_DIR="${OUT:-bench_runs/gpu-$(date -u +%Y%m%d-%H%M%S)}"
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1

# Wheels of scripts/device_wheels.sh, for a machine without registry access.
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi

# DeepGEMM 1.x (the peer engines route Hopper block-FP8 to): unpacked to /tmp, its prebuilt kernel cache
# copied where its JIT looks, importable through PYTHONPATH. No table is published without it.
BUNDLE="${DEEPGEMM_BUNDLE:-.peers/dg1_bundle.tar.gz}"
if [ ! -f "$BUNDLE" ]; then
  echo "DeepGEMM bundle not found at $BUNDLE (copy dg1_bundle.tar.gz there or set DEEPGEMM_BUNDLE)" >&2
  exit 2
fi
rm -rf /tmp/dg1 && mkdir -p /tmp/dg1 && tar -xzf "$BUNDLE" -C /tmp/dg1
export CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
export DG_NVCC_COMPILER="${DG_NVCC_COMPILER:-$CUDA_HOME/bin/nvcc}" DG_CACHE_DIR="${DG_CACHE_DIR:-/tmp/dg_cache}"
mkdir -p "$DG_CACHE_DIR/cache" && cp -rn /tmp/dg1/cache/. "$DG_CACHE_DIR/cache/"
export PYTHONPATH=/tmp/dg1/DeepGEMM${PYTHONPATH:+:$PYTHONPATH}
if ! python3 -c "import deep_gemm" 2>"$OUT_DIR/deepgemm.err"; then
  echo "import deep_gemm FAILED:" >&2; tail -n 5 "$OUT_DIR/deepgemm.err" >&2; exit 2
fi

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu \
  --format=csv || true

# BUILD_TIMEOUT_S bounds the build so that a slow one still leaves time to measure the peers.
if ! timeout "${BUILD_TIMEOUT_S:-600}" python3 scripts/build.py -j "$(nproc)" >"$OUT_DIR/build.log" 2>&1; then
  echo "scripts/build.py FAILED (tail of $OUT_DIR/build.log):"
  tail -n 15 "$OUT_DIR/build.log"
fi
# One benchmark process: stdout is the table (printed last); progress lines, warnings and any traceback go
# to bench.err. A part stopped by its timeout (SIGTERM) still writes the rows it finished.
bench() {
  local dir="$1" limit="$2"; shift 2
  if [ -n "${RUN_BUDGET_S:-}" ] && [ $((RUN_BUDGET_S - SECONDS)) -lt "$limit" ]; then
    limit=$((RUN_BUDGET_S - SECONDS))
  fi
  if [ "$limit" -le 0 ]; then
    echo "benchmarks.bench $* SKIPPED: RUN_BUDGET_S=$RUN_BUDGET_S spent"
    return 124
  fi
  mkdir -p "$dir"
  timeout "$limit" python3 -m benchmarks.bench --quiet --out-dir "$dir" "$@" 2>"$dir/bench.err"
  local rc=$?
  grep -E "^(deepgemm|warning|wrote|interrupted)" "$dir/bench.err" | head -n 40
  if [ "$rc" -ne 0 ]; then
    echo "benchmarks.bench $* exited $rc; tail of $dir/bench.err:"
    tail -n 25 "$dir/bench.err"
  fi
  return "$rc"
}

if [ "$#" -gt 0 ]; then
  bench "$OUT_DIR" "${PART_TIMEOUT_S:-3600}" "$@"
  exit $?
fi
# Every suite, each part its own process and time limit, so that one slow part leaves the others their time.
status=0
for part in "gemm:--suite gemm" "linear:--suite linear" "grouped:--shapes grouped" \
            "grouped-masked:--shapes grouped-masked"; do
  name="${part%%:*}"
  echo "== $name"
  # shellcheck disable=SC2086  # the part's arguments are words
  bench "$OUT_DIR/$name" "${PART_TIMEOUT_S:-540}" ${part#*:} || status=1
done
exit "$status"
