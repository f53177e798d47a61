"""Derived numbers (roofline floors, throughput, speedups), the markdown table and the PNG plot."""
import math

CHECK_TEXT = ("before timing, each row's output is compared with the fp32 dequantized reference (its own fp32 "
              "reference for the per-tensor peer): |out-ref| <= eps(out dtype)*max|ref| + 0.02*|ref| "
              "elementwise, and ||out-ref||/||ref|| < 1e-2; a failing row is WRONG and not timed")
LAYOUT_TEXT = ("K-major sets: every peer gets A, B, scales in its preferred layout, converted untimed; "
               "challenge-layout ('T'): a, b, a_scale, b_scale are transposed views and each peer's own "
               "conversion is inside its timed call")
OURS = "ours"
NOTE_CHARS = 90


def _geomean(values):
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def annotate(results):
    """Adds per-row floors/throughput/speedups and per-shape, per-set summaries (in place)."""
    ceil = results["ceilings"]
    peers = results["peers"]
    by_shape = {}
    for row in results["rows"]:
        row["compute_floor_us"] = row["flops"] / ceil["peak_flops"] * 1e6
        row["memory_floor_us"] = row["bytes"] / ceil["peak_bandwidth_Bps"] * 1e6
        row["floor_us"] = max(row["compute_floor_us"], row["memory_floor_us"])
        row["bound"] = "compute" if row["compute_floor_us"] >= row["memory_floor_us"] else "memory"
        if row["status"] == "OK":
            t = row["timing"]["median_us"]
            row["tflops"] = row["flops"] / t / 1e6
            row["gbps"] = row["bytes"] / t / 1e3
            row["floor_fraction"] = row["floor_us"] / t
        by_shape.setdefault((row["set"], row["shape"]), []).append(row)

    shapes = []
    for (set_name, label), rows in by_shape.items():
        ours = next((r for r in rows if r["peer"] == OURS and r["status"] == "OK"), None)
        rivals = [r for r in rows if r["peer"] != OURS and r["status"] == "OK" and peers[r["peer"]]["block_scaled"]]
        best = min(rivals, key=lambda r: r["timing"]["median_us"]) if rivals else None
        if ours:
            for r in rows:
                if r is not ours and r["status"] == "OK":
                    r["ours_speedup"] = r["timing"]["median_us"] / ours["timing"]["median_us"]
        entry = {"set": set_name, "shape": label, "floor_us": rows[0]["floor_us"], "bound": rows[0]["bound"],
                 "ours_us": ours["timing"]["median_us"] if ours else None,
                 "ours_floor_fraction": ours["floor_fraction"] if ours else None,
                 "best_peer": best["peer"] if best else None,
                 "best_peer_us": best["timing"]["median_us"] if best else None,
                 "best_peer_floor_fraction": best["floor_fraction"] if best else None}
        entry["speedup_vs_best"] = entry["best_peer_us"] / entry["ours_us"] if ours and best else None
        shapes.append(entry)
    results["shapes"] = shapes

    summary = {}
    for set_name in dict.fromkeys(r["set"] for r in results["rows"]):
        rows = [r for r in results["rows"] if r["set"] == set_name]
        per_peer = {}
        for name in dict.fromkeys(r["peer"] for r in rows):
            mine = [r for r in rows if r["peer"] == name]
            per_peer[name] = {
                status: sum(r["status"] == status for r in mine) for status in ("OK", "WRONG", "ERROR")}
            per_peer[name]["geomean_us"] = _geomean([r["timing"]["median_us"] for r in mine if r["status"] == "OK"])
            per_peer[name]["geomean_floor_fraction"] = _geomean([r.get("floor_fraction") for r in mine])
            per_peer[name]["geomean_ours_speedup"] = _geomean([r.get("ours_speedup") for r in mine])
        set_shapes = [s for s in shapes if s["set"] == set_name]
        summary[set_name] = {"peers": per_peer,
                             "geomean_speedup_vs_best": _geomean([s["speedup_vs_best"] for s in set_shapes]),
                             "geomean_floor_us": _geomean([s["floor_us"] for s in set_shapes])}
    results["summary"] = summary


