// Logprobs (Request::logprobs) on the real engine (stories260K): one entry per emitted token,
// aligned with the ids; greedy picks the top-1; a stop string's withheld tokens have none;
// speculation gives the same entries; the whole vocabulary's probabilities sum to 1; prompt
// entries (Request::prompt_logprobs) equal those the same tokens got when generated.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "support/engine_fixture.h"

namespace zl {
namespace {

using test::collect;
using test::LoadedModel;
using test::load_shared_model;
using test::Outcome;

EngineConfig config(bool speculative = false) {
  return EngineConfig{.n_ctx = 256, .max_seqs = 4, .n_kv_tokens = 1024, .block_size = 16, .max_step_tokens = 128,
                      .kv_type = KvType::kF32, .n_threads = 1, .speculative = speculative};
}

Request with_logprobs(const std::vector<int32_t>& prompt, int max_tokens, int32_t n_top) {
  Request r = test::greedy_request(prompt, max_tokens);
  r.logprobs = n_top;
  return r;
}

TEST(EngineLogprobs, GreedyEntriesAreAlignedWithTheIdsAndTheChosenIsTheTopOne) {
  LoadedModel l = load_shared_model("stories260K");
  if (!l.model) GTEST_SKIP() << "SKIPPED: ../shared/models/stories260K.gguf not found";
  auto engine = Engine::create(*l.model, *l.tokenizer, config());
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  const auto prompt = l.tokenizer->encode("Once upon a time");
  const Outcome o = collect(*(*engine)->submit(with_logprobs(prompt, 24, 3)));
  EXPECT_EQ(o.last.finish, FinishReason::kMaxTokens);
  ASSERT_EQ(o.ids.size(), 24u);
  ASSERT_EQ(o.logprobs.size(), o.ids.size());
  std::string pieces;
  for (size_t i = 0; i < o.ids.size(); ++i) {
    const TokenLogprobs& e = o.logprobs[i];
    EXPECT_EQ(e.chosen.id, o.ids[i]) << i;
    EXPECT_EQ(e.chosen.piece, l.tokenizer->token_to_piece(o.ids[i], true));
    ASSERT_EQ(e.top.size(), 3u);
    EXPECT_EQ(e.top[0].id, e.chosen.id) << i;  // greedy: the argmax
    EXPECT_EQ(e.top[0].logprob, e.chosen.logprob);
    EXPECT_LE(e.chosen.logprob, 0.0f);
    EXPECT_GE(e.top[0].logprob, e.top[1].logprob);
    EXPECT_GE(e.top[1].logprob, e.top[2].logprob);
    for (const TokenLogprob& t : e.top) EXPECT_EQ(t.piece, l.tokenizer->token_to_piece(t.id, true));
    pieces += e.chosen.piece;
  }
  EXPECT_EQ(pieces, o.text);
  // Not asked: none, and the same tokens.
  const Outcome plain = collect(*(*engine)->submit(test::greedy_request(prompt, 24)));
  EXPECT_EQ(plain.ids, o.ids);
  EXPECT_TRUE(plain.logprobs.empty());
}

TEST(EngineLogprobs, AStopStringsWithheldTokensHaveNoEntries) {
  LoadedModel l = load_shared_model("stories260K");
  if (!l.model) GTEST_SKIP() << "SKIPPED: ../shared/models/stories260K.gguf not found";
  auto engine = Engine::create(*l.model, *l.tokenizer, config());
  const auto prompt = l.tokenizer->encode("Once upon a time");
  const Outcome full = collect(*(*engine)->submit(with_logprobs(prompt, 32, 2)));
  ASSERT_EQ(full.logprobs.size(), 32u);
  // Stop strings cut from the greedy text: one that starts where token k starts (k and what
  // follows are withheld), one that starts inside token k (k's first byte is emitted, so its
  // entry goes out with it).
  bool tried[2] = {false, false};
  size_t start = 0;
  for (size_t k = 0; k + 1 < full.logprobs.size() && !(tried[0] && tried[1]); ++k) {
    const std::string& piece = full.logprobs[k].chosen.piece;
    const std::string& next = full.logprobs[k + 1].chosen.piece;
    for (const bool inside : {false, true}) {
      if (tried[inside] || (inside && piece.size() < 2)) continue;
      const std::string stop = (inside ? piece.substr(1) : piece) + next;
      const size_t at = start + (inside ? 1 : 0);
      if (k < 3 || full.text.find(stop) != at) continue;
      Request r = with_logprobs(prompt, 32, 2);
      r.stop.stop_strings = {stop};
      const Outcome o = collect(*(*engine)->submit(r));
      ASSERT_EQ(o.last.finish, FinishReason::kStopSequence) << stop;
      EXPECT_EQ(o.text, full.text.substr(0, at));
      const size_t n = inside ? k + 1 : k;
      ASSERT_EQ(o.logprobs.size(), n) << "stop '" << stop << "'";
      for (size_t i = 0; i < n; ++i) {
        EXPECT_EQ(o.logprobs[i].chosen.id, full.logprobs[i].chosen.id);
        EXPECT_EQ(o.logprobs[i].chosen.logprob, full.logprobs[i].chosen.logprob);
      }
      // The ids still go out as generated (the stop's tokens included), unlike the entries.
      EXPECT_GT(o.ids.size(), n);
      tried[inside] = true;
    }
    start += piece.size();
  }
  EXPECT_TRUE(tried[0] && tried[1]);
}

TEST(EngineLogprobs, SpeculationGivesTheEntriesOfPlainDecoding) {
  LoadedModel l = load_shared_model("stories260K");
  if (!l.model) GTEST_SKIP() << "SKIPPED: ../shared/models/stories260K.gguf not found";
  // A repeated phrase: the n-gram drafts match at once.
  auto prompt = l.tokenizer->encode("Once upon a time, there was a cat. Once upon a time, there was a cat. Once upon a time");
  Outcome got[2];
  for (bool spec : {false, true}) {
    auto engine = Engine::create(*l.model, *l.tokenizer, config(spec));
    ASSERT_TRUE(engine.ok());
    got[spec] = collect(*(*engine)->submit(with_logprobs(prompt, 48, 4)));
    if (spec) {
      EXPECT_GT((*engine)->stats().n_spec_accepted_tokens, 0);
    }
  }
  ASSERT_EQ(got[0].ids, got[1].ids);
  ASSERT_EQ(got[0].logprobs.size(), got[1].logprobs.size());
  for (size_t i = 0; i < got[0].logprobs.size(); ++i) {
    const TokenLogprobs& a = got[0].logprobs[i];
    const TokenLogprobs& b = got[1].logprobs[i];
    EXPECT_EQ(a.chosen.id, b.chosen.id);
    EXPECT_NEAR(a.chosen.logprob, b.chosen.logprob, 1e-4) << i;
    ASSERT_EQ(a.top.size(), b.top.size());
    for (size_t j = 0; j < a.top.size(); ++j) EXPECT_NEAR(a.top[j].logprob, b.top[j].logprob, 1e-4) << i;
  }
}

TEST(EngineLogprobs, TheValuesAreTheRawLogitsBeforeTheLogitBias) {
  LoadedModel l = load_shared_model("stories260K");
  if (!l.model) GTEST_SKIP() << "SKIPPED: ../shared/models/stories260K.gguf not found";
  auto engine = Engine::create(*l.model, *l.tokenizer, config());
  const auto prompt = l.tokenizer->encode("Once upon a time");
  const Outcome plain = collect(*(*engine)->submit(with_logprobs(prompt, 16, 3)));
  ASSERT_EQ(plain.logprobs.size(), 16u);
  // Banning a runner-up that is never chosen changes no greedy token, and no value: they are raw.
  int32_t banned = -1;
  size_t step = 0;
  for (size_t i = 0; i < plain.logprobs.size() && banned < 0; ++i) {
    const int32_t id = plain.logprobs[i].top[1].id;
    if (std::count(plain.ids.begin(), plain.ids.end(), id) == 0) banned = id, step = i;
  }
  ASSERT_GE(banned, 0);
  Request r = with_logprobs(prompt, 16, 3);
  r.sampling.logit_bias = {{banned, -100.0f}};
  const Outcome biased = collect(*(*engine)->submit(r));
  ASSERT_EQ(biased.ids, plain.ids);
  ASSERT_EQ(biased.logprobs.size(), plain.logprobs.size());
  for (size_t i = 0; i < plain.logprobs.size(); ++i) {
    EXPECT_NEAR(biased.logprobs[i].chosen.logprob, plain.logprobs[i].chosen.logprob, 1e-5) << i;
    for (size_t j = 0; j < 3; ++j) EXPECT_EQ(biased.logprobs[i].top[j].id, plain.logprobs[i].top[j].id) << i;
  }
  EXPECT_EQ(biased.logprobs[step].top[1].id, banned);
}

TEST(EngineLogprobs, AForcedTokenHasTheValuesOfItsStepsLogits) {
  LoadedModel l = load_shared_model("stories260K");
  if (!l.model) GTEST_SKIP() << "SKIPPED: ../shared/models/stories260K.gguf not found";
  auto engine = Engine::create(*l.model, *l.tokenizer, config());
  const auto prompt = l.tokenizer->encode("Once upon a time");
  const Outcome plain = collect(*(*engine)->submit(with_logprobs(prompt, 6, 3)));
  ASSERT_EQ(plain.logprobs.size(), 6u);
  // A span open from the start with a budget of 2: the third token is forced (here the
  // runner-up of that step), in place of the greedy one.
  const TokenLogprob& runner_up = plain.logprobs[2].top[1];
  ASSERT_FALSE(runner_up.piece.empty());
  Request r = with_logprobs(prompt, 6, 3);
  r.stop.span = SpanBudget{.open_at_start = true, .end_text = runner_up.piece, .end_ids = {runner_up.id}, .budget = 2};
  const Outcome forced = collect(*(*engine)->submit(r));
  ASSERT_GE(forced.logprobs.size(), 3u);
  EXPECT_EQ(forced.ids[2], runner_up.id);
  EXPECT_EQ(forced.logprobs[2].chosen.id, runner_up.id);
  EXPECT_NEAR(forced.logprobs[2].chosen.logprob, runner_up.logprob, 1e-5);
  EXPECT_EQ(forced.logprobs[2].top[0].id, plain.logprobs[2].top[0].id);  // the step's own top
}

TEST(EngineLogprobs, TheWholeVocabularySumsToOne) {
  LoadedModel l = load_shared_model("stories260K");
  if (!l.model) GTEST_SKIP() << "SKIPPED: ../shared/models/stories260K.gguf not found";
  auto engine = Engine::create(*l.model, *l.tokenizer, config());
  const int32_t n_vocab = l.model->config.n_vocab;
  Request r = with_logprobs(l.tokenizer->encode("Once upon a time"), 4, n_vocab);
  r.sampling.temperature = 0.8f;  // sampled: the values are still the raw logits'
  r.sampling.seed = 3;
  r.sampling.logit_bias = {{5, -100.0f}};
  const Outcome o = collect(*(*engine)->submit(r));
  ASSERT_EQ(o.logprobs.size(), 4u);
  for (const TokenLogprobs& e : o.logprobs) {
    ASSERT_EQ(e.top.size(), static_cast<size_t>(n_vocab));
    double sum = 0;
    for (const TokenLogprob& t : e.top) sum += std::exp(static_cast<double>(t.logprob));
    EXPECT_NEAR(sum, 1.0, 1e-4);
    bool found = false;
    for (const TokenLogprob& t : e.top) found |= t.id == e.chosen.id && t.logprob == e.chosen.logprob;
    EXPECT_TRUE(found);
  }
}

// Request::prompt_logprobs: a prompt token's entry is what the model gave it at the position
// before, so a prompt made of a greedy answer's tokens has that answer's entries, bit for bit,
// whether the prompt is prefilled in one step or in chunks of 8 (and the first token has none).
// Entries arrive in one event before the first generated token's; the prefix cache is never
// used for such a prompt (its positions' logits are needed), so a repeat gets them all too.
TEST(EngineLogprobs, PromptEntriesEqualTheEntriesTheSameTokensGotWhenGenerated) {
  LoadedModel l = load_shared_model("stories260K");
  if (!l.model) GTEST_SKIP() << "SKIPPED: ../shared/models/stories260K.gguf not found";
  const auto head = l.tokenizer->encode("Once upon a time");
  for (const int32_t step_tokens : {128, 8}) {
    SCOPED_TRACE(step_tokens);
    EngineConfig c = config();
    c.max_step_tokens = step_tokens;
    auto engine = Engine::create(*l.model, *l.tokenizer, c);
    ASSERT_TRUE(engine.ok()) << engine.status().to_string();
    const Outcome gen = collect(*(*engine)->submit(with_logprobs(head, 20, 3)));
    ASSERT_EQ(gen.logprobs.size(), 20u);
    std::vector<int32_t> prompt = head;
    prompt.insert(prompt.end(), gen.ids.begin(), gen.ids.end());
    for (int round = 0; round < 2; ++round) {
      Request r = test::greedy_request(prompt, 2);
      r.prompt_logprobs = 3;
      const Outcome o = collect(*(*engine)->submit(r));
      EXPECT_EQ(o.last.finish, FinishReason::kMaxTokens);
      EXPECT_EQ(o.last.usage.n_cached_tokens, 0) << round;
      ASSERT_EQ(o.prompt_logprobs.size(), prompt.size()) << round;
      EXPECT_EQ(o.n_prompt_logprob_events, 1);
      EXPECT_LT(o.prompt_logprobs_event, o.first_ids_event);
      EXPECT_TRUE(o.logprobs.empty());  // Request::logprobs not asked
      EXPECT_EQ(o.prompt_logprobs[0].chosen.id, prompt[0]);
      EXPECT_TRUE(std::isnan(o.prompt_logprobs[0].chosen.logprob));
      EXPECT_TRUE(o.prompt_logprobs[0].top.empty());
      for (size_t i = 1; i < prompt.size(); ++i) {
        const TokenLogprobs& e = o.prompt_logprobs[i];
        EXPECT_EQ(e.chosen.id, prompt[i]) << i;
        EXPECT_EQ(e.chosen.piece, l.tokenizer->token_to_piece(prompt[i], true));
        EXPECT_LE(e.chosen.logprob, 0.0f);
        ASSERT_EQ(e.top.size(), 3u);
        if (i < head.size()) continue;
        const TokenLogprobs& want = gen.logprobs[i - head.size()];
        EXPECT_EQ(e.chosen.logprob, want.chosen.logprob) << i;
        for (size_t j = 0; j < 3; ++j) {
          EXPECT_EQ(e.top[j].id, want.top[j].id) << i;
          EXPECT_EQ(e.top[j].logprob, want.top[j].logprob) << i;
        }
      }
    }
    // Without prompt logprobs the same prompt is served from the prefix cache.
    const Outcome cached = collect(*(*engine)->submit(test::greedy_request(prompt, 2)));
    EXPECT_GT(cached.last.usage.n_cached_tokens, 0);
    EXPECT_TRUE(cached.prompt_logprobs.empty());
  }
}

// A one-token prompt: its entry (no value) comes all the same; prefill_only (the API's echo
// with max_tokens 0) gets the entries and no token.
TEST(EngineLogprobs, PromptEntriesOfAOneTokenPromptAndOfAPrefillOnlyRequest) {
  LoadedModel l = load_shared_model("stories260K");
  if (!l.model) GTEST_SKIP() << "SKIPPED: ../shared/models/stories260K.gguf not found";
  auto engine = Engine::create(*l.model, *l.tokenizer, config());
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  Request one = test::greedy_request({1}, 3);
  one.prompt_logprobs = 0;
  const Outcome o = collect(*(*engine)->submit(one));
  ASSERT_EQ(o.prompt_logprobs.size(), 1u);
  EXPECT_TRUE(std::isnan(o.prompt_logprobs[0].chosen.logprob));
  EXPECT_EQ(o.ids.size(), 3u);
  Request pre = test::greedy_request(l.tokenizer->encode("Once upon a time"), 1);
  pre.prompt_logprobs = 1;
  pre.stop.prefill_only = true;
  const Outcome p = collect(*(*engine)->submit(pre));
  EXPECT_EQ(p.prompt_logprobs.size(), pre.prompt_ids.size());
  EXPECT_TRUE(p.ids.empty());
  EXPECT_EQ(p.last.finish, FinishReason::kMaxTokens);
}

}  // namespace
}  // namespace zl
