"""Smoke test of the side-by-side benchmark (benchmarks/bench.py) on CPU with tiny shapes.

It must record every (shape, peer) row, check each row before timing it, and report peers that return
wrong numbers as WRONG (untimed) rather than fast: two deliberately broken peers are added through the
`extra_peers` hook, one off by a single element, one reading the activation scales of the wrong K block.
The GPU-only parts (kernel time, host time, DeepGEMM's limits, nvidia-smi telemetry, the shape sets) are
checked through their logic on synthetic data.

The linear and grouped suites run on CPU with this package's new entry points replaced by a torch model of
their documented API (FakeKernel), so that the harness's calls, layouts, checks and bars are exercised even
where the native ops are not built; broken peers (unquantized activations, swapped expert scales, shifted
segments) must come out WRONG."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

import pytest
import torch
from _helpers import REPO_ROOT, reference_quantize_activation

sys.path.insert(0, str(REPO_ROOT))  # `benchmarks` is a top-level package of the repository

from benchmarks import bench  # noqa: E402
from benchmarks.peers import DeepGemm, DequantFp32  # noqa: E402
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
            assert "samples_us" not in row["timing"]  # used by the summary's bootstrap, not committed
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


class SlowSetup(DequantFp32):
    """A peer whose one-time setup outlasts the run's time limit, as DeepGEMM's kernel compilation can: the
    limit's SIGTERM arrives while it sets up (sent from here, so that a slow start of the run cannot let it
    arrive before the run has installed its handler)."""
    name = "slow-setup"

    def setup(self, shapes, device):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(60)
        return "never reached"


def _sigterm_self_after(seconds):
    timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGTERM))
    timer.start()
    return timer


def test_benchmark_stopped_in_a_peer_setup_still_reports(tmp_path):
    """SIGTERM (a time limit) while a peer sets up: the run writes its report (no rows), promptly, and
    leaves the process's SIGTERM handler as it found it."""
    json_path = tmp_path / "bench.json"
    before = signal.getsignal(signal.SIGTERM)
    started = time.monotonic()
    bench.main(["--device", "cpu", "--shapes", "16,128,128", "--peers", "dequant-fp32", "slow-setup",
                "--iters", "2", "--warmup", "0", "--quiet", "--json", str(json_path)],
               extra_peers=[SlowSetup()])
    assert time.monotonic() - started < 30
    results = json.loads(json_path.read_text())
    assert results["interrupted"] is True and results["rows"] == []
    assert signal.getsignal(signal.SIGTERM) is before


def test_deepgemm_compilation_stops_at_an_interrupt():
    """The parallel compilation does not wait for its queued jobs once interrupted: four 5 s jobs on one
    worker would hold it 20 s."""
    def interrupt(signum, frame):
        raise KeyboardInterrupt
    before = signal.signal(signal.SIGTERM, interrupt)
    timer = _sigterm_self_after(1.0)
    started = time.monotonic()
    try:
        with pytest.raises(KeyboardInterrupt):
            DeepGemm.compile_all([5, 5, 5, 5], time.sleep, "sleeps", jobs=1)
    finally:
        timer.cancel()
        signal.signal(signal.SIGTERM, before)
    assert time.monotonic() - started < 10


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


# nvidia-smi lines as GpuTelemetry records them: the host's local time, then FIELDS' values.
_SAMPLES = ("2026/12/06 18:05:36.100, 1980, 2619, 1980, 650.5, 700.00, 60, 0x0000000000000004\n"
            "2026/12/06 18:05:36.200, 1755, 2619, 1980, 699.9, 700.00, 63, 0x0000000000000004\n")
_TELEMETRY = summarize(FIELDS, _SAMPLES)


def _at(stamp: str) -> float:
    """Host epoch seconds of an nvidia-smi timestamp (local time)."""
    import datetime

    return datetime.datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S.%f").timestamp()


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
                         "kernel_timing": timing(kernel), "rel_err": 1e-3, "host_us": 5.0,
                         "gpu_state": {"samples": 1, "clocks.sm": 1755.0, "power.draw": 699.9}})
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
            "gpu_telemetry": _TELEMETRY, "rows": rows}


