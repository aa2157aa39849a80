// Truncation policies through the server (api/context_policy.h), on the
// real stories260K model with a 256-token window: drop_oldest and
// middle_out on both APIs (the body's context_policy and --context-policy),
// streamed and not, tool calls kept with their results, the header
// x-engine-context-truncated, usage = the truncated prompt's exact count
// (the same conversation sent already shortened gives the same count), the
// metric, and the 400 when the last turn alone does not fit. Skipped when
// ../shared is absent.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <map>
#include <string>
#include <vector>

#include "support/http_client.h"
#include "support/json_object.h"
#include "support/json_path.h"
#include "support/metric_scrape.h"
#include "support/process.h"
#include "support/prom_text.h"
#include "support/real_model.h"

namespace zl::test {
namespace {

namespace json = boost::json;

constexpr int64_t kCtx = 256;
constexpr int64_t kMaxTokens = 8;  // the reserve: min(max_tokens 8, --context-reserve 32)

ServerProcess& real_server(const std::string& name, const std::vector<std::string>& extra) {
  static LazyServers servers;
  std::vector<std::string> args = {"--ctx", std::to_string(kCtx), "--parallel", "2",
                                   "--context-reserve", "32"};
  args.insert(args.end(), extra.begin(), extra.end());
  return servers.real(name, args);
}
int plain_port() {
  return real_server("plain", {}).port();
}  // --context-policy error (the default)
int oldest_port() {
  return real_server("oldest", {"--context-policy", "drop_oldest"}).port();
}
// A KV cache of half a context: one sequence holds at most 128 tokens.
constexpr int64_t kKvTokens = 128;
int small_kv_port() {
  return real_server("small_kv",
                     {"--context-policy", "drop_oldest", "--kv-size", std::to_string(kKvTokens)})
      .port();
}

// A message of the API-neutral conversation; a tool call is an assistant
// turn with call_id set, a result a "tool" turn.
struct Turn {
  std::string role;
  std::string content;
  std::string call_id;
};

const std::string kSystem = "You tell short stories.";

// n exchanges of about 54 tokens each ("And Lily?" / a line of a story),
// then the last question.
std::vector<Turn> story_chat(int n_exchanges) {
  static const char* kNames[] = {"Lily", "Tom", "the sun", "Sue", "the cat", "Ben"};
  static const char* kLines[] = {
      "Lily went to the park with her mom and saw a big red ball under a tree.",
      "Tom had a little dog named Max who liked to run and jump in the green grass.",
      "One day the sun was bright and the birds sang a happy song in the sky.",
      "Sue found a shiny box in the garden and she opened it with a big smile.",
      "The cat sat on the mat and looked at the fish in the bowl for a long time.",
      "Ben wanted to play with the blocks, but his sister wanted to play too.",
  };
  std::vector<Turn> out;
  for (int i = 0; i < n_exchanges; ++i) {
    out.push_back({"user", std::string("And ") + kNames[i % 6] + "?"});
    out.push_back({"assistant", kLines[i % 6]});
  }
  out.push_back({"user", "What happened at the end of the day?"});
  return out;
}

std::string anthropic_messages(const std::vector<Turn>& turns) {
  json::array a;
  for (size_t i = 0; i < turns.size(); ++i) {
    const Turn& t = turns[i];
    if (t.role == "tool") continue;  // joined to the user turn after its call (below)
    if (!t.call_id.empty()) {
      a.push_back(json::object{{"role", "assistant"},
                               {"content", json::array{json::object{{"type", "tool_use"},
                                                                    {"id", t.call_id},
                                                                    {"name", "lookup"},
                                                                    {"input", json::object{}}}}}});
      json::array results;
      while (i + 1 < turns.size() && turns[i + 1].role == "tool") {
        ++i;
        results.push_back(json::object{{"type", "tool_result"},
                                       {"tool_use_id", turns[i].call_id},
                                       {"content", turns[i].content}});
      }
      a.push_back(json::object{{"role", "user"}, {"content", results}});
      continue;
    }
    a.push_back(json::object{{"role", t.role}, {"content", t.content}});
  }
  return json::serialize(a);
}

std::string openai_messages(const std::vector<Turn>& turns) {
  json::array a{json::object{{"role", "system"}, {"content", kSystem}}};
  for (const Turn& t : turns) {
    if (t.role == "tool") {
      a.push_back(
          json::object{{"role", "tool"}, {"tool_call_id", t.call_id}, {"content", t.content}});
    } else if (!t.call_id.empty()) {
      a.push_back(json::object{
          {"role", "assistant"},
          {"content", nullptr},
          {"tool_calls",
           json::array{json::object{
               {"id", t.call_id},
               {"type", "function"},
               {"function", json::object{{"name", "lookup"}, {"arguments", "{}"}}}}}}});
    } else {
      a.push_back(json::object{{"role", t.role}, {"content", t.content}});
    }
  }
  return json::serialize(a);
}

std::string anthropic_body(const std::vector<Turn>& turns, const std::string& extra) {
  return R"({"model":"m","temperature":0,"max_tokens":)" + std::to_string(kMaxTokens) +
         R"(,"system":)" + jquote(kSystem) + R"(,"messages":)" + anthropic_messages(turns) +
         (extra.empty() ? "" : "," + extra) + "}";
}
std::string openai_body(const std::vector<Turn>& turns, const std::string& extra) {
  return R"({"model":"m","temperature":0,"max_tokens":)" + std::to_string(kMaxTokens) +
         R"(,"messages":)" + openai_messages(turns) + (extra.empty() ? "" : "," + extra) + "}";
}

// The exact count of a conversation, from the server's count_tokens.
int64_t count_tokens(int port, const std::vector<Turn>& turns) {
  std::string body = R"({"model":"m","system":)" + jquote(kSystem) + R"(,"messages":)" +
                     anthropic_messages(turns) + "}";
  HttpReply r = fetch(port, "POST", "/v1/messages/count_tokens", body);
  EXPECT_EQ(r.status, 200) << r.body;
  return num(parse_obj(r.body).if_contains("input_tokens"));
}

// The prompt count an Anthropic answer reports (input + cache read).
int64_t anthropic_prompt(const json::object& o) {
  const json::object& u = o.at("usage").as_object();
  return num(u.if_contains("input_tokens")) + num(u.if_contains("cache_read_input_tokens"));
}
int64_t openai_prompt(const json::object& o) {
  return num(o.at("usage").as_object().if_contains("prompt_tokens"));
}
std::string openai_text(const json::object& o) {
  const json::value& c = o.at("choices").at(0).at("message").at("content");
  return c.is_string() ? std::string(c.get_string()) : "";
}

// `turns` without the exchanges [first, first + count) (two turns each).
std::vector<Turn> without_exchanges(const std::vector<Turn>& turns, size_t first, size_t count) {
  std::vector<Turn> out(turns.begin(), turns.begin() + 2 * first);
  out.insert(out.end(), turns.begin() + 2 * (first + count), turns.end());
  return out;
}

// The fewest exchanges that drop_oldest / middle_out must drop (by count_tokens).
size_t exchanges_to_drop(int port, const std::vector<Turn>& turns, bool middle,
                         std::vector<Turn>* kept) {
  const size_t m = (turns.size() - 1) / 2;
  for (size_t k = 1; k <= m; ++k) {
    *kept = without_exchanges(turns, middle ? (m - k) / 2 : 0, k);
    if (count_tokens(port, *kept) + kMaxTokens <= kCtx) return k;
  }
  return 0;
}

TEST(ContextPolicyServer, BothPoliciesOnBothApisDropExactlyWhatIsNeeded) {
  REQUIRE_MODEL();
  const int port = plain_port();
  ASSERT_GT(port, 0);
  const std::vector<Turn> chat = story_chat(8);
  const int64_t full = count_tokens(port, chat);
  ASSERT_GT(full + kMaxTokens, kCtx) << "the conversation must not fit";
  std::vector<Turn> kept_by[2];
  for (const bool middle : {false, true}) {
    const std::string policy = middle ? "middle_out" : "drop_oldest";
    std::vector<Turn> kept;
    const size_t k = exchanges_to_drop(port, chat, middle, &kept);
    ASSERT_GT(k, 0u);
    const int64_t n_kept = count_tokens(port, kept);
    const std::string header =
        "messages=" + std::to_string(2 * k) + ", tokens=" + std::to_string(full - n_kept);
    const double before = scrape_metric(port, "engine_context_truncations_total", {{"policy", policy}});
    const std::string field = R"("context_policy":")" + policy + "\"";
    HttpReply a = fetch(port, "POST", "/v1/messages", anthropic_body(chat, field), {}, 60000);
    ASSERT_EQ(a.status, 200) << policy << ": " << a.body;
    EXPECT_EQ(a.header("x-engine-context-truncated"), header) << policy;
    EXPECT_EQ(anthropic_prompt(parse_obj(a.body)), n_kept) << policy;
    HttpReply o = fetch(port, "POST", "/v1/chat/completions", openai_body(chat, field), {}, 60000);
    ASSERT_EQ(o.status, 200) << policy << ": " << o.body;
    EXPECT_EQ(o.header("x-engine-context-truncated"), header) << policy;
    EXPECT_EQ(openai_prompt(parse_obj(o.body)), n_kept) << policy;
    // The same conversation sent already shortened: the same prompt (count
    // and greedy answer), no header.
    HttpReply same = fetch(port, "POST", "/v1/chat/completions", openai_body(kept, ""), {}, 60000);
    ASSERT_EQ(same.status, 200) << same.body;
    EXPECT_EQ(same.header("x-engine-context-truncated"), "");
    EXPECT_EQ(openai_prompt(parse_obj(same.body)), n_kept);
    EXPECT_EQ(openai_text(parse_obj(same.body)), openai_text(parse_obj(o.body))) << policy;
    kept_by[middle] = kept;
    EXPECT_EQ(scrape_metric(port, "engine_context_truncations_total", {{"policy", policy}}), before + 2);
  }
  // drop_oldest kept the latest exchanges, middle_out the first and the latest.
  ASSERT_FALSE(kept_by[0].empty());
  ASSERT_FALSE(kept_by[1].empty());
  EXPECT_NE(kept_by[0][0].content, chat[0].content);
  EXPECT_EQ(kept_by[1][0].content, chat[0].content);
  EXPECT_EQ(kept_by[1].back().content, chat.back().content);
  EXPECT_EQ(kept_by[1][kept_by[1].size() - 2].content, chat[chat.size() - 2].content);
  // Without a policy this server answers the over-long prompt as it fits
  // (the window's rest), with no header: `error` needs no reserve.
  HttpReply r = fetch(port, "POST", "/v1/messages", anthropic_body(chat, ""), {}, 60000);
  if (full < kCtx) {
    EXPECT_EQ(r.status, 200) << r.body;
  } else {
    EXPECT_EQ(r.status, 400) << r.body;
  }
  EXPECT_EQ(r.header("x-engine-context-truncated"), "");
}

TEST(ContextPolicyServer, TheServerDefaultAppliesAndARequestOverridesIt) {
  REQUIRE_MODEL();
  const int port = oldest_port();
  ASSERT_GT(port, 0);
  const std::vector<Turn> chat = story_chat(10);
  std::vector<Turn> kept;
  const size_t k = exchanges_to_drop(port, chat, false, &kept);
  ASSERT_GT(k, 0u);
  const int64_t n_kept = count_tokens(port, kept);
  // Streams carry the header on their 200 and the count in message_start / usage.
  HttpReply a =
      fetch(port, "POST", "/v1/messages", anthropic_body(chat, R"("stream":true)"), {}, 60000);
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.header("x-engine-context-truncated")
                .rfind("messages=" + std::to_string(2 * k) + ", tokens=", 0),
            0u)
      << a.header("x-engine-context-truncated");
  bool saw_start = false;
  for (const SseEvent& e : parse_sse(a.body)) {
    if (e.event != "message_start") continue;
    saw_start = true;
    EXPECT_EQ(anthropic_prompt(parse_obj(e.data).at("message").as_object()), n_kept);
  }
  EXPECT_TRUE(saw_start);
  HttpReply o = fetch(port, "POST", "/v1/chat/completions",
                      openai_body(chat, R"("stream":true,"stream_options":{"include_usage":true})"),
                      {}, 60000);
  ASSERT_EQ(o.status, 200) << o.body;
  EXPECT_NE(o.header("x-engine-context-truncated"), "");
  int64_t streamed_prompt = -1;
  for (const SseEvent& e : parse_sse(o.body)) {
    if (e.data == "[DONE]") continue;
    json::object c = parse_obj(e.data);
    if (const json::value* u = c.if_contains("usage"); u && u->is_object())
      streamed_prompt = openai_prompt(c);
  }
  EXPECT_EQ(streamed_prompt, n_kept);
  // Validate mode applies the policy and says so, without counting it.
  const double before =
      scrape_metric(port, "engine_context_truncations_total", {{"policy", "drop_oldest"}});
  HttpReply v = fetch(port, "POST", "/v1/messages", anthropic_body(chat, ""),
                      {"X-Engine-Mode: validate"}, 60000);
  ASSERT_EQ(v.status, 200) << v.body;
  EXPECT_EQ(parse_obj(v.body).at("status").as_string(), "validated");
  EXPECT_EQ(num(parse_obj(v.body).if_contains("input_tokens")), n_kept) << v.body;
  EXPECT_EQ(v.header("x-engine-context-truncated"), a.header("x-engine-context-truncated"));
  EXPECT_EQ(scrape_metric(port, "engine_context_truncations_total", {{"policy", "drop_oldest"}}), before);
  // context_policy "error" on this server: the prompt is served as it is
  // when it leaves a token, else the 400.
  HttpReply e = fetch(port, "POST", "/v1/messages",
                      anthropic_body(chat, R"("context_policy":"error")"), {}, 60000);
  EXPECT_EQ(e.header("x-engine-context-truncated"), "");
  if (count_tokens(port, chat) >= kCtx) {
    EXPECT_EQ(e.status, 400) << e.body;
  }
}

