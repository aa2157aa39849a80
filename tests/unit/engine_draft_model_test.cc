// Speculative decoding with a draft model (engine/draft_model.h): greedy ids are those of plain
// decoding token for token, alone, in a batch, with fewer draft slots than sequences, over a
// prompt longer than a step, under KV pressure; seeded sampling gives the same tokens; a
// draft model whose vocabulary differs is refused at create().
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/draft_model.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "format/gguf.h"
#include "tokenizer/vocab.h"
#include "support/engine_fixture.h"
#include "support/wait.h"

namespace zl {
namespace {

using test::collect;
using test::LoadedModel;
using test::load_shared_model;
using test::Outcome;
using test::wait_idle;

constexpr const char* kTarget = "tiny-llama-F32";
// The same random weights in Q8_0: ~3 of 4 drafts match the target's argmax.
constexpr const char* kDraft = "tiny-llama-Q8_0";

EngineConfig config() {
  return EngineConfig{.n_ctx = 512, .max_seqs = 8, .n_kv_tokens = 4096, .block_size = 16, .max_step_tokens = 128,
                      .kv_type = KvType::kF32, .n_threads = 2};
}

EngineConfig with_draft(const LoadedModel& d, bool speculative = true) {
  EngineConfig c = config();
  c.speculative = speculative;
  c.draft_model = d.model.get();
  c.draft_tokenizer = d.tokenizer.get();
  c.draft_p_min = 0;  // the random-weight draft is never sure of a token: draft anyway
  return c;
}

std::vector<std::vector<int32_t>> prompts_for(int n_vocab) {
  std::mt19937 rng(5);
  auto tok = [&] { return 3 + static_cast<int32_t>(rng() % (n_vocab - 3)); };
  std::vector<std::vector<int32_t>> out;
  for (int len : {1, 6, 40, 300}) {  // 300: longer than a step (the draft catches up in parts)
    std::vector<int32_t> p = {1};
    for (int i = 1; i < len; ++i) p.push_back(tok());
    out.push_back(p);
  }
  return out;
}

struct Models {
  LoadedModel target, draft;
  bool ok() const { return target.model && draft.model; }
};
Models load() { return {load_shared_model(kTarget), load_shared_model(kDraft)}; }

std::vector<Outcome> plain_outcomes(const Models& m, const std::vector<std::vector<int32_t>>& prompts, int n) {
  auto engine = Engine::create(*m.target.model, *m.target.tokenizer, config());
  EXPECT_TRUE(engine.ok());
  std::vector<Outcome> out;
  for (const auto& p : prompts) out.push_back(collect(*(*engine)->submit(test::greedy_request(p, n))));
  return out;
}

TEST(EngineDraftModel, GreedyIdsAreThoseOfPlainDecodingAloneAndInABatch) {
  const Models m = load();
  if (!m.ok()) GTEST_SKIP() << "SKIPPED: ../shared/models/" << kTarget << " or " << kDraft << " not found";
  const auto prompts = prompts_for(static_cast<int>(m.target.model->config.n_vocab));
  constexpr int kTokens = 80;
  const std::vector<Outcome> plain = plain_outcomes(m, prompts, kTokens);
  auto engine = Engine::create(*m.target.model, *m.target.tokenizer, with_draft(m.draft));
  ASSERT_TRUE(engine.ok()) << engine.status().to_string();
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Outcome o = collect(*(*engine)->submit(test::greedy_request(prompts[i], kTokens)));
    EXPECT_EQ(o.ids, plain[i].ids) << "prompt " << i;
    EXPECT_EQ(o.text, plain[i].text) << "prompt " << i;
    EXPECT_EQ(o.last.usage.n_generated_tokens, kTokens);
  }
  wait_idle(**engine);
  const EngineStats alone = (*engine)->stats();
  EXPECT_GT(alone.n_spec_passes, 0);
  EXPECT_GT(alone.n_spec_accepted_tokens, 0) << "no draft was ever accepted: the test would prove nothing";
  EXPECT_LT(alone.n_spec_accepted_tokens, alone.n_spec_draft_tokens) << "every draft accepted: rejections untested";
  std::vector<std::shared_ptr<RequestChannel>> channels;
  for (const auto& p : prompts) channels.push_back((*engine)->submit(test::greedy_request(p, kTokens)));
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(collect(*channels[i]).ids, plain[i].ids) << "prompt " << i << " in a batch";
  wait_idle(**engine);
  EXPECT_GT((*engine)->stats().n_spec_passes, alone.n_spec_passes);
  EXPECT_EQ((*engine)->stats().n_kv_blocks_used, 0);
}

TEST(EngineDraftModel, FewerSlotsThanSequencesAndKvPressureKeepTheIds) {
  const Models m = load();
  if (!m.ok()) GTEST_SKIP() << "SKIPPED: ../shared/models/" << kTarget << " or " << kDraft << " not found";
  const auto prompts = prompts_for(static_cast<int>(m.target.model->config.n_vocab));
  constexpr int kTokens = 60;
  const std::vector<Outcome> plain = plain_outcomes(m, prompts, kTokens);
  for (int variant = 0; variant < 2; ++variant) {
    EngineConfig c = with_draft(m.draft);
    if (variant == 0) c.draft_slots = 1;        // one sequence drafts at a time
    if (variant == 1) c.n_kv_tokens = 26 * 16;  // the target preempts some sequences
    auto engine = Engine::create(*m.target.model, *m.target.tokenizer, c);
    ASSERT_TRUE(engine.ok()) << engine.status().to_string();
    std::vector<std::shared_ptr<RequestChannel>> channels;
    for (const auto& p : prompts) channels.push_back((*engine)->submit(test::greedy_request(p, kTokens)));
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ(collect(*channels[i]).ids, plain[i].ids) << "variant " << variant << " prompt " << i;
    }
    wait_idle(**engine);
    const EngineStats s = (*engine)->stats();
    EXPECT_GT(s.n_spec_accepted_tokens, 0) << "variant " << variant;
    if (variant == 1) {
      EXPECT_GT(s.n_preemptions, 0);
    }
    EXPECT_EQ(s.n_kv_blocks_used, 0);
  }
}

