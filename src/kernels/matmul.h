// Matrix multiplication of a weight matrix by a batch of activation rows:
// y[t][r] = dot(W row r, x[t]) with ggml's semantics (kernels/quant.h):
// the activations are first converted to vec_dot_type(W.type) — Q8_0 for
// Q4_0/Q8_0, Q8_K for Q4_K/Q6_K, F16/BF16/F32 rounding for the float types —
// and each weight block is multiplied with exact integer sums.
//
// Kernels per instruction set, chosen at run time from CPUID (override with
// ZL_KERNELS=scalar|avx2|avx512 for tests and comparisons):
//   scalar  quant.h's vec_dot per (row, token) — the reference.
//   avx2    Q4_0/Q8_0/Q4_K/Q6_K weights repacked at load into groups of 16
//           rows interleaved by 4 bytes (as for avx512), multiplied as two
//           8-row halves with maddubs on unsigned nibbles (int16 sums of a
//           block, one madd to int32): both halves x 1-2 tokens for decode,
//           one half x up to 4 tokens for prefill; float formats in tiles of
//           rows x tokens (F16C + FMA).
//   avx512  the same repacked groups multiplied with AVX-512 VNNI
//           (vpdpbusd) against broadcast activations: one weight load serves
//           up to 12 tokens (Q4_0/Q8_0) or 8 (K-quants) — a GEMM
//           micro-kernel; float formats (matmul_float.h) in the GGUF rows,
//           register-tiled rows x tokens.
// Results differ from the scalar path only in float rounding (the order in
// which per-block integer sums are scaled and added). Every path is batch
// invariant: a token's outputs are bit-identical whatever else is in the
// batch (tested).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

#include "core/status.h"
#include "core/thread_pool.h"
#include "format/ggml_type.h"

namespace zl {

enum class KernelIsa { kScalar, kAvx2, kAvx512 };

// The best instruction set this CPU supports (cached CPUID query).
KernelIsa detected_isa();
// What matmul uses: ZL_KERNELS if set (clamped to what the CPU supports, with
// a warning on stderr), else detected_isa(). Read once per process.
KernelIsa active_isa();
bool isa_supported(KernelIsa isa);
const char* isa_name(KernelIsa isa);

// A weight matrix of n_out rows of n_in values, prepared once for one ISA.
// Holds its own copy of the weights in huge-page memory (core/memory.h):
// repacked (avx2/avx512 Q4_0/Q8_0/Q4_K/Q6_K: the same number of bytes) or
// the GGUF rows as they are (float formats). Only the scalar ISA
// references `data` in place (which must then outlive it). Immutable after
// construction; matmul may run on it from several threads.
class PackedMatrix {
 public:
  PackedMatrix() = default;
  // `data` holds n_out rows of row_size(type, n_in) bytes (GGUF layout).
  // Cost: one copy of the bytes (repacked, or as they are in huge pages), none
  // for the scalar ISA. CHECKs a supported type, and that the copy could be
  // allocated (fixed, small matrices: tests, benchmarks).
  PackedMatrix(GgmlType type, const uint8_t* data, int64_t n_in, int64_t n_out,
               KernelIsa isa = active_isa());
  // The same, with ResourceExhausted when the copy cannot be allocated
  // (core/memory.h allocate_large).
  static Result<PackedMatrix> create(GgmlType type, const uint8_t* data, int64_t n_in, int64_t n_out,
                                     KernelIsa isa = active_isa());

  // Rows of one source matrix, for stacked().
  struct Rows {
    const uint8_t* data;  // n_out rows of row_size(type, n_in) bytes
    int64_t n_out;
  };
  // The matrices `parts` (same type and n_in) stacked into one of
  // sum(n_out) rows, in order: matmul by it gives each part's outputs side by
  // side in a row of y, each value computed exactly as by that part alone
  // (rows are independent). Owns its rows: the repacked layout where `isa`
  // repacks (data() is then null), else a concatenated copy of the GGUF rows.
  // Cost: one copy of the parts' bytes.
  // CHECKs that the copies could be allocated; create_stacked returns
  // ResourceExhausted instead.
  static PackedMatrix stacked(GgmlType type, int64_t n_in, std::span<const Rows> parts,
                              KernelIsa isa = active_isa());
  static Result<PackedMatrix> create_stacked(GgmlType type, int64_t n_in, std::span<const Rows> parts,
                                             KernelIsa isa = active_isa());

  // Bytes the constructor's matrix of these shape, type and ISA keeps as its
  // own copy: the repacked layout or the rows in huge pages; 0 for the scalar
  // ISA. A stacked() matrix also copies its rows first (freed once repacked,
  // kept where the ISA does not repack, the scalar one included).
  // Saturates at UINT64_MAX. Cost: a few multiplications.
  static uint64_t copy_bytes(GgmlType type, int64_t n_in, int64_t n_out, KernelIsa isa = active_isa());

