// ThreadSanitizer driver: runs the emulated GEMM (every test config and the heuristic) on small ragged
// problems with in-place and staged operand layouts. The emulator's barriers are mutexes and condition
// variables, so TSan knows exactly which LDS accesses __syncthreads orders: a missing barrier is
// reported as a data race even when the racing accesses happen not to collide in this run.
// Built by tests/rocm/emu/emu_build.py ("race_driver"), run by tests/rocm/test_races.py.
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "emu_abi.h"

namespace {

constexpr int64_t kBlock = 128;  // scale block (gemm::kScaleBlockK / kScaleBlockN)
constexpr int kFnuz = 1, kFn = 0, kOutFp32 = 2;
constexpr int kErrLen = 1024;

struct Case {
  int64_t m, n, k;
  bool a_m_major;     // A stored [k][m] (in place when m is a multiple of 16)
  bool b_byte_strided;  // B with a K stride of 2 bytes: staged through workspace
  int format;
};

std::vector<uint8_t> random_fp8(std::mt19937& rng, size_t count) {
  std::vector<uint8_t> v(count);
  for (auto& x : v) x = static_cast<uint8_t>(rng() % 0x7F);  // finite, positive: values do not matter here
  return v;
}

std::vector<float> random_scales(std::mt19937& rng, size_t count) {
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(count);
  for (auto& x : v) x = d(rng);
  return v;
}

}  // namespace

int main() {
  const Case cases[] = {
      {70, 72, 208, false, false, kFnuz},
      {48, 80, 200, true, true, kFn},
  };
  std::mt19937 rng(1);
  int runs = 0, failed = 0;
  for (const Case& c : cases) {
    const int64_t kb = (c.k + kBlock - 1) / kBlock, nb = (c.n + kBlock - 1) / kBlock;
    const int64_t b_stride_k = c.b_byte_strided ? 2 : 1;
    const auto a = random_fp8(rng, c.m * c.k);
    const auto b = random_fp8(rng, c.n * c.k * b_stride_k);
    const auto a_scale = random_scales(rng, c.m * kb), b_scale = random_scales(rng, nb * kb);
    std::vector<float> out(c.m * c.n);
    EmuGemmArgs args{};
    args.m = c.m, args.n = c.n, args.k = c.k;
    args.a = a.data();
    args.a_stride_m = c.a_m_major ? 1 : c.k;
    args.a_stride_k = c.a_m_major ? c.m : 1;
    args.b = b.data(), args.b_stride_n = c.k * b_stride_k, args.b_stride_k = b_stride_k;
    args.a_scale = a_scale.data(), args.a_scale_stride_m = kb, args.a_scale_stride_k = 1;
    args.b_scale = b_scale.data(), args.b_scale_stride_n = kb, args.b_scale_stride_k = 1;
    args.c = out.data(), args.c_stride_m = c.n, args.c_stride_n = 1;
    args.a_format = args.b_format = c.format;
    args.c_format = kOutFp32;
    for (int config = -1; config < emu_num_configs(); ++config) {
      EmuStats stats{};
      char err[kErrLen] = {};
      ++runs;
      if (emu_gemm(&args, config, &stats, err, kErrLen) != 0) {
        ++failed;
        std::printf("m=%lld n=%lld k=%lld config %d: %s\n", static_cast<long long>(c.m), static_cast<long long>(c.n),
                    static_cast<long long>(c.k), config, err);
      }
    }
  }
  std::printf("%d passed, %d failed\n", runs - failed, failed);
  return failed == 0 ? 0 : 1;
}
