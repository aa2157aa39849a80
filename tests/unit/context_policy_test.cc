// Truncation policies (api/context_policy.h) without a model: the units a
// conversation is cut into (tool pairs and client messages kept whole, the
// last user turn kept), which units each policy drops, exact fits at the
// boundary (one token more or less), the 400 when nothing can fit, the
// number of encodings a long conversation costs, and the body field of both
// APIs. The codec is the byte-level fake one (one token per byte + BOS), so
// every count can be computed by hand.
#include "api/context_policy.h"

#include <gtest/gtest.h>

#include <atomic>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "api/anthropic/messages.h"
#include "api/generation.h"
#include "api/openai/chat_completions.h"
#include "api/request_log.h"
#include "api/tokenizer_codec.h"
#include "cli/serve_config.h"
#include "support/fake_engine.h"

namespace zl::api {
namespace {

// The fake codec, counting its encodings.
class CountingCodec final : public PromptCodec {
 public:
  Result<std::vector<int32_t>> encode_chat(const ChatRequest& chat) const override {
    ++n_encodes;
    return inner_.encode_chat(chat);
  }
  Result<std::vector<int32_t>> encode_text(std::string_view text) const override {
    return inner_.encode_text(text);
  }
  ToolSyntax tool_syntax() const override { return inner_.tool_syntax(); }
  mutable std::atomic<int> n_encodes{0};

 private:
  fake::FakeCodec inner_{ToolSyntax::kNone};
};

// Any codec, counting its encodings.
class CountingWrapper final : public PromptCodec {
 public:
  explicit CountingWrapper(const PromptCodec& inner) : inner_(inner) {}
  Result<std::vector<int32_t>> encode_chat(const ChatRequest& chat) const override {
    ++n_encodes;
    return inner_.encode_chat(chat);
  }
  Result<std::vector<int32_t>> encode_text(std::string_view text) const override {
    return inner_.encode_text(text);
  }
  ToolSyntax tool_syntax() const override { return inner_.tool_syntax(); }
  mutable int n_encodes = 0;

