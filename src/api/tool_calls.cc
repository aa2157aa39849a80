#include "api/tool_calls.h"

#include <algorithm>
#include <boost/json/parse.hpp>
#include <iterator>

#include "api/json_util.h"
#include "core/json_text.h"

namespace zl::api {
namespace json = boost::json;
namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";

std::string_view ltrim(std::string_view s) {
  while (!s.empty() && is_json_space(s.front())) s.remove_prefix(1);
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

// ---- CallObjectScanner ----

bool CallObjectScanner::feed(char c) {
  const int d0 = json_.depth();
  const JsonScanner::Byte b = json_.feed(c);
  ++n_bytes_;
  if (b == JsonScanner::Byte::kError) return false;
  const int d1 = json_.depth();
  if (d0 == 0) return true;  // the object's `{`, or whitespace after its `}`
  if (d0 == 1 && d1 <= 1 && b == JsonScanner::Byte::kStructural && (c == ',' || c == '}')) {
    if (in_value_) end_member();
    in_value_ = false;
    return true;
  }
  if (!in_value_) {
    if (b == JsonScanner::Byte::kKey) key_ += c;
    if (b == JsonScanner::Byte::kStructural && c == ':') {
      member_ = key_ == "\"name\""         ? Member::kName
                : key_ == "\"arguments\""  ? Member::kArguments
                : key_ == "\"parameters\"" ? Member::kParameters
                                           : Member::kOther;
      key_.clear();
      value_.clear();
      in_value_ = true;
    }
    return true;
  }
  if (b == JsonScanner::Byte::kSpace || member_ == Member::kOther) return true;
  if (value_.empty() && c == '{' && member_ != Member::kName && streamed_.empty() && !name_.empty()) {
    streaming_ = true;
    streamed_name_ = name_;
  }
  value_ += c;
  if (streaming_) streamed_ += c;
  return true;
}

void CallObjectScanner::end_member() {
  switch (member_) {
    case Member::kName:
      name_.clear();
      if (value_.starts_with('"')) {
        if (value_.find('\\') == std::string::npos) {
          name_ = value_.substr(1, value_.size() - 2);
        } else {
          boost::system::error_code ec;
          const json::value v = json::parse(value_, ec);
          if (!ec && v.is_string()) name_ = std::string(v.get_string());
        }
      }
      break;
    case Member::kArguments: last_arguments_ = value_; break;
    case Member::kParameters: last_parameters_ = value_; break;
    case Member::kOther: break;
  }
  if (streaming_) {
    streaming_ = false;
    streamed_done_ = true;
  }
}

// ---- ToolCallParser ----

void ToolCallParser::push(std::string_view delta, std::vector<AnswerPart>* out) {
  if (stopped()) return;
  if (!seed_out_.empty()) {
    out->insert(out->end(), seed_out_.begin(), seed_out_.end());
    seed_out_.clear();
  }
  if (syntax_ == ToolSyntax::kNone || (syntax_ == ToolSyntax::kLlama3Json && mode_ == Mode::kText)) {
    emit_text(delta, out);
    return;
  }
  if (tool_formats::is_block_syntax(syntax_) && mode_ == Mode::kText && answer_started_ &&
      tool_formats::opens_at_start_only(syntax_)) {
    emit_text(delta, out);
    return;
  }
  buf_.append(delta);
  if (tool_formats::is_block_syntax(syntax_)) {
    run_block_syntax(out);
  } else if (syntax_ == ToolSyntax::kHermes) {
    run_hermes(out);
  } else if (mode_ == Mode::kLlamaStart) {
    run_llama_start(out);
  } else {
    run_llama_calls(out);
  }
}

void ToolCallParser::finish(std::vector<AnswerPart>* out) {
  push({}, out);
  if (stopped()) return;
  if (tool_formats::is_block_syntax(syntax_)) return finish_block_syntax(out);
  if (mode_ == Mode::kCall && (syntax_ == ToolSyntax::kHermes || scan_ || n_llama_calls_ == 0)) {
    // Inside a call (Llama 3: inside an object, or nothing but <|python_tag|>).
    count_fallback(ToolFallback::kIncomplete);
    if (call_open_) return abort_call(ToolFallback::kIncomplete, out);
    emit_text(syntax_ == ToolSyntax::kHermes ? call_prefix_ + buf_ : buf_, out);
  } else if (mode_ != Mode::kCall) {
    emit_text(buf_, out);
  }
  // Else Llama 3 between calls: only separators are held.
  buf_.clear();
  call_prefix_.clear();
  scan_.reset();
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
        while (keep > held_ws_ && is_json_space(buf_[keep - 1])) --keep;
        if (keep == held_ws_) keep = 0;
        emit_text(std::string_view(buf_).substr(0, keep), out);
        buf_.erase(0, keep);
        held_ws_ = buf_.size() - partial;
        return;
      }
      size_t text_end = open;
      while (text_end > held_ws_ && is_json_space(buf_[text_end - 1])) --text_end;
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
      while (scanned_ < buf_.size() && is_json_space(buf_[scanned_])) ++scanned_;
      if (scanned_ == buf_.size()) return;
      if (buf_[scanned_] != '{') {
        count_fallback(ToolFallback::kInvalidJson);
        emit_text(call_prefix_, out);
        call_prefix_.clear();
        mode_ = Mode::kText;
        continue;  // what follows the marker is text again
      }
      body_started_ = true;  // scanned_ is at the `{`: no closing marker starts before it
      scan_pos_ = scanned_;
      begin_call();
    }
    if (run_hermes_body(out)) return;
    if (stopped()) return;
  }
}

