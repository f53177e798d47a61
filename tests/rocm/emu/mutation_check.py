"""Proves the emulation tests can fail: applies one realistic bug at a time to a copy of gemm/, runs the
kernels_ci emulation tests against it (GEMM_EMU_SOURCE_ROOT) and reports whether they caught it.

    python3 tests/rocm/emu/mutation_check.py            # every mutation (about 30 s each on 2 cores)
    python3 tests/rocm/emu/mutation_check.py NAME ...   # some

A mutation whose source text no longer exists is reported as stale (the kernel changed; update it here).
Exit status 0 only when the unmutated source passes and every applicable mutation is caught.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from emu_build import REPO_ROOT

# name -> (file under gemm/, original text, replacement, the bug it models); a tuple of texts and one of
# replacements apply several edits to the file.
MUTATIONS = {
    "no_k_edge_mask": ("rocm_gemm_kernel.h",
                       "if constexpr (kEdge) chunk = keep_bytes(chunk, k - (k0 + Access::k_major_chunk(tid, piece).k));",
                       "", "K-major: bytes past K in the last K block are not zeroed"),
    "no_mn_k_edge_mask": ("rocm_gemm_kernel.h",
                          "if constexpr (kEdge) word = k0 + Access::mn_major_block(tid).k + i < k ? word : 0u;", "",
                          "M/N-major: K columns past K in the last K block are not zeroed"),
    "drop_b_scale": ("rocm_gemm_kernel.h", "(a_scale[i][e] * b_scale)", "(a_scale[i][e])",
                     "the B block scale is not applied"),
    "first_a_scale_only": ("rocm_gemm_kernel.h", "p.a_scale + kb * p.a_scale_stride_k + m0",
                           "p.a_scale + kb_begin * p.a_scale_stride_k + m0",
                           "every K block of a split uses its first block's A scale"),
    "epilogue_row_bound": ("rocm_gemm_kernel.h", "if (row < rows_left && col < cols_left",
                           "if (row <= rows_left && col < cols_left", "one row too many is stored"),
    "reduce_drops_split": ("rocm_reduce_kernel.h", "for (int s = 0; s < p.splits; ++s)",
                           "for (int s = 0; s + 1 < p.splits; ++s)", "the split-K reduce skips the last split"),
    "fold_keeps_negative_zero": ("rocm_gemm_kernel.h", "x &= ~((negative_zero >> 7) * kByte);", "",
                                 "e4m3fn -0 is left as 0x80 (NaN in fnuz)"),
    "fn_scale_not_doubled": ("gemm_launcher.hip", "constexpr float kFnScaleFactor = 2.0f;",
                             "constexpr float kFnScaleFactor = 1.0f;", "e4m3fn bytes read at half value"),
    "no_loop_barrier": ("rocm_gemm_kernel.h", "if (kLast) promote(kSubM - 1);\n    __syncthreads();",
                        "if (kLast) promote(kSubM - 1);\n",
                        "the stage's __syncthreads is missing (TSan reports the race)"),
    "vector_scale_lane": ("rocm_gemm_kernel.h", "a_scale[i][e + r] = v[r];", "a_scale[i][e + r] = v[0];",
                          "every row of a 4-row A-scale load gets the first row's scale"),
    "vector_scale_unclamped": ("rocm_gemm_kernel.h", "(m_end - 1) / kScalesPerLoad * kScalesPerLoad - m0",
                               "(m_end - 1) - m0",
                               "the clamped 16-byte A-scale load is misaligned and runs past the tensor"),
    "transpose_halves_swapped": ("rocm_gemm_kernel.h", "out[1] = __builtin_amdgcn_perm(lo23, lo01, kHighHalves);",
                                 "out[1] = __builtin_amdgcn_perm(lo01, lo23, kHighHalves);",
                                 "M/N-major: the register transpose puts two K columns of row 1 in the wrong order"),
    "no_swizzle": ("rocm_lds_layout.h", "return low ^ spread;", "return 0 * (low ^ spread);",
                   "the LDS swizzle is removed (correct results, bank conflicts: test_lds_banks)"),
    "inverse_a_rows_32": ("cdna3_mfma_layout.h", "return {l % 32, 8 * (l / 32) + s}; }  // (i, k)",
                          "return {(l + 1) % 32, 8 * (l / 32) + s}; }  // (i, k)",
                          "kernel side: the 32x32x16 A inverse map feeds each lane the next row"),
    "forward_d_transposed_16": ("cdna3_mfma_layout.h", "return {16 * (i / 4) + j, i % 4}; }",
                                "return {16 * (j / 4) + i, j % 4}; }",
                                "header: the 16x16x32 D forward map (which the kernel never reads) is transposed"),
    "swapped_half_wave_rows_32": ("cdna3_mfma_layout.h",
                                  ("{ return {32 * ((i / 4) % 2) + j,", "{ return {8 * (e / 4) + 4 * (l / 32) + e % 4,"),
                                  ("{ return {32 * (1 - (i / 4) % 2) + j,",
                                   "{ return {8 * (e / 4) + 4 * (1 - l / 32) + e % 4,"),
                                  "both sides: the 32x32x16 D half-wave row groups swapped in d and d_of alike"),
    "control": ("rocm_gemm_kernel.h", "using Layout = LaneMap<typename Op::Layout>;",
                "using Layout = LaneMap<typename Op::Layout>;  // mutation control",
                "(control: a harmless edit, must NOT be caught)"),
}
HARMLESS = {"control"}
# The header against AMD's calculator data, the LDS banks of every access, the kernels_ci emulation
# subset, then ThreadSanitizer (which makes a missing barrier deterministic).
TEST_RUNS = [
    ["tests/rocm/test_mfma_layout.py", "-x", "-q", "-p", "no:cacheprovider"],
    ["tests/rocm/test_lds_banks.py", "-x", "-q", "-p", "no:cacheprovider"],
    ["tests/rocm/test_emulation.py", "-m", "kernels_ci", "-x", "-q", "-p", "no:cacheprovider"],
    ["tests/rocm/test_races.py", "-x", "-q", "-p", "no:cacheprovider"],
]
TIMEOUT_S = 300


def run_tests(source_root: Path) -> bool:
    env = dict(os.environ, GEMM_EMU_SOURCE_ROOT=str(source_root))
    for args in TEST_RUNS:
        try:
            proc = subprocess.run([sys.executable, "-m", "pytest", *args], cwd=REPO_ROOT, env=env,
                                  capture_output=True, text=True, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return False  # a hang counts as caught: the run did not pass
        if proc.returncode != 0:
            return False
    return True


def main(names: list[str]) -> int:
    names = names or list(MUTATIONS)
    if not run_tests(REPO_ROOT):
        print("baseline FAILED: the unmutated source does not pass; nothing to measure")
        return 1
    caught = missed = stale = 0
    for name in names:
        file, old, new, bug = MUTATIONS[name]
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            shutil.copytree(REPO_ROOT / "gemm", root / "gemm")
            path = root / "gemm" / file
            text = path.read_text()
            edits = list(zip(old, new)) if isinstance(old, tuple) else [(old, new)]
            if any(text.count(o) != 1 for o, _ in edits):
                print(f"{name:26s} STALE   ({file}: text not found once)")
                stale += 1
                continue
            for o, n in edits:
                text = text.replace(o, n)
            path.write_text(text)
            passed = run_tests(root)
        expected_pass = name in HARMLESS
        ok = passed == expected_pass
        verdict = ("passed (harmless)" if passed else "FAILED (harmless!)") if expected_pass else (
            "caught" if not passed else "MISSED")
        print(f"{name:26s} {verdict:18s} {bug}")
        caught += ok
        missed += not ok
    print(f"{caught} passed, {missed} failed, {stale} stale")
    return 0 if missed == 0 and stale == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
