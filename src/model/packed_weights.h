// Every matmul weight of a model prepared once for the kernels (repacked
// where that pays, kernels/matmul.h), shared by all forward passes.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "kernels/matmul.h"
#include "model/model.h"

namespace zl {

// Immutable after construction; thread-safe to read.
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

}  // namespace zl
