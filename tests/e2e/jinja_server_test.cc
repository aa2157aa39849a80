// The model's chat template through the Jinja engine, from outside: the 90
// reference renders of ../shared/templates through `zerolayer render` (bytes)
// and through the server (its prompt token count equals the reference
// text's), an Anthropic request rendered exactly as its OpenAI equivalent,
// count_tokens, a template's raise_exception as a 400, and a template that
// does not parse as a startup error naming the line. Needs ../shared.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "support/dates.h"
#include "support/http_client.h"
#include "support/process.h"
#include "support/real_model.h"
#include "tokenizer/tokenizer.h"

namespace zl::test {
namespace {

namespace json = boost::json;

std::string templates_dir() { return shared_dir() + "/templates"; }

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
  return s;
}

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

json::object post(int port, const std::string& target, const std::string& body, int* status) {
  HttpReply r = fetch(port, "POST", target, body, {}, 60000);
  *status = r.status;
  json::error_code ec;
  json::value v = json::parse(r.body, ec);
  return !ec && v.is_object() ? v.get_object() : json::object{};
}

struct Reference {
  json::object expected;
  json::object conversations;
};

const Reference* reference() {
  static const Reference* ref = [] () -> const Reference* {
    if (!file_exists(templates_dir() + "/expected.json")) return nullptr;
    auto* r = new Reference;
    r->expected = json::parse(read_file(templates_dir() + "/expected.json")).as_object();
    r->conversations = json::parse(read_file(templates_dir() + "/conversations.json")).as_object();
    return r;
  }();
  return ref;
}

#define REQUIRE_TEMPLATES()                                                  \
  do {                                                                       \
    REQUIRE_MODEL();                                                         \
    if (!reference()) GTEST_SKIP() << "SKIPPED: " << templates_dir() << " is absent"; \
  } while (0)

std::string body_of(const json::value& conversation, const std::string& extra = "") {
  json::object body = conversation.as_object();
  body["model"] = "m";
  std::string s = json::serialize(body);
  s.pop_back();
  return s + extra + "}";
}

// Dates: expected.json has DATE where the day of rendering was (Apertus
// prints it as 2026-12-01, Llama 3.3 as 01 Dec 2026): today's goes back in.
std::string expected_prompt(const std::string& name, const json::value& want) {
  std::string s = mask_dates(std::string(want.as_string()));
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  char iso[32], day[32], us[32];
  std::strftime(iso, sizeof iso, "%Y-%m-%d", &tm);
  std::strftime(day, sizeof day, "%d %b %Y", &tm);
  std::strftime(us, sizeof us, "%b %d %Y", &tm);
  s = replace_all(std::move(s), "Current date: DATE", std::string("Current date: ") + iso);
  s = replace_all(std::move(s), "Today is DATE", std::string("Today is ") + us);
  return replace_all(std::move(s), "Today Date: DATE", std::string("Today Date: ") + day);
}

// One conversation per template (the unit test jinja_templates_test renders
// all 90 through the same codec; each run here loads the vocabulary).
TEST(JinjaServerTest, RenderPrintsTheReferencePrompts) {
  REQUIRE_TEMPLATES();
  int n = 0;
  for (const auto& [name, per_conv] : reference()->expected) {
    const std::string file = templates_dir() + "/" + std::string(name) + ".jinja";
    for (const auto& [conv, want] : per_conv.as_object()) {
      if (conv != "tool_roundtrip") continue;
      const std::string in = write_temp("req.json", body_of(reference()->conversations.at(conv)));
      const auto r = run_command(zerolayer_bin() + " render --model " + model_path() + " --chat-template-file " +
                                 file + " < " + in);
      EXPECT_EQ(r.exit_code, 0) << name << " / " << conv;
      EXPECT_EQ(mask_dates(r.out), mask_dates(expected_prompt(std::string(name), want))) << name << " / " << conv;
      ++n;
    }
  }
  EXPECT_EQ(n, 18);
}

TEST(JinjaServerTest, ServerPromptsAreTheReferencePrompts) {
  REQUIRE_TEMPLATES();
  auto tok = Tokenizer::load(model_path());
  ASSERT_TRUE(tok.ok());
  for (const auto& [name, per_conv] : reference()->expected) {
    ServerProcess server(real_model_args({"--chat-template-file", templates_dir() + "/" + std::string(name) + ".jinja"}));
    ASSERT_TRUE(server.ok()) << name;
    for (const auto& [conv, want] : per_conv.as_object()) {
      int status = 0;
      json::object reply = post(server.port(), "/v1/chat/completions",
                                body_of(reference()->conversations.at(conv), R"(,"max_tokens":1)"), &status);
      const auto ids = (*tok)->encode(expected_prompt(std::string(name), want), {.add_special = true, .parse_special = true});
      // A prompt past the demo model's 2048-token window is a 400 that counts it.
      const bool too_long = ids.size() >= 2048;
      ASSERT_EQ(status, too_long ? 400 : 200) << name << " / " << conv << ": " << json::serialize(reply);
      const int64_t n_prompt = too_long ? reply.at("error").at("n_prompt_tokens").as_int64()
                                        : reply.at("usage").at("prompt_tokens").as_int64();
      EXPECT_EQ(n_prompt, static_cast<int64_t>(ids.size())) << name << " / " << conv;
    }
  }
}

TEST(JinjaServerTest, AnthropicRequestRendersAsItsOpenAIEquivalent) {
  REQUIRE_TEMPLATES();
  const std::string file = templates_dir() + "/NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja";
  const std::string openai = R"({"model":"m","messages":[{"role":"system","content":"Be brief."},)"
      R"({"role":"user","content":"Convert 10 USD to EUR."},)"
      R"({"role":"assistant","content":"Calling.","tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"convert","arguments":"{\"amount\": 10}"}}]},)"
      R"({"role":"tool","tool_call_id":"toolu_1","content":"9.2 EUR"}],)"
      R"("tools":[{"type":"function","function":{"name":"convert","description":"Convert.","parameters":{"type":"object","properties":{"amount":{"type":"number"}}}}}]})";
  const std::string anthropic = R"({"model":"m","max_tokens":1,"system":"Be brief.","messages":[)"
      R"({"role":"user","content":"Convert 10 USD to EUR."},)"
      R"({"role":"assistant","content":[{"type":"text","text":"Calling."},{"type":"tool_use","id":"toolu_1","name":"convert","input":{"amount":10}}]},)"
      R"({"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"9.2 EUR"}]}],)"
      R"("tools":[{"name":"convert","description":"Convert.","input_schema":{"type":"object","properties":{"amount":{"type":"number"}}}}]})";
  const auto a = run_command(zerolayer_bin() + " render --model " + model_path() + " --chat-template-file " + file +
                             " < " + write_temp("o.json", openai));
  const auto b = run_command(zerolayer_bin() + " render --api anthropic --model " + model_path() +
                             " --chat-template-file " + file + " < " + write_temp("a.json", anthropic));
  ASSERT_EQ(a.exit_code, 0);
  ASSERT_EQ(b.exit_code, 0);
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out.find("<tool_call>\n{\"name\": \"convert\", \"arguments\": {\"amount\": 10}}\n</tool_call>"), std::string::npos)
      << a.out;

  ServerProcess server(real_model_args({"--chat-template-file", file}));
  ASSERT_TRUE(server.ok());
  int status = 0;
  json::object counted = post(server.port(), "/v1/messages/count_tokens", anthropic, &status);
  ASSERT_EQ(status, 200) << json::serialize(counted);
  json::object answered = post(server.port(), "/v1/messages", anthropic, &status);
  ASSERT_EQ(status, 200) << json::serialize(answered);
  EXPECT_EQ(counted.at("input_tokens").as_int64(), answered.at("usage").at("input_tokens").as_int64());
  auto tok = Tokenizer::load(model_path());
  ASSERT_TRUE(tok.ok());
  EXPECT_EQ(counted.at("input_tokens").as_int64(),
            static_cast<int64_t>((*tok)->encode(a.out, {.add_special = true, .parse_special = true}).size()));
}

