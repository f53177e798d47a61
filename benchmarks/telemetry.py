"""GPU clocks, power and temperature sampled by nvidia-smi in the background while the benchmark runs, so
that every result says what state the card was in (a card at its power cap runs below its boost clock),
for the whole run and for each row timed long enough to be sampled."""
import bisect
import statistics
import subprocess
import tempfile
from datetime import datetime

import torch

SAMPLE_MS = 50
NUMERIC = ["clocks.sm", "clocks.mem", "clocks.max.sm", "power.draw", "power.limit", "temperature.gpu"]
# nvidia-smi's timestamp is the host's local time ("2026/12/06 18:05:36.123"), which places each sample in
# the rows timed while it was taken.
TIMESTAMP = "timestamp"
TIMESTAMP_FORMAT = "%Y/%m/%d %H:%M:%S.%f"
FIELDS = [TIMESTAMP] + NUMERIC + ["clocks_event_reasons.active"]


def _query(fields, target):
    return ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"] + target


class GpuTelemetry:
    """start() launches `nvidia-smi -lms`; stop() ends it and returns the samples and their summary."""

    def __init__(self, device: torch.device):
        self.device, self.proc, self.out, self.fields, self.target, self.error = device, None, None, FIELDS, [], None

    def start(self):
        if self.device.type != "cuda" or torch.version.hip:
            self.error = "no NVIDIA GPU"
            return
        uuid = getattr(torch.cuda.get_device_properties(self.device), "uuid", None)
        # The benchmarked card by its UUID, else every card nvidia-smi sees; older drivers lack
        # clocks_event_reasons: then the timestamp and the numeric fields alone.
        tries = [(target, fields) for target in ([f"--id=GPU-{uuid}"] if uuid else [], [])
                 for fields in (FIELDS, [TIMESTAMP] + NUMERIC)]
        try:
            for self.target, self.fields in tries:
                probe = subprocess.run(_query(self.fields, self.target), capture_output=True, text=True, timeout=20)
                if probe.returncode == 0:
                    break
            else:
                self.error = f"nvidia-smi failed: {(probe.stdout + probe.stderr).strip()[:200]}"
                return
            # A file, not a pipe: a long run's samples would fill a pipe and stall the sampler.
            self.out = tempfile.TemporaryFile("w+")
            self.proc = subprocess.Popen(_query(self.fields, self.target) + [f"-lms={SAMPLE_MS}"],
                                         stdout=self.out, stderr=subprocess.DEVNULL, text=True)
        except (OSError, subprocess.SubprocessError) as exc:
            self.error = f"nvidia-smi not usable: {exc}"

    def stop(self) -> dict:
        if self.proc is None:
            return {"error": self.error}
        self.proc.terminate()
        self.proc.wait(timeout=20)
        self.out.seek(0)
        text = self.out.read()
        self.out.close()
        return summarize(self.fields, text)


def summarize(fields, text: str) -> dict:
    """nvidia-smi CSV lines -> {"fields", "samples", "sample_count", "summary": {field: {min, median, max}},
    "event_reasons"}."""
    samples = [[v.strip() for v in line.split(",")] for line in text.splitlines() if line.count(",") == len(fields) - 1]
    summary = {}
    for i, name in enumerate(fields):
        values = _numbers(samples, i) if name in NUMERIC else []
        if values:
            summary[name] = {"min": min(values), "median": statistics.median(values), "max": max(values)}
    reasons = {}
    if "clocks_event_reasons.active" in fields:
        i = fields.index("clocks_event_reasons.active")
        for sample in samples:
            reasons[sample[i]] = reasons.get(sample[i], 0) + 1
    return {"fields": fields, "sample_ms": SAMPLE_MS, "samples": samples, "sample_count": len(samples),
            "summary": summary, "event_reasons": reasons}


def _numbers(samples, i) -> list[float]:
    values = []
    for sample in samples:
        try:
            values.append(float(sample[i]))
        except ValueError:  # "[N/A]"
            pass
    return values


def _epoch(stamp: str):
    try:
        return datetime.strptime(stamp, TIMESTAMP_FORMAT).timestamp()
    except ValueError:
        return None


def attach_row_states(rows, telemetry: dict):
    """Each row timed over `timed_s` (host epoch seconds) gets `gpu_state`: the median SM clock and power
    of the samples taken inside that window, and their count. Rows shorter than the sampling period, or
    a query without timestamps, get none."""
    fields = telemetry.get("fields") or []
    if TIMESTAMP not in fields:
        return
    it = fields.index(TIMESTAMP)
    # Each timestamp parsed once and the samples sorted by it: a window is then two bisections.
    stamped = sorted((t, sample) for sample in telemetry.get("samples", []) if (t := _epoch(sample[it])) is not None)
    times = [t for t, _ in stamped]
    for row in rows:
        if "timed_s" not in row:
            continue
        t0, t1 = row["timed_s"]
        inside = [sample for _, sample in stamped[bisect.bisect_left(times, t0):bisect.bisect_right(times, t1)]]
        if not inside:
            continue
        state = {"samples": len(inside)}
        for name in ("clocks.sm", "power.draw"):
            values = _numbers(inside, fields.index(name)) if name in fields else []
            if values:
                state[name] = statistics.median(values)
        row["gpu_state"] = state
