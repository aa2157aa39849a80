// Forced tool calls (tool_choice required / any / a named tool) in every
// block tool-call syntax (api/tool_formats.h): the plan prefills the block's
// opener, and the grammar after it accepts the syntax's canonical call
// (which the same syntax's parser reads back to the same name and
// arguments), refuses plain text, other tools and arguments the schema
// refuses. Also the `auto` grammar after the opener, raw strings in
// Qwen3-Coder XML, and pythonic keyword arguments.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "api/jinja_codec.h"
#include "api/openai/chat_completions.h"
#include "api/structured_output.h"
#include "api/tool_calls.h"
#include "api/tool_formats.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"

namespace zl::test {
namespace {

namespace json = boost::json;
using api::ToolSyntax;

const char* kRequest = R"({"model":"m","messages":[{"role":"user","content":"weather?"}],"tool_choice":"required",
  "tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
    "properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1,"maximum":14},"unit":{"enum":["c","f"]}},
    "required":["city","unit"],"additionalProperties":false}}},
           {"type":"function","function":{"name":"noop","parameters":{"type":"object","properties":{}}}}]})";

struct FormatCase {
  const char* label;
  ToolSyntax syntax;
  // After the prefill: a call to get_weather {"city":"Oslo","days":3,"unit":"c"}, and to noop {}.
  std::vector<std::string> weather;
  std::string noop;
  // The same call with days 30 (outside the schema).
  std::string bad_days;
};

