// Speculative decoding on real models (engine.cc, spec/ngram_draft.h): greedy ids are those of
// plain decoding token for token, alone and in a batch; seeded sampling too; the stop reasons,
// usage and KV blocks are unchanged; per-request switches; the counters reach the sink.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "grammar/json_schema.h"
#include "obs/engine_sink.h"
#include "obs/metrics.h"  // kEnabled
#include "support/engine_fixture.h"
#include "support/wait.h"

namespace zl {
namespace {

using test::collect;
using test::LoadedModel;
using test::load_shared_model;
using test::Outcome;
using test::wait_idle;

EngineConfig config(bool speculative) {
  return EngineConfig{.n_ctx = 512, .max_seqs = 8, .n_kv_tokens = 4096, .block_size = 16, .max_step_tokens = 128,
                      .kv_type = KvType::kF32, .n_threads = 2, .speculative = speculative};
}

// Prompts that repeat (drafts find matches at once) and random ones (the model's own loops).
std::vector<std::vector<int32_t>> prompts_for(int n_vocab) {
  std::mt19937 rng(11);
  auto tok = [&] { return 3 + static_cast<int32_t>(rng() % (n_vocab - 3)); };
  std::vector<std::vector<int32_t>> out;
  std::vector<int32_t> phrase;
  for (int i = 0; i < 9; ++i) phrase.push_back(tok());
  std::vector<int32_t> repeated = {1};
  for (int r = 0; r < 4; ++r) repeated.insert(repeated.end(), phrase.begin(), phrase.end());
  out.push_back(repeated);
  for (int len : {5, 30, 61}) {
    std::vector<int32_t> p = {1};
    for (int i = 1; i < len; ++i) p.push_back(tok());
    out.push_back(p);
  }
  return out;
}

class SpeculativeOnModel : public ::testing::TestWithParam<std::string> {};

TEST_P(SpeculativeOnModel, GreedyIdsAreThoseOfPlainDecodingAloneAndInABatch) {
  LoadedModel l = load_shared_model(GetParam());
  if (!l.model) GTEST_SKIP() << "SKIPPED: ../shared/models/" << GetParam() << ".gguf not found";
  const auto prompts = prompts_for(static_cast<int>(l.model->config.n_vocab));
  constexpr int kTokens = 120;
  std::vector<Outcome> plain;
  {
    auto engine = Engine::create(*l.model, *l.tokenizer, config(false));
    ASSERT_TRUE(engine.ok());
    for (const auto& p : prompts) plain.push_back(collect(*(*engine)->submit(test::greedy_request(p, kTokens))));
    EXPECT_EQ((*engine)->stats().n_spec_passes, 0);
  }
  auto engine = Engine::create(*l.model, *l.tokenizer, config(true));
  ASSERT_TRUE(engine.ok());
  // Alone.
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Outcome o = collect(*(*engine)->submit(test::greedy_request(prompts[i], kTokens)));
    EXPECT_EQ(o.ids, plain[i].ids) << "prompt " << i;
    EXPECT_EQ(o.text, plain[i].text) << "prompt " << i;
    EXPECT_EQ(o.last.finish, FinishReason::kMaxTokens);
    EXPECT_EQ(o.last.usage.n_generated_tokens, kTokens);
  }
  wait_idle(**engine);
  const EngineStats alone = (*engine)->stats();
  EXPECT_GT(alone.n_spec_passes, 0);
  EXPECT_GT(alone.n_spec_accepted_tokens, 0) << "no draft was ever accepted: the test would prove nothing";
  EXPECT_EQ(alone.n_kv_blocks_used, 0);
  // Together (and with the prefix cache warm from the runs above).
  std::vector<std::shared_ptr<RequestChannel>> channels;
  for (const auto& p : prompts) channels.push_back((*engine)->submit(test::greedy_request(p, kTokens)));
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Outcome o = collect(*channels[i]);
    EXPECT_EQ(o.ids, plain[i].ids) << "prompt " << i << " in a batch";
  }
  wait_idle(**engine);
  EXPECT_GT((*engine)->stats().n_spec_passes, alone.n_spec_passes);
  EXPECT_EQ((*engine)->stats().n_kv_blocks_used, 0);
}

