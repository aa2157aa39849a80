#include "api/tokenize_api.h"

#include <boost/json.hpp>
#include <limits>

#include "api/json_fields.h"
#include "api/openai/chat_completions.h"

namespace zl::api {

namespace json = boost::json;

namespace {

bool bool_field(const json::object& o, std::string_view key, bool fallback) {
  const json::value* f = find_field(o, key);
  return f ? json_bool(*f, std::string(key)) : fallback;
}

// A piece as llama-server writes it: the text when it is valid UTF-8, else
// its bytes (a byte-fallback token, half of a character).
json::value piece_value(const std::string& piece) {
  size_t i = 0;
  while (i < piece.size()) {
    const auto c = static_cast<unsigned char>(piece[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (n == 0 || i + n > piece.size()) break;
    bool ok = true;
    for (size_t k = 1; k < n; ++k) ok = ok && (static_cast<unsigned char>(piece[i + k]) >> 6) == 0x2;
    if (!ok) break;
    i += n;
  }
  if (i == piece.size()) return json::string(piece);
  json::array bytes;
  for (char ch : piece) bytes.push_back(static_cast<unsigned char>(ch));
  return bytes;
}

}  // namespace

ApiResult<TokenizeQuery> parse_tokenize_request(std::string_view body) {
  ApiResult<json::value> doc = parse_json_body(body);
  if (!doc.ok()) return doc.error();
  json::object& o = doc.value().as_object();
  try {
    TokenizeQuery q;
    q.with_pieces = bool_field(o, "with_pieces", false);
    q.token_strs = bool_field(o, "return_token_strs", false);
    if (find_field(o, "messages") != nullptr) {
      // vLLM's chat form: the chat completion parser (model optional here),
      // then the template switches it adds.
      q.form = TokenizeQuery::Form::kChat;
      if (find_field(o, "model") == nullptr) o["model"] = "";
      ApiResult<ChatRequest> chat = openai::parse_chat_request(json::serialize(o));
      if (!chat.ok()) return chat.error();
      q.chat = std::move(chat).value();
      if (const json::value* f = find_field(o, "continue_final_message")) {
        q.chat->continue_final_message =
            json_bool(*f, "continue_final_message") && q.chat->messages.back().role == "assistant";
      }
      q.chat->add_generation_prompt = bool_field(o, "add_generation_prompt", true);
      if (q.chat->continue_final_message && !q.chat->add_generation_prompt) {
        throw_field_error("add_generation_prompt",
                          "cannot be false when the final message is continued (continue_final_message)",
                          ErrorReason::kInvalidValue);
      }
      return q;
    }
    if (const json::value* p = find_field(o, "prompt")) {
      q.form = TokenizeQuery::Form::kPrompt;
      q.text = json_string(*p, "prompt");
      q.add_special = bool_field(o, "add_special_tokens", true);
      q.parse_special = bool_field(o, "parse_special", false);
      return q;
    }
    if (const json::value* c = find_field(o, "content")) {
      q.form = TokenizeQuery::Form::kContent;
      q.text = json_string(*c, "content");
      q.add_special = bool_field(o, "add_special", false);
      q.parse_special = bool_field(o, "parse_special", true);
      return q;
    }
    throw_field_error("content", "one of content (llama-server), prompt or messages (vLLM) is required",
                      ErrorReason::kMissingField);
  } catch (const FieldError& e) {
    return e.error;
  }
}

ApiResult<std::vector<int32_t>> parse_detokenize_request(std::string_view body) {
  return parse_object_with<std::vector<int32_t>>(body, [](const json::object& o, std::vector<int32_t>* ids) {
    const json::array& arr = json_array(require_field(o, "tokens", "tokens"), "tokens");
    ids->reserve(arr.size());
    for (size_t i = 0; i < arr.size(); ++i) {
      ids->push_back(static_cast<int32_t>(
          json_int(arr[i], index_param("tokens", i), 0, std::numeric_limits<int32_t>::max())));
    }
  });
}

std::string tokenize_response(const TokenizeQuery& q, std::span<const int32_t> ids,
                              std::span<const std::string> pieces, std::span<const std::string> token_strs,
                              int64_t max_model_len) {
  json::array tokens;
  tokens.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (q.with_pieces && i < pieces.size()) {
      tokens.push_back(json::object{{"id", ids[i]}, {"piece", piece_value(pieces[i])}});
    } else {
      tokens.push_back(ids[i]);
    }
  }
  json::value strs = nullptr;
  if (q.token_strs) {
    json::array a;
    for (const std::string& t : token_strs) a.push_back(json::string(t));
    strs = std::move(a);
  }
  return json::serialize(json::object{{"tokens", std::move(tokens)},
                                      {"count", ids.size()},
                                      {"max_model_len", max_model_len},
                                      {"token_strs", std::move(strs)}});
}

std::string detokenize_response(std::string_view text) {
  return json::serialize(json::object{{"content", text}, {"prompt", text}});
}

}  // namespace zl::api
