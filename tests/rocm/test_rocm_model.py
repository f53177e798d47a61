"""benchmarks/rocm_model.py: the ISA-based MI300X model runs on the CPU, counts the main loops it should,
and is calibrated on RadeonFlow's measured times (within the bound) before its predictions count."""

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
    missing = [tool for tool in (rocm_model.CLANG, rocm_model.MCA) if shutil.which(tool) is None]
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


def test_our_main_loops_are_one_k_step_of_every_tile(model):
    assert set(model.ours) == {"128x128", "64x128", "64x64", "32x64"}
    for label, inst in model.ours.items():
        block_m, block_n = map(int, label.split("x"))
        for path in (inst.fast, inst.slow):
            # One K step of 128: every wave's share of block_m x block_n x 128 multiply-adds.
            assert path.mfma_macs == block_m * block_n * rocm_model.SCALE_BLOCK // inst.waves_per_block, label
            assert path.counts["barrier"] >= 1, f"{label}: an iteration without its __syncthreads"
        assert inst.fast.counts["global"] > 0, f"{label}: the steady-state path prefetches the next stage"
        assert sum(inst.fast.counts.values()) <= sum(inst.slow.counts.values())
        assert inst.res["scratchsize"] == 0 and inst.waves_per_simd >= 1
    big = model.ours["128x128"]
    assert big.fast.counts["mfma"] == 32 and big.fast.mfma_cycles == 32 * 32
    assert "| ours 128x128 (fast" in model.text


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
