#include "api/structured_output.h"

#include <boost/json.hpp>
#include <functional>

#include "api/json_fields.h"
#include "core/json_text.h"
#include "grammar/gbnf.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"

namespace zl::api {
namespace json = boost::json;
using grammar::GrammarBuilder;
using grammar::JsonRules;
using Seq = GrammarBuilder::Seq;

namespace {

// A grammar compiled from a request field, or the 400 on `param`
// (unsupported_value for what the compiler does not support, else invalid_value).
std::shared_ptr<const grammar::Grammar> field_grammar(Result<std::shared_ptr<const grammar::Grammar>> g,
                                                      const std::string& param) {
  if (!g.ok()) {
    const ErrorReason reason =
        g.status().reason() == ErrorReason::kUnsupportedValue ? ErrorReason::kUnsupportedValue : ErrorReason::kInvalidValue;
    throw_field_error(param, g.status().message(), reason);
  }
  return std::move(g).value();
}

// A schema from a request field, compiled: a 400 on `param` when it cannot be.
std::shared_ptr<const grammar::Grammar> compile_field(const json::value& schema, const std::string& param) {
  return field_grammar(grammar::compile_json_schema_value(schema), param);
}

ResponseFormat json_object_format() {
  return ResponseFormat{.kind = ResponseFormat::Kind::kJsonObject, .grammar = grammar::json_object_grammar()};
}

// ---- Tool-call syntaxes ----

// `,` `"key"` `:` ARGS `}` [close], with the JSON whitespace between.
Seq call_tail(JsonRules& j, std::string_view key, uint32_t args, std::string_view close) {
  GrammarBuilder& b = j.builder();
  const auto w = b.ref(j.ws());
  Seq s = {w};
  b.append_literal(s, ",");
  s.push_back(w);
  b.append_literal(s, grammar::json_quote(key));
  s.push_back(w);
  b.append_literal(s, ":");
  s.push_back(w);
  s.push_back(b.ref(args));
  s.push_back(w);
  b.append_literal(s, "}");
  if (!close.empty()) {
    s.push_back(w);
    b.append_literal(s, close);
  }
  return s;
}

// Hermes (<tool_call>{"name": …, "arguments": …}</tool_call>) and Llama 3
// JSON ({"name": …, "parameters": …}) share their shape: an object with the
// name first, then the arguments under `args_key`, then an optional closing tag.
class JsonCallGrammar : public ToolCallGrammar {
 public:
  JsonCallGrammar(std::string marker, std::string marker_rest, std::string args_key, std::string close)
      : marker_(std::move(marker)), marker_rest_(std::move(marker_rest)), args_key_(std::move(args_key)),
        close_(std::move(close)) {}

  std::string open_marker() const override { return marker_; }

  uint32_t after_marker(JsonRules& j, std::span<const ToolArgsRule> tools) const override {
    // marker_rest_: what is left of `{"name"` after the marker.
    GrammarBuilder& b = j.builder();
    const auto w = b.ref(j.ws());
    Seq s;
    if (marker_rest_.starts_with("{")) {
      s.push_back(w);
      b.append_literal(s, "{");
      s.push_back(w);
      b.append_literal(s, "\"name\"");
    }
    s.push_back(w);
    b.append_literal(s, ":");
    s.push_back(w);
    std::vector<Seq> alts;
    for (const ToolArgsRule& t : tools) {
      Seq a = b.literal(grammar::json_quote(t.name));
      const Seq tail = call_tail(j, args_key_, t.rule, close_);
      a.insert(a.end(), tail.begin(), tail.end());
      alts.push_back(std::move(a));
    }
    s.push_back(b.ref(b.rule(std::move(alts))));
    return b.rule({std::move(s)});
  }

  uint32_t after_prefill(JsonRules& j, std::span<const ToolArgsRule> tools, const ToolArgsRule* forced) const override {
    GrammarBuilder& b = j.builder();
    const auto w = b.ref(j.ws());
    if (forced) {
      // The prefill ends `"arguments":`.
      Seq s = {w, b.ref(forced->rule), w};
      b.append_literal(s, "}");
      if (!close_.empty()) {
        s.push_back(w);
        b.append_literal(s, close_);
      }
      return b.rule({std::move(s)});
    }
    // The prefill ends `{"name": "`: the name's characters and its closing quote come first.
    std::vector<Seq> alts;
    for (const ToolArgsRule& t : tools) {
      const std::string quoted = grammar::json_quote(t.name);
      Seq a = b.literal(std::string_view(quoted).substr(1));
      const Seq tail = call_tail(j, args_key_, t.rule, close_);
      a.insert(a.end(), tail.begin(), tail.end());
      alts.push_back(std::move(a));
    }
    return b.rule(std::move(alts));
  }

