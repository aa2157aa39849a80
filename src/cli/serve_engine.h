// What `zerolayer serve` runs: an engine and the prompt codec that matches
// its tokenizer.
#pragma once

#include <memory>
#include <string>

#include "api/prompt_codec.h"
#include "cli/serve_config.h"
#include "engine/request.h"

namespace zl::cli {

struct ServeBackend {
  // Declared first so it is destroyed last: the engine thread and the codec
  // point into the model and tokenizer it holds.
  std::shared_ptr<void> keep_alive;
  std::unique_ptr<EngineApi> engine;
  std::unique_ptr<api::PromptCodec> codec;
  std::string default_alias;         // used when --model-alias is not given
};

// The fake engine and codec for --fake-engine, or the real engine (make_engine)
// with the model's tokenizer and chat template.
Result<ServeBackend> make_backend(const ServeConfig& config);

}  // namespace zl::cli
