#include "api/tool_formats.h"

#include <algorithm>
#include <boost/json/parse.hpp>

#include "api/json_util.h"
#include "api/tool_calls.h"
#include "core/json_text.h"
#include "core/utf8.h"

namespace zl::api::tool_formats {
namespace json = boost::json;
namespace {

constexpr std::string_view kMistralArgs = "[ARGS]";
constexpr std::string_view kMistralCallId = "[CALL_ID]";
constexpr std::string_view kQwenClose = "</tool_call>";
constexpr std::string_view kHarmonyCall = "<|call|>";
constexpr std::string_view kHarmonyMessage = "<|message|>";
constexpr std::string_view kDeepSeekCallsEnd = "<｜tool▁calls▁end｜>";
constexpr std::string_view kDeepSeekCallBegin = "<｜tool▁call▁begin｜>";
constexpr std::string_view kDeepSeekCallEnd = "<｜tool▁call▁end｜>";
constexpr std::string_view kDeepSeekSep = "<｜tool▁sep｜>";

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_json_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_json_space(s.back())) s.remove_suffix(1);
  return s;
}

std::optional<json::value> parse_json(std::string_view text) {
  boost::system::error_code ec;
  json::parse_options opts;
  opts.max_depth = kMaxJsonDepth;
  json::value v = json::parse(text, ec, json::storage_ptr(), opts);
  if (ec) return std::nullopt;
  return v;
}

// Arguments as a compact JSON object: an object, or a JSON string holding one.
std::optional<std::string> arguments_text(const json::value* v) {
  if (!v || v->is_null()) return std::string("{}");
  if (v->is_object()) return json_text(*v);
  if (v->is_string()) {
    auto inner = parse_json(v->get_string());
    if (inner && inner->is_object()) return json_text(*inner);
  }
  return std::nullopt;
}

