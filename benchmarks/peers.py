"""The peers, each called the way its users call it.

A peer serves one kind of row (shapes.py: gemm here; linear in linear.py, grouped and masked in
grouped.py); one name (ours, deepgemm, triton, bf16, ...) may have a peer for several kinds.
A peer turns a Problem into one zero-argument timed call. By default (Peer.prepare) the call is
`run(*convert(problem))`: for K-major sets the conversion to the peer's preferred layout is done once,
untimed (a quantizer can emit any layout); for the challenge layout it is inside the timed call."""
import functools
import os
from pathlib import Path

import torch
import torch.nn.functional as F

from .problem import SCALE_BLOCK_K, SCALE_BLOCK_N, ceil_div, dequant
from .shapes import KIND_GEMM, LAYOUT_CHALLENGE

REPO_ROOT = Path(__file__).resolve().parent.parent
KERNEL_REPO_ID = "kernels-community/gemm"
KERNEL_VERSION = 1
TUNE_ITERS = 10
# torch 2.11's cuBLASLt block-scaled path is right only when K/128 is a multiple of this (performance.md).
CUBLAS_SCALE_BLOCKS_ALIGN = 4


def _k_major(x: torch.Tensor) -> torch.Tensor:
    return x if x.stride(1) == 1 else x.contiguous()


def _outer_major(x: torch.Tensor) -> torch.Tensor:
    """Same logical [R, C] tensor stored column-major (stride(0) == 1)."""
    return x if x.stride(0) == 1 else x.t().contiguous().t()


class Peer:
    name = ""
    label = ""
    kind = KIND_GEMM
    # False for baselines that compute something else (bf16 weights, per-tensor scales): they are shown,
    # never picked as the "best peer" our kernel is compared with.
    block_scaled = True
    conversion = "none"  # what the timed call includes for the challenge layout

    def unavailable(self, device: torch.device):
        """None when usable on `device`, else the reason it is not."""
        return None

    def applies(self, shape) -> bool:
        """False for shapes this peer has no row for (it would repeat another peer's call)."""
        return True

    def unsupported(self, shape):
        """None when the peer can run `shape`, else why not (its row says so, untimed)."""
        return None

    def setup(self, shapes, device) -> str:
        """One-time work before any row (e.g. compiling kernels); returns a line for the log, or ''."""
        return ""

    def convert(self, p):
        return p.a, p.b, p.a_scale, p.b_scale

    def run(self, a, b, a_scale, b_scale, out_dtype):
        raise NotImplementedError

    def reference(self, p) -> torch.Tensor:
        return p.reference

    def checked(self, out, p) -> torch.Tensor:
        """The part of the call's output the check compares with the reference (padded layouts: valid rows)."""
        return out

    def prepare(self, p, timer, check_fn):
        """-> (timed zero-argument call, info dict for the JSON)."""
        if p.shape.layout == LAYOUT_CHALLENGE:
            return (lambda: self.run(*self.convert(p), p.out_dtype)), {}
        args = self.convert(p)
        return (lambda: self.run(*args, p.out_dtype)), {}


class Ours(Peer):
    """gemm() as is. K-major sets hand it As M-major (what quantize_activation(column_major_scales=True)
    emits; the layout cuBLAS and DeepGEMM are given as well), the challenge layout its transposed views."""
    name = "ours"
    label = "gemm (this package; K-major sets: As M-major)"
    conversion = "whatever gemm() does with the strides it is given"
    _kernel = None
    _load_error = None

    @classmethod
    def kernel(cls):
        if cls._kernel is None and cls._load_error is None:
            os.environ.setdefault("LOCAL_KERNELS", f"{KERNEL_REPO_ID}={REPO_ROOT}")
            try:
                from kernels import get_kernel
                cls._kernel = get_kernel(KERNEL_REPO_ID, version=KERNEL_VERSION)
            except Exception as exc:  # reported as the reason the row is missing
                cls._load_error = f"get_kernel({KERNEL_REPO_ID!r}, version={KERNEL_VERSION}) failed: " \
                                  f"{type(exc).__name__}: {exc}"
        return cls._kernel

    def unavailable(self, device):
        return None if self.kernel() is not None else self._load_error

    def convert(self, p):
        return p.a, p.b, _outer_major(p.a_scale), p.b_scale  # a no-op for the challenge layout's views

    def run(self, a, b, a_scale, b_scale, out_dtype):
        return self.kernel().gemm(a, b, a_scale, b_scale, out_dtype=out_dtype)


