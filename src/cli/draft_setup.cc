#include "cli/draft_setup.h"

#include "cli/args.h"  // parse_bool_word
#include "cli/model_loading.h"
#include "engine/draft_model.h"  // check_draft_vocabulary

namespace zl::cli {

Result<std::string> resolve_spec_method(const std::string& value, const std::string& speculative_given,
                                        const std::string& draft_path, const std::string& draft_given,
                                        bool config_sources) {
  const bool has_draft = !draft_path.empty();
  std::string method = value.empty() ? (has_draft ? "draft" : "off") : value;
  // The boolean forms (TOML speculative = true, ZEROLAYER_SPECULATIVE=false), exactly the words
  // the message lists: on is the method the draft model setting implies.
  if (const std::optional<bool> on = parse_bool_word(method)) method = !*on ? "off" : has_draft ? "draft" : "ngram";
  if (method != "off" && method != "ngram" && method != "draft") {
    return invalid_argument(speculative_given + ": speculative must be off, ngram, draft, true or false (or 1/0, yes/no), got '" +
                            value + "'");
  }
  if (method == "draft" && !has_draft) {
    return invalid_argument(speculative_given +
                            ": speculative draft needs a draft model of the same vocabulary, and draft-model is not "
                            "given (--draft-model PATH" +
                            std::string(config_sources ? ", ZEROLAYER_DRAFT_MODEL, or draft_model in the config file)"
                                                       : ")"));
  }
  if (method == "ngram" && has_draft) {
    return invalid_argument(speculative_given + " conflicts with " + draft_given +
                            ": with a draft model, requests that speculate draft from it, not from n-grams (use "
                            "speculative draft or off with a draft model, or drop draft-model for ngram)");
  }
  return method;
}

Result<std::unique_ptr<LoadedDraft>> load_draft_model(const std::string& path, const std::string& origin,
                                                      const Model& target, const Tokenizer& target_tokenizer,
                                                      bool in_memory) {
  auto draft = std::make_unique<LoadedDraft>();
  auto loaded = load_model_with_progress(path, std::nullopt, in_memory);
  if (!loaded.ok()) return loaded.status().with_context(origin);
  draft->model = std::move(loaded->model);
  draft->weights = std::move(loaded->weights);
  auto tokenizer = Tokenizer::from_gguf(*draft->model->file);
  if (!tokenizer.ok()) return tokenizer.status().with_context(origin + ": its tokenizer");
  draft->tokenizer = std::move(tokenizer).value();
  if (Status s = check_draft_vocabulary(target_tokenizer.vocab(), target.config.n_vocab, draft->tokenizer->vocab(),
                                        draft->model->config.n_vocab);
      !s.ok()) {
    return s.with_context(origin);
  }
  return draft;
}

void attach_draft_model(const LoadedDraft* draft, int32_t draft_slots, EngineConfig* config) {
  if (!draft) return;
  config->draft_model = draft->model.get();
  config->draft_tokenizer = draft->tokenizer.get();
  config->draft_weights = draft->weights;
  config->draft_slots = draft_slots;
}

}  // namespace zl::cli
