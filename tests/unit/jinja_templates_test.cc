// The real chat templates of ../shared/templates rendered through the
// request path (OpenAI body -> ChatRequest -> JinjaCodec) and compared byte
// for byte with llama.cpp's renders (expected.json; dates replaced by DATE).
// SKIPPED without ../shared.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "api/jinja_codec.h"
#include "api/openai/chat_completions.h"
#include "support/dates.h"
#include "support/process.h"

namespace zl {
namespace {

namespace json = boost::json;

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Renders `body` (an OpenAI request) with `jinja`: the prompt, or "ERROR: <message>".
std::string render(const std::string& jinja, const std::string& name, const std::string& body) {
  auto t = tmpl::Template::parse(jinja, name);
  if (!t.ok()) return "PARSE: " + t.status().message();
  auto req = api::openai::parse_chat_request(body);
  if (!req.ok()) return "REQUEST: " + req.error().message;
  api::JinjaCodec codec(nullptr, std::move(*t), name);
  auto r = codec.render(req.value());
  if (!r.ok()) return "ERROR: " + r.status().message();
  return r->text();
}

TEST(JinjaTemplates, EveryTemplateAndConversationMatchesTheReference) {
  const std::string dir = test::shared_dir() + "/templates";
  if (!std::filesystem::exists(dir + "/expected.json")) GTEST_SKIP() << "SKIPPED: " << dir << " is absent (needs ../shared)";
  const json::object expected = json::parse(read_file(dir + "/expected.json")).as_object();
  const json::object conversations = json::parse(read_file(dir + "/conversations.json")).as_object();
  int n_checked = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".jinja") continue;
    const std::string name = entry.path().stem().string();
    const std::string jinja = read_file(entry.path().string());
    ASSERT_TRUE(expected.contains(name)) << name;
    for (const auto& [conv, request] : conversations) {
      json::object body = request.as_object();
      body["model"] = "m";
      std::string got = test::mask_dates(render(jinja, name, json::serialize(body)));
      if (const char* dump = std::getenv("ZL_JINJA_DUMP")) std::ofstream(std::string(dump) + "/" + name + "." + std::string(conv)) << got;
      const json::value* want = expected.at(name).as_object().if_contains(conv);
      ASSERT_TRUE(want) << name << " / " << conv;
      EXPECT_EQ(got, test::mask_dates(std::string(want->as_string()))) << name << " / " << std::string(conv);
      ++n_checked;
    }
  }
  EXPECT_EQ(n_checked, 90);
}

TEST(JinjaTemplates, ToolSyntaxIsDetectedFromTheTemplate) {
  const std::string dir = test::shared_dir() + "/templates";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "SKIPPED: " << dir << " is absent (needs ../shared)";
  using api::ToolSyntax;
  const std::pair<const char*, ToolSyntax> kCases[] = {
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use", ToolSyntax::kHermes},
      {"Qwen-QwQ-32B", ToolSyntax::kHermes},
      {"ibm-granite-granite-4.0", ToolSyntax::kHermes},
      {"meta-llama-Llama-3.3-70B-Instruct", ToolSyntax::kLlama3Json},
      {"Qwen3.5-4B", ToolSyntax::kQwen3CoderXml},  // <function=…><parameter=…>
      {"GLM-4.6", ToolSyntax::kNone},     // <arg_key>
      {"meetkai-functionary-medium-v3.2", ToolSyntax::kNone},
      {"unsloth-mistral-Devstral-Small-2507", ToolSyntax::kMistral},
      {"mistralai-Ministral-3-14B-Reasoning-2512", ToolSyntax::kMistral},
      {"deepseek-ai-DeepSeek-V3.1", ToolSyntax::kDeepSeek},
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B", ToolSyntax::kDeepSeek},
      {"fireworks-ai-llama-3-firefunction-v2", ToolSyntax::kPhi},  // functools[…]
  };
  for (const auto& [name, syntax] : kCases) {
    EXPECT_EQ(api::detect_tool_syntax(read_file(dir + "/" + name + ".jinja")), syntax) << name;
  }
}

}  // namespace
}  // namespace zl
