"""Smoke test of the side-by-side benchmark (benchmarks/bench.py) on CPU with tiny shapes.

It must record every (shape, peer) row, check each row before timing it, and report peers that return
wrong numbers as WRONG (untimed) rather than fast: two deliberately broken peers are added through the
`extra_peers` hook, one off by a single element, one reading the activation scales of the wrong K block.
The GPU-only parts (kernel time, host time, DeepGEMM's limits, nvidia-smi telemetry, the shape sets) are
checked through their logic on synthetic data."""

from __future__ import annotations

import json
import sys

import pytest
import torch
from _helpers import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT))  # `benchmarks` is a top-level package of the repository

from benchmarks import bench  # noqa: E402
from benchmarks.peers import DequantFp32  # noqa: E402
from benchmarks.telemetry import FIELDS, summarize  # noqa: E402

# Ragged N and K (not multiples of 128) and a challenge-layout shape (transposed views).
SHAPES = ["32,192,384", "17,130,300,T"]
ITERS = 3
# One element off by this fraction of max|ref|: far above one bf16 step (0.8 % of max|ref|).
PERTURBATION = 0.05


class OneElementOff(DequantFp32):
    name = "perturbed"

    def run(self, a, b, a_scale, b_scale, out_dtype):
        out = super().run(a, b, a_scale, b_scale, out_dtype)
        out[0, 0] += PERTURBATION * out.float().abs().max().to(out.dtype)
        return out


class WrongKBlockScale(DequantFp32):
    name = "wrong-k-scale"

    def run(self, a, b, a_scale, b_scale, out_dtype):
        # The classic indexing bug: the activation scale of the next K block.
        return super().run(a, b, a_scale.roll(1, dims=1), b_scale, out_dtype)


@pytest.mark.kernels_ci
def test_benchmark_checks_rows_and_reports_wrong_peers(kernel, tmp_path):
    json_path, plot_path = tmp_path / "bench.json", tmp_path / "bench.png"
    runs = REPO_ROOT / bench.RUNS_DIR
    runs_before = set(runs.iterdir()) if runs.is_dir() else set()
    bench.main(["--device", "cpu", "--shapes", *SHAPES, "--iters", str(ITERS), "--warmup", "1", "--quiet",
                "--json", str(json_path), "--plot", str(plot_path)],
               extra_peers=[OneElementOff(), WrongKBlockScale()])
    results = json.loads(json_path.read_text())

    peers = ["ours", "dequant-fp32", "perturbed", "wrong-k-scale"]
    rows = {(r["shape"], r["peer"]): r for r in results["rows"]}
    labels = ["32,192,384", "17,130,300 T"]
    assert set(rows) == {(s, p) for s in labels for p in peers}
    assert results["env"]["package"]["loaded"], results["env"]["package"]

    for label in labels:
        for name in ("ours", "dequant-fp32"):
            row = rows[label, name]
            assert row["status"] == "OK", row
            assert row["check"]["ok"] and row["check"]["n_bad"] == 0
            assert row["timing"]["iters"] == ITERS and row["timing"]["median_us"] > 0
            assert 0 < row["floor_fraction"]
        for name in ("perturbed", "wrong-k-scale"):
            row = rows[label, name]
            assert row["status"] == "WRONG", row
            assert not row["check"]["ok"] and row["check"]["n_bad"] > 0
            assert "timing" not in row, "a wrong row must not be timed"
        # Speedups are computed only against rows that passed.
        assert rows[label, "dequant-fp32"]["ours_speedup"] > 0
        assert "ours_speedup" not in rows[label, "perturbed"]

    summary = results["summary"]["custom"]["peers"]
    assert summary["perturbed"]["WRONG"] == len(labels) and summary["perturbed"]["OK"] == 0
    ceilings = results["ceilings"]
    assert ceilings["peak_bandwidth_Bps"] > 0 and ceilings["peak_flops"] == ceilings["fma_flops"] > 0
    # A floor is a bound the kernel cannot beat: measured FMA rate and read bandwidth, never below the kernel.
    for row in results["rows"]:
        if row["status"] == "OK":
            assert 0 < row["floor_fraction"] < 1, row
            assert row["timing"]["cv"] >= 0 and row["timing"]["p10_us"] <= row["timing"]["p90_us"]
    lo, hi = summary["dequant-fp32"]["ours_speedup_p10"], summary["dequant-fp32"]["ours_speedup_p90"]
    assert 0 < lo <= hi
    runs_after = set(runs.iterdir()) if runs.is_dir() else set()
    assert runs_after == runs_before, "with --json/--plot given, nothing goes to the default folder"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert not plot_path.exists()
    else:
        assert plot_path.stat().st_size > 0


