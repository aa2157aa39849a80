// Reasoning models: the thought parser (markers split anywhere, a thought
// the prompt opened, none at all, an unterminated one), the templates'
// thinking formats against llama.cpp's renders of the real templates
// (../shared/templates), the history rules, the engine's budgeted span on
// stories260K (the closing marker forced after exactly B tokens), the
// signature, and the Anthropic `thinking` field's 400s.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "api/anthropic/messages.h"
#include "api/openai/chat_completions.h"
#include "api/thinking.h"
#include "api/tokenizer_codec.h"
#include "engine/engine.h"
#include "engine/span_budget.h"
#include "model/model.h"
#include "support/engine_fixture.h"
#include "support/process.h"
#include "support/wait.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace zl {
namespace {

using api::ThinkingParser;
using api::ThoughtPiece;

// Feeds `chunks` and finishes; returns (thought, answer) and checks that no
// piece is empty and that kinds alternate (merged).
std::pair<std::string, std::string> parse(bool starts_inside, const std::vector<std::string>& chunks) {
  ThinkingParser p(starts_inside);
  std::vector<ThoughtPiece> out;
  for (const std::string& c : chunks) p.push(c, &out);
  p.finish(&out);
  std::string thought, answer;
  bool seen_answer = false;
  for (const ThoughtPiece& piece : out) {
    EXPECT_FALSE(piece.text.empty());
    if (piece.thought) {
      EXPECT_FALSE(seen_answer) << "thought after answer text";
      thought += piece.text;
    } else {
      seen_answer = true;
      answer += piece.text;
    }
  }
  return {thought, answer};
}

// Every split of `text` into two and three chunks gives the same result.
void expect_all_splits(bool inside, const std::string& text, const std::string& thought, const std::string& answer) {
  EXPECT_EQ(parse(inside, {text}), std::make_pair(thought, answer)) << text;
  for (size_t i = 0; i <= text.size(); ++i) {
    EXPECT_EQ(parse(inside, {text.substr(0, i), text.substr(i)}), std::make_pair(thought, answer)) << i;
    for (size_t j = i; j <= text.size(); j += 3) {
      EXPECT_EQ(parse(inside, {text.substr(0, i), text.substr(i, j - i), text.substr(j)}),
                std::make_pair(thought, answer))
          << i << "," << j;
    }
  }
  // One byte at a time.
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  EXPECT_EQ(parse(inside, bytes), std::make_pair(thought, answer));
}

TEST(ThinkingParser, MarkersSplitAnywhere) {
  expect_all_splits(false, "<think>\nLet me see.\n</think>\n\nHello!", "Let me see.", "Hello!");
  expect_all_splits(false, "  <think>a</think>b", "a", "b");
  // The prompt opened the thought: the output starts inside it.
  expect_all_splits(true, "\nPlan: x < y\n</think>\n\nDone", "Plan: x < y", "Done");
  expect_all_splits(true, "a </thin b\n\nc</think>z", "a </thin b\n\nc", "z");
}

TEST(ThinkingParser, NoThoughtIsAnswerAsItCame) {
  expect_all_splits(false, "Hello <think>not a thought</think>", "", "Hello <think>not a thought</think>");
  expect_all_splits(false, "<thinking>", "", "<thinking>");
  expect_all_splits(false, "\n<b>", "", "\n<b>");
  expect_all_splits(false, "<thi", "", "<thi");  // ended while it could still have been one
}

TEST(ThinkingParser, UnterminatedThoughtIsThoughtToTheEnd) {
  expect_all_splits(true, "\nstill thinking\n\n", "still thinking", "");
  expect_all_splits(true, "almost </thi", "almost </thi", "");
  expect_all_splits(false, "<think>\nhmm", "hmm", "");
  expect_all_splits(true, "", "", "");
}

TEST(ThinkingParser, OnlyTheFirstCloseEndsIt) {
  expect_all_splits(true, "a</think>b</think>c", "a", "b</think>c");
}

// What the parser costs per delta, beside appending the delta to a string
// (what a collected answer does anyway): a report, not an assertion. A
// thought then an answer, 4-byte deltas (about a token each).
TEST(ThinkingParser, CostReport) {
  std::string output = "<think>\n";
  while (output.size() < (4 << 20)) output += "Let me weigh x < y and </thought> again.\n";
  output += "</think>\n\nDone.";
  using Clock = std::chrono::steady_clock;
  auto time_ns = [&](auto&& fn) {
    const auto t0 = Clock::now();
    fn();
    return std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
  };
  size_t n_thought = 0;
  const double parse_ns = time_ns([&] {
    ThinkingParser p(/*starts_inside=*/false);
    std::vector<ThoughtPiece> out;
    for (size_t i = 0; i < output.size(); i += 4) {
      out.clear();
      p.push(std::string_view(output).substr(i, 4), &out);
      for (const ThoughtPiece& piece : out) n_thought += piece.thought ? piece.text.size() : 0;
    }
  });
  std::string copy;
  const double copy_ns = time_ns([&] {
    for (size_t i = 0; i < output.size(); i += 4) copy.append(std::string_view(output).substr(i, 4));
  });
  EXPECT_GT(n_thought, output.size() - 32);
  const double n_deltas = static_cast<double>(output.size()) / 4;
  std::printf("thinking parser: %.1f ns/delta (appending the delta: %.1f ns), %.0f MB/s\n", parse_ns / n_deltas,
              copy_ns / n_deltas, output.size() / parse_ns * 1e3);
  SpanBudgetTracker t(SpanBudget{.open_at_start = true, .end_text = "</think>", .end_ids = {1}, .budget = 0});
  const double span_ns = time_ns([&] {
    for (size_t i = 0; i < output.size(); i += 4) t.observe(std::string_view(output).substr(i, 4));
  });
  std::printf("engine span tracker: %.1f ns/token\n", span_ns / n_deltas);
}

// ---- templates ----

std::string template_file(const std::string& name) {
  return test::read_file(test::shared_dir() + "/templates/" + name + ".jinja");
}

ChatTemplate real_template(const std::string& name) {
  const std::string jinja = template_file(name);
  const ChatTemplateKind kind = detect_chat_template(jinja);
  return ChatTemplate(kind, "<s>", "</s>", detect_thinking_format(kind, jinja));
}

TEST(ThinkingTemplates, DetectedFromTheRealTemplates) {
  if (template_file("Qwen-QwQ-32B").empty()) GTEST_SKIP() << "SKIPPED: ../shared/templates not found";
  const ThinkingFormat qwq = real_template("Qwen-QwQ-32B").thinking();
  EXPECT_TRUE(qwq.enabled);
  EXPECT_EQ(qwq.gen_on, "<think>\n");
  EXPECT_EQ(qwq.gen_off, "<think>\n</think>");
  EXPECT_FALSE(qwq.keeps_recent);
  const ChatTemplate r1 = real_template("deepseek-ai-DeepSeek-R1-Distill-Llama-8B");
  EXPECT_EQ(r1.kind(), ChatTemplateKind::kDeepseek);
  EXPECT_EQ(r1.thinking().gen_on, "<think>\n");
  EXPECT_EQ(r1.thinking().gen_off, "");  // no switch
  const ThinkingFormat q35 = real_template("Qwen3.5-4B").thinking();
  EXPECT_EQ(q35.gen_on, "<think>\n");
  EXPECT_EQ(q35.gen_off, "<think>\n\n</think>\n\n");
  EXPECT_TRUE(q35.keeps_recent);
  // Templates without thoughts, and a hybrid we do not render.
  EXPECT_FALSE(real_template("meta-llama-Llama-3.3-70B-Instruct").thinking().enabled);
  EXPECT_EQ(real_template("deepseek-ai-DeepSeek-V3.1").kind(), ChatTemplateKind::kPlain);
  EXPECT_FALSE(real_template("deepseek-ai-DeepSeek-V3.1").thinking().enabled);
}

// Qwen3's own template (not in ../shared; its parts that matter here, as
// published): the history writes "\n<think>\n" but the generation prompt
// does not open the thought; the switch renders an empty one.
TEST(ThinkingTemplates, Qwen3IsDetectedFromItsGenerationPrompt) {
  const std::string jinja = R"J({%- for message in messages %}
    {%- if message.role == "assistant" %}
        {%- set reasoning_content = '' %}
        {%- if message.reasoning_content is string %}{%- set reasoning_content = message.reasoning_content %}{%- endif %}
        {%- if loop.index0 > ns.last_query_index %}
            {%- if loop.last or (not loop.last and reasoning_content) %}
                {{- '<|im_start|>' + message.role + '\n<think>\n' + reasoning_content.strip('\n') + '\n</think>\n\n' + content.lstrip('\n') }}
            {%- else %}
                {{- '<|im_start|>' + message.role + '\n' + content }}
            {%- endif %}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\n' }}
    {%- if enable_thinking is defined and enable_thinking is false %}
        {{- '<think>\n\n</think>\n\n' }}
    {%- endif %}
{%- endif %})J";
  const ChatTemplateKind kind = detect_chat_template(jinja);
  ASSERT_EQ(kind, ChatTemplateKind::kChatml);
  const ThinkingFormat f = detect_thinking_format(kind, jinja);
  EXPECT_TRUE(f.enabled);
  EXPECT_EQ(f.gen_on, "");
  EXPECT_EQ(f.gen_off, "<think>\n\n</think>\n\n");
  EXPECT_TRUE(f.keeps_recent);
  EXPECT_TRUE(f.recent_needs_reasoning);
  const ThinkingFormat by_name = thinking_format_for_name("qwen3");
  EXPECT_EQ(by_name.gen_on, f.gen_on);
  EXPECT_EQ(by_name.gen_off, f.gen_off);
  EXPECT_EQ(by_name.recent_needs_reasoning, f.recent_needs_reasoning);
  // After the last query, a turn without reasoning is plain (Qwen3) or
  // gets an empty thought (Qwen3.5).
  const std::vector<ChatMessage> h = {{.role = "user", .content = "Q"},
                                      {.role = "assistant", .content = "<tool_call>x</tool_call>"},
                                      {.role = "user", .content = "<tool_response>\n9\n</tool_response>"}};
  const std::string tail = "<|im_start|>user\n<tool_response>\n9\n</tool_response><|im_end|>\n<|im_start|>assistant\n";
  EXPECT_EQ(ChatTemplate(kind, "<s>", "</s>", f).render(h)->text(),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<tool_call>x</tool_call><|im_end|>\n" + tail);
  EXPECT_EQ(ChatTemplate(kind, "<s>", "</s>", thinking_format_for_name("qwen3.5")).render(h)->text(),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>x</tool_call>"
            "<|im_end|>\n" + tail + "<think>\n");
}

// llama.cpp's renders (expected.json) of the conversations without tools.
TEST(ThinkingTemplates, RendersMatchLlamaCpp) {
  if (template_file("Qwen-QwQ-32B").empty()) GTEST_SKIP() << "SKIPPED: ../shared/templates not found";
  const auto expected = boost::json::parse(test::read_file(test::shared_dir() + "/templates/expected.json")).as_object();
  const auto convs = boost::json::parse(test::read_file(test::shared_dir() + "/templates/conversations.json")).as_object();
  for (const char* name : {"Qwen-QwQ-32B", "deepseek-ai-DeepSeek-R1-Distill-Llama-8B", "Qwen3.5-4B"}) {
    const ChatTemplate t = real_template(name);
    for (const char* conv : {"single", "system_multi", "edge_text"}) {
      std::vector<ChatMessage> msgs;
      for (const auto& m : convs.at(conv).at("messages").as_array()) {
        msgs.push_back({std::string(m.at("role").as_string()), std::string(m.at("content").as_string())});
      }
      auto p = t.render(msgs);
      ASSERT_TRUE(p.ok()) << p.status().to_string();
      EXPECT_EQ(p->text(), std::string(expected.at(name).at(conv).as_string())) << name << " / " << conv;
    }
  }
}

TEST(ThinkingTemplates, SwitchAndHistory) {
  const ChatTemplate qwen3(ChatTemplateKind::kChatml, "<s>", "</s>", thinking_format_for_name("qwen3"));
  const ChatTemplate qwen35(ChatTemplateKind::kChatml, "<s>", "</s>", thinking_format_for_name("qwen3.5"));
  const ChatTemplate qwq(ChatTemplateKind::kChatml, "<s>", "</s>", thinking_format_for_name("qwq"));
  const ChatTemplate r1(ChatTemplateKind::kDeepseek, "<s>", "</s>", thinking_format_for_name("deepseek-r1"));
  const std::vector<ChatMessage> one = {{"user", "Hi"}};
  const ChatRenderOptions off{.enable_thinking = false};
  EXPECT_EQ(qwen3.render(one)->text(), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(qwen3.render(one, off)->text(),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  EXPECT_EQ(qwen35.render(one)->text(), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n");
  EXPECT_EQ(qwen35.prompt_thought({}), PromptThought::kOpen);
  EXPECT_EQ(qwen35.prompt_thought(off), PromptThought::kClosed);
  EXPECT_EQ(qwen3.prompt_thought({}), PromptThought::kNone);
  EXPECT_EQ(qwen3.prompt_thought(off), PromptThought::kClosed);
  EXPECT_EQ(r1.render(one, off)->text(), "<｜User｜>Hi<｜Assistant｜><think>\n");  // no switch
  EXPECT_EQ(r1.prompt_thought(off), PromptThought::kOpen);

  // History: a tool round trip after the last query keeps its reasoning
  // (Qwen3); an earlier turn's is dropped; QwQ/R1 drop every one, and strip
  // a thought left in the text.
  std::vector<ChatMessage> h = {{.role = "user", .content = "Q1"},
                                {.role = "assistant", .content = "A1", .reasoning = "R1"},
                                {.role = "user", .content = "Q2"},
                                {.role = "assistant", .content = "<tool_call>x</tool_call>", .reasoning = "\nR2\n"},
                                {.role = "user", .content = "<tool_response>\n9\n</tool_response>"}};
  EXPECT_EQ(qwen35.render(h)->text(),
            "<|im_start|>user\nQ1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nQ2<|im_end|>\n"
            "<|im_start|>assistant\n<think>\nR2\n</think>\n\n<tool_call>x</tool_call><|im_end|>\n"
            "<|im_start|>user\n<tool_response>\n9\n</tool_response><|im_end|>\n<|im_start|>assistant\n<think>\n");
  std::vector<ChatMessage> s = {{.role = "user", .content = "Q"},
                                {.role = "assistant", .content = "<think>\nold\n</think>\n\nA", .reasoning = "R"},
                                {.role = "user", .content = "Q2"}};
  EXPECT_EQ(qwq.render(s)->text(),
            "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\nA<|im_end|>\n<|im_start|>user\nQ2<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n");
  EXPECT_EQ(r1.render(s)->text(), "<｜User｜>Q<｜Assistant｜>A<｜end▁of▁sentence｜><｜User｜>Q2<｜Assistant｜><think>\n");
}

// ---- the Anthropic field and OpenAI switches ----

TEST(ThinkingRequest, AnthropicFieldIsValidated) {
  auto parse_body = [](const std::string& thinking, int max_tokens = 4000) {
    return api::anthropic::parse_messages_request(R"({"model":"m","max_tokens":)" + std::to_string(max_tokens) +
                                                  R"(,"messages":[{"role":"user","content":"hi"}],"thinking":)" +
                                                  thinking + "}");
  };
  auto ok = parse_body(R"({"type":"enabled","budget_tokens":2048})");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok.value().thinking.enabled, true);
  EXPECT_EQ(ok.value().thinking.budget_tokens, 2048);
  ASSERT_TRUE(parse_body(R"({"type":"disabled"})").ok());
  EXPECT_EQ(parse_body(R"({"type":"disabled"})").value().thinking.enabled, false);
  EXPECT_TRUE(parse_body(R"({"type":"adaptive"})").ok());
  struct Bad {
    std::string thinking;
    std::string param;
  };
  for (const Bad& b : std::vector<Bad>{{R"({"type":"enabled","budget_tokens":1023})", "thinking.budget_tokens"},
                                       {R"({"type":"enabled","budget_tokens":4000})", "thinking.budget_tokens"},
                                       {R"({"type":"enabled"})", "thinking.budget_tokens"},
                                       {R"({"type":"enabled","budget_tokens":"x"})", "thinking.budget_tokens"},
                                       {R"({"type":"sometimes"})", "thinking.type"},
                                       {R"({})", "thinking.type"},
                                       {R"("on")", "thinking"}}) {
    auto r = parse_body(b.thinking);
    ASSERT_FALSE(r.ok()) << b.thinking;
    EXPECT_EQ(api::http_status(r.error()), 400);
    EXPECT_EQ(r.error().param, b.param) << b.thinking;
  }
  // count_tokens: no max_tokens, so no upper bound.
  auto ct = api::anthropic::parse_count_tokens_request(
      R"({"model":"m","messages":[{"role":"user","content":"hi"}],"thinking":{"type":"enabled","budget_tokens":99999}})");
  ASSERT_TRUE(ct.ok());
  EXPECT_EQ(ct.value().thinking.budget_tokens, 99999);
}

TEST(ThinkingRequest, HistoryBlocksAreKept) {
  auto r = api::anthropic::parse_messages_request(R"({"model":"m","max_tokens":10,"messages":[
    {"role":"user","content":"hi"},
    {"role":"assistant","content":[{"type":"thinking","thinking":"T","signature":"S"},
                                   {"type":"redacted_thinking","data":"xx"},{"type":"text","text":"A"}]},
    {"role":"user","content":"more"}]})");
  ASSERT_TRUE(r.ok());
  const api::ChatMessage& a = r.value().messages[1];
  ASSERT_EQ(a.thinking.size(), 2u);
  EXPECT_EQ(a.thinking[0].text, "T");
  EXPECT_EQ(a.thinking[0].signature, "S");
  EXPECT_TRUE(a.thinking[1].redacted);
  EXPECT_EQ(a.content, "A");
  auto o = api::openai::parse_chat_request(R"({"model":"m","messages":[{"role":"user","content":"hi"},
    {"role":"assistant","content":"A","reasoning_content":"because"},{"role":"user","content":"x"}],
    "chat_template_kwargs":{"enable_thinking":false}})");
  ASSERT_TRUE(o.ok());
  ASSERT_EQ(o.value().messages[1].thinking.size(), 1u);
  EXPECT_EQ(o.value().messages[1].thinking[0].text, "because");
  EXPECT_EQ(o.value().thinking.enabled, false);
  auto e = api::openai::parse_chat_request(R"({"model":"m","messages":[{"role":"user","content":"hi"}],"reasoning_effort":"lots"})");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().param, "reasoning_effort");
}