 private:
  std::string marker_, marker_rest_, args_key_, close_;
};

const JsonCallGrammar kHermes("<tool_call>", "{\"name\"", "arguments", "</tool_call>");
const JsonCallGrammar kLlama3("{\"name\"", "", "parameters", "");

// {"name": "f", "arguments": ARGS} (the name first, as the families write it).
Seq json_call(JsonRules& j, const ToolArgsRule& t) {
  GrammarBuilder& b = j.builder();
  const auto w = b.ref(j.ws());
  Seq s = b.literal("{");
  s.push_back(w);
  b.append_literal(s, "\"name\"");
  s.push_back(w);
  b.append_literal(s, ":");
  s.push_back(w);
  b.append_literal(s, grammar::json_quote(t.name));
  const Seq tail = call_tail(j, "arguments", t.rule, "");
  s.insert(s.end(), tail.begin(), tail.end());
  return s;
}

// ITEM (SEP ITEM)* when `several`, else ITEM; each item one alternative per tool.
uint32_t calls(JsonRules& j, std::span<const ToolArgsRule> tools, bool several, std::string_view sep,
               const std::function<Seq(const ToolArgsRule&)>& call) {
  GrammarBuilder& b = j.builder();
  std::vector<Seq> alts;
  for (const ToolArgsRule& t : tools) alts.push_back(call(t));
  const uint32_t one = b.rule(std::move(alts));
  if (!several) return one;
  Seq more = b.literal(sep);
  more.push_back(b.ref(j.ws()));
  more.push_back(b.ref(one));
  return b.rule({{b.ref(one), b.ref(b.star(more))}});
}

// [ws CALLS ws]: a JSON list of call objects.
Seq json_call_list(JsonRules& j, std::span<const ToolArgsRule> tools, bool several) {
  GrammarBuilder& b = j.builder();
  const auto w = b.ref(j.ws());
  Seq s = {w};
  b.append_literal(s, "[");
  s.push_back(w);
  s.push_back(b.ref(calls(j, tools, several, ",", [&](const ToolArgsRule& t) { return json_call(j, t); })));
  s.push_back(w);
  b.append_literal(s, "]");
  return s;
}

// ---- The block syntaxes (api/tool_formats.h) ----
// Each as the block after its opener: `tools` the callable ones, `several`
// whether the block may hold more than one call (where the syntax has that).

// Granite <|tool_call|>[…], Phi functools[…]: a JSON list of calls.
uint32_t json_list_block(JsonRules& j, std::span<const ToolArgsRule> tools, bool several) {
  return j.builder().rule({json_call_list(j, tools, several)});
}

// Mistral: [TOOL_CALLS]f[ARGS]{…} (Ministral 3, Devstral) or
// [TOOL_CALLS][{"name": "f", "arguments": {…}}] (v0.3): either, as the model writes it.
uint32_t mistral_block(JsonRules& j, std::span<const ToolArgsRule> tools, bool several) {
  GrammarBuilder& b = j.builder();
  std::vector<Seq> alts = {json_call_list(j, tools, several)};
  for (const ToolArgsRule& t : tools) {
    Seq a = b.literal(t.name + "[ARGS]");
    a.push_back(b.ref(t.rule));
    alts.push_back(std::move(a));
  }
  return b.rule(std::move(alts));
}

// Llama 3.2/3.3/4 pythonic: [f(a=1, b="x"), …] (the "[" is the prefill, or
// the block's kept opener); the values are JSON, which reads as the same
// Python literals (true/false/null included).
const grammar::MemberStyle kPythonicArgs{.key_close = "=", .separator = ",", .spaces = true};

uint32_t pythonic_block(JsonRules& j, std::span<const ToolArgsRule> tools, bool several) {
  GrammarBuilder& b = j.builder();
  const auto w = b.ref(j.ws());
  Seq s = {w, b.ref(calls(j, tools, several, ",", [&](const ToolArgsRule& t) {
             Seq c = b.literal(t.name + "(");
             c.insert(c.end(), {b.ref(t.rule), w});
             b.append_literal(c, ")");
             return c;
           })),
           w};
  b.append_literal(s, "]");
  return b.rule({std::move(s)});
}

// Qwen3-Coder / Qwen3.5: <tool_call>\n<function=f>\n<parameter=p>\nvalue\n</parameter>\n</function>\n</tool_call>,
// string values raw; one call per block.
const grammar::MemberStyle kQwenXmlArgs{.key_open = "<parameter=",
                                        .key_close = ">\n",
                                        .value_close = "\n</parameter>\n",
                                        .raw_string_stops = {"</parameter>", "</function>", "</tool_call>"}};

uint32_t qwen_xml_block(JsonRules& j, std::span<const ToolArgsRule> tools, bool) {
  GrammarBuilder& b = j.builder();
  const auto w = b.ref(j.ws());
  std::vector<Seq> alts;
  for (const ToolArgsRule& t : tools) {
    Seq a = {w};
    b.append_literal(a, "<function=" + t.name + ">\n");
    a.push_back(b.ref(t.rule));
    b.append_literal(a, "</function>");
    a.push_back(w);
    b.append_literal(a, "</tool_call>");
    alts.push_back(std::move(a));
  }
  return b.rule(std::move(alts));
}

// gpt-oss harmony, after `to=functions.`: f <|constrain|>json<|message|>{…}<|call|>
// (<|call|> is a stop token: it may end the output instead); one call per block.
uint32_t harmony_block(JsonRules& j, std::span<const ToolArgsRule> tools, bool) {
  GrammarBuilder& b = j.builder();
  const uint32_t constrain = b.optional(b.literal(" <|constrain|>json"));
  const uint32_t call_end = b.optional(b.literal("<|call|>"));
  std::vector<Seq> alts;
  for (const ToolArgsRule& t : tools) {
    Seq a = b.literal(t.name);
    a.push_back(b.ref(constrain));
    b.append_literal(a, "<|message|>");
    a.insert(a.end(), {b.ref(t.rule), b.ref(call_end)});
    alts.push_back(std::move(a));
  }
  return b.rule(std::move(alts));
}

// DeepSeek: <｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{…}\n```<｜tool▁call▁end｜> (R1)
// or <｜tool▁call▁begin｜>f<｜tool▁sep｜>{…}<｜tool▁call▁end｜> (V3.1), then <｜tool▁calls▁end｜>.
uint32_t deepseek_block(JsonRules& j, std::span<const ToolArgsRule> tools, bool several) {
  GrammarBuilder& b = j.builder();
  const auto w = b.ref(j.ws());
  Seq s = {w, b.ref(calls(j, tools, several, "", [&](const ToolArgsRule& t) {
             Seq r1 = b.literal("<｜tool▁call▁begin｜>function<｜tool▁sep｜>" + t.name + "\n```json\n");
             r1.push_back(b.ref(t.rule));
             b.append_literal(r1, "\n```<｜tool▁call▁end｜>");
             Seq v3 = b.literal("<｜tool▁call▁begin｜>" + t.name + "<｜tool▁sep｜>");
             v3.push_back(b.ref(t.rule));
             b.append_literal(v3, "<｜tool▁call▁end｜>");
             return Seq{b.ref(b.rule({std::move(r1), std::move(v3)}))};
           })),
           w};
  b.append_literal(s, "<｜tool▁calls▁end｜>");
  return b.rule({std::move(s)});
}

// A block syntax as a ToolCallGrammar. A forced call's prefill is the
// block's opener (tool_formats::forced_opener): the grammar after it is one
// call, to the named tool or to any; after the opener in free output (an
// `auto` call) the block may hold several calls where the syntax has them.
class BlockCallGrammar final : public ToolCallGrammar {
 public:
  using Block = uint32_t (*)(JsonRules& j, std::span<const ToolArgsRule> tools, bool several);
  // `watch`: the opener can be watched for in free output (not the
  // pythonic "[", which opens a call only at the start of the answer).
  BlockCallGrammar(ToolSyntax syntax, bool watch, Block block, const grammar::MemberStyle* style = nullptr)
      : syntax_(syntax), watch_(watch), block_(block), style_(style) {}