const std::vector<FormatCase>& cases() {
  static const std::vector<FormatCase> kCases = {
      {"mistral",
       ToolSyntax::kMistral,
       {R"(get_weather[ARGS]{"city": "Oslo", "days": 3, "unit": "c"})",
        R"([{"name": "get_weather", "arguments": {"city": "Oslo", "days": 3, "unit": "c"}}])"},
       R"(noop[ARGS]{})",
       R"(get_weather[ARGS]{"city": "Oslo", "days": 30, "unit": "c"})"},
      {"pythonic",
       ToolSyntax::kLlama3Pythonic,
       {R"(get_weather(city="Oslo", days=3, unit="c")])", R"(get_weather(city="Oslo",days=3,unit="c")])"},
       "noop()]",
       R"(get_weather(city="Oslo", days=30, unit="c")])"},
      {"qwen3_coder_xml",
       ToolSyntax::kQwen3CoderXml,
       {"\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n<parameter=days>\n3\n</parameter>\n"
        "<parameter=unit>\nc\n</parameter>\n</function>\n</tool_call>"},
       "\n<function=noop>\n</function>\n</tool_call>",
       "\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n<parameter=days>\n30\n</parameter>\n"
       "<parameter=unit>\nc\n</parameter>\n</function>\n</tool_call>"},
      {"harmony",
       ToolSyntax::kHarmony,
       {R"(get_weather <|constrain|>json<|message|>{"city":"Oslo","days":3,"unit":"c"}<|call|>)",
        R"(get_weather<|message|>{"city":"Oslo","days":3,"unit":"c"})"},
       "noop<|message|>{}<|call|>",
       R"(get_weather <|constrain|>json<|message|>{"city":"Oslo","days":30,"unit":"c"}<|call|>)"},
      {"deepseek",
       ToolSyntax::kDeepSeek,
       {"<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Oslo\", \"days\": 3, \"unit\": "
        "\"c\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        "<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Oslo\", \"days\": 3, \"unit\": "
        "\"c\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
       "<｜tool▁call▁begin｜>noop<｜tool▁sep｜>{}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
       "<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": \"Oslo\", \"days\": 30, \"unit\": "
       "\"c\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
      {"granite",
       ToolSyntax::kGranite,
       {R"([{"name": "get_weather", "arguments": {"city": "Oslo", "days": 3, "unit": "c"}}])"},
       R"([{"name": "noop", "arguments": {}}])",
       R"([{"name": "get_weather", "arguments": {"city": "Oslo", "days": 30, "unit": "c"}}])"},
      {"phi",
       ToolSyntax::kPhi,
       {R"([{"name": "get_weather", "arguments": {"city": "Oslo", "days": 3, "unit": "c"}}])"},
       R"([{"name": "noop", "arguments": {}}])",
       R"([{"name": "get_weather", "arguments": {"city": "Oslo", "days": 30, "unit": "c"}}])"},
  };
  return kCases;
}

bool accepts(const std::shared_ptr<const grammar::Grammar>& g, std::string_view text) {
  grammar::Matcher m(g);
  return m.advance(text) && m.accepting();
}

api::ChatRequest request(std::string_view tool_choice) {
  auto chat = api::openai::parse_chat_request(kRequest);
  EXPECT_TRUE(chat.ok());
  api::ChatRequest r = chat.value();
  r.tool_choice = std::string(tool_choice);
  return r;
}

// The answer `prefill + text` through the syntax's own parser: its one call.
std::optional<api::ToolCall> parse_one(ToolSyntax syntax, const std::string& prefill, std::string_view text) {
  api::ToolCallParser p(syntax, {"get_weather", "noop"}, prefill);
  std::vector<api::AnswerPart> out;
  p.push(text, &out);
  p.finish(&out);
  if (out.size() != 1 || out[0].kind != api::AnswerPart::Kind::kToolCall) return std::nullopt;
  return out[0].call;
}

class ForcedToolFormatTest : public ::testing::TestWithParam<FormatCase> {};

TEST_P(ForcedToolFormatTest, RequiredCallIsTheCanonicalCall) {
  const FormatCase& fc = GetParam();
  const api::ChatRequest chat = request("any");
  const api::ToolPlan plan = api::plan_tools(chat, fc.syntax);
  EXPECT_EQ(plan.prefill, api::tool_formats::forced_opener(fc.syntax));
  ASSERT_FALSE(plan.prefill.empty());
  auto c = api::plan_constraint(chat, plan, api::ThinkingPlan{});
  ASSERT_TRUE(c.ok()) << c.error().message;
  ASSERT_TRUE(c.value() && c.value()->start);
  EXPECT_TRUE(c.value()->end_when_complete);
  const auto& g = c.value()->start;
  for (const std::string& text : fc.weather) {
    EXPECT_TRUE(accepts(g, text)) << text;
    const std::optional<api::ToolCall> call = parse_one(fc.syntax, plan.prefill, text);
    ASSERT_TRUE(call) << text;
    EXPECT_EQ(call->name, "get_weather");
    EXPECT_EQ(json::parse(call->arguments_json), json::parse(R"({"city":"Oslo","days":3,"unit":"c"})")) << text;
  }
  EXPECT_TRUE(accepts(g, fc.noop)) << fc.noop;
  const std::optional<api::ToolCall> noop = parse_one(fc.syntax, plan.prefill, fc.noop);
  ASSERT_TRUE(noop);
  EXPECT_EQ(noop->name, "noop");
  EXPECT_EQ(json::parse(noop->arguments_json), json::parse("{}"));
  // Plain text, a schema-invalid argument, a tool that is not offered.
  grammar::Matcher m(g);
  EXPECT_FALSE(m.advance(std::string_view("Hello! The weather in Oslo is fine.")));
  EXPECT_FALSE(accepts(g, "Sure"));
  EXPECT_FALSE(accepts(g, fc.bad_days)) << fc.bad_days;
  std::string other = fc.noop;
  other.replace(other.find("noop"), 4, "nope");
  EXPECT_FALSE(accepts(g, other)) << other;
  // Nothing but the call: no text after it.
  EXPECT_FALSE(accepts(g, fc.weather[0] + " done"));
}

TEST_P(ForcedToolFormatTest, NamedToolIsTheOnlyCallAllowed) {
  const FormatCase& fc = GetParam();
  const api::ChatRequest chat = request("tool:noop");
  const api::ToolPlan plan = api::plan_tools(chat, fc.syntax);
  ASSERT_EQ(plan.prefill, api::tool_formats::forced_opener(fc.syntax));
  auto c = api::plan_constraint(chat, plan, api::ThinkingPlan{});
  ASSERT_TRUE(c.ok()) << c.error().message;
  ASSERT_TRUE(c.value() && c.value()->start);
  EXPECT_TRUE(accepts(c.value()->start, fc.noop));
  for (const std::string& text : fc.weather) EXPECT_FALSE(accepts(c.value()->start, text)) << text;
  EXPECT_FALSE(accepts(c.value()->start, "ok"));
}

TEST_P(ForcedToolFormatTest, NoneAndAutoKeepFreeText) {
  const FormatCase& fc = GetParam();
  // tool_choice none: no tools in play, no constraint.
  const api::ChatRequest none = request("none");
  const api::ToolPlan none_plan = api::plan_tools(none, fc.syntax);
  EXPECT_FALSE(none_plan.active());
  auto c0 = api::plan_constraint(none, none_plan, api::ThinkingPlan{});
  ASSERT_TRUE(c0.ok());
  EXPECT_FALSE(c0.value());
  // auto: free text from the start; a call the model opens is well-formed.
  const api::ChatRequest chat = request("auto");
  const api::ToolPlan plan = api::plan_tools(chat, fc.syntax);
  EXPECT_TRUE(plan.prefill.empty());
  auto c = api::plan_constraint(chat, plan, api::ThinkingPlan{});
  ASSERT_TRUE(c.ok()) << c.error().message;
  if (fc.syntax == ToolSyntax::kLlama3Pythonic) {  // "[" opens a call only at the start: not watched
    EXPECT_FALSE(c.value());
    return;
  }
  ASSERT_TRUE(c.value());
  EXPECT_FALSE(c.value()->start);
  EXPECT_EQ(c.value()->trigger, api::tool_formats::forced_opener(fc.syntax));
  EXPECT_TRUE(accepts(c.value()->after_trigger, fc.weather[0]));
  EXPECT_FALSE(accepts(c.value()->after_trigger, fc.bad_days));
}

INSTANTIATE_TEST_SUITE_P(Formats, ForcedToolFormatTest, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<FormatCase>& i) { return std::string(i.param.label); });

TEST(ForcedToolFormatDetailTest, QwenXmlStringsAreRawTextWithoutClosingTags) {
  const api::ChatRequest chat = request("tool:get_weather");
  const api::ToolPlan plan = api::plan_tools(chat, ToolSyntax::kQwen3CoderXml);
  auto c = api::plan_constraint(chat, plan, api::ThinkingPlan{});
  ASSERT_TRUE(c.ok() && c.value() && c.value()->start);
  auto call = [](std::string_view city) {
    return "\n<function=get_weather>\n<parameter=city>\n" + std::string(city) +
           "\n</parameter>\n<parameter=unit>\nf\n</parameter>\n</function>\n</tool_call>";
  };
  for (std::string_view city : {"São Paulo", "a < b", "x </b> \"quoted\"\nline two", "</param", ""}) {
    const std::string text = call(city);
    EXPECT_TRUE(accepts(c.value()->start, text)) << text;
    const std::optional<api::ToolCall> parsed = parse_one(ToolSyntax::kQwen3CoderXml, plan.prefill, text);
    ASSERT_TRUE(parsed) << text;
    EXPECT_EQ(json::parse(parsed->arguments_json).at("city"), json::value(city)) << text;
  }
  for (std::string_view city : {"a</parameter>b", "</function>", "x</tool_call>", "\"Oslo\"x</parameter>"}) {
    EXPECT_FALSE(accepts(c.value()->start, call(city))) << city;
  }
  // The required unit is missing.
  EXPECT_FALSE(accepts(c.value()->start,
                       "\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>"));
}

TEST(ForcedToolFormatDetailTest, PythonicStringsAreJsonLiteralsThePythonParserReads) {
  const api::ChatRequest chat = request("tool:get_weather");
  const api::ToolPlan plan = api::plan_tools(chat, ToolSyntax::kLlama3Pythonic);
  ASSERT_EQ(plan.prefill, "[");
  auto c = api::plan_constraint(chat, plan, api::ThinkingPlan{});
  ASSERT_TRUE(c.ok() && c.value() && c.value()->start);
  const std::string text = R"(get_weather(city="a\"b\\c\u00e9\b\f\/", unit="f")])";
  EXPECT_TRUE(accepts(c.value()->start, text));
  const std::optional<api::ToolCall> parsed = parse_one(ToolSyntax::kLlama3Pythonic, plan.prefill, text);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(json::parse(parsed->arguments_json).at("city"), json::value("a\"b\\c\u00e9\b\f/"));
}

