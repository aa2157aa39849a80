// The prefix cache across the turns of an agent conversation, through the
// server on the demo model: a Claude Code-style request (a long system
// prompt and tools), then the next turn (the same system prompt and tools,
// the first answer as an assistant message, one more user message). The
// second request must prefill only what the first did not: its cached
// tokens cover the whole first prompt but the last, partial block. Run with
// each KV cache type (prefix caching does not depend on it). Skipped when
// ../shared is absent.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <string>
#include <vector>

#include "support/http_client.h"
#include "support/json_object.h"
#include "support/json_path.h"
#include "support/process.h"
#include "support/real_model.h"

namespace zl::test {
namespace {

namespace json = boost::json;

constexpr int64_t kBlock = 16;  // the server's default KV block size

ServerProcess& server(const std::string& kv_type) {
  static LazyServers servers;
  return servers.real(kv_type, {"--ctx", "2048", "--kv-type", kv_type});
}

std::string system_prompt() {
  std::string s = "You are a careful assistant that edits stories. Follow the rules below.\n";
  for (int i = 0; i < 24; ++i) {
    s += "Rule " + std::to_string(i) + ": keep the little dog happy and the sun in the sky, and never forget the cat.\n";
  }
  return s;
}

const char* kTools =
    R"("tools":[{"name":"read_file","description":"Read a story file","input_schema":{"type":"object",)"
    R"("properties":{"path":{"type":"string"}},"required":["path"]}},)"
    R"({"name":"write_file","description":"Write a story file","input_schema":{"type":"object",)"
    R"("properties":{"path":{"type":"string"},"text":{"type":"string"}},"required":["path","text"]}}])";

struct Turn {
  int64_t input_tokens = -1, cached_tokens = -1;
  std::string text;
};

Turn call(int port, const std::string& messages) {
  const std::string body = R"({"model":"m","temperature":0,"max_tokens":8,"system":)" + jquote(system_prompt()) +
                           "," + kTools + R"(,"messages":)" + messages + "}";
  HttpReply r = fetch(port, "POST", "/v1/messages", body, {}, 60000);
  EXPECT_EQ(r.status, 200) << r.body;
  Turn t;
  if (r.status != 200) return t;
  json::object o = parse_obj(r.body);
  t.input_tokens = num(at(o, {"usage", "input_tokens"}));
  t.cached_tokens = num(at(o, {"usage", "cache_read_input_tokens"}));
  const json::value* content = at(o, {"content"});
  if (!content || !content->is_array()) return t;
  for (const auto& block : content->as_array()) {
    if (str(at(block.as_object(), {"type"})) == "text") t.text += str(at(block.as_object(), {"text"}));
  }
  return t;
}

class PrefixTurns : public ::testing::TestWithParam<std::string> {};

TEST_P(PrefixTurns, SecondTurnPrefillsOnlyTheNewTokens) {
  REQUIRE_MODEL();
  const int port = server(GetParam()).port();
  ASSERT_GT(port, 0);
  const std::string user1 = R"({"role":"user","content":"Tell me about the dog."})";
  const Turn first = call(port, "[" + user1 + "]");
  ASSERT_GE(first.input_tokens, 0);
  const int64_t n_first = first.input_tokens + first.cached_tokens;
  ASSERT_GT(n_first, 300) << "the system prompt and tools should be long";
  const std::string assistant = R"({"role":"assistant","content":)" + jquote(first.text.empty() ? "ok" : first.text) + "}";
  const Turn second = call(port, "[" + user1 + "," + assistant + R"(,{"role":"user","content":"And the cat?"}])");
  ASSERT_GE(second.input_tokens, 0);
  const int64_t n_second = second.input_tokens + second.cached_tokens;
  EXPECT_GT(n_second, n_first);
  // Every full block of the first prompt is reused (the last prompt token of
  // a request is always computed, hence n_first - 1).
  EXPECT_GE(second.cached_tokens, (n_first - 1) / kBlock * kBlock)
      << "first prompt " << n_first << " tokens, second " << n_second << ", cached " << second.cached_tokens;
  EXPECT_LT(second.input_tokens, n_second - n_first + kBlock + 1);
}

INSTANTIATE_TEST_SUITE_P(KvTypes, PrefixTurns, ::testing::Values("f16", "q8_0"));

}  // namespace
}  // namespace zl::test