 private:
  const PromptCodec& inner_;
};

ChatMessage msg(const std::string& role, const std::string& content, int32_t source) {
  return ChatMessage{.role = role, .content = content, .source_index = source};
}
ChatMessage call(const std::string& id, int32_t source) {
  return ChatMessage{.role = "assistant",
                     .tool_calls = {ToolCall{.id = id, .name = "f", .arguments_json = "{}"}},
                     .source_index = source};
}
ChatMessage result(const std::string& id, const std::string& content, int32_t source) {
  return ChatMessage{
      .role = "tool", .content = content, .tool_call_id = id, .source_index = source};
}

// Messages numbered as a client sends them (source = index), after a system prompt.
std::vector<ChatMessage> numbered(std::vector<ChatMessage> conversation) {
  std::vector<ChatMessage> out = {msg("system", "be brief", -1)};
  for (size_t i = 0; i < conversation.size(); ++i) {
    conversation[i].source_index = static_cast<int32_t>(i);
    out.push_back(std::move(conversation[i]));
  }
  return out;
}

std::vector<std::pair<size_t, size_t>> ranges(const std::vector<DropUnit>& units) {
  std::vector<std::pair<size_t, size_t>> out;
  for (const DropUnit& u : units) out.emplace_back(u.begin, u.end);
  return out;
}

using Ranges = std::vector<std::pair<size_t, size_t>>;

std::string text_of(const std::vector<int32_t>& ids) {
  return fake::FakeCodec::decode(ids);
}

TEST(ContextPolicy, UnitsAreWholeExchangesAndTheLastUserTurnIsNone) {
  // 0 system | 1 U 2 A | 3 U 4 A(call) 5 T 6 A | 7 U
  const auto m =
      numbered({msg("user", "a", 0), msg("assistant", "b", 0), msg("user", "c", 0), call("c1", 0),
                result("c1", "r", 0), msg("assistant", "d", 0), msg("user", "e", 0)});
  EXPECT_EQ(ranges(drop_units(m)), (Ranges{{1, 3}, {3, 7}}));
  // Only a system prompt and one turn: nothing to drop.
  EXPECT_TRUE(drop_units(numbered({msg("user", "x", 0)})).empty());
  EXPECT_TRUE(drop_units({msg("system", "s", -1)}).empty());
}

TEST(ContextPolicy, AnAgentLoopShedsItsOldestRoundTripsAndKeepsTheLatest) {
  // 1 U | 2 A(call) 3 T | 4 A(call) 5 T | 6 A(call) 7 T (the last trip is kept, with the task)
  const auto m =
      numbered({msg("user", "task", 0), call("c1", 0), result("c1", "r1", 0), call("c2", 0),
                result("c2", "r2", 0), call("c3", 0), result("c3", "r3", 0)});
  EXPECT_EQ(ranges(drop_units(m)), (Ranges{{2, 4}, {4, 6}}));
}

TEST(ContextPolicy, ACallAndItsResultAreNeverSeparated) {
  // A user message between a call and its result (matched by id) cannot start a unit.
  const auto m = numbered({msg("user", "a", 0), call("c1", 0), msg("user", "b", 0),
                           result("c1", "r", 0), msg("assistant", "x", 0), msg("user", "c", 0)});
  EXPECT_EQ(ranges(drop_units(m)), (Ranges{{1, 6}}));
  // Without ids: the nearest call before the result.
  const auto anon = numbered({msg("user", "a", 0), call("", 0), msg("user", "b", 0),
                              result("", "r", 0), msg("user", "c", 0)});
  EXPECT_EQ(ranges(drop_units(anon)), (Ranges{{1, 5}}));
}

TEST(ContextPolicy, OneClientMessageIsNeverSplit) {
  // Anthropic: a user turn with a tool_result block and text parses into a
  // "tool" message and a "user" message of the same source: the text cannot
  // start a unit without its result.
  std::vector<ChatMessage> m = {
      msg("system", "s", -1), msg("user", "go", 0),          call("t1", 1),
      result("t1", "out", 2), msg("user", "thanks, now", 2), msg("assistant", "ok", 3),
      msg("user", "last", 4)};
  EXPECT_EQ(ranges(drop_units(m)), (Ranges{{1, 6}}));
  int n = 0;
  const std::vector<ChatMessage> kept = without_units(m, drop_units(m), 0, 1, &n);
  EXPECT_EQ(n, 4);  // client messages 0..3; the tool result and its text count once
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].role, "system");
  EXPECT_EQ(kept[1].content, "last");
}

// A conversation of `n` exchanges "q<i>"/"a<i>" of `len` bytes each, then a last question.
ChatRequest chat_of(int n, size_t len) {
  ChatRequest c;
  c.messages.push_back(msg("system", "sys", -1));
  for (int i = 0; i < n; ++i) {
    std::string q = "q" + std::to_string(i), a = "a" + std::to_string(i);
    q.resize(len, '.');
    a.resize(len, '.');
    c.messages.push_back(msg("user", q, 2 * i));
    c.messages.push_back(msg("assistant", a, 2 * i + 1));
  }
  c.messages.push_back(msg("user", "last question", 2 * n));
  c.max_tokens = 10;
  return c;
}

int64_t tokens(const PromptCodec& codec, const ChatRequest& chat) {
  return static_cast<int64_t>(codec.encode_chat(chat)->size());
}

// The chat without the units [first, first + count).
ChatRequest dropped(const ChatRequest& chat, size_t first, size_t count) {
  ChatRequest c = chat;
  c.messages = without_units(chat.messages, drop_units(chat.messages), first, count, nullptr);
  return c;
}