bool ToolCallParser::run_hermes_body(std::vector<AnswerPart>* out) {
  const size_t close = buf_.find(kClose, scanned_);
  if (close == std::string::npos && buf_.size() >= kClose.size()) {
    // A closing marker can only end in text not seen yet.
    scanned_ = std::max(scanned_, buf_.size() - kClose.size() + 1);
  }
  // The scanner reads what is surely body: up to the closing marker, or short
  // of what may be its start at the end; never past the cap.
  const size_t body_end = close != std::string::npos ? close : buf_.size() - partial_marker_suffix(buf_, kClose);
  const size_t limit = std::min(body_end, kMaxCallBytes);
  while (scan_pos_ < limit && !scan_->failed()) scan_->feed(buf_[scan_pos_++]);
  stream_call(out);
  if (call_open_ && scan_->failed()) {
    count_fallback(ToolFallback::kInvalidJson);
    abort_call(ToolFallback::kInvalidJson, out);
    return false;
  }
  if (close == std::string::npos && scanned_ <= kMaxCallBytes) return true;
  if (close == std::string::npos || close > kMaxCallBytes) {
    // Longer than any call: not one. Its first kMaxCallBytes bytes are
    // text now (a cut the content decides, not the chunking), the rest
    // is parsed as text again.
    count_fallback(ToolFallback::kTooLarge);
    if (call_open_) {
      abort_call(ToolFallback::kTooLarge, out);
      return false;
    }
    emit_text(call_prefix_ + buf_.substr(0, kMaxCallBytes), out);
    buf_.erase(0, kMaxCallBytes);
  } else {
    const std::string_view body = std::string_view(buf_).substr(0, close);
    if (decide_call(body, out)) {
      if (done_) {  // single call: the rest is never emitted
        buf_.clear();
        return false;
      }
    } else if (!stopped()) {
      emit_text(call_prefix_ + std::string(body) + std::string(kClose), out);
    }
    buf_.erase(0, close + kClose.size());
  }
  call_prefix_.clear();
  scan_.reset();
  mode_ = Mode::kText;
  return false;
}

