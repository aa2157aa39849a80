// Anthropic context editing through the real server on stories260K
// (../shared/models/stories260K.gguf, served with a 4096-token window): agent-shaped
// conversations (20+ tool round trips with large results, thinking blocks)
// against /v1/messages (streamed and not) and /v1/messages/count_tokens.
// What is checked: the applied_edits report, usage and count_tokens counting
// the edited prompt exactly (the model's own tokenizer), original_input_tokens,
// a prompt over the window that fits once edited, 400s naming the field, and
// the prefix cache across consecutive turns of a growing conversation.
// Skipped, with a message, when ../shared is absent.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cstdio>
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

// One server per process (CTest runs each test in its own), with a 4096-token
// window: the model's tokenizer (512 pieces) spends about a token per two
// characters, so 20+ round trips only fit once edited.
int port() {
  static LazyServers servers;
  return servers.real("main", {"--parallel", "2", "--ctx", "4096"}).port();
}


// A tool result of a few hundred tokens, different for each round trip.
std::string tool_result(int i) {
  std::string s;
  for (int k = 0; k < 6; ++k) {
    s += "Tom found box " + std::to_string(i) + " in the park and Lily saw a big red ball near tree " +
         std::to_string(k) + ". ";
  }
  return s;
}

// The conversation of an agent after n tool round trips (thinking blocks on
// every assistant turn when `thinking`), with `extra` fields.
std::string agent_body(int n, const std::string& extra, bool thinking = false) {
  std::string msgs = R"([{"role":"user","content":"Find the ball."})";
  for (int i = 0; i < n; ++i) {
    const std::string id = "toolu_" + std::to_string(i);
    msgs += R"(,{"role":"assistant","content":[)";
    if (thinking) {
      msgs += R"({"type":"thinking","thinking":"I will look in box )" + std::to_string(i) +
              R"( because the ball may be there.","signature":"c2ln"},)";
    }
    msgs += R"({"type":"text","text":"Let me look."},{"type":"tool_use","id":")" + id +
            R"(","name":"look","input":{"place":"box )" + std::to_string(i) + R"("}}]})";
    msgs += R"(,{"role":"user","content":[{"type":"tool_result","tool_use_id":")" + id + R"(","content":)" +
            jquote(tool_result(i)) + "}]}";
  }
  msgs += "]";
  return R"({"model":"claude-x","temperature":0,"tools":[{"name":"look","description":"Look in a place.",)"
         R"("input_schema":{"type":"object","properties":{"place":{"type":"string"}}}}],"messages":)" +
         msgs + (extra.empty() ? "" : "," + extra) + "}";
}

std::string cm_tools(int64_t trigger, int64_t keep, int64_t clear_at_least = 0) {
  std::string e = R"({"type":"clear_tool_uses_20250919","trigger":{"type":"input_tokens","value":)" +
                  std::to_string(trigger) + R"(},"keep":{"type":"tool_uses","value":)" + std::to_string(keep) + "}";
  if (clear_at_least > 0) {
    e += R"(,"clear_at_least":{"type":"input_tokens","value":)" + std::to_string(clear_at_least) + "}";
  }
  return R"("context_management":{"edits":[)" + e + "}]}";
}

struct Count {
  int status = 0;
  int64_t input_tokens = -1, original = -1;
  json::object raw;
};
Count count_tokens(const std::string& body) {
  HttpReply r = fetch(port(), "POST", "/v1/messages/count_tokens", body, {}, 60000);
  Count c{.status = r.status, .raw = parse_obj(r.body)};
  c.input_tokens = num(at(c.raw, {"input_tokens"}));
  c.original = num(at(c.raw, {"context_management", "original_input_tokens"}));
  return c;
}

struct Answer {
  int status = 0;
  int64_t input_tokens = -1, cached_tokens = -1;
  json::object body;  // the message, or the error
  json::object cm;    // context_management (the message's, or the final message_delta's)
};

Answer call(const std::string& body, bool stream) {
  HttpReply r = fetch(port(), "POST", "/v1/messages", body, {}, 120000);
  Answer a{.status = r.status};
  EXPECT_TRUE(r.complete);
  if (r.status != 200 || !stream) {
    a.body = parse_obj(r.body);
    a.input_tokens = num(at(a.body, {"usage", "input_tokens"}));
    a.cached_tokens = num(at(a.body, {"usage", "cache_read_input_tokens"}));
    if (const json::value* cm = a.body.if_contains("context_management"); cm && cm->is_object()) a.cm = cm->get_object();
    return a;
  }
  int n_cm = 0;
  for (const SseEvent& e : parse_sse(r.body)) {
    json::object o = parse_obj(e.data);
    if (o.contains("context_management")) ++n_cm;
    if (e.event != "message_delta") continue;
    a.body = o;
    a.input_tokens = num(at(o, {"usage", "input_tokens"}));
    a.cached_tokens = num(at(o, {"usage", "cache_read_input_tokens"}));
    if (const json::value* cm = o.if_contains("context_management"); cm && cm->is_object()) a.cm = cm->get_object();
  }
  EXPECT_LE(n_cm, 1) << "context_management only on the final message_delta";
  return a;
}