TEST(ForcedToolFormatDetailTest, SchemasTheSyntaxCannotWriteAreRefusedWhenForced) {
  // A top-level anyOf cannot be spelled as keyword arguments / XML members:
  // a forced call says so (400 unsupported_value); `auto` takes any members.
  auto chat = api::openai::parse_chat_request(
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"tool_choice":"required",
          "tools":[{"type":"function","function":{"name":"f","parameters":{"anyOf":[{"type":"object"}]}}}]})");
  ASSERT_TRUE(chat.ok());
  for (ToolSyntax s : {ToolSyntax::kLlama3Pythonic, ToolSyntax::kQwen3CoderXml}) {
    auto c = api::plan_constraint(chat.value(), api::plan_tools(chat.value(), s), api::ThinkingPlan{});
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.error().reason, ErrorReason::kUnsupportedValue);
    api::ChatRequest lenient = chat.value();
    lenient.tool_choice = "auto";
    auto a = api::plan_constraint(lenient, api::plan_tools(lenient, s), api::ThinkingPlan{});
    EXPECT_TRUE(a.ok());
  }
  // The JSON syntaxes compile it as JSON.
  auto c = api::plan_constraint(chat.value(), api::plan_tools(chat.value(), ToolSyntax::kGranite), api::ThinkingPlan{});
  EXPECT_TRUE(c.ok());
  // A length bound on a raw XML string cannot be enforced: refused, naming it.
  auto bounded = api::openai::parse_chat_request(
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"tool_choice":"required",
          "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object",
            "properties":{"s":{"type":"string","maxLength":3}}}}}]})");
  ASSERT_TRUE(bounded.ok());
  auto cx = api::plan_constraint(bounded.value(), api::plan_tools(bounded.value(), ToolSyntax::kQwen3CoderXml),
                                 api::ThinkingPlan{});
  ASSERT_FALSE(cx.ok());
  EXPECT_NE(cx.error().message.find("maxLength"), std::string::npos) << cx.error().message;
}

