// Dispatch, weight packing and the scalar reference path of kernels/matmul.h.
#include "kernels/matmul.h"

#include <algorithm>
#include <cmath>
#include <cpuid.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/log.h"
#include "core/memory.h"
#include "kernels/matmul_internal.h"
#include "kernels/matmul_float.h"
#include "kernels/quant.h"

namespace zl {
namespace {

// F16C from CPUID (leaf 1, ECX): clang 14's __builtin_cpu_supports does not
// know "f16c" (the fuzz build, scripts/fuzz.sh, compiles with clang 14).
bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
}

bool cpu_has_avx2() {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
}

bool cpu_has_avx512() {
  return cpu_has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
}

KernelIsa pick_active_isa() {
  const KernelIsa best = detected_isa();
  const char* env = std::getenv("ZL_KERNELS");
  if (env == nullptr || *env == '\0') return best;
  const std::string v = env;
  KernelIsa want = best;
  if (v == "scalar") {
    want = KernelIsa::kScalar;
  } else if (v == "avx2") {
    want = KernelIsa::kAvx2;
  } else if (v == "avx512") {
    want = KernelIsa::kAvx512;
  } else {
    log::warn("ignoring ZL_KERNELS (want scalar, avx2 or avx512)", {{"ZL_KERNELS", v}});
    return best;
  }
  if (!isa_supported(want)) {
    log::warn("ZL_KERNELS is not supported by this CPU", {{"ZL_KERNELS", v}, {"using", isa_name(best)}});
    return best;
  }
  return want;
}

// Every integer format repacks on the SIMD ISAs (matmul_internal.h).
bool repacks(GgmlType type, KernelIsa isa) { return isa != KernelIsa::kScalar && kern::group_block_bytes(type) > 0; }

bool is_k_quant(GgmlType type) { return kern::uses_q8_k(type); }

// The formats repacked by matmul_repack_more.cc (the rest by repack() and
// repack_k_quant).
bool is_more(GgmlType type) {
  return type != GgmlType::kQ4_0 && type != GgmlType::kQ8_0 && type != GgmlType::kQ4_K && type != GgmlType::kQ6_K;
}

// A weight copy (allocate_large: huge pages; ResourceExhausted when it does
// not fit). Freed with std::free (PackedMatrix::FreeDeleter).
Result<void*> aligned_bytes(size_t n, bool zeroed = true) {
  ASSIGN_OR_RETURN(LargeBuffer b, allocate_large(n, "a copy of a weight matrix", zeroed));
  return b.release();
}

// Bytes of the repacked layout of n_out rows of n_in values of `type` (a
// type repacks() accepts): the quants stream and the scales stream (none
// where the scales live in the quants stream). Rows are padded to whole groups.
struct RepackBytes {
  size_t quants = 0, scales = 0;
};
RepackBytes repack_bytes(GgmlType type, int64_t n_in, int64_t n_out) {
  const int64_t n_groups = (n_out + kern::kGroupRows - 1) / kern::kGroupRows;
  const int64_t n_blocks = n_in / (is_k_quant(type) ? kQkK : kQk32);
  const uint64_t group_blocks = saturating_mul(static_cast<uint64_t>(n_groups), static_cast<uint64_t>(n_blocks));
  return {.quants = saturating_mul(group_blocks, static_cast<uint64_t>(kern::group_block_bytes(type))),
          .scales = saturating_mul(group_blocks, static_cast<uint64_t>(kern::scale_bytes_per_block(type)))};
}

// Thread-local activation scratch of the calling thread (see matmul()).
struct Scratch {
  std::vector<int8_t> qs;
  std::vector<float> d;
  std::vector<int32_t> corr;  // also the K-quant pair sums
  std::vector<float> sa;      // Q4_1: Q8_1's block sums
  std::vector<float> f;
  std::vector<uint8_t> raw;  // scalar path: vec_dot_type rows
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// Grows `v` to at least n elements, never shrinks it: a decode step
// alternates between activation sizes (2048 and 8192 values for a 1B
// model), and each regrowth would value-initialize the difference again.
template <typename T>
void ensure_size(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

void run_rows(ThreadPool* pool, int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (pool != nullptr) {
    pool->parallel_for(n, fn, grain);
  } else {
    fn(0, n);
  }
}

// Activation quantization, token rows [t0, t1) per call: split over the
// pool from 4 tokens on, below that on the calling thread (a dispatch costs
// more than quantizing a few rows).
void quantize_tokens(ThreadPool* pool, int64_t n_tokens, const std::function<void(int64_t, int64_t)>& rows) {
  if (n_tokens >= 4) {
    run_rows(pool, n_tokens, 1, rows);
  } else {
    rows(0, n_tokens);
  }
}

// The scalar path in its two steps: the activations as vec_dot_type rows
// into `raw`, then rows [r0, r1) by quant.h's vec_dot.
void scalar_prepare(std::vector<uint8_t>& raw, const PackedMatrix& w, const float* x, int64_t n_tokens) {
  const int64_t n_in = w.n_in();
  const GgmlType partner = vec_dot_type(w.type());
  const size_t act_row = row_size(partner, n_in);
  ensure_size(raw, act_row * n_tokens);
  for (int64_t t = 0; t < n_tokens; ++t) quantize_row(partner, x + t * n_in, raw.data() + t * act_row, n_in);
}

void scalar_rows(const PackedMatrix& w, const uint8_t* act, int64_t n_tokens, float* y, int64_t r0, int64_t r1) {
  const int64_t n_in = w.n_in(), n_out = w.n_out();
  const size_t act_row = row_size(vec_dot_type(w.type()), n_in);
  const size_t w_row = row_size(w.type(), n_in);
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* wr = w.data() + r * w_row;
    for (int64_t t = 0; t < n_tokens; ++t) y[t * n_out + r] = vec_dot(w.type(), wr, act + t * act_row, n_in);
  }
}

constexpr int64_t kScalarGrain = 16;

void matmul_scalar(const PackedMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool) {
  auto& raw = scratch().raw;
  scalar_prepare(raw, w, x, n_tokens);
  const uint8_t* act = raw.data();
  run_rows(pool, w.n_out(), kScalarGrain,
           [&](int64_t r0, int64_t r1) { scalar_rows(w, act, n_tokens, y, r0, r1); });
}

// The per-block correction the kernels add for the weights' unsigned
// encoding (Acts::corr = corr_mul * sum of the block's activations): the
// offset of the unsigned weight values, negated. The AVX2 kernels of the
// later formats multiply signed values (no correction); Q4_1 takes the plain
// sum, from which q8_1_sums derives Q8_1's s.
int32_t q8_0_corr_mul(GgmlType type, KernelIsa isa) {
  switch (type) {
    case GgmlType::kQ4_0: return -8;
    case GgmlType::kQ8_0: return -128;
    case GgmlType::kQ4_1: return 1;
    case GgmlType::kQ5_0: return isa == KernelIsa::kAvx512 ? -16 : 0;
    case GgmlType::kIQ4_NL:
    case GgmlType::kMXFP4: return isa == KernelIsa::kAvx512 ? -128 : 0;
    default: return 0;
  }
}

// Q8_1's s per block, f16(sum(qs) * amax / 127) (the scale before its f16
// rounding, as ggml's quantize_row_q8_1), from the block sums in `sums`
// (tiled as Acts::d) into `sa` (same tiling).
void q8_1_sums(const float* x, int64_t n_in, int64_t n_tokens, const int32_t* sums, float* sa) {
  const int64_t nb = n_in / kQk32;
  for (int64_t i = 0; i < n_tokens; ++i) {
    const int64_t t0 = i / kern::kTokenTile * kern::kTokenTile;
    const int64_t stride = std::min<int64_t>(kern::kTokenTile, n_tokens - t0);
    const int64_t first = t0 * nb + (i - t0);
    for (int64_t b = 0; b < nb; ++b) {
      const float* xb = x + i * n_in + kQk32 * b;
      float amax = 0.0f;
      for (int j = 0; j < kQk32; ++j) amax = std::max(amax, std::fabs(xb[j]));
      const float d = amax / 127;
      const int64_t o = first + b * stride;
      sa[o] = fp16_to_fp32(fp32_to_fp16(static_cast<float>(sums[o]) * d));
    }
  }
}

// Quantizes x for w into `s` (matmul: the thread-local scratch); returns the view.
kern::Acts prepare_acts(Scratch& s, const PackedMatrix& w, const float* x, int64_t n_tokens, ThreadPool* pool) {
  kern::Acts a;
  a.n_tokens = n_tokens;
  const int64_t n_in = a.n_in = w.n_in();
  switch (w.type()) {
    // Integer formats: repacked on every SIMD ISA, activations tiled.
    case GgmlType::kQ4_0:
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_0:
    case GgmlType::kIQ4_NL:
    case GgmlType::kMXFP4: {
      const int64_t nb = n_in / kQk32;
      const int32_t corr_mul = q8_0_corr_mul(w.type(), w.isa());
      // (The tiled layout's last tile is compact: n_tokens rows.)
      ensure_size(s.qs, n_tokens * n_in);
      ensure_size(s.d, n_tokens * nb);
      ensure_size(s.corr, n_tokens * nb);
      const kern::RowQ8_0 row = w.isa() == KernelIsa::kAvx2 ? kern::avx2_quantize_q8_0 : kern::avx512_quantize_q8_0;
      quantize_tokens(pool, n_tokens, [&](int64_t t0, int64_t t1) {
        kern::quantize_q8_0_tiled(row, x, n_in, n_tokens, t0, t1, corr_mul, s.qs.data(), s.d.data(), s.corr.data());
      });
      a.qs = s.qs.data();
      a.d = s.d.data();
      a.corr = s.corr.data();
      if (w.type() == GgmlType::kQ4_1) {
        ensure_size(s.sa, n_tokens * nb);
        q8_1_sums(x, n_in, n_tokens, s.corr.data(), s.sa.data());
        a.sa = s.sa.data();
      }
      break;
    }
    case GgmlType::kQ4_K:
    case GgmlType::kQ6_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ3_K:
    case GgmlType::kQ2_K:
    case GgmlType::kIQ4_XS: {
      const int64_t nb = n_in / kQkK;
      ensure_size(s.qs, n_tokens * n_in);
      ensure_size(s.d, n_tokens * nb);
      ensure_size(s.corr, n_tokens * nb * 8);
      const kern::RowQ8_K row = w.isa() == KernelIsa::kAvx2 ? kern::avx2_quantize_q8_k : kern::avx512_quantize_q8_k;
      quantize_tokens(pool, n_tokens, [&](int64_t t0, int64_t t1) {
        kern::quantize_q8_k_tiled(row, w.type(), x, n_in, n_tokens, t0, t1, s.qs.data(), s.d.data(), s.corr.data());
      });
      a.kqs = s.qs.data();
      a.kd = s.d.data();
      a.kpairs = s.corr.data();
      break;
    }
    case GgmlType::kF32: a.f = x; break;
    case GgmlType::kF16:
    case GgmlType::kBF16: {
      const bool f16 = w.type() == GgmlType::kF16;
      ensure_size(s.f, n_tokens * n_in);
      if (w.isa() == KernelIsa::kAvx512) {
        kern::avx512_round_through(w.type(), x, n_tokens * n_in, s.f.data());
      } else {
        for (int64_t i = 0; i < n_tokens * n_in; ++i) {
          s.f[i] = f16 ? fp16_to_fp32(fp32_to_fp16(x[i])) : bf16_to_fp32(fp32_to_bf16(x[i]));
        }
      }
      a.f = s.f.data();
      break;
    }
    default: CHECK(false) << "matmul: unsupported type " << ggml_type_name(w.type());
  }
  return a;
}

}  // namespace

KernelIsa detected_isa() {
  static const KernelIsa isa = cpu_has_avx512() ? KernelIsa::kAvx512
                               : cpu_has_avx2() ? KernelIsa::kAvx2
                                                : KernelIsa::kScalar;
  return isa;
}

KernelIsa active_isa() {
  static const KernelIsa isa = pick_active_isa();
  return isa;
}

bool isa_supported(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kScalar: return true;
    case KernelIsa::kAvx2: return cpu_has_avx2();
    case KernelIsa::kAvx512: return cpu_has_avx512();
  }
  return false;
}