// The applied edit of `type` (an empty object when absent).
json::object applied(const json::object& cm, const std::string& type) {
  const json::value* edits = cm.if_contains("applied_edits");
  if (!edits || !edits->is_array()) return {};
  for (const json::value& e : edits->get_array()) {
    if (e.is_object() && str(e.get_object().if_contains("type")) == type) return e.get_object();
  }
  return {};
}

TEST(ContextEditsServerTest, CountTokensGivesTheEditedAndTheOriginalCount) {
  REQUIRE_MODEL();
  const Count plain = count_tokens(agent_body(24, ""));
  ASSERT_EQ(plain.status, 200) << json::serialize(plain.raw);
  EXPECT_GT(plain.input_tokens, 4096) << "the conversation as sent does not fit the window";
  EXPECT_FALSE(plain.raw.contains("context_management"));
  // Under the trigger: nothing cleared, both counts the same.
  const Count idle = count_tokens(agent_body(24, cm_tools(100000, 3)));
  ASSERT_EQ(idle.status, 200);
  EXPECT_EQ(idle.input_tokens, plain.input_tokens);
  EXPECT_EQ(idle.original, plain.input_tokens);
  // Over it: 21 results cleared, exactly counted by the model's tokenizer.
  const Count edited = count_tokens(agent_body(24, cm_tools(1000, 3)));
  ASSERT_EQ(edited.status, 200) << json::serialize(edited.raw);
  EXPECT_EQ(edited.original, plain.input_tokens);
  EXPECT_LT(edited.input_tokens, 4096);
  EXPECT_LT(edited.input_tokens, plain.input_tokens / 2);
}

TEST(ContextEditsServerTest, AnswersReportTheAppliedEditsAndCountTheEditedPrompt) {
  REQUIRE_MODEL();
  const Count plain = count_tokens(agent_body(24, ""));
  const Count edited = count_tokens(agent_body(24, cm_tools(1000, 3)));
  ASSERT_EQ(edited.status, 200);
  // As sent, the prompt is over the window: the usual 400.
  Answer over = call(agent_body(24, R"("max_tokens":4)"), false);
  EXPECT_EQ(over.status, 400);
  EXPECT_EQ(str(at(over.body, {"error", "detail", "reason"})), "context_length_exceeded");
  for (bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "stream" : "message");
    const std::string user = stream ? "edits-stream" : "edits-message";
    Answer a = call(agent_body(24, cm_tools(1000, 3) + R"(,"max_tokens":4,"metadata":{"user_id":")" + user + R"("})" +
                                       (stream ? R"(,"stream":true)" : "")),
                    stream);
    ASSERT_EQ(a.status, 200) << json::serialize(a.body);
    EXPECT_EQ(a.input_tokens + a.cached_tokens, edited.input_tokens);
    const json::object e = applied(a.cm, "clear_tool_uses_20250919");
    ASSERT_FALSE(e.empty()) << json::serialize(a.cm);
    EXPECT_EQ(num(e.if_contains("cleared_tool_uses")), 21);
    EXPECT_EQ(num(e.if_contains("cleared_input_tokens")), plain.input_tokens - edited.input_tokens);
    EXPECT_EQ(a.cm.at("applied_edits").as_array().size(), 1u);
  }
  // Asked for, nothing to do: an empty list; not asked for: no field.
  Answer idle = call(agent_body(2, cm_tools(100000, 3) + R"(,"max_tokens":2)"), false);
  ASSERT_EQ(idle.status, 200);
  EXPECT_EQ(json::serialize(idle.body.at("context_management")), R"({"applied_edits":[]})");
  Answer none = call(agent_body(2, R"("max_tokens":2)"), false);
  ASSERT_EQ(none.status, 200);
  EXPECT_FALSE(none.body.contains("context_management"));
}

TEST(ContextEditsServerTest, ThinkingOfEarlierTurnsIsClearedAndBothEditsApplyInOrder) {
  REQUIRE_MODEL();
  const std::string both = R"("context_management":{"edits":[{"type":"clear_thinking_20251015"},)"
                           R"({"type":"clear_tool_uses_20250919","trigger":{"type":"input_tokens","value":1000}}]})";
  const Count plain = count_tokens(agent_body(22, "", true));
  const Count edited = count_tokens(agent_body(22, both, true));
  ASSERT_EQ(edited.status, 200) << json::serialize(edited.raw);
  EXPECT_EQ(edited.original, plain.input_tokens);
  for (bool stream : {false, true}) {
    SCOPED_TRACE(stream ? "stream" : "message");
    Answer a = call(agent_body(22, both + R"(,"max_tokens":3)" + (stream ? R"(,"stream":true)" : ""), true), stream);
    ASSERT_EQ(a.status, 200) << json::serialize(a.body);
    const json::array& list = a.cm.at("applied_edits").as_array();
    ASSERT_EQ(list.size(), 2u);
    EXPECT_EQ(str(list[0].as_object().if_contains("type")), "clear_thinking_20251015");
    EXPECT_EQ(num(list[0].as_object().if_contains("cleared_thinking_turns")), 21);
    EXPECT_EQ(str(list[1].as_object().if_contains("type")), "clear_tool_uses_20250919");
    EXPECT_EQ(num(list[1].as_object().if_contains("cleared_tool_uses")), 19);  // default keep: 3
    // The two edits' savings account exactly for the difference.
    const int64_t saved = num(list[0].as_object().if_contains("cleared_input_tokens")) +
                          num(list[1].as_object().if_contains("cleared_input_tokens"));
    EXPECT_EQ(plain.input_tokens - saved, edited.input_tokens);
    EXPECT_GE(num(list[0].as_object().if_contains("cleared_input_tokens")), 0);
  }
}

