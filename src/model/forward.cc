#include "model/forward.h"

namespace zl {

ReferenceForward::ReferenceForward(const Model& model, int64_t n_ctx, ThreadPool* pool,
                                   std::shared_ptr<const PackedWeights> weights, KvType kv_type)
    : n_ctx_(n_ctx > 0 ? n_ctx : model.config.n_ctx_train),
      runner_(model, pool, std::move(weights), n_ctx_),
      kv_(model.config, /*n_blocks=*/1, /*block_size=*/n_ctx_, kv_type) {}

Result<std::vector<float>> ReferenceForward::forward(std::span<const int32_t> tokens, bool all_logits) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return invalid_argument("no tokens to feed");
  if (n_past_ + n > n_ctx_) {
    return out_of_range("context overflow: " + std::to_string(n_past_) + " + " + std::to_string(n) +
                        " tokens exceed the context of " + std::to_string(n_ctx_));
  }
  static const int32_t kTable[1] = {0};
  const BatchSequence seq{.tokens = tokens, .n_past = n_past_, .block_table = kTable, .all_logits = all_logits};
  std::vector<float> logits;
  RETURN_IF_ERROR(runner_.forward(std::span(&seq, 1), kv_, logits));
  n_past_ += n;
  return logits;
}

}  // namespace zl
