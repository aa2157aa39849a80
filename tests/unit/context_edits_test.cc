// Anthropic context editing (api/context_edits.h): parsing and validation of
// context_management, each edit's selection (trigger, keep, exclude_tools,
// clear_tool_inputs, clear_at_least and its cache steps), the exact counts and
// the applied_edits report on the message and the stream's message_delta.
// A byte-per-token codec that renders thinking blocks makes the counts
// predictable; the real tokenizer is exercised by tests/e2e/context_edits_server_test.cc.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <string>
#include <vector>

#include "api/anthropic/messages.h"
#include "api/context_edits.h"

namespace zl::api {
namespace {

namespace json = boost::json;

// One token per byte of a plain rendering: role, thinking, content, calls.
class ByteCodec final : public PromptCodec {
 public:
  static std::string render(const ChatRequest& chat) {
    std::string s;
    for (const ChatMessage& m : chat.messages) {
      s += "<" + m.role + ">";
      for (const ThinkingBlock& t : m.thinking) s += "<think>" + t.text + "</think>";
      s += m.content;
      for (const ToolCall& c : m.tool_calls) s += "<call " + c.name + ">" + c.arguments_json;
    }
    return s;
  }
  Result<std::vector<int32_t>> encode_chat(const ChatRequest& chat) const override {
    ++n_renders;
    return std::vector<int32_t>(render(chat).size() + 1, 7);  // + BOS
  }
  Result<std::vector<int32_t>> encode_text(std::string_view text) const override {
    return std::vector<int32_t>(text.size() + 1, 7);
  }
  mutable int n_renders = 0;
};

int64_t count(const ChatRequest& chat) { return static_cast<int64_t>(ByteCodec::render(chat).size()) + 1; }

std::string quote(const std::string& s) { return json::serialize(json::value(s)); }

// An agent conversation: a task, then n round trips, tool i named
// names[i % names.size()] with a result of result_bytes bytes; assistant
// turns think when `thinking`.
std::string agent_body(int n, size_t result_bytes, const std::string& cm, bool thinking = false,
                       const std::vector<std::string>& names = {"read_file"}) {
  std::string msgs = R"([{"role":"user","content":"Fix the bug."})";
  for (int i = 0; i < n; ++i) {
    const std::string id = "toolu_" + std::to_string(i);
    const std::string name = names[static_cast<size_t>(i) % names.size()];
    msgs += R"(,{"role":"assistant","content":[)";
    if (thinking) msgs += R"({"type":"thinking","thinking":"step )" + std::to_string(i) + R"( plan","signature":"sig"},)";
    msgs += R"({"type":"tool_use","id":")" + id + R"(","name":")" + name + R"(","input":{"path":"src/file_)" +
            std::to_string(i) + R"(.cc","lines":"1-400","why":"find every caller of the old allocator"}}]})";
    std::string result(result_bytes, 'a' + static_cast<char>(i % 26));
    msgs += R"(,{"role":"user","content":[{"type":"tool_result","tool_use_id":")" + id + R"(","content":)" +
            quote(result) + "}]}";
  }
  msgs += "]";
  std::string body = R"({"model":"m","max_tokens":10,"messages":)" + msgs;
  if (!cm.empty()) body += R"(,"context_management":)" + cm;
  return body + "}";
}

ChatRequest parse(const std::string& body) {
  ApiResult<ChatRequest> r = anthropic::parse_messages_request(body);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? r.value() : ChatRequest{};
}

std::string error_param(const std::string& cm) {
  ApiResult<ChatRequest> r = anthropic::parse_messages_request(agent_body(1, 10, cm));
  if (r.ok()) return "(accepted)";
  EXPECT_EQ(http_status(r.error()), 400);
  EXPECT_NE(r.error().message.find(r.error().param), std::string::npos) << r.error().message;
  return r.error().param;
}

// The results of the tool uses, in order: true where cleared.
std::vector<bool> cleared_results(const ChatRequest& chat) {
  std::vector<bool> out;
  for (const ChatMessage& m : chat.messages) {
    if (m.role == "tool") out.push_back(m.content == kClearedToolResult);
  }
  return out;
}

