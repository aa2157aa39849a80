// The body of fuzz_anthropic_request and fuzz_openai_request: request JSON
// (arbitrary bytes) -> the API-neutral ChatRequest (both parse functions of
// the API), then what the server does next with a parsed request: the prompt
// rendered and tokenized (prepare_request, on the demo vocabulary with its
// own template and the chatml / llama3 / gemma families, so tools are
// rendered in every syntax) after context editing, and the API's formatter writing an answer that
// echoes the request's fields. The same bytes as a /tokenize and a /detokenize body.
// Invariants: a parse is a ChatRequest or a 4xx with a message, never an
// exception or a crash; stream_options only with stream; a forced tool is
// one of the tools; a prepared request fits the window with valid token ids
// and room for one token; every body and SSE `data:` line the formatter
// writes is JSON.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "api/chat.h"
#include "api/context_edits.h"
#include "api/errors.h"
#include "api/generation.h"
#include "api/tokenize_api.h"
#include "fuzz/fuzz_support.h"

namespace zl::fuzz {

struct RequestApi {
  api::ApiResult<api::ChatRequest> (*parse)(std::string_view body);
  api::ApiResult<api::ChatRequest> (*parse_other)(std::string_view body);  // count_tokens / completions
  std::function<std::unique_ptr<api::EventFormatter>(const api::ChatRequest&)> make_formatter;
};

inline void check_parsed(const api::ApiResult<api::ChatRequest>& r) {
  if (!r.ok()) {
    const int status = api::http_status(r.error());
    FUZZ_CHECK(status >= 400 && status < 500);
    FUZZ_CHECK(!r.error().message.empty());
    return;
  }
  const api::ChatRequest& chat = r.value();
  if (chat.shape) FUZZ_CHECK(chat.stream);
  if (chat.tool_choice.starts_with("tool:")) {
    const std::string_view name = std::string_view(chat.tool_choice).substr(5);
    bool found = false;
    for (const api::ToolDef& t : chat.tools) found |= t.name == name;
    FUZZ_CHECK(found);
  }
  for (const api::ToolDef& t : chat.tools) FUZZ_CHECK(is_json(t.json));
}

// The answer a model could give to `chat`, through the API's formatter:
// its last message's text and, when it has one, its first tool call.
inline void check_formatter(const RequestApi& api, const api::ChatRequest& chat) {
  std::string text = chat.raw_prompt ? chat.prompt : chat.messages.empty() ? "" : chat.messages.back().content;
  api::ToolCall call{.id = "", .name = "f", .arguments_json = "{}"};
  for (const api::ChatMessage& m : chat.messages) {
    if (m.tool_calls.empty()) continue;
    call.name = m.tool_calls[0].name;
    if (is_json(m.tool_calls[0].arguments_json) && m.tool_calls[0].arguments_json.starts_with('{')) {
      call.arguments_json = m.tool_calls[0].arguments_json;
    }
    break;
  }
  api::Completion c{.finish = FinishReason::kEndOfSequence, .usage = {.n_prompt_tokens = 3, .n_generated_tokens = 2}};
  auto f = api.make_formatter(chat);
  std::vector<api::AnswerPart> answer;
  answer.push_back(api::AnswerPart{.kind = api::AnswerPart::Kind::kText, .text = text});
  answer.push_back(api::AnswerPart{.kind = api::AnswerPart::Kind::kToolCall, .call = call});
  c.n_tool_calls = 1;
  FUZZ_CHECK(is_json(f->complete(answer, c).body));
  FUZZ_CHECK(is_json(f->error(api::invalid_request("model", "unknown model '" + chat.model + "'")).body));

  auto s = api.make_formatter(chat);
  std::string out;
  s->stream_start(c.usage, out);
  s->stream_text(text, out);
  s->stream_tool_call_start(call.name, out);
  s->stream_tool_call_delta(call.arguments_json, out);
  s->stream_tool_call_end(out);
  s->stream_ping(out);
  s->stream_finish(c, out);
  FUZZ_CHECK(sse_data_is_json(out));
}

inline void check_prepared(const api::ChatRequest& chat, size_t codec_index) {
  constexpr int64_t kCtx = 512;
  const api::TokenizerCodec& codec = fuzz_codec(codec_index);
  // Truncation policies (api/context_policy.h) on a small window: a typed
  // 4xx, or a prompt that leaves room, shortened by what the report says.
  for (api::ContextPolicy policy : {api::ContextPolicy::kDropOldest, api::ContextPolicy::kMiddleOut}) {
    constexpr int64_t kSmall = 96;
    auto t = api::prepare_request(chat, codec, kSmall, "req_fuzz", "", {.policy = policy, .reserve = 16});
    if (!t.ok()) {
      FUZZ_CHECK(api::http_status(t.error()) >= 400 && api::http_status(t.error()) < 500);
      continue;
    }
    FUZZ_CHECK(t.value().n_prompt_tokens < kSmall);
    FUZZ_CHECK(t.value().truncation.n_tokens >= 0);
    FUZZ_CHECK(t.value().truncation.applied() || t.value().truncation.n_tokens == 0);
  }
  auto p = api::prepare_request(chat, codec, kCtx, "req_fuzz");
  if (!p.ok()) {
    const int status = api::http_status(p.error());
    FUZZ_CHECK(status >= 400 && status < 500);
    FUZZ_CHECK(!p.error().message.empty());
    return;
  }
  const Request& r = p.value().request;
  FUZZ_CHECK(p.value().n_prompt_tokens == static_cast<int64_t>(r.prompt_ids.size()));
  FUZZ_CHECK(p.value().n_prompt_tokens < kCtx);
  FUZZ_CHECK(r.stop.max_tokens >= 0 && r.stop.max_tokens <= kCtx - p.value().n_prompt_tokens);
  for (int32_t id : r.prompt_ids) FUZZ_CHECK(fuzz_tokenizer().vocab().is_valid(id));
  if (p.value().tools.active()) {
    for (const std::string& name : p.value().tools.names) FUZZ_CHECK(!name.empty());
  }
}

// Context editing (api/context_edits.h) on a parsed request, in place: the
// report's counts are the prompt's, before and after, and add up.
inline void check_context_edits(api::ChatRequest* chat, size_t codec_index) {
  const api::TokenizerCodec& codec = fuzz_codec(codec_index);
  auto r = api::apply_context_edits(chat, codec);
  if (!r.ok()) {
    FUZZ_CHECK(api::http_status(r.error()) >= 400 && api::http_status(r.error()) < 500);
    return;
  }
  const api::ContextEditReport& e = r.value();
  FUZZ_CHECK(e.requested == chat->context_management.has_value());
  if (!e.requested) return;
  int64_t saved = 0;
  for (const api::AppliedEdit& a : e.applied) saved += a.n_cleared_tokens;
  FUZZ_CHECK(e.n_original_tokens - saved == e.n_tokens);
  auto ids = codec.encode_chat(*chat);
  FUZZ_CHECK(ids.ok() && static_cast<int64_t>(ids->size()) == e.n_tokens);
}

// POST /tokenize and /detokenize on the same bytes: a query or a 4xx; a
// query's ids are valid and its answer is JSON with one entry an id; ids
// that detokenize give text, others a 4xx.
inline void check_tokenize(std::string_view body, size_t codec_index) {
  const api::TokenizerCodec& codec = fuzz_codec(codec_index);
  auto q = api::parse_tokenize_request(body);
  if (!q.ok()) {
    FUZZ_CHECK(api::http_status(q.error()) >= 400 && api::http_status(q.error()) < 500);
    FUZZ_CHECK(!q.error().message.empty());
  } else {
    const api::TokenizeQuery& query = q.value();
    auto ids = query.chat ? codec.encode_chat(*query.chat) : codec.encode_with(query.text, query.add_special, query.parse_special);
    if (ids.ok()) {
      for (int32_t id : *ids) FUZZ_CHECK(fuzz_tokenizer().vocab().is_valid(id));
      auto pieces = codec.token_pieces(*ids);
      auto strs = codec.token_strings(*ids);
      FUZZ_CHECK(pieces.ok() && strs.ok() && pieces->size() == ids->size());
      FUZZ_CHECK(is_json(api::tokenize_response(query, *ids, *pieces, *strs, 512)));
    }
  }
  auto d = api::parse_detokenize_request(body);
  if (!d.ok()) {
    FUZZ_CHECK(api::http_status(d.error()) >= 400 && api::http_status(d.error()) < 500);
    return;
  }
  auto text = codec.decode_prompt(d.value());
  if (text.ok()) FUZZ_CHECK(is_json(api::detokenize_response(*text)));
}

inline int fuzz_request(const RequestApi& api, const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  for (auto* parse : {api.parse, api.parse_other}) {
    auto r = parse(body);
    check_parsed(r);
    if (!r.ok()) continue;
    check_context_edits(&r.value(), size % kNumFuzzCodecs);
    check_prepared(r.value(), size % kNumFuzzCodecs);
    check_formatter(api, r.value());
  }
  check_tokenize(body, size % kNumFuzzCodecs);
  return 0;
}

}  // namespace zl::fuzz