const char* isa_name(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kScalar: return "scalar";
    case KernelIsa::kAvx2: return "avx2";
    case KernelIsa::kAvx512: return "avx512";
  }
  return "?";
}

void PackedMatrix::FreeDeleter::operator()(void* p) const { std::free(p); }

PackedMatrix::PackedMatrix(GgmlType type, const uint8_t* data, int64_t n_in, int64_t n_out, KernelIsa isa)
    : type_(type), n_in_(n_in), n_out_(n_out), isa_(isa), data_(data) {
  const Status st = prepare();
  CHECK(st.ok()) << st.to_string();
}

Result<PackedMatrix> PackedMatrix::create(GgmlType type, const uint8_t* data, int64_t n_in, int64_t n_out,
                                          KernelIsa isa) {
  PackedMatrix m;
  m.type_ = type, m.n_in_ = n_in, m.n_out_ = n_out, m.isa_ = isa, m.data_ = data;
  RETURN_IF_ERROR(m.prepare());
  return m;
}

Status PackedMatrix::prepare() {
  CHECK(isa_supported(isa_)) << "PackedMatrix: " << isa_name(isa_) << " is not supported by this CPU";
  vec_dot_type(type_);  // CHECKs a supported type
  n_bytes_ = row_size(type_, n_in_) * static_cast<size_t>(n_out_);
  if (!repacks(type_, isa_)) {
    // The SIMD kernels read these rows in place: from a copy in huge pages
    // (allocate_large) rather than the 4 KiB pages of a mapped file, worth
    // ~10% of decode bandwidth for float weights (kernel_bench, bench/README.md).
    if (isa_ != KernelIsa::kScalar && !owned_rows_) {
      ASSIGN_OR_RETURN(void* rows, aligned_bytes(n_bytes_, /*zeroed=*/false));  // overwritten next
      owned_rows_.reset(static_cast<uint8_t*>(rows));
      std::memcpy(owned_rows_.get(), data_, n_bytes_);
      data_ = owned_rows_.get();
    }
    return {};
  }
  RETURN_IF_ERROR(repack());
  if (owned_rows_) {  // stacked(): only the repacked copy is kept
    owned_rows_.reset();
    data_ = nullptr;
  }
  return {};
}

