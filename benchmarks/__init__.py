"""Side-by-side benchmark of the gemm kernel against its peers (run: python3 -m benchmarks.bench)."""
