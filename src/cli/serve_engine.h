// What `zerolayer serve` runs: an engine and the prompt codec that matches
// its tokenizer (cli/serve.h takes any such pair from its caller).
#pragma once

#include <memory>
#include <string>

#include "api/prompt_codec.h"
#include "cli/serve_config.h"
#include "engine/request.h"
#include "obs/engine_sink.h"

namespace zl::cli {

struct ServeBackend {
  // Declared first so it is destroyed last: the engine thread and the codec
  // point into the model and tokenizer it holds.
  std::shared_ptr<void> keep_alive;
  std::unique_ptr<EngineApi> engine;
  std::unique_ptr<api::PromptCodec> codec;
  std::string default_alias;         // used when --model-alias is not given
};

// The real engine (Engine::create) on the model of config.model_path (or the
// default model), with the model's tokenizer and chat template. The engine
// reports into `obs_sink` (may be null; must outlive the engine).
Result<ServeBackend> make_backend(const ServeConfig& config, obs::EngineSink* obs_sink = nullptr);

}  // namespace zl::cli
