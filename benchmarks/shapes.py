"""Every shape suite of the project, in one place: the benchmark's named sets, the suites the CUDA tuner
and the ROCm model report on, and the CUDA test shapes. Plain data (no torch), importable anywhere."""
from dataclasses import dataclass

# "kmajor": the NT convention (A [M,K], B [N,K] K-contiguous; scales row-major); every peer
#           gets its inputs in the layout it prefers, untimed (a quantizer can emit any layout).
# "challenge": the AMD Developer Challenge 2025 inputs, all four operands transposed views;
#           each caller's conversion to the layout it needs is inside its timed call.
LAYOUT_KMAJOR = "kmajor"
LAYOUT_CHALLENGE = "challenge"

# What a row computes. gemm: FP8 A and B with their scales (the dense op). linear: bf16 activations times an
# FP8 weight, the activation quantization inside the timed call (transformers' matmul_2d). grouped: the rows
# of many experts sorted by expert, one segment each (contiguous layout). masked: [E, max_m, K] with a count
# of valid rows per expert (DeepGEMM's decode layout).
KIND_GEMM = "gemm"
KIND_LINEAR = "linear"
KIND_GROUPED = "grouped"
KIND_MASKED = "masked"


@dataclass(frozen=True)
class Shape:
    m: int
    n: int
    k: int
    layout: str = LAYOUT_KMAJOR
    kind: str = KIND_GEMM

    @property
    def label(self) -> str:
        suffix = "" if self.layout == LAYOUT_KMAJOR else " T"
        return f"{self.m},{self.n},{self.k}{suffix}"


@dataclass(frozen=True)
class GroupedShape:
    """One MoE layer's experts: `tokens` tokens routed to `topk` of `experts` experts each (a seeded skewed
    routing, benchmarks/grouped.py), or `rows_per_expert` rows for every expert (DeepGEMM's published cases).
    m is the number of rows the GEMM computes (useful rows, no padding)."""
    name: str
    experts: int
    n: int
    k: int
    tokens: int = 0
    topk: int = 0
    rows_per_expert: int = 0
    kind: str = KIND_GROUPED
    layout: str = LAYOUT_KMAJOR

    @property
    def m(self) -> int:
        return self.experts * self.rows_per_expert if self.rows_per_expert else self.tokens * self.topk

    @property
    def label(self) -> str:
        rows = f"{self.experts}x{self.rows_per_expert}" if self.rows_per_expert else \
            f"T{self.tokens}x{self.topk} E{self.experts}"
        return f"{self.name} {rows} {self.n},{self.k}"


def mnk_grid(ms, nks):
    """(M, N, K) triples, M outermost."""
    return [(m, n, k) for m in ms for (n, k) in nks]


def _shapes(ms, nks, layout=LAYOUT_KMAJOR, kind=KIND_GEMM):
    return [Shape(m, n, k, layout, kind) for m, n, k in mnk_grid(ms, nks)]


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

# transformers' FP8Linear on the DeepSeek-V3 dense layers, bf16 activations: decode to prefill batch sizes.
LINEAR_MS = (1, 16, 64, 128, 1024, 4096)
# The fused path's bar against our GEMM alone on pre-quantized inputs (issue 32): (largest M, max ratio).
LINEAR_FUSED_BARS = ((128, 1.10), (None, 1.05))

# Routed experts (config.json, TP1): (name, experts, N, K) with top-8 routing; gate_up is one [2I, H] GEMM.
# DeepSeek-V3: 256 experts, H 7168, I 2048. Qwen3-235B-A22B: 128 experts, H 4096, I 1536.
MOE_TOPK = 8
MOE_LAYERS = [("dsv3-gate-up", 256, 4096, 7168), ("dsv3-down", 256, 7168, 2048),
              ("qwen3-gate-up", 128, 3072, 4096), ("qwen3-down", 128, 4096, 1536)]
MOE_TOKENS = (64, 512, 4096, 32768)
# DeepGEMM's published grouped case: 4 groups of 8192 rows at N = 4096, K = 7168.
DEEPGEMM_GROUPED_CASE = GroupedShape("deepgemm", 4, 4096, 7168, rows_per_expert=8192)


def _moe_shapes(tokens, kind, layers=MOE_LAYERS, topk=MOE_TOPK, extra=(DEEPGEMM_GROUPED_CASE,)):
    grid = [GroupedShape(name, e, n, k, tokens=t, topk=topk, kind=kind) for t in tokens for name, e, n, k in layers]
    return grid + [GroupedShape(s.name, s.experts, s.n, s.k, s.tokens, s.topk, s.rows_per_expert, kind)
                   for s in extra]


# Small enough for 2 CPU cores in about a minute; mixes decode-like M, ragged N (576) and ragged K (1000).
CPU_SHAPES = [Shape(16, 576, 7168), Shape(64, 2112, 7168), Shape(128, 1536, 1536), Shape(256, 512, 7168),
              Shape(512, 4096, 512), Shape(100, 700, 1000)]

