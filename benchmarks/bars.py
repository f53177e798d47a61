"""The issues' performance bars, evaluated on a run's annotated rows and written under its tables.

linear (issue 32): the fused path (matmul_2d: quantize + GEMM) within LINEAR_FUSED_BARS of our GEMM alone on
pre-quantized inputs, and faster than every peer, on every shape.
grouped / masked (issue 33): geomean >= 1.05x DeepGEMM per suite, no shape below 0.95x; >= 1.5x the loop of
dense GEMMs at 64 and 512 tokens; >= 1300 TFLOP/s on DeepGEMM's published case.
The issues set the fused-path and dense-loop bars for the GPU (the H200); a CPU run shows those ratios
without a verdict (its bar is being faster than dequantize + torch.matmul: "faster than every peer")."""
import math

from .shapes import KIND_GROUPED, KIND_LINEAR, KIND_MASKED, LINEAR_FUSED_BARS

OURS, GEMM_ALONE, DENSE_LOOP, DEEPGEMM = "ours", "ours-gemm", "ours-loop", "deepgemm"
DEEPGEMM_GEOMEAN_BAR = 1.05
DEEPGEMM_FLOOR_BAR = 0.95
DENSE_LOOP_BAR, DENSE_LOOP_TOKENS = 1.5, (64, 512)
PUBLISHED_CASE_TFLOPS = 1300


def fused_limit(m: int) -> float:
    for largest_m, limit in LINEAR_FUSED_BARS:
        if largest_m is None or m <= largest_m:
            return limit
    raise AssertionError("LINEAR_FUSED_BARS ends with a catch-all")


def _us(row, key="timing"):
    timing = row.get(key) if row else None
    return timing["median_us"] if timing else None


def _geomean(values):
    values = [v for v in values if v]
    return math.exp(sum(map(math.log, values)) / len(values)) if values else None


def _linear(rows_by_shape, peers):
    shapes = []
    for label, rows in rows_by_shape.items():
        ours, alone = rows.get(OURS), rows.get(GEMM_ALONE)
        entry = {"shape": label, "m": next(iter(rows.values()))["m"]}
        entry["limit"] = fused_limit(entry["m"])
        for suffix, key in (("", "timing"), ("_kernel", "kernel_timing")):
            fused_us, alone_us = _us(ours, key), _us(alone, key)
            entry["fused_ratio" + suffix] = fused_us / alone_us if fused_us and alone_us else None
        entry["fused_ok"] = entry["fused_ratio"] is not None and entry["fused_ratio"] <= entry["limit"]
        rivals = {name: r for name, r in rows.items() if name not in (OURS, GEMM_ALONE) and r["status"] == "OK"}
        faster = sorted(name for name, r in rivals.items() if _us(ours) is None or _us(r) < _us(ours))
        entry["faster_peers"] = faster
        entry["fastest"] = _us(ours) is not None and not faster
        shapes.append(entry)
    measured = [s for s in shapes if s["fused_ratio"] is not None]
    return {"kind": KIND_LINEAR, "shapes": shapes,
            "fused_met": bool(measured) and len(measured) == len(shapes) and all(s["fused_ok"] for s in shapes),
            "fastest_met": bool(shapes) and all(s["fastest"] for s in shapes),
            "missing": sorted({name for name in (OURS, GEMM_ALONE) if peers.get(name, {}).get("unavailable")})}


def _grouped(kind, rows_by_shape, peers, summary):
    dg = summary["peers"].get(DEEPGEMM, {})
    out = {"kind": kind, "deepgemm_unavailable": peers.get(DEEPGEMM, {}).get("unavailable"),
           "deepgemm_geomean": dg.get("geomean_ours_speedup"),
           "deepgemm_geomean_kernel": dg.get("geomean_ours_speedup_kernel"),
           "deepgemm_below": dg.get("below"), "deepgemm_worst": dg.get("worst"),
           "deepgemm_rows": dg.get("OK", 0), "routing": [], "dense_loop": [], "published": []}
    out["deepgemm_met"] = (out["deepgemm_geomean"] is not None and out["deepgemm_geomean"] >= DEEPGEMM_GEOMEAN_BAR
                           and out["deepgemm_below"] == 0)
    for label, rows in rows_by_shape.items():
        first = next(iter(rows.values()))
        if first.get("routing"):
            out["routing"].append({"shape": label, "rows": first["m"], **first["routing"]})
        ours = rows.get(OURS)
        loop = rows.get(DENSE_LOOP)
        if first.get("tokens") in DENSE_LOOP_TOKENS and loop is not None:
            ratio = loop.get("ours_speedup")
            out["dense_loop"].append({"shape": label, "ratio": ratio, "ratio_kernel": loop.get("ours_speedup_kernel"),
                                      "ok": ratio is not None and ratio >= DENSE_LOOP_BAR})
        if first.get("tokens") == 0:  # rows per expert fixed: DeepGEMM's published case
            tflops = ours.get("tflops") if ours else None
            kernel_tflops = first["flops"] / _us(ours, "kernel_timing") / 1e6 if _us(ours, "kernel_timing") else None
            out["published"].append({"shape": label, "tflops": tflops, "tflops_kernel": kernel_tflops,
                                     "ok": tflops is not None and tflops >= PUBLISHED_CASE_TFLOPS})
    return out