// [{"name": …, "arguments"|"parameters": {…}}, …] or one such object.
std::optional<std::vector<BlockCall>> json_calls(std::string_view text, bool* bad_json) {
  std::optional<json::value> v = parse_json(trim(text));
  if (!v) {
    *bad_json = true;
    return std::nullopt;
  }
  json::array one;
  const json::array* list = v->if_array();
  if (!list) {
    if (!v->is_object()) return std::nullopt;
    one.push_back(*v);
    list = &one;
  }
  std::vector<BlockCall> calls;
  for (const json::value& item : *list) {
    const json::object* o = item.if_object();
    if (!o) return std::nullopt;
    const json::value* name = o->if_contains("name");
    if (!name || !name->is_string()) return std::nullopt;
    const json::value* args = o->if_contains("arguments");
    if (!args) args = o->if_contains("parameters");
    std::optional<std::string> a = arguments_text(args);
    if (!a) return std::nullopt;
    calls.push_back({std::string(name->get_string()), std::move(*a)});
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

// One call whose name and arguments are apart (Mistral [ARGS], harmony,
// DeepSeek V3.1).
std::optional<std::vector<BlockCall>> named_call(std::string_view name, std::string_view args, bool* bad_json) {
  name = trim(name);
  if (name.empty()) return std::nullopt;
  std::optional<json::value> v = parse_json(trim(args));
  if (!v) {
    *bad_json = true;
    return std::nullopt;
  }
  if (!v->is_object()) return std::nullopt;
  return std::vector<BlockCall>{{std::string(name), json_text(*v)}};
}

std::optional<std::vector<BlockCall>> mistral(std::string_view block, bool* bad_json) {
  const std::string_view t = trim(block);
  if (t.starts_with('[')) return json_calls(t, bad_json);
  const size_t args = block.find(kMistralArgs);
  if (args == std::string_view::npos) return std::nullopt;
  std::string_view name = block.substr(0, args);
  if (const size_t id = name.find(kMistralCallId); id != std::string_view::npos) name = name.substr(0, id);
  return named_call(name, block.substr(args + kMistralArgs.size()), bad_json);
}

// <function=f><parameter=p>\nvalue\n</parameter>…</function>
std::optional<std::vector<BlockCall>> qwen3_coder(std::string_view block, bool* bad_json,
                                                  const StringParams* string_params) {
  std::vector<BlockCall> calls;
  std::string_view rest = trim(block);
  constexpr std::string_view kFn = "<function=", kFnEnd = "</function>", kP = "<parameter=", kPEnd = "</parameter>";
  while (!rest.empty()) {
    if (!rest.starts_with(kFn)) {
      *bad_json = calls.empty();
      return std::nullopt;
    }
    rest.remove_prefix(kFn.size());
    const size_t gt = rest.find('>');
    const size_t fn_end = rest.find(kFnEnd);
    if (gt == std::string_view::npos || fn_end == std::string_view::npos || gt > fn_end) return std::nullopt;
    BlockCall call{std::string(trim(rest.substr(0, gt))), ""};
    if (call.name.empty()) return std::nullopt;
    const std::set<std::string, std::less<>>* strings = nullptr;
    if (string_params) {
      if (auto it = string_params->find(call.name); it != string_params->end()) strings = &it->second;
    }
    std::string_view body = trim(rest.substr(gt + 1, fn_end - gt - 1));
    rest = trim(rest.substr(fn_end + kFnEnd.size()));
    json::object args;
    while (!body.empty()) {
      if (!body.starts_with(kP)) return std::nullopt;
      body.remove_prefix(kP.size());
      const size_t pgt = body.find('>');
      const size_t pend = body.find(kPEnd);
      if (pgt == std::string_view::npos || pend == std::string_view::npos || pgt > pend) return std::nullopt;
      const std::string_view key = trim(body.substr(0, pgt));
      std::string_view value = body.substr(pgt + 1, pend - pgt - 1);
      if (value.starts_with('\n')) value.remove_prefix(1);
      if (value.ends_with('\n')) value.remove_suffix(1);
      body = trim(body.substr(pend + kPEnd.size()));
      if (key.empty()) return std::nullopt;
      std::optional<json::value> v;
      if (!strings || !strings->contains(key)) v = parse_json(value);
      if (v && !v->is_string()) {
        args[key] = std::move(*v);
      } else {
        args[key] = value;
      }
    }
    call.arguments_json = json_text(args);
    calls.push_back(std::move(call));
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

// to=functions.f …<|message|>{…}   (opener ends with "functions.")
std::optional<std::vector<BlockCall>> harmony(std::string_view block, bool* bad_json) {
  const size_t msg = block.find(kHarmonyMessage);
  if (msg == std::string_view::npos) return std::nullopt;
  std::string_view header = block.substr(0, msg);
  size_t name_end = 0;
  while (name_end < header.size() && !is_json_space(header[name_end]) && header[name_end] != '<') ++name_end;
  std::string_view body = block.substr(msg + kHarmonyMessage.size());
  if (body.ends_with(kHarmonyCall)) body.remove_suffix(kHarmonyCall.size());
  return named_call(header.substr(0, name_end), body, bad_json);
}

std::optional<std::vector<BlockCall>> deepseek(std::string_view block, bool* bad_json) {
  std::vector<BlockCall> calls;
  std::string_view rest = trim(block);
  if (rest.ends_with(kDeepSeekCallsEnd)) rest = trim(rest.substr(0, rest.size() - kDeepSeekCallsEnd.size()));
  while (!rest.empty()) {
    if (!rest.starts_with(kDeepSeekCallBegin)) return std::nullopt;
    rest.remove_prefix(kDeepSeekCallBegin.size());
    const size_t end = rest.find(kDeepSeekCallEnd);
    const size_t sep = rest.find(kDeepSeekSep);
    if (end == std::string_view::npos || sep == std::string_view::npos || sep > end) return std::nullopt;
    const std::string_view kind = trim(rest.substr(0, sep));
    std::string_view tail = rest.substr(sep + kDeepSeekSep.size(), end - sep - kDeepSeekSep.size());
    rest = trim(rest.substr(end + kDeepSeekCallEnd.size()));
    std::optional<std::vector<BlockCall>> one;
    if (kind == "function") {
      // R1: the name on its own line, then the arguments in a ```json fence.
      const size_t nl = tail.find('\n');
      if (nl == std::string_view::npos) return std::nullopt;
      const std::string_view name = tail.substr(0, nl);
      std::string_view args = trim(tail.substr(nl + 1));
      if (args.starts_with("```json")) args.remove_prefix(7);
      else if (args.starts_with("```")) args.remove_prefix(3);
      if (args.ends_with("```")) args.remove_suffix(3);
      one = named_call(name, args, bad_json);
    } else {
      one = named_call(kind, tail, bad_json);  // V3.1: name<｜tool▁sep｜>{…}
    }
    if (!one) return std::nullopt;
    calls.push_back(std::move(one->front()));
  }
  if (calls.empty()) return std::nullopt;
  return calls;
}

// ---- Python literals (pythonic calls) ----

class PyParser {
 public:
  explicit PyParser(std::string_view s) : s_(s) {}

  void space() {
    while (i_ < s_.size() && is_json_space(s_[i_])) ++i_;
  }
  bool eat(char c) {
    space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool at_end() {
    space();
    return i_ == s_.size();
  }
  std::optional<std::string> ident() {
    space();
    const size_t start = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_' || s_[i_] == '.' ||
                              s_[i_] == '-')) {
      ++i_;
    }
    if (i_ == start) return std::nullopt;
    return std::string(s_.substr(start, i_ - start));
  }
  std::optional<json::value> value(int depth = 0) {
    if (depth > kMaxJsonDepth) return std::nullopt;
    space();
    if (i_ >= s_.size()) return std::nullopt;
    const char c = s_[i_];
    if (c == '"' || c == '\'') return string();
    if (c == '[' || c == '(') {
      const char close = c == '[' ? ']' : ')';
      ++i_;
      json::array a;
      if (eat(close)) return json::value(std::move(a));
      for (;;) {
        auto v = value(depth + 1);
        if (!v) return std::nullopt;
        a.push_back(std::move(*v));
        if (eat(close)) return json::value(std::move(a));
        if (!eat(',')) return std::nullopt;
        if (eat(close)) return json::value(std::move(a));
      }
    }
    if (c == '{') {
      ++i_;
      json::object o;
      if (eat('}')) return json::value(std::move(o));
      for (;;) {
        auto k = value(depth + 1);
        if (!k || !k->is_string() || !eat(':')) return std::nullopt;
        auto v = value(depth + 1);
        if (!v) return std::nullopt;
        o[k->get_string()] = std::move(*v);
        if (eat('}')) return json::value(std::move(o));
        if (!eat(',')) return std::nullopt;
        if (eat('}')) return json::value(std::move(o));
      }
    }
    for (auto [word, v] : {std::pair<std::string_view, json::value>{"True", true}, {"False", false}, {"None", nullptr},
                           {"true", true}, {"false", false}, {"null", nullptr}}) {
      if (s_.substr(i_).starts_with(word)) {
        i_ += word.size();
        return v;
      }
    }
    // A number, as JSON writes it.
    const size_t start = i_;
    while (i_ < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[i_])) || std::string_view("+-.eE").find(s_[i_]) != std::string_view::npos)) {
      ++i_;
    }
    if (i_ == start) return std::nullopt;
    auto n = parse_json(s_.substr(start, i_ - start));
    if (!n || !n->is_number()) return std::nullopt;
    return n;
  }

 private:
  std::optional<json::value> string() {
    const char q = s_[i_++];
    std::string out;
    while (i_ < s_.size()) {
      const char c = s_[i_++];
      if (c == q) return json::value(std::move(out));
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i_ >= s_.size()) return std::nullopt;
      const char e = s_[i_++];
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case '0': out += '\0'; break;
        case 'u': {
          if (i_ + 4 > s_.size()) return std::nullopt;
          auto cp = parse_json("\"\\u" + std::string(s_.substr(i_, 4)) + "\"");
          if (!cp || !cp->is_string()) return std::nullopt;
          out += cp->get_string();
          i_ += 4;
          break;
        }
        default: out += e; break;  // \\, \', \" and the rest as written
      }
    }
    return std::nullopt;
  }

  std::string_view s_;
  size_t i_ = 0;
};

