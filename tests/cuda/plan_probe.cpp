// CPU probe of the CUDA planner and tile schedule (gemm/cuda/planner.h, tile_scheduler.h),
// compiled with the host C++ compiler by test_cuda_heuristics.py (no CUDA needed). Reads "m n k" lines
// on stdin; argument 1: SM count (2-CTA cluster slots: half of it).
//   plan_probe SMS         prints the chosen plan per shape:
//                          "m n k config block_m block_n stream_k grid dp_tiles sk_tiles sk_ctas cluster_n
//                          a_scale_gather k_split b_evict_first scored" (grid in clusters, tiles in cluster
//                          tiles of BLOCK_M x cluster_n * BLOCK_N; a_scale_gather: a 128+-row tile gathers
//                          row-major A scales; scored: the config whose plan the planner scored, which a
//                          paired twin runs in its place)
//   plan_probe SMS --walk  for every config, whole-tile, stream-K and K-split plans, walks every CTA's work
//                          units as the kernel does (every rank of a K split) and checks the shares and
//                          the stream-K hand-off: each (tile, K block)
//                          covered exactly once, whole tiles complete, one head per region tile that
//                          stores it, later pieces in distinct slots inside the workspace, each opening
//                          its CTA's range, and each head's slot list = its tile's later pieces in K
//                          order, all on CTAs of lower index than the head's (no deadlock), and at
//                          most kMaxLaterPieces of them (the kernel's unrolled fix-up). Prints
//                          "FAIL ..." lines and a final "walked N plans, F failures".
//   plan_probe SMS --costs for every config, the model's cost of its whole-tile, stream-K and K-split plans
//                          ("m n k config stream_k k_split grid cost_us wave_fill", plans that fit), then
//                          "chosen CONFIG/STREAM_K[/K_SPLIT]" (scored config): what the planner weighed.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "gemm/cuda/planner.h"

