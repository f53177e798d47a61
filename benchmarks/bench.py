"""Side-by-side benchmark: python3 -m benchmarks.bench [--shapes ...] [--peers ...] [--out-dir DIR].

Every (shape, peer) row is first checked against the fp32 dequantized reference on fresh random data;
a wrong row is reported WRONG with its error and not timed. Results go to bench_runs/<device>-<time>/
unless --out-dir, --json or --plot say otherwise. See benchmarks/README.md for the method."""
import argparse
import datetime
import json
import os
import platform
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch

from . import report
from .peers import REPO_ROOT, select_peers
from .problem import check, make_problem
from .shapes import KIND_GEMM
from .shapes import DEFAULT_SETS, SHAPE_SETS, SUITES, parse_shapes
from .telemetry import GpuTelemetry, attach_row_states
from .timing import NOISY_CV, Timer, measure_ceilings

DEFAULT_ITERS = {"cuda": 50, "cpu": 30}
DEFAULT_WARMUP = {"cuda": 10, "cpu": 3}
STATUS_OK, STATUS_WRONG, STATUS_ERROR, STATUS_UNSUPPORTED = "OK", "WRONG", "ERROR", "UNSUPPORTED"
ERROR_CHARS = 400
RUNS_DIR = "bench_runs"  # ignored by git


def _backend(device: torch.device) -> str:
    if device.type == "cpu":
        return "cpu"
    return "rocm" if torch.version.hip else "cuda"


def _fp8_dtype(device: torch.device):
    # gfx942 (MI300) computes e4m3fnuz; every other device here takes OCP e4m3fn.
    if device.type == "cuda" and torch.version.hip:
        arch = torch.cuda.get_device_properties(device).gcnArchName.split(":")[0]
        if arch.startswith("gfx94"):
            return torch.float8_e4m3fnuz
    return torch.float8_e4m3fn


class Progress:
    """tqdm when importable, else a one-line counter on stderr."""

    def __init__(self, total: int, quiet: bool):
        self.total, self.done, self.quiet, self.bar = total, 0, quiet, None
        if not quiet:
            try:
                from tqdm import tqdm
                self.bar = tqdm(total=total, file=sys.stderr, unit="row", dynamic_ncols=True)
            except ImportError:
                pass

    def step(self, text: str):
        self.done += 1
        if self.quiet:
            return
        if self.bar is not None:
            self.bar.set_postfix_str(text, refresh=False)
            self.bar.update(1)
        else:
            print(f"\r[{self.done}/{self.total}] {text:<60}", end="", file=sys.stderr, flush=True)

    def close(self):
        if self.bar is not None:
            self.bar.close()
        elif not self.quiet:
            print(file=sys.stderr)


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".replace("\n", " ")[:ERROR_CHARS]


def checked_row(peer, problem, timer) -> tuple[dict, object]:
    """Prepare and check one peer on one problem: its row so far, and its call where the output is correct
    (None otherwise: the row says why)."""
    row = {"peer": peer.name, "status": STATUS_ERROR}
    reason = peer.unsupported(problem.shape)
    if reason:
        row["status"], row["error"] = STATUS_UNSUPPORTED, reason
        return row, None
    try:
        call, info = peer.prepare(problem, timer, check)
        row.update(info)
        result = check(peer.checked(call(), problem), peer.reference(problem))
    except Exception as exc:
        row["error"] = _short(exc)
        return row, None
    row["check"] = result.as_dict()
    row["rel_err"] = result.rel_err
    if not result.ok:
        row["status"], row["error"] = STATUS_WRONG, result.reason
        return row, None
    return row, call


def checked_rows(peers, set_name, shape, problem, timer) -> tuple[dict, dict]:
    """Every peer of one problem prepared and checked (checked_row): peer name -> row, and peer name -> call
    for the correct ones. The reference is dropped once all are checked: the peers' calls stay alive
    together while they are timed, and a grouped reference is GBs."""
    rows, calls = {}, {}
    for peer in peers:
        row, call = checked_row(peer, problem, timer)
        rows[peer.name] = {"set": set_name, "shape": shape.label, "kind": shape.kind, "m": shape.m, "n": shape.n,
                           "k": shape.k, "layout": shape.layout, "flops": problem.flops, "bytes": problem.bytes,
                           **shape_info(shape), **row}
        if call is not None:
            calls[peer.name] = call
    problem.drop_reference()
    return rows, calls