TEST(ContextEditsParse, Defaults) {
  const ChatRequest c = parse(agent_body(1, 10, R"({"edits":[{"type":"clear_tool_uses_20250919"}]})"));
  ASSERT_TRUE(c.context_management && c.context_management->clear_tool_uses);
  const ClearToolUsesEdit& e = *c.context_management->clear_tool_uses;
  EXPECT_EQ(e.trigger, ClearToolUsesEdit::Trigger::kInputTokens);
  EXPECT_EQ(e.trigger_value, 100000);
  EXPECT_EQ(e.keep_tool_uses, 3);
  EXPECT_EQ(e.clear_at_least, 0);
  EXPECT_FALSE(e.clear_all_inputs);
  EXPECT_FALSE(c.context_management->clear_thinking);
  const ChatRequest t = parse(agent_body(1, 10, R"({"edits":[{"type":"clear_thinking_20251015"}]})"));
  ASSERT_TRUE(t.context_management->clear_thinking);
  EXPECT_EQ(t.context_management->clear_thinking->keep_turns, 1);
  EXPECT_FALSE(parse(agent_body(1, 10, "")).context_management);
  EXPECT_TRUE(parse(agent_body(1, 10, "{}")).context_management);  // nothing to do, still reported
}

TEST(ContextEditsParse, AllFields) {
  const ChatRequest c = parse(agent_body(1, 10, R"({"edits":[
      {"type":"clear_thinking_20251015","keep":"all"},
      {"type":"clear_tool_uses_20250919","trigger":{"type":"tool_uses","value":12},
       "keep":{"type":"tool_uses","value":0},"clear_at_least":{"type":"input_tokens","value":5000},
       "clear_tool_inputs":["bash","grep"],"exclude_tools":["memory"],"future_field":1}]})"));
  const ClearToolUsesEdit& e = *c.context_management->clear_tool_uses;
  EXPECT_EQ(e.trigger, ClearToolUsesEdit::Trigger::kToolUses);
  EXPECT_EQ(e.trigger_value, 12);
  EXPECT_EQ(e.keep_tool_uses, 0);
  EXPECT_EQ(e.clear_at_least, 5000);
  EXPECT_EQ(e.clear_input_tools, (std::vector<std::string>{"bash", "grep"}));
  EXPECT_EQ(e.exclude_tools, (std::vector<std::string>{"memory"}));
  EXPECT_FALSE(c.context_management->clear_thinking->keep_turns);  // "all"
  const ChatRequest b = parse(agent_body(1, 10, R"({"edits":[
      {"type":"clear_thinking_20251015","keep":{"type":"thinking_turns","value":0}},
      {"type":"clear_tool_uses_20250919","clear_tool_inputs":true}]})"));
  EXPECT_TRUE(b.context_management->clear_tool_uses->clear_all_inputs);
  EXPECT_EQ(b.context_management->clear_thinking->keep_turns, 0);
}