Status PackedMatrix::repack() {
  const GgmlType type = type_;
  const int64_t n_in = n_in_, n_out = n_out_;
  const uint8_t* data = data_;
  const size_t w_row = row_size(type, n_in);
  const RepackBytes bytes = repack_bytes(type, n_in, n_out);
  ASSIGN_OR_RETURN(void* quants, aligned_bytes(bytes.quants));
  quants_.reset(static_cast<uint8_t*>(quants));
  if (bytes.scales > 0) {
    ASSIGN_OR_RETURN(void* scales, aligned_bytes(bytes.scales));
    scales_.reset(static_cast<uint16_t*>(scales));
  }
  quants_view_ = quants_.get();
  scales_view_ = scales_.get();
  if (is_more(type)) {
    kern::repack_more(type, data, n_in, n_out, quants_.get(), reinterpret_cast<uint8_t*>(scales_.get()));
    return {};
  }
  if (is_k_quant(type)) {
    kern::repack_k_quant(type, data, n_in, n_out, quants_.get(), scales_.get());
    return {};
  }
  const int64_t nb = n_in / kQk32;
  const bool q4 = type == GgmlType::kQ4_0;
  const int64_t gb = kern::group_block_bytes(type);
  for (int64_t r = 0; r < n_out; ++r) {
    const int64_t g = r / kern::kGroupRows, lane = r % kern::kGroupRows;
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* dst = quants_.get() + (g * nb + b) * gb + 4 * lane;
      if (q4) {
        const auto& blk = reinterpret_cast<const BlockQ4_0*>(data + r * w_row)[b];
        scales_.get()[(g * nb + b) * kern::kGroupRows + lane] = blk.d;
        for (int j = 0; j < 4; ++j) std::memcpy(dst + 64 * j, blk.qs + 4 * j, 4);
      } else {
        const auto& blk = reinterpret_cast<const BlockQ8_0*>(data + r * w_row)[b];
        scales_.get()[(g * nb + b) * kern::kGroupRows + lane] = blk.d;
        for (int j = 0; j < 8; ++j) {
          for (int i = 0; i < 4; ++i) dst[64 * j + i] = static_cast<uint8_t>(blk.qs[4 * j + i]) ^ 0x80;
        }
      }
    }
  }
  // Padding rows of the last group: zero scales; their (zero) quants are
  // never stored (the kernel masks them), so their value does not matter.
  return {};
}

