#!/usr/bin/env python3
"""Per-CTA timelines of the sm_90a GEMM kernel (an sm_90a GPU): where a CTA's time goes, from its first
instruction to its last store, for each shape's planned plan on a cold L2.

    python3 scripts/cuda/trace_ctas.py M,N,K [M,N,K ...] [--build-dir DIR] [--runs 9]

The product's kernel carries no instrumentation. This tool copies gemm/ and the tuning shim into
--build-dir, inserts stamps at the STAMPS anchors of gemm_kernel.cuh (a missing anchor is an error;
tests/cuda/test_cuda_trace_tool.py checks them on the CPU), builds that copy's shim and the plain one with
nvcc, and runs each plan through both: the stamps' own cost shows as traced against plain event time.
Each stamp is written by one thread of a CTA, for its first work unit only: %globaltimer (ns, one clock
for all SMs: when) and %clock64 (cycles, this SM: how long between two stamps of a CTA).
"""

from __future__ import annotations

import argparse
import ctypes
import shutil
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tune  # noqa: E402
from tune import NVCC_FLAGS, SHIM_SOURCES  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
KERNEL = "gemm/cuda/gemm_kernel.cuh"
LAUNCHER = "gemm/cuda/gemm_launcher.cu"
MAX_CTAS = 1024  # CTAs past this are not traced

# Stamp names in slot order, and where each is written: (anchor text in gemm_kernel.cuh, its replacement).
# `{stamp}` in a replacement is the call that records the slot. PHASES: the spans reported per CTA.
NAMES = ["entry", "pre_wait", "post_wait", "tma_first", "tma_last", "scale_first", "full_first", "full_last",
         "loop_end", "end"]
SLOTS = 24  # per CTA: globaltimer of each name, then clock64 of each; the SM id last
STAMPS = [
    ("entry", "  extern __shared__ uint8_t smem_raw[];\n",
     "  if (threadIdx.x == 0) {stamp}\n  extern __shared__ uint8_t smem_raw[];\n"),
    ("pre_wait", "  ptx::wait_prior_grid();\n", "  if (threadIdx.x == 0) {stamp}\n  ptx::wait_prior_grid();\n"),
    ("post_wait", "  if constexpr (kGrouped) build_group_table<kBlockM>",
     "  if (threadIdx.x == 0) {stamp}\n  if constexpr (kGrouped) build_group_table<kBlockM>"),
    ("tma_first", "          load_one(w.kb_begin);\n", "          load_one(w.kb_begin);\n          if (unit == 0) {stamp}\n"),
    ("tma_first", "          for (int kb = w.kb_begin; kb < w.kb_end; ++kb) load_one(kb);\n",
     "          for (int kb = w.kb_begin; kb < w.kb_end; ++kb) {\n"
     "            load_one(kb);\n            if (unit == 0 && kb == w.kb_begin) {stamp}\n          }\n"),
    ("tma_last", "        split_barriers();\n      }\n    } else if (warp == kScaleWarp) {",
     "        if (unit == 0) {stamp}\n        split_barriers();\n      }\n    } else if (warp == kScaleWarp) {"),
    ("scale_first", "              ptx::cp_async_mbar_arrive_noinc(&full_bar[s]);\n            }\n",
     "              ptx::cp_async_mbar_arrive_noinc(&full_bar[s]);\n            }\n"
     "            if (unit == 0 && kb == w.kb_begin && lane == 0) {stamp}\n"),
    ("full_first", "        if (sub == 0 && slab == 0) ptx::mbar_wait(&full_bar[s], load_pos.phase);\n",
     "        if (sub == 0 && slab == 0) {\n          ptx::mbar_wait(&full_bar[s], load_pos.phase);\n"
     "          if (unit == 0 && warpgroup == 0 && tid == 0 && t == 0) {stamp}\n"
     "          if (unit == 0 && warpgroup == 0 && tid == 0 && t == steps - kStepsPerBlock) {stamp_last}\n"
     "        }\n"),
    ("loop_end", "      // Named barrier 1 + warpgroup syncs this warpgroup alone (0 is __syncthreads).\n",
     "      if (unit == 0 && warpgroup == 0 && tid == 0) {stamp}\n"
     "      // Named barrier 1 + warpgroup syncs this warpgroup alone (0 is __syncthreads).\n"),
    ("end", "    if (p.out_tma && lane == 0) ptx::bulk_wait_read<0>();\n  }\n",
     "    if (p.out_tma && lane == 0) ptx::bulk_wait_read<0>();\n    if (warpgroup == 0 && tid == 0) {stamp}\n  }\n"),
]
PHASES = [("prologue", "entry", "pre_wait"), ("programmatic wait", "pre_wait", "post_wait"),
          ("to the first load", "post_wait", "tma_first"), ("first K block's bytes", "tma_first", "full_first"),
          ("the other K blocks", "full_first", "full_last"), ("last K block's math", "full_last", "loop_end"),
          ("epilogue", "loop_end", "end"), ("whole CTA", "entry", "end")]
