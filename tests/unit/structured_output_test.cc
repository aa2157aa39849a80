// Constrained decoding in the engine on real models (stories260K and the
// built-in demo model) at temperature 1.0
// over many seeds: every answer that ends parses and validates against its
// schema (tests/support/schema_validator.h, independent of the grammar code);
// an answer cut by max_tokens is honest (kMaxTokens) and is a prefix the
// grammar still accepts. Also the API side: the constraint built for tool
// calls in Hermes syntax, and the errors for unsupported schemas.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "api/openai/chat_completions.h"
#include "api/structured_output.h"
#include "engine/constraint.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "support/ambiguous_grammar.h"
#include "support/engine_fixture.h"
#include "support/schema_validator.h"

namespace zl::test {
namespace {

namespace json = boost::json;

LoadedModel load_path(const std::string& path) {
  LoadedModel l;
  if (!file_exists(path)) return l;
  auto m = load_model(path);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  if (!m.ok()) return l;
  l.model = std::move(m).value();
  auto t = Tokenizer::from_gguf(*l.model->file);
  EXPECT_TRUE(t.ok()) << t.status().to_string();
  l.tokenizer = std::move(t).value();
  return l;
}

const char* kPerson = R"({"type":"object","properties":{
    "name":{"type":"string","minLength":1,"maxLength":16},
    "age":{"type":"integer","minimum":0,"maximum":120},
    "mood":{"enum":["happy","sad","calm"]},
    "pets":{"type":"array","items":{"type":"string","maxLength":8},"maxItems":3}},
  "required":["name","age","mood"],"additionalProperties":false})";
const char* kShapes = R"({"$defs":{"pt":{"type":"object","properties":{"x":{"type":"integer"},"y":{"type":"integer"}},
    "required":["x","y"],"additionalProperties":false}},
  "anyOf":[{"type":"object","properties":{"kind":{"const":"line"},"a":{"$ref":"#/$defs/pt"},"b":{"$ref":"#/$defs/pt"}},
            "required":["kind","a","b"],"additionalProperties":false},
           {"type":"object","properties":{"kind":{"const":"dot"},"at":{"$ref":"#/$defs/pt"},"ok":{"type":"boolean"},
            "tag":{"type":["string","null"],"pattern":"^[a-z]{1,6}$"}},"required":["kind","at","ok"],"additionalProperties":false}]})";

struct Tally {
  int n_valid = 0, n_cut = 0;
};

// `n` requests at temperature 1 with seeds 1..n under `schema`.
Tally run_schema(Engine& engine, const Tokenizer& tok, const std::string& schema_text, int n, int max_tokens) {
  Tally t;
  const json::value schema = json::parse(schema_text);
  auto g = grammar::compile_json_schema(schema_text);
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  if (!g.ok()) return t;
  auto prompt = tok.encode("Once upon a time");
  for (int seed = 1; seed <= n; ++seed) {
    Request r{.id = "s" + std::to_string(seed), .tenant = "t", .prompt_ids = prompt};
    r.sampling.temperature = 1.0f;
    r.sampling.seed = static_cast<uint64_t>(seed);
    r.stop.max_tokens = max_tokens;
    r.constraint = GrammarConstraint{.start = *g, .end_when_complete = true};
    Outcome o = collect(*engine.submit(std::move(r)));
    if (o.last.finish == FinishReason::kEndOfSequence) {
      EXPECT_EQ(zl::testing::parse_and_validate(o.text, schema), "") << "seed " << seed << ": " << o.text;
      ++t.n_valid;
    } else {
      EXPECT_EQ(o.last.finish, FinishReason::kMaxTokens) << "seed " << seed << ": " << o.text;
      EXPECT_EQ(o.last.usage.n_generated_tokens, max_tokens);
      grammar::Matcher m(*g);
      EXPECT_TRUE(m.advance(o.text)) << "seed " << seed << " cut, but not a prefix: " << o.text;
      ++t.n_cut;
    }
  }
  return t;
}

class StructuredOnModel : public ::testing::TestWithParam<std::string> {};

// The engine these tests run on the loaded model: F32 cache, 2 threads.
Result<std::unique_ptr<Engine>> engine_on(const LoadedModel& l, int64_t n_ctx, int32_t max_seqs) {
  return Engine::create(*l.model, *l.tokenizer,
                        EngineConfig{.n_ctx = n_ctx, .max_seqs = max_seqs, .kv_type = KvType::kF32, .n_threads = 2});
}

