#!/usr/bin/env bash
# compute-sanitizer memcheck over scripts/cuda/sanitizer_cases.py (needs the H200 and a build:
# python3 scripts/build.py). Output goes to benchmarks/results/cuda_sanitizer.txt (or $1).
set -o pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
LOG="${1:-$ROOT/benchmarks/results/cuda_sanitizer.txt}"
mkdir -p "$(dirname "$LOG")"
{
  echo "# compute-sanitizer --tool memcheck, $(date -u +%Y-%m-%dT%H:%MZ), $(nvidia-smi --query-gpu=name --format=csv,noheader)"
  compute-sanitizer --tool memcheck --error-exitcode 3 --leak-check no \
    python3 "$ROOT/scripts/cuda/sanitizer_cases.py"
  echo "exit code $?"
} 2>&1 | tee "$LOG"
grep -q "^exit code 0$" "$LOG"
