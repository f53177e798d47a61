"""The grouped suite (MoE experts): seeded skewed routing, the contiguous and masked problems, and the
peers. Rows are sorted by expert; routing only decides how many rows each expert gets (the GEMM never
gathers tokens), so the operands are fresh random data laid out by those counts."""
import functools

import torch

from .peers import Ours, Peer, _outer_major
from .problem import SCALE_BLOCK_K, SCALE_BLOCK_N, ceil_div, dequant
from .shapes import KIND_GROUPED, KIND_MASKED

# Expert popularity p(rank r) ~ (r + 1)^-ZIPF_EXPONENT over a seeded random order of the experts, each
# token drawing its top-k experts without replacement (Gumbel top-k). 0.3 puts the busiest expert at
# about 3.6x the mean load over 256 experts (2.8x over 128) and leaves about 15 % of them empty at 64
# tokens: the imbalance a load-balanced model still shows per batch.
ZIPF_EXPONENT = 0.3
# Routing is the same in every run and on every device (the data seed changes; the layout does not).
ROUTING_SEED = 2025
# DeepGEMM pads every contiguous segment to its BLOCK_M (get_m_alignment_for_contiguous_layout()) and
# its masked kernel wants max_m a multiple of its BLOCK_M (64, 128 or 256): the masked layout here uses 256.
DEEPGEMM_M_ALIGN = 128
MASKED_M_ALIGN = 256


@functools.lru_cache(maxsize=None)
def route(shape) -> tuple:
    """Rows per expert (a tuple of E ints summing to shape.m)."""
    if shape.rows_per_expert:
        return (shape.rows_per_expert,) * shape.experts
    gen = torch.Generator().manual_seed(ROUTING_SEED)
    order = torch.randperm(shape.experts, generator=gen)
    log_p = -ZIPF_EXPONENT * torch.log(torch.arange(1, shape.experts + 1, dtype=torch.float64))[order]
    u = torch.rand(shape.tokens, shape.experts, generator=gen, dtype=torch.float64).clamp_min(1e-300)
    chosen = (log_p - torch.log(-torch.log(u))).topk(shape.topk, dim=1).indices
    return tuple(torch.bincount(chosen.flatten(), minlength=shape.experts).tolist())


def routing_stats(counts) -> dict:
    mean = sum(counts) / len(counts)
    return {"max_rows": max(counts), "mean_rows": mean, "max_over_mean": max(counts) / mean if mean else None,
            "empty_experts": sum(c == 0 for c in counts)}


def masked_max_m(counts) -> int:
    return max(MASKED_M_ALIGN, ceil_div(max(counts), MASKED_M_ALIGN) * MASKED_M_ALIGN)


class GroupedProblem:
    """Experts' weights b [E, N, K] FP8 with [E, N/128, K/128] scales; activations either contiguous
    (a [M, K], rows sorted by expert, `offsets` the inclusive cumulative row counts, int32) or masked
    (a [E, max_m, K], `masked_m` valid rows per expert, int32; rows past them hold random data that no
    peer may use). `reference` is [M, N] fp32, the valid rows in expert order."""

    def __init__(self, shape, device, fp8_dtype, seed, out_dtype=torch.bfloat16):
        self.shape, self.out_dtype = shape, out_dtype
        self.counts = route(shape)
        self.starts = [sum(self.counts[:e]) for e in range(shape.experts)]
        e, n, k = shape.experts, shape.n, shape.k
        kb, nb = ceil_div(k, SCALE_BLOCK_K), ceil_div(n, SCALE_BLOCK_N)
        gen = torch.Generator(device=device)
        gen.manual_seed(seed)
        # One expert at a time: an fp32 temporary of all experts' weights would not fit (7.5 G elements).
        self.b = torch.empty(e, n, k, dtype=fp8_dtype, device=device)
        for i in range(e):
            self.b[i] = torch.randn(n, k, device=device, generator=gen).to(fp8_dtype)
        self.b_scale = torch.randn(e, nb, kb, device=device, generator=gen)
        rows = shape.m
        if shape.kind == KIND_MASKED:
            self.max_m = masked_max_m(self.counts)
            lead = (e, self.max_m)
        else:
            lead = (rows,)
        self.a = torch.empty(*lead, k, dtype=fp8_dtype, device=device)
        flat = self.a.view(-1, k)
        for lo in range(0, flat.shape[0], 1 << 16):  # bounded fp32 temporaries
            hi = min(flat.shape[0], lo + (1 << 16))
            flat[lo:hi] = torch.randn(hi - lo, k, device=device, generator=gen).to(fp8_dtype)
        self.a_scale = torch.randn(*lead, kb, device=device, generator=gen)
        counts = torch.tensor(self.counts, dtype=torch.int32)
        self.offsets = counts.cumsum(0).to(torch.int32).to(device)
        self.masked_m = counts.to(device)
        self._ref = None

    def expert_rows(self, expert):
        """(a rows, a_scale rows) of one expert's valid rows, in either layout."""
        c = self.counts[expert]
        if self.shape.kind == KIND_MASKED:
            return self.a[expert, :c], self.a_scale[expert, :c]
        s = self.starts[expert]
        return self.a[s:s + c], self.a_scale[s:s + c]

    def valid_rows(self, out):
        """The [M, N] valid rows of an output laid out like `a` (masked: [E, max_m, N])."""
        if self.shape.kind != KIND_MASKED:
            return out
        return torch.cat([out[e, :c] for e, c in enumerate(self.counts)])

    @property
    def reference(self):
        if self._ref is None:
            ref = torch.empty(self.shape.m, self.shape.n, device=self.b.device)
            for e, c in enumerate(self.counts):
                if c:
                    a, a_scale = self.expert_rows(e)
                    s = self.starts[e]
                    ref[s:s + c] = dequant(a, a_scale, 1) @ dequant(self.b[e], self.b_scale[e], SCALE_BLOCK_N).t()
            self._ref = ref
        return self._ref

    def drop_reference(self) -> None:
        self._ref = None

    @property
    def flops(self) -> int:
        """Useful FLOPs: 2 x rows x N x K, padding and empty experts not counted."""
        return 2 * self.shape.m * self.shape.n * self.shape.k

    @property
    def bytes(self) -> int:
        """The valid rows and the weights of the experts that have rows, read once; the output written once."""
        s = self.shape
        kb, nb = ceil_div(s.k, SCALE_BLOCK_K), ceil_div(s.n, SCALE_BLOCK_N)
        active = sum(c > 0 for c in self.counts)
        fp8 = self.a.element_size()
        out = torch.empty((), dtype=self.out_dtype).element_size()
        return fp8 * (s.m * s.k + active * s.n * s.k) + 4 * (s.m * kb + active * nb * kb) + out * s.m * s.n


