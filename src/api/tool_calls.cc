#include "api/tool_calls.h"

#include <algorithm>
#include <boost/json/parse.hpp>
#include <iterator>

#include "api/json_util.h"
#include <boost/json/serialize.hpp>

namespace zl::api {
namespace json = boost::json;
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string_view ltrim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  return s;
}

// Length of the longest proper prefix of `marker` that `s` ends with.
size_t partial_marker_suffix(std::string_view s, std::string_view marker) {
  for (size_t k = std::min(marker.size() - 1, s.size()); k > 0; --k) {
    if (s.ends_with(marker.substr(0, k))) return k;
  }
  return 0;
}

// JSON from the model, as deep as a request may be.
json::value parse_json(std::string_view text, boost::system::error_code& ec) {
  json::parse_options opts;
  opts.max_depth = kMaxJsonDepth;
  return json::parse(text, ec, json::storage_ptr(), opts);
}

enum class Match { kNo, kMaybe, kYes };

// Does `rest` start with `token` (kYes), or could it still (kMaybe)?
Match token_match(std::string_view rest, std::string_view token) {
  if (rest.starts_with(token)) return Match::kYes;
  return token.starts_with(rest) ? Match::kMaybe : Match::kNo;
}

// How a Llama 3 call's JSON starts: these tokens, whitespace allowed between
// them. Tokens at the same index are equal or neither is a prefix of the other.
struct StartPattern {
  std::string_view tokens[6];
  int n = 0;
};
constexpr StartPattern kLlamaStarts[] = {
    {{"{", "\"name\""}, 2},
    // Llama 3.2 1B/3B often write {"type": "function", "name": …, "parameters": …}.
    {{"{", "\"type\"", ":", "\"function\"", ",", "\"name\""}, 6},
};
constexpr int kNumLlamaStarts = static_cast<int>(std::size(kLlamaStarts));

}  // namespace

std::string_view tool_fallback_name(ToolFallback reason) {
  switch (reason) {
    case ToolFallback::kInvalidJson: return "invalid_json";
    case ToolFallback::kInvalidCall: return "invalid_call";
    case ToolFallback::kUnknownTool: return "unknown_tool";
    case ToolFallback::kTooLarge: return "too_large";
    case ToolFallback::kIncomplete: return "incomplete";
  }
  return "invalid_json";
}

ToolCallParser::ToolCallParser(ToolSyntax syntax, std::vector<std::string> tool_names, std::string_view seed,
                               ToolParserOptions options)
    : syntax_(syntax), names_(std::move(tool_names)), options_(options) {
  if (syntax_ == ToolSyntax::kLlama3Json) mode_ = Mode::kLlamaStart;
  seed_left_ = seed.size();
  if (!seed.empty()) push(seed, &seed_out_);
}

void ToolCallParser::push(std::string_view delta, std::vector<AnswerPart>* out) {
  if (done_) return;
  if (!seed_out_.empty()) {
    out->insert(out->end(), seed_out_.begin(), seed_out_.end());
    seed_out_.clear();
  }
  if (syntax_ == ToolSyntax::kNone || (syntax_ == ToolSyntax::kLlama3Json && mode_ == Mode::kText)) {
    emit_text(delta, out);
    return;
  }
  buf_.append(delta);
  if (syntax_ == ToolSyntax::kHermes) {
    run_hermes(out);
  } else if (mode_ == Mode::kLlamaStart) {
    run_llama_start(out);
  } else {
    run_llama_calls(out);
  }
}

void ToolCallParser::finish(std::vector<AnswerPart>* out) {
  push({}, out);
  if (done_) return;
  if (mode_ == Mode::kCall && syntax_ == ToolSyntax::kLlama3Json && depth_ == 0 && !llama_calls_.empty()) {
    for (ToolCall& c : llama_calls_) emit_call(std::move(c), out);
  } else if (mode_ == Mode::kCall && syntax_ == ToolSyntax::kHermes) {
    count_fallback(ToolFallback::kIncomplete);
    emit_text(call_prefix_ + buf_, out);
  } else {
    if (mode_ == Mode::kCall) count_fallback(ToolFallback::kIncomplete);  // Llama 3: inside a call's object
    emit_text(buf_, out);
  }
  llama_calls_.clear();
  buf_.clear();
  call_prefix_.clear();
  mode_ = Mode::kText;
}

