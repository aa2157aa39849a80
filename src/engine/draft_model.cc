#include "engine/draft_model.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/log.h"
#include "format/gguf.h"  // gguf_quoted

namespace zl {

Status check_draft_vocabulary(const Vocab& target, int64_t target_n_vocab, const Vocab& draft,
                              int64_t draft_n_vocab) {
  const std::string what = "the draft model's vocabulary differs from the model's: ";
  if (draft.kind() != target.kind() || draft.model_name() != target.model_name()) {
    return invalid_argument(what + "tokenizer " + gguf_quoted(draft.model_name()) + " against " +
                            gguf_quoted(target.model_name()));
  }
  if (draft.n_tokens() != target.n_tokens() || draft_n_vocab != target_n_vocab) {
    return invalid_argument(what + std::to_string(draft.n_tokens()) + " tokens (" + std::to_string(draft_n_vocab) +
                            " logits) against " + std::to_string(target.n_tokens()) + " (" +
                            std::to_string(target_n_vocab) + ")");
  }
  for (int32_t id = 0; id < target.n_tokens(); ++id) {
    if (draft.text(id) != target.text(id)) {
      return invalid_argument(what + "token " + std::to_string(id) + " is " + gguf_quoted(draft.text(id)) +
                              " against " + gguf_quoted(target.text(id)));
    }
  }
  if (draft.bos() != target.bos() || draft.eos() != target.eos() || draft.eot() != target.eot()) {
    return invalid_argument(what + "its BOS/EOS/EOT ids differ");
  }
  return Status();
}

namespace {

int64_t blocks_per_slot(const DraftModel::Config& c) {
  // Positions [0, n_ctx): the target never verifies past its context window.
  return (c.n_ctx + c.block_size - 1) / c.block_size;
}

// The greedy token of a logits row and whether its softmax probability reaches p_min:
// p = 1 / sum_i exp(x_i - max) >= p_min while the sum stays <= 1 / p_min, so the sum stops as
// soon as it passes that (unsure rows end early), and terms below e^-30 (a vocabulary of
// 10^6 of them adds < 1e-7) skip the exp.
struct Pick {
  int32_t token;
  bool sure;
};
Pick pick(const float* x, int64_t n, float p_min) {
  const float* top = std::max_element(x, x + n);
  const auto token = static_cast<int32_t>(top - x);
  if (p_min <= 0.0f) return {token, true};
  const float limit = 1.0f / p_min, max = *top;
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float d = x[i] - max;
    if (d > -30.0f && (sum += std::exp(d)) > limit) return {token, false};
  }
  return {token, true};
}
}  // namespace

uint64_t DraftModel::kv_bytes(const ModelConfig& model, const Config& config) {
  return KvStorage::bytes_for(model, blocks_per_slot(config) * config.n_slots, config.block_size, config.kv_type);
}

Result<DraftModel::Parts> DraftModel::prepare(const Model& model, std::shared_ptr<const PackedWeights> weights,
                                              const Config& config) {
  if (config.n_ctx < 2 || config.n_slots < 1 || config.block_size < 1 || config.max_step_tokens < 1) {
    return invalid_argument("draft model: invalid slot settings");
  }
  if (blocks_per_slot(config) * config.n_slots > INT32_MAX / 2) return invalid_argument("draft model: KV cache too large");
  if (!weights) {
    ASSIGN_OR_RETURN(weights, PackedWeights::create(model, {.name = "the draft model"}));
  }
  ASSIGN_OR_RETURN(KvStorage kv, KvStorage::create(model.config, blocks_per_slot(config) * config.n_slots,
                                                   config.block_size, config.kv_type));
  return Parts{std::move(weights), std::move(kv)};
}

DraftModel::DraftModel(const Model& model, Parts parts, ThreadPool* pool, const Config& config)
    : config_(config),
      n_vocab_(model.config.n_vocab),
      runner_(model, pool, std::move(parts.weights), config.n_ctx),
      kv_(std::move(parts.kv)),
      slots_(static_cast<size_t>(config.n_slots)) {
  const int64_t nb = blocks_per_slot(config);
  for (size_t s = 0; s < slots_.size(); ++s) {
    slots_[s].table.resize(static_cast<size_t>(nb));
    for (int64_t b = 0; b < nb; ++b) slots_[s].table[b] = static_cast<int32_t>(static_cast<int64_t>(s) * nb + b);
  }
}