// [f(a=1, b="x"), g()]   (the block keeps its "["; after <|python_start|>, whitespace first)
std::optional<std::vector<BlockCall>> pythonic(std::string_view opener, std::string_view block, bool* bad_json) {
  (void)opener;
  std::string_view body = trim(block);
  if (body.ends_with("<|python_end|>")) body = trim(body.substr(0, body.size() - 14));
  if (!body.starts_with('[')) {
    *bad_json = true;
    return std::nullopt;
  }
  body.remove_prefix(1);
  PyParser p(body);
  std::vector<BlockCall> calls;
  for (;;) {
    auto name = p.ident();
    if (!name || !p.eat('(')) {
      *bad_json = true;
      return std::nullopt;
    }
    json::object args;
    if (!p.eat(')')) {
      for (;;) {
        auto key = p.ident();
        if (!key || !p.eat('=')) {
          *bad_json = true;
          return std::nullopt;
        }
        auto v = p.value();
        if (!v) {
          *bad_json = true;
          return std::nullopt;
        }
        args[*key] = std::move(*v);
        if (p.eat(')')) break;
        if (!p.eat(',')) {
          *bad_json = true;
          return std::nullopt;
        }
      }
    }
    calls.push_back({std::move(*name), json_text(args)});
    if (p.eat(']')) break;
    if (!p.eat(',')) {
      *bad_json = true;
      return std::nullopt;
    }
  }
  if (!p.at_end()) return std::nullopt;
  return calls;
}

}  // namespace

