"""Every shape suite of the project, in one place: the benchmark's named sets, the suites the CUDA tuner
and the ROCm model report on, and the CUDA test shapes. Plain data (no torch), importable anywhere."""
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


def mnk_grid(ms, nks):
    """(M, N, K) triples, M outermost."""
    return [(m, n, k) for m in ms for (n, k) in nks]


def _shapes(ms, nks, layout=LAYOUT_KMAJOR):
    return [Shape(m, n, k, layout) for m, n, k in mnk_grid(ms, nks)]


# DeepSeek-V3 linear layers (TP1), as (N, K): fused q_a + kv_a, kv_a, q_b, kv_b, o_proj, and two MLP-sized ones.
DEEPSEEK_V3_NK = [(2112, 7168), (576, 7168), (24576, 1536), (32768, 512), (7168, 16384), (4096, 7168), (7168, 2048)]
DEEPSEEK_V3_DECODE_MS = (1, 16, 64, 128)
DEEPSEEK_V3_PREFILL_MS = (512, 4096)
# The three sizes the CUDA cost model was fitted on and the ROCm model reports (decode, small batch, prefill).
DEEPSEEK_V3_FIT_MS = (64, 128, 4096)

# Dense GEMMs of other open models (from their config.json, TP1):
# Qwen3-235B-A22B: hidden 4096, 64 query / 4 KV heads of 128: fused QKV and o_proj (its MLPs are all experts).
QWEN3_NK = [(9216, 4096), (4096, 8192)]
# GLM-4.5: hidden 5120, 96 query / 8 KV heads of 128, dense MLP 12288 (first 3 layers): QKV, o_proj = down, gate_up.
GLM45_NK = [(14336, 5120), (5120, 12288), (24576, 5120)]
# Kimi-K2: DeepSeek-V3's architecture with 64 heads, dense MLP 18432 (first layer): q_b, kv_b, o_proj, gate_up, down.
KIMI_K2_NK = [(12288, 1536), (16384, 512), (7168, 8192), (36864, 7168), (7168, 18432)]
MODELS_NK = QWEN3_NK + GLM45_NK + KIMI_K2_NK
MODELS_DECODE_MS = (16, 128)
MODELS_PREFILL_MS = (4096,)

# AMD Developer Challenge 2025 "fp8-mm" benchmark shapes.
CHALLENGE_NK = [(1536, 7168), (3072, 1536), (576, 7168), (7168, 256), (7168, 2048), (4608, 7168), (7168, 2304),
                (512, 7168), (4096, 512)]
CHALLENGE_MS = (1024, 6144)

# Suites of the CUDA tuner (scripts/cuda/tune.py) and the ROCm model (benchmarks/rocm_model.py), as triples.
DEEPSEEK_V3 = mnk_grid(DEEPSEEK_V3_FIT_MS, DEEPSEEK_V3_NK)
CHALLENGE = mnk_grid(CHALLENGE_MS, CHALLENGE_NK)
LARGE_SQUARE = [(8192, 8192, 8192), (6144, 7168, 4608)]

# Small enough for 2 CPU cores in about a minute; mixes decode-like M, ragged N (576) and ragged K (1000).
CPU_SHAPES = [Shape(16, 576, 7168), Shape(64, 2112, 7168), Shape(128, 1536, 1536), Shape(256, 512, 7168),
              Shape(512, 4096, 512), Shape(100, 700, 1000)]

SHAPE_SETS = {
    "decode": _shapes(DEEPSEEK_V3_DECODE_MS, DEEPSEEK_V3_NK) + _shapes(MODELS_DECODE_MS, MODELS_NK),
    "prefill": _shapes(DEEPSEEK_V3_PREFILL_MS, DEEPSEEK_V3_NK) + _shapes(MODELS_PREFILL_MS, MODELS_NK),
    "challenge": _shapes(CHALLENGE_MS, CHALLENGE_NK),
    "challenge-layout": _shapes(CHALLENGE_MS, CHALLENGE_NK, LAYOUT_CHALLENGE),
    "deepseek-v3": _shapes(DEEPSEEK_V3_DECODE_MS + DEEPSEEK_V3_PREFILL_MS, DEEPSEEK_V3_NK),
    "models": _shapes(MODELS_DECODE_MS + MODELS_PREFILL_MS, MODELS_NK),
    "cpu": CPU_SHAPES,
}
DEFAULT_SETS = {"cuda": ["decode", "prefill", "challenge", "challenge-layout"], "cpu": ["cpu"]}

# CUDA sm_90a test shapes (tests/cuda). CONFIG_SHAPES must make the planner pick every row of the tile
# table at least once (test_cuda_heuristics.py checks that on the CPU), stream-K plans with and without
# whole waves, and K splits over clusters, so the GPU tests run every kernel instantiation and schedule
# the package ships. Values are (m, n, k) for an H200 (132 SMs).
H200_SMS = 132

CONFIG_SHAPES = [
    (64, 2112, 7168),  # K split over 2-CTA clusters
    (64, 576, 7168),  # K split over 4-CTA clusters
    (64, 24576, 1536),
    (64, 32768, 512),
    (128, 2112, 7168),
    (128, 7168, 2048),
    (128, 4096, 7168),
    (128, 24576, 1536),
    (1024, 1536, 7168),
    (1024, 4096, 512),
    (512, 2112, 7168),  # 128x64: 132 tiles, one wave
    (4096, 2112, 7168),
    (4096, 7168, 2048),
    (6144, 4096, 512),
    (1024, 576, 7168),
    (4096, 7168, 16384),  # whole waves of 192x128 tiles plus a stream-K region of 44 tiles
    (6144, 576, 7168),  # 256x128 (two slabs a warpgroup): 120 tiles, one wave
    (4096, 4096, 7168),  # 256x128: 512 tiles, 3.9 waves
    (2048, 5120, 7168),  # 128x128 tiles in 2-CTA clusters (A multicast)
]

# Ragged shapes: M, N, K not multiples of the tiles or of 128, K % 16 != 0 (repack path).
RAGGED_SHAPES = [
    (1, 8, 16),
    (7, 192, 7168),
    (83, 576, 3884),
    (129, 320, 1152),
    (300, 2112, 1000),
    (1030, 8224, 576),
    # Long K: paired loads (two K blocks a TMA instruction) up to the last whole K block, then the partial
    # one alone; ragged M and N in the 3-D boxes. 64x64 tiles, and the 128x128 paired twin with and
    # without the K-major repack (K % 16 != 0).
    (120, 3000, 7056),
    (1030, 1500, 7056),
    (900, 1536, 7100),
]

# Shapes whose plans use 128+-row tiles, whose A scales TMA loads in place if M-major with 16-byte
# aligned columns, and otherwise: gathered by the scale warp (few K blocks a CTA), or transposed by a
# kernel before the GEMM. test_cuda_heuristics.py checks that the plans stay so.
SCALE_PATH_SHAPES = {"gathered": (1024, 1536, 1152), "transposed": (1024, 1536, 7168)}


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
