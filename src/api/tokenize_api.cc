#include "api/tokenize_api.h"

#include <boost/json.hpp>
#include <limits>

#include "api/json_fields.h"
#include "api/openai/chat_completions.h"
#include "core/json_escape.h"
#include "core/utf8.h"

namespace zl::api {

namespace json = boost::json;

namespace {

bool bool_field(const json::object& o, std::string_view key, bool fallback) {
  const json::value* f = find_field(o, key);
  return f ? json_bool(*f, std::string(key)) : fallback;
}

// A piece as llama-server writes it: the text when it is valid UTF-8, else
// its bytes (a byte-fallback token, half of a character).
void append_piece(const std::string& piece, std::string* out) {
  if (utf8::is_valid(piece)) return append_json_string(*out, piece);
  out->push_back('[');
  for (size_t k = 0; k < piece.size(); ++k) {
    if (k > 0) out->push_back(',');
    out->append(std::to_string(static_cast<unsigned char>(piece[k])));
  }
  out->push_back(']');
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

// Written directly, not as a JSON tree: the answer's memory is its own size
// (~30 bytes a token with pieces), bounded by the body limit times that.
std::string tokenize_response(const TokenizeQuery& q, std::span<const int32_t> ids,
                              std::span<const std::string> pieces, std::span<const std::string> token_strs,
                              int64_t max_model_len) {
  std::string out = "{\"tokens\":[";
  out.reserve(out.size() + ids.size() * (q.with_pieces ? 32 : 8) + 64);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out.push_back(',');
    if (q.with_pieces && i < pieces.size()) {
      out.append("{\"id\":").append(std::to_string(ids[i])).append(",\"piece\":");
      append_piece(pieces[i], &out);
      out.push_back('}');
    } else {
      out.append(std::to_string(ids[i]));
    }
  }
  out.append("],\"count\":").append(std::to_string(ids.size()));
  out.append(",\"max_model_len\":").append(std::to_string(max_model_len)).append(",\"token_strs\":");
  if (!q.token_strs) {
    out.append("null");
  } else {
    out.push_back('[');
    for (size_t i = 0; i < token_strs.size(); ++i) {
      if (i > 0) out.push_back(',');
      append_json_string(out, token_strs[i]);  // (a malformed vocabulary's bytes: U+FFFD)
    }
    out.push_back(']');
  }
  out.push_back('}');
  return out;
}

std::string detokenize_response(std::string_view text) {
  return json::serialize(json::object{{"content", text}, {"prompt", text}});
}

}  // namespace zl::api