TEST(EngineDraftModel, SeededSamplingGivesThePlainTokensAndTheRequestSwitches) {
  const Models m = load();
  if (!m.ok()) GTEST_SKIP() << "SKIPPED: ../shared/models/" << kTarget << " or " << kDraft << " not found";
  const auto prompts = prompts_for(static_cast<int>(m.target.model->config.n_vocab));
  Request seeded = test::greedy_request(prompts[2], 70);
  seeded.sampling = SamplingParams{.temperature = 0.7f, .top_k = 20, .top_p = 0.9f, .seed = 9};
  auto plain = Engine::create(*m.target.model, *m.target.tokenizer, config());
  ASSERT_TRUE(plain.ok());
  const Outcome want = collect(*(*plain)->submit(seeded));
  // The server speculates by default; then off by default, on in the request.
  for (bool by_default : {true, false}) {
    auto engine = Engine::create(*m.target.model, *m.target.tokenizer, with_draft(m.draft, by_default));
    ASSERT_TRUE(engine.ok());
    Request r = seeded;
    if (!by_default) r.speculative = SpeculativeParams{.enabled = true, .draft_max = 4};
    EXPECT_EQ(collect(*(*engine)->submit(r)).ids, want.ids);
    // A request that turns it off never drafts.
    Request off = test::greedy_request(prompts[1], 20);
    off.speculative = SpeculativeParams{.enabled = false};
    wait_idle(**engine);
    const int64_t passes = (*engine)->stats().n_spec_passes;
    EXPECT_GT(passes, 0);
    collect(*(*engine)->submit(off));
    wait_idle(**engine);
    EXPECT_EQ((*engine)->stats().n_spec_passes, passes);
  }
}

