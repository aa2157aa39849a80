// End-to-end tests of the response cache (`--response-cache-mb`,
// limits/response_cache.h): the real server on stories260K (skipped, with a
// message, when ../shared is absent) and the fake engine for tool calls and
// failed answers. Every test uses prompts of its own, so that they hold
// whether the tests share one server (one process) or not (CTest).
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "support/http_client.h"
#include "support/json_object.h"
#include "support/json_path.h"
#include "support/openai_stream.h"
#include "support/process.h"
#include "support/real_model.h"
#include "support/wait.h"

namespace zl::test {
namespace {

namespace json = boost::json;

// One server per kind, started on first use. Thread-safe.
ServerProcess& server(const std::string& name) {
  static LazyServers servers;
  if (name == "real") {
    return servers.real(name, {"--response-cache-mb", "4", "--api-key", "k1", "--api-key", "k2"});
  }
  return servers.get(name, [] {
    return std::make_unique<ServerProcess>(
        std::vector<std::string>{"--fake-engine", "--fake-step-us", "500", "--request-log", "false",
                                 "--response-cache-mb", "4"},
        ZL_TEST_SERVER);
  });
}
int real_port() { return server("real").port(); }
int fake_port() { return server("fake").port(); }

const std::vector<std::string> kKey1 = {"x-api-key: k1"};
const std::vector<std::string> kKey2 = {"x-api-key: k2"};

// An Anthropic request: greedy unless `extra` says otherwise.
std::string msg_body(const std::string& content, const std::string& extra) {
  return R"({"model":"m","temperature":0,"messages":[{"role":"user","content":)" + jquote(content) + "}]," + extra +
         "}";
}
std::string chat_body(const std::string& content, const std::string& extra) {
  return R"({"model":"m","temperature":0,"messages":[{"role":"user","content":)" + jquote(content) + "}]," + extra +
         "}";
}

struct Answer {
  int status = 0;
  std::string cache;  // the x-engine-cache header ("" when absent)
  std::string text;
  std::string stop_reason;
  int64_t input_tokens = -1, output_tokens = -1;
  int n_deltas = 0;                  // streams: content events
  size_t max_delta_bytes = 0;        // streams: the largest content event's text
  std::string server_timing;
  double t_ms = 0;                   // the whole exchange
};

// Anthropic /v1/messages, streamed or not (by the body's "stream").
Answer anthropic(int port, const std::string& body, const std::vector<std::string>& headers = kKey1) {
  const auto t0 = std::chrono::steady_clock::now();
  HttpReply r = fetch(port, "POST", "/v1/messages", body, headers, 60000);
  Answer a{.status = r.status, .cache = r.header("x-engine-cache"), .server_timing = r.header("server-timing")};
  a.t_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(r.complete) << body;
  if (r.status != 200) return a;
  if (r.header("content-type") != "text/event-stream") {
    json::object o = parse_obj(r.body);
    for (const json::value& block : o["content"].as_array()) {
      if (str(at(block.as_object(), {"type"})) == "text") a.text += str(at(block.as_object(), {"text"}));
      if (str(at(block.as_object(), {"type"})) == "tool_use") {
        a.text += "<tool " + str(at(block.as_object(), {"name"})) + " " +
                  json::serialize(block.as_object().at("input")) + ">";
      }
    }
    a.stop_reason = str(at(o, {"stop_reason"}));
    a.input_tokens = num(at(o, {"usage", "input_tokens"}));
    a.output_tokens = num(at(o, {"usage", "output_tokens"}));
    return a;
  }
  std::string tool_args;
  for (const SseEvent& e : parse_sse(r.body)) {
    json::object o = parse_obj(e.data);
    if (e.event == "message_start") a.input_tokens = num(at(o, {"message", "usage", "input_tokens"}));
    if (e.event == "content_block_start" && str(at(o, {"content_block", "type"})) == "tool_use") {
      a.text += "<tool " + str(at(o, {"content_block", "name"})) + " ";
      tool_args.clear();
    }
    if (e.event == "content_block_delta") {
      if (str(at(o, {"delta", "type"})) == "input_json_delta") {
        tool_args += str(at(o, {"delta", "partial_json"}));
        continue;
      }
      const std::string piece = str(at(o, {"delta", "text"}));
      a.text += piece;
      ++a.n_deltas;
      a.max_delta_bytes = std::max(a.max_delta_bytes, piece.size());
    }
    if (e.event == "content_block_stop" && !tool_args.empty()) {
      a.text += json::serialize(json::parse(tool_args)) + ">";
      tool_args.clear();
    }
    if (e.event == "message_delta") {
      a.stop_reason = str(at(o, {"delta", "stop_reason"}));
      a.output_tokens = num(at(o, {"usage", "output_tokens"}));
    }
  }
  return a;
}

// OpenAI /v1/chat/completions, streamed (with include_usage) or not.
Answer openai(int port, const std::string& body, bool stream) {
  const auto t0 = std::chrono::steady_clock::now();
  HttpReply r = fetch(port, "POST", "/v1/chat/completions", body, kKey1, 60000);
  Answer a{.status = r.status, .cache = r.header("x-engine-cache"), .server_timing = r.header("server-timing")};
  a.t_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_TRUE(r.complete) << body;
  if (r.status != 200) return a;
  if (!stream) {
    json::object o = parse_obj(r.body);
    const json::object& choice = o["choices"].as_array()[0].as_object();
    a.text = str(at(choice, {"message", "content"}));
    a.stop_reason = str(at(choice, {"finish_reason"}));
    a.input_tokens = num(at(o, {"usage", "prompt_tokens"}));
    a.output_tokens = num(at(o, {"usage", "completion_tokens"}));
    return a;
  }
  std::vector<SseEvent> ev = parse_sse(r.body);
  EXPECT_TRUE(!ev.empty() && ev.back().data == "[DONE]");
  const ChatStream s = read_chat_stream(ev);
  a.input_tokens = s.prompt_tokens;
  a.output_tokens = s.completion_tokens;
  a.stop_reason = s.finish_reason;
  for (const std::string& piece : s.pieces) {
    a.text += piece;
    ++a.n_deltas;
    a.max_delta_bytes = std::max(a.max_delta_bytes, piece.size());
  }
  return a;
}

int64_t metric(int port, const std::string& name) {
  HttpReply r = fetch(port, "GET", "/metrics");
  const size_t p = r.body.find("\n" + name + " ");
  if (p == std::string::npos) return -1;
  return std::atoll(r.body.c_str() + p + name.size() + 2);
}

void expect_same_answer(const Answer& hit, const Answer& original) {
  EXPECT_EQ(hit.text, original.text);
  EXPECT_EQ(hit.stop_reason, original.stop_reason);
  EXPECT_EQ(hit.input_tokens, original.input_tokens);
  EXPECT_EQ(hit.output_tokens, original.output_tokens);
}

TEST(ResponseCacheE2E, TheSameGreedyRequestTwiceIsAHitWithoutEngineWork) {
  REQUIRE_MODEL();
  ASSERT_TRUE(server("real").ok()) << server("real").startup_line();
  const int port = real_port();
  const std::string body = msg_body("Lily found a shell", R"("max_tokens":24)");
  const int64_t hits = metric(port, "zerolayer_response_cache_hits_total");
  const int64_t misses = metric(port, "zerolayer_response_cache_misses_total");
  ASSERT_GE(hits, 0);
  Answer first = anthropic(port, body);
  ASSERT_EQ(first.status, 200);
  EXPECT_EQ(first.cache, "miss");
  EXPECT_GT(first.output_tokens, 0);
  // The engine publishes its counters after the step that ended the answer:
  // wait until they include it.
  ASSERT_TRUE(wait_until([&] { return metric(port, "engine_generation_tokens_total") >= first.output_tokens; }));
  const int64_t engine_tokens = metric(port, "engine_generation_tokens_total");
  const int64_t engine_prompt = metric(port, "engine_prompt_tokens_total");
  Answer second = anthropic(port, body);
  ASSERT_EQ(second.status, 200);
  EXPECT_EQ(second.cache, "hit");
  expect_same_answer(second, first);
  // No engine work: no token generated, no prompt admitted, no engine phase.
  EXPECT_EQ(metric(port, "engine_generation_tokens_total"), engine_tokens);
  EXPECT_EQ(metric(port, "engine_prompt_tokens_total"), engine_prompt);
  EXPECT_NE(second.server_timing.find("prefill;dur=0.000"), std::string::npos) << second.server_timing;
  EXPECT_NE(second.server_timing.find("decode;dur=0.000"), std::string::npos) << second.server_timing;
  EXPECT_EQ(metric(port, "zerolayer_response_cache_hits_total"), hits + 1);
  EXPECT_EQ(metric(port, "zerolayer_response_cache_misses_total"), misses + 1);
  EXPECT_GE(metric(port, "zerolayer_response_cache_entries"), 1);
  EXPECT_GT(metric(port, "zerolayer_response_cache_bytes"), 0);
  // Another max_tokens is another answer.
  EXPECT_EQ(anthropic(port, msg_body("Lily found a shell", R"("max_tokens":23)")).cache, "miss");
}

TEST(ResponseCacheE2E, AStreamedReplayGivesTheOriginalStreamsTextOnBothApis) {
  REQUIRE_MODEL();
  const int port = real_port();
  const std::string body = msg_body("The dog ran to the park", R"("max_tokens":24,"stream":true)");
  Answer original = anthropic(port, body);
  ASSERT_EQ(original.status, 200);
  EXPECT_EQ(original.cache, "miss");
  Answer replay = anthropic(port, body);
  EXPECT_EQ(replay.cache, "hit");
  expect_same_answer(replay, original);
  EXPECT_FALSE(replay.text.empty());

  const std::string chat =
      chat_body("The cat sat on a mat", R"("max_tokens":24,"stream":true,"stream_options":{"include_usage":true})");
  Answer o_original = openai(port, chat, true);
  ASSERT_EQ(o_original.status, 200);
  EXPECT_EQ(o_original.cache, "miss");
  Answer o_replay = openai(port, chat, true);
  EXPECT_EQ(o_replay.cache, "hit");
  expect_same_answer(o_replay, o_original);
  EXPECT_FALSE(o_replay.text.empty());
}

TEST(ResponseCacheE2E, AWholeAnswerServesAStreamAndAStreamServesAWholeAnswer) {
  REQUIRE_MODEL();
  const int port = real_port();
  Answer whole = anthropic(port, msg_body("Tom had a red kite", R"("max_tokens":20)"));
  ASSERT_EQ(whole.cache, "miss");
  Answer streamed = anthropic(port, msg_body("Tom had a red kite", R"("max_tokens":20,"stream":true)"));
  EXPECT_EQ(streamed.cache, "hit");
  expect_same_answer(streamed, whole);

  Answer s_first = openai(port, chat_body("Sam saw a big tree", R"("max_tokens":20,"stream":true)"), true);
  ASSERT_EQ(s_first.cache, "miss");
  Answer w_hit = openai(port, chat_body("Sam saw a big tree", R"("max_tokens":20)"), false);
  EXPECT_EQ(w_hit.cache, "hit");
  EXPECT_EQ(w_hit.text, s_first.text);
  EXPECT_EQ(w_hit.stop_reason, s_first.stop_reason);
  EXPECT_GT(w_hit.output_tokens, 0);
}

TEST(ResponseCacheE2E, AReplayedStreamIsPacedByStreamOptions) {
  REQUIRE_MODEL();
  const int port = real_port();
  Answer whole = openai(port, chat_body("Mia baked a cake", R"("max_tokens":24)"), false);
  ASSERT_EQ(whole.cache, "miss");
  ASSERT_GE(whole.text.size(), 12u);
  constexpr int kDelayMs = 25;
  Answer paced = openai(port,
                        chat_body("Mia baked a cake", R"("max_tokens":24,"stream":true,"stream_options":)"
                                                      R"({"include_usage":true,"max_buffer_size":4,"min_delay_ms":25})"),
                        true);
  EXPECT_EQ(paced.cache, "hit");
  EXPECT_EQ(paced.text, whole.text);
  // Split into events of at most 4 bytes, no two closer than 25 ms: the
  // recorded text arrives at once, yet it goes out at the requested pace.
  EXPECT_LE(paced.max_delta_bytes, 4u);
  EXPECT_GE(paced.n_deltas, static_cast<int>((whole.text.size() + 3) / 4));
  EXPECT_GE(paced.t_ms, (paced.n_deltas - 1) * kDelayMs) << paced.n_deltas << " events";
}

TEST(ResponseCacheE2E, RandomSamplingIsNotCachedButASeedIs) {
  REQUIRE_MODEL();
  const int port = real_port();
  const int64_t misses = metric(port, "zerolayer_response_cache_misses_total");
  const int64_t hits = metric(port, "zerolayer_response_cache_hits_total");
  const std::string random = chat_body("Ben liked trains", R"("temperature":1,"max_tokens":12)");
  for (int i = 0; i < 2; ++i) {
    Answer a = openai(port, random, false);
    ASSERT_EQ(a.status, 200);
    EXPECT_EQ(a.cache, "") << "not cacheable: no header";
  }
  EXPECT_EQ(metric(port, "zerolayer_response_cache_misses_total"), misses);
  EXPECT_EQ(metric(port, "zerolayer_response_cache_hits_total"), hits);

  const std::string seeded = chat_body("Ben liked trains", R"("temperature":1,"seed":1234,"max_tokens":12)");
  Answer first = openai(port, seeded, false);
  EXPECT_EQ(first.cache, "miss");
  Answer second = openai(port, seeded, false);
  EXPECT_EQ(second.cache, "hit");
  expect_same_answer(second, first);
  // Another seed, another answer.
  EXPECT_EQ(openai(port, chat_body("Ben liked trains", R"("temperature":1,"seed":1235,"max_tokens":12)"), false).cache,
            "miss");
}

// A recording has no logprobs: a request that asks for them is neither served from the cache
// (even when the same request without them is stored) nor stored.
TEST(ResponseCacheE2E, LogprobsRequestsBypassTheCache) {
  REQUIRE_MODEL();
  const int port = real_port();
  const std::string plain = chat_body("Tom had a red kite", R"("max_tokens":10)");
  const Answer first = openai(port, plain, false);
  EXPECT_EQ(first.cache, "miss");
  EXPECT_EQ(openai(port, plain, false).cache, "hit");
  const std::string with = chat_body("Tom had a red kite", R"("max_tokens":10,"logprobs":true,"top_logprobs":2)");
  for (int i = 0; i < 2; ++i) {
    HttpReply r = fetch(port, "POST", "/v1/chat/completions", with, kKey1, 60000);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.header("x-engine-cache"), "") << "not cacheable: no header";
    json::object o = parse_obj(r.body);
    json::object& choice = o["choices"].as_array()[0].as_object();
    EXPECT_EQ(str(at(choice, {"message", "content"})), first.text);
    // One entry per token, the end-of-sequence token (counted in the usage) aside.
    const int64_t n_text_tokens = first.output_tokens - (first.stop_reason == "length" ? 0 : 1);
    EXPECT_EQ(static_cast<int64_t>(choice["logprobs"].as_object()["content"].as_array().size()), n_text_tokens);
  }
}

TEST(ResponseCacheE2E, AnotherKeyOrUserNeverGetsTheAnswer) {
  REQUIRE_MODEL();
  const int port = real_port();
  const std::string body = msg_body("Anna and her ball", R"("max_tokens":16)");
  EXPECT_EQ(anthropic(port, body, kKey1).cache, "miss");
  EXPECT_EQ(anthropic(port, body, kKey1).cache, "hit");
  EXPECT_EQ(anthropic(port, body, kKey2).cache, "miss");
  EXPECT_EQ(anthropic(port, body, kKey2).cache, "hit");
  // A user id within the key is a tenant of its own too.
  const std::string with_user = msg_body("Anna and her ball", R"("max_tokens":16,"metadata":{"user_id":"u-7"})");
  EXPECT_EQ(anthropic(port, with_user, kKey1).cache, "miss");
}

TEST(ResponseCacheE2E, ValidateModeNeitherReadsNorFillsTheCache) {
  REQUIRE_MODEL();
  const int port = real_port();
  const std::string body = msg_body("Max the frog jumped", R"("max_tokens":8)");
  std::vector<std::string> validate = kKey1;
  validate.push_back("x-engine-mode: validate");
  HttpReply v = fetch(port, "POST", "/v1/messages", body, validate, 60000);
  ASSERT_EQ(v.status, 200) << v.body;
  EXPECT_EQ(v.header("x-engine-cache"), "");
  EXPECT_EQ(anthropic(port, body).cache, "miss");
  v = fetch(port, "POST", "/v1/messages", body, validate, 60000);
  EXPECT_NE(v.body.find("\"validated\""), std::string::npos) << v.body;  // not a replayed answer
  EXPECT_EQ(v.header("x-engine-cache"), "");
}

// ---- the fake engine: tool calls and failed answers ----

std::string tool_body(const std::string& marker, const std::string& extra) {
  return R"({"model":"m","temperature":0,"max_tokens":400,"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],)"
         R"("messages":[{"role":"user","content":)" +
         jquote("weather? " + marker) + "}]" + extra + "}";
}