INSTANTIATE_TEST_SUITE_P(Shared, SpeculativeOnModel,
                         ::testing::Values("stories260K", "tiny-llama-Q4_0", "tiny-qwen3-F32", "tiny-gemma3-F32", "tiny-qwen2-F32",
                                           "tiny-phi3-F32", "tiny-gpt-oss-F32", "tiny-qwen3moe-F32"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(EngineSpeculative, StopsAndUsageAreThoseOfPlainDecoding) {
  LoadedModel l = load_shared_model("stories260K");
  if (!l.model) GTEST_SKIP() << "SKIPPED: ../shared/models/stories260K.gguf not found";
  const std::vector<int32_t> prompt = l.tokenizer->encode("Once upon a time, there was a little girl named Lily.",
                                                          EncodeOptions{.add_special = true});
  std::vector<Request> requests;
  for (int n : {1, 2, 3, 7, 33, 200}) {  // max_tokens inside a draft, and EOS (not ignored)
    Request r = test::greedy_request(prompt, n);
    r.stop.ignore_eos = n == 200;
    requests.push_back(r);
    r.stop.ignore_eos = false;
    requests.push_back(r);
  }
  Request with_stop = test::greedy_request(prompt, 200);
  with_stop.stop.stop_strings = {"Lily"};  // matched in the middle of accepted drafts
  requests.push_back(with_stop);
  Request seeded = test::greedy_request(prompt, 150);
  seeded.sampling = SamplingParams{.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .repetition_penalty = 1.1f,
                                   .seed = 42};
  requests.push_back(seeded);
  for (bool in_request : {false, true}) {
    EngineConfig on = config(!in_request);
    auto plain = Engine::create(*l.model, *l.tokenizer, config(false));
    auto spec = Engine::create(*l.model, *l.tokenizer, on);
    ASSERT_TRUE(plain.ok() && spec.ok());
    for (size_t i = 0; i < requests.size(); ++i) {
      Request r = requests[i];
      if (in_request) r.speculative = SpeculativeParams{.enabled = true, .draft_max = 5};
      const Outcome want = collect(*(*plain)->submit(requests[i]));
      const Outcome got = collect(*(*spec)->submit(r));
      EXPECT_EQ(got.ids, want.ids) << "request " << i;
      EXPECT_EQ(got.text, want.text) << "request " << i;
      EXPECT_EQ(got.last.finish, want.last.finish) << "request " << i;
      EXPECT_EQ(got.last.stop_sequence, want.last.stop_sequence) << "request " << i;
      EXPECT_EQ(got.last.usage.n_generated_tokens, want.last.usage.n_generated_tokens) << "request " << i;
    }
    wait_idle(**spec);
    EXPECT_GT((*spec)->stats().n_spec_accepted_tokens, 0);
    EXPECT_EQ((*spec)->stats().n_kv_blocks_used, 0);
  }
}

// A tool call's grammar waits for its marker (GrammarConstraint::trigger): the free text before
// it speculates, the token that completes the marker ends a pass's accepted tokens, and the
// constrained part and the text after it are those of plain decoding. Two markers: one first
// written late in fresh text, one inside text the drafts copy from the prompt.
TEST(EngineSpeculative, AGrammarWaitingForItsTriggerSpeculatesAndKeepsTheIds) {
  LoadedModel l = load_shared_model("stories260K");
  if (!l.model) GTEST_SKIP() << "SKIPPED: ../shared/models/stories260K.gguf not found";
  constexpr int kTokens = 160;
  auto plain = Engine::create(*l.model, *l.tokenizer, config(false));
  auto spec = Engine::create(*l.model, *l.tokenizer, config(true));
  ASSERT_TRUE(plain.ok() && spec.ok());
  auto g = grammar::compile_json_schema(R"({"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]})");
  ASSERT_TRUE(g.ok());
  auto check = [&](const std::string& text, std::string trigger) {
    SCOPED_TRACE(text);
    const std::vector<int32_t> prompt = l.tokenizer->encode(text, EncodeOptions{.add_special = true});
    const Outcome free_run = collect(*(*plain)->submit(test::greedy_request(prompt, kTokens)));
    for (size_t at = free_run.text.size() / 2; at + 6 <= free_run.text.size() && trigger.empty(); ++at) {
      const std::string candidate = free_run.text.substr(at, 6);
      if (free_run.text.find(candidate) == at) trigger = candidate;
    }
    ASSERT_FALSE(trigger.empty()) << free_run.text;
    ASSERT_NE(free_run.text.find(trigger), std::string::npos) << free_run.text;
    const int64_t accepted_before = (*spec)->stats().n_spec_accepted_tokens;
    Request r = test::greedy_request(prompt, kTokens);
    r.constraint = GrammarConstraint{.trigger = trigger, .after_trigger = *g};
    const Outcome want = collect(*(*plain)->submit(r));
    const Outcome got = collect(*(*spec)->submit(r));
    EXPECT_EQ(got.ids, want.ids);
    EXPECT_EQ(got.text, want.text);
    EXPECT_EQ(got.last.finish, want.last.finish);
    // The grammar did run: the object follows the trigger.
    const size_t at = want.text.find(trigger);
    ASSERT_NE(at, std::string::npos);
    EXPECT_NE(want.text.find("\"n\"", at + trigger.size()), std::string::npos) << want.text;
    wait_idle(**spec);
    EXPECT_GT((*spec)->stats().n_spec_accepted_tokens, accepted_before);
  };
  check("Once upon a time there was a girl named Lily. Once upon a time there was a girl named Lily.", "");
  check("Lily was very happy and said, \"Yes, I can play with your toys.\" Lily was very happy and said,", "can play");
  EXPECT_EQ((*spec)->stats().n_kv_blocks_used, 0);
}