void ToolCallParser::run_llama_start(std::vector<AnswerPart>* out) {
  // buf_[0, start_pos_) matched start_tok_ tokens of the live patterns
  // (bit i: kLlamaStarts[i]); only the token under way is looked at again.
  for (;;) {
    while (start_pos_ < buf_.size() && is_json_space(buf_[start_pos_])) ++start_pos_;
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
  run_llama_calls(out);
}

void ToolCallParser::run_llama_calls(std::vector<AnswerPart>* out) {
  while (scan_pos_ < buf_.size()) {
    if (!scan_) {
      // Between calls: whitespace and ';' separate them, `{` opens the next
      // one; anything else ends the calls (text from here on, not a
      // fallback: prose after calls, unless nothing but <|python_tag|> came before).
      const char c = buf_[scan_pos_];
      if (is_json_space(c) || c == ';') {
        ++scan_pos_;
        continue;
      }
      if (c != '{') {
        if (n_llama_calls_ == 0) count_fallback(ToolFallback::kInvalidJson);
        return llama_give_up(out);
      }
      obj_start_ = scan_pos_;
      begin_call();
    }
    while (scan_pos_ < buf_.size() && !scan_->done() && scan_->size() < kMaxCallBytes) {
      if (!scan_->feed(buf_[scan_pos_++])) break;
    }
    stream_call(out);
    if (scan_->failed() || (!scan_->done() && scan_->size() >= kMaxCallBytes)) {
      const ToolFallback why = scan_->failed() ? ToolFallback::kInvalidJson : ToolFallback::kTooLarge;
      count_fallback(why);
      if (call_open_) return abort_call(why, out);
      return llama_give_up(out);
    }
    if (!scan_->done()) return;  // the object goes on in text not seen yet
    const std::string_view object = std::string_view(buf_).substr(obj_start_, scan_pos_ - obj_start_);
    if (!decide_call(object, out)) {
      if (!stopped()) llama_give_up(out);
      return;
    }
    ++n_llama_calls_;
    if (done_) return buf_.clear();  // single call: the rest is never emitted
    buf_.erase(0, scan_pos_);
    scan_pos_ = 0;
    scan_.reset();
  }
}

void ToolCallParser::llama_give_up(std::vector<AnswerPart>* out) {
  mode_ = Mode::kText;
  std::string_view rest = buf_;
  if (n_llama_calls_ > 0) {
    while (!rest.empty() && (is_json_space(rest.front()) || rest.front() == ';')) rest.remove_prefix(1);
  }
  emit_text(rest, out);
  buf_.clear();
  scan_.reset();
}

void ToolCallParser::begin_call() {
  scan_.emplace();
  call_open_ = false;
  n_args_streamed_ = 0;
}

void ToolCallParser::stream_call(std::vector<AnswerPart>* out) {
  if (!options_.stream_arguments || !scan_) return;
  const std::string_view args = scan_->streamed_args();
  if (!call_open_) {
    const std::string& name = scan_->streamed_name();
    if (args.empty() || std::find(names_.begin(), names_.end(), name) == names_.end()) return;
    call_open_ = true;
    seed_left_ = 0;
    out->push_back(AnswerPart{.kind = AnswerPart::Kind::kToolCallStart, .call = ToolCall{.name = name}});
  }
  if (args.size() > n_args_streamed_) {
    out->push_back(AnswerPart{.kind = AnswerPart::Kind::kToolCallDelta, .text = std::string(args.substr(n_args_streamed_))});
    n_args_streamed_ = args.size();
  }
}

bool ToolCallParser::decide_call(std::string_view body, std::vector<AnswerPart>* out) {
  ToolCall call;
  std::optional<ToolFallback> why = parse_call_text(body, &call);
  if (!why && call_open_) {
    // What was streamed must be the call: the same name, and the arguments
    // it chose (a later "arguments" member, or a second "name", would change it).
    stream_call(out);
    if (call.name != scan_->streamed_name() || !scan_->streamed_args_complete() ||
        call.arguments_json != scan_->streamed_args()) {
      why = ToolFallback::kInvalidCall;
    }
  }
  if (why) {
    count_fallback(*why);
    if (call_open_) abort_call(*why, out);
    return false;
  }
  if (!call_open_) {
    emit_call(std::move(call), out);
    return true;
  }
  emit_call(std::move(call), out);
  out->back().kind = AnswerPart::Kind::kToolCallEnd;
  call_open_ = false;  // over: a marker after it opens nothing until its body begins
  return true;
}

void ToolCallParser::abort_call(ToolFallback reason, std::vector<AnswerPart>* out) {
  out->push_back(AnswerPart{.kind = AnswerPart::Kind::kToolCallAbort, .abort_reason = reason});
  aborted_ = true;
  call_open_ = false;
  buf_.clear();
  scan_.reset();
}

// Other members ("type": "function" before the name, as Llama 3.2 writes
// it) are ignored.
std::optional<ToolFallback> ToolCallParser::parse_call(const json::value& v, ToolCall* call) const {
  if (!v.is_object()) return ToolFallback::kInvalidJson;
  const json::object& o = v.get_object();
  const json::value* name = o.if_contains("name");
  if (!name || !name->is_string()) return ToolFallback::kInvalidCall;
  const json::value* args = o.if_contains("arguments");
  const bool parameters = !args;
  if (!args) args = o.if_contains("parameters");
  if (!args || args->is_null()) {
    call->arguments_json = "{}";
  } else if (args->is_string()) {
    // Some models write the arguments as a JSON string, as OpenAI sends them.
    boost::system::error_code ec;
    const json::value inner = parse_json(args->get_string(), ec);
    if (ec || !inner.is_object()) return ToolFallback::kInvalidCall;
    call->arguments_json = minify_json(args->get_string());
  } else if (args->is_object()) {
    // The model's own text, minified. Boost.JSON's serialization would
    // rewrite numbers (2.15E1 for 21.5, Infinity for 1e400); its verdict
    // still decides: the text is used when it is the same JSON (it is not
    // when a key was written with escapes, "\u0061rguments").
    call->arguments_json.clear();
    if (scan_ && scan_->done()) {
      const std::string& text = parameters ? scan_->last_parameters() : scan_->last_arguments();
      boost::system::error_code ec;
      if (!text.empty() && parse_json(text, ec) == *args && !ec) call->arguments_json = text;
    }
    if (call->arguments_json.empty()) call->arguments_json = json_text(*args);
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
  if (stopped()) return;
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

// ---- block syntaxes (api/tool_formats.h) ----

void ToolCallParser::run_block_syntax(std::vector<AnswerPart>* out) {
  const std::vector<std::string_view>& openers = tool_formats::openers(syntax_);
  while (!stopped()) {
    if (mode_ == Mode::kBlock) {
      const tool_formats::BlockEnd::State state = block_end_->advance(buf_);
      if (state == tool_formats::BlockEnd::State::kEnd) {
        decide_block(block_end_->end(), out);
        continue;
      }
      if (state == tool_formats::BlockEnd::State::kMore && buf_.size() <= kMaxCallBytes) return;
      // Not a block after all (or too long to be one): the opener is text,
      // what follows it is looked at again.
      count_fallback(state == tool_formats::BlockEnd::State::kFail ? ToolFallback::kInvalidJson : ToolFallback::kTooLarge);
      answer_started_ = true;
      mode_ = Mode::kText;
      block_end_.reset();
      emit_text(block_space_, out);
      if (tool_formats::kept_opener(block_opener_)) {
        emit_text(buf_.substr(0, 1), out);
        buf_.erase(0, 1);
      } else {
        emit_text(block_opener_, out);
      }
      if (tool_formats::opens_at_start_only(syntax_)) {
        emit_text(buf_, out);
        buf_.clear();
        return;
      }
      continue;
    }
    // kText: the earliest opener (the longest at the same place).
    size_t at = std::string::npos;
    std::string_view opener;
    if (tool_formats::opens_at_start_only(syntax_)) {
      if (answer_started_) {
        emit_text(buf_, out);
        buf_.clear();
        return;
      }
      const std::string_view rest = ltrim(buf_);
      if (rest.empty()) return;  // leading whitespace: still the start
      bool maybe = false;
      for (std::string_view o : openers) {
        const Match m = token_match(rest, o);
        if (m == Match::kYes && o.size() > opener.size()) {
          opener = o;
          at = buf_.size() - rest.size();
        }
        maybe = maybe || m == Match::kMaybe;
      }
      if (at == std::string::npos) {
        if (maybe) return;
        answer_started_ = true;
        emit_text(buf_, out);
        buf_.clear();
        return;
      }
    } else {
      for (std::string_view o : openers) {
        const size_t p = buf_.find(o);
        if (p != std::string::npos && (p < at || (p == at && o.size() > opener.size()))) {
          at = p;
          opener = o;
        }
      }
    }
    if (at == std::string::npos) {
      // Hold a possible opener's start and the whitespace before it.
      size_t hold = 0;
      for (std::string_view o : openers) hold = std::max(hold, partial_marker_suffix(buf_, o));
      size_t keep = buf_.size() - hold;
      while (keep > 0 && is_json_space(buf_[keep - 1])) --keep;
      if (keep > 0) answer_started_ = true;
      emit_text(std::string_view(buf_).substr(0, keep), out);
      buf_.erase(0, keep);
      return;
    }
    // Text before the block (without the whitespace next to it), then the block.
    size_t text_end = at;
    while (text_end > 0 && is_json_space(buf_[text_end - 1])) --text_end;
    if (text_end > 0) answer_started_ = true;
    emit_text(std::string_view(buf_).substr(0, text_end), out);
    block_space_ = buf_.substr(text_end, at - text_end);
    block_opener_ = std::string(opener);
    buf_.erase(0, tool_formats::kept_opener(opener) ? at : at + opener.size());
    mode_ = Mode::kBlock;
    block_end_.emplace(syntax_);
  }
}

void ToolCallParser::decide_block(size_t end, std::vector<AnswerPart>* out) {
  const std::string block = buf_.substr(0, end);
  buf_.erase(0, end);
  mode_ = Mode::kText;
  block_end_.reset();
  answer_started_ = true;
  bool bad_json = false;
  std::optional<std::vector<tool_formats::BlockCall>> calls =
      tool_formats::parse_block(syntax_, block_opener_, block, &bad_json, options_.string_params.get());
  std::optional<ToolFallback> reason;
  if (!calls) {
    reason = bad_json ? ToolFallback::kInvalidJson : ToolFallback::kInvalidCall;
  } else {
    for (const tool_formats::BlockCall& c : *calls) {
      if (std::find(names_.begin(), names_.end(), c.name) == names_.end()) reason = ToolFallback::kUnknownTool;
    }
  }
  if (reason) {
    count_fallback(*reason);
    emit_text(block_space_, out);
    emit_text((tool_formats::kept_opener(block_opener_) ? "" : block_opener_) + block, out);
    return;
  }
  for (tool_formats::BlockCall& c : *calls) {
    if (stopped()) break;
    emit_call(ToolCall{.name = std::move(c.name), .arguments_json = std::move(c.arguments_json)}, out);
  }
}

void ToolCallParser::finish_block_syntax(std::vector<AnswerPart>* out) {
  if (mode_ == Mode::kBlock) {
    if (tool_formats::ends_with_output(syntax_)) {
      decide_block(buf_.size(), out);
    } else {
      count_fallback(ToolFallback::kIncomplete);
      emit_text(block_space_, out);
      emit_text((tool_formats::kept_opener(block_opener_) ? "" : block_opener_) + buf_, out);
    }
  } else {
    emit_text(buf_, out);
  }
  buf_.clear();
  block_end_.reset();
  mode_ = Mode::kText;
}

}  // namespace zl::api
