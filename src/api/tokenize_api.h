// POST /tokenize and POST /detokenize: the model's own tokenizer over HTTP,
// in the request shapes of llama-server and vLLM (clients count and cut
// their prompts with them, e.g. SillyTavern on llama-server).
//
//   llama-server  {"content": "...", "add_special": false, "parse_special": true, "with_pieces": false}
//                 -> {"tokens": [ids]}, or with_pieces [{"id": 1, "piece": "text" | [bytes]}]
//   vLLM          {"prompt": "...", "add_special_tokens": true, "return_token_strs": false}
//                 {"messages": [...], "add_generation_prompt": true, "tools": [...], ...}
//                 -> {"count": n, "max_model_len": n_ctx, "tokens": [ids], "token_strs": [...] | null}
//   both          /detokenize {"tokens": [ids]} -> {"content": text, "prompt": text}
//
// Every answer carries the keys of both shapes (a client reads its own).
// A chat (`messages`) is tokenized as a chat completion's prompt is — the
// model's template, tools and thinking switch, special-token text in
// contents not honoured — so its count is the prompt_tokens a generation
// reports. A vLLM `prompt` is tokenized as /v1/completions tokenizes one
// (BOS as the model wants, special-token text not honoured), unless the
// body asks otherwise; llama-server's `content` follows its own flags and
// defaults. The parsing is here; the service runs the codec
// (api/service.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "api/chat.h"
#include "api/errors.h"

namespace zl::api {

struct TokenizeQuery {
  enum class Form { kContent, kPrompt, kChat };
  Form form = Form::kContent;
  std::string text;            // kContent, kPrompt
  bool add_special = false;    // BOS (and EOS where the vocabulary adds one), as the model wants
  bool parse_special = true;   // special-token text in `text` becomes the control token
  bool with_pieces = false;    // llama-server: each token with its piece
  bool token_strs = false;     // vLLM: token_strs beside the ids
  std::optional<ChatRequest> chat;  // kChat: parsed as a chat completion request
};

// The body of POST /tokenize: `messages` (a chat), else `prompt`, else
// `content`; a 400 naming the field otherwise.
ApiResult<TokenizeQuery> parse_tokenize_request(std::string_view body);

// The ids of POST /detokenize (`tokens`: an array of integers; range-checked
// by the codec).
ApiResult<std::vector<int32_t>> parse_detokenize_request(std::string_view body);

// The answer to /tokenize: `pieces` holds each id's bytes (special tokens
// rendered) when the query asked for them (with_pieces), `token_strs` each
// id's vocabulary string (return_token_strs); else they are empty.
std::string tokenize_response(const TokenizeQuery& q, std::span<const int32_t> ids,
                              std::span<const std::string> pieces, std::span<const std::string> token_strs,
                              int64_t max_model_len);
std::string detokenize_response(std::string_view text);

}  // namespace zl::api