def time_rows(rows: dict, calls: dict, timer, rng, host_time=False) -> None:
    """Times the checked peers of one problem side by side (timing.py): call time, and on a GPU kernel time
    and (with host_time) the host's share of a call, into their rows (peer name -> row, call)."""
    started = time.time()
    for name, stats in timer.time_side_by_side(calls, rng).items():
        if isinstance(stats, Exception):
            rows[name]["error"] = _short(stats)
        else:
            rows[name]["timing"], rows[name]["status"] = stats.as_dict(), STATUS_OK
    timed = {name: call for name, call in calls.items() if rows[name]["status"] == STATUS_OK}
    if not timer.is_gpu:
        return
    for name, stats in timer.kernel_time_side_by_side(timed, rng).items():
        if isinstance(stats, Exception):
            rows[name]["kernel_error"] = _short(stats)
        else:
            rows[name]["kernel_timing"] = stats.as_dict()
    for name, call in timed.items():
        rows[name]["timed_s"] = [started, time.time()]  # host epoch seconds: the GPU telemetry's samples
        if host_time:
            rows[name]["host_us"] = timer.host_time(call)


def _runs(peer, shape) -> bool:
    return peer.kind == shape.kind and peer.applies(shape)


def shape_info(shape) -> dict:
    """Grouped rows: the expert count, top-k and the routing's load statistics."""
    if not hasattr(shape, "experts"):
        return {}
    from .grouped import route, routing_stats
    return {"experts": shape.experts, "tokens": shape.tokens, "topk": shape.topk,
            "routing": routing_stats(route(shape))}


def peer_entries(peers, unavailable, kinds) -> dict:
    """One entry per peer name over the kinds this run has rows of: labels joined, unavailable reasons kept."""
    entries = {}
    for p in (p for p in peers if p.kind in kinds):
        entry = entries.setdefault(p.name, {"label": p.label, "block_scaled": p.block_scaled,
                                            "conversion": p.conversion, "unavailable": None, "kinds": []})
        if p.label not in entry["label"].split(" / "):
            entry["label"] += f" / {p.label}"
        entry["kinds"].append(p.kind)
        reason = unavailable[id(p)]
        if reason:
            text = f"{p.kind}: {reason}"
            entry["unavailable"] = f"{entry['unavailable']}; {text}" if entry["unavailable"] else text
    return entries


def environment(device: torch.device, kernel_info: dict) -> dict:
    env = {"torch": torch.__version__, "cuda": torch.version.cuda, "hip": torch.version.hip,
           "python": platform.python_version(), "host": platform.node(), "package": kernel_info,
           "date_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}
    try:
        import triton
        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
    env["device_type"] = device.type
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        env["device"] = props.name
        env["multiprocessors"] = props.multi_processor_count
        env["driver"] = _driver_version()
    else:
        env["device"] = _cpu_name()
        env["threads"] = torch.get_num_threads()
    # GEMM_GIT_COMMIT names the commit where the checkout's git metadata does not (a copy of the tree).
    env["git_commit"] = os.environ.get("GEMM_GIT_COMMIT")
    if not env["git_commit"]:
        try:
            env["git_commit"] = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True,
                                               text=True, timeout=10).stdout.strip() or None
        except (OSError, subprocess.SubprocessError):
            env["git_commit"] = None
    return env