class _GroupedPeer(Peer):
    kind = KIND_GROUPED

    def checked(self, out, p):
        return p.valid_rows(out)


class OursGrouped(_GroupedPeer):
    """grouped_gemm(..., offsets=) on the contiguous layout, As M-major (as for the dense op)."""
    name = "ours"
    label = "grouped_gemm (this package)"

    def unavailable(self, device):
        kernel = Ours.kernel()
        if kernel is None:
            return Ours._load_error
        return None if hasattr(kernel, "grouped_gemm") else "the loaded package has no grouped_gemm"

    def prepare(self, p, timer, check_fn):
        grouped = Ours.kernel().grouped_gemm
        a_scale = _outer_major(p.a_scale)
        return (lambda: grouped(p.a, p.b, a_scale, p.b_scale, offsets=p.offsets, out_dtype=p.out_dtype)), {}


class OursMasked(OursGrouped):
    """grouped_gemm(..., masked_m=) on the [E, max_m, K] layout, its scales M-major over all E * max_m rows
    (what quantize_activation(column_major_scales=True) writes for the [E * max_m, K] activations), which the
    kernels load in place; expected_m as DeepGEMM's masked kernel gets it."""
    kind = KIND_MASKED
    label = "grouped_gemm masked (this package)"

    def prepare(self, p, timer, check_fn):
        grouped = Ours.kernel().grouped_gemm
        a_scale = _outer_major(p.a_scale.reshape(-1, p.a_scale.shape[-1])).view(p.a_scale.shape)
        hint = expected_m(p.counts)
        return (lambda: grouped(p.a, p.b, a_scale, p.b_scale, masked_m=p.masked_m, out_dtype=p.out_dtype,
                                expected_m=hint)), {"expected_m": hint}


class OursDenseLoop(_GroupedPeer):
    """This package's dense gemm once per expert that has rows, a host loop over segment sizes computed
    untimed: what a caller without a grouped kernel does. Not a rival: our own package."""
    name = "ours-loop"
    label = "gemm() per expert, host loop (this package)"
    block_scaled = False

    def unavailable(self, device):
        return None if Ours.kernel() is not None else Ours._load_error

    def prepare(self, p, timer, check_fn):
        gemm = Ours.kernel().gemm
        out = torch.empty(p.shape.m, p.shape.n, dtype=p.out_dtype, device=p.a.device)
        # Each expert's operands as the dense op takes them best (As M-major), made untimed.
        calls = [(p.a[s:s + c], p.b[e], _outer_major(p.a_scale[s:s + c]), p.b_scale[e], out[s:s + c])
                 for e, (s, c) in enumerate(zip(p.starts, p.counts)) if c]

        def call():
            for a, b, a_scale, b_scale, rows in calls:
                gemm(a, b, a_scale, b_scale, out=rows)
            return out
        return call, {}


