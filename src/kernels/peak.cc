#include "kernels/peak.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/memory.h"
#include "kernels/matmul.h"
#include "kernels/matmul_internal.h"

namespace zl {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Scalar int8 loop: `n` rounds of 64 multiply-adds; returns a checksum.
int64_t scalar_int8_ops(int64_t n) {
  int32_t acc[16] = {};
  int8_t a[64], b[64];
  for (int i = 0; i < 64; ++i) a[i] = static_cast<int8_t>(i * 7), b[i] = static_cast<int8_t>(i * 3 + 1);
  for (int64_t r = 0; r < n; ++r) {
    for (int i = 0; i < 64; ++i) acc[i & 15] += a[i] * b[i];
    a[r & 63] ^= static_cast<int8_t>(acc[r & 15]);
  }
  int64_t s = 0;
  for (int32_t v : acc) s += v;
  return s;
}

}  // namespace

Result<double> measure_read_bandwidth_gbs(ThreadPool* pool, size_t bytes, int n_passes) {
  // Each thread reads its own contiguous slice (huge pages where THP allows,
  // as for the repacked weights; written by itself before timing), a
  // multiple of 256 bytes and 64-byte aligned for the SIMD readers.
  const int64_t n_threads = pool ? pool->n_threads() : 1;
  const size_t slice = bytes / static_cast<size_t>(n_threads) / 4096 * 4096;
  ASSIGN_OR_RETURN(LargeBuffer buf, allocate_large(slice * n_threads, "the bandwidth test buffer", /*zeroed=*/false));
  auto run = [&](const std::function<void(int64_t, int64_t)>& fn) {
    if (pool) {
      pool->parallel_for(n_threads, fn);
    } else {
      fn(0, 1);
    }
  };
  run([&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) std::memset(buf.data() + t * slice, static_cast<int>(t + 1), slice);
  });
  const KernelIsa isa = active_isa();
  std::atomic<uint64_t> sink{0};
  double best = 0;
  for (int p = 0; p < n_passes; ++p) {
    const auto t0 = std::chrono::steady_clock::now();
    run([&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) {
        const uint8_t* s = buf.data() + t * slice;
        if (isa == KernelIsa::kAvx512) {
          sink += kern::avx512_read_bytes(s, slice);
        } else if (isa == KernelIsa::kAvx2) {
          sink += kern::avx2_read_bytes(s, slice);
        } else {
          const uint64_t* w = reinterpret_cast<const uint64_t*>(s);
          uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
          for (size_t i = 0; i < slice / 8; i += 4) s0 += w[i], s1 += w[i + 1], s2 += w[i + 2], s3 += w[i + 3];
          sink += s0 + s1 + s2 + s3;
        }
      }
    });
    best = std::max(best, static_cast<double>(slice * n_threads) / seconds_since(t0) / 1e9);
  }
  return best;
}

double measure_int8_peak_gops(ThreadPool* pool, double ms) {
  const KernelIsa isa = active_isa();
  const int64_t n_threads = pool ? pool->n_threads() : 1;
  // Calibrate the round count on one thread, then run it on all of them.
  auto ops_of = [&](int64_t rounds) -> std::pair<double, int64_t> {  // (ops per round, checksum)
    switch (isa) {
      case KernelIsa::kAvx512: return {kern::avx512_int8_peak_ops_per_round(), kern::avx512_int8_peak(rounds)};
      case KernelIsa::kAvx2: return {kern::avx2_int8_peak_ops_per_round(), kern::avx2_int8_peak(rounds)};
      case KernelIsa::kScalar: return {128.0, scalar_int8_ops(rounds)};
    }
    return {0, 0};
  };
  int64_t rounds = 1 << 16;
  for (;;) {
    const auto t0 = std::chrono::steady_clock::now();
    ops_of(rounds);
    const double s = seconds_since(t0);
    if (s > ms / 1e3 / 4 || rounds > (int64_t{1} << 40)) {
      rounds = static_cast<int64_t>(static_cast<double>(rounds) * (ms / 1e3) / s);
      break;
    }
    rounds *= 4;
  }
  std::atomic<int64_t> sink{0};
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    auto fn = [&](int64_t b, int64_t e) {
      for (int64_t t = b; t < e; ++t) sink += ops_of(rounds).second;
    };
    if (pool) {
      pool->parallel_for(n_threads, fn);
    } else {
      fn(0, 1);
    }
    const double s = seconds_since(t0);
    best = std::max(best, ops_of(0).first * static_cast<double>(rounds) * static_cast<double>(n_threads) / s / 1e9);
  }
  return best;
}

}  // namespace zl