TEST(ContextPolicy, DropOldestIsExactAtTheBoundary) {
  CountingCodec codec;
  const ChatRequest chat = chat_of(4, 20);
  const int64_t full = tokens(codec, chat);
  const int64_t one = tokens(codec, dropped(chat, 0, 1));
  const int64_t reserve = 10;  // min(max_tokens 10, --context-reserve 256)
  const ContextOptions opts{.policy = ContextPolicy::kDropOldest};
  // One exchange dropped fits exactly: prompt + reserve == window.
  auto r = fit_context(chat, codec, *codec.encode_chat(chat), one + reserve, opts);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(static_cast<int64_t>(r.value().ids.size()), one);
  EXPECT_EQ(r.value().truncation.n_messages, 2);
  EXPECT_EQ(r.value().truncation.n_tokens, full - one);
  EXPECT_EQ(r.value().truncation.header_value(),
            "messages=2, tokens=" + std::to_string(full - one));
  EXPECT_EQ(text_of(r.value().ids).find("q0"), std::string::npos);
  // One token less: a second exchange goes.
  r = fit_context(chat, codec, *codec.encode_chat(chat), one + reserve - 1, opts);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(static_cast<int64_t>(r.value().ids.size()), tokens(codec, dropped(chat, 0, 2)));
  EXPECT_EQ(r.value().truncation.n_messages, 4);
  // The whole prompt fits exactly: nothing is dropped.
  r = fit_context(chat, codec, *codec.encode_chat(chat), full + reserve, opts);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r.value().truncation.applied());
  EXPECT_EQ(static_cast<int64_t>(r.value().ids.size()), full);
}

TEST(ContextPolicy, ReserveIsTheSmallerOfMaxTokensAndTheSetting) {
  CountingCodec codec;
  ChatRequest chat = chat_of(4, 20);
  const int64_t full = tokens(codec, chat);
  chat.max_tokens = 100;
  const ContextOptions opts{.policy = ContextPolicy::kDropOldest, .reserve = 7};
  auto r = fit_context(chat, codec, *codec.encode_chat(chat), full + 7, opts);
  EXPECT_FALSE(r.value().truncation.applied());
  r = fit_context(chat, codec, *codec.encode_chat(chat), full + 6, opts);
  EXPECT_TRUE(r.value().truncation.applied());
  chat.max_tokens.reset();  // no max_tokens (OpenAI): the setting
  r = fit_context(chat, codec, *codec.encode_chat(chat), full + 7, opts);
  EXPECT_FALSE(r.value().truncation.applied());
  // A KV cache smaller than the window bounds it instead.
  r = fit_context(
      chat, codec, *codec.encode_chat(chat), full + 7,
      ContextOptions{.policy = ContextPolicy::kDropOldest, .reserve = 7, .n_window = full + 6});
  EXPECT_TRUE(r.value().truncation.applied());
}

TEST(ContextPolicy, MiddleOutKeepsBothEnds) {
  CountingCodec codec;
  const ChatRequest chat = chat_of(6, 20);
  const int64_t two = tokens(codec, dropped(chat, 2, 2));  // units 2 and 3 of 6: the centred pair
  auto r = fit_context(chat, codec, *codec.encode_chat(chat), two + 10,
                       ContextOptions{.policy = ContextPolicy::kMiddleOut});
  ASSERT_TRUE(r.ok());
  const std::string text = text_of(r.value().ids);
  EXPECT_EQ(static_cast<int64_t>(r.value().ids.size()), two);
  for (const char* kept : {"q0", "a0", "q1", "q4", "q5", "a5", "last question"}) {
    EXPECT_NE(text.find(kept), std::string::npos) << kept;
  }
  for (const char* gone : {"q2", "a2", "q3", "a3"})
    EXPECT_EQ(text.find(gone), std::string::npos) << gone;
  // drop_oldest on the same window drops the first two instead.
  r = fit_context(chat, codec, *codec.encode_chat(chat), two + 10,
                  ContextOptions{.policy = ContextPolicy::kDropOldest});
  EXPECT_EQ(text_of(r.value().ids).find("q0"), std::string::npos);
  EXPECT_NE(text_of(r.value().ids).find("q2"), std::string::npos);
}