TEST_P(StructuredOnModel, EveryAnswerValidatesAtTemperatureOne) {
  const std::string path = GetParam();
  LoadedModel l = load_path(path);
  if (!l.model) GTEST_SKIP() << "SKIPPED: " << path << " not found";
  auto engine = engine_on(l, 512, 4);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  for (const char* schema : {kPerson, kShapes}) {
    const Tally t = run_schema(**engine, *l.tokenizer, schema, 24, 160);
    EXPECT_GT(t.n_valid, 0) << path << ": no answer finished under " << schema;
    std::printf("%s: %d valid, %d cut by max_tokens\n", path.c_str(), t.n_valid, t.n_cut);
  }
  // max_tokens too small for any object: every answer is cut, honestly.
  const Tally cut = run_schema(**engine, *l.tokenizer, kPerson, 4, 3);
  EXPECT_EQ(cut.n_cut, 4);
}

// An answer whose grammar completes on exactly its max_tokens-th token is
// whole: it ends as if by EOS (the only token the grammar allowed next), not
// as cut by max_tokens.
TEST_P(StructuredOnModel, AnAnswerCompletedOnTheLastAllowedTokenIsWhole) {
  const std::string path = GetParam();
  LoadedModel l = load_path(path);
  if (!l.model) GTEST_SKIP() << "SKIPPED: " << path << " not found";
  auto engine = engine_on(l, 512, 2);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  auto g = grammar::compile_json_schema(kPerson);
  ASSERT_TRUE(g.ok());
  auto run = [&](uint64_t seed, int32_t max_tokens) {
    Request r{.id = "w" + std::to_string(seed), .tenant = "t", .prompt_ids = l.tokenizer->encode("Once upon a time")};
    r.sampling.temperature = 1.0f;
    r.sampling.seed = seed;
    r.stop.max_tokens = max_tokens;
    r.constraint = GrammarConstraint{.start = *g, .end_when_complete = true};
    return collect(*(*engine)->submit(std::move(r)));
  };
  int checked = 0;
  for (uint64_t seed = 1; seed <= 8 && checked < 2; ++seed) {
    const Outcome free_run = run(seed, 160);
    if (free_run.last.finish != FinishReason::kEndOfSequence) continue;
    // The EOS that ended it was one more generated token: the JSON took one fewer.
    const int32_t n_json = free_run.last.usage.n_generated_tokens - 1;
    const Outcome exact = run(seed, n_json);
    EXPECT_EQ(exact.text, free_run.text) << "seed " << seed;
    EXPECT_EQ(exact.last.finish, FinishReason::kEndOfSequence) << "seed " << seed << ": " << exact.text;
    EXPECT_EQ(exact.last.usage.n_generated_tokens, n_json);
    const Outcome cut = run(seed, n_json - 1);
    EXPECT_EQ(cut.last.finish, FinishReason::kMaxTokens) << "seed " << seed;
    ++checked;
  }
  EXPECT_GT(checked, 0) << path << ": no answer finished";
}

// `n_items` optional letters written out one by one in GBNF, then `tail`,
// as the constraint of a request on `engine`: its outcome.
Outcome run_letters(Engine& engine, const Tokenizer& tok, int n_items, const std::string& tail, int32_t max_tokens,
                    bool ignore_eos) {
  auto g = grammar::compile_gbnf(optional_letters_gbnf(n_items) + tail);
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  if (!g.ok()) return {};
  Request r{.id = "letters", .tenant = "t", .prompt_ids = tok.encode("Once upon a time")};
  r.stop.max_tokens = max_tokens;
  r.stop.ignore_eos = ignore_eos;
  r.constraint = GrammarConstraint{.start = *g, .end_when_complete = true};
  return collect(*engine.submit(std::move(r)));
}

void expect_too_ambiguous(const Outcome& o) {
  EXPECT_EQ(o.last.finish, FinishReason::kError) << "[" << o.text << "] " << o.last.usage.n_generated_tokens;
  EXPECT_EQ(o.last.error.kind(), ErrorKind::kInvalidArgument) << o.last.error.to_string();
  EXPECT_NE(o.last.error.message().find("too ambiguous"), std::string::npos) << o.last.error.to_string();
}

