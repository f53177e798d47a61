#!/usr/bin/env bash
# A/B of kernel experiments kept as patches (scripts/cuda/experiments/*.patch, each written against the
# tree it sits in) until an H200 run has measured them, by the method of the ab_*.jsonl files
# (scripts/cuda/ab.py). Two steps, so that the device call spends no time building:
#
#   here:    bash scripts/cuda/ab_patches.sh build PATCH...
#            builds the tune_shim of this tree (.exp/lib_base.so) and, for each patch, of a copy of the
#            tree with the patch applied (.exp/lib_<patch name>.so), replacing earlier builds; fails on a
#            patch that does not apply and on any ptxas spill.
#   H200:    carry [".exp"], command "bash scripts/cuda/ab_patches.sh run [ab.py options] M,N,K ...",
#            timeout_s 600
#            tune.py --check on every patched build (every config, whole tiles and stream-K, ragged
#            shapes) -> $OUT/check_<name>.txt, then ab.py over the shapes, base against every build in
#            one interleaved run (7 rounds, row-major A scales as quantizers make them, the planner's
#            plans unless the options say otherwise, e.g. --plans=-1/0,7/0) -> $OUT/ab.jsonl. ab.py does
#            not time a build whose result is wrong.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CALLER_DIR="$PWD"  # patch paths are the caller's
cd "$ROOT"
LIBS=.exp

build_shim() {  # build_shim TREE LIB [NVCC FLAGS...]
  local tree="$1" lib="$2"
  shift 2
  (cd "$tree" && nvcc -std=c++17 -O3 -shared -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a -Xptxas -v "$@" \
    -o "$ROOT/$lib" scripts/cuda/tune_shim.cu gemm/cuda/gemm_launcher.cu) >"$ROOT/$lib.log" 2>&1 \
    || { tail -n 20 "$ROOT/$lib.log"; echo "build of $lib failed"; return 1; }
  if grep "spill stores" "$ROOT/$lib.log" | grep -qv " 0 bytes spill stores, 0 bytes spill loads"; then
    echo "$lib: ptxas spills (see $lib.log)"
    return 1
  fi
  echo "built $lib"
}

case "${1:-}" in
  build)
    shift
    [ $# -gt 0 ] || { echo "usage: $0 build PATCH..."; exit 2; }
    mkdir -p "$LIBS"
    rm -f "$LIBS"/lib_*.so
    trees="$(mktemp -d)"
    trap 'rm -rf "$trees"' EXIT
    for patch in "$@"; do  # every patch applied before anything builds
      tree="$trees/$(basename "$patch" .patch)"
      mkdir -p "$tree/scripts"
      cp -r gemm "$tree/" && cp -r scripts/cuda "$tree/scripts/"
      (cd "$tree" && git apply -p1 "$(cd "$CALLER_DIR" && realpath "$patch")") \
        || { echo "$patch does not apply to this tree"; exit 1; }
    done
    pids=()
    build_shim . "$LIBS/lib_base.so" & pids+=($!)
    for tree in "$trees"/*; do
      # Its tile table may differ from the base's: keep each library's inline table its own (see ab.py).
      build_shim "$tree" "$LIBS/lib_$(basename "$tree").so" -Xcompiler -fno-gnu-unique -Xlinker -Bsymbolic &
      pids+=($!)
    done
    failed=0
    for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
    exit "$failed"
    ;;
  run)
    shift
    [ $# -gt 0 ] || { echo "usage: $0 run [ab.py options] M,N,K ..."; exit 2; }
    OUT_DIR="${OUT:-/tmp/ab_patches}"
    mkdir -p "$OUT_DIR"
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
    libs=(--lib "base=$ROOT/$LIBS/lib_base.so")
    for lib in "$LIBS"/lib_*.so; do
      name="$(basename "$lib" .so)"
      name="${name#lib_}"
      [ "$name" = base ] && continue
      libs+=(--lib "$name=$ROOT/$lib")
      echo "== tune.py --check $name"
      timeout 150 python3 scripts/cuda/tune.py "$ROOT/$lib" --check >"$OUT_DIR/check_$name.txt" 2>&1 || true
      echo "$(grep -c "^PASS" "$OUT_DIR/check_$name.txt") PASS, $(grep -c "^FAIL" "$OUT_DIR/check_$name.txt") FAIL"
      grep "^FAIL" "$OUT_DIR/check_$name.txt" | head -n 10 || true
    done
    cd scripts/cuda
    python3 ab.py "$OUT_DIR/ab.jsonl" "${libs[@]}" --a-scale row --rounds 7 "$@"  # later options win
    ;;
  *)
    echo "usage: $0 build PATCH... | run [ab.py options] M,N,K ..."
    exit 2
    ;;
esac
