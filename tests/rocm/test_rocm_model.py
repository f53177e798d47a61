"""benchmarks/rocm_model.py: the ISA-based MI300X model runs on the CPU, finds the kernel instances by their
demangled names, counts the main loops it should, is calibrated on RadeonFlow's measured times (within the
bound) before its predictions count, and gemm/rocm_loop_costs.h (what the planner reads) is what the
current assembly gives."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
import rocm_model  # noqa: E402

sys.path.insert(0, str(REPO / "tests" / "rocm" / "golden"))
import golden_lanes  # noqa: E402


@pytest.fixture(scope="module")
def model() -> rocm_model.ModelRun:
    missing = [tool for tool in (rocm_model.CLANG, rocm_model.MCA, rocm_model.CXXFILT) if shutil.which(tool) is None]
    if missing:
        message = f"{', '.join(missing)} not found (scripts/rocm/setup_toolchain.sh or apt-get install clang-19 llvm-19)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return rocm_model.run()


def test_mfma_cycles_come_from_amd_tables():
    for name in golden_lanes.PREFIXES:
        assert rocm_model.MFMA_CYCLES[name] == golden_lanes.instruction(name)["cycles"]
    assert rocm_model.MFMA_CYCLES == {"v_mfma_f32_32x32x16_fp8_fp8": 32, "v_mfma_f32_16x16x32_fp8_fp8": 16}


def test_instances_are_discovered_by_demangled_name(model):
    # Every tile's dense and grouped instances, for both B scale formats, found without a list of names.
    tiles = {args[0] for args in model.discovered}
    assert tiles == {str(t) for t in model.ours} and len(model.discovered) >= 4 * len(tiles)
    assert {args[2] for args in model.discovered} == {"true", "false"}  # grouped and dense
    for tile, inst in model.ours.items():
        assert inst.name.startswith(f"void gemm::rocm::gemm_fp8_kernel<{tile}, "), inst.name


def test_template_args_split_at_top_level_commas():
    parsed = rocm_model.template_args("void ns::k<1, (ns::E)0, std::pair<int, int>, false>(ns::P<2, 3>)")
    assert parsed == ("ns::k", ("1", "(ns::E)0", "std::pair<int, int>", "false"))
    assert rocm_model.template_args("void plain(int)") is None


def test_our_main_loops_are_one_k_step_of_every_tile(model):
    assert sorted(model.ours) == [0, 1, 2, 3]
    for tile, inst in model.ours.items():
        for path in (inst.fast, inst.slow):
            # One K step of 128: every wave's share of block_m x block_n x 128 multiply-adds.
            assert path.mfma_macs == inst.block_m * inst.block_n * rocm_model.SCALE_BLOCK // inst.waves_per_block, tile
            assert path.counts["barrier"] >= 1, f"tile {tile}: an iteration without its __syncthreads"
        assert inst.fast.counts["global"] > 0, f"tile {tile}: the steady-state path prefetches the next stage"
        assert sum(inst.fast.counts.values()) <= sum(inst.slow.counts.values())
        assert inst.res["scratchsize"] == 0 and inst.waves_per_simd >= 1
    big = model.ours[0]
    assert (big.block_m, big.block_n) == (128, 128)
    # A wave's 64x64x128 share of a K step is 1024 MFMA cycles in either FP8 MFMA (512 MACs a cycle).
    assert big.fast.mfma_cycles == 1024 * big.k_steps_per_iteration
    assert "| ours 128x128 (fast" in model.text


def test_loop_costs_header_matches_the_assembly(model):
    # The planner plans from gemm/rocm_loop_costs.h: a kernel (or model) change that alters what the
    # assembly gives must come with the regenerated header.
    if not model.radeonflow:
        pytest.skip("RadeonFlow sources absent: the header's fitted constants cannot be recomputed")
    assert rocm_model.COSTS_HEADER.read_text() == model.header, (
        f"gemm/rocm_loop_costs.h is stale: run `{rocm_model.WRITE_COMMAND}`")
    assert "is stale" not in model.text and "does not match this assembly" not in model.text


def test_calibrated_on_radeonflow_within_bound(model):
    if not model.radeonflow:
        pytest.skip("RadeonFlow sources absent (shared/peers/radeonflow): calibration step skipped")
    # Its main loop as the reference analysis found it: one K step of a 64x64 wave tile in 16x16x32 MFMAs.
    first = model.radeonflow[0]
    assert first.fast.counts["mfma"] == 64 and first.k_steps_per_iteration == 1
    errors = model.summary["errors"]
    assert len(errors) >= 6, "MEASURED.md should give six measured cases"
    worst = max(errors.items(), key=lambda e: abs(e[1]))
    assert abs(worst[1]) <= rocm_model.CALIBRATION_BOUND, f"case {worst[0]} off by {worst[1]:+.1%}"
    assert model.summary["calibrated"] and "**calibrated**" in model.text
    # The published 18-shape geomean is not fitted: it checks the 12 shapes without a published time too.
    summary = model.summary
    assert abs(summary["rf_geomean"] / summary["rf_published_geomean"] - 1) <= rocm_model.CALIBRATION_BOUND
