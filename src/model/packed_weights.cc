#include "model/packed_weights.h"

#include <initializer_list>

#include "core/check.h"

namespace zl {
namespace {

// `parts` stacked into one matrix, or nullopt when they cannot be (a missing
// part, or types / input sizes that differ).
std::optional<PackedMatrix> stack_parts(std::initializer_list<const GgufTensor*> parts, KernelIsa isa) {
  const GgufTensor* first = *parts.begin();
  std::vector<PackedMatrix::Rows> rows;
  for (const GgufTensor* t : parts) {
    if (t == nullptr || t->type != first->type || t->ne[0] != first->ne[0]) return std::nullopt;
    rows.push_back({t->data, t->ne[1]});
  }
  return PackedMatrix::stacked(first->type, first->ne[0], rows, isa);
}

}  // namespace

PackedWeights::PackedWeights(const Model& model, KernelIsa isa, bool stack) {
  auto add = [&](const GgufTensor* t) {
    if (t == nullptr || by_tensor_.count(t)) return;
    by_tensor_.try_emplace(t, t->type, t->data, t->ne[0], t->ne[1], isa);
    n_bytes_per_token_ += by_tensor_.at(t).n_bytes();
  };
  for (const LayerWeights& l : model.layers) {
    qkv_.push_back(stack ? stack_parts({l.wq, l.wk, l.wv}, isa) : std::nullopt);
    gate_up_.push_back(stack ? stack_parts({l.ffn_gate, l.ffn_up}, isa) : std::nullopt);
    if (qkv_.back()) {
      n_bytes_per_token_ += qkv_.back()->n_bytes();
    } else {
      for (const GgufTensor* t : {l.wq, l.wk, l.wv}) add(t);
    }
    if (gate_up_.back()) {
      n_bytes_per_token_ += gate_up_.back()->n_bytes();
    } else {
      for (const GgufTensor* t : {l.ffn_gate, l.ffn_up}) add(t);
    }
    for (const GgufTensor* t : {l.wo, l.ffn_down}) add(t);
  }
  add(model.output);
}

const PackedMatrix& PackedWeights::get(const GgufTensor& t) const {
  auto it = by_tensor_.find(&t);
  CHECK(it != by_tensor_.end()) << "PackedWeights: tensor " << t.name << " was not prepared on its own";
  return it->second;
}

}  // namespace zl