TEST(ContextPolicyServer, AKvCacheSmallerThanTheWindowIsTheLimit) {
  REQUIRE_MODEL();
  const int port = small_kv_port();
  ASSERT_GT(port, 0);
  const std::vector<Turn> chat = story_chat(4);
  // The first k with prompt + reserve <= the cache, not the 256-token window.
  size_t k = 0;
  std::vector<Turn> kept = chat;
  while (count_tokens(port, kept) + kMaxTokens > kKvTokens) kept = without_exchanges(chat, 0, ++k);
  ASSERT_GT(k, 0u);
  ASSERT_LE(count_tokens(port, without_exchanges(chat, 0, k - 1)) + kMaxTokens, kCtx)
      << "the window alone would fit";
  HttpReply o = fetch(port, "POST", "/v1/chat/completions", openai_body(chat, ""), {}, 60000);
  ASSERT_EQ(o.status, 200) << o.body;  // admitted: no kv_cache_overflow for max_tokens 8
  EXPECT_EQ(
      o.header("x-engine-context-truncated").rfind("messages=" + std::to_string(2 * k) + ", ", 0),
      0u)
      << o.header("x-engine-context-truncated");
  EXPECT_EQ(openai_prompt(parse_obj(o.body)), count_tokens(port, kept));
}

