// CPU ceilings the benchmark's roofline floors are computed from, measured the way the CPU kernel can
// reach them: FP32 FMA throughput on the vector ISA the kernel runs (AVX-512, AVX2 + FMA, or SSE2
// multiply + add) with every thread busy, and the read bandwidth of a buffer far larger than the caches.
// Built and loaded by benchmarks/timing.py (cc -O2 -fopenmp -shared); plain C, no torch.
#include <immintrin.h>
#include <omp.h>
#include <stdint.h>

// Twelve independent multiply-add chains per thread, named (not an array) so they stay in registers:
// more than latency x ports (4 x 2), so the FMA units never wait.
#define CHAINS 12
#define ROUND(step) \
  a0 = step(a0); a1 = step(a1); a2 = step(a2); a3 = step(a3); a4 = step(a4); a5 = step(a5); \
  a6 = step(a6); a7 = step(a7); a8 = step(a8); a9 = step(a9); a10 = step(a10); a11 = step(a11)
#define SUM_CHAINS(add) \
  add(add(add(add(a0, a1), add(a2, a3)), add(add(a4, a5), add(a6, a7))), add(add(a8, a9), add(a10, a11)))

#define FMA_KERNEL(name, target_isa, vec, set1, step_expr, add_fn, to_scalar)                     \
  target_isa static float name(int64_t iters) {                                                   \
    const vec mul = set1(0.999999f), add = set1(1e-7f);                                            \
    vec a0 = set1(0.f), a1 = set1(1.f), a2 = set1(2.f), a3 = set1(3.f), a4 = set1(4.f),            \
        a5 = set1(5.f), a6 = set1(6.f), a7 = set1(7.f), a8 = set1(8.f), a9 = set1(9.f),            \
        a10 = set1(10.f), a11 = set1(11.f);                                                        \
    for (int64_t i = 0; i < iters; ++i) {                                                          \
      ROUND(step_expr);                                                                            \
    }                                                                                              \
    return to_scalar(SUM_CHAINS(add_fn));                                                          \
  }

#define STEP512(x) _mm512_fmadd_ps(x, mul, add)
#define STEP256(x) _mm256_fmadd_ps(x, mul, add)
#define STEP128(x) _mm_add_ps(_mm_mul_ps(x, mul), add)
#define FIRST256(v) _mm_cvtss_f32(_mm256_castps256_ps128(v))

FMA_KERNEL(fma_avx512, __attribute__((target("avx512f"))), __m512, _mm512_set1_ps, STEP512, _mm512_add_ps,
           _mm512_reduce_add_ps)
FMA_KERNEL(fma_avx2, __attribute__((target("avx2,fma"))), __m256, _mm256_set1_ps, STEP256, _mm256_add_ps, FIRST256)
FMA_KERNEL(fma_sse2, , __m128, _mm_set1_ps, STEP128, _mm_add_ps, _mm_cvtss_f32)

// Widest vector ISA this CPU runs, in bits (the CPU kernel's own dispatch order).
int widest_vector_bits(void) {
  if (__builtin_cpu_supports("avx512f")) return 512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 256;
  return 128;
}

// FP32 FLOP/s of `threads` threads running multiply-adds `vector_bits` wide for `iters` rounds each.
double fma_flops(int vector_bits, int threads, int64_t iters) {
  volatile float sink = 0.0f;
  double start = omp_get_wtime();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
  sink += vector_bits == 512 ? fma_avx512(iters) : vector_bits == 256 ? fma_avx2(iters) : fma_sse2(iters);
  double seconds = omp_get_wtime() - start;
  return 2.0 * CHAINS * (vector_bits / 32) * (double)iters * threads / seconds;
}

// Bytes/s of `threads` threads reading `n` 16-byte vectors, each thread its own contiguous share
// (four independent accumulators so that the loads, not the ORs, set the pace).
double read_bandwidth(const __m128i* data, int64_t n, int threads) {
  volatile int sink = 0;
  double start = omp_get_wtime();
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), count = omp_get_num_threads();
    const int64_t begin = n * t / count, end = n * (t + 1) / count;
    __m128i acc[4] = {_mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128(), _mm_setzero_si128()};
    int64_t i = begin;
    for (; i + 4 <= end; i += 4)
      for (int a = 0; a < 4; ++a) acc[a] = _mm_or_si128(acc[a], _mm_load_si128(data + i + a));
    for (; i < end; ++i) acc[0] = _mm_or_si128(acc[0], _mm_load_si128(data + i));
    const __m128i all = _mm_or_si128(_mm_or_si128(acc[0], acc[1]), _mm_or_si128(acc[2], acc[3]));
#pragma omp atomic
    sink += _mm_cvtsi128_si32(all);
  }
  double seconds = omp_get_wtime() - start;
  return 16.0 * (double)n / seconds;
}
