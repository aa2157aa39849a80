// The engine on real models: concurrency does not change results, the prefix
// cache does not change results, cancellation returns every block, and the
// finish reasons and usage are exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <limits>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "model/model.h"
#include "obs/engine_sink.h"
#include "obs/metrics.h"  // kEnabled
#include "support/engine_fixture.h"
#include "support/process.h"
#include "support/temp_files.h"
#include "support/wait.h"
#include "tokenizer/tokenizer.h"

namespace zl {
namespace {

using namespace std::chrono_literals;

using test::collect;
using test::LoadedModel;
using test::load_shared_model;
using test::Outcome;

Request greedy(std::vector<int32_t> prompt, int max_tokens, std::string tenant = "t") {
  return test::greedy_request(std::move(prompt), max_tokens, "r", std::move(tenant));
}

std::vector<int32_t> random_prompt(std::mt19937& rng, int n, int n_vocab) {
  std::vector<int32_t> p = {1};
  for (int i = 1; i < n; ++i) p.push_back(3 + static_cast<int32_t>(rng() % (n_vocab - 3)));
  return p;
}

// True once nothing runs or waits (false at the deadline).
bool wait_idle(const Engine& e) {
  return test::wait_until([&] {
    const EngineStats s = e.stats();
    return s.n_running == 0 && s.n_waiting == 0;
  });
}

// Waits until the engine has taken `n` more steps (requests submitted
// around it join the batch at different steps).
void wait_steps(const Engine& e, int64_t n) {
  const int64_t target = e.stats().n_steps + n;
  EXPECT_TRUE(test::wait_until([&] { return e.stats().n_steps >= target; })) << "the engine stopped stepping";
}

class EngineOnModel : public ::testing::TestWithParam<std::string> {};

const auto* const kCleanup = testing_support::register_temp_cleanup("zl_engine_test");

// A model whose output norm is NaN yields NaN logits: no token can be
// sampled, and that is the model's fault (an internal error, a 5xx on the
// wire), not the request's (before: invalid_argument, a 400 that clients do
// not retry and that blamed the request).
TEST(EngineErrors, NanLogitsAreAnInternalErrorNotTheRequests) {
  const std::string src = test::shared_dir() + "/models/tiny-llama-F32.gguf";
  if (!test::file_exists(src)) GTEST_SKIP() << "SKIPPED: " << src << " not found";
  std::string bytes;
  uint64_t at = 0, n = 0;
  {
    auto f = GgufFile::open(src);
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    const GgufTensor* t = (*f)->find_tensor("output_norm.weight");
    ASSERT_NE(t, nullptr);
    ASSERT_EQ(t->type, GgmlType::kF32);
    at = (*f)->data_offset() + t->offset;
    n = t->n_bytes / sizeof(float);
    std::ifstream in(src, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (uint64_t i = 0; i < n; ++i) std::memcpy(bytes.data() + at + i * sizeof(float), &nan, sizeof(float));
  const std::string path = testing_support::temp_file("zl_engine_test", "nan-norm.gguf");
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  auto m = load_model(path);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  auto tok = Tokenizer::from_gguf(*(*m)->file);
  ASSERT_TRUE(tok.ok());
  EngineConfig cfg{.n_ctx = 64, .max_seqs = 2, .n_kv_tokens = 256, .block_size = 16, .n_threads = 1};
  auto engine = Engine::create(**m, **tok, cfg);
  ASSERT_TRUE(engine.ok());
  for (float temperature : {0.0f, 0.8f}) {
    Request r = greedy({1, 5, 6}, 4);
    r.sampling.temperature = temperature;
    test::Outcome o = test::collect(*(*engine)->submit(r));
    EXPECT_EQ(o.last.kind, EventKind::kError);
    EXPECT_EQ(o.last.error.kind(), ErrorKind::kInternal) << o.last.error.to_string();
    EXPECT_TRUE(o.ids.empty());
  }
}

TEST_P(EngineOnModel, ConcurrentRequestsProduceWhatEachProducesAlone) {
  LoadedModel l = load_shared_model(GetParam());
  if (!l.model) GTEST_SKIP() << "SKIPPED: ../shared/models/" << GetParam() << ".gguf not found";
  const int n_vocab = static_cast<int>(l.model->config.n_vocab);
  std::mt19937 rng(7);
  std::vector<std::vector<int32_t>> prompts;
  for (int len : {1, 7, 40, 3, 90, 16, 17, 33}) prompts.push_back(random_prompt(rng, len, n_vocab));
  EngineConfig cfg{.n_ctx = 256, .max_seqs = 8, .n_kv_tokens = 2048, .block_size = 16, .max_step_tokens = 64,
                   .kv_type = KvType::kF32, .n_threads = 2};
  // Alone, one at a time.
  std::vector<Outcome> alone;
  {
    auto engine = Engine::create(*l.model, *l.tokenizer, cfg);
    ASSERT_TRUE(engine.ok());
    for (const auto& p : prompts) alone.push_back(collect(*(*engine)->submit(greedy(p, 24))));
  }
  // Together, joining at different steps (a small step budget forces chunked prefill).
  auto engine = Engine::create(*l.model, *l.tokenizer, cfg);
  ASSERT_TRUE(engine.ok());
  std::vector<std::shared_ptr<RequestChannel>> channels;
  for (size_t i = 0; i < prompts.size(); ++i) {
    channels.push_back((*engine)->submit(greedy(prompts[i], 24)));
    if (i % 3 == 2) wait_steps(**engine, 2);
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    Outcome o = collect(*channels[i]);
    EXPECT_EQ(o.ids, alone[i].ids) << "prompt " << i;
    EXPECT_EQ(o.text, alone[i].text) << "prompt " << i;
    EXPECT_EQ(o.last.finish, FinishReason::kMaxTokens);
    EXPECT_EQ(o.last.usage.n_generated_tokens, 24);
    EXPECT_EQ(o.last.usage.n_prompt_tokens, static_cast<int64_t>(prompts[i].size()));
  }
  EXPECT_TRUE(wait_idle(**engine));
  EXPECT_EQ((*engine)->stats().n_kv_blocks_used, 0);
}

TEST_P(EngineOnModel, PrefixCacheHitsGiveTheSameIds) {
  LoadedModel l = load_shared_model(GetParam());
  if (!l.model) GTEST_SKIP() << "SKIPPED: ../shared/models/" << GetParam() << ".gguf not found";
  std::mt19937 rng(3);
  const auto prompt = random_prompt(rng, 70, static_cast<int>(l.model->config.n_vocab));
  EngineConfig cfg{.n_ctx = 256, .max_seqs = 4, .n_kv_tokens = 1024, .block_size = 16, .kv_type = KvType::kF32,
                   .n_threads = 1};
  EngineConfig no_cache = cfg;
  no_cache.prefix_caching = false;
  auto plain = Engine::create(*l.model, *l.tokenizer, no_cache);
  const Outcome want = collect(*(*plain)->submit(greedy(prompt, 20)));
  auto engine = Engine::create(*l.model, *l.tokenizer, cfg);
  const Outcome first = collect(*(*engine)->submit(greedy(prompt, 20)));
  const Outcome second = collect(*(*engine)->submit(greedy(prompt, 20)));
  const Outcome other_tenant = collect(*(*engine)->submit(greedy(prompt, 20, "someone else")));
  EXPECT_EQ(first.ids, want.ids);
  EXPECT_EQ(second.ids, want.ids);
  EXPECT_EQ(other_tenant.ids, want.ids);
  EXPECT_EQ(first.last.usage.n_cached_tokens, 0);
  EXPECT_EQ(second.last.usage.n_cached_tokens, 64);  // 4 full blocks; the last prompt token is always computed
  EXPECT_EQ(other_tenant.last.usage.n_cached_tokens, 0);  // salted per tenant
}

INSTANTIATE_TEST_SUITE_P(Shared, EngineOnModel,
                         ::testing::Values("stories260K", "tiny-qwen2-F32", "tiny-qwen3-F32", "tiny-llama-Q4_0", "tiny-llama-Q6_K"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

TEST(Engine, PreemptionUnderMemoryPressureKeepsResultsExact) {
  LoadedModel l = load_shared_model("stories260K");
  if (!l.model) GTEST_SKIP() << "SKIPPED: ../shared/models/stories260K.gguf not found";
  std::mt19937 rng(9);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 5; ++i) prompts.push_back(random_prompt(rng, 30 + 3 * i, 512));
  // Preemption recomputes the KV of a sequence by prefill: with every KV
  // type (Q8_0 quantizes the recomputed rows exactly as the first time).
  for (KvType kv_type : {KvType::kF32, KvType::kQ8_0}) {
  SCOPED_TRACE(kv_type_name(kv_type));
  EngineConfig roomy{.n_ctx = 96, .max_seqs = 1, .n_kv_tokens = 96, .block_size = 16, .kv_type = kv_type, .n_threads = 1};
  std::vector<Outcome> alone;
  {
    auto engine = Engine::create(*l.model, *l.tokenizer, roomy);
    for (const auto& p : prompts) alone.push_back(collect(*(*engine)->submit(greedy(p, 40))));
  }
  // 10 blocks for 5 sequences that each grow to 5 blocks: preemption must happen.
  EngineConfig tight = roomy;
  tight.max_seqs = 5;
  tight.n_kv_tokens = 160;
  auto engine = Engine::create(*l.model, *l.tokenizer, tight);
  std::vector<std::shared_ptr<RequestChannel>> channels;
  for (const auto& p : prompts) channels.push_back((*engine)->submit(greedy(p, 40)));
  for (size_t i = 0; i < prompts.size(); ++i) {
    Outcome o = collect(*channels[i]);
    EXPECT_EQ(o.ids, alone[i].ids) << "prompt " << i;
    EXPECT_EQ(o.text, alone[i].text) << "prompt " << i;
  }
  EXPECT_TRUE(wait_idle(**engine));
  EXPECT_EQ((*engine)->stats().n_kv_blocks_used, 0);
  EXPECT_GT((*engine)->stats().n_preemptions, 0);
  }
}

// A KV cache smaller than the window (an explicit --kv-size): the scheduler
// refuses what could never fit, with the numbers the API layer also computes
// (limits/kv_admission.h), and takes exactly what fits.
TEST(Engine, AKvCacheBelowTheWindowRefusesWhatCanNeverFit) {
  LoadedModel l = load_shared_model("stories260K");
  if (!l.model) GTEST_SKIP() << "SKIPPED: ../shared/models/stories260K.gguf not found";
  EngineConfig cfg{.n_ctx = 256, .max_seqs = 2, .n_kv_tokens = 64, .block_size = 16, .n_threads = 1};
  auto engine = Engine::create(*l.model, *l.tokenizer, cfg);
  ASSERT_TRUE(engine.ok()) << engine.status().message();
  EXPECT_EQ((*engine)->stats().n_kv_blocks_total, 4);
  std::mt19937 rng(3);
  const std::vector<int32_t> prompt = random_prompt(rng, 10, 512);
  Outcome o = collect(*(*engine)->submit(greedy(prompt, 100)));
  ASSERT_EQ(o.last.kind, EventKind::kError);
  EXPECT_EQ(o.last.error.reason(), ErrorReason::kKvCacheOverflow);
  ASSERT_NE(o.last.error.detail(), nullptr);
  EXPECT_EQ(o.last.error.detail()->numbers.n_prompt_tokens, 10);
  EXPECT_EQ(o.last.error.detail()->numbers.max_tokens, 100);
  EXPECT_EQ(o.last.error.detail()->numbers.max_tokens_fit, 54);
  o = collect(*(*engine)->submit(greedy(prompt, 54)));
  EXPECT_EQ(o.last.kind, EventKind::kFinish);
  EXPECT_EQ(o.ids.size(), 54u);
}

TEST(Engine, CancelReturnsEveryBlock) {
  LoadedModel l = load_shared_model("stories260K");
  if (!l.model) GTEST_SKIP() << "SKIPPED: ../shared/models/stories260K.gguf not found";
  EngineConfig cfg{.n_ctx = 512, .max_seqs = 4, .n_kv_tokens = 2048, .block_size = 16, .n_threads = 1};
  auto engine = Engine::create(*l.model, *l.tokenizer, cfg);
  std::mt19937 rng(5);
  std::vector<std::shared_ptr<RequestChannel>> channels;
  for (int i = 0; i < 6; ++i) channels.push_back((*engine)->submit(greedy(random_prompt(rng, 50 + i, 512), 400)));
  // Cancel while they run: once the batch has generated tokens.
  ASSERT_TRUE(test::wait_until([&] { return (*engine)->stats().n_generated_tokens_total > 0; }));
  for (auto& ch : channels) ch->cancel();
  for (auto& ch : channels) {
    Outcome o = collect(*ch);
    EXPECT_EQ(o.last.finish, FinishReason::kCancelled);
  }
  EXPECT_TRUE(wait_idle(**engine));
  const EngineStats s = (*engine)->stats();
  EXPECT_EQ(s.n_kv_blocks_used, 0);
  EXPECT_EQ(s.n_running, 0);
}

// Backpressure: a sequence whose consumer does not drain its channel is
// paused once max_pending_events are waiting, the paused engine does not spin
// (steps only tick at the paused-poll rate), and draining resumes it to the
// same tokens an undisturbed run gives.
TEST(Engine, BackpressurePausesWithoutSpinningAndResumesExactly) {
  LoadedModel l = load_shared_model("stories260K");
  if (!l.model) GTEST_SKIP() << "SKIPPED: ../shared/models/stories260K.gguf not found";
  EngineConfig cfg{.n_ctx = 256, .max_seqs = 2, .n_kv_tokens = 512, .block_size = 16, .n_threads = 1,
                   .max_pending_events = 4};
  auto engine = Engine::create(*l.model, *l.tokenizer, cfg);
  ASSERT_TRUE(engine.ok());
  std::mt19937 rng(11);
  const std::vector<int32_t> prompt = random_prompt(rng, 20, 512);
  Outcome alone = collect(*(*engine)->submit(greedy(prompt, 100)));
  ASSERT_TRUE(wait_idle(**engine));
  const int64_t generated0 = (*engine)->stats().n_generated_tokens_total;
  EXPECT_EQ(generated0, 100);

  auto ch = (*engine)->submit(greedy(prompt, 100));
  // The engine checks before each step: once more than max_pending_events
  // wait undrained, the sequence takes no further step.
  ASSERT_TRUE(test::wait_until([&] { return ch->pending() > cfg.max_pending_events; })) << "never paused";
  auto generated = [&] { return (*engine)->stats().n_generated_tokens_total - generated0; };
  // The published stats catch up with the step that pushed the last event.
  ASSERT_TRUE(test::wait_until([&] { return generated() >= static_cast<int64_t>(ch->pending()); }));
  const int64_t now = generated();
  EXPECT_LE(now, 8) << "not paused near max_pending_events";
  EXPECT_EQ(ch->pending(), static_cast<size_t>(now));
  EXPECT_EQ((*engine)->stats().n_running, 1);
  const int64_t steps0 = (*engine)->stats().n_steps;
  // The window over which spinning is measured (no event to wait for: the
  // claim is that nothing happens).
  std::this_thread::sleep_for(200ms);
  EXPECT_LT((*engine)->stats().n_steps - steps0, 200) << "the engine loop spins while the sequence is paused";
  EXPECT_EQ((*engine)->stats().n_generated_tokens_total - generated0, now);

  Outcome resumed = collect(*ch);
  EXPECT_EQ(resumed.last.finish, FinishReason::kMaxTokens);
  EXPECT_EQ(resumed.ids, alone.ids);
  EXPECT_EQ(resumed.text, alone.text);
}

TEST(Engine, FinishReasonsAndErrors) {
  LoadedModel l = load_shared_model("stories260K");
  if (!l.model) GTEST_SKIP() << "SKIPPED: ../shared/models/stories260K.gguf not found";
  EngineConfig cfg{.n_ctx = 64, .max_seqs = 2, .n_kv_tokens = 256, .block_size = 16, .n_threads = 1};
  auto engine = Engine::create(*l.model, *l.tokenizer, cfg);
  const auto prompt = l.tokenizer->encode("Once upon a time");
  // A stop string: never emitted, reported with its text.
  Request r = greedy(prompt, 64);
  r.stop.stop_strings = {"Lily"};
  Outcome o = collect(*(*engine)->submit(r));
  EXPECT_EQ(o.last.finish, FinishReason::kStopSequence);
  EXPECT_EQ(o.last.stop_sequence, "Lily");
  EXPECT_EQ(o.text, ", there was a little girl named ");
  // The window fills up: 5 prompt tokens + 59 generated = 64.
  o = collect(*(*engine)->submit(greedy(prompt, 1000)));
  EXPECT_EQ(o.last.finish, FinishReason::kContextWindow);
  EXPECT_EQ(o.last.usage.n_generated_tokens, 59);
  // A prompt that cannot fit, and a bad token id: typed errors.
  o = collect(*(*engine)->submit(greedy(std::vector<int32_t>(64, 5), 4)));
  EXPECT_EQ(o.last.kind, EventKind::kError);
  EXPECT_EQ(o.last.error.kind(), ErrorKind::kOutOfRange);
  ASSERT_NE(o.last.error.detail(), nullptr);
  EXPECT_EQ(o.last.error.reason(), ErrorReason::kContextLengthExceeded);
  EXPECT_EQ(o.last.error.detail()->numbers.n_prompt_tokens, 64);
  EXPECT_EQ(o.last.error.detail()->numbers.n_ctx, 64);
  EXPECT_EQ(o.last.error.detail()->numbers.max_tokens_fit, 0);
  EXPECT_FALSE(o.last.error.detail()->numbers.retry_after_ms.has_value());
  o = collect(*(*engine)->submit(greedy({1, 512}, 4)));
  EXPECT_EQ(o.last.error.kind(), ErrorKind::kInvalidArgument);
  EXPECT_EQ(o.last.error.reason(), ErrorReason::kUnspecified);
  // A stop token id ends the generation with its id reported.
  Request s = greedy(prompt, 64);
  s.stop.stop_token_ids = {286};  // "▁was", the 3rd greedy token
  o = collect(*(*engine)->submit(s));
  EXPECT_EQ(o.last.finish, FinishReason::kEndOfSequence);
  EXPECT_EQ(o.ids, (std::vector<int32_t>{432, 383, 286}));
  // min_tokens: with EOS (id 2) forced by its bias it still comes only after 5 tokens; with a
  // stop id and ignore_eos the stop id is held back too, and EOS never ends it.
  Request m = greedy(prompt, 64);
  m.stop.ignore_eos = false;
  m.sampling.logit_bias[2] = 100;
  EXPECT_EQ(collect(*(*engine)->submit(m)).ids, (std::vector<int32_t>{2}));
  m.stop.min_tokens = 5;
  o = collect(*(*engine)->submit(m));
  EXPECT_EQ(o.last.finish, FinishReason::kEndOfSequence);
  ASSERT_EQ(o.ids.size(), 6u);
  EXPECT_EQ(o.ids.back(), 2);
  EXPECT_EQ(std::count(o.ids.begin(), o.ids.end(), 2), 1);
  m.stop.ignore_eos = true;
  m.stop.stop_token_ids = {383};
  m.sampling.logit_bias = {{383, 100}};
  o = collect(*(*engine)->submit(m));
  EXPECT_EQ(o.last.finish, FinishReason::kEndOfSequence);
  ASSERT_EQ(o.ids.size(), 6u);
  EXPECT_EQ(o.ids.back(), 383);
  // A stop id outside the vocabulary: a typed error.
  m.stop.stop_token_ids = {512};
  o = collect(*(*engine)->submit(m));
  EXPECT_EQ(o.last.kind, EventKind::kError);
  EXPECT_EQ(o.last.error.reason(), ErrorReason::kInvalidValue);
}

// Validate mode (StopParams::prefill_only): the prompt is computed, then the
// request ends with no token, its usage and the prefill's timings; the
// prompt's blocks are committed (a later real request finds them cached)
// and nothing counts as generated.
TEST(Engine, PrefillOnlyComputesThePromptAndSamplesNothing) {
  LoadedModel l = load_shared_model("stories260K");
  if (!l.model) GTEST_SKIP() << "SKIPPED: ../shared/models/stories260K.gguf not found";
  EngineConfig cfg{.n_ctx = 256, .max_seqs = 2, .n_kv_tokens = 512, .block_size = 16, .n_threads = 1};
  auto engine = Engine::create(*l.model, *l.tokenizer, cfg);
  ASSERT_TRUE(engine.ok());
  std::mt19937 rng(21);
  const std::vector<int32_t> prompt = random_prompt(rng, 40, 512);
  Request v = greedy(prompt, 50);
  v.stop.prefill_only = true;
  Outcome o = collect(*(*engine)->submit(v));
  EXPECT_EQ(o.last.kind, EventKind::kFinish);
  EXPECT_EQ(o.last.finish, FinishReason::kMaxTokens);
  EXPECT_TRUE(o.ids.empty());
  EXPECT_TRUE(o.text.empty());
  EXPECT_EQ(o.last.usage.n_prompt_tokens, 40);
  EXPECT_EQ(o.last.usage.n_generated_tokens, 0);
  const Timings& t = o.last.timings;
  EXPECT_NE(t.t_scheduled, Timings::Clock::time_point{});
  EXPECT_NE(t.t_prefilled, Timings::Clock::time_point{});
  EXPECT_EQ(t.t_first_token, Timings::Clock::time_point{});
  EXPECT_GE(t.t_prefilled, t.t_scheduled);
  EXPECT_GT(t.t_prefill_ms(), 0.0);
  EXPECT_EQ(t.t_decode_ms(), 0.0);
  ASSERT_TRUE(wait_idle(**engine));
  EXPECT_EQ((*engine)->stats().n_generated_tokens_total, 0);
  EXPECT_EQ((*engine)->stats().n_prompt_tokens_total, 40);
  EXPECT_EQ((*engine)->stats().n_kv_blocks_used, 0);
  // The same prompt for real: its full blocks come from the prefix cache,
  // and the answer is what a fresh engine would give (greedy).
  Outcome real = collect(*(*engine)->submit(greedy(prompt, 5)));
  EXPECT_EQ(real.last.usage.n_cached_tokens, 32);
  EXPECT_EQ(real.ids.size(), 5u);
  EXPECT_NE(real.last.timings.t_prefilled, Timings::Clock::time_point{});
  EXPECT_LE(real.last.timings.t_prefilled, real.last.timings.t_first_token);
}

// Stopping: what is still running and what is submitted afterwards end with
// the typed shutdown reason, not a KV-cache or context reason.
TEST(Engine, ShutdownGivesTheShutdownReason) {
  LoadedModel l = load_shared_model("stories260K");
  if (!l.model) GTEST_SKIP() << "SKIPPED: ../shared/models/stories260K.gguf not found";
  EngineConfig cfg{.n_ctx = 512, .max_seqs = 2, .n_kv_tokens = 1024, .block_size = 16, .n_threads = 1,
                   .max_pending_events = 2};
  auto engine = Engine::create(*l.model, *l.tokenizer, cfg);
  ASSERT_TRUE(engine.ok());
  // Never drained past its first event: paused by backpressure, so still
  // running when stop() comes.
  auto running = (*engine)->submit(greedy(l.tokenizer->encode("Once upon a time"), 400));
  ASSERT_FALSE(running->wait_and_drain(5000ms).empty());
  (*engine)->stop();
  for (auto& ch : {running, (*engine)->submit(greedy({1, 5, 6}, 4))}) {
    Outcome o = collect(*ch);
    EXPECT_EQ(o.last.kind, EventKind::kError);
    EXPECT_EQ(o.last.error.kind(), ErrorKind::kResourceExhausted);
    EXPECT_EQ(o.last.error.reason(), ErrorReason::kEngineShuttingDown);
  }
}

TEST(Engine, SameSeedSameTokensWhateverElseRuns) {
  LoadedModel l = load_shared_model("stories260K");
  if (!l.model) GTEST_SKIP() << "SKIPPED: ../shared/models/stories260K.gguf not found";
  EngineConfig cfg{.n_ctx = 256, .max_seqs = 8, .n_kv_tokens = 2048, .n_threads = 1};
  auto engine = Engine::create(*l.model, *l.tokenizer, cfg);
  Request r = greedy(l.tokenizer->encode("The little dog"), 40);
  r.sampling.temperature = 0.9f;
  r.sampling.seed = 1234;
  const Outcome alone = collect(*(*engine)->submit(r));
  std::vector<std::shared_ptr<RequestChannel>> noise;
  for (int i = 0; i < 5; ++i) {
    Request n = r;
    n.sampling.seed = 99 + i;
    noise.push_back((*engine)->submit(n));
  }
  const Outcome busy = collect(*(*engine)->submit(r));
  for (auto& ch : noise) collect(*ch);
  EXPECT_EQ(alone.ids, busy.ids);
}

// stop() from several threads at once (a signal-handling thread, the
// destructor): one join, no race on the thread handle (TSan sees it), and
// every request still running ends with an error event.
TEST(Engine, ConcurrentStopJoinsOnce) {
  LoadedModel l = load_shared_model("stories260K");
  if (!l.model) GTEST_SKIP() << "SKIPPED: ../shared/models/stories260K.gguf not found";
  EngineConfig cfg{.n_ctx = 512, .max_seqs = 4, .n_kv_tokens = 2048, .block_size = 16, .n_threads = 1};
  auto engine = Engine::create(*l.model, *l.tokenizer, cfg);
  ASSERT_TRUE(engine.ok());
  std::mt19937 rng(11);
  std::vector<std::shared_ptr<RequestChannel>> channels;
  for (int i = 0; i < 3; ++i) channels.push_back((*engine)->submit(greedy(random_prompt(rng, 20, 512), 400)));
  std::vector<std::thread> stoppers;
  for (int i = 0; i < 4; ++i) stoppers.emplace_back([&] { (*engine)->stop(); });
  for (auto& t : stoppers) t.join();
  for (auto& ch : channels) {
    ASSERT_TRUE(ch->finished());  // (collect() would wait forever otherwise)
    Outcome o = collect(*ch);
    EXPECT_NE(o.last.kind, EventKind::kText);
  }
  // Idempotent afterwards, and the destructor stops once more.
  (*engine)->stop();
  EXPECT_EQ((*engine)->stats().n_running, 0);
}

// What the engine reports to its obs sink, kept whole (test only).
struct RecordingSink final : obs::EngineSink {
  std::mutex mu;
  std::vector<double> queue_s, prefill_s, gaps_s, steps_s;
  int64_t batch_sum = 0;
  int n_preempted = 0;
  void on_decode_step(double t, int n) override {
    std::lock_guard<std::mutex> lock(mu);
    steps_s.push_back(t);
    batch_sum += n;
  }
  void on_first_token(double q, double p) override {
    std::lock_guard<std::mutex> lock(mu);
    queue_s.push_back(q);
    prefill_s.push_back(p);
  }
  void on_inter_token(double t) override {
    std::lock_guard<std::mutex> lock(mu);
    gaps_s.push_back(t);
  }
  void on_preemptions(int n) override {
    std::lock_guard<std::mutex> lock(mu);
    n_preempted += n;
  }
};

TEST(EngineObsTest, ReportsEachFirstTokenGapAndDecodeStep) {
  if (!obs::kEnabled) GTEST_SKIP() << "built with ZL_OBS=OFF";
  LoadedModel l = load_shared_model("stories260K");
  if (!l.model) GTEST_SKIP() << "SKIPPED: ../shared/models/stories260K.gguf not found";
  RecordingSink sink;
  EngineConfig cfg{.n_ctx = 256, .max_seqs = 4, .n_kv_tokens = 1024, .block_size = 16, .kv_type = KvType::kF32,
                   .n_threads = 1, .obs_sink = &sink};
  auto engine = Engine::create(*l.model, *l.tokenizer, cfg);
  ASSERT_TRUE(engine.ok());
  std::mt19937 rng(5);
  const std::vector<int> budgets = {10, 15, 20};
  std::vector<std::shared_ptr<RequestChannel>> channels;
  for (int n : budgets) channels.push_back((*engine)->submit(greedy(random_prompt(rng, 12, 512), n)));
  std::vector<double> want_queue, want_prefill;
  for (auto& ch : channels) {
    Outcome o = collect(*ch);
    ASSERT_EQ(o.last.finish, FinishReason::kMaxTokens);
    const Timings& t = o.last.timings;
    // The sink got the same time points the request's timings carry.
    want_queue.push_back(std::chrono::duration<double>(t.t_scheduled - t.t_submit).count());
    want_prefill.push_back(std::chrono::duration<double>(t.t_first_token - t.t_scheduled).count());
  }
  (*engine)->stop();  // joins the engine thread: the last step's report is in (it follows the last events)
  std::lock_guard<std::mutex> lock(sink.mu);
  for (auto* v : {&want_queue, &want_prefill, &sink.queue_s, &sink.prefill_s}) std::sort(v->begin(), v->end());
  EXPECT_EQ(sink.queue_s, want_queue);
  EXPECT_EQ(sink.prefill_s, want_prefill);
  EXPECT_EQ(sink.gaps_s.size(), size_t{9 + 14 + 19});  // a gap per token after each first
  // Every token is sampled in a distinct step of its sequence; the steps that
  // sample are at least the longest request's and at most all tokens.
  EXPECT_GE(sink.steps_s.size(), 20u);
  EXPECT_LE(sink.steps_s.size(), 45u);
  EXPECT_GE(sink.batch_sum, 45);
  for (double t : sink.steps_s) EXPECT_GT(t, 0);
  EXPECT_EQ(sink.n_preempted, 0);
}

}  // namespace
}  // namespace zl