// A client grammar too ambiguous to follow (6000 optional letters written
// out one by one, then "~": the first letter alone expands ~6000 stacks into
// ~6000 successors each) reaches the mask's work bound before any token is
// found. The answer ends in an error that names the grammar (the engine
// thread spent ~0.2 s on it, not minutes), and the engine serves the next
// request.
TEST_P(StructuredOnModel, AGrammarTooAmbiguousToFollowEndsInANamedError) {
  const std::string path = GetParam();
  LoadedModel l = load_path(path);
  if (!l.model) GTEST_SKIP() << "SKIPPED: " << path << " not found";
  auto engine = engine_on(l, 256, 2);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  // Not complete at the start (the end is not allowed either), and "~" comes
  // after the letters in the trie's byte order: the walk spends the bound on
  // the letters first.
  expect_too_ambiguous(run_letters(**engine, *l.tokenizer, 6000, " \"~\"", 8, false));
  Request next{.id = "next", .tenant = "t", .prompt_ids = l.tokenizer->encode("Once upon a time")};
  next.sampling.temperature = 0;
  next.stop.max_tokens = 4;
  next.stop.ignore_eos = true;
  EXPECT_EQ(collect(*(*engine)->submit(std::move(next))).last.finish, FinishReason::kMaxTokens);
}

// 1000 optional letters and no "~": a letter's step fits the bound, but a
// whole mask's walk does not, so every mask is cut and still allows letters
// (a valid subset). Without a limit the answer ran to max_tokens at ~0.1 s
// of the engine thread a token (40 tokens in 3.5-4.8 s), stalling every
// co-batched sequence; it ends at its kMaxCutMasks-th cut mask with the
// named error.
TEST_P(StructuredOnModel, AGrammarThatKeepsReachingTheWorkBoundEndsAfterAFewMasks) {
  const std::string path = GetParam();
  LoadedModel l = load_path(path);
  if (!l.model) GTEST_SKIP() << "SKIPPED: " << path << " not found";
  auto engine = engine_on(l, 256, 2);
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  // ignore_eos: the grammar is complete from the start, so the end would be allowed.
  const Outcome o = run_letters(**engine, *l.tokenizer, 1000, "", 40, true);
  expect_too_ambiguous(o);
  EXPECT_LT(o.last.usage.n_generated_tokens, ConstrainedOutput::kMaxCutMasks);
  for (char ch : o.text) EXPECT_TRUE(ch >= 'a' && ch <= 'z') << o.text;  // what came before was the grammar's
}

INSTANTIATE_TEST_SUITE_P(Models, StructuredOnModel,
                         ::testing::Values(shared_dir() + "/models/stories260K.gguf",
                                           std::string(ZL_SOURCE_DIR) + "/models/zerolayer-demo.gguf"));

// The engine's per-sequence state, with a hand-made vocabulary.
TEST(ConstrainedOutputTest, TriggerStartsTheGrammarAndFreeTextResumesAfter) {
  const std::vector<std::string> vocab = {"", "a", "<", "tool", ">", "{", "}", "\"", "x", " ", "<tool>{"};
  grammar::TokenTrie trie(vocab);
  auto g = grammar::compile_json_schema(R"({"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]})");
  ASSERT_TRUE(g.ok());
  ConstrainedOutput c(GrammarConstraint{.trigger = "<tool>", .after_trigger = *g}, trie, /*end_ids=*/{0});
  TokenMask mask(static_cast<int32_t>(vocab.size()));
  EXPECT_EQ(c.mask(mask), nullptr);  // free text first
  c.accept(1, "a");
  c.accept(2, "<");
  c.accept(3, "tool");
  EXPECT_EQ(c.mask(mask), nullptr);
  c.accept(4, ">");
  ASSERT_EQ(c.phase(), ConstrainedOutput::Phase::kGrammar);
  ASSERT_NE(c.mask(mask), nullptr);
  EXPECT_FALSE(mask.forbidden(5));  // {
  EXPECT_FALSE(mask.forbidden(9));  // whitespace
  EXPECT_TRUE(mask.forbidden(1));
  EXPECT_TRUE(mask.forbidden(0));   // no end inside the call
  for (auto [id, piece] : std::vector<std::pair<int, std::string>>{{5, "{"}, {7, "\""}, {8, "x"}, {7, "\""}}) {
    c.accept(id, piece);
  }
  EXPECT_EQ(c.phase(), ConstrainedOutput::Phase::kGrammar);
  c.accept(9, ":1}");  // (a piece spanning several grammar steps)
  EXPECT_EQ(c.phase(), ConstrainedOutput::Phase::kFree);
  EXPECT_FALSE(c.failed());
  // The trigger inside one token, with the grammar's first byte after it.
  c.accept(10, "<tool>{");
  EXPECT_EQ(c.phase(), ConstrainedOutput::Phase::kGrammar);
  ASSERT_NE(c.mask(mask), nullptr);
  EXPECT_FALSE(mask.forbidden(7));
  EXPECT_TRUE(mask.forbidden(6));  // "x" is required
}

