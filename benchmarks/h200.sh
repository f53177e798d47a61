#!/usr/bin/env bash
# One call on the lent H200: install the carried wheels (scripts/device_wheels.sh), build the CUDA
# variant, run the side-by-side benchmark, and leave results.json, table.md, plot.png and the logs in
# $OUT (or benchmarks/results/h200 when OUT is unset). Extra arguments go to benchmarks.bench.
#   device call: carry [".whl"], command "bash benchmarks/h200.sh"   (default sets: a few minutes)
# A failed build is reported and the peers are still measured (our rows then say why they are missing).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT_DIR="${OUT:-benchmarks/results/h200}"
mkdir -p "$OUT_DIR"
export PYTHONUNBUFFERED=1

if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader || true

# BUILD_TIMEOUT_S bounds the build so that a slow one still leaves time to measure the peers.
if ! timeout "${BUILD_TIMEOUT_S:-600}" python3 scripts/build.py -j "$(nproc)" >"$OUT_DIR/build.log" 2>&1; then
  echo "scripts/build.py FAILED (tail of $OUT_DIR/build.log):"
  tail -n 15 "$OUT_DIR/build.log"
fi
# stdout is the table (printed last); warnings and any traceback go to bench.err.
python3 -m benchmarks.bench --quiet --out-dir "$OUT_DIR" "$@" 2>"$OUT_DIR/bench.err"
rc=$?
if [ "$rc" -ne 0 ]; then
  echo "benchmarks.bench exited $rc; tail of $OUT_DIR/bench.err:"
  tail -n 25 "$OUT_DIR/bench.err"
fi
exit "$rc"