TEST(ContextEditsParse, BadEditsAre400sNamingTheField) {
  const std::string p = "context_management.edits[0]";
  EXPECT_EQ(error_param(R"([])"), "context_management");
  EXPECT_EQ(error_param(R"({"edits":{}})"), "context_management.edits");
  EXPECT_EQ(error_param(R"({"edits":[1]})"), p);
  EXPECT_EQ(error_param(R"({"edits":[{}]})"), p + ".type");
  EXPECT_EQ(error_param(R"({"edits":[{"type":"clear_everything"}]})"), p + ".type");
  EXPECT_EQ(error_param(R"({"edits":[{"type":"clear_tool_uses_20250919","trigger":100}]})"), p + ".trigger");
  EXPECT_EQ(error_param(R"({"edits":[{"type":"clear_tool_uses_20250919","trigger":{"type":"turns","value":3}}]})"),
            p + ".trigger.type");
  EXPECT_EQ(error_param(R"({"edits":[{"type":"clear_tool_uses_20250919","trigger":{"type":"input_tokens"}}]})"),
            p + ".trigger.value");
  EXPECT_EQ(error_param(R"({"edits":[{"type":"clear_tool_uses_20250919","trigger":{"type":"input_tokens","value":0}}]})"),
            p + ".trigger.value");
  EXPECT_EQ(error_param(R"({"edits":[{"type":"clear_tool_uses_20250919","keep":{"type":"input_tokens","value":3}}]})"),
            p + ".keep.type");
  EXPECT_EQ(error_param(R"({"edits":[{"type":"clear_tool_uses_20250919","keep":{"type":"tool_uses","value":-1}}]})"),
            p + ".keep.value");
  EXPECT_EQ(error_param(R"({"edits":[{"type":"clear_tool_uses_20250919","keep":{"type":"tool_uses","value":1.5}}]})"),
            p + ".keep.value");
  EXPECT_EQ(error_param(R"({"edits":[{"type":"clear_tool_uses_20250919","clear_at_least":{"type":"tool_uses","value":3}}]})"),
            p + ".clear_at_least.type");
  EXPECT_EQ(error_param(R"({"edits":[{"type":"clear_tool_uses_20250919","clear_at_least":"1000"}]})"),
            p + ".clear_at_least");
  EXPECT_EQ(error_param(R"({"edits":[{"type":"clear_tool_uses_20250919","clear_tool_inputs":"yes"}]})"),
            p + ".clear_tool_inputs");
  EXPECT_EQ(error_param(R"({"edits":[{"type":"clear_tool_uses_20250919","clear_tool_inputs":["a",2]}]})"),
            p + ".clear_tool_inputs[1]");
  EXPECT_EQ(error_param(R"({"edits":[{"type":"clear_tool_uses_20250919","exclude_tools":"memory"}]})"),
            p + ".exclude_tools");
  EXPECT_EQ(error_param(R"({"edits":[{"type":"clear_thinking_20251015","keep":"some"}]})"), p + ".keep");
  EXPECT_EQ(error_param(R"({"edits":[{"type":"clear_thinking_20251015","keep":{"type":"tool_uses","value":1}}]})"),
            p + ".keep.type");
  // Both edits: thinking first; each type once.
  EXPECT_EQ(error_param(R"({"edits":[{"type":"clear_tool_uses_20250919"},{"type":"clear_thinking_20251015"}]})"),
            "context_management.edits[1].type");
  EXPECT_EQ(error_param(R"({"edits":[{"type":"clear_tool_uses_20250919"},{"type":"clear_tool_uses_20250919"}]})"),
            "context_management.edits[1].type");
  EXPECT_EQ(error_param(R"({"edits":[{"type":"clear_thinking_20251015"},{"type":"clear_tool_uses_20250919"}]})"),
            "(accepted)");
  // count_tokens validates the same way.
  ApiResult<ChatRequest> ct = anthropic::parse_count_tokens_request(
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"context_management":{"edits":[{"type":"x"}]}})");
  ASSERT_FALSE(ct.ok());
  EXPECT_EQ(ct.error().param, p + ".type");
}

TEST(ContextEditsParse, ThinkingBlocksOfAssistantTurnsAreKept) {
  const ChatRequest c = parse(R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"hi"},
      {"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"s1"},
       {"type":"redacted_thinking","data":"xyz"},{"type":"text","text":"hello"}]},
      {"role":"user","content":"again"},
      {"role":"assistant","content":[{"type":"thinking","thinking":"only thought","signature":"s2"}]}]})");
  ASSERT_EQ(c.messages.size(), 4u);
  ASSERT_EQ(c.messages[1].thinking.size(), 2u);
  EXPECT_EQ(c.messages[1].thinking[0].text, "hmm");
  EXPECT_EQ(c.messages[1].thinking[0].signature, "s1");
  EXPECT_TRUE(c.messages[1].thinking[1].redacted);
  EXPECT_EQ(c.messages[1].content, "hello");
  // A turn that only thinks is still a turn.
  ASSERT_EQ(c.messages[3].thinking.size(), 1u);
  EXPECT_EQ(c.messages[3].content, "");
  EXPECT_FALSE(anthropic::parse_messages_request(
                   R"({"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":5}]}]})")
                   .ok());
}

TEST(ContextEdits, NothingWithoutContextManagementAndNoRender) {
  ChatRequest c = parse(agent_body(10, 100, ""));
  const ChatRequest before = c;
  ByteCodec codec;
  ApiResult<ContextEditReport> r = apply_context_edits(&c, codec);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r.value().requested);
  EXPECT_EQ(codec.n_renders, 0);
  EXPECT_EQ(ByteCodec::render(c), ByteCodec::render(before));
}