@pytest.mark.kernels_ci
def test_peers_of_a_shape_are_timed_side_by_side():
    """A drift of the device's state during a shape (a clock coming back up after a heavy shape) must fall
    on every peer alike: the peers take turns, in a shuffled order per round, each with its full count of
    samples; a peer whose calls raise fails alone."""
    import random

    from benchmarks.timing import ROUNDS, Timer

    timer = Timer(torch.device("cpu"), iters=12, warmup=1, cold=False, e2e=False)
    calls = []

    def broken():
        calls.append("broken")
        raise RuntimeError("boom")

    fns = {name: (lambda name=name: calls.append(name)) for name in ("a", "b", "c")}
    stats = timer.time_side_by_side({**fns, "broken": broken}, random.Random(0))
    assert isinstance(stats["broken"], RuntimeError) and calls.count("broken") == 1
    assert all(stats[name].iters == 12 for name in fns)
    # ROUNDS rounds; in each, every peer's turn is its warm-up call and its share of the samples, and the
    # peers' order is not the same every round.
    turn = 1 + -(-12 // ROUNDS)
    timed = [name for name in calls if name != "broken"]
    assert len(timed) == ROUNDS * 3 * turn
    orders = []
    for r in range(ROUNDS):
        block = timed[r * 3 * turn:(r + 1) * 3 * turn]
        order = block[::turn]
        assert sorted(order) == ["a", "b", "c"] and block == [name for name in order for _ in range(turn)]
        orders.append(tuple(order))
    assert len(set(orders)) > 1


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
                 "ours × (kernel)", "noisy rows", "| 1755 / 700 |", "SM MHz / W"):
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
    from benchmarks.shapes import (CHALLENGE, DEEPSEEK_V3, DEEPSEEK_V3_NK, MODELS_NK, SHAPE_SETS, SUITES,
                                   parse_shapes)

    decode, prefill = SHAPE_SETS["decode"], SHAPE_SETS["prefill"]
    deepseek = {(s.m, s.n, s.k) for s in decode + prefill if (s.n, s.k) in DEEPSEEK_V3_NK}
    assert deepseek == {(m, n, k) for m in (1, 16, 64, 128, 512, 4096) for n, k in DEEPSEEK_V3_NK}
    assert {(s.n, s.k) for s in prefill if s.m == 4096} == set(DEEPSEEK_V3_NK) | set(MODELS_NK)
    assert all(s.m <= 128 for s in decode) and all(s.m >= 512 for s in prefill)
    assert SUITES["gemm"]["cuda"] == ["decode", "prefill", "challenge", "challenge-layout"]
    assert len(DEEPSEEK_V3) == 21 and len(CHALLENGE) == 18  # the tuner's and the ROCm model's suites
    assert list(parse_shapes(["prefill", "64,2112,7168"])) == ["prefill", "custom"]


@pytest.mark.kernels_ci
def test_telemetry_summary_parses_nvidia_smi_lines():
    summary = summarize(FIELDS, "2026/12/06 18:05:36.100, 1980, 2619, 1980, 650.5, 700.00, 60, 0x0000000000000004\n"
                                "2026/12/06 18:05:36.200, [N/A], 2619, 1980, 699.9, 700.00, 63, 0x0000000000000000\n"
                                "not a sample\n")
    assert len(summary["samples"]) == summary["sample_count"] == 2
    assert summary["summary"]["clocks.sm"] == {"min": 1980.0, "median": 1980.0, "max": 1980.0}
    assert summary["summary"]["power.draw"]["max"] == pytest.approx(699.9)
    assert summary["event_reasons"] == {"0x0000000000000004": 1, "0x0000000000000000": 1}


@pytest.mark.kernels_ci
def test_rows_get_the_gpu_state_of_the_samples_taken_while_they_were_timed():
    from benchmarks.telemetry import attach_row_states

    first, second = _at("2026/12/06 18:05:36.100"), _at("2026/12/06 18:05:36.200")
    rows = [{"timed_s": [first - 0.01, second + 0.01]},  # both samples: medians
            {"timed_s": [second - 0.01, second + 0.5]},   # the second alone
            {"timed_s": [first + 0.02, first + 0.05]},    # shorter than the sampling period: none
            {}]                                           # not timed (WRONG, or a CPU run)
    attach_row_states(rows, _TELEMETRY)
    assert rows[0]["gpu_state"] == {"samples": 2, "clocks.sm": pytest.approx(1867.5),
                                    "power.draw": pytest.approx(675.2)}
    assert rows[1]["gpu_state"] == {"samples": 1, "clocks.sm": 1755.0, "power.draw": pytest.approx(699.9)}
    assert "gpu_state" not in rows[2] and "gpu_state" not in rows[3]
    # A driver whose query lacks the timestamp leaves every row without a state.
    untimed = summarize(FIELDS[1:], "1980, 2619, 1980, 650.5, 700.00, 60, 0x0000000000000004\n")
    rows = [{"timed_s": [0.0, 2e9]}]
    attach_row_states(rows, untimed)
    assert "gpu_state" not in rows[0]