TEST(ConstrainedOutputTest, EndOnlyWhenComplete) {
  const std::vector<std::string> vocab = {"", "1", "2", "}", "{}", "x"};
  grammar::TokenTrie trie(vocab);
  auto g = grammar::compile_json_schema(R"({"type":"integer","maximum":20})");
  ASSERT_TRUE(g.ok());
  ConstrainedOutput c(GrammarConstraint{.start = *g, .end_when_complete = true}, trie, {0});
  TokenMask mask(6);
  ASSERT_NE(c.mask(mask), nullptr);
  EXPECT_TRUE(mask.forbidden(0));
  EXPECT_FALSE(mask.forbidden(1));
  c.accept(1, "1");
  c.mask(mask);
  EXPECT_FALSE(mask.forbidden(0));  // "1" is complete
  EXPECT_FALSE(mask.forbidden(2));  // "12" too
  c.accept(2, "2");
  EXPECT_EQ(c.phase(), ConstrainedOutput::Phase::kEnded);  // 12 cannot grow within 20
  c.mask(mask);
  for (int id = 1; id < 6; ++id) EXPECT_TRUE(mask.forbidden(id));
  EXPECT_FALSE(mask.forbidden(0));
}

// The cut masks are counted per request: the copies of one constraint (a
// request's n choices) share the count, so the choices together take at
// most kMaxCutMasks walks to the bound, and then every one of them stops
// (checked before its next walk); another request's constraint keeps its own.
TEST(ConstrainedOutputTest, CutMasksAreCountedOncePerRequest) {
  const std::vector<std::string> vocab = short_words_vocab();
  grammar::TokenTrie trie(vocab);
  auto g = grammar::compile_gbnf(optional_letters_gbnf(1000));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const GrammarConstraint request{.start = *g};
  ConstrainedOutput first(request, trie, {0}), second(request, trie, {0});
  ConstrainedOutput other(GrammarConstraint{.start = *g}, trie, {0});
  TokenMask mask(static_cast<int32_t>(vocab.size()));
  // One step of an output: its mask, then the first letter it allows.
  const auto step = [&](ConstrainedOutput& c) {
    ASSERT_NE(c.mask(mask), nullptr);
    for (int32_t id = 1; id < static_cast<int32_t>(vocab.size()); ++id) {
      if (!mask.forbidden(id)) return c.accept(id, vocab[id]);
    }
    FAIL() << "no letter allowed";
  };
  step(first);   // each walk from a state with many stacks reaches the bound
  EXPECT_TRUE(first.mask_truncated());
  EXPECT_FALSE(first.too_ambiguous());
  step(second);
  EXPECT_TRUE(second.mask_truncated());
  EXPECT_FALSE(second.too_ambiguous());
  step(first);
  EXPECT_TRUE(first.too_ambiguous());   // the request's third cut walk
  EXPECT_TRUE(second.too_ambiguous());  // before it walks again
  EXPECT_EQ(request.cut_masks->n, ConstrainedOutput::kMaxCutMasks);
  step(other);
  EXPECT_TRUE(other.mask_truncated());
  EXPECT_FALSE(other.too_ambiguous());  // a request of its own
}

