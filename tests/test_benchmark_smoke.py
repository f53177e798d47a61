"""Smoke test of the side-by-side benchmark (benchmarks/bench.py) on CPU with tiny shapes.

It must record every (shape, peer) row, check each row before timing it, and report peers that return
wrong numbers as WRONG (untimed) rather than fast: two deliberately broken peers are added through the
`extra_peers` hook, one off by a single element, one reading the activation scales of the wrong K block."""

from __future__ import annotations

import json
import sys

import pytest
import torch
from _helpers import REPO_ROOT

sys.path.insert(0, str(REPO_ROOT))  # `benchmarks` is a top-level package of the repository

from benchmarks import bench  # noqa: E402
from benchmarks.peers import DequantFp32  # noqa: E402

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
    assert results["ceilings"]["copy_bandwidth_Bps"] > 0 and results["ceilings"]["peak_flops"] > 0
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