KERNEL_TEMPLATE = "template <int kBlockM, int kBlockN, int kClusterN, int kSlabs, bool kPairs, bool kSplitK, bool kGrouped, bool kStreamK>\n__global__"
STAMP_HELPER = f"""__device__ unsigned long long g_cta_trace[{MAX_CTAS}][{SLOTS}];
__device__ __forceinline__ void trace_stamp(int slot) {{
  unsigned long long t, c;
  unsigned sm;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  asm volatile("mov.u64 %0, %%clock64;" : "=l"(c));
  asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
  if (blockIdx.x < {MAX_CTAS}) {{
    g_cta_trace[blockIdx.x][slot] = t;
    g_cta_trace[blockIdx.x][{len(NAMES)} + slot] = c;
    g_cta_trace[blockIdx.x][{SLOTS - 1}] = sm;
  }}
}}
"""
TRACE_ACCESS = f"""
extern "C" int trace_read(void* dst) {{
  return static_cast<int>(cudaMemcpyFromSymbol(dst, gemm::cuda::g_cta_trace, sizeof(gemm::cuda::g_cta_trace)));
}}
extern "C" int trace_clear() {{
  static unsigned long long zeros[{MAX_CTAS} * {SLOTS}];
  return static_cast<int>(cudaMemcpyToSymbol(gemm::cuda::g_cta_trace, zeros, sizeof(zeros)));
}}
"""
assert 2 * len(NAMES) < SLOTS


def traced_kernel(source: str) -> str:
    """gemm_kernel.cuh's text with the stamps in; ValueError naming the first anchor not found exactly once."""
    def place(text, anchor, replacement):
        if text.count(anchor) != 1:
            raise ValueError(f"trace anchor found {text.count(anchor)} times (expected once): {anchor!r}")
        return text.replace(anchor, replacement)

    out = place(source, KERNEL_TEMPLATE, STAMP_HELPER + KERNEL_TEMPLATE)
    for name, anchor, replacement in STAMPS:
        out = place(out, anchor, replacement.replace("{stamp}", f"trace_stamp({NAMES.index(name)});")
                    .replace("{stamp_last}", f"trace_stamp({NAMES.index('full_last')});"))
    return out


def build(tree: Path, lib: Path) -> None:
    cmd = [shutil.which("nvcc") or "nvcc", *NVCC_FLAGS, "-o", str(lib), *SHIM_SOURCES]
    done = subprocess.run(cmd, cwd=tree, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"nvcc in {tree} failed:\n{done.stderr[-3000:]}")


def write_traced_tree(build_dir: Path) -> Path:
    """build_dir/traced: gemm/ with the stamps in and the trace accessors, and the tuning shim's source."""
    tree = build_dir / "traced"
    shutil.rmtree(tree, ignore_errors=True)
    shutil.copytree(ROOT / "gemm", tree / "gemm")
    (tree / "scripts/cuda").mkdir(parents=True)
    shutil.copy(ROOT / SHIM_SOURCES[0], tree / SHIM_SOURCES[0])
    kernel = tree / KERNEL
    kernel.write_text(traced_kernel(kernel.read_text()))
    launcher = tree / LAUNCHER
    launcher.write_text(launcher.read_text() + TRACE_ACCESS)
    return tree