@pytest.mark.kernels_ci
def test_default_output_folder_is_ignored_and_named_by_device():
    import torch

    path = bench.default_out_dir(torch.device("cuda"), {"device": "NVIDIA H200"})
    assert path.parent == REPO_ROOT / "bench_runs" and path.name.startswith("nvidia-h200-")
    assert bench.default_out_dir(torch.device("cpu"), {"device": "AMD EPYC"}).name.startswith("cpu-")
    assert "/bench_runs/" in (REPO_ROOT / ".gitignore").read_text().splitlines()


class FakeKernel:
    """The package's Python API (gemm, matmul_2d, grouped_gemm) in plain torch, as ops_v2 documents it."""
    __name__ = "fake_gemm"

    @staticmethod
    def gemm(a, b, a_scale, b_scale, out=None, out_dtype=None):
        from benchmarks.problem import SCALE_BLOCK_N, dequant
        result = dequant(a, a_scale, 1) @ dequant(b, b_scale, SCALE_BLOCK_N).t()
        if out is None:
            return result.to(out_dtype or torch.bfloat16)
        out.copy_(result)
        return out

    @classmethod
    def matmul_2d(cls, A, B, Bs, block_size, output_dtype=None, activation_scale=None):
        assert list(block_size) == [128, 128] and activation_scale is None
        q, s = reference_quantize_activation(A, B.dtype)
        return cls.gemm(q, B, s, Bs, out_dtype=output_dtype or A.dtype)

    @classmethod
    def grouped_gemm(cls, a, b, a_scale, b_scale, offsets=None, expert_ids=None, masked_m=None, out=None,
                     out_dtype=None, expected_m=None):
        assert (offsets is None) != (masked_m is None) and expert_ids is None
        out = torch.zeros(*a.shape[:-1], b.shape[1], dtype=out_dtype or torch.bfloat16)
        if masked_m is not None:
            for e, c in enumerate(masked_m.tolist()):
                cls.gemm(a[e, :c], b[e], a_scale[e, :c], b_scale[e], out=out[e, :c])
            return out
        lo = 0
        for e, hi in enumerate(offsets.tolist()):
            cls.gemm(a[lo:hi], b[e], a_scale[lo:hi], b_scale[e], out=out[lo:hi])
            lo = hi
        return out


def _broken_peers():
    from benchmarks.grouped import DequantLoop, DequantLoopMasked
    from benchmarks.linear import DequantMatmul
    from benchmarks.problem import SCALE_BLOCK_N, dequant

    class Unquantized(DequantMatmul):
        # Skips the activation quantization: 2-3 % off the quantized computation the fused peers are held to.
        name = "unquantized"

        def reference(self, p):
            return p.reference

    def swapped(p):
        busy = [e for e, c in enumerate(p.counts) if c][:2]
        scale = p.b_scale.clone()
        scale[busy[0]], scale[busy[1]] = p.b_scale[busy[1]], p.b_scale[busy[0]]
        return scale

    class SwappedScales(DequantLoop):
        # Two experts' weight scales exchanged: the test the issue asks must fail.
        name = "swapped-scales"

        def prepare(self, p, timer, check_fn):
            scale = swapped(p)

            def call():
                out = torch.zeros(p.shape.m, p.shape.n, dtype=p.out_dtype)
                for e, (s, c) in enumerate(zip(p.starts, p.counts)):
                    a, a_scale = p.expert_rows(e)
                    out[s:s + c] = dequant(a, a_scale, 1) @ dequant(p.b[e], scale[e], SCALE_BLOCK_N).t()
                return out
            return call, {}

    class SwappedScalesMasked(SwappedScales):
        kind = DequantLoopMasked.kind

    class ShiftedSegments(DequantLoop):
        # Each expert's segment read one row late (an off-by-one in the offsets).
        name = "shifted-segments"

        def prepare(self, p, timer, check_fn):
            def call():
                out = torch.zeros(p.shape.m, p.shape.n, dtype=p.out_dtype)
                for e, (s, c) in enumerate(zip(p.starts, p.counts)):
                    lo, hi = min(s + 1, p.shape.m), min(s + c + 1, p.shape.m)
                    out[lo:hi] = dequant(p.a[lo:hi], p.a_scale[lo:hi], 1) @ \
                        dequant(p.b[e], p.b_scale[e], SCALE_BLOCK_N).t()
                return out
            return call, {}

    return [Unquantized(), SwappedScales(), SwappedScalesMasked(), ShiftedSegments()]


