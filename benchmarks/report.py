"""Derived numbers (roofline floors, throughput, speedups), the markdown table and the PNG plot."""
import math

from . import bars

CHECK_TEXT = ("before timing, each row's output is compared with the fp32 dequantized reference (linear rows: "
              "of the reference-quantized activations; grouped rows: per expert, valid rows only; its own fp32 "
              "reference for the per-tensor peer and for peers that do not quantize the activations): |out-ref| <= eps(out dtype)*max|ref| + 0.02*|ref| "
              "elementwise, and ||out-ref||/||ref|| < 1e-2; a failing row is WRONG and not timed")
LAYOUT_TEXT = ("K-major sets: every peer gets A, B, scales in its preferred layout, converted untimed; "
               "challenge-layout ('T'): a, b, a_scale, b_scale are transposed views and each peer's own "
               "conversion is inside its timed call")
OURS = "ours"
NOTE_CHARS = 90
BOOTSTRAP_ROUNDS = 200
BELOW = 0.95  # a shape where a peer is faster than this fraction of ours counts as lost


def _geomean(values):
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def _quantile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def bootstrap_geomean(pairs, rounds=BOOTSTRAP_ROUNDS, seed=0):
    """p10, p90 of the geomean over shapes of median(peer) / median(ours), each row's samples resampled
    with replacement: how far this run's noise alone moves the geomean. pairs: [(ours_us, peer_us)]."""
    import torch
    if not pairs:
        return None, None
    gen = torch.Generator().manual_seed(seed)
    log_sum = torch.zeros(rounds, dtype=torch.float64)
    for ours, peer in pairs:
        medians = []
        for samples in (ours, peer):
            t = torch.tensor(samples, dtype=torch.float64)
            idx = torch.randint(len(samples), (rounds, len(samples)), generator=gen)
            medians.append(t[idx].median(dim=1).values)
        log_sum += (medians[1] / medians[0]).log()
    geo = (log_sum / len(pairs)).exp().tolist()
    return _quantile(geo, 0.1), _quantile(geo, 0.9)


def _us(row, key):
    timing = row.get(key)
    return timing["median_us"] if timing else None


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
        entry = {"set": set_name, "shape": label, "floor_us": rows[0]["floor_us"], "bound": rows[0]["bound"],
                 "ours_us": _us(ours, "timing") if ours else None,
                 "ours_kernel_us": _us(ours, "kernel_timing") if ours else None,
                 "ours_floor_fraction": ours["floor_fraction"] if ours else None}
        for suffix, key in (("", "timing"), ("_kernel", "kernel_timing")):
            if ours and _us(ours, key):
                for r in rows:
                    if r is not ours and r["status"] == "OK" and _us(r, key):
                        r["ours_speedup" + suffix] = _us(r, key) / _us(ours, key)
            timed = [r for r in rivals if _us(r, key)]
            best = min(timed, key=lambda r: _us(r, key)) if timed else None
            entry["best_peer" + suffix] = best["peer"] if best else None
            entry["best_peer_us" + suffix] = _us(best, key) if best else None
            entry["speedup_vs_best" + suffix] = best.get("ours_speedup" + suffix) if best else None
        best = next((r for r in rivals if r["peer"] == entry["best_peer"]), None)
        entry["best_peer_floor_fraction"] = best["floor_fraction"] if best else None
        shapes.append(entry)
    results["shapes"] = shapes

    summary = {}
    for set_name in dict.fromkeys(r["set"] for r in results["rows"]):
        rows = [r for r in results["rows"] if r["set"] == set_name]
        ours_by_shape = {r["shape"]: r for r in rows if r["peer"] == OURS and r["status"] == "OK"}
        per_peer = {}
        for name in dict.fromkeys(r["peer"] for r in rows):
            mine = [r for r in rows if r["peer"] == name]
            s = {status: sum(r["status"] == status for r in mine) for status in ("OK", "WRONG", "ERROR", "UNSUPPORTED")}
            s["geomean_us"] = _geomean([_us(r, "timing") for r in mine])
            s["geomean_kernel_us"] = _geomean([_us(r, "kernel_timing") for r in mine])
            s["geomean_floor_fraction"] = _geomean([r.get("floor_fraction") for r in mine])
            for suffix in ("", "_kernel"):
                ratios = [(r["shape"], r["ours_speedup" + suffix]) for r in mine if r.get("ours_speedup" + suffix)]
                s["geomean_ours_speedup" + suffix] = _geomean([v for _, v in ratios])
                s["below" + suffix] = sum(v < BELOW for _, v in ratios)
                s["worst" + suffix] = min(ratios, key=lambda x: x[1]) if ratios else None
            if name != OURS:
                s["ours_speedup_p10"], s["ours_speedup_p90"] = bootstrap_geomean(
                    [(ours_by_shape[r["shape"]]["timing"]["samples_us"], r["timing"]["samples_us"])
                     for r in mine if r.get("ours_speedup")])
            per_peer[name] = s
        set_shapes = [s for s in shapes if s["set"] == set_name]
        summary[set_name] = {"peers": per_peer,
                             "geomean_speedup_vs_best": _geomean([s["speedup_vs_best"] for s in set_shapes]),
                             "geomean_speedup_vs_best_kernel": _geomean([s["speedup_vs_best_kernel"] for s in set_shapes]),
                             "geomean_floor_us": _geomean([s["floor_us"] for s in set_shapes])}
    results["summary"] = summary
    results["bars"] = bars.evaluate(results)