def _fmt(value, spec, missing="–"):
    return missing if value is None else format(value, spec)


def _config_text(config):
    """The Triton peer's chosen config, compact: 'BMxBN gG wW sS'."""
    if not config:
        return ""
    return (f"{config['BLOCK_M']}x{config['BLOCK_N']} g{config['GROUP_M']} w{config['num_warps']} "
            f"s{config['num_stages']}")


def _rate(bps):
    return f"{bps / 1e12:.2f} TB/s" if bps >= 1e12 else f"{bps / 1e9:.1f} GB/s"


def markdown(results) -> str:
    env, ceil, peers = results["env"], results["ceilings"], results["peers"]
    pkg = env["package"]
    pkg_text = f"{pkg.get('name')} v{pkg.get('version')} id {pkg.get('id')} ({pkg.get('variant')})" \
        if pkg.get("loaded") else f"NOT LOADED: {pkg.get('error')}"
    lines = [f"# gemm benchmark on {env['device']}", "",
             f"torch {env['torch']}, CUDA {env['cuda']}, HIP {env['hip']}, driver {env.get('driver')}, "
             f"triton {env['triton']}; package: {pkg_text}; git {str(env.get('git_commit'))[:12]}; {env['date_utc']}",
             "",
             f"- timing: {results['method']['timing']}; seed {results['method']['seed']}, "
             f"{results['method']['fp8_dtype']}",
             f"- check: {results['method']['check']}",
             f"- layouts: {results['method']['layouts']}"]
    measured = ceil.get("fp8_tensor_rate_flops") or ceil.get("fp32_matmul_rate_flops")
    lines.append(f"- ceilings: copy {_rate(ceil['copy_bandwidth_Bps'])} measured; matrix rate "
                 f"{_fmt(measured and measured / 1e12, '.3g')} TFLOP/s measured "
                 f"({'FP8 per-tensor' if 'fp8_tensor_rate_flops' in ceil else 'fp32 matmul'}); floors use "
                 f"{ceil['peak_flops'] / 1e12:.3g} TFLOP/s "
                 f"({'datasheet' if 'datasheet_fp8_flops' in ceil else 'measured'}) and the measured copy "
                 "bandwidth: floor = max(2MNK/peak, (MK+NK+scales+out) bytes/bandwidth); % floor = floor/time")
    lines.append("- peers: " + "; ".join(
        f"`{name}` = {p['label']}" + (f" [challenge-layout timed call includes: {p['conversion']}]"
                                      if p["conversion"] != "none" else "")
        + (f" — UNAVAILABLE: {p['unavailable']}" if p["unavailable"] else "")
        for name, p in peers.items()))
    lines.append("- `ours ×` = peer time / our time (> 1: ours faster); WRONG rows failed the check and were "
                 "not timed; ERROR rows raised")

    for set_name in results["summary"]:
        lines += ["", f"## {set_name}", "",
                  "| shape | floor µs (bound) | peer | status | median µs | p10–p90 µs | TFLOP/s | GB/s | % floor "
                  "| ours × | rel err | note |",
                  "|---|---|---|---|---:|---|---:|---:|---:|---:|---:|---|"]
        for row in (r for r in results["rows"] if r["set"] == set_name):
            t = row.get("timing") or {}
            spread = f"{t['p10_us']:.1f}–{t['p90_us']:.1f}" if t else "–"
            frac = row.get("floor_fraction")
            note = (row.get("error") or _config_text(row.get("config")))[:NOTE_CHARS].replace("|", "/")
            lines.append(
                f"| {row['shape']} | {row['floor_us']:.1f} ({row['bound'][0]}) | {row['peer']} | {row['status']} | "
                f"{_fmt(t.get('median_us'), '.1f')} | {spread} | {_fmt(row.get('tflops'), '.3g')} | "
                f"{_fmt(row.get('gbps'), '.3g')} | {_fmt(frac and 100 * frac, '.0f')} | "
                f"{_fmt(row.get('ours_speedup'), '.2f')} | {_fmt(row.get('rel_err'), '.1e')} | {note} |")

    lines += ["", "## Summary (geomeans over the shapes where the row is OK)", "",
              "| set | peer | OK | WRONG | ERROR | geomean µs | geomean % floor | ours × (geomean) |",
              "|---|---|---:|---:|---:|---:|---:|---:|"]
    for set_name, summ in results["summary"].items():
        for name, s in summ["peers"].items():
            frac = s["geomean_floor_fraction"]
            lines.append(f"| {set_name} | {name} | {s['OK']} | {s['WRONG']} | {s['ERROR']} | "
                         f"{_fmt(s['geomean_us'], '.1f')} | {_fmt(frac and 100 * frac, '.0f')} | "
                         f"{_fmt(s['geomean_ours_speedup'], '.2f')} |")
        lines.append(f"| {set_name} | **ours vs best block-scaled peer** | | | | floor "
                     f"{_fmt(summ['geomean_floor_us'], '.1f')} | | **{_fmt(summ['geomean_speedup_vs_best'], '.2f')}** |")
    return "\n".join(lines) + "\n"


