// Fake HIP runtime: executes gfx942 kernel source on the CPU (tests/rocm only, never shipped).
//
// The kernel source is compiled as plain C++ (`clang++-19 -x c++ -std=c++20`, for ext_vector_type)
// against this header instead of the real HIP one. Every GPU thread is one OS thread (from a reusable
// pool); blocks of a grid run one after another, so `__shared__` can be a function-local `static`.
// `__syncthreads()` is a barrier over the block; the wavefront builtins (MFMA, readfirstlane) gather
// every lane's operand into a per-wavefront slot, meet at a 64-lane barrier, compute, and meet again.
//
// The MFMAs are built from AMD's Matrix Instruction Calculator data (tests/rocm/golden), not from
// gemm/cdna3_mfma_layout.h, whose maps the kernel stages operands and scatters results with: a header
// that disagrees with AMD's layouts produces wrong numbers here, even when it agrees with itself.
//
// Only the host API and builtins of the ROCm kernel/emulator contract exist (the kernel lists the
// builtins it uses under "Hardware builtins used:" in gemm/rocm_gemm_kernel.h); anything else fails to
// compile, which is the point. Kernel misbehaviour is recorded as a fault (deadlocked barrier, memory
// fault past a guarded buffer, chip-dependent buffer access, non-zero MFMA modifiers): the launch
// still completes and hipGetLastError() then returns hipErrorLaunchFailure, whose string carries the
// first fault's description. LDS is poisoned before every block (see __shared__).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csetjmp>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <semaphore>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <vector>

#include "gemm/cdna3_mfma_layout.h"

// ---- function and variable qualifiers ----
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// Blocks run one after another, so one static instance per declaration is the block's LDS. All of
// them live in one section, which the launcher poisons before every block: LDS starts undefined on
// the GPU, so nothing may depend on an earlier block's (or the loader's zero) contents.
#define __shared__ static __attribute__((section("hip_emu_lds")))
extern "C" {
// Bounds of the section, provided by the linker (weak: a TU without __shared__ has none).
extern uint8_t __start_hip_emu_lds[] __attribute__((weak, visibility("hidden")));
extern uint8_t __stop_hip_emu_lds[] __attribute__((weak, visibility("hidden")));
}

struct dim3 {
  uint32_t x, y, z;
  constexpr dim3(uint32_t x_ = 1, uint32_t y_ = 1, uint32_t z_ = 1) : x(x_), y(y_), z(z_) {}
};

inline thread_local dim3 threadIdx, blockIdx, blockDim, gridDim;

// ---- host API (exactly the contract's list) ----
enum hipError_t {
  hipSuccess = 0,
  hipErrorInvalidValue = 1,
  hipErrorInvalidConfiguration = 9,
  hipErrorLaunchFailure = 719,
};
enum hipDeviceAttribute_t { hipDeviceAttributeMultiprocessorCount = 63 };
typedef struct ihipStream_t* hipStream_t;

namespace hip_emu {

constexpr int kCuCount = 304;  // MI300X compute units (performance.md)
constexpr int kMaxBlockThreads = 1024;
constexpr uint64_t kMaxEmulatedBlocks = 1 << 16;  // far above any test shape; a bigger grid is a bug
constexpr int kWaveSize = gemm::cdna3::kWaveSize;
// A barrier nobody completes for this long is a kernel bug (a thread skipped __syncthreads or a lane
// skipped a wave-uniform builtin); the emulator reports it instead of hanging the test run.
inline std::atomic<int> deadlock_timeout_ms{60000};
inline std::atomic<int64_t> launch_count{0};  // grids run, for tests that count kernels per GEMM

// ---- errors and faults ----
struct ErrorState {
  std::mutex mutex;
  hipError_t last = hipSuccess;
  std::string fault;  // first fault since the last reset; sticky until reset_faults()
};
inline ErrorState& errors() {
  static ErrorState state;
  return state;
}
inline void set_error(hipError_t e) {
  std::lock_guard lock(errors().mutex);
  errors().last = e;
}
inline void fault(const std::string& what) {
  std::lock_guard lock(errors().mutex);
  if (errors().fault.empty()) errors().fault = what;
}
inline std::string fault_text() {
  std::lock_guard lock(errors().mutex);
  return errors().fault;
}
inline void reset_faults() {
  std::lock_guard lock(errors().mutex);
  errors().fault.clear();
  errors().last = hipSuccess;
}

// ---- a barrier that can lose members (exited threads) and reports deadlocks ----
class Barrier {
 public:
  Barrier(int members, std::string name) : expected_(members), name_(std::move(name)) {}