namespace kern {

void repack_k_quant(GgmlType type, const uint8_t* data, int64_t n_in, int64_t n_out, uint8_t* stream,
                    uint16_t* scales) {
  const int64_t nbk = n_in / kQkK;
  const size_t w_row = row_size(type, n_in);
  const bool q6 = type == GgmlType::kQ6_K;
  const int64_t gb = group_block_bytes(type);
  // Lane `lane` (4 bytes) of vector v of super-block b of group g.
  auto lane_of = [&](int64_t g, int64_t b, int v, int64_t lane) { return stream + (g * nbk + b) * gb + 64 * v + 4 * lane; };
  for (int64_t r = 0; r < n_out; ++r) {
    const int64_t g = r / kGroupRows, lane = r % kGroupRows;
    for (int64_t b = 0; b < nbk; ++b) {
      if (q6) {
        const auto& blk = reinterpret_cast<const BlockQ6_K*>(data + r * w_row)[b];
        for (int h = 0; h < 2; ++h) {
          for (int k = 0; k < 8; ++k) {
            for (int i = 0; i < 4; ++i) {  // the bits rearranged (matmul_internal.h)
              const int l = 4 * k + i;
              const uint8_t ql0 = blk.ql[64 * h + l], ql1 = blk.ql[64 * h + 32 + l], qh = blk.qh[32 * h + l];
              lane_of(g, b, 24 * h + 3 * k, lane)[i] =
                  static_cast<uint8_t>((ql0 & 0x0F) | (qh & 0x03) << 4 | ((qh >> 4) & 0x03) << 6);
              lane_of(g, b, 24 * h + 3 * k + 1, lane)[i] =
                  static_cast<uint8_t>((ql1 & 0x0F) | ((qh >> 2) & 0x03) << 4 | ((qh >> 6) & 0x03) << 6);
              lane_of(g, b, 24 * h + 3 * k + 2, lane)[i] = static_cast<uint8_t>((ql0 >> 4) | (ql1 & 0xF0));
            }
          }
        }
        for (int i = 0; i < 4; ++i) std::memcpy(lane_of(g, b, 48 + i, lane), blk.scales + 4 * i, 4);
        scales[(g * nbk + b) * kGroupRows + lane] = blk.d;
      } else {
        const auto& blk = reinterpret_cast<const BlockQ4_K*>(data + r * w_row)[b];
        for (int v = 0; v < 32; ++v) std::memcpy(lane_of(g, b, v, lane), blk.qs + 4 * v, 4);
        for (int i = 0; i < 3; ++i) std::memcpy(lane_of(g, b, 32 + i, lane), blk.scales + 4 * i, 4);
        uint8_t* dm = stream + (g * nbk + b) * gb + 2240;
        std::memcpy(dm + 2 * lane, &blk.d, 2);
        std::memcpy(dm + 32 + 2 * lane, &blk.dmin, 2);
      }
    }
  }
}

namespace {

// Token i's first slot (block 0) in the tiled layout of Acts and the
// distance between its blocks: the width of its tile.
void tiled_row(int64_t i, int64_t nb, int64_t n_tokens, int64_t tile, int64_t* first, int64_t* stride) {
  const int64_t t0 = i / tile * tile;
  *stride = std::min(tile, n_tokens - t0);
  *first = t0 * nb + (i - t0);
}

}  // namespace

void quantize_q8_0_tiled(RowQ8_0 row, const float* x, int64_t n_in, int64_t n_tokens, int64_t t0, int64_t t1,
                         int32_t corr_mul, int8_t* qs, float* d, int32_t* corr) {
  const int64_t nb = n_in / kQk32;
  for (int64_t i = t0; i < t1; ++i) {
    int64_t first = 0, stride = 0;
    tiled_row(i, nb, n_tokens, kTokenTile, &first, &stride);
    row(x + i * n_in, nb, stride, corr_mul, qs + kQk32 * first, d + first, corr + first);
  }
}

void quantize_q8_k_tiled(RowQ8_K row, GgmlType type, const float* x, int64_t n_in, int64_t n_tokens, int64_t t0,
                         int64_t t1, int8_t* qs, float* d, int32_t* pairs) {
  const int64_t nbk = n_in / kQkK;
  for (int64_t i = t0; i < t1; ++i) {
    int64_t first = 0, stride = 0;
    tiled_row(i, nbk, n_tokens, kTokenTileK, &first, &stride);
    row(type, x + i * n_in, nbk, stride, qs + kQkK * first, d + first, pairs + 8 * first);
  }
}

}  // namespace kern

