// Large buffers (KV cache, repacked weights, benchmark buffers) and the
// memory budget they are checked against. Every buffer whose size comes from
// a model file or a user setting goes through allocate_large(bytes, what):
// an impossible size is a ResourceExhausted error naming what and the bytes,
// never std::bad_alloc, an abort or the OOM killer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace zl {

// Bytes this process can still get now: MemAvailable of /proc/meminfo,
// lowered to what the cgroup (v2) limit leaves (memory.max −
// memory.current); sysconf(_SC_AVPHYS_PAGES) when /proc/meminfo is absent;
// UINT64_MAX when nothing is known. Reads up to three small files (tens of
// µs): for start-up and large allocations, not per request. Thread-safe.
uint64_t available_memory_bytes();

// "512 B", "3.0 KiB", "48.0 GiB" (binary units, one decimal).
std::string format_bytes(uint64_t bytes);

// a × b, or nullopt when it does not fit in 64 bits.
std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b);
// a × b and a + b, saturating at UINT64_MAX (sizes that feed a budget check).
uint64_t saturating_mul(uint64_t a, uint64_t b);
uint64_t saturating_add(uint64_t a, uint64_t b);

// OK when `bytes` fit in `available`; else ResourceExhausted
// "<what> needs <bytes>, <available> available".
Status check_memory_budget(uint64_t bytes, std::string_view what, uint64_t available);

// An owned block from allocate_large. Move-only; freed on destruction.
class LargeBuffer {
 public:
  LargeBuffer() = default;
  ~LargeBuffer();
  LargeBuffer(LargeBuffer&& other) noexcept;
  LargeBuffer& operator=(LargeBuffer&& other) noexcept;
  LargeBuffer(const LargeBuffer&) = delete;
  LargeBuffer& operator=(const LargeBuffer&) = delete;

  uint8_t* data() const { return static_cast<uint8_t*>(p_); }
  size_t size() const { return size_; }  // the bytes asked for
  // Gives up ownership: the caller frees the pointer with std::free.
  void* release();

 private:
  friend Result<LargeBuffer> allocate_large(size_t bytes, std::string_view what, bool zeroed,
                                            std::optional<uint64_t> available);
  void* p_ = nullptr;
  size_t size_ = 0;
};

// The one checked path for large buffers: `bytes` (rounded up to a multiple
// of 64) aligned to 64 bytes, zeroed unless the caller overwrites it all
// anyway (`zeroed` false); from 2 MiB up, aligned to 2 MiB and advised for
// transparent huge pages (MADV_HUGEPAGE: the kernels stream through hundreds
// of megabytes, and 4 KiB pages cost a TLB miss and a hardware-prefetcher
// restart every 4 KiB). ResourceExhausted naming `what` and the bytes when
// they exceed `available` or the allocator refuses. Without `available`,
// buffers from kBudgetCheckBytes up are checked against
// available_memory_bytes() (smaller ones skip the file reads: a model's
// hundreds of repacked matrices). Thread-safe.
constexpr size_t kBudgetCheckBytes = size_t{16} << 20;
Result<LargeBuffer> allocate_large(size_t bytes, std::string_view what, bool zeroed = true,
                                   std::optional<uint64_t> available = std::nullopt);

}  // namespace zl