TEST(JinjaServerTest, RaiseExceptionIsA400WithTheTemplatesMessage) {
  REQUIRE_MODEL();
  const std::string file = write_temp("strict.jinja",
      "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}"
      "{% endif %}{{ m.content }}{% endfor %}");
  ServerProcess server(real_model_args({"--chat-template-file", file}));
  ASSERT_TRUE(server.ok());
  int status = 0;
  json::object e = post(server.port(), "/v1/chat/completions",
                        R"({"model":"m","max_tokens":1,"messages":[{"role":"system","content":"s"},{"role":"user","content":"u"}]})",
                        &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(std::string(e.at("error").at("type").as_string()), "invalid_request_error") << json::serialize(e);
  EXPECT_NE(std::string(e.at("error").at("message").as_string()).find("System role not supported"), std::string::npos);
  e = post(server.port(), "/v1/messages",
           R"({"model":"m","max_tokens":1,"system":"s","messages":[{"role":"user","content":"u"}]})", &status);
  EXPECT_EQ(status, 400);
  EXPECT_EQ(std::string(e.at("error").at("type").as_string()), "invalid_request_error") << json::serialize(e);
  e = post(server.port(), "/v1/chat/completions",
           R"({"model":"m","max_tokens":1,"messages":[{"role":"user","content":"u"}]})", &status);
  EXPECT_EQ(status, 200) << json::serialize(e);
}

TEST(JinjaServerTest, TemplateThatDoesNotParseIsAStartupError) {
  REQUIRE_MODEL();
  const std::string file = write_temp("broken.jinja", "ok\n{% if messages %}\n{{ messages[0].content }");
  const auto r = run_command(zerolayer_bin() + " serve --port 0 --model " + model_path() + " --chat-template-file " +
                             file + " 2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("broken.jinja line 3"), std::string::npos) << r.out;
  const auto render = run_command("echo '{}' | " + zerolayer_bin() + " render --model " + model_path() +
                                  " --chat-template-file " + file + " 2>&1");
  EXPECT_NE(render.exit_code, 0);
  EXPECT_NE(render.out.find("broken.jinja line 3"), std::string::npos) << render.out;
}

}  // namespace
}  // namespace zl::test
