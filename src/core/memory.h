// Large, long-lived buffers (repacked weights, benchmark buffers).
#pragma once

#include <cstddef>

namespace zl {

// `bytes` (rounded up to a multiple of 64) of memory aligned to 64 bytes,
// zeroed unless the caller overwrites it all anyway (`zeroed` false); from
// 2 MiB up, aligned to 2 MiB and advised for transparent huge pages
// (MADV_HUGEPAGE: the kernels stream through hundreds of megabytes, and
// 4 KiB pages cost a TLB miss and a hardware-prefetcher restart every
// 4 KiB). Free with std::free. CHECKs that the allocation succeeds.
void* allocate_large(size_t bytes, bool zeroed = true);

}  // namespace zl
