"""Named shape sets: each entry is (M, N, K) plus the operand layout the callers hand over."""
from dataclasses import dataclass

# "kmajor": the NT convention (A [M,K], B [N,K] K-contiguous; scales row-major); every peer
#           gets its inputs in the layout it prefers, untimed (a quantizer can emit any layout).
# "challenge": the AMD Developer Challenge 2025 inputs, all four operands transposed views;
#           each caller's conversion to the layout it needs is inside its timed call.
LAYOUT_KMAJOR = "kmajor"
LAYOUT_CHALLENGE = "challenge"


@dataclass(frozen=True)
class Shape:
    m: int
    n: int
    k: int
    layout: str = LAYOUT_KMAJOR

    @property
    def label(self) -> str:
        suffix = "" if self.layout == LAYOUT_KMAJOR else " T"
        return f"{self.m},{self.n},{self.k}{suffix}"


def _grid(ms, nks, layout=LAYOUT_KMAJOR):
    return [Shape(m, n, k, layout) for m in ms for (n, k) in nks]


# DeepSeek-V3 linear layers (TP1): decode (64), small batch (128), prefill (4096).
DEEPSEEK_V3_NK = [(2112, 7168), (576, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048)]
# AMD Developer Challenge 2025 "fp8-mm" benchmark shapes.
CHALLENGE_NK = [(1536, 7168), (3072, 1536), (576, 7168), (7168, 256), (7168, 2048), (4608, 7168), (7168, 2304),
                (512, 7168), (4096, 512)]
# Small enough for 2 CPU cores in about a minute; mixes decode-like M, ragged N (576) and ragged K (1000).
CPU_SHAPES = [Shape(16, 576, 7168), Shape(64, 2112, 7168), Shape(128, 1536, 1536), Shape(256, 512, 7168),
              Shape(512, 4096, 512), Shape(100, 700, 1000)]

SHAPE_SETS = {
    "deepseek-v3": _grid([64, 128, 4096], DEEPSEEK_V3_NK),
    "challenge": _grid([1024, 6144], CHALLENGE_NK),
    "challenge-layout": _grid([1024, 6144], CHALLENGE_NK, LAYOUT_CHALLENGE),
    "cpu": CPU_SHAPES,
}
DEFAULT_SETS = {"cuda": ["deepseek-v3", "challenge", "challenge-layout"], "cpu": ["cpu"]}


def parse_shapes(tokens):
    """Named sets and/or 'M,N,K' triples (append ',T' for the challenge layout) -> {set name: [Shape]}."""
    sets = {}
    for tok in tokens:
        if tok in SHAPE_SETS:
            sets[tok] = SHAPE_SETS[tok]
            continue
        parts = tok.split(",")
        layout = LAYOUT_KMAJOR
        if len(parts) == 4 and parts[3].upper() == "T":
            layout, parts = LAYOUT_CHALLENGE, parts[:3]
        if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise ValueError(f"--shapes: expected a set name ({', '.join(SHAPE_SETS)}) or M,N,K[,T] with "
                             f"positive integers, got {tok!r}")
        sets.setdefault("custom", []).append(Shape(*map(int, parts), layout))
    return sets