@functools.lru_cache(maxsize=None)
def _scale_rows_aligned(device: torch.device, fp8_dtype) -> bool:
    """Whether this torch's block-scaled _scaled_mm wants Bs rows padded to 16 bytes (newer torch)
    rather than exactly K/128 floats apart (torch 2.11, which refuses the padded layout). A tiny probe
    with K/128 = 3, where the two layouts differ, tells them apart."""
    m = n = 2 * SCALE_BLOCK_N
    kb = CUBLAS_SCALE_BLOCKS_ALIGN - 1
    a = torch.ones(m, kb * SCALE_BLOCK_K, device=device).to(fp8_dtype)
    a_scale = torch.ones(kb, m, device=device).t()
    b_scale = torch.ones(n // SCALE_BLOCK_N, kb, device=device)
    try:
        torch._scaled_mm(a, a.t(), scale_a=a_scale, scale_b=b_scale.t(), out_dtype=torch.bfloat16)
    except (RuntimeError, ValueError):  # torch raises either for an invalid scaling configuration
        return True
    return False


def _row_major_scale(scale: torch.Tensor, aligned: bool) -> torch.Tensor:
    """Row-major Bs, its rows CUBLAS_SCALE_BLOCKS_ALIGN floats (16 bytes) apart when `aligned`."""
    if not aligned:
        return scale.contiguous()
    rows, cols = scale.shape
    buffer = scale.new_zeros(rows, -(-cols // CUBLAS_SCALE_BLOCKS_ALIGN) * CUBLAS_SCALE_BLOCKS_ALIGN)
    buffer[:, :cols] = scale
    return buffer[:, :cols]


class ScaledMMBlock(Peer):
    """cuBLASLt (hipBLASLt on ROCm) 1x128 x 128x128 block scaling through torch._scaled_mm.

    torch 2.11 wants mat2 as [K, N] column-major (B^T of a K-major B), scale_a [M, K/128] M-major
    (strides (1, M)) and scale_b [K/128, N/128] = Bs^T of a row-major Bs (rows padded to 16 bytes on
    newer torch: probed once); it rejects fast accumulation."""
    name = "scaled-mm-block"
    label = "torch._scaled_mm block"
    conversion = "A, B to K-major, Bs to row-major (copies)"

    def unavailable(self, device):
        return None if device.type == "cuda" else "needs a GPU"

    def convert(self, p):
        aligned = _scale_rows_aligned(p.a.device, p.a.dtype)
        return _k_major(p.a), _k_major(p.b), _outer_major(p.a_scale), _row_major_scale(p.b_scale, aligned)

    def run(self, a, b, a_scale, b_scale, out_dtype):
        return torch._scaled_mm(a, b.t(), scale_a=a_scale, scale_b=b_scale.t(), out_dtype=out_dtype)


class ScaledMMBlockPadK(ScaledMMBlock):
    """scaled-mm-block with K zero-padded to a multiple of 4 scale blocks (zero data, zero scales), the
    workaround for torch 2.11's wrong results when K/128 % 4 != 0; only shapes that need it get a row."""
    name = "scaled-mm-block-padk"
    label = "torch._scaled_mm block, K padded to 512"
    conversion = "A, B, As, Bs copied into K-padded buffers"

    def applies(self, shape):
        return ceil_div(shape.k, SCALE_BLOCK_K) % CUBLAS_SCALE_BLOCKS_ALIGN != 0

    def convert(self, p):
        k_pad = -p.shape.k % (CUBLAS_SCALE_BLOCKS_ALIGN * SCALE_BLOCK_K)
        kb_pad = -p.a_scale.shape[1] % CUBLAS_SCALE_BLOCKS_ALIGN
        # F.pad has no FP8 kernel: pad the bytes.
        a = F.pad(_k_major(p.a).view(torch.uint8), (0, k_pad)).view(p.a.dtype)
        b = F.pad(_k_major(p.b).view(torch.uint8), (0, k_pad)).view(p.b.dtype)
        return a, b, _outer_major(F.pad(p.a_scale, (0, kb_pad))), F.pad(p.b_scale, (0, kb_pad)).contiguous()


class ScaledMMTensor(ScaledMMBlock):
    """Per-tensor scaled FP8 _scaled_mm: a ceiling for what block scaling costs, not a block-scaled GEMM.
    Same FP8 bytes, one positive scale per operand; checked against its own fp32 reference."""
    name = "scaled-mm-tensor"
    label = "torch._scaled_mm per-tensor (ceiling)"
    block_scaled = False
    conversion = "A, B to K-major (copies)"

    @staticmethod
    def _scales(p):
        return p.a_scale.abs().mean().reshape(()), p.b_scale.abs().mean().reshape(())

    def convert(self, p):
        return (_k_major(p.a), _k_major(p.b)) + self._scales(p)

    def run(self, a, b, a_scale, b_scale, out_dtype):
        return torch._scaled_mm(a, b.t(), scale_a=a_scale, scale_b=b_scale, out_dtype=out_dtype)

    def reference(self, p):
        sa, sb = self._scales(p)
        return (p.a.float() @ p.b.float().t()) * (sa * sb)


class Bf16Matmul(Peer):
    """torch.matmul on bf16 copies of the dequantized operands, prepared untimed: what a bf16 model costs."""
    name = "bf16"
    label = "torch.matmul bf16"
    block_scaled = False
    conversion = "none (bf16 operands made untimed, same strides as given)"

    def unavailable(self, device):
        return None if device.type == "cuda" else "bf16 baseline is a GPU peer"

    @staticmethod
    def _as_given(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
        return x.t().contiguous().t() if like.stride(0) == 1 and like.stride(1) != 1 else x.contiguous()

    def prepare(self, p, timer, check_fn):
        a = self._as_given(dequant(p.a, p.a_scale, 1).to(torch.bfloat16), p.a)
        b = self._as_given(dequant(p.b, p.b_scale, SCALE_BLOCK_N).to(torch.bfloat16), p.b)
        return (lambda: torch.matmul(a, b.t()).to(p.out_dtype)), {}


class TritonBlock(Peer):
    name = "triton"
    label = "Triton block (vLLM design, here)"
    conversion = "A, B to K-major (copies)"

    def unavailable(self, device):
        if device.type != "cuda":
            return "Triton needs a GPU"
        try:
            from . import triton_blockscaled  # noqa: F401
        except ImportError as exc:
            return f"triton not importable: {exc}"
        return None

    def convert(self, p):
        return _k_major(p.a), _k_major(p.b), p.a_scale, p.b_scale

    def prepare(self, p, timer, check_fn):
        from .triton_blockscaled import blockscaled_gemm, tune
        args = self.convert(p)
        ref = self.reference(p)
        best, log = tune(lambda cfg: blockscaled_gemm(*args, cfg, out_dtype=p.out_dtype),
                         lambda out: check_fn(out, ref),
                         lambda fn: timer.time(fn, iters=TUNE_ITERS).median_us)
        info = {"tuning": log, "config": best}
        if best is None:
            # No config passed: time nothing, let the check report the first config's error.
            best = log[0]["config"]
        if p.shape.layout == LAYOUT_CHALLENGE:
            return (lambda: blockscaled_gemm(*self.convert(p), best, out_dtype=p.out_dtype)), info
        return (lambda: blockscaled_gemm(*args, best, out_dtype=p.out_dtype)), info


# DeepGEMM 1.x asserts these on its NT GEMM; shapes that break them get an UNSUPPORTED row.
DEEPGEMM_N_ALIGN = 64
DEEPGEMM_K_ALIGN = 128
# DeepGEMM compiles a kernel per configuration at its first call (seconds each): done up front, in parallel.
DEEPGEMM_COMPILE_JOBS = 8


def _deepgemm_compile(mnk):
    """Runs DeepGEMM once on zeros of shape (M, N, K) in a fresh process, so that its JIT builds the kernel."""
    import deep_gemm as dg
    m, n, k = mnk
    dev = torch.device("cuda")
    a = torch.zeros(m, k, device=dev).to(torch.float8_e4m3fn)
    b = torch.zeros(n, k, device=dev).to(torch.float8_e4m3fn)
    a_scale = dg.get_col_major_tma_aligned_tensor(torch.ones(m, ceil_div(k, SCALE_BLOCK_K), device=dev))
    b_scale = torch.ones(ceil_div(n, SCALE_BLOCK_N), ceil_div(k, SCALE_BLOCK_K), device=dev)
    dg.gemm_fp8_fp8_bf16_nt((a, a_scale), (b, b_scale), torch.empty(m, n, dtype=torch.bfloat16, device=dev))
    torch.cuda.synchronize()


class DeepGemm(Peer):
    """DeepGEMM 1.x NT FP8 GEMM with 1x128 / 128x128 fp32 scales (sm90), when the package is importable
    (benchmarks/gpu.sh sets it up from its offline bundle)."""
    name = "deepgemm"
    label = "DeepGEMM"
    conversion = "A, B to K-major (copies), As to DeepGEMM's TMA-aligned M-major layout"

    def _module(self):
        import deep_gemm
        return deep_gemm

    def unavailable(self, device):
        if device.type != "cuda" or torch.version.hip:
            return "DeepGEMM is CUDA-only"
        try:
            self._module()
        except ImportError as exc:
            return f"deep_gemm not importable: {exc}"
        return None

    def unsupported(self, shape):
        reasons = [f"{name} % {align} != 0" for name, value, align in
                   (("N", shape.n, DEEPGEMM_N_ALIGN), ("K", shape.k, DEEPGEMM_K_ALIGN)) if value % align]
        return f"DeepGEMM requires N % {DEEPGEMM_N_ALIGN} == 0 and K % {DEEPGEMM_K_ALIGN} == 0; here " \
               f"{', '.join(reasons)}" if reasons else None

    def setup(self, shapes, device):
        todo = sorted({(s.m, s.n, s.k) for s in shapes if self.unsupported(s) is None})
        return self.compile_all(todo, _deepgemm_compile, "shapes")

    @staticmethod
    def compile_all(specs, compile_fn, what, jobs=None):
        """compile_fn(spec) for every spec, in parallel fresh processes (`jobs`, default: up to
        DEEPGEMM_COMPILE_JOBS); returns a line for the log."""
        import concurrent.futures
        import multiprocessing
        import time
        if not specs:
            return ""
        t0 = time.perf_counter()
        jobs = jobs or max(1, min(DEEPGEMM_COMPILE_JOBS, (os.cpu_count() or 2) // 2, len(specs)))
        failed = []
        pool = concurrent.futures.ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"))
        try:
            for spec, fut in zip(specs, [pool.submit(compile_fn, spec) for spec in specs]):
                try:
                    fut.result()
                except Exception as exc:  # the row itself reports the error when it runs
                    failed.append(f"{spec}: {type(exc).__name__}: {exc}"[:200])
        except BaseException:
            # Interrupted (a time limit's SIGTERM): drop the queued compilations instead of waiting for
            # them, so that the benchmark still reports before the limit's kill.
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown()
        line = f"deepgemm: kernels of {len(specs)} {what} compiled or found in its cache in " \
               f"{time.perf_counter() - t0:.0f} s ({jobs} processes)"
        return line + (f"; {len(failed)} failed, first: {failed[0]}" if failed else "")

    def convert(self, p):
        dg = self._module()
        a_scale = p.a_scale
        if hasattr(dg, "get_col_major_tma_aligned_tensor"):  # 1.x wants the scale pre-laid-out
            a_scale = dg.get_col_major_tma_aligned_tensor(a_scale.contiguous())
        return _k_major(p.a), _k_major(p.b), a_scale, p.b_scale.contiguous()

    def run(self, a, b, a_scale, b_scale, out_dtype):
        dg = self._module()
        gemm = getattr(dg, "fp8_gemm_nt", None) or dg.gemm_fp8_fp8_bf16_nt
        out = torch.empty(a.shape[0], b.shape[0], dtype=out_dtype, device=a.device)
        gemm((a, a_scale), (b, b_scale), out)
        return out


class Aiter(Peer):
    """AITER's CK block-scaled GEMM (ROCm), when the package is importable."""
    name = "aiter"
    label = "AITER gemm_a8w8_blockscale"
    conversion = "A, B to K-major (copies)"

    def unavailable(self, device):
        if not torch.version.hip:
            return "AITER is ROCm-only"
        try:
            import aiter  # noqa: F401
        except ImportError as exc:
            return f"aiter not importable: {exc}"
        return None

    def convert(self, p):
        return _k_major(p.a), _k_major(p.b), p.a_scale.contiguous(), p.b_scale.contiguous()

    def run(self, a, b, a_scale, b_scale, out_dtype):
        import aiter
        return aiter.gemm_a8w8_blockscale(a, b, a_scale, b_scale, dtype=out_dtype)


class DequantFp32(Peer):
    """What a user without a kernel does on CPU: dequantize both operands to fp32 (timed) + torch.matmul."""
    name = "dequant-fp32"
    label = "dequant fp32 + torch.matmul"
    conversion = "dequantization of A and B, in every call"

    def run(self, a, b, a_scale, b_scale, out_dtype):
        return (dequant(a, a_scale, 1) @ dequant(b, b_scale, SCALE_BLOCK_N).t()).to(out_dtype)

    def prepare(self, p, timer, check_fn):
        return (lambda: self.run(p.a, p.b, p.a_scale, p.b_scale, p.out_dtype)), {}


GEMM_PEERS = [Ours, ScaledMMBlock, ScaledMMBlockPadK, ScaledMMTensor, Bf16Matmul, TritonBlock, DeepGemm, Aiter,
              DequantFp32]
DEFAULT_PEERS = {
    "cuda": ["ours", "ours-gemm", "ours-loop", "scaled-mm-block", "scaled-mm-block-padk", "scaled-mm-tensor", "bf16",
             "triton", "triton-inline", "deepgemm"],
    "rocm": ["ours", "ours-gemm", "ours-loop", "scaled-mm-block", "scaled-mm-tensor", "aiter"],
    "cpu": ["ours", "ours-gemm", "ours-loop", "dequant-fp32"],
}


def all_peers():
    from . import grouped, linear
    return GEMM_PEERS + linear.PEERS + grouped.PEERS


def select_peers(backend: str, names=None, extra=()):
    """Peer instances (one per name and kind) for `backend`, optionally restricted to `names`; `extra`
    peers are appended."""
    classes = all_peers()
    known = {cls.name for cls in classes} | {peer.name for peer in extra}
    wanted = names or DEFAULT_PEERS[backend] + [peer.name for peer in extra]
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise ValueError(f"--peers: unknown peer(s) {unknown}; known: {sorted(known)}")
    extra_names = {peer.name for peer in extra}
    return [cls() for n in wanted if n not in extra_names for cls in classes if cls.name == n] + \
        [peer for peer in extra if peer.name in wanted]