namespace {

using namespace gemm::cuda;

int failures = 0;

void fail(const char* what, long long m, long long n, long long k, int cfg, bool sk, long long a, long long b) {
  ++failures;
  std::printf("FAIL %s: %lldx%lldx%lld config %d stream_k %d (%lld, %lld)\n", what, m, n, k, cfg, sk ? 1 : 0, a, b);
}

struct Piece {
  int kb_begin, slot, cta;
};

void walk(const Plan& p, long long m, long long n, long long k) {
  const TileSchedule& s = p.sched;
  const bool sk = p.stream_k();
  const long long tiles = static_cast<long long>(s.dp_tiles) + s.sk_tiles;
  if (tiles != static_cast<long long>(s.m_blocks) * s.n_blocks) fail("tile count", m, n, k, p.config, sk, tiles, 0);
  if (sk && s.dp_tiles % p.grid != 0) fail("DP tiles not whole waves", m, n, k, p.config, sk, s.dp_tiles, p.grid);
  if (sk && (s.sk_ctas > p.grid || s.sk_ctas > s.sk_iters())) fail("SK CTAs", m, n, k, p.config, sk, s.sk_ctas, p.grid);
  // (tile, kb) -> times covered; region tile -> its later pieces (walk order) and its head.
  std::vector<int> covered(static_cast<size_t>(tiles) * s.kblocks, 0);
  std::map<long long, std::vector<Piece>> later;
  std::map<long long, std::vector<std::pair<WorkUnit, int>>> heads;  // (unit, CTA)
  std::vector<int> slot_used(static_cast<size_t>(s.sk_ctas), 0);
  std::vector<long long> tile_of(static_cast<size_t>(tiles), -1);  // (m_blk, n_blk) -> grouped index
  for (long long t = 0; t < tiles; ++t) {
    const TileCoord c = tile_coord(static_cast<int32_t>(t), s.m_blocks, s.n_blocks);
    long long& slot = tile_of[static_cast<size_t>(c.m_blk) * s.n_blocks + c.n_blk];
    if (slot >= 0) fail("tile_coord not a bijection", m, n, k, p.config, sk, t, slot);
    slot = t;
  }
  for (int cta = 0; cta < p.grid * s.k_split; ++cta) {
    WorkUnit w;
    const int cluster = cta / s.k_split, k_rank = cta % s.k_split;
    const int dp_units = cta_dp_units(s, cluster, p.grid);
    // Walked as the kernel the launcher picks walks it: without stream-K code where there is no SK region.
    auto next_unit = [&](int unit) {
      return s.sk_tiles > 0 ? cta_work_unit<true>(s, cluster, p.grid, k_rank, s.k_split, unit, w)
                            : cta_work_unit<false>(s, cluster, p.grid, k_rank, s.k_split, unit, w);
    };
    for (int unit = 0; next_unit(unit); ++unit) {
      if (w.m_blk < 0 || w.m_blk >= s.m_blocks || w.n_blk < 0 || w.n_blk >= s.n_blocks || w.kb_begin < 0 ||
          w.kb_end > s.kblocks || w.kb_begin >= w.kb_end) {
        fail("unit out of range", m, n, k, p.config, sk, cta, unit);
        return;
      }
      const long long t = tile_of[static_cast<size_t>(w.m_blk) * s.n_blocks + w.n_blk];
      for (int kb = w.kb_begin; kb < w.kb_end; ++kb) ++covered[static_cast<size_t>(t) * s.kblocks + kb];
      if (t < s.dp_tiles) {
        const int share_begin = k_rank * s.kblocks / s.k_split, share_end = (k_rank + 1) * s.kblocks / s.k_split;
        if (w.slot >= 0 || w.kb_begin != share_begin || w.kb_end != share_end || w.fix_begin != w.fix_end) {
          fail("whole-tile unit", m, n, k, p.config, sk, t, cta);
        }
      } else if (w.slot >= 0) {
        if (w.slot >= static_cast<int>(slot_used.size()) || w.kb_begin == 0) {
          fail("later piece outside the workspace or at K block 0", m, n, k, p.config, sk, t, w.slot);
          continue;
        }
        if (slot_used[w.slot]++) fail("slot written twice", m, n, k, p.config, sk, w.slot, cta);
        if (unit != dp_units) fail("later piece does not open its range", m, n, k, p.config, sk, cta, unit);
        later[t - s.dp_tiles].push_back({w.kb_begin, w.slot, cta});
      } else {
        if (w.kb_begin != 0) fail("head not at K block 0", m, n, k, p.config, sk, t, cta);
        heads[t - s.dp_tiles].push_back({w, cta});
      }
    }
  }
  for (size_t i = 0; i < covered.size(); ++i) {
    if (covered[i] != 1) {
      fail("(tile, kb) not covered exactly once", m, n, k, p.config, sk, static_cast<long long>(i), covered[i]);
    }
  }
  // Each head's view: slots [fix_begin, fix_end) are its tile's later pieces in K order, on lower CTAs.
  for (int rt = 0; rt < s.sk_tiles; ++rt) {
    if (heads[rt].size() != 1) {
      fail("heads per region tile", m, n, k, p.config, sk, rt, static_cast<long long>(heads[rt].size()));
      continue;
    }
    const WorkUnit& h = heads[rt][0].first;
    const int head_cta = heads[rt][0].second;
    std::vector<Piece> pieces = later[rt];
    std::sort(pieces.begin(), pieces.end(), [](const Piece& a, const Piece& b) { return a.kb_begin < b.kb_begin; });
    if (h.fix_end - h.fix_begin > kMaxLaterPieces) {
      fail("head has more later pieces than kMaxLaterPieces", m, n, k, p.config, sk, rt, h.fix_end - h.fix_begin);
    }
    if (h.fix_end - h.fix_begin != static_cast<int>(pieces.size())) {
      fail("head's piece count", m, n, k, p.config, sk, rt, h.fix_end - h.fix_begin);
      continue;
    }
    for (size_t i = 0; i < pieces.size(); ++i) {
      if (pieces[i].slot != h.fix_begin + static_cast<int>(i)) {
        fail("head's slot / K order", m, n, k, p.config, sk, rt, pieces[i].slot);
      }
      if (pieces[i].cta >= head_cta) {
        fail("head waits for a CTA of higher index", m, n, k, p.config, sk, rt, pieces[i].cta);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int num_sms = argc > 1 ? std::atoi(argv[1]) : 132;
  GpuSlots gpu;
  gpu.sms = num_sms;
  for (int size = 2; size <= kMaxClusterCtas; ++size) gpu.clusters[size] = num_sms / size;
  const bool walk_mode = argc > 2 && std::strcmp(argv[2], "--walk") == 0;
  const bool cost_mode = argc > 2 && std::strcmp(argv[2], "--costs") == 0;
  long long m, n, k;
  int walked = 0;
  if (!walk_mode && !cost_mode) std::printf("configs %d\n", kNumTileConfigs);
  while (std::scanf("%lld %lld %lld", &m, &n, &k) == 3) {
    if (walk_mode) {
      for (int cfg = 0; cfg < kNumTileConfigs; ++cfg) {
        for (const bool sk : {false, true}) {
          walk(make_plan(cfg, sk, 1, m, n, k, gpu, 2), m, n, k);
          ++walked;
        }
        for (int split = 2; split <= kMaxKSplit; ++split) {
          const Plan p = make_plan(cfg, false, split, m, n, k, gpu, 2);
          if (!p.fits) continue;
          if (p.sched.k_split != split || p.stream_k()) fail("K-split plan", m, n, k, cfg, false, split, 0);
          walk(p, m, n, k);
          ++walked;
        }
      }
      continue;
    }
    if (cost_mode) {
      for (int cfg = 0; cfg < kNumTileConfigs; ++cfg) {
        for (int split = 1; split <= kMaxKSplit; ++split) {
          for (const bool sk : {false, true}) {
            const Plan p = make_plan(cfg, sk, split, m, n, k, gpu, 2);
            if (!p.fits || (sk && !p.stream_k())) continue;
            std::printf("%lld %lld %lld %d %d %d %d %.2f %.3f\n", m, n, k, cfg, sk ? 1 : 0, split, p.grid, p.cost_us,
                        p.wave_fill);
          }
        }
      }
      const Plan p = choose_plan(m, n, k, gpu, 2);
      std::printf("chosen %d/%d", scored_config(p.config), p.stream_k() ? 1 : 0);
      if (p.sched.k_split > 1) std::printf("/%d", p.sched.k_split);
      std::printf("\n");
      continue;
    }
    const Plan p = choose_plan(m, n, k, gpu, 2);
    const TileConfig& c = kTileConfigs[p.config];
    std::printf("%lld %lld %lld %d %d %d %d %d %d %d %d %d %d %d %d %d\n", m, n, k, p.config, c.block_m, c.block_n,
                p.stream_k() ? 1 : 0, p.grid, p.sched.dp_tiles, p.sched.sk_tiles, p.sched.sk_ctas, c.cluster_n,
                scales_by_tma(c) && gather_a_scales(p) ? 1 : 0, p.sched.k_split, b_evict_first(p) ? 1 : 0, scored_config(p.config));
  }
  if (walk_mode) std::printf("walked %d plans, %d failures\n", walked, failures);
  return failures == 0 ? 0 : 1;
}
