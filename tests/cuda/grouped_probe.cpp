// CPU probe of the grouped GEMM's schedule and plan (gemm/cuda/grouped_scheduler.h, grouped_planner.h),
// compiled with the host C++ compiler by test_cuda_grouped_schedule.py (no CUDA needed).
//   grouped_probe --walk   builds each CTA's group table as the kernel's warp does (lane by lane) and
//                          checks it against the serial build; then, on seeded random routings (E in {1, 8, 256, 1024}; empty groups, one group
//                          holding every row, counts 1, 7, 63, 64, 65, 1000; contiguous ends and the masked
//                          layout; wrong inputs: ends falling back, past m, negative), for every grouped
//                          config's BLOCK_M, several N-block counts and grids, walks every CTA's units as
//                          the kernel does and checks: each row of a group's segment stored exactly once per
//                          N block and by a tile of that group, no other row stored (rows past the last end,
//                          the masked layout's padding), no tile without a row (cdiv(rows, BLOCK_M) M tiles a
//                          group), tiles inside the output, a CTA's groups never decreasing (the search hint).
//                          Prints "FAIL ..." lines and a final "walked N schedules, F failures".
//   grouped_probe --plan   prints "m groups config block_m grid pairs b_evict_first claims cluster_n" (grid in
//                          CTAs) for "m n k groups sms expected_rows" lines on stdin.
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gemm/cuda/grouped_planner.h"