def noisy_rows(results):
    """One line per timed row whose iterations spread more than the method's threshold (CV)."""
    limit = results["method"]["noisy_cv"]
    return [f"{r['set']} {r['shape']} {r['peer']}: CV {100 * r['timing']['cv']:.0f} % (p10–p90 "
            f"{r['timing']['p10_us']:.1f}–{r['timing']['p90_us']:.1f} µs); its ratios are uncertain by as much"
            for r in results["rows"] if r["status"] == "OK" and r["timing"]["cv"] > limit]


def _fmt(value, spec, missing="–"):
    return missing if value is None else format(value, spec)


def _config_text(config):
    """A Triton peer's chosen config, compact: 'BMxBN gG wW sS' (the keys it has)."""
    if not config:
        return ""
    tile = f"{config['BLOCK_M']}x{config['BLOCK_N']} " if "BLOCK_M" in config else ""
    group = f"g{config['GROUP_M']} " if "GROUP_M" in config else ""
    return f"{tile}{group}w{config['num_warps']} s{config['num_stages']}"


def _rate(bps):
    return f"{bps / 1e12:.2f} TB/s" if bps >= 1e12 else f"{bps / 1e9:.1f} GB/s"


def _pct(value):
    return _fmt(value and 100 * value, ".0f")


def _telemetry_text(tel):
    if not tel or "summary" not in tel:
        return f"not recorded ({(tel or {}).get('error')})"
    summ = tel["summary"]

    def field(name, unit):
        v = summ.get(name)
        return f"{v['median']:.0f} {unit} (min {v['min']:.0f}, max {v['max']:.0f})" if v else "n/a"
    reasons = ", ".join(f"{k}: {v}" for k, v in tel.get("event_reasons", {}).items())
    return (f"{tel['sample_count']} samples every {tel['sample_ms']} ms: SM clock {field('clocks.sm', 'MHz')} of max "
            f"{field('clocks.max.sm', 'MHz')}; memory clock {field('clocks.mem', 'MHz')}; power "
            f"{field('power.draw', 'W')} of limit {field('power.limit', 'W')}; {field('temperature.gpu', '°C')}"
            + (f"; clock event reasons (samples): {reasons}" if reasons else ""))


def _gpu_state_text(state) -> str:
    if not state or "clocks.sm" not in state:
        return "–"
    power = state.get("power.draw")
    return f"{state['clocks.sm']:.0f} / {power:.0f}" if power is not None else f"{state['clocks.sm']:.0f} / –"