def build_both(build_dir: Path) -> tuple[Path, Path]:
    """The traced shim (from write_traced_tree) and the plain one (from this tree)."""
    tree = write_traced_tree(build_dir)
    libs = build_dir / "libtraced.so", build_dir / "libplain.so"
    with ThreadPoolExecutor(2) as pool:
        for f in [pool.submit(build, tree, libs[0]), pool.submit(build, ROOT, libs[1])]:
            f.result()
    return libs


def quantiles(values):
    v = sorted(values)
    return v[0], v[len(v) // 2], v[-1]


def trace_shape(traced, plain, m, n, k, runs):
    import torch
    a, b, a_s, b_s = tune.make(m, n, k)
    a_s = a_s.t().contiguous().t()  # M-major, as the benchmark gives it
    out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
    plan = traced.plan(m, n, k)
    run = {name: (lambda be=be: be.gemm(a, b, a_s, b_s, out=out, config=plan[0], stream_k=bool(plan[3]),
                                        k_split=plan[6]))
           for name, be in (("traced", traced), ("plain", plain))}
    flush = torch.empty(tune.FLUSH_BYTES, dtype=torch.uint8, device="cuda")
    raw = (ctypes.c_ulonglong * (MAX_CTAS * SLOTS))()
    when = {name: [] for name in NAMES}  # per run: (min, median, max) over CTAs, us after the first entry
    phases = {}  # cycles per CTA between consecutive stamps that every CTA wrote
    spans, ctas = [], 0
    for i in range(runs + 2):  # the first two warm the instruction cache and the plan's opt-ins
        traced.lib.trace_clear()
        flush.zero_()
        run["traced"]()
        torch.cuda.synchronize()
        traced.lib.trace_read(raw)
        recs = [raw[c * SLOTS:(c + 1) * SLOTS] for c in range(MAX_CTAS)]
        recs = [r for r in recs if r[0]]
        ctas = len(recs)
        if i < 2:
            continue
        t0 = min(r[0] for r in recs)
        spans.append((max(r[NAMES.index("end")] for r in recs) - t0) / 1e3)
        for j, name in enumerate(NAMES):
            times = [(r[j] - t0) / 1e3 for r in recs if r[j]]
            if times:
                when[name].append(quantiles(times))
        for label, first, last in PHASES:
            j0, j1 = len(NAMES) + NAMES.index(first), len(NAMES) + NAMES.index(last)
            phases.setdefault(label, []).extend(r[j1] - r[j0] for r in recs if r[j0] and r[j1])
    ok, rel = tune.close(out, tune.reference(a, b, a_s, b_s))
    med = tune.interleaved_medians(run, 3, 10)
    print(f"== {m}x{n}x{k}: plan {tune.plan_key(plan[0], plan[3], plan[6])}, {ctas} CTAs traced, check "
          f"{'ok' if ok else 'WRONG'} (rel {rel:.1e}); event time traced {med['traced']:.2f} us, plain "
          f"{med['plain']:.2f}; first entry to last end {statistics.median(spans):.2f} us")
    print("  us after the first CTA's entry (min / median / max over CTAs, median of runs):")
    for name, per_run in when.items():
        if per_run:
            q = [statistics.median(x[i] for x in per_run) for i in range(3)]
            print(f"    {name:>12} {q[0]:8.2f} {q[1]:8.2f} {q[2]:8.2f}")
    print("  cycles per CTA (median / p90):")
    for label, v in phases.items():
        if v:
            v.sort()
            print(f"    {label:>28} {v[len(v) // 2]:8d} {v[int(0.9 * (len(v) - 1))]:8d}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("shapes", nargs="+", help="M,N,K")
    ap.add_argument("--build-dir", default="/tmp/gemm_trace", help="the traced copy and both shims")
    ap.add_argument("--runs", type=int, default=9, help="traced launches per shape")
    args = ap.parse_args()
    build_dir = Path(args.build_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    traced_lib, plain_lib = build_both(build_dir)
    traced, plain = tune.Backend(str(traced_lib)), tune.Backend(str(plain_lib))
    for spec in args.shapes:
        m, n, k = (int(v) for v in spec.split(","))
        trace_shape(traced, plain, m, n, k, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