  void arrive_and_wait() {
    std::unique_lock lock(mutex_);
    if (broken_) return;
    const uint64_t phase = phase_;
    if (++arrived_ == expected_) {
      complete_phase();
      return;
    }
    const auto timeout = std::chrono::milliseconds(deadlock_timeout_ms.load());
    if (!cv_.wait_for(lock, timeout, [&] { return phase_ != phase || broken_; })) {
      broken_ = true;  // release everybody: results are garbage, the fault says why
      cv_.notify_all();
      fault("deadlock: " + name_ + " reached by " + std::to_string(arrived_) + " of " +
            std::to_string(expected_) + " threads");
    }
  }

  // A thread that returned from the kernel no longer takes part (as on the hardware).
  void drop() {
    std::lock_guard lock(mutex_);
    --expected_;
    if (arrived_ > 0 && arrived_ == expected_) complete_phase();
  }

 private:
  void complete_phase() {
    arrived_ = 0;
    ++phase_;
    cv_.notify_all();
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  int expected_;
  int arrived_ = 0;
  uint64_t phase_ = 0;
  bool broken_ = false;
  std::string name_;
};

// ---- per-wavefront and per-block state ----
// An exited (or missing) lane's operand bytes read as fp8 NaN (0x80 in e4m3fnuz), so a kernel that
// calls a wave-uniform builtin from a partial wavefront gets NaN rather than stale data.
constexpr uint64_t kPoisonFp8x8 = 0x8080808080808080ull;
struct Wave {
  Wave(int lanes, const std::string& name) : sync(lanes, name) {
    for (int l = 0; l < kWaveSize; ++l) {
      alive[l] = l < lanes;
      a[l] = b[l] = l < lanes ? 0 : kPoisonFp8x8;  // lanes a partial wavefront lacks hold NaN bytes
    }
  }
  Barrier sync;
  std::array<uint64_t, kWaveSize> a{}, b{}, scalar{};  // the gathered operands of one builtin call
  std::array<bool, kWaveSize> alive{};
};

struct Block {
  Block(int threads, const dim3& index) : sync(threads, "__syncthreads of block " + name(index)) {
    for (int first = 0; first < threads; first += kWaveSize) {
      const int lanes = std::min(kWaveSize, threads - first);
      waves.push_back(std::make_unique<Wave>(
          lanes, "wave-uniform builtin of wave " + std::to_string(first / kWaveSize) + " in block " +
                     name(index)));
    }
  }
  static std::string name(const dim3& i) {
    return "(" + std::to_string(i.x) + "," + std::to_string(i.y) + "," + std::to_string(i.z) + ")";
  }
  Barrier sync;
  std::vector<std::unique_ptr<Wave>> waves;
};

inline thread_local Block* tl_block = nullptr;
inline thread_local Wave* tl_wave = nullptr;
inline thread_local int tl_lane = 0;

// Fresh LDS reads as fp8 NaN bytes (0x80) too; as fp32 that is -1.2e-38, as an index it is huge.
constexpr int kLdsPoisonByte = 0x80;

inline void poison_lds() {
  if (__start_hip_emu_lds != nullptr)
    std::memset(__start_hip_emu_lds, kLdsPoisonByte, static_cast<size_t>(__stop_hip_emu_lds - __start_hip_emu_lds));
}

inline void exit_thread() {
  tl_wave->a[tl_lane] = tl_wave->b[tl_lane] = kPoisonFp8x8;
  tl_wave->alive[tl_lane] = false;
  tl_wave->sync.drop();
  tl_block->sync.drop();
}

// ---- memory faults: a kernel thread that touches an unmapped page (tests/rocm/emu/guarded_memory.h
// puts one right after every buffer) is cut short and reported instead of crashing the test run ----
inline thread_local sigjmp_buf* tl_fault_jump = nullptr;  // set while the thread runs kernel code
inline thread_local uintptr_t tl_fault_address = 0;
inline thread_local int tl_fault_code = 0;
// Names an address for the fault message (the entry TU knows its buffers); null: hex only.
inline std::string (*describe_address)(uintptr_t) = nullptr;

inline struct sigaction previous_segv_action {};

inline void on_memory_fault(int, siginfo_t* info, void*) {
  if (tl_fault_jump == nullptr) {  // not kernel code: the previous handler takes the re-raised fault
    sigaction(SIGSEGV, &previous_segv_action, nullptr);
    return;
  }
  tl_fault_address = reinterpret_cast<uintptr_t>(info->si_addr);
  tl_fault_code = info->si_code;
  siglongjmp(*tl_fault_jump, 1);
}

// Installs the handler for the duration of one launch, then restores the previous one (Python's
// faulthandler, say).
struct MemoryFaultScope {
  MemoryFaultScope() {
    struct sigaction action {};
    action.sa_sigaction = on_memory_fault;
    action.sa_flags = SA_SIGINFO;
    sigemptyset(&action.sa_mask);
    sigaction(SIGSEGV, &action, &previous_segv_action);
  }
  ~MemoryFaultScope() { sigaction(SIGSEGV, &previous_segv_action, nullptr); }
};

inline std::string hex(uintptr_t address) {
  char text[2 + 2 * sizeof(address) + 1];
  std::snprintf(text, sizeof(text), "0x%zx", static_cast<size_t>(address));
  return text;
}

// ---- thread pool: worker i runs GPU thread i of every block ----
class ThreadPool {
 public:
  static ThreadPool& instance() {
    static ThreadPool pool;
    return pool;
  }
  // Runs job(0..n-1) on n distinct threads concurrently and returns when all have finished.
  void run(int n, const std::function<void(int)>& job) {
    while (static_cast<int>(workers_.size()) < n) add_worker();
    job_ = &job;
    remaining_.store(n);
    for (int i = 0; i < n; ++i) workers_[i]->go.release();
    done_.acquire();
  }
  ~ThreadPool() {
    stop_ = true;
    for (auto& w : workers_) w->go.release();
    for (auto& w : workers_) w->thread.join();
  }