@pytest.mark.kernels_ci
def test_benchmark_rejects_unknown_peer_and_shape():
    with pytest.raises(ValueError, match="unknown peer"):
        bench.main(["--device", "cpu", "--shapes", "16,128,128", "--peers", "no-such-peer", "--quiet"])
    with pytest.raises(ValueError, match="M,N,K"):
        bench.main(["--device", "cpu", "--shapes", "16,128", "--quiet"])


@pytest.mark.kernels_ci
def test_reference_is_not_degenerate():
    # The check refuses an all-zero reference: a benchmark row can never pass on zeros.
    from benchmarks.problem import check

    with pytest.raises(ValueError, match="all zeros"):
        check(torch.zeros(4, 4, dtype=torch.bfloat16), torch.zeros(4, 4))


def _synthetic_gpu_results():
    """Two shapes, ours and DeepGEMM, with call and kernel timings, as a GPU run records them."""
    def timing(us):
        samples = [us * f for f in (0.98, 1.0, 1.0, 1.02, 1.3)]
        return {"median_us": us, "p10_us": samples[0], "p90_us": samples[-1], "cv": 0.12, "iters": 5,
                "samples_us": samples}
    rows = []
    for shape, ours, dg in (("64,2112,7168", (14.0, 9.0), (15.0, 8.0)), ("4096,7168,2048", (100.0, 98.0), (90.0, 88.0))):
        for peer, (call, kernel) in (("ours", ours), ("deepgemm", dg)):
            rows.append({"set": "decode", "shape": shape, "peer": peer, "status": "OK", "flops": 2e9, "bytes": 1e7,
                         "m": 1, "n": 1, "k": 1, "layout": "kmajor", "timing": timing(call),
                         "kernel_timing": timing(kernel), "rel_err": 1e-3, "host_us": 5.0})
    rows.append({"set": "decode", "shape": "64,576,7000", "peer": "deepgemm", "status": "UNSUPPORTED", "flops": 1,
                 "bytes": 1, "error": "DeepGEMM requires ..."})
    return {"env": {"device": "NVIDIA H200", "torch": "x", "cuda": "13.0", "hip": None, "driver": "580",
                    "triton": None, "package": {"loaded": False, "error": "synthetic"}, "date_utc": "now"},
            "command": "python3 -m benchmarks.bench", "elapsed_s": 1.0,
            "method": {"timing": "CUDA events", "timing_short": "CUDA events", "kernel_timing": "CUDA graph",
                       "seed": 1, "fp8_dtype": "float8_e4m3fn", "check": "c", "layouts": "l", "noisy_cv": 0.10},
            "ceilings": {"peak_flops": 1979e12, "peak_bandwidth_Bps": 4e12, "peak_source": "datasheet FP8",
                         "bandwidth_source": "copy"},
            "peers": {name: {"label": name, "block_scaled": True, "conversion": "none", "unavailable": None}
                      for name in ("ours", "deepgemm")},
            "gpu_telemetry": summarize(FIELDS, "1980, 2619, 1980, 650.5, 700.00, 60, 0x0000000000000004\n"
                                               "1755, 2619, 1980, 699.9, 700.00, 63, 0x0000000000000004\n"),
            "rows": rows}


