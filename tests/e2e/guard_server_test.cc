// The guard in the serving path, end to end: `zerolayer serve --guard FILE`
// on the REAL engine and ../shared/models/stories260K.gguf, spoken to over
// raw sockets, both APIs, streamed and not.
//
// The words the policies name are taken from what greedy decoding writes on
// a server without a guard (run first, same prompt), so each test exercises
// its action on text the model really produces:
//   mask    the word never appears and the answer goes on (same length);
//   redact  streamed deltas, concatenated one by one, are at every point a
//           prefix of the unguarded text with the word replaced: no delta
//           ever carried a byte of a match (hold-back);
//   stop    refusal / content_filter, the text before the word kept;
//   input   block (400 safety_violation + rule, nothing queued, also when a
//           U+200B splits the phrase) and redact (count_tokens and usage
//           count the placeholder the model saw), both APIs;
//   start   a bad policy file stops the server with exit 2, naming the line.
// The model tests are skipped, with a message, when ../shared is absent; the
// input actions are also checked on the test server's fake engine, and the
// bad file needs no model.
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cctype>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "support/http_client.h"
#include "support/json_object.h"
#include "support/json_path.h"
#include "support/openai_stream.h"
#include "support/process.h"
#include "support/real_model.h"
#include "support/temp_files.h"

