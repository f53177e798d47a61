// Host-only plan choice for the sm_90a FP8 GEMM: for a problem, the planner scores every tile
// configuration (tile_configs.h), with whole tiles only, with a stream-K region for the partial last
// wave, and (small outputs) with K split over a cluster (tile_scheduler.h), with a per-SM roofline model
// of the persistent grid, and keeps the cheapest. Plain C++ (no CUDA include), so that a CPU test
// compiles it; the kernel never includes it. docs/cuda.md gives the model and the data it was fitted to.
#pragma once

#include <algorithm>
#include <cstdint>

#include "../gemm_contract.h"
#include "hopper_layout.h"
#include "tile_configs.h"
#include "tile_scheduler.h"

namespace gemm::cuda {

// K blocks per stream-K range at least: a piece costs an fp32 tile store, its read by the head and
// a pipeline fill.
constexpr int kMinStreamKIters = 8;

// Model constants, fitted to timings of every forced plan (each config, whole tiles, stream-K and K
// splits) of 421 shapes on an H100: 191 across M, N, K and 230 decode shapes (tests/cuda/planner_timings.jsonl,
// docs/cuda.md). Tensor rate per SM under the power cap, for one, two and three math warpgroups.
constexpr double kSmFlopsPerUs[kMaxMathWarpgroups] = {6.0e6, 9.02e6, 9.89e6};
// Two warpgroups of two slabs (256x128): about the two-warpgroup rate, and a unit ends with four staged
// stores a warpgroup, so small-K shapes keep 128x128 tiles.
constexpr double kSmFlopsPerUsTwoSlabs = 10.0e6;
constexpr double kTwoSlabUnitOverheadUs = 1.2;
constexpr double sm_flops_per_us(const TileConfig& c) {
  return c.slabs > 1 ? kSmFlopsPerUsTwoSlabs : kSmFlopsPerUs[num_math_warpgroups(c) - 1];
}
// A narrow wgmma re-reads A more per FLOP: a K block of a BLOCK_N-wide tile costs as if it were
// kNarrowTileCols columns wider.
constexpr double kNarrowTileCols = 11.6;
// Drain + epilogue per unit.
constexpr double unit_overhead_us(const TileConfig& c) {
  return c.slabs > 1 ? kTwoSlabUnitOverheadUs : num_math_warpgroups(c) == 1 ? 0.1 : 0.2;
}
// What one CTA loads from L2 per K block: its share of the multicast A tile, and its B tile.
constexpr int cta_stage_load_bytes(const TileConfig& c) { return (c.block_m / c.cluster_n + c.block_n) * kBlockK; }
// The rate at which a CTA takes in its stage_bytes per K block from L2.
constexpr double kSmBytesPerUs = 75.6e3;
// 2-CTA clusters (A multicast, 192x128): K blocks faster than the same tile on one CTA (3-9 % at M = 4096,
// more than the stream term's saved bytes account for), and a fixed cost per launch (which also absorbs
// their slower short runs), so they are planned only for long runs.
constexpr double kClusterKBlockTime = 0.91;
constexpr double kClusterFixedUs = 5.09;
// A tile of two warpgroups on 64 columns (128x64) issues twice the wgmmas of a 64x128 tile for the same
// FLOPs and bytes, and its K blocks measured 1.12-1.14x slower at equal tile counts.
constexpr double kNarrowTwoWgKBlockTime = 1.12;
constexpr int kWideTileCols = 128;  // the width of the other multi-warpgroup tiles
constexpr double narrow_two_wg_factor(const TileConfig& c) {
  return num_math_warpgroups(c) > 1 && c.block_n < kWideTileCols ? kNarrowTwoWgKBlockTime : 1.0;
}
// A CTA streams what no other CTA reads (the B tiles of a one-M-block decode shape) from DRAM at this
// rate.
constexpr double kSmDramBytesPerUs = 46.0e3;
// A 128+-row tile on a problem of one M block streams B through half the CTAs that 64-row tiles would
// put on it, and measured 1.1-1.2x slower than them on the decode shapes of the H100 data.
constexpr double kOneMBlockStream = 1.40;
constexpr double kL2Bytes = 50.0 * 1024 * 1024;  // H100 and H200
constexpr double kDramBytesPerUs = 2.47e6;        // whole-GPU streaming rate of decode shapes
// Stream-K adds to its share of K blocks a fixed cost (the flag reset before the launch, the head's
// wait) and, on the critical path, one partial written by a later piece and those its head reads back
// at kFixupBytesPerUs per SM. The rate is low because it also absorbs the extra cycles stream-K CTAs
// pay per K block, so all-stream-K plans run only where whole tiles leave most SMs idle.
constexpr double kStreamKFixedUs = 4.45;
constexpr double kFixupBytesPerUs = 10.5e3;
// A stream-K region that follows whole waves (its pieces are the last unit of every CTA) is cheaper
// than the all-stream-K plans those constants were fitted to: its K blocks cost 1.2x whole-tile ones
// (ncu counts 1.16x the cycles; the rest is the heads' waits), and its heads read later pieces faster.
constexpr double kTailSkKBlockTime = 1.20;
constexpr double kTailFixupBytesPerUs = 90.0e3;

// A K split gives each CTA a share of at least kMinSplitKBlocks K blocks (a share is a pipeline fill, a
// partial and two cluster barriers). Splits paid only on problems of at most a quarter of the SMs'
// worth of 64x64 tiles, and on about half the SMs at most: beyond that, un-split plans already stream
// B at the rate HBM gives. Each rank past the first costs about kKSplitRankUs beyond its share of the K
// blocks (the clustered launch, the rank's pipeline fill, its partial read through DSMEM, the barriers).
constexpr int kMinSplitKBlocks = 4;
constexpr int kKSplitSmsPerTile = 4;            // a split needs at most SMs / 4 64x64 tiles of output
constexpr double kKSplitMaxSmFraction = 0.55;  // and runs on at most this share of the SMs
constexpr double kKSplitRankUs = 1.02;
// A split's K blocks cost more than whole tiles' on as many CTAs (fitted, docs/cuda.md).
constexpr double kKSplitKBlockTime = 1.4;

// What the planner knows of the GPU: SMs, and how many clusters of each size fit at once
// (cudaOccupancyMaxActiveClusters: fewer than SMs / size where GPCs do not divide evenly).
constexpr int kMaxClusterCtas = kMaxKSplit > kMaxClusterN ? kMaxKSplit : kMaxClusterN;
struct GpuSlots {
  int sms = 0;
  int clusters[kMaxClusterCtas + 1] = {};  // [s]: clusters of s CTAs (s >= 2)
  constexpr int units(int cluster_ctas) const { return cluster_ctas == 1 ? sms : clusters[cluster_ctas]; }
};

struct Plan {
  int config = 0;  // index into kTileConfigs
  bool fits = true;  // false: beyond the 32-bit schedule (> 2^30 tiles or K blocks: a > 8 TB output)
  // The schedule counts clusters and cluster tiles (BLOCK_M x cluster_n * BLOCK_N); without a
  // cluster those are CTAs and tiles.
  TileSchedule sched;
  int grid = 0;    // persistent clusters
  double cost_us = 0;
  // What breaks a tie in cost_us (decode and short-K shapes whose cost is all DRAM): the share of the
  // last wave's CTAs that have a tile, then the CTAs pulling (ctas()), then the bytes they load from L2.
  double wave_fill = 1;
  double loaded_bytes = 0;
  constexpr int cluster_n() const { return kTileConfigs[config].cluster_n; }
  constexpr int cluster_ctas() const { return cluster_n() * sched.k_split; }
  constexpr int ctas() const { return grid * cluster_ctas(); }
  constexpr bool stream_k() const { return sched.sk_tiles > 0; }
  // Workspace of the stream-K hand-off: one BLOCK_M x BLOCK_N fp32 slot per range, and one flag per
  // (range, math warpgroup), zeroed before the launch.
  constexpr int64_t partial_floats() const {
    return static_cast<int64_t>(sched.sk_ctas) * cluster_n() * kTileConfigs[config].block_m *
           kTileConfigs[config].block_n;
  }
  constexpr int64_t num_flags() const {
    return static_cast<int64_t>(sched.sk_ctas) * cluster_n() * num_math_warpgroups(kTileConfigs[config]);
  }
};

constexpr int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Whether a plan's whole tiles (or K-split shares) are long enough to load in pairs: only then does the
// launcher encode the paired tensor maps and the kernel prefetch them (a config that pairs_loads()).
// Its stream-K ranges pair only where they are as long (the kernel checks each unit).
constexpr bool long_units(const Plan& p) { return p.sched.kblocks / p.sched.k_split >= kMinPairUnitKBlocks; }
constexpr bool pairs_planned(const Plan& p) { return pairs_loads(kTileConfigs[p.config]) && long_units(p); }

// The config with the same tiles and cluster that loads in pairs, for one that does not (-1: none).
constexpr bool same_tiles(const TileConfig& a, const TileConfig& b) {
  return a.block_m == b.block_m && a.block_n == b.block_n && a.cluster_n == b.cluster_n && a.slabs == b.slabs;
}
constexpr int paired_twin(int config) {
  for (int i = 0; i < kNumTileConfigs; ++i) {
    if (!kTileConfigs[config].pairs && kTileConfigs[i].pairs && same_tiles(kTileConfigs[i], kTileConfigs[config])) {
      return i;
    }
  }
  return -1;
}
// The config whose plans the planner scores for `config`: the one a paired twin stands in for (choose_plan
// swaps the twin in), else `config` itself.
constexpr int scored_config(int config) {
  for (int i = 0; i < kNumTileConfigs; ++i) {
    if (paired_twin(i) == config) return i;
  }
  return config;
}
constexpr bool is_paired_twin(int config) { return scored_config(config) != config; }

// Whether a config can split K over a cluster of k_split CTAs at this K (k_split 1: always).
inline bool k_split_ok(const TileConfig& c, int k_split, int64_t k) {
  return k_split == 1 ||
         (splits_k(c) && k_split <= kMaxKSplit && cdiv(k, kBlockK) >= int64_t{kMinSplitKBlocks} * k_split);
}

// The plan of one tile config: whole tiles only, or (`stream_k`) full waves of whole tiles and the
// rest as a stream-K region over up to all the GPU's clusters, or (`k_split` > 1) whole tiles each
// split over a cluster of k_split CTAs. A stream-K plan of a problem whose tiles fill whole waves is
// the whole-tile plan; stream-K and a K split do not combine (fits = false).
inline Plan make_plan(int config, bool stream_k, int k_split, int64_t m, int64_t n, int64_t k, const GpuSlots& gpu,
                      int out_bytes) {
  const TileConfig& c = kTileConfigs[config];
  Plan p;
  p.config = config;
  const int slots = k_split_ok(c, k_split, k) && !(stream_k && k_split > 1)
                        ? gpu.units(c.cluster_n * k_split)  // clusters that run at once
                        : 0;
  if (slots < 1) {
    p.fits = false;
    return p;
  }
  const int64_t kblocks = cdiv(k, kBlockK), m_blocks = cdiv(m, c.block_m);
  const int64_t n_blocks = cdiv(n, static_cast<int64_t>(c.block_n) * c.cluster_n);
  const int64_t tiles = m_blocks * n_blocks;
  int64_t sk_tiles = stream_k ? tiles % slots : 0;
  // Ranges of at least min_range K blocks (sk_ctas <= iters / min_range): range starts are that far
  // apart, so fewer than kblocks / min_range + 1 <= kMaxLaterPieces + 1 ranges meet one tile.
  const int64_t min_range = std::max<int64_t>(kMinStreamKIters, cdiv(kblocks, kMaxLaterPieces));
  int64_t sk_ctas = std::min<int64_t>(slots, std::max<int64_t>(1, sk_tiles * kblocks / min_range));
  if (!schedule_fits_int32(tiles, sk_tiles * kblocks, sk_ctas)) sk_tiles = 0;  // whole tiles only
  p.fits = schedule_fits_int32(tiles, 0, 0) && schedule_fits_int32(kblocks, 0, 0);
  TileSchedule& s = p.sched;
  s.kblocks = static_cast<int32_t>(kblocks);
  s.k_split = k_split;
  s.m_blocks = static_cast<int32_t>(m_blocks);
  s.n_blocks = static_cast<int32_t>(n_blocks);
  s.sk_tiles = static_cast<int32_t>(sk_tiles);
  s.dp_tiles = static_cast<int32_t>(tiles - sk_tiles);
  int64_t range = 0;  // K blocks of the longest SK range
  if (s.sk_tiles > 0) {
    s.sk_ctas = static_cast<int32_t>(sk_ctas);
    range = cdiv(s.sk_iters(), s.sk_ctas);
    s.sk_max_pieces = static_cast<int32_t>(cdiv(range, s.kblocks) + 1);
  }
  p.grid = static_cast<int>(s.dp_tiles > 0 ? std::min<int64_t>(s.dp_tiles, slots) : s.sk_ctas);
  const double waves = static_cast<double>(cdiv(s.dp_tiles, p.grid));
  const bool sk_tail = p.stream_k() && s.dp_tiles > 0;  // a stream-K region after whole waves
  const double kb_per_cta = waves * static_cast<double>(cdiv(s.kblocks, k_split)) +
                            static_cast<double>(range) * (sk_tail ? kTailSkKBlockTime : 1.0);
  const double units_per_cta = waves + (p.stream_k() ? std::min<double>(s.sk_max_pieces, 2.0) : 0.0);
  const double kblock_factor = (c.cluster_n > 1 ? kClusterKBlockTime : 1.0) * narrow_two_wg_factor(c) *
                               (k_split > 1 ? kKSplitKBlockTime : 1.0);
  const double compute = kb_per_cta * 2.0 * c.block_m * c.block_n * kBlockK / sm_flops_per_us(c) *
                         (1.0 + kNarrowTileCols / c.block_n) * kblock_factor;
  const double unique = static_cast<double>(m * k + n * k + m * n * out_bytes);
  // The share of the loaded bytes that comes from DRAM (read by one CTA only) streams slower.
  const double loaded = static_cast<double>(tiles) * c.cluster_n * s.kblocks * cta_stage_load_bytes(c);  // any split
  p.loaded_bytes = loaded;
  if (!p.stream_k()) p.wave_fill = static_cast<double>(s.dp_tiles) / (waves * p.grid);
  const double from_dram = std::min(1.0, static_cast<double>(m * k + n * k) / loaded);
  const double stream = kb_per_cta * cta_stage_load_bytes(c) * kblock_factor *
                        (from_dram / kSmDramBytesPerUs + (1.0 - from_dram) / kSmBytesPerUs) *
                        (c.block_m > hopper::kWgmmaM && m <= c.block_m ? kOneMBlockStream : 1.0);
  // At most one later piece per range: an fp32 tile written to L2 and read back by its head.
  const double tile_partial_bytes = static_cast<double>(c.block_m) * c.block_n * sizeof(float);  // per CTA
  const double partials =
      p.stream_k() ? static_cast<double>(s.sk_ctas) * c.cluster_n * tile_partial_bytes : 0.0;
  // Stream-K pieces of tiles that share an A or B block run at different times on different SMs; when
  // the operands do not fit in L2 the region's loads are all DRAM reads.
  const bool operands_fit_l2 = static_cast<double>(m * k + n * k) <= kL2Bytes;
  const double sk_dram =
      operands_fit_l2 ? 0.0 : static_cast<double>(s.sk_tiles) * c.cluster_n * s.kblocks * cta_stage_load_bytes(c);
  const double dram = (unique + sk_dram + 2.0 * partials) / kDramBytesPerUs;
  const double reads_per_head = p.stream_k() ? static_cast<double>(cdiv(s.sk_ctas, s.sk_tiles)) : 0.0;
  const double k_split_cost = (k_split - 1) * kKSplitRankUs;
  p.cost_us = std::max({compute, stream, dram}) + units_per_cta * unit_overhead_us(c) +
              (c.cluster_n > 1 ? kClusterFixedUs : 0.0) + k_split_cost +
              (p.stream_k() ? kStreamKFixedUs + (1.0 + reads_per_head) * tile_partial_bytes /
                                                    (sk_tail ? kTailFixupBytesPerUs : kFixupBytesPerUs)
                            : 0.0);
  return p;
}

// Row-major A scales of 128+-row tiles skip the transpose kernel when a CTA runs few K blocks: the scale
// warp gathers them with cp.async, as it does for one-warpgroup tiles. The transpose is a fixed cost
// per call (a launch and its latency); the gathers cost a little on the path to each stage, so they
// win only for few K blocks a CTA.
constexpr int64_t kMaxKBlocksForGatheredAScales = 16;
inline bool gather_a_scales(const Plan& p) {
  const TileSchedule& s = p.sched;
  const int64_t kb_per_cta =
      cdiv(s.dp_tiles, p.grid) * s.kblocks + (p.stream_k() ? cdiv(s.sk_iters(), s.sk_ctas) : 0);
  return kb_per_cta <= kMaxKBlocksForGatheredAScales;
}

// Decode plans (one-warpgroup tiles, B read by at most kMaxMBlocksBEvictFirst CTAs) load B under an L2
// evict-first policy: the weights stream through the L2 once, and their lines, not older ones (another
// kernel's data, dirty lines that would have to be written back first), are the ones evicted to make
// room. On the 128+-row tiles of large-M shapes, whose B tiles other CTAs read again, it was slower.
constexpr int64_t kMaxMBlocksBEvictFirst = 2;
inline bool b_evict_first(const Plan& p) {
  return kTileConfigs[p.config].block_m == hopper::kWgmmaM && p.sched.m_blocks <= kMaxMBlocksBEvictFirst;
}

// Whether the planner considers K splits of a problem (the kernel runs any): few enough 64x64 tiles of
// output (see kKSplitSmsPerTile); and of a split plan: one wave of clusters (a split's producer idles
// from a unit's last load to the end of its reduction, so a next unit would start from an empty ring)
// on few enough SMs.
inline bool k_splits_planned(int64_t m, int64_t n, const GpuSlots& gpu) {
  return cdiv(m, hopper::kWgmmaM) * cdiv(n, hopper::kWgmmaM) * kKSplitSmsPerTile <= gpu.sms;
}
inline bool k_split_planned(const Plan& p, const GpuSlots& gpu) {
  return static_cast<int64_t>(p.sched.m_blocks) * p.sched.n_blocks <= p.grid &&
         static_cast<double>(p.ctas()) <= kKSplitMaxSmFraction * gpu.sms;
}

// Tiles narrower than kMinWideTileCols (64x32) won only on long K (1.5-15 % at K >= 7168, H100, forced
// plans); at K <= 1536 they lost 1-4 % to 64x64, whose units cost them half as many drains and epilogues.
constexpr int kMinWideTileCols = 64;
constexpr int kMinNarrowTileKBlocks = 32;
inline bool narrow_tile_planned(const TileConfig& c, int64_t k) {
  return c.block_n >= kMinWideTileCols || cdiv(k, kBlockK) >= kMinNarrowTileKBlocks;
}

// The cheapest plan under the model; ties keep the earlier (smaller) config, whole tiles before stream-K
// before a K split, smaller splits first. Paired twins are not scored themselves (see kTileConfigs).
inline Plan choose_plan(int64_t m, int64_t n, int64_t k, const GpuSlots& gpu, int out_bytes) {
  Plan best;
  best.fits = false;
  bool have = false;
  // Where the cost ties, the fuller last wave, then more CTAs pulling, then fewer L2 bytes won when
  // measured.
  auto wins_tie = [](const Plan& p, const Plan& q) {
    if (p.wave_fill > q.wave_fill * 1.01 || q.wave_fill > p.wave_fill * 1.01) return p.wave_fill > q.wave_fill;
    if (p.ctas() != q.ctas()) return p.ctas() > q.ctas();
    return p.loaded_bytes < q.loaded_bytes * 0.99;
  };
  auto consider = [&](const Plan& p) {
    const bool tie = have && p.cost_us <= best.cost_us * 1.001 && best.cost_us <= p.cost_us * 1.001;
    if (p.fits && (!have || (tie ? wins_tie(p, best) : p.cost_us < best.cost_us))) {
      best = p;
      have = true;
    }
  };
  const bool splits = k_splits_planned(m, n, gpu);
  for (int cfg = 0; cfg < kNumTileConfigs; ++cfg) {
    if (is_paired_twin(cfg) || !narrow_tile_planned(kTileConfigs[cfg], k)) continue;
    consider(make_plan(cfg, false, 1, m, n, k, gpu, out_bytes));
    const Plan sk = make_plan(cfg, true, 1, m, n, k, gpu, out_bytes);
    if (sk.stream_k()) consider(sk);  // whole waves: the same as the whole-tile plan
    for (int split = 2; splits && splits_k(kTileConfigs[cfg]) && split <= kMaxKSplit; ++split) {
      const Plan p = make_plan(cfg, false, split, m, n, k, gpu, out_bytes);
      if (p.fits && k_split_planned(p, gpu)) consider(p);
    }
  }
  // The same schedule on the twin that loads in pairs, where the units are long enough for pairs to pay.
  if (const int twin = paired_twin(best.config); twin >= 0 && long_units(best)) best.config = twin;
  return best;
}

}  // namespace gemm::cuda