bool is_block_syntax(ToolSyntax syntax) {
  return syntax != ToolSyntax::kNone && syntax != ToolSyntax::kHermes && syntax != ToolSyntax::kLlama3Json;
}

const std::vector<std::string_view>& openers(ToolSyntax syntax) {
  static const std::vector<std::string_view> kNone, kMistral{"[TOOL_CALLS]"}, kPythonic{"[", "<|python_start|>"},
      kQwen{"<tool_call>"},
      kHarmony{"<|channel|>commentary to=functions.", "<|start|>assistant<|channel|>commentary to=functions.",
               "<|start|>assistant to=functions.", "<|channel|>analysis to=functions."},
      kDeepSeek{"<｜tool▁calls▁begin｜>"}, kGranite{"<|tool_call|>"}, kPhi{"functools"};
  switch (syntax) {
    case ToolSyntax::kMistral: return kMistral;
    case ToolSyntax::kLlama3Pythonic: return kPythonic;
    case ToolSyntax::kQwen3CoderXml: return kQwen;
    case ToolSyntax::kHarmony: return kHarmony;
    case ToolSyntax::kDeepSeek: return kDeepSeek;
    case ToolSyntax::kGranite: return kGranite;
    case ToolSyntax::kPhi: return kPhi;
    default: return kNone;
  }
}

std::string_view forced_opener(ToolSyntax syntax) {
  const std::vector<std::string_view>& o = openers(syntax);
  return o.empty() ? std::string_view() : o.front();
}

bool opens_at_start_only(ToolSyntax syntax) { return syntax == ToolSyntax::kLlama3Pythonic; }
bool kept_opener(std::string_view opener) { return opener == "["; }
bool ends_with_output(ToolSyntax syntax) { return syntax == ToolSyntax::kHarmony || syntax == ToolSyntax::kDeepSeek; }

BlockEnd::State BlockEnd::marker(std::string_view block, std::string_view close) {
  const size_t from = pos_ >= close.size() ? pos_ - close.size() + 1 : 0;
  const size_t at = block.find(close, from);
  pos_ = block.size();
  if (at == std::string_view::npos) return State::kMore;
  end_ = at + close.size();
  return State::kEnd;
}

BlockEnd::State BlockEnd::brackets(std::string_view block, size_t from, bool python) {
  if (pos_ < from) {
    pos_ = from;
    depth_ = 0;
  }
  for (; pos_ < block.size(); ++pos_) {
    const char c = block[pos_];
    if (quote_) {
      if (escape_) {
        escape_ = false;
      } else if (c == '\\') {
        escape_ = true;
      } else if (c == quote_) {
        quote_ = 0;
      }
      continue;
    }
    if (c == '"' || (python && c == '\'')) {
      quote_ = c;
    } else if (c == '[' || c == '{' || c == '(') {
      ++depth_;
    } else if (c == ']' || c == '}' || c == ')') {
      if (--depth_ == 0) {
        end_ = pos_ + 1;
        return State::kEnd;
      }
      if (depth_ < 0) return State::kFail;
    } else if (depth_ == 0 && !is_json_space(c)) {
      return State::kFail;
    }
  }
  return State::kMore;
}