// A forced request with one tool `f` whose parameters are `params` (JSON text; empty: none given).
api::ChatRequest one_tool(const std::string& params) {
  const std::string fn = params.empty() ? R"({"name":"f"})" : R"({"name":"f","parameters":)" + params + "}";
  auto chat = api::openai::parse_chat_request(R"({"model":"m","messages":[{"role":"user","content":"x"}],)"
                                              R"("tool_choice":"required","tools":[{"type":"function","function":)" +
                                              fn + "}]}");
  EXPECT_TRUE(chat.ok());
  return chat.value();
}

TEST(ForcedToolFormatDetailTest, PropertyNamesTheSyntaxCannotWriteAreRefusedWhenForced) {
  // Keyword arguments need identifiers; XML tags cannot hold '>' or a closing tag.
  const std::vector<std::pair<ToolSyntax, std::vector<std::string>>> bad = {
      {ToolSyntax::kLlama3Pythonic, {"citt\u00e0", "a b", "", "1x", "a-b"}},
      {ToolSyntax::kQwen3CoderXml, {"a>b", "a</parameter>", "x\n</function>", ""}}};
  for (const auto& [syntax, names] : bad) {
    for (const std::string& name : names) {
      const api::ChatRequest chat =
          one_tool(R"({"type":"object","properties":{)" + json::serialize(json::string(name)) + R"(:{"type":"boolean"}}})");
      auto c = api::plan_constraint(chat, api::plan_tools(chat, syntax), api::ThinkingPlan{});
      ASSERT_FALSE(c.ok()) << name;
      EXPECT_EQ(c.error().reason, ErrorReason::kUnsupportedValue) << name;
    }
  }
  // Names the syntax writes are fine.
  for (ToolSyntax syntax : {ToolSyntax::kLlama3Pythonic, ToolSyntax::kQwen3CoderXml}) {
    const api::ChatRequest chat = one_tool(R"({"type":"object","properties":{"snake_case_2":{"type":"boolean"}}})");
    EXPECT_TRUE(api::plan_constraint(chat, api::plan_tools(chat, syntax), api::ThinkingPlan{}).ok());
  }
}