def plot(results, path):
    """Speedup of ours over the best block-scaled peer and fraction of the floor, per shape.
    Returns a message when it could not plot (matplotlib missing, nothing to show), else None."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return f"plot skipped: matplotlib is not installed (pip install matplotlib); no file written at {path}"
    shapes = results["shapes"]
    if not shapes:
        return "plot skipped: no rows"
    sets = list(dict.fromkeys(s["set"] for s in shapes))
    colors = {name: f"C{i}" for i, name in enumerate(sets)}
    x = range(len(shapes))
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(max(8, 0.32 * len(shapes) + 2), 8), sharex=True)

    speed = [s["speedup_vs_best"] or float("nan") for s in shapes]
    ax1.bar(x, speed, color=[colors[s["set"]] for s in shapes])
    ax1.axhline(1.0, color="black", linewidth=0.8)
    ax1.set_yscale("log")
    ax1.set_ylabel("ours speedup vs best\nblock-scaled peer (×)")
    for i, s in enumerate(shapes):
        if s["best_peer"] and s["speedup_vs_best"]:
            ax1.annotate(f"{s['speedup_vs_best']:.2f} {s['best_peer']}", (i, s["speedup_vs_best"]), ha="center",
                         va="bottom", fontsize=6, rotation=90, xytext=(0, 2), textcoords="offset points")
    shown = [v for v in speed if v == v]
    if shown:  # log axis with room above the tallest bar for its label
        ax1.set_ylim(min(0.5, min(shown) / 1.5), max(2.0, max(shown) * 3))
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[n]) for n in sets]
    ax1.legend(handles, sets, fontsize=8, loc="upper left")
    ax1.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    ax1.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax1.set_title(f"gemm vs peers on {results['env']['device']} ({results['method']['timing_short']})", fontsize=10)

    ours = [100 * (s["ours_floor_fraction"] or float("nan")) for s in shapes]
    best = [100 * (s["best_peer_floor_fraction"] or float("nan")) for s in shapes]
    ax2.bar(x, ours, color=[colors[s["set"]] for s in shapes], label="ours")
    ax2.plot(x, best, "kx", label="best block-scaled peer")
    ax2.set_ylabel("% of roofline floor\n(floor / time)")
    ax2.set_ylim(0, 100)
    ax2.legend(fontsize=8, loc="upper left")
    ax2.set_xticks(list(x))
    ax2.set_xticklabels([s["shape"] for s in shapes], rotation=90, fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None
