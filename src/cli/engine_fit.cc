#include "cli/engine_fit.h"

#include <algorithm>

#include "core/log.h"
#include "core/memory.h"

namespace zl::cli {
namespace {

// "a, b" of the non-empty parts, or `fallback`.
std::string join(std::initializer_list<std::string> parts, const std::string& fallback) {
  std::string out;
  for (const std::string& p : parts) {
    if (!p.empty()) out += (out.empty() ? "" : ", ") + p;
  }
  return out.empty() ? fallback : out;
}

// The source of the KV cache's size: an explicit size (kept as given, even
// below one context), else the context that the default size derives from.
std::string kv_source(const EngineConfig& c, const EngineSizeSources& s, int64_t requested_kv) {
  if (!s.kv_size.empty() && requested_kv > 0) return s.kv_size;
  if (!s.ctx.empty()) return s.ctx;
  return "the model's context window (" + std::to_string(c.n_ctx) + " tokens)";
}

Status check_fits(const ModelConfig& model, const EngineConfig& requested, const EngineConfig& c,
                  const EngineSizeSources& s) {
  const EngineMemory need = engine_memory(model, c);
  const uint64_t available = available_memory_bytes();
  const std::string kv_what = "the KV cache (" + std::to_string(c.n_kv_tokens) + " tokens × " +
                              format_bytes(KvStorage::bytes_per_token(model, c.kv_type)) + ")";
  const std::string step_what = "the buffers of one engine step (" + std::to_string(c.max_step_tokens) + " tokens)";
  const std::string kv_src = kv_source(c, s, requested.n_kv_tokens);
  const std::string step_src = join({s.batch_tokens, s.parallel}, "the default step budget");
  if (Status st = check_memory_budget(need.kv_bytes, kv_what, available); !st.ok()) {
    return resource_exhausted(kv_src + ": " + st.message());
  }
  if (Status st = check_memory_budget(need.step_bytes, step_what, available); !st.ok()) {
    return resource_exhausted(step_src + ": " + st.message());
  }
  const std::string both = kv_what + " with " + step_what;
  if (Status st = check_memory_budget(saturating_add(need.kv_bytes, need.step_bytes), both, available); !st.ok()) {
    return resource_exhausted(join({kv_src, step_src}, "") + ": " + st.message());
  }
  if (!c.draft_model) return {};
  // The draft model's KV cache: a whole context per slot (engine/draft_model.h), beside the rest.
  const std::string draft_what = "the draft model's KV cache (" + std::to_string(c.draft_slots) + " slots × " +
                                 std::to_string(c.n_ctx) + " tokens × " +
                                 format_bytes(KvStorage::bytes_per_token(c.draft_model->config, c.kv_type)) + ")";
  const std::string draft_src =
      join({s.draft_slots}, "--draft-slots (default: parallel, at most the contexts the KV cache holds)");
  const std::string all = both + " and " + draft_what;
  if (Status st = check_memory_budget(saturating_add(saturating_add(need.kv_bytes, need.step_bytes), need.draft_kv_bytes),
                                      all, available);
      !st.ok()) {
    return resource_exhausted(join({draft_src, kv_src}, "") + ": " + st.message());
  }
  return {};
}

// The sizing log's second line with a draft model: what it costs beside the engine sizing line.
void log_draft_sizing(const EngineConfig& asked, const EngineConfig& c, const EngineMemory& need) {
  if (asked.draft_slots > c.draft_slots) {
    log::warn("draft slots lowered to the sequences that can run at once",
              {{"draft_slots_asked", int64_t{asked.draft_slots}}, {"draft_slots", int64_t{c.draft_slots}},
               {"parallel", int64_t{c.max_seqs}}});
  }
  log::info("draft model sizing",
            {{"draft_model", c.draft_model->file ? c.draft_model->file->path() : c.draft_model->config.name},
             {"draft_weight_bytes", c.draft_model->n_weight_bytes()},
             {"draft_slots", int64_t{c.draft_slots}},
             {"draft_kv_bytes_per_token", KvStorage::bytes_per_token(c.draft_model->config, c.kv_type)},
             {"draft_kv_bytes", need.draft_kv_bytes},
             {"draft_p_min", static_cast<double>(c.draft_p_min)}});
  const int64_t draft_train = c.draft_model->config.n_ctx_train;
  if (draft_train > 0 && c.n_ctx > draft_train) {
    log::warn("the context window is larger than the draft model was trained on: its drafts past that length may "
              "be poor (fewer accepted; the output is the model's either way)",
              {{"n_ctx", c.n_ctx}, {"draft_n_ctx_train", draft_train}});
  }
}

// Where max_seqs came from, as the engine sizing log tells it: the setting,
// the command's own choice, or default_max_seqs' division and clamp.
std::string parallel_source(const EngineConfig& requested, const EngineConfig& resolved, const EngineSizeSources& s) {
  if (!s.parallel.empty()) return s.parallel;
  if (requested.max_seqs > 0) return "fixed by the command";
  const AutoSeqs a = auto_max_seqs(resolved.n_kv_tokens, resolved.n_ctx);
  std::string out = "the KV budget (" + std::to_string(resolved.n_kv_tokens) + " tokens / " + std::to_string(a.per_seq) +
                    " per sequence = " + std::to_string(a.quotient);
  if (a.quotient < kMinAutoSeqs) out += ", raised to the minimum " + std::to_string(kMinAutoSeqs);
  if (a.quotient > kMaxAutoSeqs) out += ", capped at " + std::to_string(kMaxAutoSeqs);
  return out + ")";
}

}  // namespace

EngineConfig share_kv_budget_with_draft(const ModelConfig& model, EngineConfig config, uint64_t available) {
  if (!config.draft_model || config.n_kv_tokens > 0 || available == UINT64_MAX) return config;
  const double budget = 0.5 * static_cast<double>(available);  // resolve_engine_config's share
  EngineConfig r = resolve_engine_config(model, config);
  // A few rounds: the draft's slots follow the cache's contexts (rounded to whole blocks).
  for (int round = 0; round < 16 && r.n_kv_tokens > r.n_ctx; ++round) {
    const EngineMemory need = engine_memory(model, r);
    const double total = static_cast<double>(need.kv_bytes) + static_cast<double>(need.draft_kv_bytes);
    if (total <= budget) break;
    const auto lower = static_cast<int64_t>(static_cast<double>(r.n_kv_tokens) * (budget / total));
    config.n_kv_tokens = std::max(r.n_ctx, std::min(lower, r.n_kv_tokens - r.block_size));
    r = resolve_engine_config(model, config);
  }
  return config;
}

void warn_kv_type(const ModelConfig& model, KvType type) {
  if (type == KvType::kQ8_0 && model.head_dim > 0 && model.head_dim < 32) {
    log::warn("--kv-type q8_0 on a model with head_dim below 32: a 32-value block spans several heads, which "
              "costs far more accuracy than on common models (prefer f16)",
              {{"head_dim", model.head_dim}, {"kv_type", kv_type_name(type)}});
  }
}

Result<std::unique_ptr<Engine>> create_engine(const Model& model, const Tokenizer& tokenizer, const EngineConfig& config,
                                              const EngineSizeSources& sources,
                                              std::shared_ptr<const PackedWeights> weights) {
  const EngineConfig shared = share_kv_budget_with_draft(model.config, config, available_memory_bytes());
  const EngineConfig resolved = resolve_engine_config(model.config, shared);
  if (shared.n_kv_tokens != config.n_kv_tokens) {
    log::info("the KV cache shares half of the memory available with the draft model's (--kv-size sets it)",
              {{"n_kv_tokens", resolved.n_kv_tokens},
               {"n_kv_tokens_without_draft", resolve_engine_config(model.config, config).n_kv_tokens}});
  }
  RETURN_IF_ERROR(check_fits(model.config, config, resolved, sources));
  warn_kv_type(model.config, resolved.kv_type);
  if (model.config.n_ctx_train > 0 && resolved.n_ctx > model.config.n_ctx_train) {
    log::warn("the context window is larger than the model was trained on: past the training length the model's "
              "output may degrade (as llama.cpp warns; a rope-scaled file sets its own training length)",
              {{"n_ctx", resolved.n_ctx}, {"n_ctx_train", model.config.n_ctx_train}});
  }
  if (resolved.n_kv_tokens < resolved.n_ctx) {
    log::warn("the KV cache holds less than one context window: a request whose prompt + max_tokens needs more "
              "gets 400 kv_cache_overflow (or, with --degrade max-tokens, a lower max_tokens)",
              {{"n_kv_tokens", resolved.n_kv_tokens}, {"n_ctx", resolved.n_ctx}});
  }
  // The method requests use when they do not say: off, ngram, or draft (a draft model).
  const char* speculative = !resolved.speculative ? "off" : resolved.draft_model ? "draft" : "ngram";
  log::info("engine sizing",
            {{"parallel", int64_t{resolved.max_seqs}},
             {"parallel_from", parallel_source(config, resolved, sources)},
             {"n_kv_tokens", resolved.n_kv_tokens}, {"n_ctx", resolved.n_ctx},
             {"batch_tokens", int64_t{resolved.max_step_tokens}}, {"schedule", schedule_policy_name(resolved.schedule)},
             {"kv_type", kv_type_name(resolved.kv_type)},
             {"kv_bytes_per_token", KvStorage::bytes_per_token(model.config, resolved.kv_type)},
             {"speculative", speculative},
             {"spec_draft_max", int64_t{resolved.spec_draft_max}}});
  if (resolved.draft_model) log_draft_sizing(config, resolved, engine_memory(model.config, resolved));
  return Engine::create(model, tokenizer, resolved, std::move(weights));  // resolving again changes nothing
}

}  // namespace zl::cli