TEST(ContextEditsServerTest, InvalidEditsAre400sNamingTheField) {
  REQUIRE_MODEL();
  struct Case {
    std::string cm, param;
  };
  const std::vector<Case> cases = {
      {R"({"edits":[{"type":"clear_everything"}]})", "context_management.edits[0].type"},
      {R"({"edits":[{"type":"clear_tool_uses_20250919","trigger":{"type":"input_tokens","value":"big"}}]})",
       "context_management.edits[0].trigger.value"},
      {R"({"edits":[{"type":"clear_tool_uses_20250919","keep":{"type":"thinking_turns","value":2}}]})",
       "context_management.edits[0].keep.type"},
      {R"({"edits":[{"type":"clear_tool_uses_20250919","clear_at_least":{"type":"input_tokens","value":-5}}]})",
       "context_management.edits[0].clear_at_least.value"},
      {R"({"edits":[{"type":"clear_tool_uses_20250919"},{"type":"clear_thinking_20251015"}]})",
       "context_management.edits[1].type"},
  };
  for (const Case& c : cases) {
    for (const std::string route : {"/v1/messages", "/v1/messages/count_tokens"}) {
      HttpReply r = fetch(port(), "POST", route, agent_body(3, R"("max_tokens":2,"context_management":)" + c.cm));
      EXPECT_EQ(r.status, 400) << route << " " << c.cm;
      const json::object o = parse_obj(r.body);
      EXPECT_EQ(str(at(o, {"error", "type"})), "invalid_request_error");
      EXPECT_EQ(str(at(o, {"error", "detail", "param"})), c.param) << r.body;
      EXPECT_NE(str(at(o, {"error", "message"})).find(c.param), std::string::npos) << r.body;
    }
  }
}

// Two consecutive turns of a growing agent conversation, both over the
// trigger: with clear_at_least the cleared prefix stays the same, so the
// second turn's prompt starts with the first one's and is served from the
// prefix cache. Prints the cached share with and without clear_at_least.
TEST(ContextEditsServerTest, AGrowingConversationKeepsHittingThePrefixCache) {
  REQUIRE_MODEL();
  auto turn = [](int n, const std::string& cm, const std::string& user) {
    return call(agent_body(n, cm + R"(,"max_tokens":2,"metadata":{"user_id":")" + user + R"("})"), false);
  };
  std::vector<double> shares;
  for (int64_t clear_at_least : {600, 0}) {
    const std::string cm = cm_tools(1000, 3, clear_at_least);
    const std::string user = "growing-" + std::to_string(clear_at_least);
    int64_t prev_cleared = -1, prev_prompt = 0;
    int n_pairs = 0, n_cached_pairs = 0;
    double cached_share = 0;
    for (int n = 20; n <= 25; ++n) {
      Answer a = turn(n, cm, user);
      ASSERT_EQ(a.status, 200) << json::serialize(a.body);
      const int64_t cleared = num(applied(a.cm, "clear_tool_uses_20250919").if_contains("cleared_tool_uses"));
      ASSERT_GT(cleared, 0);
      if (clear_at_least > 0 && cleared == prev_cleared) {
        // The same cleared prefix: everything the last turn sent (but its
        // generation prompt and a partial last block) is cached.
        ++n_pairs;
        EXPECT_GT(a.cached_tokens, prev_prompt * 9 / 10) << "turn " << n;
        if (a.cached_tokens > prev_prompt * 9 / 10) ++n_cached_pairs;
      }
      if (prev_prompt > 0) cached_share += static_cast<double>(a.cached_tokens) / (a.input_tokens + a.cached_tokens);
      prev_cleared = cleared;
      prev_prompt = a.input_tokens + a.cached_tokens;
    }
    if (clear_at_least > 0) {
      EXPECT_GE(n_pairs, 3) << "clear_at_least 600: the cleared prefix moved too often";
      EXPECT_EQ(n_cached_pairs, n_pairs);
    }
    shares.push_back(cached_share / 5);
  }
  std::printf("cached share of the prompt over turns 21-25: clear_at_least 600: %.2f, unset: %.2f\n", shares[0],
              shares[1]);
  EXPECT_GT(shares[0], shares[1]);
}

}  // namespace
}  // namespace zl::test