  std::string open_marker() const override {
    return watch_ ? std::string(tool_formats::forced_opener(syntax_)) : std::string();
  }
  uint32_t after_marker(JsonRules& j, std::span<const ToolArgsRule> tools) const override {
    return block_(j, tools, /*several=*/true);
  }
  uint32_t after_prefill(JsonRules& j, std::span<const ToolArgsRule> tools, const ToolArgsRule* forced) const override {
    return block_(j, forced ? std::span<const ToolArgsRule>(forced, 1) : tools, /*several=*/false);
  }
  const grammar::MemberStyle* arguments_style() const override { return style_; }

 private:
  ToolSyntax syntax_;
  bool watch_;
  Block block_;
  const grammar::MemberStyle* style_;
};

const BlockCallGrammar kMistral(ToolSyntax::kMistral, true, mistral_block);
const BlockCallGrammar kPythonic(ToolSyntax::kLlama3Pythonic, false, pythonic_block, &kPythonicArgs);
const BlockCallGrammar kQwenXml(ToolSyntax::kQwen3CoderXml, true, qwen_xml_block, &kQwenXmlArgs);
const BlockCallGrammar kHarmony(ToolSyntax::kHarmony, true, harmony_block);
const BlockCallGrammar kDeepSeek(ToolSyntax::kDeepSeek, true, deepseek_block);
const BlockCallGrammar kGranite(ToolSyntax::kGranite, true, json_list_block);
const BlockCallGrammar kPhi(ToolSyntax::kPhi, true, json_list_block);

// The tools' argument rules in `j`; `strict`: a schema that does not
// compile is a 400, else that tool takes any object.
ApiResult<std::vector<ToolArgsRule>> tool_rules(JsonRules& j, const ChatRequest& chat, bool strict,
                                                const grammar::MemberStyle* style) {
  std::vector<ToolArgsRule> out;
  for (size_t i = 0; i < chat.tools.size(); ++i) {
    const ToolDef& t = chat.tools[i];
    boost::system::error_code ec;
    const json::value def = json::parse(t.json, ec);
    const json::value* params = nullptr;
    if (!ec && def.is_object()) {
      if (const auto* fn = def.get_object().if_contains("function"); fn && fn->is_object()) {
        params = fn->get_object().if_contains("parameters");
      }
    }
    // No parameters given: the function takes none (OpenAI's reading of an
    // omitted "parameters"); the arguments are {}.
    static const json::value kNoParameters = json::parse(R"({"type":"object","properties":{},"additionalProperties":false})");
    if (!params || params->is_null()) params = &kNoParameters;
    // Any arguments: a JSON object, or any members in the syntax's style.
    uint32_t rule = style ? *grammar::add_json_schema_members(j, json::object(), *style) : j.object();
    {
      Result<uint32_t> r = style ? grammar::add_json_schema_members(j, *params, *style) : grammar::add_json_schema(j, *params);
      if (r.ok()) {
        rule = *r;
      } else if (strict) {
        return ApiError{.reason = r.status().reason() == ErrorReason::kUnsupportedValue ? ErrorReason::kUnsupportedValue
                                                                                         : ErrorReason::kInvalidValue,
                        .message = "tool '" + t.name + "': " + r.status().message(),
                        .param = "tools[" + std::to_string(i) + "]"};
      }
    }
    out.push_back({.name = t.name, .rule = rule});
  }
  return out;
}

ApiResult<std::shared_ptr<const grammar::Grammar>> build(GrammarBuilder& b, uint32_t root) {
  Result<grammar::Grammar> g = b.build(root);
  if (!g.ok()) return ApiError{.reason = ErrorReason::kInvalidValue, .message = g.status().message(), .param = "tools"};
  return std::make_shared<const grammar::Grammar>(std::move(g).value());
}

ApiResult<std::optional<GrammarConstraint>> tool_constraint(const ChatRequest& chat, const ToolPlan& tools) {
  const ToolCallGrammar* syntax = tool_call_grammar(tools.syntax);
  if (!syntax) return std::optional<GrammarConstraint>();
  const bool forced = !tools.prefill.empty();
  GrammarBuilder b;
  JsonRules j(b);
  ApiResult<std::vector<ToolArgsRule>> rules = tool_rules(j, chat, /*strict=*/forced, syntax->arguments_style());
  if (!rules.ok()) return rules.error();
  // A forced call is the whole answer: once it is complete only the end may
  // follow (stop_reason tool_use), not free text after it.
  GrammarConstraint c{.end_when_complete = forced};
  c.identity = "tools\n" + std::to_string(static_cast<int>(tools.syntax)) + "\n" + chat.tool_choice + "\n" + chat.tools_json;
  for (const ToolDef& t : chat.tools) c.identity += "\n" + t.json;
  if (!syntax->open_marker().empty()) {
    ApiResult<std::shared_ptr<const grammar::Grammar>> g = build(b, syntax->after_marker(j, rules.value()));
    if (!g.ok()) return g.error();
    c.trigger = syntax->open_marker();
    c.after_trigger = g.value();
  }
  if (forced) {
    const ToolArgsRule* named = nullptr;
    if (chat.tool_choice.starts_with("tool:")) {
      for (const ToolArgsRule& t : rules.value()) {
        if (t.name == std::string_view(chat.tool_choice).substr(5)) named = &t;
      }
    }
    ApiResult<std::shared_ptr<const grammar::Grammar>> g = build(b, syntax->after_prefill(j, rules.value(), named));
    if (!g.ok()) return g.error();
    c.start = g.value();
  }
  if (!c.start && !c.after_trigger) return std::optional<GrammarConstraint>();
  return std::optional<GrammarConstraint>(std::move(c));
}

}  // namespace

void parse_openai_response_format(const json::object& o, ChatRequest* r) {
  const auto* f = find_field(o, "response_format");
  if (!f) return;
  const auto& rf = json_object(*f, "response_format");
  const std::string type = json_string(require_field(rf, "type", "response_format.type"), "response_format.type");
  if (type == "text") return;
  if (type == "json_object") {
    r->response_format = json_object_format();
    return;
  }
  if (type != "json_schema") {
    throw_field_error("response_format.type", "must be 'text', 'json_object' or 'json_schema'", ErrorReason::kInvalidValue);
  }
  const auto& js = json_object(require_field(rf, "json_schema", "response_format.json_schema"), "response_format.json_schema");
  ResponseFormat out{.kind = ResponseFormat::Kind::kJsonSchema};
  if (const auto* n = find_field(js, "name")) out.name = json_string(*n, "response_format.json_schema.name");
  if (const auto* s = find_field(js, "strict")) json_bool(*s, "response_format.json_schema.strict");
  const auto* schema = find_field(js, "schema");
  if (!schema) {  // no schema: any JSON object, as json_object
    r->response_format = json_object_format();
    return;
  }
  if (!schema->is_object() && !schema->is_bool()) {
    throw_field_error("response_format.json_schema.schema", "must be a JSON Schema (an object)", ErrorReason::kInvalidType);
  }
  out.schema_json = json_text(*schema);
  out.grammar = compile_field(*schema, "response_format.json_schema.schema");
  r->response_format = std::move(out);
}

namespace {

// The guided-decoding fields, in the order the exclusivity error goes by:
// the second one present is the one named.
constexpr const char* kGuidedFields[] = {"guided_json", "guided_regex", "guided_choice",
                                         "guided_grammar", "grammar", "json_schema"};

ResponseFormat json_schema_format(const json::value& schema, const std::string& param) {
  return ResponseFormat{.kind = ResponseFormat::Kind::kJsonSchema,
                        .schema_json = json_text(schema),
                        .grammar = compile_field(schema, param)};
}

// vLLM's guided_json: a JSON Schema, or its JSON text.
ResponseFormat guided_json_format(const json::value& f) {
  json::value parsed;
  const json::value* schema = &f;
  if (f.is_string()) {
    boost::system::error_code ec;
    parsed = json::parse(f.get_string(), ec);
    if (ec) throw_field_error("guided_json", "must be a JSON Schema (an object, or its JSON text)", ErrorReason::kInvalidValue);
    schema = &parsed;
  }
  if (!schema->is_object() && !schema->is_bool()) {
    throw_field_error("guided_json", "must be a JSON Schema (an object, or its JSON text)", ErrorReason::kInvalidType);
  }
  return json_schema_format(*schema, "guided_json");
}

ResponseFormat guided_choice_format(const json::value& f) {
  const auto& arr = json_array(f, "guided_choice");
  std::vector<std::string> choices;
  for (size_t i = 0; i < arr.size(); ++i) choices.push_back(json_string(arr[i], index_param("guided_choice", i)));
  return ResponseFormat{.kind = ResponseFormat::Kind::kChoice,
                        .schema_json = json_text(f),
                        .grammar = field_grammar(grammar::compile_text_choice(choices), "guided_choice")};
}

}  // namespace

void parse_guided_decoding(const json::object& o, ChatRequest* r) {
  const char* field = nullptr;
  const json::value* f = nullptr;
  for (const char* name : kGuidedFields) {
    const auto* v = find_field(o, name);
    if (!v || v->is_null()) continue;
    if (field) throw_field_error(name, std::string("cannot be combined with ") + field, ErrorReason::kInvalidValue);
    field = name, f = v;
  }
  if (!field) return;
  if (r->response_format) throw_field_error(field, "cannot be combined with a response_format", ErrorReason::kInvalidValue);
  const std::string_view name = field;
  if (name == "guided_json") {
    r->response_format = guided_json_format(*f);
  } else if (name == "json_schema") {  // llama-server: the schema itself
    if (!f->is_object()) throw_field_error("json_schema", "must be a JSON Schema (an object)", ErrorReason::kInvalidType);
    r->response_format = json_schema_format(*f, "json_schema");
  } else if (name == "guided_choice") {
    r->response_format = guided_choice_format(*f);
  } else {
    const bool regex = name == "guided_regex";
    ResponseFormat out{.kind = regex ? ResponseFormat::Kind::kRegex : ResponseFormat::Kind::kGrammar};
    out.schema_json = json_string(*f, field);
    if (!regex && out.schema_json.empty()) throw_field_error(field, "must not be empty", ErrorReason::kInvalidValue);
    out.grammar = field_grammar(regex ? grammar::compile_text_regex(out.schema_json) : grammar::compile_gbnf(out.schema_json),
                                field);
    r->response_format = std::move(out);
  }
}

void parse_anthropic_output_format(const json::object& o, ChatRequest* r) {
  const auto* f = find_field(o, "output_format");
  if (!f) return;
  const auto& of = json_object(*f, "output_format");
  const std::string type = json_string(require_field(of, "type", "output_format.type"), "output_format.type");
  if (type != "json_schema") throw_field_error("output_format.type", "must be 'json_schema'", ErrorReason::kInvalidValue);
  const auto& schema = require_field(of, "schema", "output_format.schema");
  if (!schema.is_object() && !schema.is_bool()) {
    throw_field_error("output_format.schema", "must be a JSON Schema (an object)", ErrorReason::kInvalidType);
  }
  r->response_format = ResponseFormat{.kind = ResponseFormat::Kind::kJsonSchema,
                                      .schema_json = json_text(schema),
                                      .grammar = compile_field(schema, "output_format.schema")};
}

const ToolCallGrammar* tool_call_grammar(ToolSyntax syntax) {
  switch (syntax) {
    case ToolSyntax::kHermes: return &kHermes;
    case ToolSyntax::kLlama3Json: return &kLlama3;
    case ToolSyntax::kMistral: return &kMistral;
    case ToolSyntax::kLlama3Pythonic: return &kPythonic;
    case ToolSyntax::kQwen3CoderXml: return &kQwenXml;
    case ToolSyntax::kHarmony: return &kHarmony;
    case ToolSyntax::kDeepSeek: return &kDeepSeek;
    case ToolSyntax::kGranite: return &kGranite;
    case ToolSyntax::kPhi: return &kPhi;
    case ToolSyntax::kNone: return nullptr;
  }
  return nullptr;
}

ApiResult<std::optional<GrammarConstraint>> plan_constraint(const ChatRequest& chat, const ToolPlan& tools,
                                                            const ThinkingPlan& thinking) {
  const bool forced_call = tools.active() && !tools.prefill.empty();
  if (forced_call || (tools.active() && !chat.response_format)) return tool_constraint(chat, tools);
  if (!chat.response_format || !chat.response_format->grammar) return std::optional<GrammarConstraint>();
  const ResponseFormat& rf = *chat.response_format;
  GrammarConstraint c{.end_when_complete = true};
  static constexpr const char* kKinds[] = {"json_object\n", "json_schema\n", "regex\n", "choice\n", "grammar\n"};
  c.identity = kKinds[static_cast<int>(rf.kind)] + rf.schema_json;
  if (thinking.active) {
    c.trigger = std::string(ThinkingFormat::kClose);  // the answer follows the thought
    c.after_trigger = rf.grammar;
    if (!thinking.starts_inside) {
      // A thought is optional here: the JSON may also come first. Nothing
      // constrains the start then; the answer is checked after the thought.
      c.identity += "\nafter-thought";
    }
  } else {
    c.start = rf.grammar;
    if (chat.continue_final_message && !chat.messages.empty()) {
      // The answer continues the client's assistant prefill: the grammar starts past it.
      c.start_prefix = chat.messages.back().content;
      grammar::Matcher m(rf.grammar);
      if (!m.advance(c.start_prefix)) {
        return ApiError{.reason = ErrorReason::kInvalidValue,
                        .message = "the assistant prefill is not the start of a value the response format allows",
                        .param = "messages"};
      }
      c.identity += "\nprefix\n" + c.start_prefix;
    }
  }
  return std::optional<GrammarConstraint>(std::move(c));
}

}  // namespace zl::api