TEST(ContextPolicy, TheLastTurnThatCannotFitIsThe400) {
  CountingCodec codec;
  const ChatRequest chat = chat_of(3, 20);
  const int64_t shortest = tokens(codec, dropped(chat, 0, 3));
  for (ContextPolicy p : {ContextPolicy::kDropOldest, ContextPolicy::kMiddleOut}) {
    auto r =
        fit_context(chat, codec, *codec.encode_chat(chat), shortest, ContextOptions{.policy = p});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().reason, ErrorReason::kContextLengthExceeded);
    EXPECT_EQ(r.error().numbers.n_prompt_tokens, shortest);
    EXPECT_EQ(r.error().numbers.n_ctx, shortest);
    // One token of room: the shortest prompt is served (the output clamped), not the 400.
    r = fit_context(chat, codec, *codec.encode_chat(chat), shortest + 1,
                    ContextOptions{.policy = p});
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(static_cast<int64_t>(r.value().ids.size()), shortest);
    EXPECT_EQ(r.value().truncation.n_messages, 6);
  }
  // Through prepare_request: max_tokens is clamped to that one token.
  auto p = prepare_request(chat, codec, shortest + 1, "req", "",
                           ContextOptions{.policy = ContextPolicy::kMiddleOut});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p.value().n_prompt_tokens, shortest);
  EXPECT_EQ(p.value().request.stop.max_tokens, 1);
  EXPECT_TRUE(p.value().truncation.applied());
}

TEST(ContextPolicy, ErrorPolicyAndRawPromptsAreUntouched) {
  CountingCodec codec;
  const ChatRequest chat = chat_of(3, 20);
  const int64_t full = tokens(codec, chat);
  auto p = prepare_request(chat, codec, full, "req");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.error().numbers.n_prompt_tokens, full);
  // The default policy needs no reserve: one token of room is enough, as before.
  EXPECT_TRUE(prepare_request(chat, codec, full + 1, "req").ok());
  ChatRequest raw;
  raw.raw_prompt = true;
  raw.prompt = std::string(100, 'x');
  auto r = fit_context(raw, codec, *codec.encode_text(raw.prompt), 50,
                       ContextOptions{.policy = ContextPolicy::kDropOldest});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value().ids.size(), 101u);
}

// Tokens that bytes do not predict: each '#' is 40 tokens. The search's
// first guess (from bytes) is then off, in both directions.
class SkewedCodec final : public PromptCodec {
 public:
  Result<std::vector<int32_t>> encode_chat(const ChatRequest& chat) const override {
    ++n_encodes;
    std::vector<int32_t> ids = *inner_.encode_chat(chat);
    std::vector<int32_t> out;
    for (int32_t id : ids) out.insert(out.end(), fake::FakeCodec::decode({id}) == "#" ? 40 : 1, id);
    return out;
  }
  Result<std::vector<int32_t>> encode_text(std::string_view text) const override {
    return inner_.encode_text(text);
  }
  mutable int n_encodes = 0;

 private:
  fake::FakeCodec inner_{ToolSyntax::kNone};
};

TEST(ContextPolicy, TheSearchFindsTheFewestUnitsWhateverTheEstimate) {
  const SkewedCodec codec;
  ChatRequest chat = chat_of(24, 12);
  for (size_t i = 1; i + 1 < chat.messages.size(); i += 6)
    chat.messages[i].content += "##";  // dear but short
  for (size_t i = 3; i + 1 < chat.messages.size(); i += 8)
    chat.messages[i].content += std::string(60, '.');  // long but cheap
  const std::vector<int32_t> ids = *codec.encode_chat(chat);
  const size_t m = drop_units(chat.messages).size();
  ASSERT_EQ(m, 24u);
  int max_encodes = 0;
  for (ContextPolicy p : {ContextPolicy::kDropOldest, ContextPolicy::kMiddleOut}) {
    const bool middle = p == ContextPolicy::kMiddleOut;
    // Every window from "only the last turn fits" to "all fits".
    const int64_t shortest = tokens(codec, dropped(chat, 0, m));
    for (int64_t window = shortest + 10; window <= static_cast<int64_t>(ids.size()) + 10;
         window += 7) {
      size_t expect = 0;  // by brute force: the fewest units that fit
      while (expect < m &&
             tokens(codec, dropped(chat, middle ? (m - expect) / 2 : 0, expect)) + 10 > window)
        ++expect;
      codec.n_encodes = 0;
      auto r = fit_context(chat, codec, ids, window, ContextOptions{.policy = p});
      ASSERT_TRUE(r.ok());
      max_encodes = std::max(max_encodes, codec.n_encodes);
      EXPECT_EQ(r.value().truncation.n_messages, static_cast<int>(2 * expect))
          << context_policy_name(p) << " " << window;
      EXPECT_EQ(r.value().ids,
                *codec.encode_chat(dropped(chat, middle ? (m - expect) / 2 : 0, expect)));
    }
  }
  EXPECT_LE(max_encodes, 10);  // 24 units: at most about 2 log2(24)
  std::printf("skewed estimate, 24 units: at most %d encodings per truncation\n", max_encodes);
}