BlockEnd::State BlockEnd::advance(std::string_view block) {
  switch (syntax_) {
    case ToolSyntax::kMistral: {
      // phase 0: deciding the form; 1: JSON array from bracket_from_; 2: name
      // until [ARGS]; 3: the arguments object from bracket_from_.
      if (phase_ == 0) {
        size_t i = 0;
        while (i < block.size() && is_json_space(block[i])) ++i;
        if (i == block.size()) return State::kMore;
        phase_ = block[i] == '[' ? 1 : 2;
        bracket_from_ = i;
        pos_ = 0;
      }
      if (phase_ == 2) {
        const size_t from = pos_ >= kMistralArgs.size() ? pos_ - kMistralArgs.size() + 1 : 0;
        const size_t at = block.find(kMistralArgs, from);
        if (at == std::string_view::npos) {
          pos_ = block.size();
          return State::kMore;
        }
        phase_ = 3;
        bracket_from_ = at + kMistralArgs.size();
        pos_ = 0;
      }
      return brackets(block, bracket_from_, false);
    }
    case ToolSyntax::kLlama3Pythonic: return brackets(block, 0, true);
    case ToolSyntax::kQwen3CoderXml: return marker(block, kQwenClose);
    case ToolSyntax::kHarmony: return marker(block, kHarmonyCall);
    case ToolSyntax::kDeepSeek: return marker(block, kDeepSeekCallsEnd);
    case ToolSyntax::kGranite:
    case ToolSyntax::kPhi: return brackets(block, 0, false);
    default: return State::kFail;
  }
}

namespace {

// A property schema whose values are strings only (as the forced-call
// grammar writes them raw: grammar/json_schema.cc styled_value).
bool is_string_schema(const json::value& s) {
  const json::object* o = s.if_object();
  if (!o) return false;
  json::array values;
  if (const auto* c = o->if_contains("const")) values.push_back(*c);
  if (const auto* e = o->if_contains("enum"); e && e->is_array()) values = e->get_array();
  if (!values.empty()) return std::all_of(values.begin(), values.end(), [](const json::value& v) { return v.is_string(); });
  const json::value* type = o->if_contains("type");
  return type && type->is_string() && type->get_string() == "string";
}

}  // namespace

StringParams string_params_of(const std::vector<ToolDef>& tools) {
  StringParams out;
  for (const ToolDef& t : tools) {
    const std::optional<json::value> v = parse_json(t.json);
    const json::value* fn = v && v->is_object() ? v->get_object().if_contains("function") : nullptr;
    const json::value* params = fn && fn->is_object() ? fn->get_object().if_contains("parameters") : nullptr;
    const json::value* props = params && params->is_object() ? params->get_object().if_contains("properties") : nullptr;
    if (!props || !props->is_object()) continue;
    for (const auto& kv : props->get_object()) {
      if (is_string_schema(kv.value())) out[t.name].emplace(kv.key());
    }
  }
  return out;
}

std::optional<std::vector<BlockCall>> parse_block(ToolSyntax syntax, std::string_view opener, std::string_view block,
                                                  bool* bad_json, const StringParams* string_params) {
  *bad_json = false;
  // The model's bytes may not be UTF-8, which the calls' JSON cannot carry:
  // parsed as sanitized (U+FFFD for what is not).
  std::string clean;
  if (!utf8::is_valid(block)) {
    clean = utf8::sanitize(block);
    block = clean;
  }
  switch (syntax) {
    case ToolSyntax::kMistral: return mistral(block, bad_json);
    case ToolSyntax::kLlama3Pythonic: return pythonic(opener, block, bad_json);
    case ToolSyntax::kQwen3CoderXml: {
      std::string_view b = block;
      if (b.ends_with(kQwenClose)) b.remove_suffix(kQwenClose.size());
      return qwen3_coder(b, bad_json, string_params);
    }
    case ToolSyntax::kHarmony: return harmony(block, bad_json);
    case ToolSyntax::kDeepSeek: return deepseek(block, bad_json);
    case ToolSyntax::kGranite:
    case ToolSyntax::kPhi: return json_calls(block, bad_json);
    default: return std::nullopt;
  }
}

std::optional<std::string> python_literal_to_json(std::string_view text) {
  PyParser p(text);
  auto v = p.value();
  if (!v || !p.at_end()) return std::nullopt;
  return json_text(*v);
}

}  // namespace zl::api::tool_formats