def _driver_version():
    for cmd in (["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                ["rocm-smi", "--showdriverversion", "--csv"]):
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.SubprocessError):
            continue
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip().splitlines()[-1]
    return None


def _cpu_name():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _kernel_info(peers) -> dict:
    """Package id/version from the loaded variant's metadata.json (None when our kernel is not loaded)."""
    ours = next((p for p in peers if p.name == "ours"), None)
    kernel = ours.kernel() if ours is not None else None
    if kernel is None:
        return {"loaded": False, "error": getattr(ours, "_load_error", None)}
    info = {"loaded": True, "module": kernel.__name__}
    meta = Path(getattr(kernel, "__file__", "") or "").parent / "metadata.json"
    if meta.is_file():
        data = json.loads(meta.read_text())
        info.update({k: data.get(k) for k in ("name", "id", "version", "backend")})
        info["variant"] = meta.parent.name
    return info


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python3 -m benchmarks.bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", nargs="+", metavar="SET|M,N,K[,T]",
                    help=f"named sets ({', '.join(SHAPE_SETS)}) or M,N,K triples (',T' = challenge layout); "
                         "default: the device's default sets")
    ap.add_argument("--suite", choices=list(SUITES), nargs="+",
                    help="the default sets of these suites: gemm (FP8 GEMM), linear (bf16 input, "
                         "quantization in the call), grouped (MoE experts, contiguous and masked); default: all")
    ap.add_argument("--peers", nargs="+", help="subset of peers (names or a comma list); default: all for the device")
    ap.add_argument("--warm", action="store_true", help="warm L2: no cache flush between iterations")
    ap.add_argument("--e2e", action="store_true", help="host clock around call + synchronize (launch overhead in)")
    ap.add_argument("--iters", type=int, help="timed iterations per row (default 50 on GPU, 30 on CPU)")
    ap.add_argument("--warmup", type=int, help="untimed warm-up calls per row")
    ap.add_argument("--seed", type=int, help="base seed of the random inputs (default: fresh, recorded in the JSON)")
    ap.add_argument("--device", help="cuda, cuda:N or cpu (default: cuda when available)")
    ap.add_argument("--out-dir", help=f"write results.json, table.md and plot.png here (default: "
                                      f"{RUNS_DIR}/<device>-<time>/ unless --json or --plot is given)")
    ap.add_argument("--json", help="write the raw results JSON here")
    ap.add_argument("--plot", help="write the PNG plot here")
    ap.add_argument("--quiet", action="store_true", help="no progress bar")
    args = ap.parse_args(argv)
    if args.iters is not None and args.iters < 1:
        ap.error(f"--iters must be >= 1, got {args.iters}")
    if args.peers:
        args.peers = [n for tok in args.peers for n in tok.split(",") if n]
    return args


def default_out_dir(device: torch.device, env: dict) -> Path:
    """bench_runs/<device>-<UTC time>/ in the repository (an ignored folder), e.g. nvidia-h200-20261206-101500."""
    name = "cpu" if device.type == "cpu" else env["device"].lower()
    slug = "-".join("".join(c if c.isalnum() else " " for c in name).split())
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    return REPO_ROOT / RUNS_DIR / f"{slug}-{stamp}"


def _interrupt(signum, frame):
    raise KeyboardInterrupt


# A list of numbers, one per line as json.dumps(indent=...) writes it.
TIMING_KEYS = ("timing", "kernel_timing")
_NUMBER_LIST = re.compile(r"\[\n\s*(-?[0-9][0-9.eE+-]*(?:,\n\s*-?[0-9][0-9.eE+-]*)*)\n\s*\]")


