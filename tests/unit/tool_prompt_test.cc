// Tools in the prompt (api/tool_prompt.h through TokenizerCodec): the exact
// text for ChatML (Hermes) and Llama 3 with tools, calls and results in the
// history; tool_choice none / any / a named tool; the generic rendering of
// the other families; Python-style JSON; and, on real vocabularies, that the
// count is the prompt generation uses, markers as the models' own tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json.hpp>
#include <filesystem>

#include "api/generation.h"
#include "api/tokenizer_codec.h"
#include "api/tool_prompt.h"

namespace zl::api {
namespace {

const ToolDef kWeather{
    "get_weather",
    R"({"type":"function","function":{"name":"get_weather","description":"Current weather","parameters":{"type":"object","properties":{"location":{"type":"string"}},"required":["location"]}}})"};
const ToolDef kTime{"get_time",
                    R"({"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{}}}})"};

// An agent's second round: the user's question, the model's calls, their results.
ChatRequest agent_round(int n_calls = 2) {
  ChatRequest chat;
  chat.tools = {kWeather, kTime};
  chat.tools_json = "[...]";
  ChatMessage calls{.role = "assistant", .content = "Let me check."};
  calls.tool_calls.push_back({"t1", "get_weather", R"({"location":"Paris"})"});
  if (n_calls > 1) calls.tool_calls.push_back({"t2", "get_time", "{}"});
  chat.messages = {{.role = "system", .content = "You are helpful."},
                   {.role = "user", .content = "Weather in Paris?"},
                   calls,
                   {.role = "tool", .content = "sunny, 21 C", .tool_call_id = "t1"}};
  if (n_calls > 1) chat.messages.push_back({.role = "tool", .content = "14:00", .tool_call_id = "t2"});
  return chat;
}

std::string render(ChatTemplateKind kind, const ChatRequest& chat) {
  auto p = TokenizerCodec(nullptr, ChatTemplate(kind)).render(chat);
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  return p.ok() ? p->text() : "";
}

const std::string kHermesSystem =
    "<|im_start|>system\nYou are helpful.\n\n# Tools\n\nYou may call one or more functions to assist with the user "
    "query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
    R"({"type": "function", "function": {"name": "get_weather", "description": "Current weather", "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}}})"
    "\n"
    R"({"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}})"
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call><|im_end|>\n";

