"""GPU clocks, power and temperature sampled by nvidia-smi in the background while the benchmark runs, so
that every result says what state the card was in (a card at its power cap runs below its boost clock)."""
import statistics
import subprocess

import torch

SAMPLE_MS = 500
FIELDS = ["clocks.sm", "clocks.mem", "clocks.max.sm", "power.draw", "power.limit", "temperature.gpu",
          "clocks_event_reasons.active"]
NUMERIC = FIELDS[:-1]


def _query(fields, target):
    return ["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"] + target


class GpuTelemetry:
    """start() launches `nvidia-smi -lms`; stop() ends it and returns the samples and their summary."""

    def __init__(self, device: torch.device):
        self.device, self.proc, self.fields, self.target, self.error = device, None, FIELDS, [], None

    def start(self):
        if self.device.type != "cuda" or torch.version.hip:
            self.error = "no NVIDIA GPU"
            return
        uuid = getattr(torch.cuda.get_device_properties(self.device), "uuid", None)
        # The benchmarked card by its UUID, else every card nvidia-smi sees; older drivers lack
        # clocks_event_reasons: then the numeric fields alone.
        tries = [(target, fields) for target in ([f"--id=GPU-{uuid}"] if uuid else [], []) for fields in (FIELDS, NUMERIC)]
        try:
            for self.target, self.fields in tries:
                probe = subprocess.run(_query(self.fields, self.target), capture_output=True, text=True, timeout=20)
                if probe.returncode == 0:
                    break
            else:
                self.error = f"nvidia-smi failed: {(probe.stdout + probe.stderr).strip()[:200]}"
                return
            self.proc = subprocess.Popen(_query(self.fields, self.target) + [f"-lms={SAMPLE_MS}"],
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        except (OSError, subprocess.SubprocessError) as exc:
            self.error = f"nvidia-smi not usable: {exc}"

    def stop(self) -> dict:
        if self.proc is None:
            return {"error": self.error}
        self.proc.terminate()
        out, _ = self.proc.communicate(timeout=20)
        return summarize(self.fields, out)


def summarize(fields, text: str) -> dict:
    """nvidia-smi CSV lines -> {"fields", "samples", "summary": {field: {min, median, max}}, "event_reasons"}."""
    samples = [[v.strip() for v in line.split(",")] for line in text.splitlines() if line.count(",") == len(fields) - 1]
    summary = {}
    for i, name in enumerate(fields):
        if name not in NUMERIC:
            continue
        values = []
        for sample in samples:
            try:
                values.append(float(sample[i]))
            except ValueError:  # "[N/A]"
                pass
        if values:
            summary[name] = {"min": min(values), "median": statistics.median(values), "max": max(values)}
    reasons = {}
    if "clocks_event_reasons.active" in fields:
        i = fields.index("clocks_event_reasons.active")
        for sample in samples:
            reasons[sample[i]] = reasons.get(sample[i], 0) + 1
    return {"fields": fields, "sample_ms": SAMPLE_MS, "samples": samples, "summary": summary, "event_reasons": reasons}
