// Machine bounds for benchmarks (zerolayer bench): memory read bandwidth and
// the int8 dot-product peak of the active kernels' instruction set.
#pragma once

#include <cstddef>

#include "core/status.h"
#include "core/thread_pool.h"

namespace zl {

// Best of `n_passes` multi-threaded streaming reads of a `bytes` buffer (use
// one much larger than the last-level cache), in GB/s (1e9 bytes/s).
// Allocates (allocate_large: ResourceExhausted when `bytes` do not fit in
// the memory available) and touches the buffer first. Cost: about
// n_passes * bytes / BW.
Result<double> measure_read_bandwidth_gbs(ThreadPool* pool, size_t bytes, int n_passes = 5);

// Int8 multiply-add throughput of the active ISA (vpdpbusd on avx512,
// maddubs+madd on avx2, plain loops on scalar) on every pool thread, in
// GOPS (one multiply-add = 2 ops). Register-only loop of ~`ms` milliseconds.
double measure_int8_peak_gops(ThreadPool* pool, double ms = 200);

}  // namespace zl