// What Qwen2.5's own chat template (the Jinja in ggml-vocab-qwen2.gguf,
// rendered with HF's tojson) gives for agent_round().
TEST(ToolPrompt, ChatmlHermesExactly) {
  EXPECT_EQ(render(ChatTemplateKind::kChatml, agent_round()),
            kHermesSystem +
                "<|im_start|>user\nWeather in Paris?<|im_end|>\n"
                "<|im_start|>assistant\nLet me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                "{\"location\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": "
                "{}}\n</tool_call><|im_end|>\n"
                "<|im_start|>user\n<tool_response>\nsunny, 21 C\n</tool_response>\n<tool_response>\n14:00\n"
                "</tool_response><|im_end|>\n"
                "<|im_start|>assistant\n");
}

TEST(ToolPrompt, ChatmlWithoutSystemOrText) {
  ChatRequest chat;
  chat.tools = {kTime};
  chat.messages = {{.role = "user", .content = "Time?"},
                   {.role = "assistant", .content = "", .tool_calls = {{"t", "get_time", "{}"}}},
                   {.role = "tool", .content = "14:00", .tool_call_id = "t"},
                   {.role = "user", .content = "And now?"}};
  const std::string p = render(ChatTemplateKind::kChatml, chat);
  EXPECT_TRUE(p.starts_with("<|im_start|>system\n# Tools\n\n")) << p;
  EXPECT_TRUE(p.ends_with("<|im_start|>user\nTime?<|im_end|>\n"
                          "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n"
                          "</tool_call><|im_end|>\n"
                          "<|im_start|>user\n<tool_response>\n14:00\n</tool_response><|im_end|>\n"
                          "<|im_start|>user\nAnd now?<|im_end|>\n<|im_start|>assistant\n"))
      << p;
}

TEST(ToolPrompt, ChatmlToolChoice) {
  ChatRequest chat = agent_round();
  const std::string open = render(ChatTemplateKind::kChatml, chat);  // auto
  chat.tool_choice = "tool:get_weather";
  EXPECT_EQ(render(ChatTemplateKind::kChatml, chat),
            open + "<tool_call>\n{\"name\": \"get_weather\", \"arguments\":");
  EXPECT_EQ(plan_tools(chat, ToolSyntax::kHermes).prefill, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\":");
  chat.tool_choice = "any";
  EXPECT_EQ(render(ChatTemplateKind::kChatml, chat), open + "<tool_call>\n{\"name\": \"");
  // A prefill of the client's own wins: the answer continues it, no call forced.
  chat.messages.push_back({.role = "assistant", .content = "Well,"});
  chat.continue_final_message = true;
  EXPECT_TRUE(render(ChatTemplateKind::kChatml, chat).ends_with("<|im_start|>assistant\nWell,"));
  EXPECT_EQ(plan_tools(chat, ToolSyntax::kHermes).prefill, "");
  EXPECT_TRUE(plan_tools(chat, ToolSyntax::kHermes).active());
  // none: no tools offered, nothing parsed; the history stays in the model's format.
  chat = agent_round();
  chat.tool_choice = "none";
  const std::string none = render(ChatTemplateKind::kChatml, chat);
  EXPECT_EQ(none.find("# Tools"), std::string::npos);
  EXPECT_TRUE(none.starts_with("<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\n")) << none;
  EXPECT_NE(none.find("<tool_response>\nsunny, 21 C\n</tool_response>"), std::string::npos);
  EXPECT_FALSE(plan_tools(chat, ToolSyntax::kHermes).active());
}

// Meta's Llama 3.1/3.2 template (ggml-vocab-llama-bpe.gguf) for a one-call
// round, except the tool result, which Meta's prompt guide shows raw (the
// Jinja quotes it: "\"sunny, 21 C\"").
TEST(ToolPrompt, Llama3JsonExactly) {
  const std::string tools_json =
      "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_weather\",\n"
      "        \"description\": \"Current weather\",\n        \"parameters\": {\n            \"type\": \"object\",\n"
      "            \"properties\": {\n                \"location\": {\n                    \"type\": \"string\"\n"
      "                }\n            },\n            \"required\": [\n                \"location\"\n            ]\n"
      "        }\n    }\n}\n\n"
      "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"get_time\",\n"
      "        \"parameters\": {\n            \"type\": \"object\",\n            \"properties\": {}\n        }\n    }\n}\n\n";
  EXPECT_EQ(render(ChatTemplateKind::kLlama3, agent_round(/*n_calls=*/1)),
            "<|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge Date: December 2023\n"
            "Today Date: 26 Jul 2024\n\nYou are helpful.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please respond with a JSON for "
            "a function call with its proper arguments that best answers the given prompt.\n\nRespond in the format "
            "{\"name\": function name, \"parameters\": dictionary of argument name and its value}.Do not use "
            "variables.\n\n" +
                tools_json +
                "Weather in Paris?<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", \"parameters\": "
                "{\"location\": \"Paris\"}}<|eot_id|>"
                "<|start_header_id|>ipython<|end_header_id|>\n\nsunny, 21 C<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ToolPrompt, Llama3ToolsInTheSystemTurnAndForcedCall) {
  ChatRequest chat;
  chat.tools = {kTime};
  // No user turn to open: the tools go to the system turn.
  chat.messages = {{.role = "assistant", .content = "Hello."}, {.role = "user", .content = " Time? "}};
  chat.tool_choice = "tool:get_time";
  const std::string p = render(ChatTemplateKind::kLlama3, chat);
  EXPECT_TRUE(p.starts_with("<|start_header_id|>system<|end_header_id|>\n\nEnvironment: ipython\nCutting Knowledge "
                            "Date: December 2023\nToday Date: 26 Jul 2024\n\nYou have access to the following functions. "
                            "To call a function, please respond with JSON for a function call.Respond in the format"))
      << p;
  EXPECT_NE(p.find("\"name\": \"get_time\",\n"), std::string::npos) << p;
  EXPECT_TRUE(p.ends_with("}\n\n<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
                          "<|start_header_id|>user<|end_header_id|>\n\nTime?<|eot_id|>"
                          "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_time\", \"parameters\":"))
      << p;
  // Several calls in one turn: joined by "; " (Meta's template takes one); the text is not rendered.
  chat = agent_round(2);
  const std::string two = render(ChatTemplateKind::kLlama3, chat);
  EXPECT_NE(two.find("<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", \"parameters\": "
                     "{\"location\": \"Paris\"}}; {\"name\": \"get_time\", \"parameters\": {}}<|eot_id|>"),
            std::string::npos)
      << two;
  EXPECT_EQ(two.find("Let me check."), std::string::npos);
  EXPECT_NE(two.find("<|start_header_id|>ipython<|end_header_id|>\n\n14:00<|eot_id|>"), std::string::npos);
}

TEST(ToolPrompt, OtherFamiliesKeepTheGenericRendering) {
  ChatRequest chat = agent_round(1);
  chat.tools_json = R"([{"name":"get_weather"}])";
  chat.tool_choice = "any";
  const std::string p = render(ChatTemplateKind::kPhi3, chat);
  EXPECT_EQ(p,
            "<|system|>\nYou are helpful.\n\nTools available (JSON): [{\"name\":\"get_weather\"}]\nTool choice: any<|end|>\n"
            "<|user|>\nWeather in Paris?<|end|>\n"
            "<|assistant|>\nLet me check.\n[tool call get_weather] {\"location\":\"Paris\"}<|end|>\n"
            "<|user|>\n[tool result t1] sunny, 21 C<|end|>\n<|assistant|>\n");
  EXPECT_FALSE(plan_tools(chat, tool_syntax_for(ChatTemplateKind::kPhi3)).active());
  for (ChatTemplateKind k : {ChatTemplateKind::kPlain, ChatTemplateKind::kLlama2, ChatTemplateKind::kMistral,
                             ChatTemplateKind::kPhi3, ChatTemplateKind::kGemma, ChatTemplateKind::kZephyr}) {
    EXPECT_EQ(tool_syntax_for(k), ToolSyntax::kNone) << chat_template_name(k);
  }
}

TEST(ToolPrompt, PythonJson) {
  const boost::json::value v = boost::json::parse(
      R"({"a":[1,-2.5,true,null,"x\"y\n\u00e9"],"b":{},"c":[],"d":{"e":1.0,"f":1e-7,"g":1e22,"h":0.0001,"i":123456.75}})");
  EXPECT_EQ(python_json(v),
            "{\"a\": [1, -2.5, true, null, \"x\\\"y\\n\xC3\xA9\"], \"b\": {}, \"c\": [], "
            "\"d\": {\"e\": 1.0, \"f\": 1e-07, \"g\": 1e+22, \"h\": 0.0001, \"i\": 123456.75}}");
  EXPECT_EQ(python_json(boost::json::parse(R"({"a":[1,{"b":2}],"c":{}})"), 4),
            "{\n    \"a\": [\n        1,\n        {\n            \"b\": 2\n        }\n    ],\n    \"c\": {}\n}");
  EXPECT_EQ(python_json_text("not json {"), "not json {");
  // Deeper than Boost.JSON's default of 32 (a request may nest 256 deep).
  std::string deep = "{}", python = "{}";
  for (int i = 0; i < 40; ++i) {
    deep = R"({"type":"object","properties":{"a":)" + deep + "}}";
    python = R"({"type": "object", "properties": {"a": )" + python + "}}";
  }
  EXPECT_EQ(python_json_text(deep), python);
}

