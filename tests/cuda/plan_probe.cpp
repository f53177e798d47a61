// Prints the plan gemm/cuda/gemm_heuristics.h picks for each "m n k" line on stdin (argument: SM
// count): "m n k config block_m block_n splits grid". Used by test_cuda_heuristics.py (compiled
// with the host C++ compiler, no CUDA needed).
#include <cstdio>
#include <cstdlib>

#include "gemm/cuda/gemm_heuristics.h"

int main(int argc, char** argv) {
  const int num_sms = argc > 1 ? std::atoi(argv[1]) : 132;
  long long m, n, k;
  std::printf("configs %d\n", gemm::cuda::kNumTileConfigs);
  while (std::scanf("%lld %lld %lld", &m, &n, &k) == 3) {
    const gemm::cuda::Plan p = gemm::cuda::choose_plan(m, n, k, num_sms, 2);
    const gemm::cuda::TileConfig& c = gemm::cuda::kTileConfigs[p.config];
    std::printf("%lld %lld %lld %d %d %d %d %d\n", m, n, k, p.config, c.block_m, c.block_n, p.splits,
                p.grid);
  }
  return 0;
}
