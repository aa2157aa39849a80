#include "model/packed_weights.h"

#include <initializer_list>
#include <unordered_set>

#include "core/check.h"
#include "core/memory.h"
#include "kernels/quant.h"  // row_size

namespace zl {
namespace {

// Whether `parts` can be stacked into one matrix: none missing, and the
// same type and input size.
bool stackable(std::initializer_list<const GgufTensor*> parts) {
  const GgufTensor* first = *parts.begin();
  for (const GgufTensor* t : parts) {
    if (t == nullptr || t->type != first->type || t->ne[0] != first->ne[0]) return false;
  }
  return true;
}

// `parts` stacked into one matrix, or nullopt when they cannot be.
Result<std::optional<PackedMatrix>> stack_parts(std::initializer_list<const GgufTensor*> parts, KernelIsa isa) {
  if (!stackable(parts)) return std::optional<PackedMatrix>();
  const GgufTensor* first = *parts.begin();
  std::vector<PackedMatrix::Rows> rows;
  for (const GgufTensor* t : parts) rows.push_back({t->data, t->ne[1]});
  ASSIGN_OR_RETURN(PackedMatrix m, PackedMatrix::create_stacked(first->type, first->ne[0], rows, isa));
  return std::optional<PackedMatrix>(std::move(m));
}

// The rows of expert e of a stack of experts [ne0, ne1, n_expert].
const uint8_t* expert_rows(const GgufTensor* t, int64_t e) {
  return t->data + static_cast<size_t>(e) * row_size(t->type, t->ne[0]) * t->ne[1];
}

}  // namespace

Result<std::vector<PackedExpert>> PackedWeights::pack_experts(const GgufTensor* g, const GgufTensor* u,
                                                              const GgufTensor* d, KernelIsa isa) {
  const int64_t n_expert = g->ne[2], n_ff = g->ne[1], n_embd = d->ne[1];
  const bool stacked = g->type == u->type;
  auto whole = [&](const GgufTensor* t, int64_t rows) { return rows % PackedMatrix::view_unit(t->type, isa) == 0; };
  std::vector<PackedExpert> experts(n_expert);
  if (!whole(g, stacked ? 2 * n_ff : n_ff) || !whole(u, n_ff) || !whole(d, n_embd)) {
    // Rows that do not make whole groups: one matrix per expert.
    for (int64_t e = 0; e < n_expert; ++e) {
      PackedExpert& x = experts[e];
      if (stacked) {
        const PackedMatrix::Rows parts[] = {{expert_rows(g, e), n_ff}, {expert_rows(u, e), n_ff}};
        ASSIGN_OR_RETURN(PackedMatrix gu, PackedMatrix::create_stacked(g->type, g->ne[0], parts, isa));
        x.gate_up = std::move(gu);
      } else {
        ASSIGN_OR_RETURN(x.gate, PackedMatrix::create(g->type, expert_rows(g, e), g->ne[0], n_ff, isa));
        ASSIGN_OR_RETURN(x.up, PackedMatrix::create(u->type, expert_rows(u, e), u->ne[0], n_ff, isa));
      }
      ASSIGN_OR_RETURN(x.down, PackedMatrix::create(d->type, expert_rows(d, e), d->ne[0], n_embd, isa));
    }
    return experts;
  }
  // One matrix per kind holding every expert (each expert a rows_view): one
  // large allocation on huge pages rather than n_expert small ones on 4 KiB
  // pages, whose TLB misses tripled the CPU time of a batched decode step of
  // a Qwen3-30B-A3B shape (bench/README.md).
  auto all_of = [&](const GgufTensor* t) {
    return PackedMatrix::create(t->type, t->data, t->ne[0], n_expert * t->ne[1], isa);
  };
  if (stacked) {
    std::vector<PackedMatrix::Rows> parts;
    for (int64_t e = 0; e < n_expert; ++e) {
      parts.insert(parts.end(), {{expert_rows(g, e), n_ff}, {expert_rows(u, e), n_ff}});
    }
    ASSIGN_OR_RETURN(PackedMatrix gu, PackedMatrix::create_stacked(g->type, g->ne[0], parts, isa));
    expert_stacks_.push_back(std::move(gu));
    for (int64_t e = 0; e < n_expert; ++e) experts[e].gate_up = expert_stacks_.back().rows_view(e * 2 * n_ff, 2 * n_ff);
  } else {
    for (const GgufTensor* t : {g, u}) {
      ASSIGN_OR_RETURN(PackedMatrix m, all_of(t));
      expert_stacks_.push_back(std::move(m));
      for (int64_t e = 0; e < n_expert; ++e) {
        (t == g ? experts[e].gate : experts[e].up) = expert_stacks_.back().rows_view(e * n_ff, n_ff);
      }
    }
  }
  ASSIGN_OR_RETURN(PackedMatrix down, all_of(d));
  expert_stacks_.push_back(std::move(down));
  for (int64_t e = 0; e < n_expert; ++e) experts[e].down = expert_stacks_.back().rows_view(e * n_embd, n_embd);
  return experts;
}

uint64_t PackedWeights::bytes_for(const Model& model, KernelIsa isa, bool stack) {
  uint64_t total = 0;
  std::unordered_set<const GgufTensor*> seen;  // a matrix prepared on its own counts once
  auto add = [&](const GgufTensor* t) {
    if (t == nullptr || !seen.insert(t).second) return;
    total = saturating_add(total, PackedMatrix::copy_bytes(t->type, t->ne[0], t->ne[1], isa));
  };
  // A stacked matrix keeps one copy of all its rows (PackedMatrix::stacked
  // copies them for every ISA, the scalar one too).
  auto add_group = [&](std::initializer_list<const GgufTensor*> parts) {
    if (!stack || !stackable(parts)) {
      for (const GgufTensor* t : parts) add(t);
      return;
    }
    int64_t n_out = 0;
    for (const GgufTensor* t : parts) n_out += t->ne[1];
    const GgufTensor* first = *parts.begin();
    const uint64_t rows = saturating_mul(row_size(first->type, first->ne[0]), static_cast<uint64_t>(n_out));
    total = saturating_add(total, isa == KernelIsa::kScalar ? rows
                                                            : PackedMatrix::copy_bytes(first->type, first->ne[0], n_out, isa));
  };
  for (const LayerWeights& l : model.layers) {
    if (l.ffn_gate_exps) {  // every expert a copy of its rows ([gate; up] stacked or not) for every ISA but scalar
      for (const GgufTensor* t : {l.ffn_gate_exps, l.ffn_up_exps, l.ffn_down_exps}) {
        const bool stacked = t != l.ffn_down_exps && l.ffn_gate_exps->type == l.ffn_up_exps->type;
        const uint64_t one = stacked && isa == KernelIsa::kScalar ? saturating_mul(row_size(t->type, t->ne[0]), t->ne[1])
                                                                  : PackedMatrix::copy_bytes(t->type, t->ne[0], t->ne[1], isa);
        total = saturating_add(total, saturating_mul(one, static_cast<uint64_t>(t->ne[2])));
      }
      add(l.ffn_gate_inp);
    }
    add_group({l.wq, l.wk, l.wv});
    add_group({l.ffn_gate, l.ffn_up});
    for (const GgufTensor* t : {l.wqkv, l.wo, l.ffn_down}) add(t);
  }
  add(model.output);
  return total;
}

Status PackedWeights::check_fits(const Model& model, const PackOptions& options) {
  const uint64_t bytes = bytes_for(model, options.isa, options.stack);
  // Below kBudgetCheckBytes the file reads are skipped, as allocate_large does.
  const uint64_t available = options.available ? *options.available
                             : bytes >= kBudgetCheckBytes ? available_memory_bytes()
                                                          : UINT64_MAX;
  if (bytes > available) {
    return resource_exhausted("repacked weights of " + options.name + " need " + format_bytes(bytes) + ", " +
                              format_bytes(available) + " available");
  }
  return {};
}

Result<std::shared_ptr<const PackedWeights>> PackedWeights::create(const Model& model, const PackOptions& options) {
  RETURN_IF_ERROR(check_fits(model, options));
  std::shared_ptr<PackedWeights> w(new PackedWeights());
  RETURN_IF_ERROR(w->init(model, options.isa, options.stack));
  return std::shared_ptr<const PackedWeights>(std::move(w));
}

PackedWeights::PackedWeights(const Model& model, KernelIsa isa, bool stack) {
  const Status st = init(model, isa, stack);
  CHECK(st.ok()) << st.to_string();
}

Status PackedWeights::init(const Model& model, KernelIsa isa, bool stack) {
  std::vector<const GgufTensor*> copied;  // tensors the kernels no longer read in place
  auto add = [&](const GgufTensor* t) -> Status {
    if (t == nullptr || by_tensor_.count(t)) return {};
    ASSIGN_OR_RETURN(PackedMatrix prepared, PackedMatrix::create(t->type, t->data, t->ne[0], t->ne[1], isa));
    const PackedMatrix& m = by_tensor_.emplace(t, std::move(prepared)).first->second;
    n_bytes_per_token_ += m.n_bytes();
    if (m.holds_copy()) copied.push_back(t);
    return {};
  };
  // A matrix the file already fuses (phi3's attn_qkv, its ffn_up holding
  // gate and up) is the layer's stacked matrix as it is.
  auto fused = [&](const GgufTensor* t) -> Result<std::optional<PackedMatrix>> {
    ASSIGN_OR_RETURN(PackedMatrix m, PackedMatrix::create(t->type, t->data, t->ne[0], t->ne[1], isa));
    if (m.holds_copy()) copied.push_back(t);
    return std::optional<PackedMatrix>(std::move(m));
  };
  for (const LayerWeights& l : model.layers) {
    std::optional<PackedMatrix> qkv, gate_up;
    if (l.wqkv) {
      ASSIGN_OR_RETURN(qkv, fused(l.wqkv));
    } else if (stack) {
      ASSIGN_OR_RETURN(qkv, stack_parts({l.wq, l.wk, l.wv}, isa));
      if (qkv) copied.insert(copied.end(), {l.wq, l.wk, l.wv});
    }
    if (l.ffn_gate_exps) {
      // experts below
    } else if (!l.ffn_gate) {
      ASSIGN_OR_RETURN(gate_up, fused(l.ffn_up));
    } else if (stack) {
      ASSIGN_OR_RETURN(gate_up, stack_parts({l.ffn_gate, l.ffn_up}, isa));
      if (gate_up) copied.insert(copied.end(), {l.ffn_gate, l.ffn_up});
    }
    std::vector<PackedExpert> experts;
    if (l.ffn_gate_exps) {
      const GgufTensor *g = l.ffn_gate_exps, *u = l.ffn_up_exps, *d = l.ffn_down_exps;
      const int64_t n_expert = g->ne[2], n_used = model.config.n_expert_used;
      ASSIGN_OR_RETURN(experts, pack_experts(g, u, d, isa));
      uint64_t expert_bytes = 0;
      for (const PackedExpert& x : experts) {
        expert_bytes += (x.gate_up ? x.gate_up->n_bytes() : x.gate.n_bytes() + x.up.n_bytes()) + x.down.n_bytes();
      }
      // Active bytes: a token reads the router and n_expert_used experts.
      n_bytes_per_token_ += expert_bytes / static_cast<uint64_t>(n_expert) * static_cast<uint64_t>(n_used);
      if (isa != KernelIsa::kScalar) copied.insert(copied.end(), {g, u, d});
      RETURN_IF_ERROR(add(l.ffn_gate_inp));
    }
    experts_.push_back(std::move(experts));
    qkv_.push_back(std::move(qkv));
    gate_up_.push_back(std::move(gate_up));
    if (qkv_.back()) {
      n_bytes_per_token_ += qkv_.back()->n_bytes();
    } else {
      for (const GgufTensor* t : {l.wq, l.wk, l.wv}) RETURN_IF_ERROR(add(t));
    }
    if (gate_up_.back()) {
      n_bytes_per_token_ += gate_up_.back()->n_bytes();
    } else {
      for (const GgufTensor* t : {l.ffn_gate, l.ffn_up}) RETURN_IF_ERROR(add(t));
    }
    for (const GgufTensor* t : {l.wo, l.ffn_down}) RETURN_IF_ERROR(add(t));
  }
  RETURN_IF_ERROR(add(model.output));
  // The mapped file's pages of the copied matrices leave the resident set:
  // without this a model counts twice in RSS (its copy plus the file pages
  // the copy was read from) — what `top`, cgroup limits and the OOM killer
  // see. Also token_embd when the output matrix is tied to it: the
  // embedding rows a forward pass reads in place fault back in one by one.
  if (model.file) {
    for (const GgufTensor* t : copied) released_bytes_ += model.file->release_pages(*t);
  }
  copied_.insert(copied.begin(), copied.end());
  isa_ = isa;
  return {};
}

Status load_into_memory(Model& model, const PackedWeights& weights) {
  if (!model.file) return {};
  if (weights.isa() == KernelIsa::kScalar) {
    return unsupported("loading the model into memory (--mmap false) needs the SIMD kernels: the scalar kernels "
                       "(ZL_KERNELS=scalar) read the weights in place");
  }
  const GgufTensor* embd = model.token_embd;
  return model.file->own_data([&](const GgufTensor& t) { return &t == embd || !weights.holds_copy_of(&t); });
}

const PackedMatrix& PackedWeights::get(const GgufTensor& t) const {
  auto it = by_tensor_.find(&t);
  CHECK(it != by_tensor_.end()) << "PackedWeights: tensor " << t.name << " was not prepared on its own";
  return it->second;
}

}  // namespace zl