def evaluate(results) -> dict:
    """{set name: bar results} for the sets of the linear, grouped and masked kinds."""
    bars = {}
    for set_name, summary in results["summary"].items():
        rows = [r for r in results["rows"] if r["set"] == set_name]
        kind = rows[0].get("kind") if rows else None
        by_shape = {}
        for r in rows:
            by_shape.setdefault(r["shape"], {})[r["peer"]] = r
        if kind == KIND_LINEAR:
            bars[set_name] = _linear(by_shape, results["peers"])
        elif kind in (KIND_GROUPED, KIND_MASKED):
            bars[set_name] = _grouped(kind, by_shape, results["peers"], summary)
    return bars


def _f(value, spec="{:.2f}"):
    return "–" if value is None else spec.format(value)


def _verdict(ok):
    return "**met**" if ok else "**missed**"


def _gpu_bar_verdict(results, ok):
    """The verdict of a bar the issues set for the GPU; runs before `device_type` was recorded were GPU runs."""
    if results["env"].get("device_type", "cuda") == "cpu":
        return "a GPU bar, not applied on the CPU"
    return _verdict(ok)


def markdown(results) -> list:
    lines = []
    for set_name, bar in results.get("bars", {}).items():
        lines += ["", f"## Bars: {set_name}", ""]
        if bar["kind"] == KIND_LINEAR:
            if bar["missing"]:
                lines.append(f"- not measurable: {', '.join(bar['missing'])} unavailable (see peers above)")
            lines += [f"- fused path / GEMM alone (call time) <= {fused_limit(1):.2f} at M <= "
                      f"{LINEAR_FUSED_BARS[0][0]}, <= {fused_limit(1 << 30):.2f} above: "
                      f"{_gpu_bar_verdict(results, bar['fused_met'])}",
                      f"- matmul_2d faster than every peer on every shape: {_verdict(bar['fastest_met'])}", "",
                      "| shape | fused / GEMM alone (call) | (kernel) | bar | ok | peers faster than matmul_2d (call) |",
                      "|---|---:|---:|---:|---|---|"]
            for s in bar["shapes"]:
                lines.append(f"| {s['shape']} | {_f(s['fused_ratio'], '{:.3f}')} | "
                             f"{_f(s['fused_ratio_kernel'], '{:.3f}')} | {s['limit']:.2f} | "
                             f"{'yes' if s['fused_ok'] else 'NO'} | {', '.join(s['faster_peers']) or '–'} |")
            continue
        if DEEPGEMM not in results["peers"]:
            lines.append("- DeepGEMM is not a peer of this run (the DeepGEMM bars are the GPU's)")
        elif bar["deepgemm_unavailable"]:
            lines.append(f"- DeepGEMM UNAVAILABLE ({bar['deepgemm_unavailable']}): its bars are not measured")
        worst = bar["deepgemm_worst"]
        if DEEPGEMM in results["peers"]:
            lines.append(f"- geomean ours x DeepGEMM (call) {_f(bar['deepgemm_geomean'])} over {bar['deepgemm_rows']} "
                         f"shapes (kernel {_f(bar['deepgemm_geomean_kernel'])}), bar >= {DEEPGEMM_GEOMEAN_BAR}; "
                         f"shapes below {DEEPGEMM_FLOOR_BAR}x: {_f(bar['deepgemm_below'], '{}')}"
                         + (f" (worst {worst[1]:.2f} at {worst[0]})" if worst else "")
                         + f": {_verdict(bar['deepgemm_met'])}")
        for d in bar["dense_loop"]:
            lines.append(f"- vs the dense loop at {d['shape']}: {_f(d['ratio'])}x (kernel {_f(d['ratio_kernel'])}x), "
                         f"bar >= {DENSE_LOOP_BAR}: {_gpu_bar_verdict(results, d['ok'])}")
        for d in bar["published"]:
            lines.append(f"- DeepGEMM's published case {d['shape']}: {_f(d['tflops'], '{:.0f}')} TFLOP/s (call), "
                         f"{_f(d['tflops_kernel'], '{:.0f}')} (kernel), bar >= {PUBLISHED_CASE_TFLOPS}: "
                         f"{_verdict(d['ok'])}")
        if bar["routing"]:
            lines += ["", "Routing (seeded Zipf-like expert popularity, top-k without replacement):", "",
                      "| shape | rows | busiest expert | mean | max / mean | empty experts |",
                      "|---|---:|---:|---:|---:|---:|"]
            for r in bar["routing"]:
                lines.append(f"| {r['shape']} | {r['rows']} | {r['max_rows']} | {r['mean_rows']:.1f} | "
                             f"{_f(r['max_over_mean'])} | {r['empty_experts']} |")
    return lines
