#include "core/memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/check.h"

namespace zl {

void* allocate_large(size_t bytes, bool zeroed) {
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t align = bytes >= kHuge ? kHuge : 64;
  const size_t rounded = (std::max<size_t>(bytes, 1) + align - 1) / align * align;
  void* p = std::aligned_alloc(align, rounded);
  CHECK(p != nullptr) << "out of memory allocating " << bytes << " bytes";
  // Advice only: without THP (or with it disabled) the pages stay 4 KiB.
  if (align == kHuge) (void)madvise(p, rounded, MADV_HUGEPAGE);
  if (zeroed) std::memset(p, 0, rounded);
  return p;
}

}  // namespace zl