namespace zl::test {
namespace {

namespace json = boost::json;

const auto* const kCleanup = testing_support::register_temp_cleanup("zl_guard_server_test");

constexpr const char* kPrompt = "Once upon a time";
constexpr int kMaxTokens = 60;

// A server on the model with `extra` flags, started once per process per name.
ServerProcess& server(const std::string& name, const std::vector<std::string>& extra) {
  static LazyServers servers;
  return servers.real(name, extra);
}

// A server whose guard policy is `toml` (written to a temp file named after it).
int guarded_port(const std::string& name, const std::string& toml) {
  const std::string path = testing_support::temp_file("zl_guard_server_test", name + ".toml");
  {
    std::ofstream f(path);
    f << toml;
  }
  ServerProcess& s = server(name, {"--guard", path});
  EXPECT_TRUE(s.ok()) << "the server with policy " << name << " did not start";
  return s.port();
}

int plain_port() { return server("plain", {}).port(); }


std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
bool contains_ci(const std::string& text, const std::string& word) {
  return lower(text).find(lower(word)) != std::string::npos;
}
// Every ASCII-case-insensitive occurrence of `word` replaced by `with`.
std::string replace_ci(const std::string& text, const std::string& word, const std::string& with) {
  const std::string lt = lower(text), lw = lower(word);
  std::string out;
  size_t pos = 0;
  for (size_t at = lt.find(lw); at != std::string::npos; at = lt.find(lw, pos)) {
    out.append(text, pos, at - pos);
    out += with;
    pos = at + lw.size();
  }
  out.append(text, pos);
  return out;
}

// The words (letters only) of `text` with at least 4 letters, in order.
std::vector<std::string> words(const std::string& text) {
  std::vector<std::string> out;
  std::string w;
  for (char c : text + " ") {
    if (std::isalpha(static_cast<unsigned char>(c))) {
      w += c;
    } else {
      if (w.size() >= 4) out.push_back(w);
      w.clear();
    }
  }
  return out;
}
// The most frequent of them (ties: the first written).
std::string frequent_word(const std::string& text) {
  const std::vector<std::string> ws = words(text);
  std::string best;
  int best_n = 0;
  for (const std::string& w : ws) {
    const int n = static_cast<int>(std::count_if(ws.begin(), ws.end(), [&](const std::string& x) { return lower(x) == lower(w); }));
    if (n > best_n) best = w, best_n = n;
  }
  return best;
}

// One answer: the deltas as they came (streams) and how it ended.
struct Answer {
  int status = 0;
  std::vector<std::string> deltas;  // a non-streamed answer: one
  std::string text;
  std::string stop_reason;  // Anthropic stop_reason / OpenAI finish_reason
  int64_t input_tokens = -1, output_tokens = -1;
  json::object raw;  // the error body
};

std::string anthropic_body(const std::string& content, bool stream, const std::string& extra = "") {
  return R"({"model":"claude-x","temperature":0,"max_tokens":)" + std::to_string(kMaxTokens) +
         R"(,"messages":[{"role":"user","content":)" + jquote(content) + "}]" + (stream ? R"(,"stream":true)" : "") +
         extra + "}";
}

Answer anthropic(int port, const std::string& body) {
  HttpReply r = fetch(port, "POST", "/v1/messages", body, {}, 60000);
  Answer a{.status = r.status};
  EXPECT_TRUE(r.complete) << body;
  if (r.status != 200) {
    a.raw = parse_obj(r.body);
    return a;
  }
  if (r.header("content-type") != "text/event-stream") {
    json::object o = parse_obj(r.body);
    const json::value* content = o.if_contains("content");
    if (content && content->is_array() && !content->get_array().empty()) {
      a.text = str(at(content->get_array()[0].get_object(), {"text"}));
    }
    a.deltas = {a.text};
    a.stop_reason = str(at(o, {"stop_reason"}));
    a.input_tokens = num(at(o, {"usage", "input_tokens"}));
    a.output_tokens = num(at(o, {"usage", "output_tokens"}));
    return a;
  }
  for (const SseEvent& e : parse_sse(r.body)) {
    json::object o = parse_obj(e.data);
    if (e.event == "message_start") a.input_tokens = num(at(o, {"message", "usage", "input_tokens"}));
    if (e.event == "content_block_delta") a.deltas.push_back(str(at(o, {"delta", "text"})));
    if (e.event == "message_delta") {
      a.stop_reason = str(at(o, {"delta", "stop_reason"}));
      a.output_tokens = num(at(o, {"usage", "output_tokens"}));
    }
  }
  for (const std::string& d : a.deltas) a.text += d;
  return a;
}

Answer openai(int port, const std::string& content, bool stream) {
  const std::string body = R"({"model":"gpt-x","temperature":0,"max_tokens":)" + std::to_string(kMaxTokens) +
                           R"(,"messages":[{"role":"user","content":)" + jquote(content) + "}]" +
                           (stream ? R"(,"stream":true,"stream_options":{"include_usage":true})" : "") + "}";
  HttpReply r = fetch(port, "POST", "/v1/chat/completions", body, {}, 60000);
  Answer a{.status = r.status};
  EXPECT_TRUE(r.complete) << body;
  if (r.status != 200 || !stream) {
    a.raw = parse_obj(r.body);
    if (r.status != 200) return a;
    const json::object& choice = a.raw["choices"].as_array()[0].as_object();
    a.text = str(at(choice, {"message", "content"}));
    a.deltas = {a.text};
    a.stop_reason = str(at(choice, {"finish_reason"}));
    a.input_tokens = num(at(a.raw, {"usage", "prompt_tokens"}));
    a.output_tokens = num(at(a.raw, {"usage", "completion_tokens"}));
    return a;
  }
  std::vector<SseEvent> ev = parse_sse(r.body);
  const ChatStream s = read_chat_stream(ev);
  a.input_tokens = s.prompt_tokens;
  a.output_tokens = s.completion_tokens;
  a.stop_reason = s.finish_reason;
  a.deltas = s.pieces;
  for (const std::string& d : a.deltas) a.text += d;
  return a;
}

// The greedy answers of the unguarded server, per API.
const std::string& plain_text(bool openai_api) {
  static std::string texts[2];
  std::string& t = texts[openai_api];
  if (t.empty()) t = openai_api ? openai(plain_port(), kPrompt, false).text : anthropic(plain_port(), anthropic_body(kPrompt, false)).text;
  return t;
}

int64_t count_tokens(int port, const std::string& body) {
  HttpReply r = fetch(port, "POST", "/v1/messages/count_tokens", body);
  EXPECT_EQ(r.status, 200) << r.body;
  return num(at(parse_obj(r.body), {"input_tokens"}));
}

// engine_guard_actions_total{rule,direction,action} (-1: no such series).
int64_t guard_actions(int port, const std::string& rule, const std::string& direction, const std::string& action) {
  const std::string series = "engine_guard_actions_total{rule=\"" + rule + "\",direction=\"" + direction +
                             "\",action=\"" + action + "\"} ";
  const std::string body = fetch(port, "GET", "/metrics").body;
  const size_t pos = body.find(series);
  return pos == std::string::npos ? -1 : std::atoll(body.c_str() + pos + series.size());
}

TEST(GuardServerTest, AMaskedWordNeverAppearsAndTheAnswerGoesOn) {
  REQUIRE_MODEL();
  for (bool openai_api : {false, true}) {
    const std::string plain = plain_text(openai_api);
    const std::string word = frequent_word(plain);
    ASSERT_FALSE(word.empty()) << plain;
    const int port = guarded_port(std::string("mask_") + (openai_api ? "openai" : "anthropic"),
                                  "[[rule]]\nname = \"banned\"\nphrases = [" + jquote(word) + "]\noutput = \"mask\"\n");
    std::string first_text;  // greedy stays deterministic under the mask: every answer is the same
    for (bool stream : {false, true, false}) {
      SCOPED_TRACE(std::string(openai_api ? "openai" : "anthropic") + (stream ? " stream" : "") + ", banned '" + word + "'");
      const Answer a = openai_api ? openai(port, kPrompt, stream) : anthropic(port, anthropic_body(kPrompt, stream));
      ASSERT_EQ(a.status, 200);
      if (first_text.empty()) first_text = a.text;
      EXPECT_EQ(a.text, first_text);
      EXPECT_FALSE(contains_ci(a.text, word)) << a.text;
      // The answer went on: as many tokens as without the guard, no safety stop.
      EXPECT_EQ(a.output_tokens, kMaxTokens) << a.text;
      EXPECT_NE(a.stop_reason, openai_api ? "content_filter" : "refusal");
      EXPECT_NE(a.text, plain);
    }
    EXPECT_GE(guard_actions(port, "banned", "output", "mask"), 3);
  }
}

TEST(GuardServerTest, RedactHoldsBackSoThatNoDeltaCarriesAPrefixOfTheMatch) {
  REQUIRE_MODEL();
  for (bool openai_api : {false, true}) {
    const std::string plain = plain_text(openai_api);
    const std::string word = frequent_word(plain);
    ASSERT_FALSE(word.empty()) << plain;
    const std::string expected = replace_ci(plain, word, "[REDACTED:word]");
    ASSERT_NE(expected, plain);
    const int port = guarded_port(std::string("redact_") + (openai_api ? "openai" : "anthropic"),
                                  "[[rule]]\nname = \"word\"\nphrases = [" + jquote(word) + "]\noutput = \"redact\"\n");
    for (bool stream : {false, true}) {
      SCOPED_TRACE(std::string(openai_api ? "openai" : "anthropic") + (stream ? " stream" : "") + ", redacted '" + word + "'");
      const Answer a = openai_api ? openai(port, kPrompt, stream) : anthropic(port, anthropic_body(kPrompt, stream));
      ASSERT_EQ(a.status, 200);
      EXPECT_EQ(a.text, expected);
      if (stream) {  // really streamed, in many deltas
        EXPECT_GT(a.deltas.size(), 5u);
      }
      // After every delta, what the client has is a prefix of the redacted
      // text: no delta carried the start of the word before the placeholder.
      std::string so_far;
      for (const std::string& d : a.deltas) {
        so_far += d;
        ASSERT_EQ(expected.compare(0, so_far.size(), so_far), 0) << "leaked after delta '" << d << "': " << so_far;
      }
      EXPECT_EQ(a.output_tokens, kMaxTokens);
    }
    EXPECT_GE(guard_actions(port, "word", "output", "redact"), 2);
    if (openai_api) continue;
    // Stop strings hold back text too: both compose. A stop string after
    // the first redacted occurrence ends the answer there, redacted.
    std::string stop;
    for (const std::string& w : words(plain)) {
      if (lower(w) != lower(word) && !contains_ci(w, word) && plain.find(w) > lower(plain).find(lower(word))) {
        stop = w;
        break;
      }
    }
    ASSERT_FALSE(stop.empty()) << plain;
    const std::string want = replace_ci(plain.substr(0, plain.find(stop)), word, "[REDACTED:word]");
    for (bool stream : {false, true}) {
      SCOPED_TRACE(std::string("stop sequence '") + stop + "'" + (stream ? " stream" : ""));
      const Answer a = anthropic(port, anthropic_body(kPrompt, stream, R"(,"stop_sequences":[)" + jquote(stop) + "]"));
      ASSERT_EQ(a.status, 200);
      EXPECT_EQ(a.stop_reason, "stop_sequence");
      EXPECT_EQ(a.text, want);
      std::string so_far;
      for (const std::string& d : a.deltas) {
        so_far += d;
        ASSERT_EQ(want.compare(0, so_far.size(), so_far), 0) << "leaked after delta '" << d << "': " << so_far;
      }
    }
  }
}

TEST(GuardServerTest, StopEndsBeforeTheMatchWithRefusalOrContentFilter) {
  REQUIRE_MODEL();
  for (bool openai_api : {false, true}) {
    const std::string plain = plain_text(openai_api);
    // A word well inside the answer, so that text comes before it.
    std::string word;
    for (const std::string& w : words(plain)) {
      if (lower(plain).find(lower(w)) >= 10) {
        word = w;
        break;
      }
    }
    ASSERT_FALSE(word.empty()) << plain;
    const std::string before = plain.substr(0, lower(plain).find(lower(word)));
    const int port = guarded_port(std::string("stop_") + (openai_api ? "openai" : "anthropic"),
                                  "[[rule]]\nname = \"halt\"\nphrases = [" + jquote(word) + "]\noutput = \"stop\"\n");
    for (bool stream : {false, true}) {
      SCOPED_TRACE(std::string(openai_api ? "openai" : "anthropic") + (stream ? " stream" : "") + ", stop at '" + word + "'");
      const Answer a = openai_api ? openai(port, kPrompt, stream) : anthropic(port, anthropic_body(kPrompt, stream));
      ASSERT_EQ(a.status, 200);
      EXPECT_EQ(a.stop_reason, openai_api ? "content_filter" : "refusal");
      EXPECT_EQ(a.text, before);
      EXPECT_LT(a.output_tokens, kMaxTokens);
    }
    EXPECT_GE(guard_actions(port, "halt", "output", "stop"), 2);
  }
}

constexpr const char* kInputPolicy = R"([[rule]]
name = "codename"
phrases = ["project falcon"]
input = "block"

[[rule]]
name = "pii"
pii = ["email", "credit_card"]
input = "redact"
)";

TEST(GuardServerTest, InputBlockIsA400NamingTheRuleOnBothApisEvenSplitByAZeroWidthSpace) {
  REQUIRE_MODEL();
  const int port = guarded_port("input", kInputPolicy);
  const std::string prompt_metric = "engine_prompt_tokens_total ";
  auto prompt_tokens = [&] {
    const std::string body = fetch(port, "GET", "/metrics").body;
    const size_t pos = body.find("\n" + prompt_metric);
    return pos == std::string::npos ? -1 : std::atoll(body.c_str() + pos + 1 + prompt_metric.size());
  };
  const int64_t prompt_before = prompt_tokens();
  for (const std::string content : {"tell me about Project Falcon", "tell me about project\u200b falcon",
                                    "about PROJECT FAL\u200bCON please"}) {
    SCOPED_TRACE(content);
    const Answer a = anthropic(port, anthropic_body(content, false));
    EXPECT_EQ(a.status, 400);
    EXPECT_EQ(str(at(a.raw, {"error", "type"})), "invalid_request_error");
    EXPECT_EQ(str(at(a.raw, {"error", "detail", "reason"})), "safety_violation");
    EXPECT_EQ(str(at(a.raw, {"error", "detail", "rule"})), "codename");
    const Answer o = openai(port, content, true);
    EXPECT_EQ(o.status, 400);
    EXPECT_EQ(str(at(o.raw, {"error", "type"})), "invalid_request_error");
    EXPECT_EQ(str(at(o.raw, {"error", "code"})), "safety_violation");
    EXPECT_EQ(str(at(o.raw, {"error", "rule"})), "codename");
  }
  // A /v1/completions prompt sent as token ids is screened as their text.
  const CommandResult g = run_command(zerolayer_bin() + " generate --model " + model_path() +
                                      " --prompt 'tell me about Project Falcon' -n 1 --threads 1 --json 2>/dev/null");
  ASSERT_EQ(g.exit_code, 0) << g.out;
  const std::string ids = boost::json::serialize(parse_obj(g.out)["prompt_ids"]);
  const HttpReply r = fetch(port, "POST", "/v1/completions", R"({"model":"m","max_tokens":4,"prompt":)" + ids + "}");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(str(at(parse_obj(r.body), {"error", "code"})), "safety_violation");
  EXPECT_EQ(prompt_tokens(), prompt_before);  // nothing reached the engine
  EXPECT_EQ(guard_actions(port, "codename", "input", "block"), 7);
  // The near miss passes.
  EXPECT_EQ(anthropic(port, anthropic_body("a falcon and a project", false)).status, 200);
}

TEST(GuardServerTest, InputRedactMakesTheModelSeeThePlaceholderInEveryMessageOnBothApis) {
  REQUIRE_MODEL();
  const int port = guarded_port("input", kInputPolicy);
  // (a long address: without the guard the prompt is clearly longer)
  const std::string secret = "write to a.very.long.mailbox.name@subdomain.example.com with card 4111 1111 1111 1111";
  const std::string seen = "write to [REDACTED:email] with card [REDACTED:credit_card]";
  // count_tokens counts what the model sees: the same as the placeholders sent literally.
  const int64_t n_seen = count_tokens(port, anthropic_body(seen, false));
  EXPECT_EQ(count_tokens(port, anthropic_body(secret, false)), n_seen);
  EXPECT_NE(count_tokens(plain_port(), anthropic_body(secret, false)), n_seen);
  // usage too, and the answers are those of the redacted prompt.
  const Answer a = anthropic(port, anthropic_body(secret, false));
  ASSERT_EQ(a.status, 200);
  EXPECT_EQ(a.input_tokens, n_seen);
  EXPECT_EQ(a.text, anthropic(port, anthropic_body(seen, false)).text);
  const Answer o = openai(port, secret, false);
  ASSERT_EQ(o.status, 200);
  EXPECT_EQ(o.input_tokens, openai(port, seen, false).input_tokens);
  EXPECT_EQ(o.text, openai(port, seen, false).text);
  // A raw /v1/completions prompt too.
  auto completion_prompt_tokens = [&](const std::string& prompt) {
    HttpReply r = fetch(port, "POST", "/v1/completions",
                        R"({"model":"m","max_tokens":1,"temperature":0,"prompt":)" + jquote(prompt) + "}");
    EXPECT_EQ(r.status, 200) << r.body;
    return num(at(parse_obj(r.body), {"usage", "prompt_tokens"}));
  };
  EXPECT_EQ(completion_prompt_tokens(secret), completion_prompt_tokens(seen));
  // The system prompt and a tool result are screened too (each on its own).
  auto system_body = [](const std::string& s) {
    return R"({"model":"m","max_tokens":4,"system":)" + jquote("contact " + s) +
           R"(,"messages":[{"role":"user","content":"hi"}]})";
  };
  auto tool_body = [](const std::string& s) {
    return R"({"model":"m","max_tokens":4,"messages":[{"role":"user","content":"hi"},)"
           R"({"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},)"
           R"({"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":)" +
           jquote("found " + s) + "}]}]}";
  };
  const std::string address = "a.much.longer.mailbox.name@subdomain.example.org";
  for (const auto& body : {std::function<std::string(const std::string&)>(system_body),
                           std::function<std::string(const std::string&)>(tool_body)}) {
    EXPECT_EQ(count_tokens(port, body(address)), count_tokens(port, body("[REDACTED:email]")));
    EXPECT_NE(count_tokens(plain_port(), body(address)), count_tokens(plain_port(), body("[REDACTED:email]")));
  }
  EXPECT_GE(guard_actions(port, "pii", "input", "redact"), 4);
}