int64_t PackedMatrix::view_unit() const { return repacked() ? kern::kGroupRows : 1; }

int64_t PackedMatrix::view_unit(GgmlType type, KernelIsa isa) { return repacks(type, isa) ? kern::kGroupRows : 1; }

PackedMatrix PackedMatrix::rows_view(int64_t first, int64_t n) const {
  const int64_t unit = view_unit();
  CHECK(first >= 0 && n >= 0 && first + n <= n_out_ && first % unit == 0 && (n % unit == 0 || first + n == n_out_))
      << "rows_view(" << first << ", " << n << ") of " << n_out_ << " rows in units of " << unit;
  PackedMatrix v;
  v.type_ = type_, v.n_in_ = n_in_, v.n_out_ = n, v.isa_ = isa_;
  const size_t w_row = row_size(type_, n_in_);
  v.n_bytes_ = w_row * static_cast<size_t>(n);
  if (data_) v.data_ = data_ + w_row * static_cast<size_t>(first);
  if (repacked()) {
    const int64_t nb = n_in_ / (is_k_quant(type_) ? kQkK : kQk32);
    const int64_t g = first / kern::kGroupRows;
    v.quants_view_ = quants_view_ + g * nb * kern::group_block_bytes(type_);
    if (scales_view_) {
      v.scales_view_ = reinterpret_cast<const uint16_t*>(reinterpret_cast<const uint8_t*>(scales_view_) +
                                                         g * nb * kern::scale_bytes_per_block(type_));
    }
  }
  return v;
}