TEST(ThinkingRequest, SignatureIsAStableDigest) {
  const std::string s = api::thought_signature("abc");
  EXPECT_EQ(s, "zl1.ungWv48Bz+pBQUDeXa4iI7ADYaOWF3qctBD/YfIAFa0=");  // SHA-256("abc"), base64
  api::ThoughtSigner split;
  split.update("a");
  split.update("bc");
  EXPECT_EQ(split.signature(), s);
}

// ---- the engine's budgeted span ----

TEST(SpanBudget, TrackerForcesTheEndAfterTheBudget) {
  SpanBudgetTracker t(SpanBudget{.start_text = "<think>", .end_text = "</think>", .end_ids = {7, 8}, .budget = 2});
  t.observe("<th");
  EXPECT_EQ(t.state(), SpanBudgetTracker::State::kBefore);
  t.observe("ink>x");  // opens the span; this token is not inside it
  EXPECT_EQ(t.state(), SpanBudgetTracker::State::kInside);
  EXPECT_FALSE(t.forced_next());
  t.observe("a");
  t.observe("b");
  ASSERT_EQ(t.forced_next(), 7);
  t.observe("</thi");
  ASSERT_EQ(t.forced_next(), 8);
  t.observe("nk>");
  EXPECT_EQ(t.state(), SpanBudgetTracker::State::kClosed);
  EXPECT_FALSE(t.forced_next());
  // The model's own close ends it early, split across tokens.
  SpanBudgetTracker own(SpanBudget{.open_at_start = true, .end_text = "</think>", .end_ids = {7}, .budget = 5});
  own.observe("x </th");
  own.observe("ink> y");
  EXPECT_EQ(own.state(), SpanBudgetTracker::State::kClosed);
  EXPECT_EQ(own.n_inside(), 2);
}