# CPU versions of the linear and grouped suites: decode-sized M, ragged N/K, empty experts.
CPU_LINEAR_SHAPES = [Shape(1, 576, 7168, kind=KIND_LINEAR), Shape(16, 1536, 1536, kind=KIND_LINEAR),
                     Shape(100, 700, 1000, kind=KIND_LINEAR)]
CPU_MOE_LAYERS = [("small-gate-up", 32, 512, 1024), ("small-ragged", 8, 320, 640)]
CPU_GROUPED_SHAPES = _moe_shapes((16, 64), KIND_GROUPED, CPU_MOE_LAYERS, topk=2, extra=())
CPU_MASKED_SHAPES = _moe_shapes((16,), KIND_MASKED, CPU_MOE_LAYERS, topk=2, extra=())

SHAPE_SETS = {
    "decode": _shapes(DEEPSEEK_V3_DECODE_MS, DEEPSEEK_V3_NK) + _shapes(MODELS_DECODE_MS, MODELS_NK),
    "prefill": _shapes(DEEPSEEK_V3_PREFILL_MS, DEEPSEEK_V3_NK) + _shapes(MODELS_PREFILL_MS, MODELS_NK),
    "challenge": _shapes(CHALLENGE_MS, CHALLENGE_NK),
    "challenge-layout": _shapes(CHALLENGE_MS, CHALLENGE_NK, LAYOUT_CHALLENGE),
    "deepseek-v3": _shapes(DEEPSEEK_V3_DECODE_MS + DEEPSEEK_V3_PREFILL_MS, DEEPSEEK_V3_NK),
    "models": _shapes(MODELS_DECODE_MS + MODELS_PREFILL_MS, MODELS_NK),
    "cpu": CPU_SHAPES,
    "linear": _shapes(LINEAR_MS, DEEPSEEK_V3_NK, kind=KIND_LINEAR),
    "grouped": _moe_shapes(MOE_TOKENS, KIND_GROUPED),
    "grouped-masked": _moe_shapes(MOE_TOKENS, KIND_MASKED),
    "linear-cpu": CPU_LINEAR_SHAPES,
    "grouped-cpu": CPU_GROUPED_SHAPES,
    "grouped-masked-cpu": CPU_MASKED_SHAPES,
}
# --suite picks the sets of one suite (benchmarks/gpu.sh runs the GPU suites one process each, so that each
# stays within one call's time limit); the default runs every suite of the device.
SUITES = {
    "gemm": {"cuda": ["decode", "prefill", "challenge", "challenge-layout"], "cpu": ["cpu"]},
    "linear": {"cuda": ["linear"], "cpu": ["linear-cpu"]},
    "grouped": {"cuda": ["grouped", "grouped-masked"], "cpu": ["grouped-cpu", "grouped-masked-cpu"]},
}
DEFAULT_SETS = {kind: [name for suite in SUITES.values() for name in suite[kind]] for kind in ("cuda", "cpu")}

# CUDA sm_90a test shapes (tests/cuda). CONFIG_SHAPES must make the planner pick every row of the tile
# table at least once (test_cuda_heuristics.py checks that on the CPU), stream-K plans with and without
# whole waves, and K splits over clusters, so the GPU tests run every kernel instantiation and schedule
# the package ships. Values are (m, n, k) for an H200 (132 SMs).
H200_SMS = 132

CONFIG_SHAPES = [
    (64, 2112, 7168),  # K split over 3-CTA clusters
    (64, 576, 7168),  # K split over 4-CTA clusters
    (64, 24576, 1536),
    (64, 32768, 512),
    (128, 2112, 7168),  # 64x32: 132 tiles, one wave
    (128, 7168, 2048),
    (128, 4096, 7168),
    (128, 24576, 1536),
    (1024, 1536, 7168),  # 128x96, paired: 128 tiles where 128x128 makes 96
    (1024, 1536, 1536),  # 128x96
    (512, 4096, 7168),  # 128x128 paired twin
    (1024, 4096, 512),
    (512, 2112, 7168),  # 128x64: 132 tiles, one wave
    (4096, 2112, 7168),
    (4096, 7168, 2048),
    (6144, 4096, 512),
    (1024, 576, 7168),
    (4096, 7168, 16384),  # whole waves of 2-CTA 192x128 cluster tiles plus a stream-K region
    (6144, 576, 7168),  # 256x128 (two slabs a warpgroup): 120 tiles, one wave
    (4096, 4096, 7168),  # 192x128 tiles in 2-CTA clusters: whole waves and a stream-K region
    (2048, 5120, 7168),  # 192x128 tiles in 2-CTA clusters (A multicast)
    (128, 2304, 16384),  # all stream-K: 72 64x64 tiles' K blocks over 132 CTAs
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