TEST(ForcedToolFormatDetailTest, AFunctionWithoutParametersTakesNoArguments) {
  // OpenAI: an omitted "parameters" is a function of no arguments, not one of any.
  const api::ChatRequest chat = one_tool("");
  struct Case {
    ToolSyntax syntax;
    std::string empty, with_arg;
  };
  for (const Case& k : {Case{ToolSyntax::kLlama3Pythonic, "f()]", "f(x=1)]"},
                        Case{ToolSyntax::kQwen3CoderXml, "\n<function=f>\n</function>\n</tool_call>",
                             "\n<function=f>\n<parameter=x>\n1\n</parameter>\n</function>\n</tool_call>"},
                        Case{ToolSyntax::kMistral, "f[ARGS]{}", R"(f[ARGS]{"x": 1})"}}) {
    const api::ToolPlan plan = api::plan_tools(chat, k.syntax);
    auto c = api::plan_constraint(chat, plan, api::ThinkingPlan{});
    ASSERT_TRUE(c.ok()) << c.error().message;
    ASSERT_TRUE(c.value() && c.value()->start);
    EXPECT_TRUE(accepts(c.value()->start, k.empty)) << k.empty;
    EXPECT_FALSE(accepts(c.value()->start, k.with_arg)) << k.with_arg;
  }
}

TEST(ForcedToolFormatDetailTest, NumbersStayFiniteDoubles) {
  // 1e400 parses as infinity, which JSON cannot write back: the grammar
  // allows two exponent digits (and 19 integer digits) at most.
  const api::ChatRequest chat = one_tool(R"({"type":"object","properties":{"n":{"type":"number"}},"required":["n"]})");
  for (ToolSyntax syntax : {ToolSyntax::kLlama3Pythonic, ToolSyntax::kMistral}) {
    const api::ToolPlan plan = api::plan_tools(chat, syntax);
    auto c = api::plan_constraint(chat, plan, api::ThinkingPlan{});
    ASSERT_TRUE(c.ok() && c.value() && c.value()->start);
    const std::string head = syntax == ToolSyntax::kMistral ? R"(f[ARGS]{"n": )" : "f(n=";
    const std::string tail = syntax == ToolSyntax::kMistral ? "}" : ")]";
    for (const char* ok : {"4.95E87", "-1e-99", "1234567890123456789", "0.5"}) {
      EXPECT_TRUE(accepts(c.value()->start, head + ok + tail)) << ok;
    }
    for (const char* bad : {"4.951E878", "1e400", "466E338"}) EXPECT_FALSE(accepts(c.value()->start, head + bad + tail)) << bad;
  }
}

TEST(ForcedToolFormatDetailTest, AnOpenedThoughtIsClosedBeforeTheForcedCall) {
  // A Qwen3.5-like template: XML tool calls, a generation prompt that opens a thought.
  auto t = tmpl::Template::parse(
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
      "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}"
      "{# calls: <tool_call>\n<function=f>\n<parameter=p>\nv\n</parameter>\n</function>\n</tool_call>; "
      "history thoughts end with </think> #}",
      "t.jinja");
  ASSERT_TRUE(t.ok()) << t.status().message();
  const api::JinjaCodec codec(nullptr, std::move(*t), "t.jinja");
  ASSERT_EQ(codec.tool_syntax(), ToolSyntax::kQwen3CoderXml);
  auto forced = codec.render_text(request("any"));
  ASSERT_TRUE(forced.ok()) << forced.status().message();
  EXPECT_TRUE(forced->ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>")) << *forced;
  auto free = codec.render_text(request("auto"));
  ASSERT_TRUE(free.ok());
  EXPECT_TRUE(free->ends_with("<|im_start|>assistant\n<think>\n")) << *free;
}

TEST(ForcedToolFormatDetailTest, TextAvoidingStopsNeverContainsThem) {
  grammar::GrammarBuilder b;
  grammar::JsonRules j(b);
  const uint32_t r = grammar::add_text_avoiding(j, {"</a>", "<<x"});
  auto g = b.build(r);
  ASSERT_TRUE(g.ok());
  auto shared = std::make_shared<const grammar::Grammar>(std::move(g).value());
  for (std::string_view ok : {"", "abc", "</", "</b>", "<a>", "<</a", "< <x", "é"}) EXPECT_TRUE(accepts(shared, ok)) << ok;
  for (std::string_view bad : {"</a>", "x</a>y", "<</a>", "<<x", "a<<<x", "\x01", "\xff"}) {
    EXPECT_FALSE(accepts(shared, bad)) << bad;
  }
}

}  // namespace
}  // namespace zl::test