DraftModel::Slot* DraftModel::slot_for(SeqId id, const Want* want) {
  for (Slot& s : slots_) {
    if (s.used && s.id == id) return &s;
  }
  if (!want) return nullptr;
  Slot* best = nullptr;
  int64_t best_common = -1;
  for (Slot& s : slots_) {
    if (s.used) continue;
    const int64_t common =
        s.tenant != want->tenant
            ? 0
            : std::mismatch(s.tokens.begin(), s.tokens.end(), want->tokens.begin(), want->tokens.end()).first -
                  s.tokens.begin();
    if (!best || common > best_common || (common == best_common && s.last_use < best->last_use)) {
      best = &s, best_common = common;
    }
  }
  if (!best) return nullptr;
  if (best->tenant != want->tenant) best->tokens.clear();  // another tenant's K/V is never reused
  best->used = true, best->id = id, best->tenant = want->tenant;
  return best;
}

void DraftModel::release(SeqId id) {
  if (Slot* s = slot_for(id, nullptr)) s->used = false;  // its K/V stays for a later turn
}

std::vector<SeqId> DraftModel::holders() const {
  std::vector<SeqId> ids;
  for (const Slot& s : slots_) {
    if (s.used) ids.push_back(s.id);
  }
  return ids;
}

bool DraftModel::run() {
  logits_.clear();
  const Status st = runner_.forward(batch_, kv_, logits_);
  if (st.ok()) {
    for (const BatchSequence& b : batch_) n_computed_ += static_cast<int64_t>(b.tokens.size());
    return true;
  }
  if (!error_logged_) {
    log::warn("draft model forward failed: drafting skipped", {{"error", st.to_string()}});
    error_logged_ = true;
  }
  for (Slot& s : slots_) s.tokens.clear();  // what the failed pass wrote is unknown
  return false;
}

void DraftModel::draft(std::span<Want> wants) {
  struct Active {
    Want* want;
    Slot* slot;
    int64_t n_tokens;  // the sequence's tokens
    bool done = false;  // drafted all it will this call
  };
  std::vector<Active> active;  // caught up this call: they draft
  batch_.clear();
  int64_t budget = config_.max_step_tokens;
  const auto take_up = [&](Want& w) {
    w.out->clear();
    w.declined = false;
    const auto n = static_cast<int64_t>(w.tokens.size());
    if (n < 1 || w.k < 0 || n > config_.n_ctx) return;
    Slot* slot = slot_for(w.id, &w);
    if (!slot) return;
    slot->last_use = ++n_calls_;
    // Keep the K/V of the common prefix; to draft, the last token is always computed again
    // (its logits are the first draft's).
    const auto common = static_cast<int64_t>(
        std::mismatch(slot->tokens.begin(), slot->tokens.end(), w.tokens.begin(), w.tokens.end()).first -
        slot->tokens.begin());
    const int64_t from = w.k > 0 ? std::min(common, n - 1) : common;
    const int64_t take = std::min(n - from, budget);
    if (take <= 0) return;
    budget -= take;
    const bool caught_up = from + take == n;
    batch_.push_back(BatchSequence{.tokens = w.tokens.subspan(static_cast<size_t>(from), static_cast<size_t>(take)),
                                   .n_past = from,
                                   .block_table = slot->table,
                                   .want_logits = caught_up && w.k > 0});
    slot->tokens.assign(w.tokens.begin(), w.tokens.begin() + from + take);
    if (caught_up && w.k > 0) active.push_back({&w, slot, n});
  };
  for (Want& w : wants) {
    if (w.k > 0) take_up(w);
  }
  for (Want& w : wants) {
    if (w.k <= 0) take_up(w);
  }
  if (batch_.empty() || !run()) return;
  size_t row = 0;
  for (Active& a : active) {
    const Pick p = pick(&logits_[row++ * n_vocab_], n_vocab_, config_.p_min);
    if (!p.sure) {
      a.want->declined = true, a.done = true;
      continue;
    }
    a.want->out->push_back(p.token);
  }
  // Then one token a pass: draft j is computed at position n + j - 1 to give draft j + 1.
  std::vector<int32_t> fed(active.size());
  std::vector<Active*> rows;
  for (int32_t j = 1;; ++j) {
    batch_.clear();
    rows.clear();
    for (size_t i = 0; i < active.size(); ++i) {
      Active& a = active[i];
      const int64_t pos = a.n_tokens + j - 1;
      if (a.done || j >= a.want->k || pos >= config_.n_ctx) continue;
      fed[i] = a.want->out->back();
      batch_.push_back(BatchSequence{.tokens = std::span<const int32_t>(&fed[i], 1),
                                     .n_past = pos,
                                     .block_table = a.slot->table});
      rows.push_back(&a);
    }
    if (batch_.empty()) return;
    if (!run()) {
      for (Active& a : active) a.want->out->clear();
      return;
    }
    for (size_t r = 0; r < rows.size(); ++r) {
      Active& a = *rows[r];
      a.slot->tokens.push_back(a.want->out->back());
      const Pick p = pick(&logits_[r * n_vocab_], n_vocab_, config_.p_min);
      if (!p.sure) {
        a.done = true;
      } else {
        a.want->out->push_back(p.token);
      }
    }
  }
}

}  // namespace zl