uint64_t PackedMatrix::copy_bytes(GgmlType type, int64_t n_in, int64_t n_out, KernelIsa isa) {
  if (isa == KernelIsa::kScalar) return 0;
  if (!repacks(type, isa)) return saturating_mul(row_size(type, n_in), static_cast<uint64_t>(n_out));
  const RepackBytes bytes = repack_bytes(type, n_in, n_out);
  return saturating_add(bytes.quants, bytes.scales);
}

PackedMatrix PackedMatrix::stacked(GgmlType type, int64_t n_in, std::span<const Rows> parts, KernelIsa isa) {
  auto m = create_stacked(type, n_in, parts, isa);
  CHECK(m.ok()) << m.status().to_string();
  return std::move(m).value();
}

Result<PackedMatrix> PackedMatrix::create_stacked(GgmlType type, int64_t n_in, std::span<const Rows> parts,
                                                  KernelIsa isa) {
  const size_t w_row = row_size(type, n_in);
  int64_t n_out = 0;
  for (const Rows& p : parts) n_out += p.n_out;
  ASSIGN_OR_RETURN(void* rows, aligned_bytes(w_row * n_out, /*zeroed=*/false));
  PackedMatrix m;
  m.owned_rows_.reset(static_cast<uint8_t*>(rows));
  size_t offset = 0;
  for (const Rows& p : parts) {
    std::memcpy(m.owned_rows_.get() + offset, p.data, w_row * p.n_out);
    offset += w_row * p.n_out;
  }
  m.type_ = type, m.n_in_ = n_in, m.n_out_ = n_out, m.isa_ = isa, m.data_ = m.owned_rows_.get();
  RETURN_IF_ERROR(m.prepare());
  return m;
}