TEST(ContextPolicy, ALongConversationCostsAFewEncodings) {
  CountingCodec codec;
  const ChatRequest chat = chat_of(1000, 40);
  const std::vector<int32_t> ids = *codec.encode_chat(chat);
  const int64_t window = static_cast<int64_t>(ids.size()) / 3;
  for (ContextPolicy p : {ContextPolicy::kDropOldest, ContextPolicy::kMiddleOut}) {
    codec.n_encodes = 0;
    const auto t0 = std::chrono::steady_clock::now();
    auto r = fit_context(chat, codec, ids, window, ContextOptions{.policy = p});
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_TRUE(r.ok());
    EXPECT_LE(static_cast<int64_t>(r.value().ids.size()) + 10, window);
    // 1000 units: a guess from bytes and its neighbour, here (the fake
    // codec's tokens are bytes); never more than about 2 log2(1000).
    const int n_encodes = codec.n_encodes.load();
    EXPECT_LE(n_encodes, 20);
    // The minimum: one unit fewer does not fit.
    const size_t k = static_cast<size_t>(r.value().truncation.n_messages / 2);
    const size_t first = p == ContextPolicy::kMiddleOut ? (1000 - (k - 1)) / 2 : 0;
    EXPECT_GT(tokens(codec, dropped(chat, first, k - 1)) + 10, window);
    std::printf("%s: 2001 messages, %zu -> %zu tokens, %d encodings, %.2f ms\n",
                std::string(context_policy_name(p)).c_str(), ids.size(), r.value().ids.size(),
                n_encodes, ms);
  }
}

TEST(ContextPolicy, TheBodyFieldOnBothApis) {
  auto a = anthropic::parse_messages_request(
      R"({"model":"m","max_tokens":5,"context_policy":"middle_out","messages":[{"role":"user","content":"hi"}]})");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a.value().context_policy, ContextPolicy::kMiddleOut);
  EXPECT_EQ(a.value().messages[0].source_index, 0);
  auto o = openai::parse_chat_request(
      R"({"model":"m","context_policy":"drop_oldest","messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}]})");
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(o.value().context_policy, ContextPolicy::kDropOldest);
  EXPECT_EQ(o.value().messages[1].source_index, 1);
  EXPECT_FALSE(
      openai::parse_chat_request(R"({"model":"m","messages":[{"role":"user","content":"hi"}]})")
          .value()
          .context_policy.has_value());
  for (const char* bad : {R"("middle-out")", R"("truncate")", "3"}) {
    auto e = anthropic::parse_messages_request(
        std::string(R"({"model":"m","max_tokens":5,"context_policy":)") + bad +
        R"(,"messages":[{"role":"user","content":"hi"}]})");
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.error().param, "context_policy");
    EXPECT_EQ(e.error().type(), ErrorType::kInvalidRequest);
    auto f = openai::parse_chat_request(std::string(R"({"model":"m","context_policy":)") + bad +
                                        R"(,"messages":[{"role":"user","content":"hi"}]})");
    ASSERT_FALSE(f.ok()) << bad;
    EXPECT_EQ(f.error().param, "context_policy");
  }
  // An Anthropic tool_result turn with text: its messages share the source.
  auto t = anthropic::parse_messages_request(
      R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"go"},)"
      R"({"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},)"
      R"({"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"out"},{"type":"text","text":"and?"}]}]})");
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t.value().messages.size(), 4u);
  EXPECT_EQ(t.value().messages[2].source_index, 2);
  EXPECT_EQ(t.value().messages[3].source_index, 2);
}