TEST(ContextPolicyServer, AToolCallGoesWithItsResult) {
  REQUIRE_MODEL();
  const int port = plain_port();
  ASSERT_GT(port, 0);
  // Exchange 0 holds a tool round trip: user, call, result, answer.
  std::vector<Turn> chat = {
      {"user", "What does brave mean?"},
      {"assistant", "", "call_1"},
      {"tool", "Brave means ready to face danger without fear. " + std::string(600, 'x'), "call_1"},
      {"assistant", "Brave means not afraid."}};
  const std::vector<Turn> rest = story_chat(1);
  chat.insert(chat.end(), rest.begin(), rest.end());
  std::vector<Turn> kept(chat.begin() + 4, chat.end());
  // (No tools array: its JSON alone would fill this tiny model's window;
  // tool_use / tool_result and tool_calls / role "tool" need none.)
  ASSERT_GT(count_tokens(port, chat) + kMaxTokens, kCtx);
  const int64_t n_kept = count_tokens(port, kept);
  ASSERT_LE(n_kept + kMaxTokens, kCtx) << "dropping exchange 0 must be enough";
  // Anthropic: 3 client messages (user, assistant tool_use, user tool_result) + the answer.
  HttpReply a = fetch(port, "POST", "/v1/messages",
                      anthropic_body(chat, R"("context_policy":"drop_oldest")"), {}, 60000);
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(a.header("x-engine-context-truncated").rfind("messages=4, ", 0), 0u)
      << a.header("x-engine-context-truncated");
  EXPECT_EQ(anthropic_prompt(parse_obj(a.body)), n_kept);
  // OpenAI: user, assistant tool_calls, tool, assistant.
  HttpReply o = fetch(port, "POST", "/v1/chat/completions",
                      openai_body(chat, R"("context_policy":"drop_oldest")"), {}, 60000);
  ASSERT_EQ(o.status, 200) << o.body;
  EXPECT_EQ(o.header("x-engine-context-truncated").rfind("messages=4, ", 0), 0u)
      << o.header("x-engine-context-truncated");
  EXPECT_EQ(openai_prompt(parse_obj(o.body)), n_kept);
}

