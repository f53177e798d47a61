"""benchmarks/rocm_model.py: the ISA-based MI300X model runs on the CPU, finds the kernel instances by their
demangled names, counts the main loops it should, is calibrated on RadeonFlow's measured times (within the
bound) before its predictions count, gemm/rocm_loop_costs.h (what the planner reads) is what the current
assembly gives for every dense instance, and the planner costs each call with the instance it runs."""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
import rocm_model  # noqa: E402
from benchmarks.shapes import (CHALLENGE, DEEPSEEK_V3_DECODE_MS, DEEPSEEK_V3_FIT_MS, DEEPSEEK_V3_NK,  # noqa: E402
                               LAYOUT_CHALLENGE, LAYOUT_KMAJOR, mnk_grid)
import emu_gemm as E  # noqa: E402  (tests/rocm/emu, on the path through conftest.py)

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
    assert sorted(model.instances) == sorted(rocm_model.VARIANTS) and len(model.instances) == 8
    for tile, inst in ((t, i) for ours in model.instances.values() for t, i in ours.items()):
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
    assert "| ours 128x128 M/N-major (fast" in model.text and "| ours 128x128 K-major (fast" in model.text


def test_loop_costs_header_matches_the_assembly(model):
    # The planner plans from gemm/rocm_loop_costs.h: a kernel (or model) change that alters what the
    # assembly gives must come with the regenerated header.
    if not model.radeonflow:
        pytest.skip("RadeonFlow sources absent: the header's fitted constants cannot be recomputed")
    assert rocm_model.COSTS_HEADER.read_text() == model.header, (
        f"gemm/rocm_loop_costs.h is stale: run `{rocm_model.WRITE_COMMAND}`")
    assert "is stale" not in model.text and "does not match this assembly" not in model.text
    # Every dense instance has its row, in kLoopCosts' [storage order][B scale format][fold][tile] order,
    # with its own figures.
    named = re.findall(r"// (gemm::rocm::gemm_fp8_kernel<.*>): ", model.header)
    expected = [(major, b_scale, fold, tile) for major, b_scale, fold in rocm_model.VARIANTS for tile in sorted(model.ours)]
    assert len(named) == len(expected) == 32
    for name, (major, b_scale, fold, tile) in zip(named, expected):
        inst = model.instances[(major, b_scale, fold)][tile]
        assert inst.name.startswith(f"void {name}("), (name, inst.name)
        assert rocm_model.template_args(name)[1] == (str(tile), f"(gemm::ScaleFormat){b_scale}", "false",
                                                     f"(gemm::rocm::OperandMajor){major}", str(fold).lower())
        assert "{%d, %.2f, %d, %d}" % inst.loop_cost(False) in model.header


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


# Shapes on which the planner's choice depends on the instance: the suites' shapes and DeepSeek-V3 decode.
PLANNED_SHAPES = CHALLENGE + mnk_grid(sorted(set(DEEPSEEK_V3_FIT_MS + DEEPSEEK_V3_DECODE_MS)), DEEPSEEK_V3_NK)
K_MAJOR, MN_MAJOR = rocm_model.variant_for(LAYOUT_KMAJOR), rocm_model.variant_for(LAYOUT_CHALLENGE)


@pytest.fixture(scope="module")
def plans(model, tmp_path_factory) -> dict:
    """(shape, variant) -> (select_config's (tile, split), its estimate, and the estimate of every (tile, split)
    computed here from that variant's instances as read from the assembly)."""
    if model.constants is None:
        pytest.skip("RadeonFlow sources absent: no fitted constants to plan with")
    program = rocm_model.EstimateProgram(model.header, tmp_path_factory.mktemp("plans"))
    keys = [(shape, v) for shape in PLANNED_SHAPES for v in rocm_model.VARIANTS]
    chosen = program.run([rocm_model.plan_command(shape, v) for shape, v in keys])
    out = {}
    for (shape, v), fields in zip(keys, chosen):
        k_blocks = -(-shape[2] // rocm_model.SCALE_BLOCK)
        candidates = [(tile, split) for tile in sorted(model.instances[v]) for split in range(1, min(16, k_blocks) + 1)]
        seconds = program.run([model.instances[v][tile].estimate_line(model.constants, (0, 0), *shape, split)
                               for tile, split in candidates])
        out[(shape, v)] = ((int(fields[0]), int(fields[1])), float(fields[2]),
                           {c: float(f[0]) for c, f in zip(candidates, seconds)})
    return out


def test_planner_costs_each_call_with_the_instance_it_runs(plans):
    # select_config's choice is the least estimate under the row of the call's own instance (storage
    # order, B scale format, fold), and its estimate is that row's.
    for (shape, variant), (config, estimate, table) in plans.items():
        assert estimate == table[config], (shape, variant, config)
        assert table[config] == min(table.values()), f"{shape} {variant}: {config} is not the least estimate"
    # The rows must lead to different choices somewhere, or the check above could not tell them apart:
    # DeepSeek-V3's decode shapes, K-major against M/N-major.
    differ = [shape for shape in PLANNED_SHAPES if plans[(shape, K_MAJOR)][0] != plans[(shape, MN_MAJOR)][0]]
    assert differ, "no shape where the K-major and M/N-major rows give different plans"
    assert all(plans[(s, K_MAJOR)][1] <= plans[(s, MN_MAJOR)][1] for s in PLANNED_SHAPES)  # the cheaper loop


def test_launcher_plans_with_the_storage_order_it_runs(gemm_libs, plans):
    # The launcher's select_config derives the instance from the call's strides and formats by the rule it
    # launches with; the emulator's select path gives the planner's choice for that instance.
    lib = gemm_libs["gemm"]
    differ = [(shape, fold) for shape in PLANNED_SHAPES for fold in (False, True)
              if plans[(shape, (0, 0, fold))][0] != plans[(shape, (1, 0, fold))][0]]
    assert differ
    for (m, n, k), fold in differ[:2]:
        kb = -(-k // E.BLOCK)
        a_scale, b_scale = torch.ones(m, kb), torch.ones(-(-n // E.BLOCK), kb)
        c = torch.empty(m, n, dtype=torch.bfloat16)
        a_dtype = torch.float8_e4m3fn if fold else torch.float8_e4m3fnuz
        for major in (0, 1):
            a = torch.zeros(m, k, dtype=torch.uint8) if major == 0 else torch.zeros(k, m, dtype=torch.uint8).t()
            b = torch.zeros(n, k, dtype=torch.uint8) if major == 0 else torch.zeros(k, n, dtype=torch.uint8).t()
            a, b = a.view(a_dtype), b.view(torch.float8_e4m3fnuz)
            tile, split, _ = E.select(lib, a, b, a_scale, b_scale, c)
            assert (tile, split) == plans[((m, n, k), (major, 0, fold))][0], ((m, n, k), major, fold)
