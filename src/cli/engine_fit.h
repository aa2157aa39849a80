// Engine::create for the commands, with a memory shortfall told in the
// user's terms: the setting that sized the buffer, its value and the bytes
// ("--kv-size 100000000: the KV cache (100000000 tokens × 22.0 KiB) needs
// 2.0 TiB, 21.3 GiB available").
#pragma once

#include <memory>
#include <string>

#include "core/status.h"
#include "engine/engine.h"

namespace zl::cli {

// What sized an engine, as the user gave it ("--ctx 4096",
// "ZEROLAYER_KV_SIZE=100000000"); empty: a default.
struct EngineSizeSources {
  std::string kv_size;       // the KV cache's tokens, when given
  std::string ctx;           // the context window, when given
  std::string batch_tokens;  // the step's token budget, when given
  std::string parallel;      // sequences at once (logits rows of a step), when given
  std::string draft_slots;   // sequences drafting at once from a draft model, when given
};

// Warns when `type` quantizes K/V in blocks wider than a head (q8_0 with head_dim < 32: a
// 32-value block spans several heads after RoPE, and the logits drift; README "Long context").
// create_engine calls it; `logits` too.
void warn_kv_type(const ModelConfig& model, KvType type);

// Without a KV size (n_kv_tokens 0), resolve_engine_config gives the KV cache at most half of
// the memory available; with a draft model, its slots (a whole context each) share that half:
// `config` with n_kv_tokens set to the largest size (at least one context) whose resolved KV
// cache and draft KV cache fit in half of `available`. Unchanged without a draft model, with an
// explicit size, or when both fit already. Pure but for resolve_engine_config's own reading of
// the memory available.
EngineConfig share_kv_budget_with_draft(const ModelConfig& model, EngineConfig config, uint64_t available);

// Checks engine_memory(resolved `config`) against the memory available now,
// the KV budget shared with a draft model first (share_kv_budget_with_draft),
// then creates the engine on `weights` (LoadedModel::weights; null: the
// engine prepares them). ResourceExhausted naming the source on a
// shortfall; Engine::create's errors otherwise.
Result<std::unique_ptr<Engine>> create_engine(const Model& model, const Tokenizer& tokenizer, const EngineConfig& config,
                                              const EngineSizeSources& sources,
                                              std::shared_ptr<const PackedWeights> weights = nullptr);

}  // namespace zl::cli