void ToolCallParser::run_hermes(std::vector<AnswerPart>* out) {
  for (;;) {
    if (mode_ == Mode::kText) {
      // buf_[0, held_ws_) is whitespace: no marker starts there, and a
      // backwards walk over whitespace that reaches it reaches the start.
      const size_t open = buf_.find(kOpen, held_ws_);
      if (open == std::string::npos) {
        // Hold a possible start of the marker and the whitespace before it.
        const size_t partial = partial_marker_suffix(buf_, kOpen);
        size_t keep = buf_.size() - partial;
        while (keep > held_ws_ && is_space(buf_[keep - 1])) --keep;
        if (keep == held_ws_) keep = 0;
        emit_text(std::string_view(buf_).substr(0, keep), out);
        buf_.erase(0, keep);
        held_ws_ = buf_.size() - partial;
        return;
      }
      size_t text_end = open;
      while (text_end > held_ws_ && is_space(buf_[text_end - 1])) --text_end;
      if (text_end == held_ws_) text_end = 0;
      emit_text(std::string_view(buf_).substr(0, text_end), out);
      call_prefix_ = buf_.substr(text_end, open + kOpen.size() - text_end);
      buf_.erase(0, open + kOpen.size());
      mode_ = Mode::kCall;
      held_ws_ = 0;
      scanned_ = 0;
      body_started_ = false;
      continue;
    }
    if (!body_started_) {
      // A call's body is a JSON object: a marker followed by anything else
      // is prose that mentions the tag, text at once.
      while (scanned_ < buf_.size() && is_space(buf_[scanned_])) ++scanned_;
      if (scanned_ == buf_.size()) return;
      if (buf_[scanned_] != '{') {
        count_fallback(ToolFallback::kInvalidJson);
        emit_text(call_prefix_, out);
        call_prefix_.clear();
        mode_ = Mode::kText;
        continue;  // what follows the marker is text again
      }
      body_started_ = true;  // scanned_ is at the `{`: no closing marker starts before it
    }
    const size_t close = buf_.find(kClose, scanned_);
    if (close == std::string::npos) {
      // A closing marker can only end in text not seen yet.
      if (buf_.size() >= kClose.size()) scanned_ = std::max(scanned_, buf_.size() - kClose.size() + 1);
      if (scanned_ <= kMaxCallBytes) return;
    }
    if (close == std::string::npos || close > kMaxCallBytes) {
      // Longer than any call: not one. Its first kMaxCallBytes bytes are
      // text now (a cut the content decides, not the chunking), the rest
      // is parsed as text again.
      count_fallback(ToolFallback::kTooLarge);
      emit_text(call_prefix_ + buf_.substr(0, kMaxCallBytes), out);
      buf_.erase(0, kMaxCallBytes);
      call_prefix_.clear();
      mode_ = Mode::kText;
      continue;
    }
    const std::string_view body = std::string_view(buf_).substr(0, close);
    ToolCall call;
    if (const std::optional<ToolFallback> why = parse_call_text(body, &call)) {
      count_fallback(*why);
      emit_text(call_prefix_ + std::string(body) + std::string(kClose), out);
    } else {
      emit_call(std::move(call), out);
      if (done_) return buf_.clear();  // single call: the rest is never emitted
    }
    buf_.erase(0, close + kClose.size());
    call_prefix_.clear();
    mode_ = Mode::kText;
  }
}

void ToolCallParser::run_llama_start(std::vector<AnswerPart>* out) {
  // buf_[0, start_pos_) matched start_tok_ tokens of the live patterns
  // (bit i: kLlamaStarts[i]); only the token under way is looked at again.
  for (;;) {
    while (start_pos_ < buf_.size() && is_space(buf_[start_pos_])) ++start_pos_;
    if (start_pos_ == buf_.size()) return;
    const std::string_view rest = std::string_view(buf_).substr(start_pos_);
    if (start_tok_ == 0) {
      if (rest.starts_with(kPythonTag)) {
        scan_pos_ = start_pos_ + kPythonTag.size();
        break;
      }
      if (kPythonTag.starts_with(rest)) return;
    }
    unsigned yes = 0;
    bool maybe = false;
    std::string_view token;
    for (int i = 0; i < kNumLlamaStarts; ++i) {
      if (!(start_live_ & (1u << i))) continue;
      const std::string_view t = kLlamaStarts[i].tokens[start_tok_];
      const Match m = token_match(rest, t);
      if (m == Match::kYes) {
        yes |= 1u << i;
        token = t;
      }
      maybe = maybe || m == Match::kMaybe;
    }
    if (yes == 0) {
      if (maybe) return;
      mode_ = Mode::kText;
      emit_text(buf_, out);
      buf_.clear();
      return;
    }
    if (start_tok_ == 0) scan_pos_ = start_pos_;  // the object's `{`
    start_pos_ += token.size();
    start_live_ = yes;
    ++start_tok_;
    bool complete = false;
    for (int i = 0; i < kNumLlamaStarts; ++i) complete = complete || ((yes & (1u << i)) && kLlamaStarts[i].n == start_tok_);
    if (complete) break;
  }
  mode_ = Mode::kCall;
  depth_ = 0;
  run_llama_calls(out);
}