@pytest.mark.kernels_ci
def test_linear_and_grouped_suites_check_rows_and_report_bars(monkeypatch, tmp_path):
    from benchmarks.peers import Ours

    monkeypatch.setattr(Ours, "_kernel", FakeKernel())
    monkeypatch.setattr(Ours, "_load_error", None)
    json_path = tmp_path / "bench.json"
    bench.main(["--device", "cpu", "--suite", "linear", "grouped", "--iters", "2", "--warmup", "0", "--quiet",
                "--json", str(json_path)], extra_peers=_broken_peers())
    results = json.loads(json_path.read_text())
    rows = {(r["set"], r["shape"], r["peer"]): r for r in results["rows"]}
    sets = {"linear-cpu": ["ours", "ours-gemm", "dequant-fp32", "unquantized"],
            "grouped-cpu": ["ours", "ours-loop", "dequant-fp32", "swapped-scales", "shifted-segments"],
            "grouped-masked-cpu": ["ours", "dequant-fp32", "swapped-scales"]}
    from benchmarks.shapes import SHAPE_SETS
    expected = {(name, s.label, peer) for name, peers in sets.items() for s in SHAPE_SETS[name] for peer in peers}
    assert set(rows) == expected
    for key, row in rows.items():
        broken = key[2] in ("unquantized", "swapped-scales", "shifted-segments")
        assert row["status"] == ("WRONG" if broken else "OK"), row
        assert ("timing" in row) != broken
    # Useful FLOPs only: 2 x routed rows x N x K.
    grouped = rows["grouped-cpu", SHAPE_SETS["grouped-cpu"][0].label, "ours"]
    assert grouped["flops"] == 2 * grouped["m"] * grouped["n"] * grouped["k"]
    assert grouped["routing"]["empty_experts"] > 0  # the CPU set keeps an empty expert
    linear_bars = results["bars"]["linear-cpu"]
    assert all(s["fused_ratio"] > 0 and s["limit"] == 1.10 for s in linear_bars["shapes"])
    assert results["bars"]["grouped-cpu"]["routing"] and "ours-loop" in results["peers"]
    table = (tmp_path / "table.md")
    assert not table.exists()


@pytest.mark.kernels_ci
def test_routing_is_seeded_skewed_and_sums_to_the_rows():
    from benchmarks.grouped import masked_max_m, route, routing_stats, deepgemm_contiguous_layout
    from benchmarks.shapes import DEEPGEMM_GROUPED_CASE, MOE_TOPK, SHAPE_SETS

    for shape in SHAPE_SETS["grouped"]:
        counts = route(shape)
        assert len(counts) == shape.experts and sum(counts) == shape.m
        assert all(c <= (shape.tokens or c) for c in counts)  # top-k picks distinct experts per token
        assert masked_max_m(counts) % 256 == 0 and masked_max_m(counts) >= max(counts)
    assert route(DEEPGEMM_GROUPED_CASE) == (8192,) * 4
    route.cache_clear()
    dsv3 = {s.tokens: routing_stats(route(s)) for s in SHAPE_SETS["grouped"] if s.name == "dsv3-gate-up"}
    assert dsv3[64]["empty_experts"] > 0 and dsv3[4096]["empty_experts"] == 0
    assert all(2.0 < dsv3[t]["max_over_mean"] < 6.0 for t in (4096, 32768))
    assert dsv3[32768]["mean_rows"] == 32768 * MOE_TOPK / 256
    # DeepGEMM's contiguous layout: each non-empty expert padded to 128 rows, -1 on the padding.
    rows, m_indices, valid = deepgemm_contiguous_layout([3, 0, 130])
    assert rows == 128 + 256 and len(m_indices) == rows and len(valid) == 133
    assert m_indices[:4] == [0, 0, 0, -1] and m_indices[128:130] == [2, 2] and m_indices[-1] == -1
    assert valid[:3] == [0, 1, 2] and valid[3] == 128