TEST(ContextEdits, ClearToolUsesBelowTheTriggerClearsNothing) {
  ChatRequest c = parse(agent_body(10, 100, R"({"edits":[{"type":"clear_tool_uses_20250919"}]})"));
  ByteCodec codec;
  ApiResult<ContextEditReport> r = apply_context_edits(&c, codec);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.value().requested);
  EXPECT_TRUE(r.value().applied.empty());
  EXPECT_EQ(r.value().n_tokens, count(c));
  EXPECT_EQ(r.value().n_original_tokens, count(c));
  EXPECT_EQ(codec.n_renders, 1);
}

TEST(ContextEdits, ClearToolUsesKeepsTheMostRecentAndCountsExactly) {
  ChatRequest c = parse(agent_body(10, 100, R"({"edits":[{"type":"clear_tool_uses_20250919",
      "trigger":{"type":"input_tokens","value":500},"keep":{"type":"tool_uses","value":4}}]})"));
  const int64_t original = count(c);
  ByteCodec codec;
  ApiResult<ContextEditReport> r = apply_context_edits(&c, codec);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(cleared_results(c), (std::vector<bool>{true, true, true, true, true, true, false, false, false, false}));
  ASSERT_EQ(r.value().applied.size(), 1u);
  const AppliedEdit& e = r.value().applied[0];
  EXPECT_EQ(e.kind, AppliedEdit::Kind::kClearToolUses);
  EXPECT_EQ(e.n_cleared, 6);
  EXPECT_EQ(e.n_cleared_tokens, 6 * (100 - static_cast<int64_t>(kClearedToolResult.size())));
  EXPECT_EQ(r.value().n_original_tokens, original);
  EXPECT_EQ(r.value().n_tokens, count(c));
  EXPECT_EQ(original - e.n_cleared_tokens, count(c));
  // Inputs stay unless asked for.
  EXPECT_NE(c.messages[1].tool_calls[0].arguments_json, kClearedToolInput);
}

TEST(ContextEdits, ExcludedToolsAndShortResultsAreNeverCleared) {
  ChatRequest c = parse(agent_body(8, 100, R"({"edits":[{"type":"clear_tool_uses_20250919",
      "trigger":{"type":"input_tokens","value":10},"keep":{"type":"tool_uses","value":2},
      "exclude_tools":["memory"]}]})", false, {"read_file", "memory"}));
  ByteCodec codec;
  ASSERT_TRUE(apply_context_edits(&c, codec).ok());
  // Uses 0..5 are old; the odd ones are "memory".
  EXPECT_EQ(cleared_results(c), (std::vector<bool>{true, false, true, false, true, false, false, false}));
  // A result no longer than the placeholder saves nothing: left alone.
  ChatRequest s = parse(agent_body(8, 10, R"({"edits":[{"type":"clear_tool_uses_20250919",
      "trigger":{"type":"input_tokens","value":10}}]})"));
  ApiResult<ContextEditReport> r = apply_context_edits(&s, codec);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.value().applied.empty());
}

TEST(ContextEdits, ClearToolInputsAllOrByName) {
  const std::string all = R"({"edits":[{"type":"clear_tool_uses_20250919","trigger":{"type":"input_tokens","value":10},
      "keep":{"type":"tool_uses","value":1},"clear_tool_inputs":true}]})";
  ChatRequest c = parse(agent_body(4, 100, all, false, {"read_file", "grep"}));
  ByteCodec codec;
  ASSERT_TRUE(apply_context_edits(&c, codec).ok());
  std::vector<std::string> args;
  for (const ChatMessage& m : c.messages) {
    for (const ToolCall& t : m.tool_calls) args.push_back(t.arguments_json);
  }
  ASSERT_EQ(args.size(), 4u);
  EXPECT_EQ(args[0], kClearedToolInput);
  EXPECT_EQ(args[2], kClearedToolInput);
  EXPECT_NE(args[3], kClearedToolInput);  // kept
  const std::string by_name = R"({"edits":[{"type":"clear_tool_uses_20250919","trigger":{"type":"input_tokens","value":10},
      "keep":{"type":"tool_uses","value":1},"clear_tool_inputs":["grep"]}]})";
  ChatRequest n = parse(agent_body(4, 100, by_name, false, {"read_file", "grep"}));
  ASSERT_TRUE(apply_context_edits(&n, codec).ok());
  args.clear();
  for (const ChatMessage& m : n.messages) {
    for (const ToolCall& t : m.tool_calls) args.push_back(t.arguments_json);
  }
  EXPECT_NE(args[0], kClearedToolInput);
  EXPECT_EQ(args[1], kClearedToolInput);
  EXPECT_NE(args[2], kClearedToolInput);
  EXPECT_EQ(cleared_results(n), (std::vector<bool>{true, true, true, false}));
}

