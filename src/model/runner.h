// ModelRunner: one forward pass over a ragged batch of sequences whose K/V
// live in a paged cache (DESIGN.md §4).
//
// Every step, the tokens of all scheduled sequences (prefill chunks and
// decode tokens alike) are concatenated into one activation matrix, so each
// weight matrix is read once per step however many sequences run. Attention
// then reads each sequence's K/V through its block table. The result for a
// token does not depend on what else is in the batch (every output is
// computed in the same order whatever the batch), which is what makes N
// concurrent greedy requests produce exactly the ids each produces alone.
//
// Not thread-safe: one engine thread drives it; the ThreadPool parallelizes
// matmuls over output rows and attention over (token, head).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "core/memory.h"  // LargeBuffer
#include "core/status.h"
#include "core/thread_pool.h"
#include "kernels/attention.h"  // KvType
#include "model/model.h"
#include "model/moe.h"
#include "model/packed_weights.h"

namespace zl {

// K/V storage of a paged cache: per layer, [n_blocks][block_size][kv_dim].
// Owns the memory (n_layer × 2 × n_blocks × block_size × kv_dim elements,
// zeroed, from allocate_large). Move-only.
class KvStorage {
 public:
  // ResourceExhausted, naming the bytes, when the storage does not fit in
  // the memory available now (core/memory.h) or its size overflows;
  // InvalidArgument when the model's rows cannot be stored as `type`
  // (kv_type_fits).
  static Result<KvStorage> create(const ModelConfig& config, int64_t n_blocks, int64_t block_size, KvType type);
  // Bytes of the storage, saturating at UINT64_MAX.
  static uint64_t bytes_for(const ModelConfig& config, int64_t n_blocks, int64_t block_size, KvType type);
  // For fixed, small sizes (tests, benchmarks): CHECKs that create() succeeds.
  KvStorage(const ModelConfig& config, int64_t n_blocks, int64_t block_size, KvType type);

  int64_t n_blocks() const { return n_blocks_; }
  int64_t block_size() const { return block_size_; }
  int64_t kv_dim() const { return kv_dim_; }
  KvType type() const { return type_; }
  size_t bytes() const { return data_.size(); }
  // Bytes of K and V for one token across all layers.
  static size_t bytes_per_token(const ModelConfig& config, KvType type);

  // The row of token slot `slot` in block `block` of layer `layer` (K or V).
  void* k_row(int64_t layer, int64_t block, int64_t slot);
  void* v_row(int64_t layer, int64_t block, int64_t slot);
  // Base of a layer's K (V) blocks, the layout kernels/attention.h reads.
  const void* k_layer(int64_t layer) { return row(layer, 0, 0, 0); }
  const void* v_layer(int64_t layer) { return row(layer, 1, 0, 0); }

 private:
  KvStorage(const ModelConfig& config, int64_t n_blocks, int64_t block_size, KvType type, LargeBuffer data);
  uint8_t* row(int64_t layer, int which, int64_t block, int64_t slot);
  int64_t n_layer_, n_blocks_, block_size_, kv_dim_;
  KvType type_;
  size_t row_bytes_;  // one row of kv_dim values
  LargeBuffer data_;
};

// One sequence's share of a step.
struct BatchSequence {
  std::span<const int32_t> tokens;       // tokens to compute now, at positions n_past...
  int64_t n_past = 0;                     // tokens of this sequence already in the cache
  std::span<const int32_t> block_table;  // block ids covering positions [0, n_past + tokens.size())
  bool all_logits = false;                // logits for every token, else only for the last one
  bool want_logits = true;                // false: a prefill chunk that is not the last one
};

class ModelRunner {
 public:
  // `weights`: prepared weights shared with other runners; null prepares a
  // private set (one pass over the model).
  // `n_ctx`: the context the runner serves, which picks LongRoPE's long or
  // short factors (Model::rope_factors); 0: the short ones.
  ModelRunner(const Model& model, ThreadPool* pool, std::shared_ptr<const PackedWeights> weights = nullptr,
              int64_t n_ctx = 0);

  // Computes the batch, writes its K/V into `kv`, and appends the requested
  // logits rows to `logits` (n_vocab floats per row, sequences in order).
  // Errors (nothing is computed then): a token id outside the vocabulary, a
  // block table too short for the positions, a block id outside the storage,
  // check_kernels' refusal.
  Status forward(std::span<const BatchSequence> batch, KvStorage& kv, std::vector<float>& logits);

  const Model& model() const { return model_; }
  const PackedWeights& weights() const { return *weights_; }

  // Scratch bytes of one forward of n_tokens tokens with n_logit_rows logits
  // rows (the buffers below, the kernels' int8 activations, the logits),
  // saturating at UINT64_MAX: what a step budget of n_tokens costs at most.
  static uint64_t step_bytes(const ModelConfig& config, int64_t n_tokens, int64_t n_logit_rows);

  // Whether the active kernels (the CPU, ZL_KERNELS) can run `model` at all:
  // Unsupported, naming what the model needs and the kernels chosen, for a
  // combination forward() would refuse on every batch (attention sinks
  // without a SIMD attention path for the head_dim). Commands call it once
  // at load, so such a model is refused at startup, not per request.
  static Status check_kernels(const Model& model);