@pytest.mark.kernels_ci
def test_linear_and_grouped_gpu_sets():
    from benchmarks.grouped import DeepGemmGrouped, DeepGemmMasked
    from benchmarks.shapes import DEEPSEEK_V3_NK, DEFAULT_SETS, LINEAR_MS, MOE_LAYERS, MOE_TOKENS, SHAPE_SETS, SUITES

    assert {(s.m, s.n, s.k) for s in SHAPE_SETS["linear"]} == {(m, n, k) for m in LINEAR_MS for n, k in DEEPSEEK_V3_NK}
    for name in ("grouped", "grouped-masked"):
        shapes = SHAPE_SETS[name]
        assert len(shapes) == len(MOE_TOKENS) * len(MOE_LAYERS) + 1
        assert {(s.n, s.k) for s in shapes} == {(4096, 7168), (7168, 2048), (3072, 4096), (4096, 1536)}
        assert all(DeepGemmGrouped().unsupported(s) is None for s in shapes)
    assert {DeepGemmGrouped().compile_spec(s)[0] for s in SHAPE_SETS["grouped"]} == {"contiguous"}
    assert {DeepGemmMasked().compile_spec(s)[0] for s in SHAPE_SETS["grouped-masked"]} == {"masked"}
    assert set(DEFAULT_SETS["cuda"]) == {n for suite in SUITES.values() for n in suite["cuda"]}
    assert DEFAULT_SETS["cpu"] == ["cpu", "linear-cpu", "grouped-cpu", "grouped-masked-cpu"]


def _row(set_name, kind, shape, peer, call, kernel=None, **extra):
    def timing(us):
        return {"median_us": us, "p10_us": us, "p90_us": us, "cv": 0.01, "iters": 3, "samples_us": [us] * 3}
    return {"set": set_name, "kind": kind, "shape": shape, "peer": peer, "status": "OK", "flops": 2e12,
            "bytes": 1e9, "m": extra.pop("m", 1), "n": 1, "k": 1, "layout": "kmajor", "timing": timing(call),
            "kernel_timing": timing(kernel or call), **extra}


@pytest.mark.kernels_ci
def test_bars_of_linear_and_grouped_suites():
    from benchmarks import report

    results = _synthetic_gpu_results()
    results["rows"] = [
        _row("linear", "linear", "16,2112,7168", "ours", 10.5, m=16),
        _row("linear", "linear", "16,2112,7168", "ours-gemm", 10.0, m=16),  # 1.05 <= 1.10
        _row("linear", "linear", "16,2112,7168", "triton", 12.0, m=16),
        _row("linear", "linear", "4096,2112,7168", "ours", 107.0, m=4096),
        _row("linear", "linear", "4096,2112,7168", "ours-gemm", 100.0, m=4096),  # 1.07 > 1.05
        _row("linear", "linear", "4096,2112,7168", "triton", 105.0, m=4096),  # faster than ours
        _row("grouped", "grouped", "dsv3 T64", "ours", 10.0, tokens=64),
        _row("grouped", "grouped", "dsv3 T64", "ours-loop", 16.0, tokens=64),
        _row("grouped", "grouped", "dsv3 T64", "deepgemm", 11.0, tokens=64),
        _row("grouped", "grouped", "deepgemm 4x8192", "ours", 1000.0, tokens=0),  # 2e12 / 1 ms = 2000 TFLOP/s
        _row("grouped", "grouped", "deepgemm 4x8192", "deepgemm", 1040.0, tokens=0),
    ]
    for name in ("ours-gemm", "ours-loop", "triton"):
        results["peers"][name] = {"label": name, "block_scaled": name == "triton", "conversion": "none",
                                  "unavailable": None}
    report.annotate(results)
    linear, grouped = results["bars"]["linear"], results["bars"]["grouped"]
    first, second = linear["shapes"]
    assert first["fused_ratio"] == pytest.approx(1.05) and first["fused_ok"] and first["fastest"]
    assert second["fused_ratio"] == pytest.approx(1.07) and not second["fused_ok"]
    assert second["faster_peers"] == ["triton"] and not linear["fused_met"] and not linear["fastest_met"]
    assert grouped["deepgemm_geomean"] == pytest.approx((1.1 * 1.04) ** 0.5) and grouped["deepgemm_met"]
    assert grouped["dense_loop"] == [{"shape": "dsv3 T64", "ratio": pytest.approx(1.6), "ratio_kernel":
                                      pytest.approx(1.6), "ok": True}]
    assert grouped["published"][0]["tflops"] == pytest.approx(2000) and grouped["published"][0]["ok"]
    table = report.markdown(results)
    for text in ("## Bars: linear", "| 4096,2112,7168 | 1.070 |", "## Bars: grouped", ">= 1300: **met**",
                 "bar >= 1.5: **met**"):
        assert text in table, text
    # The issues set the fused-path and dense-loop bars for the GPU: a CPU run shows no verdict on them.
    results["env"]["device_type"] = "cpu"
    table = report.markdown(results)
    assert "bar >= 1.5: a GPU bar, not applied on the CPU" in table
    assert "above: a GPU bar, not applied on the CPU" in table
    assert "matmul_2d faster than every peer on every shape: **missed**" in table  # the CPU's own bar