namespace {

// The parallel_for split of matmul: rows and their grain.
int64_t row_grain(const PackedMatrix& w, int64_t n_tokens, const ThreadPool* pool) {
  if (w.repacked()) return kern::kGroupRows;
  const bool is_float = w.type() == GgmlType::kF32 || w.type() == GgmlType::kF16 || w.type() == GgmlType::kBF16;
  if (!is_float || w.isa() == KernelIsa::kScalar) return 4;
  const int64_t grain = w.isa() == KernelIsa::kAvx512 ? kern::avx512_float_row_grain(n_tokens)
                                                      : kern::avx2_float_row_grain(n_tokens);
  // Many tokens (the packed path, above matmul_avx512_float.cc's
  // kDirectMaxTokens = 10): every call packs the activations, so a thread's
  // rows go in a few large calls (about 4), not in the small chunks that
  // balance the end of a memory-bound decode matmul.
  constexpr int64_t kManyTokens = 11, kCallsPerThread = 4;
  if (n_tokens < kManyTokens || pool == nullptr) return grain;
  const int64_t per_call = (w.n_out() + pool->n_threads() * kCallsPerThread - 1) / (pool->n_threads() * kCallsPerThread);
  return std::max(grain, (per_call + grain - 1) / grain * grain);
}

// The SIMD kernel of w's type and ISA.
kern::RowsKernel rows_kernel(const PackedMatrix& w) {
  const kern::RowsKernel kernel = w.repacked() ? (w.isa() == KernelIsa::kAvx2 ? kern::avx2_repacked_rows_kernel(w.type())
                                                                            : kern::avx512_rows_kernel(w.type()))
                                  : w.isa() == KernelIsa::kAvx512 && kern::avx512_float_rows_kernel(w.type())
                                      ? kern::avx512_float_rows_kernel(w.type())
                                      : kern::avx2_rows_kernel(w.type());
  CHECK(kernel != nullptr) << "matmul: no " << isa_name(w.isa()) << " kernel for " << ggml_type_name(w.type());
  return kernel;
}

// Below ~64 KiB of weight traffic a dispatch costs more than it saves.
bool worth_a_dispatch(const PackedMatrix& w, int64_t n_tokens) {
  return w.n_bytes() * static_cast<size_t>(n_tokens) >= (size_t{64} << 10);
}

}  // namespace