def markdown(results) -> str:
    env, ceil, peers, method = results["env"], results["ceilings"], results["peers"], results["method"]
    pkg = env["package"]
    pkg_text = f"{pkg.get('name')} v{pkg.get('version')} id {pkg.get('id')} ({pkg.get('variant')})" \
        if pkg.get("loaded") else f"NOT LOADED: {pkg.get('error')}"
    gpu = env.get("threads") is None
    lines = [f"# gemm benchmark on {env['device']}", "",
             f"torch {env['torch']}, CUDA {env['cuda']}, HIP {env['hip']}, driver {env.get('driver')}, "
             f"triton {env['triton']}; package: {pkg_text}; git {str(env.get('git_commit'))[:12]}; {env['date_utc']}",
             "",
             f"- command: `{results.get('command')}` ({_fmt(results.get('elapsed_s'), '.0f')} s)",
             f"- call time: {method['timing']}; seed {method['seed']}, {method['fp8_dtype']}"]
    if gpu:
        lines.append(f"- kernel time: {method['kernel_timing']}")
        lines.append(f"- GPU state during the run (nvidia-smi): {_telemetry_text(results.get('gpu_telemetry'))}")
        lines.append("- SM MHz / W: median SM clock and power of the nvidia-smi samples taken while the row was timed "
                     "(– where the row took less than the sampling period)")
    lines += [f"- check: {method['check']}",
              f"- layouts: {method['layouts']}",
              f"- ceilings: peak {ceil['peak_flops'] / 1e12:.3g} TFLOP/s ({ceil['peak_source']}), bandwidth "
              f"{_rate(ceil['peak_bandwidth_Bps'])} ({ceil['bandwidth_source']})"
              + (f"; measured per-tensor FP8 rate {ceil['fp8_tensor_rate_flops'] / 1e12:.3g} TFLOP/s"
                 if ceil.get("fp8_tensor_rate_flops") else "")
              + ". floor = max(2MNK/peak, (MK+NK+scales+out) bytes/bandwidth); % floor = floor / call time"]
    lines.append("- peers: " + "; ".join(
        f"`{name}` = {p['label']}" + (f" [challenge-layout timed call includes: {p['conversion']}]"
                                      if p["conversion"] != "none" else "")
        + (f" — UNAVAILABLE: {p['unavailable']}" if p["unavailable"] else "")
        for name, p in peers.items()))
    lines.append("- `ours ×` = peer time / our time (> 1: ours faster); WRONG rows failed the check and were not "
                 "timed; ERROR rows raised; UNSUPPORTED rows are shapes the peer cannot run. CV = stdev / mean of "
                 f"the iterations; `!` marks CV > {100 * method['noisy_cv']:.0f} %")
    noisy = noisy_rows(results)
    if noisy:
        lines.append(f"- **{len(noisy)} noisy rows** (CV > {100 * method['noisy_cv']:.0f} %): their ratios move "
                     "between runs by more than the p10–p90 intervals below, which only cover this run's noise")

    kernel_cols = " kernel µs | ours × (kernel) | SM MHz / W |" if gpu else ""
    for set_name in results["summary"]:
        lines += ["", f"## {set_name}", "",
                  "| shape | floor µs (bound) | peer | status | call µs | p10–p90 µs | CV % |" + kernel_cols
                  + " TFLOP/s | GB/s | % floor | ours × (call) | rel err | note |",
                  "|---|---|---|---|---:|---|---:|" + ("---:|---:|---:|" if gpu else "") + "---:|---:|---:|---:|---:|---|"]
        for row in (r for r in results["rows"] if r["set"] == set_name):
            t = row.get("timing") or {}
            spread = f"{t['p10_us']:.1f}–{t['p90_us']:.1f}" if t else "–"
            cv = f"{100 * t['cv']:.1f}{'!' if t['cv'] > method['noisy_cv'] else ''}" if t else "–"
            note = (row.get("error") or row.get("kernel_error") or _config_text(row.get("config")))
            note = note[:NOTE_CHARS].replace("|", "/")
            kernel = (f" {_fmt(_us(row, 'kernel_timing'), '.1f')} | {_fmt(row.get('ours_speedup_kernel'), '.2f')} |"
                      f" {_gpu_state_text(row.get('gpu_state'))} |" if gpu else "")
            lines.append(
                f"| {row['shape']} | {row['floor_us']:.1f} ({row['bound'][0]}) | {row['peer']} | {row['status']} | "
                f"{_fmt(t.get('median_us'), '.1f')} | {spread} | {cv} |{kernel} {_fmt(row.get('tflops'), '.3g')} | "
                f"{_fmt(row.get('gbps'), '.3g')} | {_pct(row.get('floor_fraction'))} | "
                f"{_fmt(row.get('ours_speedup'), '.2f')} | {_fmt(row.get('rel_err'), '.1e')} | {note} |")

    host = [r for r in results["rows"] if r.get("host_us") is not None]
    if host:
        lines += ["", "## Host time per call", "",
                  "Host clock over calls queued behind a GPU sleep (the device never makes the host wait): argument "
                  "checks, plan lookup, descriptor encoding, allocation and launch. Measured on each set's first shape.",
                  "", "| set | shape | peer | host µs | call µs | kernel µs |", "|---|---|---|---:|---:|---:|"]
        for r in host:
            lines.append(f"| {r['set']} | {r['shape']} | {r['peer']} | {r['host_us']:.1f} | "
                         f"{_fmt(_us(r, 'timing'), '.1f')} | {_fmt(_us(r, 'kernel_timing'), '.1f')} |")

    lines += bars.markdown(results)
    lines += ["", "## Summary (geomeans over the shapes where the row is OK)", "",
              f"`ours × (call)` with the p10–p90 of its bootstrap over this run's iterations; `< {BELOW}` counts shapes "
              "where the peer is more than 5 % faster; worst = the shape with the lowest `ours ×`.", "",
              "| set | peer | OK | WRONG | ERROR | N/A | geomean call µs |" + (" geomean kernel µs |" if gpu else "")
              + " geomean % floor | ours × (call) | p10–p90 |" + (" ours × (kernel) |" if gpu else "")
              + f" < {BELOW} (call{'/kernel' if gpu else ''}) | worst (call) |",
              "|---|---|---:|---:|---:|---:|---:|" + ("---:|" if gpu else "") + "---:|---:|---|"
              + ("---:|" if gpu else "") + "---:|---|"]
    for set_name, summ in results["summary"].items():
        for name, s in summ["peers"].items():
            spread = f"{s['ours_speedup_p10']:.2f}–{s['ours_speedup_p90']:.2f}" if s.get("ours_speedup_p10") else "–"
            worst = f"{s['worst'][1]:.2f} at {s['worst'][0]}" if s.get("worst") else "–"
            below = f"{s['below']}/{s['below_kernel']}" if gpu else f"{s['below']}"
            lines.append(f"| {set_name} | {name} | {s['OK']} | {s['WRONG']} | {s['ERROR']} | {s['UNSUPPORTED']} | "
                         f"{_fmt(s['geomean_us'], '.1f')} |" + (f" {_fmt(s['geomean_kernel_us'], '.1f')} |" if gpu else "")
                         + f" {_pct(s['geomean_floor_fraction'])} | {_fmt(s['geomean_ours_speedup'], '.2f')} | "
                         f"{spread} |" + (f" {_fmt(s['geomean_ours_speedup_kernel'], '.2f')} |" if gpu else "")
                         + f" {below if name != OURS else '–'} | {worst} |")
        lines.append(f"| {set_name} | **ours vs best block-scaled peer** | | | | | floor "
                     f"{_fmt(summ['geomean_floor_us'], '.1f')} |" + (" |" if gpu else "")
                     + f" | **{_fmt(summ['geomean_speedup_vs_best'], '.2f')}** | |"
                     + (f" **{_fmt(summ['geomean_speedup_vs_best_kernel'], '.2f')}** |" if gpu else "") + " | |")
    return "\n".join(lines) + "\n"


