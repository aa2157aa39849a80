// Which chat template a model's prompts go through (serve and render share it):
//   --chat-template NAME       a built-in family (tokenizer/chat_template.h)
//   --chat-template-file FILE  that Jinja template (a parse error is an error)
//   neither                    the GGUF's tokenizer.chat_template through the
//                              Jinja engine; if it does not parse, the
//                              built-in family it matches, with a warning
//   no template in the model   the built-in detection (plain)
#pragma once

#include <memory>
#include <string>

#include "api/prompt_codec.h"
#include "tokenizer/tokenizer.h"

namespace zl::cli {

struct TemplateChoice {
  std::string name;  // --chat-template
  std::string file;  // --chat-template-file
};

// `tokenizer` must outlive the codec.
Result<std::unique_ptr<api::PromptCodec>> make_prompt_codec(const Tokenizer* tokenizer, const TemplateChoice& choice);

}  // namespace zl::cli