// The input side needs no model: the test server's fake engine and
// byte-per-token codec (tests/support/fake_engine.h), so this runs without
// ../shared too.
TEST(GuardServerTest, InputActionsOnTheFakeEngine) {
  const std::string path = testing_support::temp_file("zl_guard_server_test", "fake_input.toml");
  {
    std::ofstream f(path);
    f << kInputPolicy;
  }
  ServerProcess s({"--fake-engine", "--guard", path}, ZL_TEST_SERVER);
  ASSERT_TRUE(s.ok());
  const Answer b = anthropic(s.port(), anthropic_body("about Project\u200b Falcon", false));
  EXPECT_EQ(b.status, 400);
  EXPECT_EQ(str(at(b.raw, {"error", "detail", "rule"})), "codename");
  const Answer o = openai(s.port(), "about PROJECT FALCON", false);
  EXPECT_EQ(o.status, 400);
  EXPECT_EQ(str(at(o.raw, {"error", "code"})), "safety_violation");
  // One token per byte: the count is the length of what the model saw.
  const int64_t n_secret = count_tokens(s.port(), anthropic_body("mail bob@example.com", false));
  const int64_t n_seen = count_tokens(s.port(), anthropic_body("mail [REDACTED:email]", false));
  EXPECT_EQ(n_secret, n_seen);
  const Answer r = anthropic(s.port(), anthropic_body("mail bob@example.com", false));
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.input_tokens, n_seen);
}