// Parallel calls answered in another order are paired by id; a result
// whose call is not in the history is a tool use of its own.
TEST(ContextEdits, ResultsArePairedWithTheirCallsById) {
  const std::string big(200, 'r');
  const std::string body = R"({"model":"m","max_tokens":5,"messages":[{"role":"user","content":"go"},
      {"role":"user","content":[{"type":"tool_result","tool_use_id":"gone","content":")" + big + R"("}]},
      {"role":"assistant","content":[{"type":"tool_use","id":"a","name":"grep","input":{}},
                                     {"type":"tool_use","id":"b","name":"memory","input":{}}]},
      {"role":"user","content":[{"type":"tool_result","tool_use_id":"b","content":")" + big + R"("},
                                {"type":"tool_result","tool_use_id":"a","content":")" + big + R"("}]}],
      "context_management":{"edits":[{"type":"clear_tool_uses_20250919","trigger":{"type":"input_tokens","value":10},
       "keep":{"type":"tool_uses","value":1}}]}})";
  ChatRequest c = parse(body);
  ByteCodec codec;
  ApiResult<ContextEditReport> r = apply_context_edits(&c, codec);
  ASSERT_TRUE(r.ok());
  // Uses in order: the orphan, a, b. b (the most recent) stays: it is the first result sent back.
  EXPECT_EQ(cleared_results(c), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(r.value().applied[0].n_cleared, 2);
  // With grep (a's tool) excluded only the orphan is cleared.
  ChatRequest x = parse(body.substr(0, body.size() - 4) + R"(,"exclude_tools":["grep"]}]}})");
  ASSERT_TRUE(apply_context_edits(&x, codec).ok());
  EXPECT_EQ(cleared_results(x), (std::vector<bool>{true, false, false}));
}

TEST(ContextEdits, ToolUsesTrigger) {
  const std::string cm = R"({"edits":[{"type":"clear_tool_uses_20250919","trigger":{"type":"tool_uses","value":5},
      "keep":{"type":"tool_uses","value":1}}]})";
  ByteCodec codec;
  ChatRequest five = parse(agent_body(5, 100, cm));
  ASSERT_TRUE(apply_context_edits(&five, codec).ok());
  EXPECT_EQ(cleared_results(five), std::vector<bool>(5, false));
  ChatRequest six = parse(agent_body(6, 100, cm));
  ASSERT_TRUE(apply_context_edits(&six, codec).ok());
  EXPECT_EQ(cleared_results(six), (std::vector<bool>{true, true, true, true, true, false}));
}

TEST(ContextEdits, ClearAtLeastOrNothing) {
  // 6 old results of 100 bytes save 6 * (100 - placeholder) < 1000.
  ChatRequest c = parse(agent_body(9, 100, R"({"edits":[{"type":"clear_tool_uses_20250919",
      "trigger":{"type":"input_tokens","value":10},"clear_at_least":{"type":"input_tokens","value":1000}}]})"));
  ByteCodec codec;
  ApiResult<ContextEditReport> r = apply_context_edits(&c, codec);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.value().applied.empty());
  EXPECT_EQ(cleared_results(c), std::vector<bool>(9, false));
  EXPECT_EQ(r.value().n_tokens, r.value().n_original_tokens);
}

