// ReferenceForward: one sequence through the model, the simplest way to get
// logits (`zerolayer logits`, `zerolayer bench`, tests). It is ModelRunner
// (model/runner.h) over a private contiguous KV cache (F32 unless asked):
// one block of n_ctx positions. ZL_KERNELS=scalar turns every kernel into its plain scalar
// reference (kernels/quant.h vec_dot, scalar attention).
//
// Not thread-safe; the thread pool (if any) parallelizes inside each step.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "model/model.h"
#include "model/packed_weights.h"
#include "model/runner.h"

namespace zl {

class ReferenceForward {
 public:
  // n_ctx: KV cache capacity in tokens (<= 0: the model's training context).
  // `weights`: shared prepared weights; null prepares a private set.
  // `kv_type`: F32 (the reference, what the golden tests compare) or F16
  // (what the engine serves with; `zerolayer bench` measures that).
  ReferenceForward(const Model& model, int64_t n_ctx, ThreadPool* pool,
                   std::shared_ptr<const PackedWeights> weights = nullptr, KvType kv_type = KvType::kF32);

  // Feeds `tokens` at positions [n_past(), n_past() + tokens.size()) and
  // returns logits, n_vocab floats per output row: one row per token when
  // `all_logits`, else only the last token's. Errors: a token id outside the
  // vocabulary, or a context overflow (nothing is fed then).
  Result<std::vector<float>> forward(std::span<const int32_t> tokens, bool all_logits);

  int64_t n_past() const { return n_past_; }
  int64_t n_ctx() const { return n_ctx_; }
  void reset() { n_past_ = 0; }
  const PackedWeights& weights() const { return runner_.weights(); }

 private:
  int64_t n_ctx_;
  ModelRunner runner_;
  KvStorage kv_;
  int64_t n_past_ = 0;
};

}  // namespace zl
