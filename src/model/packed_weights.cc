#include "model/packed_weights.h"

#include "core/check.h"

namespace zl {

PackedWeights::PackedWeights(const Model& model, KernelIsa isa) {
  auto add = [&](const GgufTensor* t) {
    if (t == nullptr || by_tensor_.count(t)) return;
    by_tensor_.try_emplace(t, t->type, t->data, t->ne[0], t->ne[1], isa);
    n_bytes_per_token_ += by_tensor_.at(t).n_bytes();
  };
  for (const LayerWeights& l : model.layers) {
    for (const GgufTensor* t : {l.wq, l.wk, l.wv, l.wo, l.ffn_gate, l.ffn_up, l.ffn_down}) add(t);
  }
  add(model.output);
}

const PackedMatrix& PackedWeights::get(const GgufTensor& t) const {
  auto it = by_tensor_.find(&t);
  CHECK(it != by_tensor_.end()) << "PackedWeights: tensor " << t.name << " was not prepared";
  return it->second;
}

}  // namespace zl
