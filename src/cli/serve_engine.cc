#include "cli/serve_engine.h"

#include <algorithm>

#include "cli/draft_setup.h"
#include "cli/engine_fit.h"
#include "cli/prompt_codec_setup.h"
#include "cli/model_loading.h"
#include "core/log.h"
#include "core/memory.h"  // available_memory_bytes
#include "engine/engine.h"
#include "tokenizer/tokenizer.h"

namespace zl::cli {

namespace {

// What the real engine points into, kept alive together.
struct LoadedBackend {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<LoadedDraft> draft;  // --draft-model, or null
};

std::string file_stem(const std::string& path) {
  size_t b = path.find_last_of('/');
  b = b == std::string::npos ? 0 : b + 1;
  size_t e = path.rfind('.');
  if (e == std::string::npos || e < b) e = path.size();
  return path.substr(b, e - b);
}

}  // namespace

Result<ServeBackend> make_backend(const ServeConfig& config, obs::EngineSink* obs_sink) {
  ServeBackend b;
  std::string path = config.model_path;
  if (path.empty()) {
    ASSIGN_OR_RETURN(path, default_model_path());
  }
  auto loaded = std::make_shared<LoadedBackend>();
  ASSIGN_OR_RETURN(LoadedModel lm, load_model_with_progress(path, std::nullopt, /*in_memory=*/!config.mmap));
  loaded->model = std::move(lm.model);
  ASSIGN_OR_RETURN(loaded->tokenizer, Tokenizer::from_gguf(*loaded->model->file));
  ASSIGN_OR_RETURN(std::unique_ptr<api::PromptCodec> codec,
                   make_prompt_codec(loaded->tokenizer.get(), {.name = config.chat_template,
                                                               .file = config.chat_template_file}));
  auto given = [&config](const char* name) {
    auto it = config.given.find(name);
    return it == config.given.end() ? std::string() : it->second;
  };
  if (!config.draft_model_path.empty()) {  // before the KV sizing below: the memory left counts its weights
    ASSIGN_OR_RETURN(loaded->draft, load_draft_model(config.draft_model_path, given("draft-model"), *loaded->model,
                                                     *loaded->tokenizer, /*in_memory=*/!config.mmap));
  } else {
    if (config.draft_slots > 0) log::warn("draft-slots is unused without draft-model", {{"draft_slots", given("draft-slots")}});
    if (config.given.contains("draft-p-min")) {
      log::warn("draft-p-min is unused without draft-model", {{"draft_p_min", given("draft-p-min")}});
    }
  }
  EngineConfig ec{.n_ctx = config.ctx,
                  .max_seqs = static_cast<int32_t>(config.parallel),
                  .n_kv_tokens = config.kv_size,
                  .max_step_tokens = static_cast<int32_t>(config.batch_tokens),
                  .kv_type = KvType::kF16,
                  .schedule = parse_schedule_policy(config.schedule).value_or(SchedulePolicy::kLatency),
                  .n_threads = static_cast<int>(config.threads),
                  .max_pending_events = static_cast<size_t>(config.max_pending_events),
                  .obs_sink = obs_sink,
                  .guard = config.guard};
  if (!parse_kv_type(config.kv_type.c_str(), &ec.kv_type)) return invalid_argument("unknown kv-type '" + config.kv_type + "'");
  attach_draft_model(loaded->draft.get(), static_cast<int32_t>(config.draft_slots), &ec);
  ec.draft_p_min = static_cast<float>(config.draft_p_min);
  // Admission control: the bounded queue (engine.h); -1: 4 × --parallel
  // (resolved: the default parallel follows from the KV budget).
  ec.max_queue = config.max_queue >= 0
                     ? config.max_queue
                     : 4 * int64_t{resolve_engine_config(loaded->model->config,
                                                         share_kv_budget_with_draft(loaded->model->config, ec,
                                                                                    available_memory_bytes()))
                                       .max_seqs};
  ec.max_queue_tokens = config.max_queue_tokens;
  ec.queue_timeout_ms = config.queue_timeout_ms;
  ec.max_pause_ms = config.max_pause_ms;
  ec.speculative = config.speculative != "off";  // resolved: off, ngram or draft
  ec.spec_draft_max = static_cast<int32_t>(config.spec_draft_max);
  ec.spec_ngram_min = static_cast<int32_t>(config.spec_ngram_min);
  ec.spec_ngram_max = std::max(ec.spec_ngram_min, ec.spec_ngram_max);
  ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine,
                   create_engine(*loaded->model, *loaded->tokenizer, ec,
                                 {.kv_size = given("kv-size"), .ctx = given("ctx"),
                                  .batch_tokens = given("batch-tokens"), .parallel = given("parallel"),
                                  .draft_slots = given("draft-slots")},
                                 std::move(lm.weights)));
  b.engine = std::move(engine);
  b.codec = std::move(codec);
  b.keep_alive = loaded;
  b.default_alias = file_stem(path);
  return b;
}

}  // namespace zl::cli
