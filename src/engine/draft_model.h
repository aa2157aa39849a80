// Speculative drafts from a smaller model with the target's vocabulary (engine.h's
// speculative decoding, `--draft-model`): llama-server's -md, vLLM's draft model.
//
// The draft model runs greedy over each speculating sequence in a KV cache of its own, one
// slot of a whole context (n_ctx tokens) per sequence, its block table fixed. A slot keeps the
// tokens whose K/V it holds; a draft call compares them with the sequence's tokens, keeps the
// common prefix (the drafts the target accepted last step included: their K/V were computed
// from the same tokens), computes the rest, then k - 1 more single-token passes, all the
// drafting sequences batched in each pass. The drafts are a function of the tokens alone, so
// the engine's verification (Sampler::verify: each token drawn exactly as plain decoding
// would, then compared) keeps greedy output identical and sampled output distributed as
// without speculation, whatever the draft model predicts.
//
// A sequence catching up a long prefix (its prompt, on first use; after a slot was taken
// away) computes at most max_step_tokens tokens a call, all sequences together (those that
// draft first, then those that only compute their tokens: the engine calls once with the
// drafting sequences and once with the prompts it prefills that step), and drafts only once
// caught up. A sequence without a free slot does not draft. A freed slot keeps its
// K/V: a new sequence of the same tenant takes the free slot whose tokens share the longest
// prefix with its own (the next turn of a conversation computes only its new tokens), else
// the free slot least recently used. Engine thread only.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "core/status.h"
#include "core/thread_pool.h"
#include "engine/scheduler.h"  // SeqId
#include "model/model.h"
#include "model/packed_weights.h"
#include "model/runner.h"
#include "tokenizer/vocab.h"

namespace zl {

// Whether `draft` can draft for `target`: the same kind of vocabulary with the same tokens
// (text, id for id), the same special ids, and the same logits width. InvalidArgument
// naming the first difference otherwise.
Status check_draft_vocabulary(const Vocab& target, int64_t target_n_vocab, const Vocab& draft,
                              int64_t draft_n_vocab);

class DraftModel {
 public:
  struct Config {
    int64_t n_ctx = 0;            // the target's context window: a slot's positions
    int32_t n_slots = 1;          // sequences drafting at once
    int32_t block_size = 16;
    KvType kv_type = KvType::kF16;
    int32_t max_step_tokens = 512;  // tokens of one draft pass at most
    // Drafting stops at the first token the draft model gives less than this probability
    // (its softmax, greedy): a pass it is unsure of is not worth verifying. 0: never stops.
    float p_min = 0.8f;
  };
  // KV bytes of `config`'s slots for `model`, saturating.
  static uint64_t kv_bytes(const ModelConfig& model, const Config& config);
  // What a draft model needs before its engine exists: its prepared weights (given, or
  // prepared here) and its KV cache. ResourceExhausted (naming the bytes) when either does not
  // fit; InvalidArgument for impossible settings.
  struct Parts {
    std::shared_ptr<const PackedWeights> weights;
    KvStorage kv;
  };
  static Result<Parts> prepare(const Model& model, std::shared_ptr<const PackedWeights> weights, const Config& config);
  // `model` and `pool` must outlive it.
  DraftModel(const Model& model, Parts parts, ThreadPool* pool, const Config& config);

  struct Want {
    SeqId id = 0;
    uint64_t tenant = 0;              // slots are reused within a tenant only
    std::span<const int32_t> tokens;  // the sequence's tokens (prompt and output so far), >= 1
    int32_t k = 0;                    // drafts wanted; 0: only compute the tokens (a prompt)
    std::vector<int32_t>* out = nullptr;  // set to the drafts (up to k; empty: none this step)
    // Set by draft(): the draft model was ready but unsure of even the first token (p_min),
    // which the engine counts as a missed draft (spec::DraftLength backs off).
    bool declined = false;
  };
  // Drafts for every want (distinct ids), batched. A forward error ends this call's drafting
  // (outs empty) and forgets the slots' contents; it is logged once.
  void draft(std::span<Want> wants);
  // Frees the slot of `id` (its sequence ended or stopped running). No-op without one.
  void release(SeqId id);
  // The ids holding slots, to release those no longer running.
  std::vector<SeqId> holders() const;

  const Config& config() const { return config_; }
  // Tokens the draft model computed so far (catching up and drafting).
  int64_t n_computed_tokens() const { return n_computed_; }

 private:
  struct Slot {
    SeqId id = 0;
    bool used = false;
    uint64_t tenant = 0;
    uint64_t last_use = 0;        // draft() calls, for the least recently used free slot
    std::vector<int32_t> tokens;  // whose K/V the slot holds, positions 0 ..
    std::vector<int32_t> table;   // its fixed block ids
  };
  // id's slot; else, with `want`, a free one taken for it (see the top comment).
  Slot* slot_for(SeqId id, const Want* want);
  // One forward of batch_ (logits of the rows that want them into logits_); false on an error.
  bool run();

  Config config_;
  int64_t n_vocab_;
  ModelRunner runner_;
  KvStorage kv_;
  std::vector<Slot> slots_;
  std::vector<BatchSequence> batch_;
  std::vector<float> logits_;
  bool error_logged_ = false;
  uint64_t n_calls_ = 0;
  int64_t n_computed_ = 0;
};

}  // namespace zl
