// What several fuzz targets share: the tokenizer and prompt codecs they
// render and tokenize with, and JSON checks on what the API layer writes.
#pragma once

#include <boost/json.hpp>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "api/tokenizer_codec.h"
#include "fuzz/fuzz_target.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace zl::fuzz {

// The vocabulary of $ZL_FUZZ_VOCAB, else of the demo model in the
// repository (models/zerolayer-demo.gguf: SPM, byte fallback). Loaded once;
// aborts when missing (a fuzz run without it would test nothing).
inline const Tokenizer& fuzz_tokenizer() {
  static std::unique_ptr<Tokenizer> t = [] {
    const char* env = std::getenv("ZL_FUZZ_VOCAB");
    const std::string path = env && *env ? env : ZL_SOURCE_DIR "/models/zerolayer-demo.gguf";
    auto r = Tokenizer::load(path);
    if (!r.ok()) {
      std::fprintf(stderr, "fuzz: %s: %s (set ZL_FUZZ_VOCAB)\n", path.c_str(), r.status().to_string().c_str());
      std::abort();
    }
    return std::move(r).value();
  }();
  return *t;
}

// Codecs on fuzz_tokenizer(): index 0 the vocabulary's own template, then
// the families with native tool calls (chatml: Hermes, llama3: Llama 3 JSON)
// and one without a system turn (gemma).
inline const api::TokenizerCodec& fuzz_codec(size_t i) {
  static const auto codecs = [] {
    const Tokenizer& t = fuzz_tokenizer();
    auto own = ChatTemplate::for_vocab(t.vocab());
    std::vector<std::unique_ptr<api::TokenizerCodec>> v;
    v.push_back(std::make_unique<api::TokenizerCodec>(&t, own.ok() ? *own : ChatTemplate(ChatTemplateKind::kPlain)));
    for (ChatTemplateKind k : {ChatTemplateKind::kChatml, ChatTemplateKind::kLlama3, ChatTemplateKind::kGemma}) {
      v.push_back(std::make_unique<api::TokenizerCodec>(&t, ChatTemplate(k)));
    }
    return v;
  }();
  return *codecs[i % codecs.size()];
}
inline constexpr size_t kNumFuzzCodecs = 4;

// True when `text` is one complete JSON value.
inline bool is_json(std::string_view text) {
  boost::system::error_code ec;
  boost::json::parse(text, ec);
  return !ec;
}

// Every `data:` line of an SSE byte stream is JSON (or OpenAI's [DONE]).
inline bool sse_data_is_json(std::string_view sse) {
  size_t pos = 0;
  while (pos < sse.size()) {
    size_t end = sse.find('\n', pos);
    if (end == std::string_view::npos) end = sse.size();
    const std::string_view line = sse.substr(pos, end - pos);
    if (line.starts_with("data: ") && line != "data: [DONE]" && !is_json(line.substr(6))) return false;
    pos = end + 1;
  }
  return true;
}

}  // namespace zl::fuzz