TEST(EngineSpeculative, PreemptionUnderKvPressureKeepsTheIds) {
  LoadedModel l = load_shared_model("tiny-llama-Q4_0");
  if (!l.model) GTEST_SKIP() << "SKIPPED: ../shared/models/tiny-llama-Q4_0.gguf not found";
  const auto prompts = prompts_for(static_cast<int>(l.model->config.n_vocab));
  constexpr int kTokens = 100;
  std::vector<Outcome> plain;
  {
    auto engine = Engine::create(*l.model, *l.tokenizer, config(false));
    for (const auto& p : prompts) plain.push_back(collect(*(*engine)->submit(test::greedy_request(p, kTokens))));
  }
  // 14 blocks of 16: the four sequences (up to ~160 tokens each) cannot all hold their KV, so
  // some are preempted and recompute, drafts in flight or not.
  EngineConfig tight = config(true);
  tight.n_kv_tokens = 14 * 16;
  auto engine = Engine::create(*l.model, *l.tokenizer, tight);
  ASSERT_TRUE(engine.ok());
  std::vector<std::shared_ptr<RequestChannel>> channels;
  for (const auto& p : prompts) channels.push_back((*engine)->submit(test::greedy_request(p, kTokens)));
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Outcome o = collect(*channels[i]);
    EXPECT_EQ(o.ids, plain[i].ids) << "prompt " << i;
  }
  wait_idle(**engine);
  const EngineStats s = (*engine)->stats();
  EXPECT_GT(s.n_preemptions, 0);
  EXPECT_GT(s.n_spec_accepted_tokens, 0);
  EXPECT_EQ(s.n_kv_blocks_used, 0);
}

TEST(EngineSpeculative, TheContextWindowEndsItAsPlainDecodingDoes) {
  LoadedModel l = load_shared_model("tiny-llama-Q4_0");
  if (!l.model) GTEST_SKIP() << "SKIPPED: ../shared/models/tiny-llama-Q4_0.gguf not found";
  std::vector<int32_t> prompt = {1};
  for (int r = 0; r < 6; ++r) prompt.insert(prompt.end(), {40, 41, 42, 43, 44});
  for (int n_ctx : {40, 45, 47, 64}) {
    EngineConfig off = config(false), on = config(true);
    off.n_ctx = on.n_ctx = n_ctx;
    auto plain = Engine::create(*l.model, *l.tokenizer, off);
    auto spec = Engine::create(*l.model, *l.tokenizer, on);
    const Outcome want = collect(*(*plain)->submit(test::greedy_request(prompt, 1000)));
    const Outcome got = collect(*(*spec)->submit(test::greedy_request(prompt, 1000)));
    EXPECT_EQ(want.last.finish, FinishReason::kContextWindow);
    EXPECT_EQ(got.last.finish, FinishReason::kContextWindow) << "n_ctx " << n_ctx;
    EXPECT_EQ(got.ids, want.ids) << "n_ctx " << n_ctx;
  }
}