// With the default minimum probability the random draft model never drafts: the ids are the
// plain ones and no verify pass runs.
// A request may ask for shorter drafts than the server's --spec-draft-max, never longer.
TEST(EngineDraftModel, ARequestCannotRaiseTheServersDraftLength) {
  const Models m = load();
  if (!m.ok()) GTEST_SKIP() << "SKIPPED: ../shared/models/" << kTarget << " or " << kDraft << " not found";
  EngineConfig c = with_draft(m.target);  // drafting for itself: every draft accepted, so k stays at its maximum
  c.spec_draft_max = 3;
  auto engine = Engine::create(*m.target.model, *m.target.tokenizer, c);
  ASSERT_TRUE(engine.ok());
  Request r = test::greedy_request(prompts_for(static_cast<int>(m.target.model->config.n_vocab))[1], 60);
  r.speculative = SpeculativeParams{.enabled = true, .draft_max = 32};
  collect(*(*engine)->submit(r));
  wait_idle(**engine);
  const EngineStats s = (*engine)->stats();
  EXPECT_GT(s.n_spec_passes, 0);
  EXPECT_LE(s.n_spec_draft_tokens, 3 * s.n_spec_passes);
}

TEST(EngineDraftModel, AnUnsureDraftModelProposesNothing) {
  const Models m = load();
  if (!m.ok()) GTEST_SKIP() << "SKIPPED: ../shared/models/" << kTarget << " or " << kDraft << " not found";
  const auto prompts = prompts_for(static_cast<int>(m.target.model->config.n_vocab));
  const std::vector<Outcome> plain = plain_outcomes(m, prompts, 40);
  EngineConfig c = with_draft(m.draft);
  c.draft_p_min = EngineConfig{}.draft_p_min;
  auto engine = Engine::create(*m.target.model, *m.target.tokenizer, c);
  ASSERT_TRUE(engine.ok());
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(collect(*(*engine)->submit(test::greedy_request(prompts[i], 40))).ids, plain[i].ids);
  wait_idle(**engine);
  EXPECT_EQ((*engine)->stats().n_spec_passes, 0);
  c.draft_p_min = 1.5f;
  EXPECT_FALSE(Engine::create(*m.target.model, *m.target.tokenizer, c).ok());
}

// stories260K (trained) drafting for itself: it is sure of many tokens, its drafts are the
// target's own choices, and a higher minimum probability drafts fewer.
TEST(EngineDraftModel, ASureDraftModelDraftsWhatItIsSureOf) {
  LoadedModel l = load_shared_model("stories260K");
  if (!l.model) GTEST_SKIP() << "SKIPPED: ../shared/models/stories260K.gguf not found";
  const std::vector<int32_t> prompt =
      l.tokenizer->encode("Once upon a time, there was a little girl named Lily.", EncodeOptions{.add_special = true});
  int64_t drafts_before = -1;
  for (float p_min : {0.0f, 0.5f, 0.9f}) {
    EngineConfig c = with_draft(l);
    c.draft_p_min = p_min;
    auto engine = Engine::create(*l.model, *l.tokenizer, c);
    ASSERT_TRUE(engine.ok());
    collect(*(*engine)->submit(test::greedy_request(prompt, 100)));
    wait_idle(**engine);
    const EngineStats s = (*engine)->stats();
    EXPECT_GT(s.n_spec_draft_tokens, 0) << "p_min " << p_min;
    // Its own choices (a batched verify row may round differently from a single one: not
    // required to be all).
    EXPECT_GE(s.n_spec_accepted_tokens * 10, s.n_spec_draft_tokens * 9) << "p_min " << p_min;
    if (drafts_before >= 0) {
      EXPECT_LT(s.n_spec_draft_tokens, drafts_before) << "p_min " << p_min;
    }
    drafts_before = s.n_spec_draft_tokens;
  }
}

