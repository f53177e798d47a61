// C ABI of the emulated GEMM (tests/rocm/emu/emu_entry.cpp): used by ctypes (emu_gemm.py mirrors the
// structs) and by the ThreadSanitizer driver (race_driver.cpp).
#pragma once

#include <cstdint>

// Entry points are the only visible symbols of the libraries (built with -fvisibility=hidden).
#define EMU_EXPORT __attribute__((visibility("default")))

// gemm::GemmArgs with every field widened to 8 bytes, so the ctypes mirror has no padding rules.
struct EmuGemmArgs {
  int64_t m, n, k;
  const void* a;
  int64_t a_stride_m, a_stride_k;
  const void* b;
  int64_t b_stride_n, b_stride_k;
  const void* a_scale;
  int64_t a_scale_stride_m, a_scale_stride_k;
  const void* b_scale;
  int64_t b_scale_stride_n, b_scale_stride_k;
  void* c;
  int64_t c_stride_m, c_stride_n;
  int64_t a_format, b_format, c_format;
  int64_t a_scale_format, b_scale_format;
  // Grouped GEMM (num_groups > 0): b [num_groups, n, k], b_scale [num_groups, ceil(n/128), ceil(k/128)].
  int64_t num_groups, b_stride_group, b_scale_stride_group;
  const int32_t* group_ends;
  const int64_t* row_group;
  const int32_t* group_rows;  // the masked layout: valid rows per block of group_row_stride rows
  int64_t group_row_stride;
};

// gemm::QuantizeArgs, every field 8 bytes wide.
struct EmuQuantizeArgs {
  int64_t m, k;
  const void* x;
  int64_t x_stride_m, x_format;
  void* q;
  int64_t q_stride_m, q_format;
  void* scale;
  int64_t scale_stride_m, scale_stride_k, scale_format;
  int64_t pow2_scale;
  const float* static_scale;
};

struct EmuStats {
  int64_t workspace_requests;
  int64_t workspace_bytes;
  int64_t launches;
};

extern "C" {
EMU_EXPORT int emu_num_configs();
// Fields of test config `index`: tile, split_k, group_m, block_m, block_n, threads, mfma_m.
EMU_EXPORT int emu_config(int index, int64_t* out);
// The heuristic's choice for these args on `cu_count` CUs: tile, split_k, group_m.
EMU_EXPORT void emu_select_config(const EmuGemmArgs* args, int cu_count, int64_t* out);
// config_index < 0: gemm::gemm_launch (the heuristic); else launch_with_config(all_configs()[index]).
// Every tensor and workspace request lives in a guarded buffer during the call (C is copied back).
// Returns 0 on success; the launcher's error (or the emulator's first fault) goes to `err`.
EMU_EXPORT int emu_gemm(const EmuGemmArgs* args, int config_index, EmuStats* stats, char* err, int err_len);
// launch_with_config with any config (the tuned table's, say).
EMU_EXPORT int emu_gemm_config(const EmuGemmArgs* args, int tile, int split_k, int group_m, EmuStats* stats,
                               char* err, int err_len);
// The pinned table of rocm_planner.h: entry `index` as m, n, k, tile, split_k, group_m.
EMU_EXPORT int emu_num_tuned();
EMU_EXPORT void emu_tuned(int index, int64_t* out);
// gemm::quantize_launch on guarded copies of x, q, scale (and static_scale); q and scale are copied back.
EMU_EXPORT int emu_quantize(const EmuQuantizeArgs* args, EmuStats* stats, char* err, int err_len);
EMU_EXPORT void emu_set_deadlock_timeout_ms(int ms);
// Which side of every guarded buffer is tight: 0 after its end (default), 1 before its start.
EMU_EXPORT void emu_set_guard_side(int side);
}