// The real Qwen2 vocabulary and its chatml template, whose tool calls are
// native (Hermes <tool_call> / <tool_response>): an agent loop of 300 round
// trips under one instruction. drop_oldest sheds the oldest round trips,
// exactly, and keeps the instruction and the last call with its result;
// the printed ratio is the truncation's cost in encodings of the whole
// prompt (the benchmark of this path).
TEST(ContextPolicy, AnAgentLoopOnARealVocabulary) {
  const auto path = std::filesystem::path(ZL_SHARED_DIR) / "vocab" / "ggml-vocab-qwen2.gguf";
  if (!std::filesystem::exists(path))
    GTEST_SKIP() << "SKIPPED: " << path << " not found (../shared absent)";
  auto tok = Tokenizer::load(path.string());
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  auto tmpl = ChatTemplate::for_vocab((*tok)->vocab());
  ASSERT_TRUE(tmpl.ok());
  const TokenizerCodec qwen2(tok->get(), std::move(tmpl).value());
  const CountingWrapper codec(qwen2);
  ASSERT_EQ(codec.tool_syntax(), ToolSyntax::kHermes);

  ChatRequest chat;
  chat.tools = {ToolDef{
      .name = "lookup",
      .json =
          R"({"type":"function","function":{"name":"lookup","parameters":{"type":"object","properties":{"q":{"type":"string"}}}}})"}};
  chat.tools_json = "[" + chat.tools[0].json + "]";
  chat.messages = {msg("system", "You are a careful agent.", -1),
                   msg("user", "Find every word that rhymes with cat.", 0)};
  for (int i = 0; i < 300; ++i) {
    const std::string id = "call_" + std::to_string(i);
    ChatMessage c = call(id, 1 + 2 * i);
    c.tool_calls[0].name = "lookup";
    c.tool_calls[0].arguments_json = R"({"q":"word )" + std::to_string(i) + R"("})";
    chat.messages.push_back(std::move(c));
    chat.messages.push_back(
        result(id, "Result " + std::to_string(i) + ": hat, bat, mat, sat, rat, pat, fat, vat.",
               2 + 2 * i));
  }
  chat.max_tokens = 64;
  const std::vector<DropUnit> units = drop_units(chat.messages);
  ASSERT_EQ(units.size(), 299u);  // every round trip but the last
  const std::vector<int32_t> ids = *codec.encode_chat(chat);
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(*codec.encode_chat(chat), ids);  // (warm)
  const double t_encode_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const int64_t window = static_cast<int64_t>(ids.size()) / 4;
  t0 = std::chrono::steady_clock::now();
  codec.n_encodes = 0;
  auto r =
      fit_context(chat, codec, ids, window, ContextOptions{.policy = ContextPolicy::kDropOldest});
  const int n_encodes = codec.n_encodes;
  EXPECT_LE(n_encodes, 18);  // 299 units: at most about 2 log2(299)
  const double t_fit_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.ok()) << r.error().message;
  const int64_t n_kept = static_cast<int64_t>(r.value().ids.size());
  EXPECT_LE(n_kept + 64, window);
  // Each round trip is two client messages; one fewer dropped does not fit.
  ASSERT_EQ(r.value().truncation.n_messages % 2, 0);
  const size_t k = static_cast<size_t>(r.value().truncation.n_messages / 2);
  ChatRequest kept = dropped(chat, 0, k);
  EXPECT_EQ(*codec.encode_chat(kept), r.value().ids);
  EXPECT_GT(tokens(codec, dropped(chat, 0, k - 1)) + 64, window);
  EXPECT_EQ(kept.messages[1].content, "Find every word that rhymes with cat.");
  EXPECT_EQ(kept.messages.back().tool_call_id, "call_299");
  EXPECT_EQ(kept.messages[2].tool_calls[0].id,
            "call_" + std::to_string(k));  // a call, then its result
  EXPECT_EQ(kept.messages[3].tool_call_id, "call_" + std::to_string(k));
  EXPECT_EQ(r.value().truncation.n_tokens, static_cast<int64_t>(ids.size()) - n_kept);
  std::printf(
      "qwen2 agent loop: %zu -> %lld tokens (window %lld), %zu round trips dropped, %d encodings; "
      "one "
      "encoding %.2f ms, truncation %.2f ms (%.1fx)\n",
      ids.size(), static_cast<long long>(n_kept), static_cast<long long>(window), k, n_encodes,
      t_encode_ms, t_fit_ms, t_fit_ms / t_encode_ms);
  // The dearest case: little to drop, so every probe is nearly the whole prompt.
  t0 = std::chrono::steady_clock::now();
  codec.n_encodes = 0;
  r = fit_context(chat, codec, ids, static_cast<int64_t>(ids.size()) * 19 / 20,
                  ContextOptions{.policy = ContextPolicy::kDropOldest});
  const double t_small_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.ok());
  std::printf(
      "qwen2 agent loop, window 95%%: %zu round trips dropped, %d encodings, truncation %.2f ms "
      "(%.1fx one "
      "encoding)\n",
      static_cast<size_t>(r.value().truncation.n_messages / 2), codec.n_encodes, t_small_ms,
      t_small_ms / t_encode_ms);
}