void prefetch_matmul(const PackedMatrix& w, int64_t n_tokens, ThreadPool* pool) {
  if (pool == nullptr || n_tokens <= 0 || w.n_out() == 0 || w.isa() == KernelIsa::kScalar ||
      !worth_a_dispatch(w, n_tokens)) {
    return;
  }
  // More than a gap of serial work lasts (a few microseconds, ~100 KB at one
  // core's bandwidth), well within L2; the long gap between decode steps
  // fills it.
  constexpr size_t kHeadBytes = size_t{512} << 10;
  const int64_t grain = row_grain(w, n_tokens, pool);
  for (int t = 1; t < pool->n_threads(); ++t) {
    int64_t r0 = 0, r1 = 0;
    pool->own_range(w.n_out(), grain, t, &r0, &r1);
    if (r1 <= r0) continue;
    const uint8_t* p = nullptr;
    size_t bytes = 0;
    if (w.repacked()) {  // groups of kGroupRows rows, each one stream of blocks (matmul_internal.h)
      const int64_t block_values = is_k_quant(w.type()) ? kQkK : kQk32;
      const size_t group_bytes = static_cast<size_t>(w.n_in() / block_values * kern::group_block_bytes(w.type()));
      p = w.quants() + static_cast<size_t>(r0 / kern::kGroupRows) * group_bytes;
      bytes = static_cast<size_t>((r1 - r0 + kern::kGroupRows - 1) / kern::kGroupRows) * group_bytes;
    } else {
      const size_t row = w.n_bytes() / static_cast<size_t>(w.n_out());
      p = w.data() + static_cast<size_t>(r0) * row;
      bytes = static_cast<size_t>(r1 - r0) * row;
    }
    pool->prefetch_hint(t, p, std::min(bytes, kHeadBytes));
  }
}

void matmul(const PackedMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool) {
  if (n_tokens <= 0 || w.n_out() == 0) return;
  if (w.isa() == KernelIsa::kScalar) return matmul_scalar(w, x, n_tokens, y, pool);
  const kern::Acts a = prepare_acts(scratch(), w, x, n_tokens, pool);
  const kern::RowsKernel kernel = rows_kernel(w);
  const int64_t grain = row_grain(w, n_tokens, pool);
  if (!worth_a_dispatch(w, n_tokens)) pool = nullptr;
  run_rows(pool, w.n_out(), grain, [&](int64_t r0, int64_t r1) { kernel(w, a, y, r0, r1); });
}

// ------------------------------------------------------------- MatmulInput

struct MatmulInput::State {
  Scratch scratch;
  kern::Acts acts;
  kern::RowsKernel kernel = nullptr;  // null: the scalar ISA
  GgmlType type = GgmlType::kF32;
  KernelIsa isa = KernelIsa::kScalar;
  int64_t n_in = 0, n_tokens = 0;
};

MatmulInput::MatmulInput() : s_(std::make_unique<State>()) {}
MatmulInput::~MatmulInput() = default;
MatmulInput::MatmulInput(MatmulInput&&) noexcept = default;
MatmulInput& MatmulInput::operator=(MatmulInput&&) noexcept = default;

void MatmulInput::prepare(const PackedMatrix& w, const float* x, int64_t n_tokens) {
  State& s = *s_;
  s.type = w.type(), s.isa = w.isa(), s.n_in = w.n_in(), s.n_tokens = n_tokens;
  s.kernel = nullptr;
  if (n_tokens <= 0) return;
  if (w.isa() == KernelIsa::kScalar) {
    scalar_prepare(s.scratch.raw, w, x, n_tokens);
    return;
  }
  s.acts = prepare_acts(s.scratch, w, x, n_tokens, /*pool=*/nullptr);
  s.kernel = rows_kernel(w);
}

void MatmulInput::rows(const PackedMatrix& w, float* y, int64_t r0, int64_t r1) const {
  const State& s = *s_;
  DCHECK(w.type() == s.type && w.isa() == s.isa && w.n_in() == s.n_in);
  if (s.n_tokens <= 0 || r0 >= r1) return;
  if (s.isa == KernelIsa::kScalar) return scalar_rows(w, s.scratch.raw.data(), s.n_tokens, y, r0, r1);
  s.kernel(w, s.acts, y, r0, r1);
}

int64_t MatmulInput::n_tokens() const { return s_->n_tokens; }

int64_t MatmulInput::grain(const PackedMatrix& w) const {
  return w.isa() == KernelIsa::kScalar ? kScalarGrain : row_grain(w, s_->n_tokens, /*pool=*/nullptr);
}

}  // namespace zl