// Counts what the engine reports about speculation.
class SpecSink final : public obs::EngineSink {
 public:
  void on_decode_step(double, int) override {}
  void on_first_token(double, double) override {}
  void on_inter_token(double) override {}
  void on_preemptions(int) override {}
  void on_spec_verify(int n_draft, int n_accepted) override {
    n_passes += 1;
    n_draft_tokens += n_draft;
    n_accepted_tokens += n_accepted;
  }
  std::atomic<int64_t> n_passes{0}, n_draft_tokens{0}, n_accepted_tokens{0};
};

TEST(EngineSpeculative, PerRequestSwitchesAndTheSink) {
  LoadedModel l = load_shared_model("stories260K");
  if (!l.model) GTEST_SKIP() << "SKIPPED: ../shared/models/stories260K.gguf not found";
  const auto prompt = prompts_for(static_cast<int>(l.model->config.n_vocab))[0];
  SpecSink sink;
  EngineConfig on = config(true);
  on.obs_sink = &sink;
  auto engine = Engine::create(*l.model, *l.tokenizer, on);
  ASSERT_TRUE(engine.ok());
  Request off = test::greedy_request(prompt, 60);
  off.speculative = SpeculativeParams{.enabled = false};
  const Outcome o = collect(*(*engine)->submit(off));
  EXPECT_EQ(o.ids.size(), 60u);
  wait_idle(**engine);
  EXPECT_EQ((*engine)->stats().n_spec_passes, 0);
  EXPECT_EQ(sink.n_passes.load(), 0);
  // A request with a grammar-free default: speculates, and the sink sees what the stats count.
  collect(*(*engine)->submit(test::greedy_request(prompt, 60)));
  wait_idle(**engine);
  const EngineStats s = (*engine)->stats();
  EXPECT_GT(s.n_spec_passes, 0);
  if constexpr (obs::kEnabled) {
    EXPECT_EQ(sink.n_passes.load(), s.n_spec_passes);
    EXPECT_EQ(sink.n_draft_tokens.load(), s.n_spec_draft_tokens);
    EXPECT_EQ(sink.n_accepted_tokens.load(), s.n_spec_accepted_tokens);
  }
  EXPECT_LE(s.n_spec_accepted_tokens, s.n_spec_draft_tokens);
  // draft_max bounds every pass's draft.
  auto small = Engine::create(*l.model, *l.tokenizer, config(false));
  Request capped = test::greedy_request(prompt, 60);
  capped.speculative = SpeculativeParams{.enabled = true, .draft_max = 2};
  collect(*(*small)->submit(capped));
  wait_idle(**small);
  const EngineStats c = (*small)->stats();
  EXPECT_GT(c.n_spec_passes, 0);
  EXPECT_LE(c.n_spec_draft_tokens, 2 * c.n_spec_passes);
}

TEST(EngineSpeculative, InvalidSettingsAreRefused) {
  LoadedModel l = load_shared_model("stories260K");
  if (!l.model) GTEST_SKIP() << "SKIPPED: ../shared/models/stories260K.gguf not found";
  EngineConfig c = config(true);
  c.spec_draft_max = 0;
  EXPECT_FALSE(Engine::create(*l.model, *l.tokenizer, c).ok());
  c = config(true);
  c.spec_ngram_min = 5;
  c.spec_ngram_max = 4;
  EXPECT_FALSE(Engine::create(*l.model, *l.tokenizer, c).ok());
}

}  // namespace
}  // namespace zl
