#include "api/openai/logprobs.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <vector>

#include "api/json_util.h"
#include "core/utf8.h"

namespace zl::api::openai {
namespace {

constexpr float kFloorLogprob = -9999.0f;

void append_bytes(std::string& out, std::string_view piece) {
  out += '[';
  for (size_t i = 0; i < piece.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(static_cast<uint8_t>(piece[i]));
  }
  out += ']';
}

// {"token":…,"logprob":…,"bytes":[…]   (open: the caller may add members)
void append_token(std::string& out, const TokenLogprob& t) {
  out += "{\"token\":";
  append_json_string(out, utf8::sanitize(t.piece));
  out += ",\"logprob\":";
  append_logprob(out, t.logprob);
  out += ",\"bytes\":";
  append_bytes(out, t.piece);
}

int64_t n_chars(std::string_view s) {
  int64_t n = 0;
  for (char c : s) n += !utf8::is_continuation(c);
  return n;
}

}  // namespace

void append_logprob(std::string& out, float logprob) {
  if (!(logprob > kFloorLogprob)) {
    out += "-9999.0";
    return;
  }
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, logprob);
  out.append(buf, r.ptr);
}

void append_chat_logprobs(std::string& out, std::span<const TokenLogprobs> entries) {
  out += '[';
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) out += ',';
    append_token(out, entries[i].chosen);
    out += ",\"top_logprobs\":[";
    for (size_t j = 0; j < entries[i].top.size(); ++j) {
      if (j > 0) out += ',';
      append_token(out, entries[i].top[j]);
      out += '}';
    }
    out += "]}";
  }
  out += ']';
}

void append_completion_logprobs(std::string& out, std::span<const TokenLogprobs> entries, int64_t* text_offset) {
  std::vector<std::string> texts;
  texts.reserve(entries.size());
  for (const TokenLogprobs& e : entries) texts.push_back(utf8::sanitize(e.chosen.piece));
  out += "{\"tokens\":[";
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) out += ',';
    append_json_string(out, texts[i]);
  }
  out += "],\"token_logprobs\":[";
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) out += ',';
    if (std::isnan(entries[i].chosen.logprob)) {
      out += "null";
    } else {
      append_logprob(out, entries[i].chosen.logprob);
    }
  }
  out += "],\"top_logprobs\":[";
  std::vector<std::string> keys;
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) out += ',';
    if (std::isnan(entries[i].chosen.logprob)) {
      out += "null";
      continue;
    }
    out += '{';
    keys.assign(1, texts[i]);
    append_json_string(out, texts[i]);
    out += ':';
    append_logprob(out, entries[i].chosen.logprob);
    for (const TokenLogprob& t : entries[i].top) {
      std::string key = utf8::sanitize(t.piece);
      if (std::find(keys.begin(), keys.end(), key) != keys.end()) continue;
      out += ',';
      append_json_string(out, key);
      out += ':';
      append_logprob(out, t.logprob);
      keys.push_back(std::move(key));
    }
    out += '}';
  }
  out += "],\"text_offset\":[";
  for (size_t i = 0; i < entries.size(); ++i) {
    if (i > 0) out += ',';
    append_json_int(out, *text_offset);
    *text_offset += n_chars(texts[i]);
  }
  out += "]}";
}

}  // namespace zl::api::openai