  GgmlType type() const { return type_; }
  int64_t n_in() const { return n_in_; }
  int64_t n_out() const { return n_out_; }
  KernelIsa isa() const { return isa_; }
  bool repacked() const { return quants_view_ != nullptr; }
  // True when the kernels read a copy (repacked or not), never the `data`
  // given to the constructor: every ISA but scalar.
  bool holds_copy() const { return isa_ != KernelIsa::kScalar; }
  // Bytes of weights read by one pass over the matrix.
  size_t n_bytes() const { return n_bytes_; }

  // GGUF layout: the rows the kernels read, a copy in huge-page memory when
  // the ISA is not scalar and the matrix not repacked (the original rows
  // where repacked; null for a repacked stacked() matrix).
  const uint8_t* data() const { return data_; }
  // Repacked layout (integer formats on avx2/avx512), see matmul_internal.h.
  const uint8_t* quants() const { return quants_view_; }
  const uint16_t* scales() const { return scales_view_; }

  // Rows [first, first + n) as a matrix of their own that reads this one's
  // weights in place (no copy; it must not outlive this matrix, and owns
  // nothing): many small matrices (a mixture-of-experts layer's experts)
  // kept in one large allocation, on huge pages, instead of one each on
  // 4 KiB pages. `first` and `n` must be multiples of view_unit() (n may
  // also end at n_out()); CHECKed. Cost: none.
  PackedMatrix rows_view(int64_t first, int64_t n) const;
  // kGroupRows (16) where the matrix is repacked, else 1; the static form:
  // for a matrix of `type` prepared for `isa`.
  int64_t view_unit() const;
  static int64_t view_unit(GgmlType type, KernelIsa isa);

 private:
  struct FreeDeleter {
    void operator()(void* p) const;
  };
  // The copies for isa_ of the rows at data_ (owned_rows_ when stacked).
  Status prepare();
  Status repack();
  GgmlType type_ = GgmlType::kF32;
  int64_t n_in_ = 0, n_out_ = 0;
  KernelIsa isa_ = KernelIsa::kScalar;
  size_t n_bytes_ = 0;
  const uint8_t* data_ = nullptr;
  std::unique_ptr<uint8_t, FreeDeleter> owned_rows_;  // the rows data_ points into, when a copy
  std::unique_ptr<uint8_t, FreeDeleter> quants_;
  std::unique_ptr<uint16_t, FreeDeleter> scales_;
  // What the kernels read: quants_ and scales_, or a rows_view()'s part of
  // another matrix's.
  const uint8_t* quants_view_ = nullptr;
  const uint16_t* scales_view_ = nullptr;
};

// y[t * n_out + r] = W row r · x[t] for t < n_tokens, r < n_out; x holds
// n_tokens rows of n_in floats. Quantizes x once (scratch is thread-local to
// the caller, grown on demand), then splits the rows over `pool` (may be
// null). Not reentrant per pool (ThreadPool::parallel_for).
void matmul(const PackedMatrix& w, const float* x, int64_t n_tokens, float* y, ThreadPool* pool);

// A matmul in two steps, for callers that schedule many small matmuls in
// one parallel region of their own (a mixture-of-experts layer: every active
// expert's rows in one ThreadPool::parallel_for instead of one each).
// prepare() converts the activations as matmul() does, into buffers this
// object owns (kept and reused: no allocation once grown); rows() computes
// output rows [r0, r1) for every token, each value bit-identical to
// matmul()'s whatever the split, as long as r0 (and r1, unless it is n_out)
// are multiples of grain(). rows() is const and may run concurrently on
// disjoint row ranges from any threads (the kernels' own scratch is
// thread-local). F32 weights read `x` in place: it must outlive the rows()
// calls. Move-only; one object per distinct input.
class MatmulInput {
 public:
  MatmulInput();
  ~MatmulInput();
  MatmulInput(MatmulInput&&) noexcept;
  MatmulInput& operator=(MatmulInput&&) noexcept;

  // Converts x (n_tokens rows of w.n_in() floats) for w's type and ISA, on
  // the calling thread. Cost: one pass over x.
  void prepare(const PackedMatrix& w, const float* x, int64_t n_tokens);
  // y[t * w.n_out() + r] for r in [r0, r1), t < n_tokens. `w`: the matrix
  // given to prepare(), or one of the same type, ISA and n_in.
  void rows(const PackedMatrix& w, float* y, int64_t r0, int64_t r1) const;
  int64_t n_tokens() const;
  // The row split unit of w for this input's tokens (matmul's own).
  int64_t grain(const PackedMatrix& w) const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

// Hints the pool's idle workers to prefetch the head of their first part of
// a coming matmul(w, ..., n_tokens, ..., pool) (ThreadPool::prefetch_hint):
// call it right after the matmul before, so that the serial work in between
// overlaps with the weight stream. Advice only.
void prefetch_matmul(const PackedMatrix& w, int64_t n_tokens, ThreadPool* pool);

}  // namespace zl