void ToolCallParser::run_llama_calls(std::vector<AnswerPart>* out) {
  for (; scan_pos_ < buf_.size(); ++scan_pos_) {
    const char c = buf_[scan_pos_];
    if (depth_ == 0) {
      // Between calls: whitespace and ';' separate them; anything else
      // means the answer is not only calls.
      if (is_space(c) || c == ';') continue;
      if (c != '{') {
        // Not JSON after <|python_tag|>, or calls followed by prose: not an
        // answer of calls.
        count_fallback(llama_calls_.empty() ? ToolFallback::kInvalidJson : ToolFallback::kInvalidCall);
        return llama_give_up(out);
      }
      obj_start_ = scan_pos_;
      depth_ = 1;
      continue;
    }
    if (scan_pos_ - obj_start_ >= kMaxCallBytes) {
      count_fallback(ToolFallback::kTooLarge);
      return llama_give_up(out);
    }
    if (in_string_) {
      if (escape_) {
        escape_ = false;
      } else if (c == '\\') {
        escape_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
      continue;
    }
    if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if ((c == '}' || c == ']') && --depth_ == 0) {
      const std::string_view object = std::string_view(buf_).substr(obj_start_, scan_pos_ + 1 - obj_start_);
      ToolCall call;
      if (const std::optional<ToolFallback> why = parse_call_text(object, &call)) {
        count_fallback(*why);
        return llama_give_up(out);
      }
      if (options_.single_call) {
        // The answer ends with this call: it is final now.
        emit_call(std::move(call), out);
        return buf_.clear();
      }
      llama_calls_.push_back(std::move(call));
    }
  }
}

void ToolCallParser::llama_give_up(std::vector<AnswerPart>* out) {
  mode_ = Mode::kText;
  llama_calls_.clear();
  emit_text(buf_, out);
  buf_.clear();
}

// Other members ("type": "function" before the name, as Llama 3.2 writes
// it) are ignored.
std::optional<ToolFallback> ToolCallParser::parse_call(const json::value& v, ToolCall* call) const {
  if (!v.is_object()) return ToolFallback::kInvalidJson;
  const json::object& o = v.get_object();
  const json::value* name = o.if_contains("name");
  if (!name || !name->is_string()) return ToolFallback::kInvalidCall;
  const json::value* args = o.if_contains("arguments");
  if (!args) args = o.if_contains("parameters");
  if (!args || args->is_null()) {
    call->arguments_json = "{}";
  } else if (args->is_string()) {
    // Some models write the arguments as a JSON string, as OpenAI sends them.
    boost::system::error_code ec;
    const json::value inner = parse_json(args->get_string(), ec);
    if (ec || !inner.is_object()) return ToolFallback::kInvalidCall;
    call->arguments_json = json::serialize(inner);
  } else if (args->is_object()) {
    call->arguments_json = json::serialize(*args);
  } else {
    return ToolFallback::kInvalidCall;
  }
  call->name = std::string(name->get_string());
  if (std::find(names_.begin(), names_.end(), call->name) == names_.end()) return ToolFallback::kUnknownTool;
  return std::nullopt;
}

std::optional<ToolFallback> ToolCallParser::parse_call_text(std::string_view text, ToolCall* call) const {
  boost::system::error_code ec;
  const json::value v = parse_json(text, ec);
  if (ec) return ToolFallback::kInvalidJson;
  return parse_call(v, call);
}

void ToolCallParser::emit_text(std::string_view text, std::vector<AnswerPart>* out) {
  if (done_) return;
  // The seed is the start of the output: the first text emitted, unless a
  // call took it.
  const size_t skip = std::min(seed_left_, text.size());
  text.remove_prefix(skip);
  seed_left_ -= skip;
  if (after_call_) {
    text = ltrim(text);
    if (text.empty()) return;
    after_call_ = false;
  }
  if (text.empty()) return;
  if (!out->empty() && out->back().kind == AnswerPart::Kind::kText) {
    out->back().text.append(text);
  } else {
    out->push_back(AnswerPart{.kind = AnswerPart::Kind::kText, .text = std::string(text)});
  }
}

void ToolCallParser::emit_call(ToolCall call, std::vector<AnswerPart>* out) {
  ++n_calls_;
  done_ = options_.single_call;
  after_call_ = true;
  seed_left_ = 0;
  out->push_back(AnswerPart{.kind = AnswerPart::Kind::kToolCall, .call = std::move(call)});
}

}  // namespace zl::api