namespace {

using namespace gemm::cuda;

int failures = 0;

void fail(const std::string& what, const std::string& where) {
  ++failures;
  std::printf("FAIL %s: %s\n", what.c_str(), where.c_str());
}

struct Routing {
  std::string name;
  int64_t m = 0;
  std::vector<int32_t> raw;  // ends (contiguous) or counts (masked)
  int64_t stride = 0;        // masked: rows per group
  bool masked = false;
};

// The rows each group owns by the contract (after clamping wrong inputs the way the kernel must: within
// [0, m), ends made monotone), computed independently of the table builder.
std::vector<int32_t> owner_of_rows(const Routing& r) {
  std::vector<int32_t> owner(static_cast<size_t>(r.m), -1);
  const int32_t groups = static_cast<int32_t>(r.raw.size());
  int64_t prev = 0;
  for (int32_t g = 0; g < groups; ++g) {
    int64_t begin, end;
    if (r.masked) {
      begin = g * r.stride;
      end = begin + std::min<int64_t>(std::max<int32_t>(r.raw[g], 0), r.stride);
    } else {
      begin = prev;
      end = std::max<int64_t>(prev, std::min<int64_t>(std::max<int32_t>(r.raw[g], 0), r.m));
      prev = end;
    }
    for (int64_t row = begin; row < std::min(end, r.m); ++row) owner[static_cast<size_t>(row)] = g;
  }
  return owner;
}

void walk(const Routing& r, int block_m, int32_t n_blocks, int32_t grid, int& walked) {
  ++walked;
  const std::string where = r.name + " block_m " + std::to_string(block_m) + " n_blocks " + std::to_string(n_blocks) +
                            " grid " + std::to_string(grid);
  const int32_t groups = static_cast<int32_t>(r.raw.size());
  std::vector<int32_t> words(static_cast<size_t>(kGroupTableWords) * groups);
  GroupTable t{words.data(), words.data() + groups, words.data() + 2 * groups, groups};
  for (int32_t g = 0; g < groups; ++g) t.row_end[g] = r.raw[g];
  GroupRows rows;
  rows.num_groups = groups;
  if (r.masked) {
    rows.counts = r.raw.data();
    rows.stride = r.stride;
  } else {
    rows.ends = r.raw.data();
  }
  // The kernel's warp build, lane by lane, must equal the serial reference; the walk reads it.
  std::vector<int32_t> serial(words);
  GroupTable ts{serial.data(), serial.data() + groups, serial.data() + 2 * groups, groups};
  build_group_table_serial(rows, r.m, block_m, n_blocks, ts);
  build_group_table_lanes(rows, r.m, block_m, n_blocks, t);
  if (serial != words) fail("the lanes' table differs from the serial one", where);
  TileSchedule s;
  s.n_blocks = n_blocks;
  s.kblocks = 3;
  const std::vector<int32_t> owner = owner_of_rows(r);
  std::vector<int> stored(static_cast<size_t>(r.m) * n_blocks, 0);
  std::vector<int64_t> tiles_of(static_cast<size_t>(groups), 0);
  int64_t units = 0;
  for (int32_t cta = 0; cta < grid; ++cta) {
    GroupedUnit w;
    int32_t last_group = 0;
    for (int32_t idx = 0; grouped_work_unit(t, s, block_m, cta, grid, idx, w); ++idx) {
      ++units;
      if (w.group < last_group) fail("groups of a CTA decrease", where);
      last_group = w.group;
      if (w.group < 0 || w.group >= groups || w.n_blk < 0 || w.n_blk >= n_blocks || w.kb_begin != 0 ||
          w.kb_end != s.kblocks || w.slot != -1 || w.fix_begin != w.fix_end) {
        fail("unit out of range", where);
        return;
      }
      ++tiles_of[static_cast<size_t>(w.group)];
      const int64_t stop = std::min<int64_t>(w.row0 + block_m, w.row_end);
      if (w.row0 >= stop) fail("tile without a row to store", where);
      if (w.row_end > r.m) fail("rows past m", where);
      for (int64_t row = w.row0; row < stop; ++row) {
        if (owner[static_cast<size_t>(row)] != w.group) {
          fail("row " + std::to_string(row) + " stored by group " + std::to_string(w.group) + ", owned by " +
                   std::to_string(owner[static_cast<size_t>(row)]),
               where);
          return;
        }
        ++stored[static_cast<size_t>(row) * n_blocks + w.n_blk];
      }
    }
  }
  for (int64_t row = 0; row < r.m; ++row) {
    const int want = owner[static_cast<size_t>(row)] >= 0 ? 1 : 0;
    for (int32_t nb = 0; nb < n_blocks; ++nb) {
      if (stored[static_cast<size_t>(row) * n_blocks + nb] != want) {
        fail("row " + std::to_string(row) + " N block " + std::to_string(nb) + " stored " +
                 std::to_string(stored[static_cast<size_t>(row) * n_blocks + nb]) + " times, want " + std::to_string(want),
             where);
        return;
      }
    }
  }
  std::vector<int64_t> rows_of(static_cast<size_t>(groups), 0);
  for (int32_t o : owner) {
    if (o >= 0) ++rows_of[static_cast<size_t>(o)];
  }
  for (int32_t g = 0; g < groups; ++g) {
    const int64_t want = (rows_of[static_cast<size_t>(g)] + block_m - 1) / block_m * n_blocks;
    if (tiles_of[static_cast<size_t>(g)] != want) {
      fail("group " + std::to_string(g) + " ran " + std::to_string(tiles_of[static_cast<size_t>(g)]) + " tiles, want " +
               std::to_string(want),
           where);
    }
  }
  if (units != t.tile_end[groups - 1]) fail("unit count", where);
}

Routing contiguous(const std::string& name, const std::vector<int64_t>& counts, int64_t tail) {
  Routing r;
  r.name = name;
  int64_t end = 0;
  for (int64_t c : counts) {
    end += c;
    r.raw.push_back(static_cast<int32_t>(end));
  }
  r.m = end + tail;  // rows past the last end: never stored
  return r;
}

Routing masked(const std::string& name, const std::vector<int64_t>& counts, int64_t stride) {
  Routing r;
  r.name = name;
  r.masked = true;
  r.stride = stride;
  for (int64_t c : counts) r.raw.push_back(static_cast<int32_t>(c));
  r.m = stride * static_cast<int64_t>(counts.size());
  return r;
}

// Skewed random counts: a few hot groups, many cold or empty ones.
std::vector<int64_t> skewed(std::mt19937& rng, int groups, int64_t rows) {
  std::vector<double> w(static_cast<size_t>(groups));
  std::exponential_distribution<double> ex(1.0);
  for (double& x : w) x = ex(rng) * ex(rng) * ex(rng);
  double sum = 0;
  for (double x : w) sum += x;
  std::vector<int64_t> c(static_cast<size_t>(groups));
  for (int g = 0; g < groups; ++g) c[static_cast<size_t>(g)] = static_cast<int64_t>(w[static_cast<size_t>(g)] / sum * rows);
  return c;
}

std::vector<Routing> routings() {
  std::vector<Routing> out;
  std::mt19937 rng(33);
  const std::vector<int64_t> special = {1, 7, 63, 64, 65, 1000, 0, 0, 128, 129, 191, 192, 193};
  out.push_back(contiguous("special counts", special, 5));
  out.push_back(masked("special counts masked", special, 1000));
  out.push_back(contiguous("one group", {777}, 0));
  out.push_back(contiguous("one group, tail", {5}, 100));
  out.push_back(contiguous("all empty", std::vector<int64_t>(8, 0), 9));
  std::vector<int64_t> one_hot(256, 0);
  one_hot[137] = 4096;
  out.push_back(contiguous("E=256 one group holds all", one_hot, 3));
  out.push_back(masked("E=256 one group holds all, masked", one_hot, 4096));
  for (int groups : {1, 8, 256, 1024}) {
    for (int64_t rows : {int64_t{8}, int64_t{512}, int64_t{4096}, int64_t{32768}}) {
      const std::string tag = "E=" + std::to_string(groups) + " rows " + std::to_string(rows);
      out.push_back(contiguous("skewed " + tag, skewed(rng, groups, rows), rows % 7));
      out.push_back(masked("skewed masked " + tag, skewed(rng, groups, rows), rows / groups + 3));
    }
  }
  // Wrong inputs: the kernel must still stay inside the output.
  Routing bad = contiguous("ends fall back and overshoot", {10, 40, 30, 200, -5, 90}, 0);
  bad.m = 100;
  out.push_back(bad);
  Routing neg = masked("negative and oversized counts", {-3, 50, 7, 1 << 30}, 20);
  out.push_back(neg);
  return out;
}

int plan_mode() {
  long long m, n, k, groups, expected_rows;
  int sms;
  while (std::scanf("%lld %lld %lld %lld %d %lld", &m, &n, &k, &groups, &sms, &expected_rows) == 6) {
    GpuSlots gpu;
    gpu.sms = sms;
    for (int size = 2; size <= kMaxClusterCtas; ++size) gpu.clusters[size] = sms / size;
    const GroupedPlan p = choose_grouped_plan(m, n, k, groups, gpu, expected_rows);
    std::printf("%lld %lld %d %d %d %d %d %d %d\n", m, groups, p.config, kTileConfigs[p.config].block_m, p.ctas(),
                p.pairs ? 1 : 0, p.b_evict_first ? 1 : 0, p.claims ? 1 : 0, p.cluster_n());
    if (!is_grouped_config(p.config)) std::printf("FAIL config %d has no grouped instantiation\n", p.config);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--plan") == 0) return plan_mode();
  int walked = 0;
  for (const Routing& r : routings()) {
    for (int config : kGroupedConfigs) {
      const int block_m = kTileConfigs[config].block_m;
      for (int32_t n_blocks : {1, 2, 32}) {
        for (int32_t grid : {1, 7, 132}) walk(r, block_m, n_blocks, grid, walked);
      }
    }
  }
  std::printf("walked %d schedules, %d failures\n", walked, failures);
  return failures == 0 ? 0 : 1;
}