// Every place of the history a template may render is screened, before
// context editing decides what to clear: thinking blocks sent back, tool-call
// arguments with JSON escapes, and a tool result that an edit would clear.
TEST(GuardServerTest, TheWholeHistoryIsScreenedBeforeContextEditing) {
  const std::string path = testing_support::temp_file("zl_guard_server_test", "fake_history.toml");
  {
    std::ofstream f(path);
    f << kInputPolicy;
  }
  ServerProcess s({"--fake-engine", "--guard", path}, ZL_TEST_SERVER);
  ASSERT_TRUE(s.ok());
  auto history = [](const std::string& thinking, const std::string& old_result, const std::string& extra) {
    std::string m = R"({"model":"claude-x","max_tokens":16,"messages":[{"role":"user","content":"hi"},)";
    for (int i = 0; i < 3; ++i) {
      const std::string id = "toolu_" + std::to_string(i);
      m += R"({"role":"assistant","content":[)";
      if (i == 0 && !thinking.empty()) m += R"({"type":"thinking","thinking":)" + jquote(thinking) + R"(,"signature":"s"},)";
      m += R"({"type":"tool_use","id":")" + id + R"(","name":"get","input":{}}]},)";
      m += R"({"role":"user","content":[{"type":"tool_result","tool_use_id":")" + id + R"(","content":)" +
           jquote(i == 0 ? old_result : "result " + std::to_string(i)) + "}]}";
      m += i < 2 ? "," : "";
    }
    return m + R"(],"tools":[{"name":"get","input_schema":{"type":"object"}}])" + extra + "}";
  };
  const std::string clear_old =
      R"(,"context_management":{"edits":[{"type":"clear_tool_uses_20250919","trigger":{"type":"input_tokens","value":1},)"
      R"("keep":{"type":"tool_uses","value":1}}]})";
  EXPECT_EQ(anthropic(s.port(), history("", "a plain result", clear_old)).status, 200);
  // The banned phrase in a result the edit clears: still refused, both routes.
  const Answer cleared = anthropic(s.port(), history("", "about project falcon", clear_old));
  EXPECT_EQ(cleared.status, 400);
  EXPECT_EQ(str(at(cleared.raw, {"error", "detail", "rule"})), "codename");
  EXPECT_EQ(fetch(s.port(), "POST", "/v1/messages/count_tokens", history("", "about project falcon", clear_old)).status,
            400);
  // In a thinking block of the history.
  EXPECT_EQ(anthropic(s.port(), history("thinking of project falcon", "ok", "")).status, 400);
  // In OpenAI tool-call arguments, hidden behind a JSON escape.
  const std::string openai_body =
      R"({"model":"gpt-x","max_tokens":16,"messages":[{"role":"user","content":"hi"},)"
      R"({"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get",)"
      R"("arguments":"{\"x\":\"project\\u0020falcon\"}"}}]},{"role":"tool","tool_call_id":"c1","content":"ok"}]})";
  HttpReply o = fetch(s.port(), "POST", "/v1/chat/completions", openai_body);
  EXPECT_EQ(o.status, 400) << o.body;
  EXPECT_EQ(str(at(parse_obj(o.body), {"error", "code"})), "safety_violation");
}

TEST(GuardServerTest, ABadPolicyFileStopsTheStartWithExit2NamingTheLine) {
  const std::string path = testing_support::temp_file("zl_guard_server_test", "bad.toml");
  {
    std::ofstream f(path);
    f << "[[rule]]\nname = \"x\"\nregex = [\"a+\"]\noutput = \"redact\"\n";
  }
  const CommandResult r = run_command(zerolayer_bin() + " serve --model /nonexistent.gguf --port 0 --guard " + path +
                                      " 2>&1");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.out.find("bad.toml:"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace zl::test