def deepgemm_contiguous_layout(counts, align=DEEPGEMM_M_ALIGN):
    """DeepGEMM's contiguous layout: each expert's rows padded to `align`. Returns (padded row count,
    m_indices as a list (-1 on padding), the padded row of each valid row in expert order)."""
    m_indices, valid = [], []
    for e, c in enumerate(counts):
        if not c:
            continue
        base = len(m_indices)
        padded = ceil_div(c, align) * align
        m_indices += [e] * c + [-1] * (padded - c)
        valid += range(base, base + c)
    return len(m_indices), m_indices, valid


class DeepGemmGrouped(_GroupedPeer):
    """DeepGEMM 1.x m_grouped_gemm_fp8_fp8_bf16_nt_contiguous: segments padded to its BLOCK_M, m_indices
    with -1 on padding, As in its TMA-aligned M-major layout; the padded layout built untimed."""
    name = "deepgemm"
    label = "DeepGEMM m_grouped contiguous / masked"
    conversion = "A padded per expert to 128 rows, m_indices, As TMA-aligned (untimed)"

    def unavailable(self, device):
        from .peers import DeepGemm
        return DeepGemm().unavailable(device)

    def unsupported(self, shape):
        from .peers import DeepGemm
        return DeepGemm().unsupported(shape)

    def setup(self, shapes, device):
        from .peers import DeepGemm
        specs = sorted({self.compile_spec(s) for s in shapes if self.unsupported(s) is None})
        return DeepGemm.compile_all(specs, _deepgemm_grouped_compile, "grouped kernels")

    def compile_spec(self, shape):
        rows, _, _ = deepgemm_contiguous_layout(route(shape))
        return ("contiguous", rows, shape.n, shape.k, shape.experts, 0)

    def prepare(self, p, timer, check_fn):
        import deep_gemm as dg
        rows, m_indices, valid = deepgemm_contiguous_layout(p.counts)
        dev = p.a.device
        index = torch.tensor(valid, device=dev)
        a = torch.zeros(rows, p.shape.k, dtype=p.a.dtype, device=dev)
        a.view(torch.uint8)[index] = p.a.view(torch.uint8)  # no index_put for FP8: move the bytes
        a_scale = torch.ones(rows, p.a_scale.shape[1], device=dev)
        a_scale[index] = p.a_scale
        a_scale = dg.get_col_major_tma_aligned_tensor(a_scale)
        m_idx = torch.tensor(m_indices, dtype=torch.int32, device=dev)
        out = torch.empty(rows, p.shape.n, dtype=torch.bfloat16, device=dev)
        b_scale = p.b_scale.contiguous()

        def call():
            dg.m_grouped_gemm_fp8_fp8_bf16_nt_contiguous((a, a_scale), (p.b, b_scale), out, m_idx)
            return out
        return call, {"padded_rows": rows}

    def checked(self, out, p):
        _, _, valid = deepgemm_contiguous_layout(p.counts)
        return out[torch.tensor(valid, device=out.device)]


def expected_m(counts) -> int:
    """The expected_m hint both masked kernels get: the mean rows per expert (what engines pass: tokens x
    top-k / experts)."""
    return max(1, ceil_div(sum(counts), len(counts)))


class DeepGemmMasked(DeepGemmGrouped):
    """DeepGEMM 1.x m_grouped_gemm_fp8_fp8_bf16_nt_masked, expected_m = mean rows per expert."""
    kind = KIND_MASKED
    conversion = "As TMA-aligned per expert (untimed)"

    def compile_spec(self, shape):
        counts = route(shape)
        return ("masked", masked_max_m(counts), shape.n, shape.k, shape.experts, expected_m(counts))

    def prepare(self, p, timer, check_fn):
        import deep_gemm as dg
        a_scale = dg.get_col_major_tma_aligned_tensor(p.a_scale)
        out = torch.empty(p.shape.experts, p.max_m, p.shape.n, dtype=torch.bfloat16, device=p.a.device)
        b_scale = p.b_scale.contiguous()
        expected = expected_m(p.counts)

        def call():
            dg.m_grouped_gemm_fp8_fp8_bf16_nt_masked((p.a, a_scale), (p.b, b_scale), out, p.masked_m, expected)
            return out
        return call, {"expected_m": expected}

    def checked(self, out, p):
        return p.valid_rows(out)