// The cache rule: with clear_at_least T, a growing conversation keeps the
// same cleared prefix from turn to turn, which moves in steps of >= T tokens.
TEST(ContextEdits, ClearAtLeastClearsInStepsThatStayPutAsTheConversationGrows) {
  const std::string cm = R"({"edits":[{"type":"clear_tool_uses_20250919","trigger":{"type":"input_tokens","value":2000},
      "keep":{"type":"tool_uses","value":3},"clear_at_least":{"type":"input_tokens","value":1000}}]})";
  ByteCodec codec;
  std::vector<int64_t> n_cleared;
  std::string previous_prefix;
  int n_same = 0, n_steps = 0;
  for (int turns = 20; turns <= 40; ++turns) {
    ChatRequest c = parse(agent_body(turns, 300, cm));
    ApiResult<ContextEditReport> r = apply_context_edits(&c, codec);
    ASSERT_TRUE(r.ok());
    ASSERT_EQ(r.value().applied.size(), 1u);
    const AppliedEdit& e = r.value().applied[0];
    EXPECT_GE(e.n_cleared_tokens, 1000);
    EXPECT_LE(e.n_cleared, turns - 3);
    EXPECT_EQ(r.value().n_tokens, count(c));
    // Each cleared use saves 300 - placeholder bytes; the step target is a
    // multiple of 1000 that the prefix reaches with the fewest uses.
    const int64_t per_use = 300 - static_cast<int64_t>(kClearedToolResult.size());
    const int64_t all = (turns - 3) * per_use;
    const int64_t target = all / 1000 * 1000;
    EXPECT_EQ(e.n_cleared, (target + per_use - 1) / per_use) << turns;
    // The prompt up to the end of the last cleared result is what the previous turn rendered.
    const std::string rendered = ByteCodec::render(c);
    const size_t last = rendered.rfind(kClearedToolResult) + kClearedToolResult.size();
    const std::string prefix = rendered.substr(0, last);
    if (!n_cleared.empty()) (n_cleared.back() == e.n_cleared ? n_same : n_steps)++;
    if (!n_cleared.empty() && n_cleared.back() == e.n_cleared) {
      EXPECT_EQ(prefix, previous_prefix) << turns;
    }
    n_cleared.push_back(e.n_cleared);
    previous_prefix = prefix;
  }
  // 20 turns: the prefix moved only every few turns.
  EXPECT_GT(n_same, 2 * n_steps);
  EXPECT_GT(n_steps, 0);
  // The search costs about log2(uses) renders per request, not one per use.
  EXPECT_LT(codec.n_renders, 21 * 10);
}

TEST(ContextEdits, ClearThinkingKeepsTheLastTurns) {
  const std::string keep1 = R"({"edits":[{"type":"clear_thinking_20251015"}]})";
  ByteCodec codec;
  ChatRequest c = parse(agent_body(5, 50, keep1, /*thinking=*/true));
  const int64_t original = count(c);
  ApiResult<ContextEditReport> r = apply_context_edits(&c, codec);
  ASSERT_TRUE(r.ok());
  std::vector<size_t> n_blocks;
  for (const ChatMessage& m : c.messages) {
    if (m.role == "assistant") n_blocks.push_back(m.thinking.size());
  }
  EXPECT_EQ(n_blocks, (std::vector<size_t>{0, 0, 0, 0, 1}));
  ASSERT_EQ(r.value().applied.size(), 1u);
  EXPECT_EQ(r.value().applied[0].kind, AppliedEdit::Kind::kClearThinking);
  EXPECT_EQ(r.value().applied[0].n_cleared, 4);
  EXPECT_EQ(r.value().applied[0].n_cleared_tokens, original - count(c));
  EXPECT_EQ(r.value().applied[0].n_cleared_tokens, 4 * static_cast<int64_t>(std::string("<think>step 0 plan</think>").size()));

  ChatRequest all = parse(agent_body(5, 50, R"({"edits":[{"type":"clear_thinking_20251015","keep":"all"}]})", true));
  r = apply_context_edits(&all, codec);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.value().applied.empty());
  ChatRequest none = parse(agent_body(5, 50,
      R"({"edits":[{"type":"clear_thinking_20251015","keep":{"type":"thinking_turns","value":0}}]})", true));
  r = apply_context_edits(&none, codec);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.value().applied[0].n_cleared, 5);
  for (const ChatMessage& m : none.messages) EXPECT_TRUE(m.thinking.empty());
}