 private:
  struct Worker {
    std::binary_semaphore go{0};
    std::thread thread;
  };
  void add_worker() {
    auto worker = std::make_unique<Worker>();
    const int index = static_cast<int>(workers_.size());
    Worker* w = worker.get();
    workers_.push_back(std::move(worker));
    w->thread = std::thread([this, w, index] {
      for (;;) {
        w->go.acquire();
        if (stop_) return;
        (*job_)(index);
        if (remaining_.fetch_sub(1) == 1) done_.release();
      }
    });
  }
  std::vector<std::unique_ptr<Worker>> workers_;
  const std::function<void(int)>* job_ = nullptr;
  std::atomic<int> remaining_{0};
  std::binary_semaphore done_{0};
  std::atomic<bool> stop_{false};
};

// ---- kernel launch: blocks one after another, each block's threads concurrently ----
template <class... Params, class... Args>
void launch(void (*kernel)(Params...), dim3 grid, dim3 block, uint32_t dynamic_lds_bytes, hipStream_t,
            Args&&... args) {
  const uint64_t threads = uint64_t{block.x} * block.y * block.z;
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || threads == 0 || threads > kMaxBlockThreads ||
      dynamic_lds_bytes != 0) {  // the contract has no dynamic LDS
    set_error(hipErrorInvalidConfiguration);
    return;
  }
  const std::tuple<std::remove_cvref_t<Params>...> params(std::forward<Args>(args)...);
  ++launch_count;
  if (uint64_t{grid.x} * grid.y * grid.z > kMaxEmulatedBlocks) {
    fault("grid of " + std::to_string(uint64_t{grid.x} * grid.y * grid.z) + " blocks is too large to emulate");
    return;
  }
  const int n = static_cast<int>(threads);
  const MemoryFaultScope fault_scope;
  for (uint32_t bz = 0; bz < grid.z; ++bz)
    for (uint32_t by = 0; by < grid.y; ++by)
      for (uint32_t bx = 0; bx < grid.x; ++bx) {
        const dim3 index(bx, by, bz);
        Block state(n, index);
        poison_lds();
        ThreadPool::instance().run(n, [&](int t) {
          threadIdx = dim3(t % block.x, t / block.x % block.y, t / (block.x * block.y));
          blockIdx = index;
          blockDim = block;
          gridDim = grid;
          tl_block = &state;
          tl_wave = state.waves[t / kWaveSize].get();
          tl_lane = t % kWaveSize;
          sigjmp_buf jump;
          tl_fault_jump = &jump;
          if (sigsetjmp(jump, /*savemask=*/1) == 0) {
            std::apply(kernel, params);
          } else {
            // x86 reports a misaligned aligned-vector access as a general-protection fault (SI_KERNEL,
            // no address): the kernel assumed 16-byte alignment where it did not hold.
            const std::string what =
                tl_fault_code == SI_KERNEL
                    ? std::string("general-protection fault (a misaligned 16-byte vector access)")
                    : "memory fault at " +
                          (describe_address ? describe_address(tl_fault_address) : hex(tl_fault_address));
            fault(what + " by thread " + std::to_string(t) + " of block " + Block::name(index));
          }
          tl_fault_jump = nullptr;
          exit_thread();
        });
      }
}

// ---- FP8 e4m3fnuz (gfx942): bias 8, max 240, 0x80 = NaN, no -0, no infinity ----
constexpr int kFnuzExponentBias = 8;
constexpr int kFp8MantissaBits = 3;
constexpr uint8_t kFnuzNaN = 0x80;

constexpr float decode_e4m3fnuz(uint8_t v) {
  if (v == kFnuzNaN) return std::numeric_limits<float>::quiet_NaN();
  const int exponent = (v >> kFp8MantissaBits) & 0xF;
  const int mantissa = v & ((1 << kFp8MantissaBits) - 1);
  // Subnormals (exponent field 0) have no implicit leading one and the exponent of field 1.
  const int unbiased = (exponent == 0 ? 1 : exponent) - kFnuzExponentBias - kFp8MantissaBits;
  float magnitude = static_cast<float>(exponent == 0 ? mantissa : mantissa + (1 << kFp8MantissaBits));
  for (int e = 0; e < unbiased; ++e) magnitude *= 2.0f;
  for (int e = unbiased; e < 0; ++e) magnitude *= 0.5f;
  return (v & 0x80) ? -magnitude : magnitude;
}

inline constexpr auto kFnuzTable = [] {
  std::array<float, 256> table{};
  for (int v = 0; v < 256; ++v) table[v] = decode_e4m3fnuz(static_cast<uint8_t>(v));
  return table;
}();

constexpr uint8_t byte_of(uint64_t packed, int slot) {
  return static_cast<uint8_t>(packed >> (8 * slot));
}

// ---- FP8 MFMAs, built from AMD's Matrix Instruction Calculator data (tests/rocm/golden), never from
// gemm/cdna3_mfma_layout.h: the kernel stages and scatters with that header, so a header wrong in a
// self-consistent way disagrees with these MFMAs and the GEMM tests fail.
#include "../../../golden/cdna3_mfma_fp8_lanes.inc"

struct LaneSlot {
  int lane, slot;
};
struct RowCol {
  int row, col;
};

// One instruction's golden data: per (lane, slot) in register order, the (row, col) of A, B and D.
#define HIP_EMU_GOLDEN_MFMA(NAME, PREFIX)                                         \
  struct NAME {                                                                   \
    static constexpr int kM = PREFIX##_M, kN = PREFIX##_N, kK = PREFIX##_K;       \
    static constexpr int kOperandSlots = 8, kAccum = kM * kN / kWaveSize;        \
    static constexpr int a[] = {PREFIX##_A}, b[] = {PREFIX##_B}, d[] = {PREFIX##_D}; \
  }
HIP_EMU_GOLDEN_MFMA(GoldenMfma32x32x16, CDNA3_MFMA_32X32X16_FP8);
HIP_EMU_GOLDEN_MFMA(GoldenMfma16x16x32, CDNA3_MFMA_16X16X32_FP8);
#undef HIP_EMU_GOLDEN_MFMA

// The golden lists inverted: where each A, B element lives, and which D element each (lane, slot) holds.
template <class G>
struct MfmaTables {
  LaneSlot a[G::kM][G::kK], b[G::kK][G::kN];
  RowCol d[kWaveSize][G::kAccum];
  bool complete = true;  // every matrix element has exactly one (lane, slot)
};

template <class G>
constexpr MfmaTables<G> make_tables() {
  MfmaTables<G> t{};
  int hits_a[G::kM][G::kK] = {}, hits_b[G::kK][G::kN] = {}, hits_d[G::kM][G::kN] = {};
  for (int lane = 0; lane < kWaveSize; ++lane) {
    for (int s = 0; s < G::kOperandSlots; ++s) {
      const int e = 2 * (lane * G::kOperandSlots + s);
      t.a[G::a[e]][G::a[e + 1]] = {lane, s};
      ++hits_a[G::a[e]][G::a[e + 1]];
      t.b[G::b[e]][G::b[e + 1]] = {lane, s};
      ++hits_b[G::b[e]][G::b[e + 1]];
    }
    for (int s = 0; s < G::kAccum; ++s) {
      const int e = 2 * (lane * G::kAccum + s);
      t.d[lane][s] = {G::d[e], G::d[e + 1]};
      ++hits_d[G::d[e]][G::d[e + 1]];
    }
  }
  for (const auto& row : hits_a)
    for (int h : row) t.complete = t.complete && h == 1;
  for (const auto& row : hits_b)
    for (int h : row) t.complete = t.complete && h == 1;
  for (const auto& row : hits_d)
    for (int h : row) t.complete = t.complete && h == 1;
  return t;
}

template <class G, class Accum>
Accum mfma_fp8(uint64_t a, uint64_t b, Accum c, int cbsz, int abid, int blgp) {
  static constexpr MfmaTables<G> tables = make_tables<G>();
  static_assert(tables.complete, "golden MFMA data must map every matrix element to one (lane, slot)");
  if (cbsz != 0 || abid != 0 || blgp != 0) fault("MFMA with non-zero cbsz/abid/blgp is not emulated");
  Wave& wave = *tl_wave;
  wave.a[tl_lane] = a;
  wave.b[tl_lane] = b;
  wave.sync.arrive_and_wait();
  Accum d;
  for (int e = 0; e < G::kAccum; ++e) {
    const auto [i, j] = tables.d[tl_lane][e];
    // FP8 x FP8 products are exact in fp32; the sum is fp32 in K order.
    float sum = 0.0f;
    for (int k = 0; k < G::kK; ++k) {
      const auto pa = tables.a[i][k];
      const auto pb = tables.b[k][j];
      sum += kFnuzTable[byte_of(wave.a[pa.lane], pa.slot)] * kFnuzTable[byte_of(wave.b[pb.lane], pb.slot)];
    }
    d[e] = c[e] + sum;
  }
  wave.sync.arrive_and_wait();  // nobody overwrites its slot before every lane has read it
  return d;
}

using Float16 = float __attribute__((ext_vector_type(16)));
using Float4 = float __attribute__((ext_vector_type(4)));

inline Float16 mfma_32x32x16(long a, long b, Float16 c, int cbsz, int abid, int blgp) {
  return mfma_fp8<GoldenMfma32x32x16>(a, b, c, cbsz, abid, blgp);
}
inline Float4 mfma_16x16x32(long a, long b, Float4 c, int cbsz, int abid, int blgp) {
  return mfma_fp8<GoldenMfma16x16x32>(a, b, c, cbsz, abid, blgp);
}

// v_perm_b32: result byte i is byte sel_i of the 8 bytes {hi:lo} (0-3 from lo, 4-7 from hi); selector
// values 12 and >= 13 give 0x00 and 0xFF, 8-11 the sign of bytes 1, 3, 5, 7 (ISA guide, V_PERM_B32).
inline uint32_t perm(uint32_t hi, uint32_t lo, uint32_t sel) {
  const uint64_t bytes = (static_cast<uint64_t>(hi) << 32) | lo;
  uint32_t out = 0;
  for (int i = 0; i < 4; ++i) {
    const uint32_t s = (sel >> (8 * i)) & 0xFFu;
    uint32_t byte;
    if (s < 8)
      byte = static_cast<uint32_t>(bytes >> (8 * s)) & 0xFFu;
    else if (s < 12)
      byte = (bytes >> (8 * (2 * (s - 8) + 1) + 7)) & 1u ? 0xFFu : 0x00u;
    else
      byte = s == 12 ? 0x00u : 0xFFu;
    out |= byte << (8 * i);
  }
  return out;
}

// clang-19 declares it int(int); all lanes are active unless exited, so "first" = lowest live lane.
inline int readfirstlane(int v) {
  Wave& wave = *tl_wave;
  wave.scalar[tl_lane] = static_cast<uint32_t>(v);
  wave.sync.arrive_and_wait();
  int first = 0;
  while (first < kWaveSize - 1 && !wave.alive[first]) ++first;
  const int result = static_cast<int>(static_cast<uint32_t>(wave.scalar[first]));
  wave.sync.arrive_and_wait();
  return result;
}

// ---- buffer resources (raw: stride 0) and bounds-checked loads ----
struct BufferRsrc {
  const uint8_t* base;
  int64_t num_records;  // bytes
};

inline BufferRsrc make_buffer_rsrc(const void* base, short stride, int num_records, int /*flags*/) {
  if (stride != 0) fault("buffer resource with non-zero stride: only raw buffers are emulated");
  return {static_cast<const uint8_t*>(base), static_cast<int64_t>(static_cast<uint32_t>(num_records))};
}

// Wholly out of range (offset >= num_records) reads 0: the contract's ragged-tail rule. An access
// that straddles num_records is chip-dependent on AMD hardware (checked per dword or per access), so
// its out-of-range bytes read 0x80 (fp8 NaN) to make any reliance on it visible. Whether soffset
// takes part in the range check also differs between generations: a load whose verdict depends on
// it is a fault.
template <int Bytes>
std::array<uint8_t, Bytes> buffer_load(BufferRsrc rsrc, int voffset, int soffset, int aux) {
  std::array<uint8_t, Bytes> out{};
  if (aux != 0) fault("buffer load with non-zero aux (cache policy) is not emulated");
  const int64_t offset = int64_t{voffset} + soffset;
  const int64_t v_only = voffset;
  if ((offset >= rsrc.num_records) != (v_only >= rsrc.num_records))
    fault("buffer load whose range check depends on soffset (voffset " + std::to_string(voffset) +
          ", soffset " + std::to_string(soffset) + ", num_records " + std::to_string(rsrc.num_records) + ")");
  if (offset >= rsrc.num_records) return out;
  for (int i = 0; i < Bytes; ++i) out[i] = offset + i < rsrc.num_records ? rsrc.base[offset + i] : kFnuzNaN;
  return out;
}

using Uint4 = unsigned int __attribute__((ext_vector_type(4)));
using Uint2 = unsigned int __attribute__((ext_vector_type(2)));

inline Uint4 buffer_load_b128(BufferRsrc r, int v, int s, int aux) {
  Uint4 out;
  const auto bytes = buffer_load<sizeof(Uint4)>(r, v, s, aux);
  std::memcpy(&out, bytes.data(), sizeof(out));
  return out;
}
inline Uint2 buffer_load_b64(BufferRsrc r, int v, int s, int aux) {
  Uint2 out;
  const auto bytes = buffer_load<sizeof(Uint2)>(r, v, s, aux);
  std::memcpy(&out, bytes.data(), sizeof(out));
  return out;
}
inline unsigned int buffer_load_b32(BufferRsrc r, int v, int s, int aux) {
  unsigned int out;
  const auto bytes = buffer_load<sizeof(unsigned int)>(r, v, s, aux);
  std::memcpy(&out, bytes.data(), sizeof(out));
  return out;
}

}  // namespace hip_emu

inline void __syncthreads() { hip_emu::tl_block->sync.arrive_and_wait(); }

// Only the builtins of the contract; the names are macros so that nothing else slips through.
#define __builtin_amdgcn_mfma_f32_32x32x16_fp8_fp8 ::hip_emu::mfma_32x32x16
#define __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8 ::hip_emu::mfma_16x16x32
#define __builtin_amdgcn_readfirstlane ::hip_emu::readfirstlane
#define __builtin_amdgcn_sched_barrier(mask) ((void)(mask))
#define __builtin_amdgcn_sched_group_barrier(mask, size, sync_id) ((void)(mask), (void)(size), (void)(sync_id))
#define __builtin_amdgcn_perm ::hip_emu::perm
#define __builtin_amdgcn_s_setprio(priority) ((void)(priority))
#define __builtin_amdgcn_s_waitcnt(counts) ((void)(counts))
#define __builtin_amdgcn_make_buffer_rsrc ::hip_emu::make_buffer_rsrc
#define __builtin_amdgcn_raw_buffer_load_b128 ::hip_emu::buffer_load_b128
#define __builtin_amdgcn_raw_buffer_load_b64 ::hip_emu::buffer_load_b64
#define __builtin_amdgcn_raw_buffer_load_b32 ::hip_emu::buffer_load_b32
typedef ::hip_emu::BufferRsrc __amdgpu_buffer_rsrc_t;

#define hipLaunchKernelGGL(...) ::hip_emu::launch(__VA_ARGS__)

inline hipError_t hipGetLastError() {
  std::lock_guard lock(hip_emu::errors().mutex);
  const hipError_t e = hip_emu::errors().fault.empty() ? hip_emu::errors().last : hipErrorLaunchFailure;
  hip_emu::errors().last = hipSuccess;
  return e;
}

inline const char* hipGetErrorString(hipError_t e) {
  switch (e) {
    case hipSuccess: return "hipSuccess";
    case hipErrorInvalidValue: return "hipErrorInvalidValue";
    case hipErrorInvalidConfiguration: return "hipErrorInvalidConfiguration";
    case hipErrorLaunchFailure: {
      // The fault text stays valid until the next reset_faults() (one GEMM call in the tests).
      static thread_local std::string text;
      text = "hipErrorLaunchFailure (emulator: " + hip_emu::fault_text() + ")";
      return text.c_str();
    }
  }
  return "unknown hipError_t";
}

inline hipError_t hipGetDevice(int* device) {
  *device = 0;
  return hipSuccess;
}

inline hipError_t hipDeviceGetAttribute(int* value, hipDeviceAttribute_t attribute, int device) {
  if (attribute != hipDeviceAttributeMultiprocessorCount || device != 0) return hipErrorInvalidValue;
  *value = hip_emu::kCuCount;
  return hipSuccess;
}

// Launches run synchronously here, so the stream order is program order.
inline hipError_t hipMemsetAsync(void* dst, int value, size_t bytes, hipStream_t) {
  std::memset(dst, value, bytes);
  return hipSuccess;
}
