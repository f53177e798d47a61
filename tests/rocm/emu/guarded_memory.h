// Host buffers with an unmapped page on each side, so that a kernel reading or writing outside a
// tensor faults under emulation (reported by hip_runtime.h's fault handler) instead of silently using
// neighbouring memory. One side is tight at a time (GuardSide): the data either ends at the trailing
// guard page (rounded up to its last 16-byte granule: a 16-byte chunk that starts inside the tensor
// stays legal, as on the GPU, same granule, same page) or starts right after the leading one. The copy
// keeps the source address modulo 16, since the kernel's chunk alignment decides its load path.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

namespace hip_emu {

constexpr uintptr_t kGranuleBytes = 16;

enum class GuardSide : int { kAfterEnd = 0, kBeforeStart = 1 };

class GuardedBuffer {
 public:
  // `bytes` of memory whose address is congruent to `align_like` modulo 16; copies `src` in if given.
  GuardedBuffer(std::string name, size_t bytes, uintptr_t align_like, const void* src, GuardSide side)
      : name_(std::move(name)), bytes_(bytes), page_(static_cast<size_t>(sysconf(_SC_PAGESIZE))) {
    const size_t data_pages = (bytes + kGranuleBytes + page_ - 1) / page_;
    mapping_bytes_ = (data_pages + 2) * page_;
    void* map = mmap(nullptr, mapping_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) return;
    mapping_ = static_cast<uint8_t*>(map);
    uint8_t* const first_data_page = mapping_ + page_;
    trailing_guard_ = first_data_page + data_pages * page_;
    mprotect(mapping_, page_, PROT_NONE);
    mprotect(trailing_guard_, page_, PROT_NONE);
    if (side == GuardSide::kAfterEnd) {
      const uintptr_t start = reinterpret_cast<uintptr_t>(trailing_guard_) - bytes;
      data_ = reinterpret_cast<uint8_t*>(start - (start - align_like) % kGranuleBytes);
    } else {
      data_ = first_data_page + align_like % kGranuleBytes;
    }
    if (src != nullptr) std::memcpy(data_, src, bytes);
  }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;
  ~GuardedBuffer() {
    if (mapping_ != nullptr) munmap(mapping_, mapping_bytes_);
  }

  uint8_t* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  bool ok() const { return data_ != nullptr; }
  // Names `address` if it lies in one of this buffer's guard pages.
  bool describe(uintptr_t address, std::string& out) const {
    if (mapping_ == nullptr) return false;
    const auto data = reinterpret_cast<uintptr_t>(data_);
    const auto leading = reinterpret_cast<uintptr_t>(mapping_);
    const auto trailing = reinterpret_cast<uintptr_t>(trailing_guard_);
    const std::string what = name_ + " (" + std::to_string(bytes_) + " bytes)";
    if (address >= trailing && address < trailing + page_) {
      out = "byte " + std::to_string(address - data) + " of " + what + ": past its end";
      return true;
    }
    if (address >= leading && address < leading + page_) {
      out = std::to_string(data - address) + " bytes before the start of " + what;
      return true;
    }
    return false;
  }

 private:
  std::string name_;
  size_t bytes_;
  size_t page_;
  size_t mapping_bytes_ = 0;
  uint8_t* mapping_ = nullptr;
  uint8_t* trailing_guard_ = nullptr;
  uint8_t* data_ = nullptr;
};

}  // namespace hip_emu