def _significant(value, digits=5):
    """`value` with every float rounded to `digits` significant digits (timings are not more precise)."""
    if isinstance(value, float):
        return float(f"{value:.{digits}g}")
    if isinstance(value, dict):
        return {k: _significant(v, digits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_significant(v, digits) for v in value]
    return value


def _without_samples(results: dict) -> dict:
    """The rows' timings without their per-iteration samples, which the summary's bootstrap has used."""
    rows = [{key: {k: v for k, v in value.items() if k != "samples_us"} if key in TIMING_KEYS else value
             for key, value in row.items()} for row in results["rows"]]
    return {**results, "rows": rows}


def results_json(results: dict) -> str:
    """The run as indented JSON, floats to five significant digits, number lists on one line each and no
    per-iteration samples: a curated run stays readable and small enough to commit."""
    text = json.dumps(_significant(_without_samples(results)), indent=1, default=str)
    return _NUMBER_LIST.sub(lambda m: "[" + ", ".join(v.strip() for v in m.group(1).split(",")) + "]", text)


def main(argv=None, extra_peers=()):
    """Runs the benchmark; returns the results dict. `extra_peers`: Peer instances to add (tests use it)."""
    args = parse_args(argv)
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda":
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(device)
    backend = _backend(device)
    kind = "cpu" if device.type == "cpu" else "cuda"
    # The reference is an fp32 matmul: no TF32.
    torch.backends.cuda.matmul.allow_tf32 = False
    if args.shapes:
        sets = parse_shapes(args.shapes)
    else:
        names = [n for suite in args.suite for n in SUITES[suite][kind]] if args.suite else DEFAULT_SETS[kind]
        sets = {name: SHAPE_SETS[name] for name in names}
    peers = select_peers(backend, args.peers, extra_peers)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    timer = Timer(device, args.iters or DEFAULT_ITERS[kind],
                  DEFAULT_WARMUP[kind] if args.warmup is None else args.warmup, cold=not args.warm, e2e=args.e2e)
    fp8 = _fp8_dtype(device)
    order = random.Random(seed)  # the peers' turns in side-by-side timing

    unavailable = {id(p): p.unavailable(device) for p in peers}
    kinds = {s.kind for shapes in sets.values() for s in shapes}
    active = [p for p in peers if unavailable[id(p)] is None]
    started = time.perf_counter()
    telemetry = GpuTelemetry(device)
    telemetry.start()
    results = {
        "env": environment(device, _kernel_info(peers)),
        "command": " ".join(["python3 -m benchmarks.bench"] + list(sys.argv[1:] if argv is None else argv)),
        "method": {"timing": timer.method, "timing_short": timer.short, "kernel_timing": timer.kernel_method,
                   "seed": seed, "fp8_dtype": str(fp8).replace("torch.", ""), "check": report.CHECK_TEXT,
                   "layouts": report.LAYOUT_TEXT, "noisy_cv": NOISY_CV},
        "ceilings": measure_ceilings(device, fp8, timer),
        "peers": peer_entries(peers, unavailable, kinds),
        "rows": [],
    }
    # A run stopped early (Ctrl-C, or SIGTERM from a time limit) still reports the rows it finished, also
    # when it is stopped in a peer's setup (DeepGEMM's kernel compilation can take a minute).
    previous_handler = signal.signal(signal.SIGTERM, _interrupt)
    progress = Progress(sum(_runs(p, s) for shapes in sets.values() for s in shapes for p in active), args.quiet)
    index = 0
    try:
        for peer in active:
            line = peer.setup([s for shapes in sets.values() for s in shapes if _runs(peer, s)], device)
            if line:
                print(line, file=sys.stderr)
                results["peers"][peer.name]["setup"] = line
        for set_name, shapes in sets.items():
            for position, shape in enumerate(shapes):
                problem = make_problem(shape, device, fp8, seed + index)
                index += 1
                rows, calls = checked_rows([p for p in active if _runs(p, shape)], set_name, shape, problem, timer)
                # Host time barely depends on the shape: measured on each set's first shape only.
                time_rows(rows, calls, timer, order, host_time=position == 0)
                for row in rows.values():
                    results["rows"].append(row)
                    progress.step(f"{shape.label} {row['peer']} {row['status']}")
                del problem, calls
                if device.type == "cuda" and shape.kind != KIND_GEMM:
                    torch.cuda.empty_cache()  # experts' weights are GBs; the next shape's differ in size
    except KeyboardInterrupt:
        results["interrupted"] = True
        print(f"interrupted: reporting the {len(results['rows'])} rows finished", file=sys.stderr)
    finally:
        signal.signal(signal.SIGTERM, previous_handler)
    progress.close()
    results["gpu_telemetry"] = telemetry.stop()
    attach_row_states(results["rows"], results["gpu_telemetry"])
    # The raw 50 ms trace has served the rows' states; the results keep its summary, not the trace.
    results["gpu_telemetry"].pop("samples", None)
    results["elapsed_s"] = time.perf_counter() - started
    report.annotate(results)

    out_dir = Path(args.out_dir) if args.out_dir else None
    if out_dir is None and not (args.json or args.plot):
        out_dir = default_out_dir(device, results["env"])
    if out_dir:
        out_dir.mkdir(parents=True, exist_ok=True)
    json_path = args.json or (out_dir / "results.json" if out_dir else None)
    plot_path = args.plot or (out_dir / "plot.png" if out_dir else None)
    table = report.markdown(results)
    if json_path:
        Path(json_path).write_text(results_json(results))
    if out_dir:
        (out_dir / "table.md").write_text(table)
    if plot_path:
        message = report.plot(results, plot_path)
        if message:
            print(message, file=sys.stderr)
    for line in report.noisy_rows(results):
        print(f"warning: {line}", file=sys.stderr)
    print(table)
    written = [str(p) for p in (json_path, out_dir and out_dir / "table.md", plot_path) if p and Path(p).exists()]
    print(f"wrote {', '.join(written)} ({results['elapsed_s']:.0f} s)" if written else "wrote no files",
          file=sys.stderr)
    return results


if __name__ == "__main__":
    main()
