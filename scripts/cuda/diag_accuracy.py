"""Accuracy diagnostic for a GPU build: the tests' accuracy rule (tests/_helpers.assert_close_gemm) on
shapes up to 4096x2112x7168, and per-K-block isolation at 64x64x1152. Run from the repo root with
LOCAL_KERNELS=kernels-community/gemm=$PWD after python3 scripts/build.py."""
import sys, torch
sys.path.insert(0, "tests")
from _helpers import make_inputs, reference_gemm, assert_close_gemm
import kernels
k = kernels.get_kernel("kernels-community/gemm", version=1)
dev = "cuda"
def report(tag, out, ref):
    r = ref.cpu(); o = out.double().cpu(); rr = r.to(out.dtype).double()
    maxrel = ((o - r).abs().max() / r.abs().max()).item()
    flips = (o != rr).double().mean().item()
    try:
        assert_close_gemm(out, ref); verdict = "PASS"
    except AssertionError as e:
        verdict = "FAIL " + str(e).splitlines()[0][:150]
    print(f"{tag}: maxrel {maxrel:.2e} ulp-flips {flips:.3f} {verdict}", flush=True)
for (m, n, kk) in [(1,1,1024),(1,1,1152),(64,64,1024),(64,64,1152),(65,192,1152),(64,64,576),(64,64,2048),(128,128,7168),(4096,2112,7168)]:
    for seed in (1, 2):
        a, b, sa, sb = make_inputs(m, n, kk, device=dev, seed=seed)
        report(f"{m}x{n}x{kk} s{seed}", k.gemm(a, b, sa, sb), reference_gemm(a, b, sa, sb))
a, b, sa, sb = make_inputs(1, 1, 1152, device=dev, seed=1)
print("1x1x1152 out", k.gemm(a, b, sa, sb, out_dtype=torch.float32).item(), "ref", reference_gemm(a, b, sa, sb).item())
print("== 64x64x1152 only K block j nonzero")
a, b, sa, sb = make_inputs(64, 64, 1152, device=dev, seed=2)
for j in range(9):
    a2 = torch.zeros_like(a.float()); a2[:, j*128:(j+1)*128] = a.float()[:, j*128:(j+1)*128]
    a2 = a2.to(a.dtype)
    report(f"block {j}", k.gemm(a2, b, sa, sb), reference_gemm(a2, b, sa, sb))
print("== challenge rule (|out-ref| <= 1e-3 + 2e-2|ref|, test_challenge_layout's data and 8 more seeds): ours vs cuBLAS")
for seed in [19] + list(range(100, 108)):
    gen = torch.Generator().manual_seed(seed)
    for (m, n, kk) in [(64, 64, 128), (128, 576, 1536)]:
        a = torch.randn(kk, m, generator=gen).to(torch.float8_e4m3fn).to(dev).t()
        b = torch.randn(kk, n, generator=gen).to(torch.float8_e4m3fn).to(dev).t()
        sa = torch.randn(kk // 128, m, generator=gen).to(dev).t()
        sb = torch.randn(kk // 128, -(-n // 128), generator=gen).to(dev).t()
        # float64 on the CPU: a GPU fp32 matmul may run in TF32 and is then no reference at all.
        a_deq = a.double().cpu() * sa.double().cpu().repeat_interleave(128, 1)
        b_deq = b.double().cpu() * sb.double().cpu().repeat_interleave(128, 0)[:n].repeat_interleave(128, 1)
        exact = a_deq @ b_deq.t()
        ref = exact.to(torch.bfloat16).double()
        # |A| @ |B|^T per 128-K block: what an accumulator of p bits is exact to, ~2^-p of this.
        absref = a_deq.abs() @ b_deq.abs().t()
        outs = {"ours": k.gemm(a, b, sa, sb)}
        try:
            outs["cublas"] = torch._scaled_mm(a.contiguous(), b.contiguous().t(), scale_a=sa.contiguous().t().contiguous().t(),
                                              scale_b=sb.contiguous().t(), out_dtype=torch.bfloat16)
        except RuntimeError as e:
            outs["cublas"] = None
        for name, o in outs.items():
            if o is None:
                print(f"seed {seed} {m}x{n}x{kk} {name}: refused"); continue
            o = o.double().cpu()
            err = (o - ref).abs(); tol = 1e-3 + 2e-2 * ref.abs()
            hw = ((o - exact).abs() - exact.abs() * 2.0 ** -8) / absref  # beyond bf16 rounding, per |A||B|
            print(f"seed {seed} {m}x{n}x{kk} {name}: violations {(err > tol).sum().item()} max err {err.max().item():.2e} "
                  f"max err/tol {(err / tol).max().item():.2f} max|ref| {ref.abs().max().item():.1f} "
                  f"max (err - bf16 half-ulp)/(|A||B|) {hw.max().item():.2e}", flush=True)