@pytest.mark.kernels_ci
def test_triton_peers_in_the_interpreter(tmp_path):
    """The Triton quantizer, inline-quant GEMM and grouped GEMM against the references, on CPU under
    TRITON_INTERPRET=1 (needs triton installed; CUDA runs them natively)."""
    pytest.importorskip("triton")
    import subprocess
    import os
    script = r"""
import torch
from benchmarks import triton_blockscaled as tb, triton_grouped as tg
from tests._helpers import reference_quantize_activation
from benchmarks.problem import check, dequant
torch.manual_seed(0)
fp8 = torch.float8_e4m3fn
x = torch.randn(5, 300, dtype=torch.bfloat16)
q_ref, s_ref = reference_quantize_activation(x, fp8)
for column_major in (False, True):
    q, s = tb.per_token_group_quant_fp8(x, column_major_scales=column_major)
    assert torch.equal(s, s_ref)
    # The interpreter's FP8 cast is not the hardware's: it drops the exponent carry when rounding up to a
    # power of two (124.3 -> 64, not 128) and rounds some ties away from even. Nearly all must match.
    assert (q.float() != q_ref.float()).float().mean() < 0.05
    assert (s.stride(0) == 1) == column_major
b, b_scale = torch.randn(130, 300).to(fp8), torch.randn(2, 3)
# The inline quantization casts as the interpreter does: compare with the interpreted quantizer's output.
ref = dequant(q, s, 1) @ dequant(b, b_scale, 128).t()
cfg = dict(BLOCK_M=16, BLOCK_N=64, GROUP_M=1, num_warps=4, num_stages=2)
assert check(tb.blockscaled_gemm(x, b, None, b_scale, cfg), ref).ok
counts = [3, 0, 17, 1, 0]
m, n, k = sum(counts), 256, 256
a, a_scale = torch.randn(m, k).to(fp8), torch.randn(m, 2)
w, w_scale = torch.randn(5, n, k).to(fp8), torch.randn(5, 2, 2)
ref, lo = torch.zeros(m, n), 0
for e, c in enumerate(counts):
    ref[lo:lo + c] = dequant(a[lo:lo + c], a_scale[lo:lo + c], 1) @ dequant(w[e], w_scale[e], 128).t()
    lo += c
offsets = torch.tensor(counts).cumsum(0).to(torch.int32)
out = tg.grouped_gemm(a, w, a_scale, w_scale, offsets, torch.tensor(counts), tg.CONFIGS[0])
assert check(out, ref).ok
swapped = w_scale[[2, 1, 0, 3, 4]]
assert not check(tg.grouped_gemm(a, w, a_scale, swapped, offsets, torch.tensor(counts), tg.CONFIGS[0]), ref).ok
print("triton interpreter ok")
"""
    env = dict(os.environ, TRITON_INTERPRET="1")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0 and "triton interpreter ok" in done.stdout, done.stderr[-3000:]
