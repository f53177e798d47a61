// Small HIP-style kernels that exercise the emulator itself (tests/rocm/test_mfma_layout.py and
// test_emulator.py load this as a shared library through ctypes). Written against the same fake
// hip/hip_runtime.h as the GEMM, in the style a HIP kernel would be.
#include <hip/hip_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "gemm/cdna3_mfma_layout.h"
#include "emu_abi.h"
#include "guarded_memory.h"

namespace {

using gemm::cdna3::kFp8PerOperand;
using gemm::cdna3::kWaveSize;
using gemm::cdna3::Mfma16x16x32;
using gemm::cdna3::Mfma32x32x16;

template <class Shape>
using Accum = float __attribute__((ext_vector_type(Shape::kAccum)));

template <class Shape>
Accum<Shape> mfma(long a, long b, Accum<Shape> c) {
  if constexpr (Shape::kM == 32) {
    return __builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8(a, b, c, 0, 0, 0);
  } else {
    return __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8(a, b, c, 0, 0, 0);
  }
}

// One MFMA per wavefront: wave w of block z computes D = C + A B for its own problem
// p = z * waves + w, with A [kM][kK], B [kN][kK] (both K-contiguous bytes), C and D [kM][kN] fp32.
// kUseInverse picks how a lane finds its operands: the inverse maps (as the GEMM does) or a search
// over the forward maps (independent of the inverses, so it tests the emulator on its own).
template <class Shape, bool kUseInverse>
__global__ void mfma_probe(const uint8_t* a, const uint8_t* b, const float* c, float* d) {
  const int lane = threadIdx.x % kWaveSize;
  const int problem = blockIdx.x * (blockDim.x / kWaveSize) + threadIdx.x / kWaveSize;
  const uint8_t* pa = a + problem * Shape::kM * Shape::kK;
  const uint8_t* pb = b + problem * Shape::kN * Shape::kK;
  const float* pc = c + problem * Shape::kM * Shape::kN;
  float* pd = d + problem * Shape::kM * Shape::kN;

  uint8_t a_bytes[kFp8PerOperand] = {}, b_bytes[kFp8PerOperand] = {};
  if constexpr (kUseInverse) {
    for (int s = 0; s < kFp8PerOperand; ++s) {
      const auto ia = Shape::a_of(lane, s);
      const auto ib = Shape::b_of(lane, s);
      a_bytes[s] = pa[ia.row * Shape::kK + ia.col];
      b_bytes[s] = pb[ib.col * Shape::kK + ib.row];
    }
  } else {
    for (int i = 0; i < Shape::kM; ++i)
      for (int k = 0; k < Shape::kK; ++k)
        if (Shape::a(i, k).lane == lane) a_bytes[Shape::a(i, k).slot] = pa[i * Shape::kK + k];
    for (int k = 0; k < Shape::kK; ++k)
      for (int j = 0; j < Shape::kN; ++j)
        if (Shape::b(k, j).lane == lane) b_bytes[Shape::b(k, j).slot] = pb[j * Shape::kK + k];
  }
  long a_op = 0, b_op = 0;
  std::memcpy(&a_op, a_bytes, sizeof(a_op));
  std::memcpy(&b_op, b_bytes, sizeof(b_op));

  Accum<Shape> acc;
  for (int e = 0; e < Shape::kAccum; ++e) {
    const auto p = Shape::d_of(lane, e);
    acc[e] = pc[p.row * Shape::kN + p.col];
  }
  acc = mfma<Shape>(a_op, b_op, acc);
  for (int e = 0; e < Shape::kAccum; ++e) {
    const auto p = Shape::d_of(lane, e);
    pd[p.row * Shape::kN + p.col] = acc[e];
  }
}

// Shared-memory rounds across the whole block: out = in rotated by `rounds` threads, which needs
// every __syncthreads to hold (a missing one reads stale or half-written LDS).
constexpr int kMaxProbeThreads = 1024;
__global__ void rotate_probe(const int* in, int* out, int rounds) {
  __shared__ int tile[kMaxProbeThreads];
  const int n = blockDim.x * blockDim.y * blockDim.z;
  const int t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const int block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  int value = in[block * n + t];
  for (int r = 0; r < rounds; ++r) {
    tile[t] = value;
    __syncthreads();
    value = tile[(t + 1) % n];
    __syncthreads();
  }
  out[block * n + t] = value;
}

// Threads at or above `live` return at once (legal: exited waves leave the barrier); the rest sum
// their values through LDS.
__global__ void early_exit_probe(const int* in, int* out, int live) {
  __shared__ int tile[kMaxProbeThreads];
  const int t = threadIdx.x;
  if (t >= live) return;
  tile[t] = in[t];
  __syncthreads();
  int sum = 0;
  for (int i = 0; i < live; ++i) sum += tile[i];
  out[t] = sum;
}

// Lane 0 calls a wave-uniform builtin while the rest of the block waits at __syncthreads: neither
// can complete. A kernel bug the emulator must report, not hang on.
__global__ void deadlock_probe(int* out) {
  if (threadIdx.x == 0) {
    out[0] = __builtin_amdgcn_readfirstlane(1);
  } else {
    __syncthreads();
  }
}

__global__ void readfirstlane_probe(const int* in, int* out) {
  const int t = threadIdx.x;
  out[t] = __builtin_amdgcn_readfirstlane(in[t]);
}

// Thread t loads `bytes` (16, 8 or 4) at voffset[t] + soffset from a buffer of num_records bytes.
__global__ void buffer_probe(const uint8_t* base, int num_records, const int* voffset, int soffset,
                             int bytes, uint8_t* out) {
  const auto rsrc = __builtin_amdgcn_make_buffer_rsrc(const_cast<uint8_t*>(base), 0, num_records, 0);
  const int t = threadIdx.x;
  uint8_t* dst = out + t * 16;
  if (bytes == 16) {
    const auto v = __builtin_amdgcn_raw_buffer_load_b128(rsrc, voffset[t], soffset, 0);
    std::memcpy(dst, &v, sizeof(v));
  } else if (bytes == 8) {
    const auto v = __builtin_amdgcn_raw_buffer_load_b64(rsrc, voffset[t], soffset, 0);
    std::memcpy(dst, &v, sizeof(v));
  } else {
    const auto v = __builtin_amdgcn_raw_buffer_load_b32(rsrc, voffset[t], soffset, 0);
    std::memcpy(dst, &v, sizeof(v));
  }
}

// Thread t copies data[index[t]] to out[t]: reads past a guarded buffer's last granule must fault.
__global__ void gather_probe(const uint8_t* data, const int* index, uint8_t* out) {
  out[threadIdx.x] = data[index[threadIdx.x]];
}

// Block 0 writes LDS, every block reads it: blocks after the first must see the poison, not block 0's
// leftovers (LDS starts undefined on the GPU).
// (Indexed by thread: LLVM may split a small constant-indexed static array into scalars outside
// the section, which real kernels' LDS tiles never are.)
__global__ void lds_poison_probe(int* out) {
  __shared__ int slot[kWaveSize];
  if (blockIdx.x == 0) slot[threadIdx.x] = 7;
  __syncthreads();
  out[blockIdx.x * kWaveSize + threadIdx.x] = slot[(threadIdx.x + 1) % kWaveSize];
}

// The error of the last launch (empty on success), as the GEMM launcher would report it.
int finish(char* err, int err_len) {
  const hipError_t e = hipGetLastError();
  const std::string text = e == hipSuccess ? "" : hipGetErrorString(e);
  std::snprintf(err, err_len, "%s", text.c_str());
  hip_emu::reset_faults();
  return e == hipSuccess ? 0 : 1;
}

template <class Shape>
void layout_tables(int* fwd_a, int* fwd_b, int* fwd_d, int* inv_a, int* inv_b, int* inv_d) {
  for (int i = 0; i < Shape::kM; ++i)
    for (int k = 0; k < Shape::kK; ++k) {
      const auto p = Shape::a(i, k);
      fwd_a[2 * (i * Shape::kK + k)] = p.lane;
      fwd_a[2 * (i * Shape::kK + k) + 1] = p.slot;
    }
  for (int k = 0; k < Shape::kK; ++k)
    for (int j = 0; j < Shape::kN; ++j) {
      const auto p = Shape::b(k, j);
      fwd_b[2 * (k * Shape::kN + j)] = p.lane;
      fwd_b[2 * (k * Shape::kN + j) + 1] = p.slot;
    }
  for (int i = 0; i < Shape::kM; ++i)
    for (int j = 0; j < Shape::kN; ++j) {
      const auto p = Shape::d(i, j);
      fwd_d[2 * (i * Shape::kN + j)] = p.lane;
      fwd_d[2 * (i * Shape::kN + j) + 1] = p.slot;
    }
  for (int l = 0; l < kWaveSize; ++l) {
    for (int s = 0; s < kFp8PerOperand; ++s) {
      const auto pa = Shape::a_of(l, s);
      const auto pb = Shape::b_of(l, s);
      inv_a[2 * (l * kFp8PerOperand + s)] = pa.row;
      inv_a[2 * (l * kFp8PerOperand + s) + 1] = pa.col;
      inv_b[2 * (l * kFp8PerOperand + s)] = pb.row;
      inv_b[2 * (l * kFp8PerOperand + s) + 1] = pb.col;
    }
    for (int e = 0; e < Shape::kAccum; ++e) {
      const auto p = Shape::d_of(l, e);
      inv_d[2 * (l * Shape::kAccum + e)] = p.row;
      inv_d[2 * (l * Shape::kAccum + e) + 1] = p.col;
    }
  }
}

}  // namespace