TEST(ContextPolicyServer, WhenTheLastTurnCannotFitItIsThe400) {
  REQUIRE_MODEL();
  const int port = oldest_port();
  ASSERT_GT(port, 0);
  std::vector<Turn> chat = story_chat(2);
  std::string huge;
  for (int i = 0; i < 30; ++i) huge += "The little bird flew over the big tree. ";
  chat.back().content = huge;
  const std::vector<Turn> last = {chat.back()};
  const int64_t n_last = count_tokens(port, last);
  ASSERT_GE(n_last, kCtx);
  for (const std::string policy : {"drop_oldest", "middle_out"}) {
    HttpReply a = fetch(port, "POST", "/v1/messages",
                        anthropic_body(chat, R"("context_policy":")" + policy + "\""));
    ASSERT_EQ(a.status, 400) << a.body;
    json::object e = parse_obj(a.body).at("error").as_object();
    EXPECT_EQ(e.at("detail").at("reason").as_string(), "context_length_exceeded");
    EXPECT_EQ(num(e.at("detail").as_object().if_contains("n_prompt_tokens")), n_last);
    EXPECT_EQ(num(e.at("detail").as_object().if_contains("n_ctx")), kCtx);
    EXPECT_EQ(a.header("x-engine-context-truncated"), "");
    HttpReply o = fetch(port, "POST", "/v1/chat/completions",
                        openai_body(chat, R"("context_policy":")" + policy + "\""));
    ASSERT_EQ(o.status, 400) << o.body;
    EXPECT_EQ(parse_obj(o.body).at("error").at("code").as_string(), "context_length_exceeded");
  }
}

TEST(ContextPolicyServer, AnUnknownPolicyIsA400NamingTheField) {
  REQUIRE_MODEL();
  const int port = plain_port();
  ASSERT_GT(port, 0);
  HttpReply a = fetch(port, "POST", "/v1/messages",
                      anthropic_body(story_chat(0), R"("context_policy":"newest")"));
  ASSERT_EQ(a.status, 400) << a.body;
  EXPECT_EQ(parse_obj(a.body).at("error").at("detail").at("param").as_string(), "context_policy");
  HttpReply o = fetch(port, "POST", "/v1/chat/completions",
                      openai_body(story_chat(0), R"("context_policy":"newest")"));
  ASSERT_EQ(o.status, 400) << o.body;
  EXPECT_EQ(parse_obj(o.body).at("error").at("param").as_string(), "context_policy");
}

}  // namespace
}  // namespace zl::test