TEST(ToolPrompt, NamesAreJsonStrings) {
  // The APIs only admit [a-zA-Z0-9_-] names for tools; names from the
  // history (tool_use blocks, assistant tool_calls) are escaped all the same.
  const ToolCall call{"t", "a\"b\\c", "{}"};
  EXPECT_EQ(hermes_call(call), "<tool_call>\n{\"name\": \"a\\\"b\\\\c\", \"arguments\": {}}\n</tool_call>");
  EXPECT_EQ(llama3_call(call), "{\"name\": \"a\\\"b\\\\c\", \"parameters\": {}}");
  ChatRequest chat;
  chat.tools = {ToolDef{"a\"b", "{}"}};
  chat.tool_choice = "tool:a\"b";
  EXPECT_EQ(plan_tools(chat, ToolSyntax::kHermes).prefill, "<tool_call>\n{\"name\": \"a\\\"b\", \"arguments\":");
  EXPECT_EQ(plan_tools(chat, ToolSyntax::kLlama3Json).prefill, "{\"name\": \"a\\\"b\", \"parameters\":");
  chat.tool_choice = "any";
  EXPECT_EQ(plan_tools(chat, ToolSyntax::kHermes).prefill, "<tool_call>\n{\"name\": \"");
}

// ---- real vocabularies ----

