// End-to-end tests of `zerolayer serve` on the REAL engine and a real model:
// ../shared/models/stories260K.gguf (a 260K-parameter Llama trained on
// TinyStories; context 2048). The binary runs on a free port and is spoken
// to over raw sockets (tests/support/http_client.h). Skipped, with a message,
// when ../shared is absent.
//
// What only the real engine can show: greedy determinism across streaming,
// non-streaming, concurrency and `zerolayer generate`; exact token counts
// from the model's own tokenizer; stop strings and the context window on real
// detokenized text; cancellation and backpressure reaching the decode loop.
// Token budgets stay small: CI machines are slow and shared.
#include <gtest/gtest.h>

#include <atomic>
#include <boost/json.hpp>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "support/http_client.h"
#include "support/json_object.h"
#include "support/json_path.h"
#include "support/openai_stream.h"
#include "support/process.h"
#include "support/real_model.h"

namespace zl::test {
namespace {

namespace json = boost::json;

// Servers start lazily, once per process (CTest runs each test in its own).
ServerProcess& server(const std::string& name, const std::vector<std::string>& extra) {
  static LazyServers servers;
  return servers.real(name, extra);
}
// The model's own window (2048), 16 sequences in a batch.
int main_port() { return server("main", {"--parallel", "16"}).port(); }
// A 64-token window.
int small_port() { return server("small", {"--ctx", "64"}).port(); }
// Two batch slots and no queue: a request beyond them is refused at once.
int narrow_port() { return server("narrow", {"--parallel", "2", "--max-queue", "0"}).port(); }

// An Anthropic request: greedy unless `extra` says otherwise.
std::string msg_body(const std::string& content, const std::string& extra) {
  return R"({"model":"claude-x","temperature":0,"messages":[{"role":"user","content":)" + jquote(content) + "}]," +
         extra + "}";
}

struct Answer {
  int status = 0;
  std::string text;
  std::string stop_reason;  // Anthropic stop_reason / OpenAI finish_reason
  std::string stop_sequence;
  int64_t input_tokens = -1, cached_tokens = -1, output_tokens = -1;
  json::object raw;  // the non-streaming body or the last message_delta
};

Answer anthropic_call(int port, const std::string& body) {
  HttpReply r = fetch(port, "POST", "/v1/messages", body, {}, 60000);
  Answer a{.status = r.status};
  EXPECT_TRUE(r.complete) << body;
  a.raw = parse_obj(r.body);
  if (r.status != 200) return a;
  const json::value* content = a.raw.if_contains("content");
  if (content && content->is_array() && !content->get_array().empty()) {
    a.text = str(at(content->get_array()[0].get_object(), {"text"}));
  }
  a.stop_reason = str(at(a.raw, {"stop_reason"}));
  a.stop_sequence = str(at(a.raw, {"stop_sequence"}));
  a.input_tokens = num(at(a.raw, {"usage", "input_tokens"}));
  a.cached_tokens = num(at(a.raw, {"usage", "cache_read_input_tokens"}));
  a.output_tokens = num(at(a.raw, {"usage", "output_tokens"}));
  return a;
}

// A streamed Anthropic answer, checking the event grammar on the way.
Answer anthropic_stream(int port, const std::string& body) {
  HttpReply r = fetch(port, "POST", "/v1/messages", body, {}, 60000);
  Answer a{.status = r.status};
  EXPECT_TRUE(r.complete) << body;
  if (r.status != 200) {
    a.raw = parse_obj(r.body);
    return a;
  }
  EXPECT_EQ(r.header("content-type"), "text/event-stream");
  std::vector<std::string> names;
  for (const SseEvent& e : parse_sse(r.body)) {
    json::object o = parse_obj(e.data);
    EXPECT_EQ(str(at(o, {"type"})), e.event);
    names.push_back(e.event);
    if (e.event == "message_start") {
      a.input_tokens = num(at(o, {"message", "usage", "input_tokens"}));
      a.cached_tokens = num(at(o, {"message", "usage", "cache_read_input_tokens"}));
    } else if (e.event == "content_block_delta") {
      EXPECT_EQ(str(at(o, {"delta", "type"})), "text_delta");
      a.text += str(at(o, {"delta", "text"}));
    } else if (e.event == "message_delta") {
      a.raw = o;
      a.stop_reason = str(at(o, {"delta", "stop_reason"}));
      a.stop_sequence = str(at(o, {"delta", "stop_sequence"}));
      a.output_tokens = num(at(o, {"usage", "output_tokens"}));
    }
  }
  EXPECT_GE(names.size(), 5u);
  if (names.size() >= 5) {
    EXPECT_EQ(names.front(), "message_start");
    EXPECT_EQ(names[names.size() - 2], "message_delta");
    EXPECT_EQ(names.back(), "message_stop");
  }
  return a;
}

// OpenAI chat completion, streaming (with include_usage) or not.
Answer openai_chat(int port, const std::string& content, const std::string& extra, bool stream) {
  std::string body = R"({"model":"gpt-x","temperature":0,"messages":[{"role":"user","content":)" + jquote(content) +
                     "}]," + extra + (stream ? R"(,"stream":true,"stream_options":{"include_usage":true})" : "") + "}";
  HttpReply r = fetch(port, "POST", "/v1/chat/completions", body, {}, 60000);
  Answer a{.status = r.status};
  EXPECT_TRUE(r.complete) << body;
  if (r.status != 200 || !stream) {
    a.raw = parse_obj(r.body);
    if (r.status != 200) return a;
    const json::object& choice = a.raw["choices"].as_array()[0].as_object();
    a.text = str(at(choice, {"message", "content"}));
    a.stop_reason = str(at(choice, {"finish_reason"}));
    a.input_tokens = num(at(a.raw, {"usage", "prompt_tokens"}));
    a.output_tokens = num(at(a.raw, {"usage", "completion_tokens"}));
    return a;
  }
  std::vector<SseEvent> ev = parse_sse(r.body);
  EXPECT_FALSE(ev.empty());
  if (ev.empty()) return a;
  EXPECT_EQ(ev.back().data, "[DONE]");
  const ChatStream s = read_chat_stream(ev);
  a.input_tokens = s.prompt_tokens;
  a.output_tokens = s.completion_tokens;
  a.stop_reason = s.finish_reason;
  for (const std::string& piece : s.pieces) a.text += piece;
  return a;
}

int64_t metric(int port, const std::string& name) {
  HttpReply r = fetch(port, "GET", "/metrics");
  const size_t at = r.body.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::atoll(r.body.c_str() + at + name.size() + 2);
}

// Waits until `name` equals `value` (up to timeout_ms); returns its last value.
int64_t wait_metric(int port, const std::string& name, int64_t value, int timeout_ms) {
  int64_t v = -1;
  for (int waited = 0; waited <= timeout_ms; waited += 2) {
    v = metric(port, name);
    if (v == value) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return v;
}

// CPU seconds (user + system) the process has used.
double cpu_seconds(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t close = s.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream in(s.substr(close + 2));
  std::string field;
  long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {
    if (i == 14) utime = std::atoll(field.c_str());
    if (i == 15) stime = std::atoll(field.c_str());
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

// stories260K's end-of-sequence id: banned through OpenAI's logit_bias when
// a test needs a generation that runs until max_tokens or the window.
constexpr const char* kNoEos = R"("logit_bias":{"2":-100})";

TEST(ServerRealTest, StartsOnTheModel) {
  REQUIRE_MODEL();
  ServerProcess& s = server("main", {"--parallel", "16"});
  ASSERT_TRUE(s.ok()) << s.startup_line();
  EXPECT_NE(s.startup_line().find("stories260K"), std::string::npos) << s.startup_line();
  EXPECT_EQ(fetch(main_port(), "GET", "/ready").status, 200);
}

TEST(ServerRealTest, StreamingAndNonStreamingGiveTheSameGreedyText) {
  REQUIRE_MODEL();
  const std::string body = msg_body("Once upon a time", R"("max_tokens":48)");
  Answer full = anthropic_call(main_port(), body);
  ASSERT_EQ(full.status, 200) << json::serialize(full.raw);
  EXPECT_FALSE(full.text.empty());
  Answer streamed = anthropic_stream(main_port(), msg_body("Once upon a time", R"("max_tokens":48,"stream":true)"));
  ASSERT_EQ(streamed.status, 200);
  EXPECT_EQ(streamed.text, full.text);
  EXPECT_EQ(streamed.stop_reason, full.stop_reason);
  EXPECT_EQ(streamed.output_tokens, full.output_tokens);
  // The same through the OpenAI API.
  Answer o_full = openai_chat(main_port(), "Once upon a time", R"("max_tokens":48)", false);
  Answer o_stream = openai_chat(main_port(), "Once upon a time", R"("max_tokens":48)", true);
  ASSERT_EQ(o_full.status, 200);
  ASSERT_EQ(o_stream.status, 200);
  EXPECT_EQ(o_full.text, full.text);
  EXPECT_EQ(o_stream.text, full.text);
  EXPECT_EQ(o_stream.output_tokens, o_full.output_tokens);
  EXPECT_EQ(o_stream.input_tokens, o_full.input_tokens);
}

TEST(ServerRealTest, UsageInputTokensEqualsCountTokens) {
  REQUIRE_MODEL();
  const std::string conv =
      R"("system":[{"type":"text","text":"You tell short stories."}],"messages":[{"role":"user","content":[{"type":"text","text":"Tom had a red ball."}]},{"role":"assistant","content":"He liked it."},{"role":"user","content":"What happened next?"}])";
  HttpReply count = fetch(main_port(), "POST", "/v1/messages/count_tokens", R"({"model":"m",)" + conv + "}");
  ASSERT_EQ(count.status, 200) << count.body;
  const int64_t n = num(at(parse_obj(count.body), {"input_tokens"}));
  EXPECT_GT(n, 10);
  // A tenant of its own (metadata.user_id salts the prefix cache): nothing cached.
  for (bool stream : {false, true}) {
    const std::string user = stream ? "count-tokens-stream" : "count-tokens";
    const std::string body = R"({"model":"m","max_tokens":2,"metadata":{"user_id":")" + user + R"("},)" + conv +
                             (stream ? R"(,"stream":true})" : "}");
    Answer a = stream ? anthropic_stream(main_port(), body) : anthropic_call(main_port(), body);
    ASSERT_EQ(a.status, 200);
    EXPECT_EQ(a.input_tokens, n) << (stream ? "stream" : "non-stream");
    EXPECT_EQ(a.cached_tokens, 0);
  }
  // Sent again by the same tenant: the prompt's full blocks come from the
  // prefix cache; uncached + cached is still the count.
  Answer again = anthropic_call(main_port(), R"({"model":"m","max_tokens":2,"metadata":{"user_id":"count-tokens"},)" + conv + "}");
  ASSERT_EQ(again.status, 200);
  EXPECT_GT(again.cached_tokens, 0);
  EXPECT_EQ(again.input_tokens + again.cached_tokens, n);
}

// The prefix cache is salted by the API key first, then by the user id
// within the key: a prompt cached for one key gives no cached tokens (no
// timing difference) to another key, with or without user ids.
TEST(ServerRealTest, PrefixCacheIsNotSharedAcrossApiKeys) {
  REQUIRE_MODEL();
  const int port = server("keys", {"--api-key", "key-A", "--api-key", "key-B"}).port();
  const std::string prompt = "Lily and Ben went to the park. They saw a big dog with a red ball. The dog ran to them.";
  auto call = [&](const std::string& key, const std::string& user) {
    const std::string meta = user.empty() ? "" : R"("metadata":{"user_id":")" + user + R"("},)";
    HttpReply r = fetch(port, "POST", "/v1/messages", msg_body(prompt, meta + R"("max_tokens":2)"),
                        {"x-api-key: " + key}, 60000);
    EXPECT_EQ(r.status, 200) << r.body;
    return num(at(parse_obj(r.body), {"usage", "cache_read_input_tokens"}));
  };
  EXPECT_EQ(call("key-A", ""), 0);
  EXPECT_GT(call("key-A", ""), 0) << "the same key reuses its own prefix";
  EXPECT_EQ(call("key-B", ""), 0) << "another key must not hit key-A's blocks";
  EXPECT_GT(call("key-B", ""), 0);
  // Within a key, the user id separates too.
  EXPECT_EQ(call("key-A", "u1"), 0);
  EXPECT_GT(call("key-A", "u1"), 0);
  EXPECT_EQ(call("key-B", "u1"), 0) << "the same user id under another key is another tenant";
  EXPECT_EQ(call("key-A", "u2"), 0);
}

// POST /tokenize and /detokenize (llama-server's and vLLM's shapes) count
// what a generation counts: a chat's ids are its prompt_tokens, a vLLM
// prompt's are /v1/completions' and `zerolayer tokenize`'s; llama-server's
// content round-trips through /detokenize; a bad id is a 400 naming it;
// behind API keys they want one.
TEST(ServerRealTest, TokenizeCountsWhatAGenerationCounts) {
  REQUIRE_MODEL();
  const std::string msgs =
      R"("messages":[{"role":"system","content":"You tell short stories."},{"role":"user","content":"Tom had a red ball."}])";
  HttpReply t = fetch(main_port(), "POST", "/tokenize", "{" + msgs + "}");
  ASSERT_EQ(t.status, 200) << t.body;
  json::object tok = parse_obj(t.body);
  const int64_t n_chat = num(at(tok, {"count"}));
  EXPECT_EQ(static_cast<int64_t>(tok["tokens"].as_array().size()), n_chat);
  EXPECT_EQ(num(at(tok, {"max_model_len"})), 2048);
  HttpReply g = fetch(main_port(), "POST", "/v1/chat/completions",
                      R"({"model":"m","max_tokens":1,"temperature":0,)" + msgs + "}", {}, 60000);
  ASSERT_EQ(g.status, 200) << g.body;
  EXPECT_EQ(num(at(parse_obj(g.body), {"usage", "prompt_tokens"})), n_chat);
  // Without the generation prompt: fewer ids, the same beginning.
  HttpReply closed = fetch(main_port(), "POST", "/tokenize", "{" + msgs + R"(,"add_generation_prompt":false})");
  ASSERT_EQ(closed.status, 200) << closed.body;
  json::object closed_obj = parse_obj(closed.body);
  const json::array& ca = closed_obj["tokens"].as_array();
  ASSERT_LT(static_cast<int64_t>(ca.size()), n_chat);
  for (size_t i = 0; i < ca.size(); ++i) EXPECT_EQ(ca[i], tok["tokens"].as_array()[i]) << i;

  const std::string text = "Once upon a time, Lily saw a cat.";
  HttpReply p = fetch(main_port(), "POST", "/tokenize", R"({"model":"m","prompt":)" + jquote(text) + R"(,"return_token_strs":true})");
  ASSERT_EQ(p.status, 200) << p.body;
  json::object pj = parse_obj(p.body);
  CommandResult cli = run_command(zerolayer_bin() + " tokenize --json --model " + model_path() + " --text " +
                                  jquote(text) + " 2>/dev/null");
  ASSERT_EQ(cli.exit_code, 0) << cli.out;
  EXPECT_EQ(json::serialize(pj["tokens"]), json::serialize(json::parse(cli.out)));
  EXPECT_EQ(pj["token_strs"].as_array().size(), pj["tokens"].as_array().size());
  HttpReply c = fetch(main_port(), "POST", "/v1/completions",
                      R"({"model":"m","max_tokens":1,"temperature":0,"prompt":)" + jquote(text) + "}", {}, 60000);
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(num(at(parse_obj(c.body), {"usage", "prompt_tokens"})), static_cast<int64_t>(pj["tokens"].as_array().size()));

  // llama-server: content without BOS, each id with its piece; the ids detokenize to the text.
  HttpReply l = fetch(main_port(), "POST", "/tokenize", R"({"content":)" + jquote(text) + R"(,"with_pieces":true})");
  ASSERT_EQ(l.status, 200) << l.body;
  json::array ids;
  std::string joined;
  json::object lj = parse_obj(l.body);
  for (const json::value& e : lj["tokens"].as_array()) {
    ids.push_back(e.as_object().at("id"));
    joined += e.as_object().at("piece").as_string();
  }
  // (stories260K is a SentencePiece vocabulary with a space prefix: its first
  // piece is " Once", as llama-server shows it too.)
  EXPECT_EQ(joined, " " + text);
  EXPECT_EQ(ids.size() + 1, pj["tokens"].as_array().size());  // the vLLM prompt has BOS
  HttpReply d = fetch(main_port(), "POST", "/detokenize", R"({"tokens":)" + json::serialize(ids) + "}");
  ASSERT_EQ(d.status, 200) << d.body;
  EXPECT_EQ(str(at(parse_obj(d.body), {"content"})), " " + text);
  EXPECT_EQ(str(at(parse_obj(d.body), {"prompt"})), " " + text);

  HttpReply bad = fetch(main_port(), "POST", "/detokenize", R"({"tokens":[1,512]})");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(str(at(parse_obj(bad.body), {"error", "param"})), "tokens[1]") << bad.body;
  HttpReply none = fetch(main_port(), "POST", "/tokenize", "{}");
  EXPECT_EQ(none.status, 400) << none.body;
  EXPECT_EQ(str(at(parse_obj(none.body), {"error", "type"})), "invalid_request_error") << none.body;

  const int keyed = server("keys", {"--api-key", "key-A", "--api-key", "key-B"}).port();
  EXPECT_EQ(fetch(keyed, "POST", "/tokenize", R"({"content":"hi"})").status, 401);
  EXPECT_EQ(fetch(keyed, "POST", "/detokenize", R"({"tokens":[1]})").status, 401);
  EXPECT_EQ(fetch(keyed, "POST", "/tokenize", R"({"content":"hi"})", {"Authorization: Bearer key-B"}).status, 200);
}

TEST(ServerRealTest, StopSequencesStopWithTheString) {
  REQUIRE_MODEL();
  Answer base = anthropic_call(main_port(), msg_body("Once upon a time", R"("max_tokens":48)"));
  ASSERT_EQ(base.status, 200);
  ASSERT_GE(base.text.size(), 40u) << base.text;
  // A stop string from the middle of the greedy answer: the answer stops
  // right before its first occurrence, which is never emitted.
  const std::string stop = base.text.substr(base.text.size() / 2, 4);
  const std::string before = base.text.substr(0, base.text.find(stop));
  for (bool stream : {false, true}) {
    const std::string body = msg_body("Once upon a time", R"("max_tokens":48,"stop_sequences":["zzzz",)" + jquote(stop) +
                                                              "]" + (stream ? R"(,"stream":true)" : ""));
    Answer a = stream ? anthropic_stream(main_port(), body) : anthropic_call(main_port(), body);
    ASSERT_EQ(a.status, 200);
    EXPECT_EQ(a.stop_reason, "stop_sequence") << (stream ? "stream" : "non-stream");
    EXPECT_EQ(a.stop_sequence, stop);
    EXPECT_EQ(a.text, before);
  }
  Answer o = openai_chat(main_port(), "Once upon a time", R"("max_tokens":48,"stop":)" + jquote(stop), true);
  EXPECT_EQ(o.stop_reason, "stop");
  EXPECT_EQ(o.text, before);
}

// `seed` (an extension on /v1/messages, as on the OpenAI routes): sampled
// answers with the same seed are the same tokens; other seeds differ.
TEST(ServerRealTest, MessagesSeedRepeatsASampledAnswer) {
  REQUIRE_MODEL();
  auto sampled = [](int seed) {
    Answer a = anthropic_call(main_port(), msg_body("Once upon a time", R"("max_tokens":32,"temperature":1.0,"seed":)" +
                                                                             std::to_string(seed)));
    EXPECT_EQ(a.status, 200);
    return a.text;
  };
  const std::string first = sampled(7);
  EXPECT_EQ(sampled(7), first);
  std::set<std::string> others;
  for (int seed = 1; seed <= 4; ++seed) others.insert(sampled(seed));
  EXPECT_GT(others.size(), 1u) << "different seeds, different answers";
  Answer bad = anthropic_call(main_port(), msg_body("Once upon a time", R"("max_tokens":4,"seed":"x")"));
  EXPECT_EQ(bad.status, 400);
}

TEST(ServerRealTest, MaxTokensStopsWithMaxTokens) {
  REQUIRE_MODEL();
  for (bool stream : {false, true}) {
    const std::string body = msg_body("Once upon a time", stream ? R"("max_tokens":5,"stream":true)" : R"("max_tokens":5)");
    Answer a = stream ? anthropic_stream(main_port(), body) : anthropic_call(main_port(), body);
    ASSERT_EQ(a.status, 200);
    EXPECT_EQ(a.stop_reason, "max_tokens");
    EXPECT_EQ(a.output_tokens, 5);
  }
  Answer o = openai_chat(main_port(), "Once upon a time", R"("max_tokens":5)", false);
  EXPECT_EQ(o.stop_reason, "length");
  EXPECT_EQ(o.output_tokens, 5);
}

TEST(ServerRealTest, PromptOverTheContextIs400WithTheCounts) {
  REQUIRE_MODEL();
  std::string longer;
  for (int i = 0; i < 40; ++i) longer += "The little dog ran to the park. ";
  HttpReply count = fetch(small_port(), "POST", "/v1/messages/count_tokens",
                          R"({"model":"m","messages":[{"role":"user","content":)" + jquote(longer) + "}]}");
  const int64_t n = num(at(parse_obj(count.body), {"input_tokens"}));
  ASSERT_GT(n, 64);
  for (bool stream : {false, true}) {
    HttpReply r = fetch(small_port(), "POST", "/v1/messages",
                        msg_body(longer, stream ? R"("max_tokens":10,"stream":true)" : R"("max_tokens":10)"));
    EXPECT_EQ(r.status, 400) << r.body;
    json::object o = parse_obj(r.body);
    EXPECT_EQ(str(at(o, {"type"})), "error");
    EXPECT_EQ(str(at(o, {"error", "type"})), "invalid_request_error");
    EXPECT_EQ(str(at(o, {"error", "detail", "reason"})), "context_length_exceeded");
    EXPECT_EQ(num(at(o, {"error", "detail", "n_prompt_tokens"})), n);
    EXPECT_EQ(num(at(o, {"error", "detail", "n_ctx"})), 64);
  }
  Answer o = openai_chat(small_port(), longer, R"("max_tokens":10)", false);
  EXPECT_EQ(o.status, 400);
  EXPECT_EQ(str(at(o.raw, {"error", "code"})), "context_length_exceeded");
}

// A logit_bias or stop_token_ids id past the vocabulary is a 400 naming the
// field, not silently ignored.
TEST(ServerRealTest, LogitBiasOutsideTheVocabularyIs400) {
  REQUIRE_MODEL();
  for (const auto& [field, param] : std::vector<std::pair<std::string, std::string>>{
           {R"("logit_bias":{"99999999":100})", "logit_bias"}, {R"("stop_token_ids":[512])", "stop_token_ids"}}) {
    const std::string body = R"({"model":"m","max_tokens":4,)" + field + R"(,"messages":[{"role":"user","content":"hi"}]})";
    HttpReply r = fetch(main_port(), "POST", "/v1/chat/completions", body);
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(str(at(parse_obj(r.body), {"error", "code"})), "invalid_value") << r.body;
    EXPECT_EQ(str(at(parse_obj(r.body), {"error", "param"})), param) << r.body;
  }
}

TEST(ServerRealTest, MaxTokensAboveTheContextIsClampedAndFillsTheWindow) {
  REQUIRE_MODEL();
  // Anthropic: the generation runs to the end of the 64-token window (stories
  // of this model do not end within it from this prompt; if one ever did,
  // the answer would say end_turn and the check below names it).
  for (bool stream : {false, true}) {
    const std::string body = msg_body("Once upon a time", stream ? R"("max_tokens":100000,"stream":true)"
                                                                 : R"("max_tokens":100000)");
    Answer a = stream ? anthropic_stream(small_port(), body) : anthropic_call(small_port(), body);
    ASSERT_EQ(a.status, 200) << json::serialize(a.raw);
    EXPECT_EQ(a.stop_reason, "model_context_window_exceeded");
    EXPECT_EQ(a.input_tokens + a.cached_tokens + a.output_tokens, 64);
  }
  // OpenAI: `length`, with the end-of-sequence token banned to be sure.
  for (bool stream : {false, true}) {
    Answer o = openai_chat(small_port(), "Once upon a time", std::string(R"("max_tokens":100000,)") + kNoEos, stream);
    ASSERT_EQ(o.status, 200);
    EXPECT_EQ(o.stop_reason, "length");
    EXPECT_EQ(o.input_tokens + o.output_tokens, 64);
  }
}

TEST(ServerRealTest, ClientDisconnectCancelsTheSequence) {
  REQUIRE_MODEL();
  const int port = main_port();
  for (bool stream : {true, false}) {
    const int64_t before = metric(port, "engine_generation_tokens_total");
    {
      // ~2000 tokens if nothing stopped it.
      RawClient c(port);
      const std::string body = std::string(R"({"model":"m","max_tokens":100000,)") + kNoEos +
                               R"(,"messages":[{"role":"user","content":"Tell me a long story"}])" +
                               (stream ? R"(,"stream":true})" : "}");
      ASSERT_TRUE(c.send_raw(http_request("POST", "/v1/chat/completions", body)));
      if (stream) {
        ASSERT_TRUE(c.read_until([](const std::string& b) { return b.find("\"content\"") != std::string::npos; }, 20000));
      }
      // Running now (the whole generation takes a while even on a fast machine).
      EXPECT_EQ(wait_metric(port, "engine_requests_running", 1, 5000), 1);
      c.abort_now();
    }
    EXPECT_EQ(wait_metric(port, "engine_requests_running", 0, 5000), 0)
        << (stream ? "stream" : "non-stream") << ": the sequence kept running after the client left";
    const int64_t generated = metric(port, "engine_generation_tokens_total") - before;
    EXPECT_LT(generated, 1000) << "the sequence was not cancelled early";
  }
}

// A body of 64 KB or more is handled off the I/O thread (http/offload.h):
// the same answers as inline, a client's leaving still cancels its sequence,
// and a 24 MB count_tokens (seconds of parsing and tokenizing) does not hold
// up the other answers of the server's one I/O thread.
TEST(ServerRealTest, LargeBodiesAreHandledOffTheIoThread) {
  REQUIRE_MODEL();
  const int port = main_port();
  const auto padded = [](std::string body) {  // JSON whitespace: the same request, 70 KB more body
    body.insert(body.size() - 1, std::string(70000, ' '));
    return body;
  };
  const std::string body = msg_body("Once upon a time", R"("max_tokens":24)");
  const Answer inline_answer = anthropic_call(port, body);
  const Answer offloaded = anthropic_call(port, padded(body));
  ASSERT_EQ(inline_answer.status, 200);
  ASSERT_EQ(offloaded.status, 200) << json::serialize(offloaded.raw);
  EXPECT_EQ(offloaded.text, inline_answer.text);
  EXPECT_EQ(offloaded.output_tokens, inline_answer.output_tokens);
  const Answer streamed = anthropic_stream(port, padded(msg_body("Once upon a time", R"("max_tokens":24,"stream":true)")));
  ASSERT_EQ(streamed.status, 200);
  EXPECT_EQ(streamed.text, inline_answer.text);
  // Two choices (joined by a fan-out), and an error answer.
  HttpReply two = fetch(port, "POST", "/v1/chat/completions",
                        padded(R"({"model":"m","max_tokens":8,"temperature":0,"n":2,"messages":[{"role":"user","content":"Once upon a time"}]})"),
                        {}, 60000);
  ASSERT_EQ(two.status, 200) << two.body.substr(0, 300);
  json::object two_obj = parse_obj(two.body);
  ASSERT_EQ(two_obj["choices"].as_array().size(), 2u);
  EXPECT_EQ(str(at(two_obj, {"choices", "0", "message", "content"})), str(at(two_obj, {"choices", "1", "message", "content"})));
  HttpReply bad = fetch(port, "POST", "/v1/messages", padded(R"({"model":"m","max_tokens":-1,"messages":[]})"));
  EXPECT_EQ(bad.status, 400) << bad.body.substr(0, 300);
  EXPECT_EQ(str(at(parse_obj(bad.body), {"type"})), "error");
  {
    const int64_t before = metric(port, "engine_generation_tokens_total");
    RawClient c(port);
    const std::string body = padded(std::string(R"({"model":"m","max_tokens":100000,)") + kNoEos +
                                    R"(,"stream":true,"messages":[{"role":"user","content":"Tell me a long story"}]})");
    ASSERT_TRUE(c.send_raw(http_request("POST", "/v1/chat/completions", body)));
    ASSERT_TRUE(c.read_until([](const std::string& b) { return b.find("\"content\"") != std::string::npos; }, 20000));
    EXPECT_EQ(wait_metric(port, "engine_requests_running", 1, 5000), 1);
    c.abort_now();
    EXPECT_EQ(wait_metric(port, "engine_requests_running", 0, 5000), 0) << "the sequence kept running after the client left";
    EXPECT_LT(metric(port, "engine_generation_tokens_total") - before, 1000) << "the sequence was not cancelled early";
  }
  // The count on one connection; /health on another while it runs.
  const std::string sentence = "Once upon a time, Lily saw a cat. ";
  std::string text;
  text.reserve(24u << 20);
  while (text.size() < (24u << 20)) text += sentence;
  RawClient counting(port);
  ASSERT_TRUE(counting.send_raw(http_request(
      "POST", "/v1/messages/count_tokens", R"({"model":"m","messages":[{"role":"user","content":")" + text + R"("}]})")));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // the body read; its tokens take seconds
  HttpReply health = fetch(port, "GET", "/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(counting.read_some(1, 0), 0u) << "the count was answered before /health: /health waited for it";
  HttpReply count = counting.read_response(120000);
  ASSERT_EQ(count.status, 200) << count.body.substr(0, 300);
  EXPECT_GT(num(at(parse_obj(count.body), {"input_tokens"})), static_cast<int64_t>(text.size() / 8));
}

TEST(ServerRealTest, SixteenConcurrentStreamsCompleteWithTheirSoloText) {
  REQUIRE_MODEL();
  constexpr int kN = 16;
  auto prompt = [](int i) { return "Story number " + std::to_string(i) + ": once upon a time"; };
  const int port = main_port();
  ASSERT_GT(port, 0);
  std::vector<Answer> answers(kN);
  std::vector<std::thread> threads;
  for (int i = 0; i < kN; ++i) {
    threads.emplace_back([&, i] {
      answers[i] = anthropic_stream(port, msg_body(prompt(i), R"("max_tokens":24,"stream":true)"));
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kN; ++i) {
    ASSERT_EQ(answers[i].status, 200) << i;
    EXPECT_FALSE(answers[i].stop_reason.empty()) << i;
    // Batching changes nothing in a greedy answer (the runner is batch-invariant).
    Answer solo = anthropic_call(port, msg_body(prompt(i), R"("max_tokens":24)"));
    EXPECT_EQ(answers[i].text, solo.text) << i;
    EXPECT_EQ(answers[i].output_tokens, solo.output_tokens) << i;
  }
}

TEST(ServerRealTest, GreedyOutputEqualsZerolayerGenerate) {
  REQUIRE_MODEL();
  const std::string prompt = "Once upon a time";
  // /v1/completions tokenizes the raw prompt like `generate --prompt` (BOS added).
  HttpReply r = fetch(main_port(), "POST", "/v1/completions",
                      R"({"model":"m","max_tokens":40,"temperature":0,"prompt":)" + jquote(prompt) + "}", {}, 60000);
  ASSERT_EQ(r.status, 200) << r.body;
  json::object served = parse_obj(r.body);
  const json::object& choice = served["choices"].as_array()[0].as_object();
  CommandResult g = run_command(zerolayer_bin() + " generate --model " + model_path() +
                                " --prompt '" + prompt + "' -n 40 --temperature 0 --threads 1 --json 2>/dev/null");
  ASSERT_EQ(g.exit_code, 0) << g.out;
  json::object local = parse_obj(g.out);
  EXPECT_EQ(str(at(choice, {"text"})), str(at(local, {"text"})));
  EXPECT_EQ(num(at(served, {"usage", "prompt_tokens"})), static_cast<int64_t>(local["prompt_ids"].as_array().size()));
  // Both count a final end-of-sequence token (generate lists its id).
  EXPECT_EQ(num(at(served, {"usage", "completion_tokens"})),
            static_cast<int64_t>(local["generated_ids"].as_array().size()));
}

// /v1/completions takes the prompt as token ids too (vLLM, llama-server; lm-eval's
// local-completions sends them): used as given (no BOS added), so `generate`'s prompt_ids give
// the answer the text gives; [[ids]] is one prompt as well. Ids outside the vocabulary, empty
// arrays and several prompts are 400s naming `prompt`.
TEST(ServerRealTest, CompletionsTakeTokenIdPrompts) {
  REQUIRE_MODEL();
  const std::string prompt = "Once upon a time";
  CommandResult g = run_command(zerolayer_bin() + " generate --model " + model_path() + " --prompt '" + prompt +
                                "' -n 12 --temperature 0 --threads 1 --json 2>/dev/null");
  ASSERT_EQ(g.exit_code, 0) << g.out;
  json::object local = parse_obj(g.out);
  const std::string ids = json::serialize(local["prompt_ids"]);
  const std::string head = R"({"model":"m","max_tokens":12,"temperature":0,"prompt":)";
  for (const std::string& p : {ids, "[" + ids + "]"}) {
    HttpReply r = fetch(main_port(), "POST", "/v1/completions", head + p + "}", {}, 60000);
    ASSERT_EQ(r.status, 200) << p << " " << r.body;
    json::object served = parse_obj(r.body);
    EXPECT_EQ(str(&served["choices"].as_array()[0].as_object()["text"]), str(at(local, {"text"}))) << p;
    EXPECT_EQ(num(at(served, {"usage", "prompt_tokens"})), static_cast<int64_t>(local["prompt_ids"].as_array().size()));
  }
  const std::string n_vocab_id = std::to_string(1 << 30);
  for (const std::string& bad : {"[1, " + n_vocab_id + "]", std::string("[]"), std::string("[[]]"),
                                 "[[1,2],[3, " + n_vocab_id + "]]", std::string("[1, -2]"), std::string("[1, 2.5]"),
                                 std::string("[1, \"a\"]")}) {
    HttpReply r = fetch(main_port(), "POST", "/v1/completions", head + bad + "}", {}, 60000);
    EXPECT_EQ(r.status, 400) << bad << " " << r.body;
    EXPECT_NE(r.body.find("\"param\":\"prompt"), std::string::npos) << bad << " " << r.body;
  }
}

// OpenAI n and several prompts on an engine with fewer batch slots than choices and no queue:
// the choices run a batch's worth at a time, so the request is answered (greedy: every choice
// the solo answer), never refused as if the idle server were overloaded. The next choice is
// submitted as one ends: the engine frees a slot before its last event (engine_queue_test).
TEST(ServerRealTest, MoreChoicesThanBatchSlotsAreAnsweredOnAnIdleServer) {
  REQUIRE_MODEL();
  const int port = narrow_port();
  const std::string head = R"({"model":"m","max_tokens":8,"temperature":0,)";
  HttpReply solo = fetch(port, "POST", "/v1/completions", head + R"("prompt":"Once upon a time"})", {}, 60000);
  ASSERT_EQ(solo.status, 200) << solo.body;
  const std::string text = str(&parse_obj(solo.body)["choices"].as_array()[0].as_object()["text"]);
  for (bool stream : {false, true}) {
    HttpReply r = fetch(port, "POST", "/v1/completions",
                        head + R"("n":8,"prompt":["Once upon a time","Once upon a time"])" +
                            (stream ? R"(,"stream":true})" : "}"),
                        {}, 60000);
    ASSERT_EQ(r.status, 200) << (stream ? "stream: " : "whole: ") << r.body;
    std::vector<std::string> texts(16);
    if (stream) {
      std::vector<SseEvent> ev = parse_sse(r.body);
      ASSERT_FALSE(ev.empty());
      EXPECT_EQ(ev.back().data, "[DONE]");
      for (size_t k = 0; k + 1 < ev.size(); ++k) {
        json::object chunk = parse_obj(ev[k].data);
        EXPECT_EQ(chunk.find("error"), chunk.end()) << ev[k].data;
        if (!chunk.contains("choices")) continue;
        for (const json::value& c : chunk["choices"].as_array()) {
          texts.at(static_cast<size_t>(c.at("index").as_int64())) += c.at("text").as_string().c_str();
        }
      }
    } else {
      json::object answer = parse_obj(r.body);
      ASSERT_EQ(answer["choices"].as_array().size(), 16u) << r.body;
      for (size_t i = 0; i < 16; ++i) texts[i] = answer["choices"].as_array()[i].at("text").as_string().c_str();
    }
    for (size_t i = 0; i < 16; ++i) EXPECT_EQ(texts[i], text) << (stream ? "stream, " : "whole, ") << "choice " << i;
  }
  EXPECT_EQ(wait_metric(port, "engine_requests_running", 0, 5000), 0);
}

// /v1/completions echo: the text begins with the prompt, and with logprobs the entries begin
// with the prompt tokens' (the first null), streamed in the first chunk; max_tokens 0 then
// gives the prompt alone (lm-eval's loglikelihood requests). A prompt token's entry is the one
// the same token got when it was generated; without echo, max_tokens 0 stays a 400.
TEST(ServerRealTest, CompletionsEchoThePromptWithItsLogprobs) {
  REQUIRE_MODEL();
  const int port = main_port();
  const std::string prompt = "Once upon a time";
  auto completion = [&](const std::string& fields) {
    HttpReply r = fetch(port, "POST", "/v1/completions",
                        R"({"model":"m","temperature":0,"prompt":)" + jquote(prompt) + "," + fields + "}", {}, 60000);
    EXPECT_EQ(r.status, 200) << fields << " " << r.body;
    return parse_obj(r.body);
  };
  json::object plain = completion(R"("max_tokens":6,"logprobs":2)");
  json::object echoed = completion(R"("max_tokens":6,"logprobs":2,"echo":true)");
  const json::object& pc = plain["choices"].as_array()[0].as_object();
  const json::object& ec = echoed["choices"].as_array()[0].as_object();
  EXPECT_EQ(str(&ec.at("text")), prompt + str(&pc.at("text")));
  const int64_t n_prompt = num(at(echoed, {"usage", "prompt_tokens"}));
  const json::array& tokens = ec.at("logprobs").at("tokens").as_array();
  const json::array& values = ec.at("logprobs").at("token_logprobs").as_array();
  const json::array& tops = ec.at("logprobs").at("top_logprobs").as_array();
  ASSERT_EQ(static_cast<int64_t>(tokens.size()), n_prompt + 6);
  ASSERT_EQ(values.size(), tokens.size());
  EXPECT_TRUE(values[0].is_null());
  EXPECT_TRUE(tops[0].is_null());
  for (size_t i = 1; i < values.size(); ++i) EXPECT_TRUE(values[i].is_double()) << i;
  // The generated part is the plain answer's, entry for entry.
  const json::value& plain_values = pc.at("logprobs").at("token_logprobs");
  EXPECT_EQ(json::serialize(json::array(values.begin() + n_prompt, values.end())), json::serialize(plain_values));

  // Streamed: the prompt and its entries in the first chunk; the same whole.
  HttpReply sr = fetch(port, "POST", "/v1/completions",
                       R"({"model":"m","temperature":0,"max_tokens":6,"logprobs":2,"echo":true,"stream":true,"prompt":)" +
                           jquote(prompt) + "}", {}, 60000);
  ASSERT_EQ(sr.status, 200);
  std::string text;
  json::array streamed;
  bool first = true;
  for (const SseEvent& e : parse_sse(sr.body)) {
    if (e.data == "[DONE]") continue;
    json::object chunk = parse_obj(e.data);
    const json::object& c = chunk["choices"].as_array()[0].as_object();
    if (first) EXPECT_EQ(str(&c.at("text")), prompt);
    first = false;
    text += str(&c.at("text"));
    if (c.at("logprobs").is_object()) {
      for (const json::value& v : c.at("logprobs").at("token_logprobs").as_array()) streamed.push_back(v);
    }
  }
  EXPECT_EQ(text, str(&ec.at("text")));
  EXPECT_EQ(json::serialize(streamed), json::serialize(values));

  // max_tokens 0: the prompt alone. The answer's tokens as the prompt (ids): their entries as
  // when they were generated.
  json::object only = completion(R"("max_tokens":0,"logprobs":1,"echo":true)");
  const json::object& oc = only["choices"].as_array()[0].as_object();
  EXPECT_EQ(str(&oc.at("text")), prompt);
  EXPECT_EQ(num(at(only, {"usage", "completion_tokens"})), 0);
  EXPECT_EQ(static_cast<int64_t>(oc.at("logprobs").at("tokens").as_array().size()), n_prompt);
  CommandResult g = run_command(zerolayer_bin() + " generate --model " + model_path() + " --prompt '" + prompt +
                                "' -n 6 --temperature 0 --threads 1 --json 2>/dev/null");
  ASSERT_EQ(g.exit_code, 0) << g.out;
  json::object local = parse_obj(g.out);
  json::array ids = local["prompt_ids"].as_array();
  for (const json::value& v : local["generated_ids"].as_array()) ids.push_back(v);
  HttpReply ir = fetch(port, "POST", "/v1/completions",
                       R"({"model":"m","max_tokens":0,"logprobs":2,"echo":true,"prompt":)" + json::serialize(ids) + "}",
                       {}, 60000);
  ASSERT_EQ(ir.status, 200) << ir.body;
  json::object by_ids = parse_obj(ir.body);
  const json::array& iv = by_ids["choices"].as_array()[0].as_object()["logprobs"].as_object()["token_logprobs"].as_array();
  ASSERT_EQ(iv.size(), ids.size());
  EXPECT_EQ(json::serialize(json::array(iv.begin() + n_prompt, iv.end())), json::serialize(plain_values));

  HttpReply bad = fetch(port, "POST", "/v1/completions", R"({"model":"m","max_tokens":0,"prompt":"x"})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("\"param\":\"max_tokens\""), std::string::npos) << bad.body;
}

// Backpressure (DESIGN.md §1): a client that does not read gets its
// sequence paused once the connection's write buffer and the channel fill;
// the paused sequence costs no compute; reading resumes it to the end.
TEST(ServerRealTest, BackpressurePausesAStreamWhoseClientDoesNotRead) {
  REQUIRE_MODEL();
  ServerProcess& s = server("backpressure", {"--ctx", "1024", "--max-pending-events", "8", "--socket-send-buffer", "16384"});
  ASSERT_TRUE(s.ok());
  const int port = s.port();
  const int64_t before = metric(port, "engine_generation_tokens_total");
  RawClient c(port, /*rcvbuf_bytes=*/4096);
  const std::string body = std::string(R"({"model":"m","max_tokens":100000,"stream":true,)") + kNoEos +
                           R"(,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Tell me a long story"}]})";
  ASSERT_TRUE(c.send_raw(http_request("POST", "/v1/chat/completions", body)));
  // Not reading: generation advances, then stalls well before the window ends.
  int64_t last = -1, now = metric(port, "engine_generation_tokens_total");
  for (int i = 0; i < 120 && now != last; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    last = now;
    now = metric(port, "engine_generation_tokens_total");
  }
  const int64_t paused_at = now - before;
  std::printf("paused after %lld of %d tokens\n", static_cast<long long>(paused_at), 1024 - 28);
  ASSERT_EQ(now, last) << "the generation never stalled";
  EXPECT_GT(paused_at, 0);
  EXPECT_LT(paused_at, 900) << "paused too late: the I/O side buffered the stream";
  EXPECT_EQ(metric(port, "engine_requests_running"), 1) << "the sequence must be paused, not finished";
  // Paused costs (next to) nothing: no spinning engine loop.
  const double cpu0 = cpu_seconds(s.pid());
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  const double cpu1 = cpu_seconds(s.pid());
  EXPECT_LT(cpu1 - cpu0, 0.25) << "CPU seconds used in 1 s while paused";
  EXPECT_EQ(metric(port, "engine_generation_tokens_total"), now);
  // Reading resumes it to the end of the window.
  HttpReply r = c.read_response(120000);
  ASSERT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  std::vector<SseEvent> ev = parse_sse(r.body);
  ASSERT_GE(ev.size(), 3u);
  EXPECT_EQ(ev.back().data, "[DONE]");
  json::object usage = parse_obj(ev[ev.size() - 2].data);
  const int64_t n_prompt = num(at(usage, {"usage", "prompt_tokens"}));
  const int64_t n_out = num(at(usage, {"usage", "completion_tokens"}));
  EXPECT_EQ(n_prompt + n_out, 1024);
  EXPECT_GT(n_out, paused_at);
  EXPECT_EQ(wait_metric(port, "engine_generation_tokens_total", before + n_out, 2000) - before, n_out);
  EXPECT_EQ(wait_metric(port, "engine_requests_running", 0, 5000), 0);
}

}  // namespace
}  // namespace zl::test
