#include "api/tool_calls.h"

#include <algorithm>
#include <boost/json/parse.hpp>
#include <boost/json/parser.hpp>
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

enum class Match { kNo, kMaybe, kYes };

// Can `s` (the answer so far, leading whitespace removed, not empty) be the
// start of a Llama 3 call: <|python_tag|> or `{` whitespace `"name"`?
Match llama_call_start(std::string_view s) {
  if (s.starts_with(kPythonTag)) return Match::kYes;
  if (kPythonTag.starts_with(s)) return Match::kMaybe;
  if (s.front() != '{') return Match::kNo;
  constexpr std::string_view kName = "\"name\"";
  const std::string_view rest = ltrim(s.substr(1));
  if (rest.size() >= kName.size()) return rest.starts_with(kName) ? Match::kYes : Match::kNo;
  // All of s after '{' may be whitespace: still undecided.
  return kName.starts_with(rest) ? Match::kMaybe : Match::kNo;
}

}  // namespace

ToolCallParser::ToolCallParser(ToolSyntax syntax, std::vector<std::string> tool_names, std::string_view seed)
    : syntax_(syntax), names_(std::move(tool_names)) {
  if (syntax_ == ToolSyntax::kLlama3Json) mode_ = Mode::kLlamaStart;
  if (!seed.empty()) push(seed, &seed_out_);
}

void ToolCallParser::push(std::string_view delta, std::vector<AnswerPart>* out) {
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
  }
  // kLlama3Json in kCall: the whole rest of the answer is decided at finish().
}

void ToolCallParser::finish(std::vector<AnswerPart>* out) {
  push({}, out);
  if (mode_ == Mode::kCall) {
    const bool accepted = syntax_ == ToolSyntax::kLlama3Json && finish_llama(out);
    if (!accepted) emit_text(call_prefix_ + buf_, out);
  } else {
    emit_text(buf_, out);
  }
  buf_.clear();
  call_prefix_.clear();
  mode_ = Mode::kText;
}

void ToolCallParser::run_hermes(std::vector<AnswerPart>* out) {
  for (;;) {
    if (mode_ == Mode::kText) {
      const size_t open = buf_.find(kOpen);
      if (open == std::string::npos) {
        // Hold a possible start of the marker and the whitespace before it.
        size_t keep = buf_.size() - partial_marker_suffix(buf_, kOpen);
        while (keep > 0 && is_space(buf_[keep - 1])) --keep;
        emit_text(std::string_view(buf_).substr(0, keep), out);
        buf_.erase(0, keep);
        return;
      }
      size_t text_end = open;
      while (text_end > 0 && is_space(buf_[text_end - 1])) --text_end;
      emit_text(std::string_view(buf_).substr(0, text_end), out);
      call_prefix_ = buf_.substr(text_end, open + kOpen.size() - text_end);
      buf_.erase(0, open + kOpen.size());
      mode_ = Mode::kCall;
      scanned_ = 0;
      continue;
    }
    const size_t close = buf_.find(kClose, scanned_);
    if (close == std::string::npos) {
      // A closing marker can only end in text not seen yet.
      scanned_ = buf_.size() >= kClose.size() ? buf_.size() - kClose.size() + 1 : 0;
      return;
    }
    const std::string_view body = std::string_view(buf_).substr(0, close);
    ToolCall call;
    boost::system::error_code ec;
    const json::value v = json::parse(body, ec);
    if (!ec && parse_call(v, &call)) {
      emit_call(std::move(call), out);
    } else {
      emit_text(call_prefix_ + std::string(body) + std::string(kClose), out);
    }
    buf_.erase(0, close + kClose.size());
    call_prefix_.clear();
    mode_ = Mode::kText;
  }
}

void ToolCallParser::run_llama_start(std::vector<AnswerPart>* out) {
  const std::string_view s = ltrim(buf_);
  if (s.empty()) return;
  switch (llama_call_start(s)) {
    case Match::kMaybe: return;
    case Match::kYes: mode_ = Mode::kCall; return;
    case Match::kNo:
      mode_ = Mode::kText;
      emit_text(buf_, out);
      buf_.clear();
      return;
  }
}

bool ToolCallParser::finish_llama(std::vector<AnswerPart>* out) {
  std::string_view s = ltrim(buf_);
  if (s.starts_with(kPythonTag)) s.remove_prefix(kPythonTag.size());
  std::vector<ToolCall> calls;
  for (;;) {
    while (!s.empty() && (is_space(s.front()) || s.front() == ';')) s.remove_prefix(1);
    if (s.empty()) break;
    json::parser p;
    boost::system::error_code ec;
    const size_t n = p.write_some(s.data(), s.size(), ec);
    if (ec) return false;  // incomplete JSON is an error too (a complete parse)
    ToolCall call;
    if (!parse_call(p.release(), &call)) return false;
    calls.push_back(std::move(call));
    s.remove_prefix(n);
  }
  if (calls.empty()) return false;
  for (ToolCall& c : calls) emit_call(std::move(c), out);
  return true;
}

bool ToolCallParser::parse_call(const json::value& v, ToolCall* call) const {
  if (!v.is_object()) return false;
  const json::object& o = v.get_object();
  const json::value* name = o.if_contains("name");
  if (!name || !name->is_string()) return false;
  call->name = std::string(name->get_string());
  if (std::find(names_.begin(), names_.end(), call->name) == names_.end()) return false;
  const json::value* args = o.if_contains("arguments");
  if (!args) args = o.if_contains("parameters");
  if (!args || args->is_null()) {
    call->arguments_json = "{}";
    return true;
  }
  if (args->is_string()) {
    // Some models write the arguments as a JSON string, as OpenAI sends them.
    boost::system::error_code ec;
    const json::value inner = json::parse(args->get_string(), ec);
    if (ec || !inner.is_object()) return false;
    call->arguments_json = json::serialize(inner);
    return true;
  }
  if (!args->is_object()) return false;
  call->arguments_json = json::serialize(*args);
  return true;
}

void ToolCallParser::emit_text(std::string_view text, std::vector<AnswerPart>* out) {
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
  after_call_ = true;
  out->push_back(AnswerPart{.kind = AnswerPart::Kind::kToolCall, .call = std::move(call)});
}

}  // namespace zl::api
