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
  std::vector<const GgufTensor*> copied;  // tensors the kernels no longer read in place
  auto add = [&](const GgufTensor* t) {
    if (t == nullptr || by_tensor_.count(t)) return;
    const PackedMatrix& m = by_tensor_.try_emplace(t, t->type, t->data, t->ne[0], t->ne[1], isa).first->second;
    n_bytes_per_token_ += m.n_bytes();
    if (m.holds_copy()) copied.push_back(t);
  };
  for (const LayerWeights& l : model.layers) {
    qkv_.push_back(stack ? stack_parts({l.wq, l.wk, l.wv}, isa) : std::nullopt);
    gate_up_.push_back(stack ? stack_parts({l.ffn_gate, l.ffn_up}, isa) : std::nullopt);
    if (qkv_.back()) {
      n_bytes_per_token_ += qkv_.back()->n_bytes();
      copied.insert(copied.end(), {l.wq, l.wk, l.wv});
    } else {
      for (const GgufTensor* t : {l.wq, l.wk, l.wv}) add(t);
    }
    if (gate_up_.back()) {
      n_bytes_per_token_ += gate_up_.back()->n_bytes();
      copied.insert(copied.end(), {l.ffn_gate, l.ffn_up});
    } else {
      for (const GgufTensor* t : {l.ffn_gate, l.ffn_up}) add(t);
    }
    for (const GgufTensor* t : {l.wo, l.ffn_down}) add(t);
  }
  add(model.output);
  // The mapped file's pages of the copied matrices leave the resident set:
  // without this a model counts twice in RSS (its copy plus the file pages
  // the copy was read from) — what `top`, cgroup limits and the OOM killer
  // see. Also token_embd when the output matrix is tied to it: the
  // embedding rows a forward pass reads in place fault back in one by one.
  if (model.file) {
    for (const GgufTensor* t : copied) released_bytes_ += model.file->release_pages(*t);
  }
}

const PackedMatrix& PackedWeights::get(const GgufTensor& t) const {
  auto it = by_tensor_.find(&t);
  CHECK(it != by_tensor_.end()) << "PackedWeights: tensor " << t.name << " was not prepared on its own";
  return it->second;
}

}  // namespace zl
