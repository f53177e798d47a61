#!/usr/bin/env bash
# Measures cluster4_tail_boxes.patch on an sm_90a GPU, in a tree with the patch applied (git am), against
# the code before it unpacked in BASE_DIR (git archive <base> gemm scripts/cuda | tar -x -C BASE_DIR; carry
# BASE_DIR to the device). Writes check.log, vs.log, gvs.log, ab.log and ab.jsonl to $OUT (or /tmp/m4):
#   tune.py --check           every tile config, row 12 (4-CTA clusters) and the tail boxes included;
#   tune.py --vs BASE         planned plans, both shims, decode / large / ragged-M sets;
#   grouped_harness.py --vs   the grouped prefill cases (4-CTA clusters where N fills them);
#   tune.py --ab              every plan of the large shapes, BASE's plans named as the base.
# ~450 s on 16 cores (LAB_S caps the whole run).
set -uo pipefail
BASE="${1:?usage: measure_cluster4_tail_boxes.sh BASE_DIR}"
cd "$(dirname "$0")/../../.."
OUT="${OUT:-/tmp/m4}"; R=/tmp/m4build; mkdir -p "$OUT" $R
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,power.limit --format=csv,noheader
F="-std=c++17 -O3 -Xcompiler -fPIC -gencode=arch=compute_90a,code=sm_90a"
for f in gemm/cuda/gemm_launcher.cu gemm/cuda/quantize_launcher.cu scripts/cuda/tune_shim.cu; do
  nvcc $F -c -o $R/new_$(basename $f .cu).o $f > $R/nvcc_new_$(basename $f).log 2>&1 &
  (cd "$BASE" && nvcc $F -c -o $R/base_$(basename $f .cu).o $f > $R/nvcc_base_$(basename $f).log 2>&1) &
done
wait
nvcc -shared -o $R/new.so $R/new_*.o && nvcc -shared -o $R/base.so $R/base_*.o || { tail -20 $R/nvcc_*.log; exit 1; }
echo "built at $SECONDS s"
left() { echo $((${LAB_S:-450} - SECONDS)); }
timeout 90 python3 scripts/cuda/tune.py $R/new.so --check > "$OUT/check.log" 2>&1
echo "check rc $? at $SECONDS s"; grep -E "FAIL" "$OUT/check.log" | tail -6
timeout 130 python3 scripts/cuda/tune.py $R/new.so --vs $R/base.so --rounds 2 --iters 10 > "$OUT/vs.log" 2>&1
echo "vs rc $? at $SECONDS s"; cat "$OUT/vs.log"
timeout 60 python3 scripts/cuda/grouped_harness.py $R/new.so --vs $R/base.so > "$OUT/gvs.log" 2>&1
echo "grouped vs rc $? at $SECONDS s"; cat "$OUT/gvs.log"
timeout "$(left)" python3 scripts/cuda/tune.py $R/new.so --ab benchmarks/results/h100/results.json \
  --ab-shapes "4096,24576,1536;4096,2112,7168;2048,7168,7168;8192,8192,8192;6144,4608,7168;1024,7168,16384" \
  --base "16,16384,512=2/0;128,16384,512=3/0;4096,576,7168=4/0;4096,7168,16384=8/1;4096,4096,7168=8/1;4096,7168,2048=8/0;4096,9216,4096=8/0;4096,4096,8192=8/1;4096,14336,5120=8/0;4096,5120,12288=8/1;4096,24576,5120=8/0;4096,12288,1536=8/0;4096,7168,8192=8/1;4096,36864,7168=8/0;4096,7168,18432=8/1;4096,24576,1536=8/0;4096,2112,7168=8/0;2048,7168,7168=8/0;8192,8192,8192=8/0;6144,4608,7168=8/0;1024,7168,16384=8/1" \
  --rounds 3 --iters 10 --ab-out "$OUT/ab.jsonl" > "$OUT/ab.log" 2>&1
echo "ab rc $? at $SECONDS s"; cat "$OUT/ab.log"