def plot(results, path):
    """Speedup of ours over the best block-scaled peer (call time bars, kernel time markers) and fraction of
    the floor, per shape; every value is drawn, none clipped.
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

    nan = float("nan")
    speed = [s["speedup_vs_best"] or nan for s in shapes]
    speed_kernel = [s.get("speedup_vs_best_kernel") or nan for s in shapes]
    ax1.bar(x, speed, color=[colors[s["set"]] for s in shapes])
    if any(v == v for v in speed_kernel):
        ax1.plot(x, speed_kernel, "k.", label="kernel time")
        ax1.legend(fontsize=8, loc="upper right")
    ax1.axhline(1.0, color="black", linewidth=0.8)
    ax1.set_yscale("log")
    ax1.set_ylabel("ours speedup vs best\nblock-scaled peer (×)")
    for i, s in enumerate(shapes):
        if s["best_peer"] and s["speedup_vs_best"]:
            ax1.annotate(f"{s['speedup_vs_best']:.2f} {s['best_peer']}", (i, s["speedup_vs_best"]), ha="center",
                         va="bottom", fontsize=6, rotation=90, xytext=(0, 2), textcoords="offset points")
    shown = [v for v in speed + speed_kernel if v == v]
    if shown:  # log axis with room above the tallest bar for its label
        ax1.set_ylim(min(0.5, min(shown) / 1.5), max(2.0, max(shown) * 3))
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[n]) for n in sets]
    ax1.add_artist(ax1.legend(handles, sets, fontsize=8, loc="upper left"))
    ax1.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    ax1.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax1.set_title(f"gemm vs peers on {results['env']['device']} ({results['method']['timing_short']})", fontsize=10)

    ours = [100 * (s["ours_floor_fraction"] or nan) for s in shapes]
    best = [100 * (s["best_peer_floor_fraction"] or nan) for s in shapes]
    ax2.bar(x, ours, color=[colors[s["set"]] for s in shapes], label="ours")
    ax2.plot(x, best, "kx", label="best block-scaled peer")
    ax2.axhline(100, color="black", linewidth=0.8)
    ax2.set_ylabel("% of roofline floor\n(floor / call time)")
    ax2.set_ylim(0, max([100] + [v for v in ours + best if v == v]) * 1.1)
    ax2.legend(fontsize=8, loc="upper left")
    ax2.set_xticks(list(x))
    ax2.set_xticklabels([s["shape"] for s in shapes], rotation=90, fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return None