extern "C" {

// shape: 32 -> Mfma32x32x16, 16 -> Mfma16x16x32. Each table holds (lane, slot) or (row, col) pairs.
EMU_EXPORT int emu_layout_tables(int shape, int* fwd_a, int* fwd_b, int* fwd_d, int* inv_a, int* inv_b, int* inv_d) {
  if (shape == 32) layout_tables<Mfma32x32x16>(fwd_a, fwd_b, fwd_d, inv_a, inv_b, inv_d);
  else if (shape == 16) layout_tables<Mfma16x16x32>(fwd_a, fwd_b, fwd_d, inv_a, inv_b, inv_d);
  else return 1;
  return 0;
}

EMU_EXPORT void emu_decode_fnuz(float* out) {
  for (int v = 0; v < 256; ++v) out[v] = hip_emu::kFnuzTable[v];
}

EMU_EXPORT void emu_set_deadlock_timeout_ms(int ms) { hip_emu::deadlock_timeout_ms = ms; }

// `problems` MFMAs, `waves_per_block` wavefronts per block.
EMU_EXPORT int emu_mfma_probe(int shape, int use_inverse, int problems, int waves_per_block, const uint8_t* a,
                   const uint8_t* b, const float* c, float* d, char* err, int err_len) {
  const dim3 grid(problems / waves_per_block), block(waves_per_block * kWaveSize);
  if (shape == 32 && use_inverse) hipLaunchKernelGGL(mfma_probe<Mfma32x32x16, true>, grid, block, 0, nullptr, a, b, c, d);
  if (shape == 32 && !use_inverse) hipLaunchKernelGGL(mfma_probe<Mfma32x32x16, false>, grid, block, 0, nullptr, a, b, c, d);
  if (shape == 16 && use_inverse) hipLaunchKernelGGL(mfma_probe<Mfma16x16x32, true>, grid, block, 0, nullptr, a, b, c, d);
  if (shape == 16 && !use_inverse) hipLaunchKernelGGL(mfma_probe<Mfma16x16x32, false>, grid, block, 0, nullptr, a, b, c, d);
  return finish(err, err_len);
}

EMU_EXPORT int emu_rotate_probe(const int* grid3, const int* block3, const int* in, int* out, int rounds,
                     int dynamic_lds, char* err, int err_len) {
  hipLaunchKernelGGL(rotate_probe, dim3(grid3[0], grid3[1], grid3[2]), dim3(block3[0], block3[1], block3[2]),
                     dynamic_lds, nullptr, in, out, rounds);
  return finish(err, err_len);
}

EMU_EXPORT int emu_early_exit_probe(int threads, int live, const int* in, int* out, char* err, int err_len) {
  hipLaunchKernelGGL(early_exit_probe, dim3(1), dim3(threads), 0, nullptr, in, out, live);
  return finish(err, err_len);
}

EMU_EXPORT int emu_deadlock_probe(int threads, int* out, char* err, int err_len) {
  hipLaunchKernelGGL(deadlock_probe, dim3(1), dim3(threads), 0, nullptr, out);
  return finish(err, err_len);
}

EMU_EXPORT int emu_readfirstlane_probe(int threads, const int* in, int* out, char* err, int err_len) {
  hipLaunchKernelGGL(readfirstlane_probe, dim3(1), dim3(threads), 0, nullptr, in, out);
  return finish(err, err_len);
}

EMU_EXPORT int emu_buffer_probe(const uint8_t* base, int num_records, int threads, const int* voffset, int soffset,
                     int bytes, uint8_t* out, char* err, int err_len) {
  hipLaunchKernelGGL(buffer_probe, dim3(1), dim3(threads), 0, nullptr, base, num_records, voffset, soffset,
                     bytes, out);
  return finish(err, err_len);
}

// Gathers from a guarded copy (tight on `side`, a GuardSide) of `bytes` bytes of `src` (16-byte
// aligned) with `threads` threads.
EMU_EXPORT int emu_gather_probe(const uint8_t* src, int bytes, int side, int threads, const int* index, uint8_t* out,
                                char* err, int err_len) {
  const hip_emu::GuardedBuffer buffer("probe buffer", bytes, 0, src, static_cast<hip_emu::GuardSide>(side));
  static const hip_emu::GuardedBuffer* probed = nullptr;  // for the capture-less describe hook
  probed = &buffer;
  hip_emu::describe_address = [](uintptr_t address) {
    std::string text;
    return probed->describe(address, text) ? text : hip_emu::hex(address);
  };
  hipLaunchKernelGGL(gather_probe, dim3(1), dim3(threads), 0, nullptr, buffer.data(), index, out);
  hip_emu::describe_address = nullptr;
  return finish(err, err_len);
}

EMU_EXPORT int emu_lds_poison_probe(int blocks, int* out, char* err, int err_len) {
  hipLaunchKernelGGL(lds_poison_probe, dim3(blocks), dim3(64), 0, nullptr, out);
  return finish(err, err_len);
}

EMU_EXPORT int emu_cu_count() {
  int device = -1, cus = 0;
  if (hipGetDevice(&device) != hipSuccess) return -1;
  if (hipDeviceGetAttribute(&cus, hipDeviceAttributeMultiprocessorCount, device) != hipSuccess) return -1;
  return cus;
}

}  // extern "C"