@pytest.mark.kernels_ci
def test_report_gives_call_and_kernel_time_per_peer_and_set():
    from benchmarks import report

    results = _synthetic_gpu_results()
    report.annotate(results)
    dg = results["summary"]["decode"]["peers"]["deepgemm"]
    # Call: 15/14 and 90/100; kernel: 8/9 and 88/98. Both below 0.95x in kernel time, one in call time.
    assert dg["geomean_ours_speedup"] == pytest.approx(((15 / 14) * (90 / 100)) ** 0.5)
    assert dg["geomean_ours_speedup_kernel"] == pytest.approx(((8 / 9) * (88 / 98)) ** 0.5)
    assert (dg["below"], dg["below_kernel"], dg["UNSUPPORTED"]) == (1, 2, 1)
    assert dg["worst"] == ("4096,7168,2048", pytest.approx(0.9))
    assert dg["ours_speedup_p10"] <= dg["geomean_ours_speedup"] * 1.05
    table = report.markdown(results)
    for text in ("kernel time: CUDA graph", "## Host time per call", "UNSUPPORTED", "SM clock 1868 MHz",
                 "ours × (kernel)", "noisy rows"):
        assert text in table, text
    assert len(report.noisy_rows(results)) == 4  # every timed row has CV 12 % > 10 %


@pytest.mark.kernels_ci
def test_deepgemm_rows_say_which_shapes_it_cannot_run():
    from benchmarks.peers import DeepGemm
    from benchmarks.shapes import SHAPE_SETS, Shape

    dg = DeepGemm()
    assert dg.unsupported(Shape(64, 2112, 7168)) is None
    assert "N % 64 != 0" in dg.unsupported(Shape(64, 700, 7168))
    assert "K % 128 != 0" in dg.unsupported(Shape(64, 2112, 1000))
    # Every default GPU shape is one DeepGEMM runs, so its geomeans cover whole sets.
    assert all(dg.unsupported(s) is None for name in ("decode", "prefill", "challenge") for s in SHAPE_SETS[name])


@pytest.mark.kernels_ci
def test_gpu_shape_sets():
    from benchmarks.shapes import (CHALLENGE, DEEPSEEK_V3, DEEPSEEK_V3_NK, DEFAULT_SETS, MODELS_NK, SHAPE_SETS,
                                   parse_shapes)

    decode, prefill = SHAPE_SETS["decode"], SHAPE_SETS["prefill"]
    deepseek = {(s.m, s.n, s.k) for s in decode + prefill if (s.n, s.k) in DEEPSEEK_V3_NK}
    assert deepseek == {(m, n, k) for m in (1, 16, 64, 128, 512, 4096) for n, k in DEEPSEEK_V3_NK}
    assert {(s.n, s.k) for s in prefill if s.m == 4096} == set(DEEPSEEK_V3_NK) | set(MODELS_NK)
    assert all(s.m <= 128 for s in decode) and all(s.m >= 512 for s in prefill)
    assert DEFAULT_SETS["cuda"] == ["decode", "prefill", "challenge", "challenge-layout"]
    assert len(DEEPSEEK_V3) == 21 and len(CHALLENGE) == 18  # the tuner's and the ROCm model's suites
    assert list(parse_shapes(["prefill", "64,2112,7168"])) == ["prefill", "custom"]


@pytest.mark.kernels_ci
def test_telemetry_summary_parses_nvidia_smi_lines():
    summary = summarize(FIELDS, "1980, 2619, 1980, 650.5, 700.00, 60, 0x0000000000000004\n"
                                "[N/A], 2619, 1980, 699.9, 700.00, 63, 0x0000000000000000\nnot a sample\n")
    assert len(summary["samples"]) == 2
    assert summary["summary"]["clocks.sm"] == {"min": 1980.0, "median": 1980.0, "max": 1980.0}
    assert summary["summary"]["power.draw"]["max"] == pytest.approx(699.9)
    assert summary["event_reasons"] == {"0x0000000000000004": 1, "0x0000000000000000": 1}


@pytest.mark.kernels_ci
def test_default_output_folder_is_ignored_and_named_by_device():
    import torch

    path = bench.default_out_dir(torch.device("cuda"), {"device": "NVIDIA H200"})
    assert path.parent == REPO_ROOT / "bench_runs" and path.name.startswith("nvidia-h200-")
    assert bench.default_out_dir(torch.device("cpu"), {"device": "AMD EPYC"}).name.startswith("cpu-")
    assert "/bench_runs/" in (REPO_ROOT / ".gitignore").read_text().splitlines()
