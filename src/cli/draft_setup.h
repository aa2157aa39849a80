// `--draft-model` for the commands (serve, generate): which speculative method the settings
// ask for, and the draft model loaded next to the target (engine/draft_model.h drafts with it).
//
//   --speculative   --draft-model   method                 requests speculate by default
//   (not given)     -               off                    no
//   (not given)     PATH            draft                  yes
//   off / false     -, PATH         off (PATH is loaded)   no; those that ask draft from PATH
//   ngram           -               ngram                  yes
//   ngram           PATH            refused: two methods
//   draft           -               refused: no draft model
//   draft           PATH            draft                  yes
//   true            -, PATH         ngram, draft           yes
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "engine/engine.h"
#include "model/model.h"
#include "model/packed_weights.h"
#include "tokenizer/tokenizer.h"

namespace zl::cli {

// The method of `value` (off|ngram|draft, or true|false; empty: not given) with or
// without a draft model (`draft_path` empty: none): "off", "ngram" or "draft" as the table above
// says. InvalidArgument naming the settings as the user gave them otherwise (`speculative_given`:
// "--speculative ngram", "ZEROLAYER_SPECULATIVE=ngram", "speculative = ngram in x.toml";
// `draft_given` likewise; `config_sources`: the command also reads the environment and a config
// file, which the messages then mention). Pure.
Result<std::string> resolve_spec_method(const std::string& value, const std::string& speculative_given,
                                        const std::string& draft_path, const std::string& draft_given,
                                        bool config_sources = true);

// A draft model with what the engine points into (EngineConfig::draft_model,
// draft_tokenizer, draft_weights); it must outlive the engine.
struct LoadedDraft {
  std::unique_ptr<Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::shared_ptr<const PackedWeights> weights;
};

// Loads `path` like the target (load_model_with_progress), builds its tokenizer and checks its
// vocabulary against the target's (check_draft_vocabulary), before any KV cache is allocated.
// Errors name `origin` ("--draft-model x.gguf") and the cause: the file's (NotFound, a bad
// GGUF), a shortfall of memory, or the first vocabulary difference. `in_memory`: as the
// target's (serve --mmap false).
Result<std::unique_ptr<LoadedDraft>> load_draft_model(const std::string& path, const std::string& origin,
                                                      const Model& target, const Tokenizer& target_tokenizer,
                                                      bool in_memory = false);

// Points `config` at `draft` (null: no draft model); `draft_slots` 0: the engine's default.
void attach_draft_model(const LoadedDraft* draft, int32_t draft_slots, EngineConfig* config);

}  // namespace zl::cli
