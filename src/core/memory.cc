#include "core/memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <utility>


namespace zl {
namespace {

constexpr uint64_t kUnknown = std::numeric_limits<uint64_t>::max();

// "MemAvailable:   123456 kB" of /proc/meminfo, in bytes.
std::optional<uint64_t> meminfo_available() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  uint64_t kb = 0;
  std::string unit;
  while (f >> key >> kb >> unit) {
    if (key == "MemAvailable:") return saturating_mul(kb, 1024);
  }
  return std::nullopt;
}

// One number from a cgroup v2 file ("max" and a missing file: nullopt).
std::optional<uint64_t> cgroup_value(const char* path) {
  std::ifstream f(path);
  std::string v;
  if (!(f >> v) || v == "max") return std::nullopt;
  char* end = nullptr;
  const unsigned long long x = std::strtoull(v.c_str(), &end, 10);
  if (end == v.c_str() || *end != '\0') return std::nullopt;
  return x;
}

}  // namespace

uint64_t available_memory_bytes() {
  uint64_t avail = kUnknown;
  if (auto m = meminfo_available()) {
    avail = *m;
  } else {
    const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0) avail = saturating_mul(static_cast<uint64_t>(pages), static_cast<uint64_t>(page));
  }
  // The container's limit, when it is tighter than the machine.
  const auto max = cgroup_value("/sys/fs/cgroup/memory.max");
  const auto current = cgroup_value("/sys/fs/cgroup/memory.current");
  if (max && current) avail = std::min(avail, *max > *current ? *max - *current : 0);
  return avail;
}

std::string format_bytes(uint64_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes) / 1024;
  int unit = 0;
  while (v >= 1024 && unit < 5) {
    v /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[unit]);
  return buf;
}

std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) {
  uint64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out)) return std::nullopt;
  return out;
}

uint64_t saturating_mul(uint64_t a, uint64_t b) { return checked_mul(a, b).value_or(kUnknown); }

uint64_t saturating_add(uint64_t a, uint64_t b) { return a > kUnknown - b ? kUnknown : a + b; }

Status check_memory_budget(uint64_t bytes, std::string_view what, uint64_t available) {
  if (bytes <= available) return {};
  return resource_exhausted(std::string(what) + " needs " + format_bytes(bytes) + ", " +
                            (available >= SIZE_MAX / 2 ? std::string("more than can be allocated")
                                                       : format_bytes(available) + " available"));
}

LargeBuffer::~LargeBuffer() { std::free(p_); }

LargeBuffer::LargeBuffer(LargeBuffer&& other) noexcept : p_(other.p_), size_(other.size_) {
  other.p_ = nullptr;
  other.size_ = 0;
}

LargeBuffer& LargeBuffer::operator=(LargeBuffer&& other) noexcept {
  if (this != &other) {
    std::free(p_);
    p_ = std::exchange(other.p_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void* LargeBuffer::release() {
  size_ = 0;
  return std::exchange(p_, nullptr);
}

Result<LargeBuffer> allocate_large(size_t bytes, std::string_view what, bool zeroed,
                                   std::optional<uint64_t> available) {
  constexpr size_t kHuge = size_t{2} << 20;
  if (!available) available = bytes >= kBudgetCheckBytes ? available_memory_bytes() : kUnknown;
  // Half the address space bounds what rounding up below may add to.
  RETURN_IF_ERROR(check_memory_budget(bytes, what, std::min<uint64_t>(*available, SIZE_MAX / 2)));
  const size_t align = bytes >= kHuge ? kHuge : 64;
  const size_t rounded = (std::max<size_t>(bytes, 1) + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded);
  if (p == nullptr) {
    return resource_exhausted(std::string(what) + " needs " + format_bytes(bytes) +
                              ", and the allocator refused them");
  }
  // Advice only: without THP (or with it disabled) the pages stay 4 KiB.
  if (align == kHuge) (void)madvise(p, rounded, MADV_HUGEPAGE);
  if (zeroed) std::memset(p, 0, rounded);
  LargeBuffer b;
  b.p_ = p;
  b.size_ = bytes;
  return b;
}

}  // namespace zl