using test::LoadedModel;
using test::Outcome;

Outcome run(Engine& engine, Request r) { return test::collect(*engine.submit(std::move(r))); }

// On both models, with the thought opened by the prompt (qwen3.5's
// template) and greedy decoding: the first B tokens are the model's own
// (the same as without a budget), then exactly the forced close, then the
// answer; usage counts every token.
TEST(SpanBudget, EngineForcesTheCloseAfterExactlyBTokens) {
  for (const char* name : {"stories260K", "tiny-qwen3-F32"}) {
    LoadedModel l = test::load_shared_model(name);
    if (!l.model) GTEST_SKIP() << "SKIPPED: ../shared/models not found";
    EngineConfig cfg{.n_ctx = 256, .max_seqs = 2, .n_kv_tokens = 512, .block_size = 16, .n_threads = 1};
    auto engine = Engine::create(*l.model, *l.tokenizer, cfg);
    ASSERT_TRUE(engine.ok());
    const ChatTemplate tmpl(ChatTemplateKind::kChatml, "<s>", "</s>", thinking_format_for_name("qwen3.5"));
    const std::vector<ChatMessage> msgs = {{"user", "Once upon a time"}};
    const ChatPrompt prompt = *tmpl.render(msgs);
    ASSERT_TRUE(prompt.text().ends_with("<think>\n"));
    const std::vector<int32_t> ids = l.tokenizer->encode(prompt.segments(), /*add_special=*/true);
    auto greedy = [&](int max_tokens) {
      Request r{.id = "r", .tenant = "t", .prompt_ids = ids};
      r.sampling.temperature = 0;
      r.stop.max_tokens = max_tokens;
      r.stop.ignore_eos = true;
      r.return_token_ids = true;
      return r;
    };
    const Outcome free = run(**engine, greedy(30));
    const std::vector<int32_t> close =
        l.tokenizer->encode("\n</think>\n\n", EncodeOptions{.add_special = false, .parse_special = true});
    constexpr int kBudget = 9;
    Request r = greedy(30);
    r.stop.span = SpanBudget{.open_at_start = true, .start_text = "<think>", .end_text = "</think>",
                             .end_ids = close, .budget = kBudget};
    const Outcome budgeted = run(**engine, r);
    ASSERT_EQ(budgeted.ids.size(), 30u) << name;
    EXPECT_EQ(budgeted.last.usage.n_generated_tokens, 30);
    EXPECT_EQ(std::vector<int32_t>(budgeted.ids.begin(), budgeted.ids.begin() + kBudget),
              std::vector<int32_t>(free.ids.begin(), free.ids.begin() + kBudget))
        << name;
    EXPECT_EQ(std::vector<int32_t>(budgeted.ids.begin() + kBudget, budgeted.ids.begin() + kBudget + close.size()),
              close)
        << name;
    // The thought as the API layer reads it: closed, and an answer after.
    ThinkingParser parser(/*starts_inside=*/true);
    std::vector<ThoughtPiece> pieces;
    parser.push(budgeted.text, &pieces);
    parser.finish(&pieces);
    ASSERT_FALSE(pieces.empty());
    EXPECT_FALSE(parser.in_thought()) << name << ": " << budgeted.text;
    // A model that closes the thought itself before the budget is not forced:
    // the budget is then spent by nothing (free run == budgeted run).
    Request big = greedy(30);
    big.stop.span = SpanBudget{.open_at_start = true, .end_text = "</think>", .end_ids = close, .budget = 100};
    EXPECT_EQ(run(**engine, big).ids, free.ids) << name;
  }
}

}  // namespace
}  // namespace zl