TEST(ResponseCacheE2E, ToolCallsAreParsedAgainOnReplayStreamedOrNot) {
  ASSERT_TRUE(server("fake").ok()) << server("fake").startup_line();
  const int port = fake_port();
  const std::string marker = R"([[fake:tool=get_weather:{"city":"Paris"}]])";
  Answer whole = anthropic(port, tool_body(marker, ""), {});
  ASSERT_EQ(whole.status, 200);
  EXPECT_EQ(whole.cache, "miss");
  EXPECT_EQ(whole.stop_reason, "tool_use");
  EXPECT_NE(whole.text.find(R"(<tool get_weather {"city":"Paris"}>)"), std::string::npos) << whole.text;
  Answer streamed = anthropic(port, tool_body(marker, R"(,"stream":true)"), {});
  EXPECT_EQ(streamed.cache, "hit");
  expect_same_answer(streamed, whole);
  // Parallel tool use disabled cuts the answer at its first call: recorded apart.
  const std::string two = marker + R"([[fake:tool=get_weather:{"city":"Rome"}]])";
  const std::string single = R"(,"tool_choice":{"type":"auto","disable_parallel_tool_use":true})";
  Answer both = anthropic(port, tool_body(two, ""), {});
  EXPECT_EQ(both.cache, "miss");
  EXPECT_NE(both.text.find("Rome"), std::string::npos) << both.text;
  Answer first_only = anthropic(port, tool_body(two, single), {});
  EXPECT_EQ(first_only.cache, "miss");
  EXPECT_EQ(first_only.text.find("Rome"), std::string::npos) << first_only.text;
  Answer first_only_again = anthropic(port, tool_body(two, single), {});
  EXPECT_EQ(first_only_again.cache, "hit");
  expect_same_answer(first_only_again, first_only);
  Answer both_again = anthropic(port, tool_body(two, ""), {});
  EXPECT_EQ(both_again.cache, "hit");
  expect_same_answer(both_again, both);
}