 private:
  struct TokenRef {
    int64_t seq;  // index into the batch
    int64_t pos;  // absolute position
  };
  Status validate(std::span<const BatchSequence> batch, const KvStorage& kv) const;
  void attention_block(const LayerWeights& l, int64_t il, std::span<const BatchSequence> batch, KvStorage& kv);
  void ffn_block(const LayerWeights& l, int64_t il);
  // The mixture-of-experts FFN of xn_ into tmp_: route every token, then per
  // expert one matmul over the tokens routed to it (model/moe.h): all the
  // experts' [gate; up] in one parallel region and their down in another,
  // rows split across threads (single-sequence decode, prefill); or, for a
  // decode batch of several sequences (fewer than kParallelExpertRows
  // (token, expert) rows spread over at least kWholeExpertsPerThread
  // experts per thread), each expert's whole FFN one work item of a single
  // parallel region.
  void moe_ffn(const LayerWeights& l, int64_t il);
  // From this many (token, expert) rows on, preparing the experts' inputs
  // pays for a dispatch of its own (prefill chunks).
  static constexpr int64_t kParallelExpertRows = 256;
  static constexpr int64_t kWholeExpertsPerThread = 8;
  // Queues w times `n_tokens` rows of x into y as jobs_'s next entry, with a
  // fresh input of inputs_ (prepared by moe_ffn from pending_; x null: the
  // caller prepares it), or the one in *shared when that is >= 0 (else it
  // becomes the fresh one's index).
  void add_expert_job(const PackedMatrix& w, const float* x, int64_t n_tokens, float* y, int32_t* shared);
  // fn over [0, n) of per-expert work: on the pool when the layer has
  // enough (token, expert) rows for a dispatch to pay, else on this thread.
  void for_each_expert(int64_t n, const std::function<void(int64_t, int64_t)>& fn);
  // Every job of jobs_ in one parallel_for, cut by split_row_jobs.
  void run_expert_jobs();
  // x_ += tmp_ (a block's output) for the batch's tokens, tmp_ RMS-normed
  // with `post_norm` first where the layer has one (gemma3).
  void add_residual(const GgufTensor* post_norm, int64_t n_tokens);
  // cs: rope_dim / 2 cosines then as many sines (rope_table) of a position
  // under rope setting c_.ropes[rope].
  void rope_table(int64_t pos, const RopeParams& rope, float* cs) const;
  void rope(float* x, int64_t n_heads, const float* cs) const;
  void matmul(const GgufTensor& w, const float* x, int64_t n_tokens, float* y);
  // The first matrix of layer il's attention (the stacked QKV or wq), and of
  // its FFN; prefetch_matmul hints for them (see kernels/matmul.h).
  const PackedMatrix& attention_in(int64_t il) const;
  const PackedMatrix& ffn_in(int64_t il) const;
  void hint(const PackedMatrix& w, int64_t n_tokens) const { prefetch_matmul(w, n_tokens, pool_); }

  const Model& model_;
  const ModelConfig& c_;
  std::shared_ptr<const PackedWeights> weights_;
  ThreadPool* pool_;
  const float* rope_factors_;  // Model::rope_factors for the context served, or null
  std::vector<TokenRef> tokens_;
  std::vector<int64_t> seq_first_token_;  // index in tokens_ of each sequence's first token
  // Scratch, [n_tokens][...] for the current batch.
  std::vector<float> x_, xn_, q_, k_, v_, attn_, gate_, up_, tmp_;
  std::vector<float> stacked_;  // output of a stacked matmul (PackedWeights::qkv, gate_up)
  std::vector<float> rope_cs_;   // rope_table of each token of the batch, per rope setting: [token][rope][rope_dim]
  std::vector<float> partials_;  // split decode attention: one partial state per position range
  // MoE scratch: router logits [n_tokens][n_expert], choices [n_tokens][k];
  // per (token, choice) in groups_'s order (expert by expert) its gathered
  // input [n_embd], [gate; up] outputs [2 n_ff_exp] (gate and up on their
  // own: the expert's gate rows, then its up rows), activation [n_ff_exp]
  // and expert output [n_embd]; pos_: a choice's position in that order.
  std::vector<float> router_, xe_, gu_, act_, ye_;
  std::vector<ExpertChoice> choices_;
  ExpertGroups groups_;
  std::vector<int32_t> active_, pos_;  // active_: the experts with tokens, by id
  // One expert matmul: rows of `w` times inputs_[input] into y.
  struct ExpertJob {
    const PackedMatrix* w;
    int32_t input;
    float* y;
    int64_t n_tokens;
  };
  struct PendingInput {
    const PackedMatrix* w;
    const float* x;
    int64_t n_tokens;
  };
  std::vector<MatmulInput> inputs_;  // grown, never shrunk: their buffers are reused
  std::vector<PendingInput> pending_;
  int64_t n_inputs_ = 0;  // inputs_ in use this layer
  std::vector<ExpertJob> jobs_;
  std::vector<RowJob> row_jobs_;
  std::vector<RowPiece> pieces_;
};

}  // namespace zl
