// Every matmul weight of a model prepared once for the kernels (repacked
// where that pays, kernels/matmul.h), shared by all forward passes.
//
// Matrices that multiply the same input are stacked into one where their
// types agree — per layer [wq; wk; wv] and [ffn_gate; ffn_up] — so a forward
// pass quantizes that input once and runs one matmul (one pool barrier)
// instead of three or two. Stacking does not change any output value.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/status.h"
#include "kernels/matmul.h"
#include "model/model.h"

namespace zl {

struct PackOptions {
  std::string name;  // the model as errors name it (its path)
  KernelIsa isa = active_isa();
  bool stack = true;  // false prepares every matrix on its own (tests)
  // Memory budget for the copies; nullopt: available_memory_bytes() now.
  std::optional<uint64_t> available;
};

// One expert of a mixture-of-experts layer: [gate; up] stacked (outputs
// 2 n_ff_exp per token) where the two have one type, else gate and up on
// their own; and down.
struct PackedExpert {
  std::optional<PackedMatrix> gate_up;
  PackedMatrix gate, up, down;
};

// Immutable after construction; thread-safe to read.
class PackedWeights {
 public:
  // The checked way to prepare a model's weights: ResourceExhausted
  // "repacked weights of <name> need <bytes>, <available> available" when
  // bytes_for() exceeds the budget, before anything is copied, or naming the
  // buffer the allocator then refuses. Cost: the constructor's.
  static Result<std::shared_ptr<const PackedWeights>> create(const Model& model, const PackOptions& options);
  // create()'s check alone (to fail before paging a model in).
  static Status check_fits(const Model& model, const PackOptions& options);
  // Bytes of the copies the constructor keeps (PackedMatrix::copy_bytes of
  // each prepared matrix, the rows of stacked ones), saturating at
  // UINT64_MAX; the transient row copy of the one stacked matrix being
  // repacked comes on top. Cost: a walk over the layers, no copy.
  static uint64_t bytes_for(const Model& model, KernelIsa isa = active_isa(), bool stack = true);

  // Cost: one pass over the weights (a copy of those the ISA repacks or that
  // are stacked). `stack`: false prepares every matrix on its own (tests).
  // No budget check, and CHECKs that every copy could be allocated (fixed,
  // small models: tests, benchmarks); create() is the checked way.
  explicit PackedWeights(const Model& model, KernelIsa isa = active_isa(), bool stack = true);
  // CHECKs that `t` is one of the model's matmul weights prepared on its own
  // (not a part of a stacked matrix).
  const PackedMatrix& get(const GgufTensor& t) const;
  // Layer `il`'s [wq; wk; wv] (outputs q_dim + 2 kv_dim per token; the
  // file's fused wqkv where it has one), or null when those are prepared on
  // their own.
  const PackedMatrix* qkv(int64_t il) const { return qkv_[il] ? &*qkv_[il] : nullptr; }
  // Layer `il`'s [ffn_gate; ffn_up] (outputs 2 n_ff per token; the file's
  // fused ffn_up where there is no ffn_gate), or null.
  const PackedMatrix* gate_up(int64_t il) const { return gate_up_[il] ? &*gate_up_[il] : nullptr; }
  // Layer `il`'s experts (n_expert of them; empty for a dense layer).
  const std::vector<PackedExpert>& experts(int64_t il) const { return experts_[il]; }
  // Weight bytes one token's forward pass reads (each matrix once; of a
  // mixture-of-experts layer the router and n_expert_used experts: the
  // active bytes).
  uint64_t n_bytes_per_token() const { return n_bytes_per_token_; }
  // Bytes of the model file's mapping released from the resident set after
  // the copies were made (GgufFile::release_pages).
  uint64_t released_bytes() const { return released_bytes_; }
  // The kernels read a copy of `t` (never its bytes in the file).
  bool holds_copy_of(const GgufTensor* t) const { return copied_.contains(t); }
  KernelIsa isa() const { return isa_; }

 private:
  PackedWeights() = default;
  Status init(const Model& model, KernelIsa isa, bool stack);
  // A layer's experts from its [ne0, ne1, n_expert] gate, up and down
  // stacks: views of matrices kept in expert_stacks_ where the experts' rows
  // make whole groups of the kernels' layout, else a matrix each.
  Result<std::vector<PackedExpert>> pack_experts(const GgufTensor* gate, const GgufTensor* up, const GgufTensor* down,
                                                 KernelIsa isa);
  std::unordered_map<const GgufTensor*, PackedMatrix> by_tensor_;
  std::vector<std::optional<PackedMatrix>> qkv_, gate_up_;  // per layer
  std::vector<std::vector<PackedExpert>> experts_;           // per layer
  // The matrices experts_'s views read (pack_experts); their buffers stay
  // where they are when the vector grows.
  std::vector<PackedMatrix> expert_stacks_;
  uint64_t n_bytes_per_token_ = 0;
  uint64_t released_bytes_ = 0;
  std::unordered_set<const GgufTensor*> copied_;
  KernelIsa isa_ = KernelIsa::kScalar;
};

// Loads `model` into memory (`serve --no-mmap`): what its forward pass
// still reads from the file (norms, biases, the token embeddings) is copied,
// the matrices are left to `weights`' copies, and the file is unmapped
// (GgufFile::own_data), so it may change on disk while the model serves.
// Costs the token embedding table in resident memory where the output is
// tied to it (its pages are otherwise read row by row). No PackedWeights may
// be made of `model` afterwards. Unsupported with the scalar kernels, which
// read every matrix in place.
Status load_into_memory(Model& model, const PackedWeights& weights);

}  // namespace zl
