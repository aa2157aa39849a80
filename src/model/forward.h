// The reference forward pass of the Llama family: plain, readable, and exact
// to llama.cpp's CPU arithmetic where that matters (activations are converted
// to each weight type's dot-product partner before every matmul).
//
// One ReferenceForward holds one sequence's F32 KV cache ([n_ctx, kv_dim] per
// layer). Not thread-safe; the thread pool (if any) parallelizes each matmul
// over output rows and attention over heads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "model/model.h"

namespace zl {

// Every matmul weight of a model prepared once for the kernels (repacked
// where that pays, kernels/matmul.h), shared by the forward passes of all
// sequences. Immutable after construction; thread-safe to read.
class PackedWeights {
 public:
  // Cost: one pass over the weights (a copy of those the ISA repacks).
  explicit PackedWeights(const Model& model, KernelIsa isa = active_isa());
  // CHECKs that `t` is one of the model's matmul weights.
  const PackedMatrix& get(const GgufTensor& t) const;
  // Weight bytes one token's forward pass reads (each matrix once).
  uint64_t n_bytes_per_token() const { return n_bytes_per_token_; }

 private:
  std::unordered_map<const GgufTensor*, PackedMatrix> by_tensor_;
  uint64_t n_bytes_per_token_ = 0;
};

class ReferenceForward {
 public:
  // n_ctx: KV cache capacity in tokens (<= 0: the model's training context).
  // `weights`: shared prepared weights; null prepares a private set.
  ReferenceForward(const Model& model, int64_t n_ctx, ThreadPool* pool,
                   std::shared_ptr<const PackedWeights> weights = nullptr);

  // Feeds `tokens` at positions [n_past(), n_past() + tokens.size()) and
  // returns logits, n_vocab floats per output row: one row per token when
  // `all_logits`, else only the last token's. Errors: a token id outside the
  // vocabulary, or a context overflow (nothing is fed then).
  Result<std::vector<float>> forward(std::span<const int32_t> tokens, bool all_logits);

  int64_t n_past() const { return n_past_; }
  int64_t n_ctx() const { return n_ctx_; }
  void reset() { n_past_ = 0; }

 private:
  void attention_block(const LayerWeights& l, int64_t il, int64_t n_tokens);
  void ffn_block(const LayerWeights& l, int64_t n_tokens);
  void rope(float* x, int64_t n_heads, int64_t pos) const;
  // y[t][r] = W[r] · x[t] for t < n_tokens; x rows have W.ne[0] floats.
  void matmul(const GgufTensor& w, const float* x, int64_t n_tokens, float* y);

  const Model& model_;
  const ModelConfig& c_;
  std::shared_ptr<const PackedWeights> weights_;
  ThreadPool* pool_;
  int64_t n_ctx_;
  int64_t n_past_ = 0;
  std::vector<std::vector<float>> k_cache_;  // [layer][pos * kv_dim]
  std::vector<std::vector<float>> v_cache_;  // [layer][pos * kv_dim]
  // Scratch, sized for the current batch.
  std::vector<float> x_, xn_, q_, k_, v_, attn_, gate_, up_, tmp_;
};

// Applies y = x / sqrt(mean(x²) + eps) * w over n floats (sum in double, as ggml).
void rms_norm(const float* x, const float* w, float* y, int64_t n, float eps);

}  // namespace zl
