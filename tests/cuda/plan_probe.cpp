// CPU probe of the CUDA planner and tile schedule (gemm/cuda/gemm_heuristics.h, tile_scheduler.h),
// compiled with the host C++ compiler by test_cuda_heuristics.py (no CUDA needed). Reads "m n k" lines
// on stdin; argument 1: SM count.
//   plan_probe SMS         prints the chosen plan per shape:
//                          "m n k config block_m block_n stream_k grid dp_tiles sk_tiles sk_ctas"
//   plan_probe SMS --walk  for every config, whole-tile and stream-K plans, walks every CTA's work units
//                          as the kernel does and checks them against what stream_k_reduce_kernel reads:
//                          each (tile, K block) covered exactly once, whole tiles complete, SK pieces in
//                          distinct slots inside the workspace, and each region tile's pieces found by
//                          the reduction's owner/slot arithmetic in K order. Prints "FAIL ..." lines and
//                          a final "walked N plans, F failures".
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "gemm/cuda/gemm_heuristics.h"

namespace {

using namespace gemm::cuda;

int failures = 0;

void fail(const char* what, long long m, long long n, long long k, int cfg, bool sk, long long a, long long b) {
  ++failures;
  std::printf("FAIL %s: %lldx%lldx%lld config %d stream_k %d (%lld, %lld)\n", what, m, n, k, cfg, sk ? 1 : 0, a, b);
}

void walk(const Plan& p, long long m, long long n, long long k) {
  const TileSchedule& s = p.sched;
  const bool sk = p.stream_k();
  const long long tiles = static_cast<long long>(s.dp_tiles) + s.sk_tiles;
  if (tiles != static_cast<long long>(s.m_blocks) * s.n_blocks) fail("tile count", m, n, k, p.config, sk, tiles, 0);
  if (sk && s.dp_tiles % p.grid != 0) fail("DP tiles not whole waves", m, n, k, p.config, sk, s.dp_tiles, p.grid);
  if (sk && (s.sk_ctas > p.grid || s.sk_ctas > s.sk_iters())) fail("SK CTAs", m, n, k, p.config, sk, s.sk_ctas, p.grid);
  // (tile, kb) -> times covered; region tile -> (first K block, slot) of each piece, in walk order.
  std::vector<int> covered(static_cast<size_t>(tiles) * s.kblocks, 0);
  std::map<long long, std::vector<std::pair<int, int>>> pieces;
  std::vector<int> slot_used(static_cast<size_t>(s.sk_ctas) * s.sk_max_pieces, 0);
  std::vector<long long> tile_of(static_cast<size_t>(tiles), -1);  // (m_blk, n_blk) -> grouped index
  for (long long t = 0; t < tiles; ++t) {
    const TileCoord c = tile_coord(static_cast<int32_t>(t), s.m_blocks, s.n_blocks);
    long long& slot = tile_of[static_cast<size_t>(c.m_blk) * s.n_blocks + c.n_blk];
    if (slot >= 0) fail("tile_coord not a bijection", m, n, k, p.config, sk, t, slot);
    slot = t;
  }
  for (int cta = 0; cta < p.grid; ++cta) {
    WorkUnit w;
    for (int unit = 0; work_unit(s, cta, p.grid, unit, w); ++unit) {
      if (w.m_blk < 0 || w.m_blk >= s.m_blocks || w.n_blk < 0 || w.n_blk >= s.n_blocks || w.kb_begin < 0 ||
          w.kb_end > s.kblocks || w.kb_begin >= w.kb_end) {
        fail("unit out of range", m, n, k, p.config, sk, cta, unit);
        return;
      }
      const long long t = tile_of[static_cast<size_t>(w.m_blk) * s.n_blocks + w.n_blk];
      for (int kb = w.kb_begin; kb < w.kb_end; ++kb) ++covered[static_cast<size_t>(t) * s.kblocks + kb];
      if (w.slot < 0) {
        if (t >= s.dp_tiles || w.kb_begin != 0 || w.kb_end != s.kblocks) fail("whole-tile unit", m, n, k, p.config, sk, t, cta);
      } else {
        if (t < s.dp_tiles || w.slot >= static_cast<int>(slot_used.size())) {
          fail("SK piece outside the region or workspace", m, n, k, p.config, sk, t, w.slot);
          continue;
        }
        if (slot_used[w.slot]++) fail("slot written twice", m, n, k, p.config, sk, w.slot, cta);
        pieces[t - s.dp_tiles].push_back({w.kb_begin, w.slot});
      }
    }
  }
  for (size_t i = 0; i < covered.size(); ++i) {
    if (covered[i] != 1) fail("(tile, kb) not covered exactly once", m, n, k, p.config, sk, static_cast<long long>(i), covered[i]);
  }
  // The reduction's view of each region tile: owners first..last, slots from sk_slot, in K order.
  for (int rt = 0; rt < s.sk_tiles; ++rt) {
    std::vector<std::pair<int, int>> expect = pieces[rt];
    std::vector<std::pair<int, int>> sorted = expect;
    std::sort(sorted.begin(), sorted.end());
    const int first = sk_range_owner(rt * s.kblocks, s.sk_iters(), s.sk_ctas);
    const int last = sk_range_owner((rt + 1) * s.kblocks - 1, s.sk_iters(), s.sk_ctas);
    if (last - first + 1 != static_cast<int>(sorted.size())) {
      fail("reduce piece count", m, n, k, p.config, sk, rt, last - first + 1);
      continue;
    }
    for (int c = first; c <= last; ++c) {
      if (sk_slot(s, c, rt) != sorted[c - first].second) fail("reduce slot / K order", m, n, k, p.config, sk, rt, c);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int num_sms = argc > 1 ? std::atoi(argv[1]) : 132;
  const bool walk_mode = argc > 2 && std::strcmp(argv[2], "--walk") == 0;
  long long m, n, k;
  int walked = 0;
  if (!walk_mode) std::printf("configs %d\n", kNumTileConfigs);
  while (std::scanf("%lld %lld %lld", &m, &n, &k) == 3) {
    if (walk_mode) {
      for (int cfg = 0; cfg < kNumTileConfigs; ++cfg) {
        for (const bool sk : {false, true}) {
          walk(make_plan(cfg, sk, m, n, k, num_sms, 2), m, n, k);
          ++walked;
        }
      }
      continue;
    }
    const Plan p = choose_plan(m, n, k, num_sms, 2);
    const TileConfig& c = kTileConfigs[p.config];
    std::printf("%lld %lld %lld %d %d %d %d %d %d %d %d\n", m, n, k, p.config, c.block_m, c.block_n,
                p.stream_k() ? 1 : 0, p.grid, p.sched.dp_tiles, p.sched.sk_tiles, p.sched.sk_ctas);
  }
  if (walk_mode) std::printf("walked %d plans, %d failures\n", walked, failures);
  return failures == 0 ? 0 : 1;
}