TEST(EngineDraftModel, ADifferentVocabularyIsRefused) {
  const Models m = load();
  if (!m.target.model) GTEST_SKIP() << "SKIPPED: ../shared/models/" << kTarget << " not found";
  // The shared tiny models all use stories260K's vocabulary: another tokenizer stands in for
  // a draft model trained on another one.
  auto vocab = Vocab::load(test::shared_dir() + "/vocab/ggml-vocab-gpt-2.gguf");
  ASSERT_TRUE(vocab.ok()) << vocab.status().to_string();
  auto other = Tokenizer::create(std::move(vocab).value());
  ASSERT_TRUE(other.ok());
  EngineConfig bad = with_draft(m.target);
  bad.draft_tokenizer = other->get();
  auto engine = Engine::create(*m.target.model, *m.target.tokenizer, bad);
  ASSERT_FALSE(engine.ok());
  EXPECT_EQ(engine.status().kind(), ErrorKind::kInvalidArgument);
  EXPECT_NE(engine.status().message().find("vocabulary"), std::string::npos) << engine.status().to_string();
  // The check itself: identical vocabularies pass, a logits width that differs does not.
  EXPECT_TRUE(check_draft_vocabulary(m.target.tokenizer->vocab(), m.target.model->config.n_vocab,
                                     m.target.tokenizer->vocab(), m.target.model->config.n_vocab)
                  .ok());
  EXPECT_FALSE(check_draft_vocabulary(m.target.tokenizer->vocab(), m.target.model->config.n_vocab,
                                      m.target.tokenizer->vocab(), m.target.model->config.n_vocab + 1)
                   .ok());
  // A draft model without its tokenizer.
  EngineConfig c = with_draft(m.target);
  c.draft_tokenizer = nullptr;
  EXPECT_FALSE(Engine::create(*m.target.model, *m.target.tokenizer, c).ok());
}

// The texts and names from the two files reach the message escaped (review 22 #5).
TEST(EngineDraftModel, AVocabularyMismatchQuotesTheFilesStringsEscaped) {
  auto vocab = [](const std::string& model, const std::string& token) {
    GgufWriter w;
    w.set("tokenizer.ggml.model", GgufValue::string(model));
    w.set("tokenizer.ggml.tokens", GgufValue::string_array({"<unk>", "<s>", "</s>", token}));
    w.set("tokenizer.ggml.merges", GgufValue::string_array({"a b"}));
    const std::vector<uint8_t> bytes = w.to_bytes();
    auto f = GgufFile::parse(bytes.data(), bytes.size());
    EXPECT_TRUE(f.ok()) << f.status().to_string();
    auto v = Vocab::from_gguf(**f);
    EXPECT_TRUE(v.ok()) << v.status().to_string();
    return std::move(v).value();
  };
  const Vocab target = vocab("llama", "x");
  Status st = check_draft_vocabulary(target, 4, vocab("llama", std::string("x") + '\0' + "\x1b[1m"), 4);
  EXPECT_EQ(st.message(), "the draft model's vocabulary differs from the model's: token 3 is 'x\\x00\\x1b[1m' "
                          "against 'x'");
  st = check_draft_vocabulary(target, 4, vocab("gpt2", "x"), 4);
  EXPECT_EQ(st.message(), "the draft model's vocabulary differs from the model's: tokenizer 'gpt2' against 'llama'");
}