const std::filesystem::path kVocab = std::filesystem::path(ZL_SHARED_DIR) / "vocab";

TEST(ToolPrompt, CountIsThePromptGenerationUsesWithNativeTokens) {
  struct Row {
    const char* file;
    ChatTemplateKind kind;
    const char* marker;     // a token of the tool syntax that must be one id, not pieces
    const char* tool_text;  // what only the tool path renders (twice for agent_round), starting with `marker`
  };
  // Llama: the tool results' ipython turns (every Llama prompt has <|start_header_id|>).
  for (const Row& r : {Row{"ggml-vocab-qwen2.gguf", ChatTemplateKind::kChatml, "<tool_call>", "<tool_call>"},
                       Row{"ggml-vocab-llama-bpe.gguf", ChatTemplateKind::kLlama3, "<|start_header_id|>",
                           "<|start_header_id|>ipython<|end_header_id|>"}}) {
    SCOPED_TRACE(r.file);
    const auto path = kVocab / r.file;
    if (!std::filesystem::exists(path)) GTEST_SKIP() << "SKIPPED: " << path << " not found (../shared absent)";
    auto tok = Tokenizer::load(path.string());
    ASSERT_TRUE(tok.ok()) << tok.status().to_string();
    auto tmpl = ChatTemplate::for_vocab((*tok)->vocab());
    ASSERT_TRUE(tmpl.ok());
    ASSERT_EQ(tmpl->kind(), r.kind);
    TokenizerCodec codec(tok->get(), std::move(tmpl).value());
    for (const char* choice : {"", "any", "tool:get_time", "none"}) {
      ChatRequest chat = agent_round();
      chat.tool_choice = choice;
      auto ids = codec.encode_chat(chat);  // what count_tokens answers
      ASSERT_TRUE(ids.ok());
      auto prepared = prepare_request(chat, codec, /*n_ctx=*/0, "req");
      ASSERT_TRUE(prepared.ok());
      EXPECT_EQ(prepared.value().n_prompt_tokens, static_cast<int64_t>(ids->size())) << choice;
      EXPECT_EQ(prepared.value().request.prompt_ids, *ids) << choice;
      EXPECT_EQ(prepared.value().tools.active(), std::string(choice) != "none");
      // The prompt is the rendered text, with the syntax's markers as single tokens.
      const TokenId marker = (*tok)->vocab().find(r.marker);
      ASSERT_NE(marker, kNoToken);
      const std::vector<TokenId> tool_ids = (*tok)->encode(r.tool_text, {.add_special = false, .parse_special = true});
      ASSERT_FALSE(tool_ids.empty());
      EXPECT_EQ(tool_ids.front(), marker);
      int n_found = 0;
      for (auto it = ids->begin(); (it = std::search(it, ids->end(), tool_ids.begin(), tool_ids.end())) != ids->end(); ++it) {
        ++n_found;
      }
      EXPECT_GE(n_found, 2) << choice;
      EXPECT_TRUE((*tok)->decode(*ids, {.render_special = true}).ends_with(codec.render(chat)->text())) << choice;
    }
  }
}

}  // namespace
}  // namespace zl::api
