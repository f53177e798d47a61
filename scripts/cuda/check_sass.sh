#!/usr/bin/env bash
# Compile-only check of the CUDA sm_90a backend (no GPU needed; runs in CI on CPU machines):
#   - every gemm/cuda/*.cu compiles for sm_90a (-gencode=arch=compute_90a,code=sm_90a);
#   - ptxas reports zero spills and no ignored setmaxnreg (warning C7508) for every kernel;
#   - every FP8 GEMM kernel's SASS contains QGMMA (the FP8 wgmma), i.e. it is on the tensor-core path;
#   - every activation quantizer reads x with 16-byte loads (LDG.E.128) and converts with the saturating
#     e4m3 pack (F2FP.SATFINITE.E4M3), i.e. it stays a bandwidth-bound single pass.
# Needs nvcc and cuobjdump (pip install nvidia-cuda-cuobjdump puts it in site-packages/nvidia/cu13/bin).
# Prints "N passed, M failed"; exits non-zero on any failure.
set -u
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
NVCC="${NVCC:-nvcc}"
JOBS="${JOBS:-2}"
if ! command -v cuobjdump >/dev/null 2>&1; then
  PIP_BIN="$(python3 -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13", "bin"))' 2>/dev/null)"
  [ -n "$PIP_BIN" ] && export PATH="$PATH:$PIP_BIN"
fi
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
passed=0
failed=0
pass() { echo "PASS $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }

command -v "$NVCC" >/dev/null 2>&1 || { fail "nvcc not found"; echo "$passed passed, $failed failed"; exit 1; }
command -v cuobjdump >/dev/null 2>&1 || { fail "cuobjdump not found (pip install nvidia-cuda-cuobjdump)"; echo "$passed passed, $failed failed"; exit 1; }

compile() {  # $1 = source; writes $WORK/<name>.o and .log
  local src="$1" name
  name="$(basename "$src" .cu)"
  "$NVCC" -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -Werror all-warnings \
    -I"$ROOT/gemm" -c "$src" -o "$WORK/$name.o" >"$WORK/$name.log" 2>&1
  echo $? >"$WORK/$name.rc"
}
export -f compile
export NVCC ROOT WORK
start=$(date +%s)
ls "$ROOT"/gemm/cuda/*.cu | xargs -P "$JOBS" -I{} bash -c 'compile {}'
echo "compiled in $(( $(date +%s) - start )) s"

for src in "$ROOT"/gemm/cuda/*.cu; do
  name="$(basename "$src" .cu)"
  if [ "$(cat "$WORK/$name.rc")" != 0 ]; then
    fail "$name: compile"; sed -n 1,40p "$WORK/$name.log"; continue
  fi
  pass "$name: compile"
  # ptxas -v: one "Compiling entry function" line followed by stack/spill and register lines per kernel.
  while IFS='|' read -r fn spill regs; do
    short="$(echo "$fn" | cut -c1-90)"
    if [ "$spill" = "0 0" ]; then pass "$short: 0 spills, $regs registers"; else fail "$short: spills (stores loads) = $spill"; fi
  done < <(awk '/Compiling entry function/ { match($0, /'"'"'[^'"'"']*'"'"'/); fn = substr($0, RSTART + 1, RLENGTH - 2) }
               /spill stores/ { st = $5; ld = $9 }
               /Used [0-9]+ registers/ { match($0, /Used [0-9]+/); print fn "|" st " " ld "|" substr($0, RSTART + 5, RLENGTH - 5) }' "$WORK/$name.log")
  if grep -q "C7508\|setmaxnreg.*ignored" "$WORK/$name.log"; then fail "$name: setmaxnreg ignored"; grep "C7508" "$WORK/$name.log"; fi
  # SASS: every FP8 GEMM kernel must issue QGMMA.
  cuobjdump --dump-sass "$WORK/$name.o" >"$WORK/$name.sass" 2>&1
  awk '/Function :/ { if (fn != "") print fn, n; fn = $3; n = 0 } /QGMMA/ { n++ } END { if (fn != "") print fn, n }' \
    "$WORK/$name.sass" >"$WORK/$name.qgmma"
  while read -r fn n; do
    case "$fn" in
      *fp8_gemm_kernel*)
        if [ "$n" -gt 0 ]; then pass "$(echo "$fn" | cut -c1-90): $n QGMMA"; else fail "$fn: no QGMMA in SASS"; fi ;;
    esac
  done <"$WORK/$name.qgmma"
  awk '/Function :/ { if (fn != "") print fn, v, c; fn = $3; v = 0; c = 0 } /LDG\.E\.128/ { v++ } /F2FP\.SATFINITE\.E4M3/ { c++ }
       END { if (fn != "") print fn, v, c }' "$WORK/$name.sass" >"$WORK/$name.quant"
  while read -r fn v c; do
    case "$fn" in
      *quantize_kernel*)
        if [ "$v" -gt 0 ] && [ "$c" -gt 0 ]; then pass "$(echo "$fn" | cut -c1-90): $v LDG.E.128, $c F2FP.SATFINITE.E4M3"
        else fail "$fn: LDG.E.128 $v, F2FP.SATFINITE.E4M3 $c (expected both > 0)"; fi ;;
    esac
  done <"$WORK/$name.quant"
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