// The class alone: drafts are a function of the tokens; a freed slot's K/V serves the next
// turn of the same tenant (only the new tokens computed), never another tenant's.
TEST(DraftModelSlots, TheNextTurnComputesOnlyItsNewTokensWithinATenant) {
  const Models m = load();
  if (!m.ok()) GTEST_SKIP() << "SKIPPED: ../shared/models/" << kTarget << " or " << kDraft << " not found";
  ThreadPool pool(2);
  const DraftModel::Config dc{
      .n_ctx = 256, .n_slots = 2, .block_size = 16, .kv_type = KvType::kF32, .max_step_tokens = 64, .p_min = 0};
  const auto make = [&] {
    auto parts = DraftModel::prepare(*m.draft.model, nullptr, dc);
    EXPECT_TRUE(parts.ok());
    return std::make_unique<DraftModel>(*m.draft.model, std::move(parts).value(), &pool, dc);
  };
  const auto prompts = prompts_for(static_cast<int>(m.draft.model->config.n_vocab));
  std::vector<int32_t> turn1 = prompts[2];  // 40 tokens
  std::vector<int32_t> turn2 = turn1;
  turn2.insert(turn2.end(), prompts[1].begin(), prompts[1].end());  // 6 more
  auto run = [](DraftModel& d, SeqId id, uint64_t tenant, const std::vector<int32_t>& tokens) {
    std::vector<int32_t> out;
    DraftModel::Want w{.id = id, .tenant = tenant, .tokens = tokens, .k = 4, .out = &out};
    d.draft(std::span(&w, 1));
    return out;
  };
  auto fresh = make();
  const std::vector<int32_t> want2 = run(*fresh, 1, 7, turn2);
  ASSERT_EQ(want2.size(), 4u);
  EXPECT_EQ(fresh->n_computed_tokens(), 46 + 3);

  auto d = make();
  EXPECT_EQ(run(*d, 1, 7, turn1).size(), 4u);
  EXPECT_EQ(d->n_computed_tokens(), 40 + 3);
  // The same sequence again, unchanged: only its last token is computed again.
  run(*d, 1, 7, turn1);
  EXPECT_EQ(d->n_computed_tokens(), 43 + 1 + 3);
  d->release(1);
  EXPECT_TRUE(d->holders().empty());
  // The next turn, same tenant: the 40 tokens' K/V are reused.
  EXPECT_EQ(run(*d, 2, 7, turn2), want2);
  EXPECT_EQ(d->n_computed_tokens(), 47 + 6 + 3);
  d->release(2);
  // Another tenant: everything computed (the other slot, never used, or this one cleared).
  const int64_t before = d->n_computed_tokens();
  EXPECT_EQ(run(*d, 3, 8, turn2), want2);
  EXPECT_EQ(d->n_computed_tokens() - before, 46 + 3);
  // Only computing a prompt (k 0, a sequence the engine still prefills): no drafts, and the
  // first drafting call then computes just the new token and its drafts.
  auto pre = make();
  std::vector<int32_t> nothing;
  DraftModel::Want prompt_only{.id = 11, .tenant = 7, .tokens = turn1, .k = 0, .out = &nothing};
  pre->draft(std::span(&prompt_only, 1));
  EXPECT_TRUE(nothing.empty());
  EXPECT_FALSE(prompt_only.declined);
  EXPECT_EQ(pre->n_computed_tokens(), 40);
  std::vector<int32_t> turn1_more = turn1;
  turn1_more.push_back(turn2[40]);
  EXPECT_EQ(run(*pre, 11, 7, turn1_more).size(), 4u);
  EXPECT_EQ(pre->n_computed_tokens(), 40 + 1 + 3);
  // Unsure drafts: this random-weight model never gives a token 0.8, so nothing is drafted
  // and the want says it declined (the engine then counts a miss and backs off).
  DraftModel::Config sure = dc;
  sure.p_min = 0.8f;
  auto parts = DraftModel::prepare(*m.draft.model, nullptr, sure);
  ASSERT_TRUE(parts.ok());
  DraftModel unsure(*m.draft.model, std::move(parts).value(), &pool, sure);
  std::vector<int32_t> none;
  DraftModel::Want w{.id = 9, .tenant = 7, .tokens = turn1, .k = 4, .out = &none};
  unsure.draft(std::span(&w, 1));
  EXPECT_TRUE(none.empty());
  EXPECT_TRUE(w.declined);
  EXPECT_EQ(unsure.n_computed_tokens(), 40);
  // Both slots held: a third sequence does not draft.
  run(*d, 4, 7, turn1);
  EXPECT_TRUE(run(*d, 5, 7, turn1).empty());
  EXPECT_EQ(d->holders().size(), 2u);
}

}  // namespace
}  // namespace zl