// The API side: requests parse into constraints, bad schemas into 400s.
TEST(StructuredOutputApiTest, ResponseFormatParsesAndRefusesUnsupportedKeywords) {
  auto ok = api::openai::parse_chat_request(
      R"({"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema",
          "json_schema":{"name":"x","strict":true,"schema":{"type":"object","properties":{"a":{"type":"string"}}}}}})");
  ASSERT_TRUE(ok.ok());
  ASSERT_TRUE(ok.value().response_format);
  EXPECT_NE(ok.value().response_format->grammar, nullptr);
  auto c = api::plan_constraint(ok.value(), api::ToolPlan{}, api::ThinkingPlan{});
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.value());
  EXPECT_TRUE(c.value()->end_when_complete);

  auto bad = api::openai::parse_chat_request(
      R"({"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema",
          "json_schema":{"name":"x","schema":{"type":"object","properties":{"a":{"type":"string","format":"uri"}}}}}})");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().reason, ErrorReason::kUnsupportedValue);
  EXPECT_EQ(bad.error().param, "response_format.json_schema.schema");
  EXPECT_NE(bad.error().message.find("'format'"), std::string::npos) << bad.error().message;

  auto bad_type = api::openai::parse_chat_request(
      R"({"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"xml"}})");
  ASSERT_FALSE(bad_type.ok());
  EXPECT_EQ(bad_type.error().param, "response_format.type");
}

TEST(StructuredOutputApiTest, ForcedHermesCallIsConstrainedToTheToolSchema) {
  auto chat = api::openai::parse_chat_request(
      R"({"model":"m","messages":[{"role":"user","content":"weather?"}],"tool_choice":"required",
          "tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
            "properties":{"city":{"type":"string","maxLength":10},"unit":{"enum":["c","f"]}},"required":["city","unit"],
            "additionalProperties":false}}},
                   {"type":"function","function":{"name":"noop","parameters":{"type":"object","properties":{}}}}]})");
  ASSERT_TRUE(chat.ok());
  const api::ToolPlan plan = api::plan_tools(chat.value(), api::ToolSyntax::kHermes);
  ASSERT_FALSE(plan.prefill.empty());
  auto c = api::plan_constraint(chat.value(), plan, api::ThinkingPlan{});
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.value() && c.value()->start && c.value()->after_trigger);
  EXPECT_EQ(c.value()->trigger, "<tool_call>");
  auto accepts = [](const std::shared_ptr<const grammar::Grammar>& g, std::string_view text) {
    grammar::Matcher m(g);
    return m.advance(text) && m.accepting();
  };
  // After the prefill `<tool_call>\n{"name": "`.
  EXPECT_TRUE(accepts(c.value()->start, "get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": \"c\"}}\n</tool_call>"));
  EXPECT_TRUE(accepts(c.value()->start, "noop\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(accepts(c.value()->start, "get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"));
  EXPECT_FALSE(accepts(c.value()->start, "other\", \"arguments\": {}}\n</tool_call>"));
  // An auto call after its marker.
  EXPECT_TRUE(accepts(c.value()->after_trigger, "\n{\"name\": \"noop\", \"arguments\": {}}\n</tool_call>"));

  // A forced tool whose schema cannot be enforced: a 400 naming the keyword.
  auto unsupported = api::openai::parse_chat_request(
      R"({"model":"m","messages":[{"role":"user","content":"x"}],"tool_choice":"required",
          "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","not":{}}}}]})");
  ASSERT_TRUE(unsupported.ok());
  const api::ToolPlan p2 = api::plan_tools(unsupported.value(), api::ToolSyntax::kHermes);
  auto c2 = api::plan_constraint(unsupported.value(), p2, api::ThinkingPlan{});
  ASSERT_FALSE(c2.ok());
  EXPECT_EQ(c2.error().reason, ErrorReason::kUnsupportedValue);
  EXPECT_NE(c2.error().message.find("'not'"), std::string::npos);
  // The same tool offered with `auto`: its arguments fall back to any object.
  auto lenient = unsupported.value();
  lenient.tool_choice = "auto";
  auto c3 = api::plan_constraint(lenient, api::plan_tools(lenient, api::ToolSyntax::kHermes), api::ThinkingPlan{});
  ASSERT_TRUE(c3.ok());
  ASSERT_TRUE(c3.value());
  EXPECT_FALSE(c3.value()->start);
}

}  // namespace
}  // namespace zl::test