def _deepgemm_grouped_compile(spec):
    """Builds (never runs) the DeepGEMM grouped kernel of `spec` in a fresh process: its JIT key depends only
    on shapes, so meta tensors stand in for the operands and the built kernel is not launched."""
    import deep_gemm.jit_kernels.m_grouped_gemm as mg
    real = mg.jit_tuner

    class BuildOnly:
        def compile_and_tune(self, **kwargs):
            real.compile_and_tune(**kwargs)
            return lambda *args: 0

    mg.jit_tuner = BuildOnly()
    layout, rows, n, k, experts, expected_m = spec
    meta = torch.device("meta")
    fp8 = torch.float8_e4m3fn
    kb, nb = ceil_div(k, SCALE_BLOCK_K), ceil_div(n, SCALE_BLOCK_N)
    b = (torch.empty(experts, n, k, dtype=fp8, device=meta), torch.empty(experts, nb, kb, device=meta))
    if layout == "contiguous":
        a = (torch.empty(rows, k, dtype=fp8, device=meta), torch.empty(rows, kb, device=meta))
        out = torch.empty(rows, n, dtype=torch.bfloat16, device=meta)
        mg.m_grouped_gemm_fp8_fp8_bf16_nt_contiguous(a, b, out, torch.empty(rows, dtype=torch.int32, device=meta))
    else:
        a = (torch.empty(experts, rows, k, dtype=fp8, device=meta), torch.empty(experts, rows, kb, device=meta))
        out = torch.empty(experts, rows, n, dtype=torch.bfloat16, device=meta)
        mg.m_grouped_gemm_fp8_fp8_bf16_nt_masked(a, b, out, torch.empty(experts, dtype=torch.int32, device=meta),
                                                 expected_m)


class TritonGrouped(_GroupedPeer):
    """finegrained-fp8's matmul_grouped design in Triton (benchmarks/triton_grouped.py): tiles of BLOCK_M
    rows per expert, the expert found by binary search over the cumulative tile counts (computed in the
    call, as its matmul_grouped does); best correct of a few warp/stage configs per shape."""
    name = "triton"
    label = "Triton grouped (finegrained-fp8 matmul_grouped design, here)"

    def unavailable(self, device):
        from .peers import TritonBlock
        return TritonBlock().unavailable(device)

    def prepare(self, p, timer, check_fn):
        from .peers import TUNE_ITERS
        from .triton_blockscaled import tune
        from .triton_grouped import CONFIGS, grouped_gemm
        counts = torch.tensor(p.counts, device=p.a.device)
        ref = p.reference

        def run(cfg):
            return grouped_gemm(p.a, p.b, p.a_scale, p.b_scale, p.offsets, counts, cfg, out_dtype=p.out_dtype)
        best, log = tune(run, lambda out: check_fn(out, ref), lambda fn: timer.time(fn, iters=TUNE_ITERS).median_us,
                         CONFIGS)
        return (lambda: run(best or log[0]["config"])), {"tuning": log, "config": best}


class Bf16GroupedMM(_GroupedPeer):
    """torch._grouped_mm on bf16 copies of the dequantized operands (made untimed), offsets as given."""
    name = "bf16"
    label = "torch._grouped_mm bf16"
    block_scaled = False

    def unavailable(self, device):
        if device.type != "cuda":
            return "bf16 baseline is a GPU peer"
        return None if hasattr(torch, "_grouped_mm") else "this torch has no torch._grouped_mm"

    def prepare(self, p, timer, check_fn):
        a = dequant(p.a, p.a_scale, 1).to(torch.bfloat16)
        b = torch.empty(p.b.shape, dtype=torch.bfloat16, device=p.b.device)
        for e in range(p.shape.experts):
            b[e] = dequant(p.b[e], p.b_scale[e], SCALE_BLOCK_N).to(torch.bfloat16)
        bt = b.transpose(1, 2)
        return (lambda: torch._grouped_mm(a, bt, offs=p.offsets).to(p.out_dtype)), {}


class DequantLoop(_GroupedPeer):
    """What a CPU user without a kernel does: per expert, dequantize its rows and weight to fp32 (timed),
    torch.matmul."""
    name = "dequant-fp32"
    label = "dequant fp32 + torch.matmul per expert"

    def prepare(self, p, timer, check_fn):
        def call():
            out = torch.empty(p.shape.m, p.shape.n, dtype=p.out_dtype, device=p.b.device)
            for e, (s, c) in enumerate(zip(p.starts, p.counts)):
                if c:
                    a, a_scale = p.expert_rows(e)
                    out[s:s + c] = dequant(a, a_scale, 1) @ dequant(p.b[e], p.b_scale[e], SCALE_BLOCK_N).t()
            return out
        return call, {}

    def checked(self, out, p):
        return out


class DequantLoopMasked(DequantLoop):
    kind = KIND_MASKED


PEERS = [OursGrouped, OursMasked, OursDenseLoop, DeepGemmGrouped, DeepGemmMasked, TritonGrouped, Bf16GroupedMM,
         DequantLoop, DequantLoopMasked]
