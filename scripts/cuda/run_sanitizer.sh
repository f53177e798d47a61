#!/usr/bin/env bash
# compute-sanitizer memcheck over scripts/cuda/sanitizer_cases.py (needs an sm_90a GPU and a build:
# python3 scripts/build.py). Usage: bash scripts/cuda/run_sanitizer.sh [LOG]; exits non-zero on any
# error the sanitizer reports.
set -o pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
LOG="${1:-$(mktemp --suffix=.txt)}"
mkdir -p "$(dirname "$LOG")"
{
  echo "# compute-sanitizer --tool memcheck, $(nvidia-smi --query-gpu=name --format=csv,noheader)"
  compute-sanitizer --tool memcheck --error-exitcode 3 --leak-check no \
    python3 "$ROOT/scripts/cuda/sanitizer_cases.py"
  echo "exit code $?"
} 2>&1 | tee "$LOG"
grep -q "^exit code 0$" "$LOG"