TEST(ContextPolicy, ServeSettings) {
  const std::string path = ::testing::TempDir() + "context_policy_settings.toml";
  {
    std::ofstream f(path);
    f << "context_policy = \"middle_out\"\ncontext_reserve = 64\n";
  }
  std::map<std::string, std::string> env;
  auto getenv = [&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  auto c = cli::resolve_serve_config({}, {}, getenv);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->context_policy, "error");  // the defaults
  EXPECT_EQ(c->context_reserve, kDefaultContextReserve);
  c = cli::resolve_serve_config({{"config", path}}, {}, getenv);
  ASSERT_TRUE(c.ok()) << c.status().to_string();
  EXPECT_EQ(c->context_policy, "middle_out");
  EXPECT_EQ(c->context_reserve, 64);
  env["ZEROLAYER_CONTEXT_POLICY"] = "drop_oldest";
  EXPECT_EQ(cli::resolve_serve_config({{"config", path}}, {}, getenv)->context_policy,
            "drop_oldest");
  EXPECT_EQ(cli::resolve_serve_config({{"config", path}, {"context-policy", "error"}}, {}, getenv)
                ->context_policy,
            "error");
  auto bad = cli::resolve_serve_config({{"context-policy", "middle-out"}}, {}, getenv);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--context-policy"), std::string::npos);
  bad = cli::resolve_serve_config({{"context-reserve", "0"}}, {}, getenv);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("--context-reserve"), std::string::npos);
  env["ZEROLAYER_CONTEXT_POLICY"] = "newest";
  bad = cli::resolve_serve_config({}, {}, getenv);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("ZEROLAYER_CONTEXT_POLICY"), std::string::npos);
}

TEST(ContextPolicy, TheRequestLogSaysWhatWasDropped) {
  RequestLog r{
      .request_id = "req_1",
      .method = "POST",
      .route = "/v1/messages",
      .status = 200,
      .generation = true,
      .truncation = {.policy = ContextPolicy::kDropOldest, .n_messages = 2, .n_tokens = 40}};
  boost::json::object o = boost::json::parse(format_request_log_json(r)).as_object();
  const boost::json::object& t = o.at("context_truncated").as_object();
  EXPECT_EQ(t.at("policy").as_string(), "drop_oldest");
  EXPECT_EQ(t.at("messages").as_int64(), 2);
  EXPECT_EQ(t.at("tokens").as_int64(), 40);
  EXPECT_NE(format_request_log_human(r).find(" truncated drop_oldest 2 msg 40 tok"),
            std::string::npos);
  r.truncation = {};
  EXPECT_FALSE(
      boost::json::parse(format_request_log_json(r)).as_object().contains("context_truncated"));
  EXPECT_EQ(format_request_log_human(r).find("truncated"), std::string::npos);
}

}  // namespace
}  // namespace zl::api