TEST(ContextEdits, BothEditsThinkingFirstThenTheTriggerOnWhatIsLeft) {
  // Thinking costs 5 * 26 bytes; the trigger sits between the prompt with and
  // without it: once thinking is cleared the tool edit has nothing to do.
  const std::string base = agent_body(5, 50, "", true);
  ChatRequest probe = parse(base);
  const int64_t with_thinking = count(probe);
  const int64_t trigger = with_thinking - 50;
  const std::string cm = R"({"edits":[{"type":"clear_thinking_20251015"},{"type":"clear_tool_uses_20250919",
      "trigger":{"type":"input_tokens","value":)" + std::to_string(trigger) + R"(},"keep":{"type":"tool_uses","value":1}}]})";
  ByteCodec codec;
  ChatRequest c = parse(agent_body(5, 50, cm, true));
  ApiResult<ContextEditReport> r = apply_context_edits(&c, codec);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r.value().applied.size(), 1u);
  EXPECT_EQ(r.value().applied[0].kind, AppliedEdit::Kind::kClearThinking);
  // A lower trigger: both apply, in order, and the counts add up.
  const std::string cm2 = R"({"edits":[{"type":"clear_thinking_20251015"},{"type":"clear_tool_uses_20250919",
      "trigger":{"type":"input_tokens","value":100},"keep":{"type":"tool_uses","value":1}}]})";
  ChatRequest d = parse(agent_body(5, 50, cm2, true));
  r = apply_context_edits(&d, codec);
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r.value().applied.size(), 2u);
  EXPECT_EQ(r.value().applied[1].kind, AppliedEdit::Kind::kClearToolUses);
  EXPECT_EQ(r.value().applied[1].n_cleared, 4);
  EXPECT_EQ(r.value().n_original_tokens - r.value().applied[0].n_cleared_tokens - r.value().applied[1].n_cleared_tokens,
            count(d));
}

TEST(ContextEdits, AppliedEditsOnTheMessageAndTheFinalMessageDelta) {
  ContextEditReport report{.requested = true, .n_original_tokens = 900, .n_tokens = 500,
                           .applied = {{.kind = AppliedEdit::Kind::kClearThinking, .n_cleared = 2, .n_cleared_tokens = 100},
                                       {.kind = AppliedEdit::Kind::kClearToolUses, .n_cleared = 3, .n_cleared_tokens = 300}}};
  const std::string expected =
      R"("context_management":{"applied_edits":[{"type":"clear_thinking_20251015","cleared_thinking_turns":2,"cleared_input_tokens":100},)"
      R"({"type":"clear_tool_uses_20250919","cleared_tool_uses":3,"cleared_input_tokens":300}]})";
  const Completion done{.finish = FinishReason::kEndOfSequence, .usage = {.n_prompt_tokens = 500, .n_generated_tokens = 2}};
  auto f = anthropic::make_formatter("m", "req_1", false, report);
  const std::string body = f->complete({AnswerPart{.text = "ok"}}, done).body;
  EXPECT_NE(body.find(expected), std::string::npos) << body;
  EXPECT_NO_THROW((void)json::parse(body));
  std::string stream;
  auto s = anthropic::make_formatter("m", "req_1", false, report);
  s->stream_start(Usage{.n_prompt_tokens = 500}, stream);
  s->stream_finish(done, stream);
  const size_t delta = stream.find("event: message_delta");
  ASSERT_NE(delta, std::string::npos);
  EXPECT_NE(stream.find(expected, delta), std::string::npos) << stream;
  EXPECT_EQ(stream.find("context_management"), stream.find(expected, delta) + 1);  // only there
  // Requested, nothing applied: an empty list. Not requested: no field.
  auto e = anthropic::make_formatter("m", "req_1", false, ContextEditReport{.requested = true});
  EXPECT_NE(e->complete({}, done).body.find(R"("context_management":{"applied_edits":[]})"), std::string::npos);
  auto n = anthropic::make_formatter("m", "req_1");
  EXPECT_EQ(n->complete({}, done).body.find("context_management"), std::string::npos);
}

}  // namespace
}  // namespace zl::api