TEST(ResponseCacheE2E, AFailedAnswerIsNeverStored) {
  const int port = fake_port();
  const std::string body = msg_body("broken [[fake:error]]", R"("max_tokens":50)");
  for (int i = 0; i < 2; ++i) {
    HttpReply r = fetch(port, "POST", "/v1/messages", body, {}, 20000);
    EXPECT_EQ(r.status, 500) << r.body;
    EXPECT_EQ(r.header("x-engine-cache"), "miss");
  }
  // A client that leaves mid-answer leaves nothing behind either.
  const std::string slow = msg_body("leaving [[fake:slow]]", R"("max_tokens":50,"stream":true)");
  const std::string gone = R"(engine_requests_total{api="anthropic",status="499"})";
  const int64_t n_gone = std::max<int64_t>(0, metric(port, gone));
  {
    RawClient c(port);
    ASSERT_TRUE(c.send_raw(http_request("POST", "/v1/messages", slow)));
    // The stream has begun (50 ms a token: far from complete).
    ASSERT_TRUE(c.read_until([](const std::string& b) { return b.find("text_delta") != std::string::npos; }, 20000));
    c.abort_now();  // closed before the answer is complete
  }
  ASSERT_TRUE(wait_until([&] { return metric(port, gone) == n_gone + 1; })) << "the server never saw the client go";
  Answer after = anthropic(port, slow, {});
  EXPECT_EQ(after.cache, "miss");
  EXPECT_EQ(anthropic(port, slow, {}).cache, "hit");
}

}  // namespace
}  // namespace zl::test
