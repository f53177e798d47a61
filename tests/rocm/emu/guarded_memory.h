// Host buffers whose end touches an unmapped page, so that a kernel reading or writing past a tensor
// faults under emulation (reported by hip_runtime.h's fault handler) instead of silently using
// neighbouring memory. The copy keeps the source address modulo 16 (the kernel's chunk alignment
// decides its load path) and puts the guard page at the end of the last 16-byte granule: a 16-byte
// chunk that starts inside the tensor stays legal, as on the GPU (same granule, same page).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace hip_emu {

constexpr uintptr_t kGranuleBytes = 16;

class GuardedBuffer {
 public:
  // `bytes` of memory whose address is congruent to `align_like` modulo 16; copies `src` in if given.
  GuardedBuffer(std::string name, size_t bytes, uintptr_t align_like, const void* src)
      : name_(std::move(name)), bytes_(bytes) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t data_pages = (bytes + kGranuleBytes + page - 1) / page;
    mapping_bytes_ = (data_pages + 1) * page;
    void* map = mmap(nullptr, mapping_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) return;
    mapping_ = static_cast<uint8_t*>(map);
    guard_ = mapping_ + data_pages * page;
    mprotect(guard_, page, PROT_NONE);
    const uintptr_t end = reinterpret_cast<uintptr_t>(guard_) - bytes;
    data_ = reinterpret_cast<uint8_t*>(end - (end - align_like) % kGranuleBytes);
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
  // "past the end of <name> (+N bytes)" when `address` lies in this buffer's guard page.
  bool describe(uintptr_t address, std::string& out) const {
    const auto guard = reinterpret_cast<uintptr_t>(guard_);
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    if (mapping_ == nullptr || address < guard || address >= guard + page) return false;
    out = "address " + std::to_string(address - reinterpret_cast<uintptr_t>(data_)) + " bytes into " + name_ +
          " (" + std::to_string(bytes_) + " bytes): past its end";
    return true;
  }

 private:
  std::string name_;
  size_t bytes_;
  size_t mapping_bytes_ = 0;
  uint8_t* mapping_ = nullptr;
  uint8_t* guard_ = nullptr;
  uint8_t* data_ = nullptr;
};

}  // namespace hip_emu
