#include "cli/prompt_codec_setup.h"

#include <fstream>
#include <sstream>

#include "api/jinja_codec.h"
#include "api/tokenizer_codec.h"
#include "core/log.h"
#include "template/jinja.h"
#include "tokenizer/chat_template.h"

namespace zl::cli {
namespace {

Result<std::unique_ptr<api::PromptCodec>> builtin_codec(const Tokenizer* tokenizer, std::string_view name) {
  ASSIGN_OR_RETURN(ChatTemplate tmpl, ChatTemplate::for_vocab(tokenizer->vocab(), name));
  return std::unique_ptr<api::PromptCodec>(std::make_unique<api::TokenizerCodec>(tokenizer, std::move(tmpl)));
}

Result<std::string> read_text_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return io_error("cannot open chat template file " + path);
  std::stringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return io_error("reading " + path + " failed");
  return ss.str();
}

}  // namespace

Result<std::unique_ptr<api::PromptCodec>> make_prompt_codec(const Tokenizer* tokenizer, const TemplateChoice& choice) {
  if (!choice.name.empty() && !choice.file.empty()) {
    return invalid_argument("--chat-template and --chat-template-file exclude each other");
  }
  if (!choice.name.empty()) return builtin_codec(tokenizer, choice.name);
  if (!choice.file.empty()) {
    ASSIGN_OR_RETURN(std::string source, read_text_file(choice.file));
    ASSIGN_OR_RETURN(tmpl::Template t, tmpl::Template::parse(source, choice.file));
    return std::unique_ptr<api::PromptCodec>(std::make_unique<api::JinjaCodec>(tokenizer, std::move(t), choice.file));
  }
  const std::string& source = tokenizer->vocab().chat_template();
  if (source.empty()) return builtin_codec(tokenizer, {});
  auto t = tmpl::Template::parse(source, "tokenizer.chat_template");
  if (!t.ok()) {
    log::warn("the model's chat template does not parse; using the built-in family it matches",
              {{"error", t.status().message()}});
    return builtin_codec(tokenizer, {});
  }
  return std::unique_ptr<api::PromptCodec>(
      std::make_unique<api::JinjaCodec>(tokenizer, std::move(*t), "jinja"));
}

}  // namespace zl::cli
