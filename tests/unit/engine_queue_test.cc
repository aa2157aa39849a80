// Admission control in the engine on a real model (stories260K): the bounded
// queue refuses at once with kOverloaded, the token bound, the queue timeout,
// exact queue counters after cancels, errors and shutdown, and pause
// preemption (--max-pause-ms) that frees the slot of a client that stopped
// reading and later resumes its stream exactly. A request holds the batch
// slot by not being drained: backpressure pauses it (max_pending_events).
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "model/model.h"
#include "obs/engine_sink.h"
#include "obs/metrics.h"
#include "support/engine_fixture.h"
#include "support/process.h"
#include "support/wait.h"
#include "tokenizer/tokenizer.h"

namespace zl {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

using test::collect;
using test::LoadedModel;
using test::Outcome;

LoadedModel load_stories() { return test::load_shared_model("stories260K"); }

#define REQUIRE_STORIES(l) \
  if (!(l).model) GTEST_SKIP() << "SKIPPED: ../shared/models/stories260K.gguf not found"

Request greedy(std::vector<int32_t> prompt, int max_tokens, std::string id = "r") {
  return test::greedy_request(std::move(prompt), max_tokens, std::move(id));
}

std::vector<int32_t> prompt_of(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> p = {1};
  for (int i = 1; i < n; ++i) p.push_back(3 + static_cast<int32_t>(rng() % 509));
  return p;
}

// The one event a refused or expired request gets: kError with `reason`.
void expect_refusal(const Event& e, ErrorReason reason) {
  EXPECT_EQ(e.kind, EventKind::kError);
  EXPECT_EQ(e.finish, FinishReason::kError);
  EXPECT_EQ(e.error.reason(), reason) << e.error.to_string();
  ASSERT_NE(e.error.detail(), nullptr);
  const auto retry = e.error.detail()->numbers.retry_after_ms;
  ASSERT_TRUE(retry.has_value());
  EXPECT_GE(*retry, 1000);
  EXPECT_LE(*retry, 60000);
}

// Submits a long request nobody drains and waits until backpressure has
// paused it in the batch: it holds a slot until drained.
std::shared_ptr<RequestChannel> hold_slot(Engine& engine, std::vector<int32_t> prompt) {
  auto ch = engine.submit(greedy(std::move(prompt), 200, "holder"));
  EXPECT_TRUE(test::wait_until([&] {
    const EngineStats s = engine.stats();
    return s.n_paused == 1 && s.n_queued == 0;
  })) << "the holder never paused";
  return ch;
}

bool wait_queue_empty(const Engine& e) {
  return test::wait_until([&] {
    const EngineStats s = e.stats();
    return s.n_queued == 0 && s.n_queued_prompt_tokens == 0;
  });
}

EngineConfig small_config() {
  return EngineConfig{.n_ctx = 256, .max_seqs = 1, .n_kv_tokens = 1024, .block_size = 16, .n_threads = 1,
                      .max_pending_events = 4};
}

TEST(EngineQueue, RetryAfterFollowsTheCompletionRateAndTheQueue) {
  EXPECT_EQ(retry_after_estimate_ms(5, 0), 1000);        // no known rate
  EXPECT_EQ(retry_after_estimate_ms(0, 100), 1000);      // fast: the minimum
  EXPECT_EQ(retry_after_estimate_ms(4, 1.0), 3000);      // (4 / 2 + 1) / 1 per s
  EXPECT_EQ(retry_after_estimate_ms(4, 0.5), 6000);
  EXPECT_EQ(retry_after_estimate_ms(1000, 0.01), 60000); // capped
  EXPECT_EQ(retry_after_estimate_ms(1, 1e-300), 60000);  // no overflow
  const auto now = Clock::time_point{} + 1h;
  EXPECT_EQ(completion_rate({}, now), 0);
  // 4 within the window over 2 s.
  std::vector<Clock::time_point> done = {now - 2s, now - 1500ms, now - 1s, now, now - 61s};
  EXPECT_DOUBLE_EQ(completion_rate(done, now), 2.0);
  // A burst within 1 s counts over 1 s.
  done = {now - 10ms, now - 5ms, now};
  EXPECT_DOUBLE_EQ(completion_rate(done, now), 3.0);
}

TEST(EngineQueue, AFullQueueRefusesAtOnceAndWhatRunsIsUndisturbed) {
  LoadedModel l = load_stories();
  REQUIRE_STORIES(l);
  EngineConfig cfg = small_config();
  const auto prompt_a = prompt_of(12, 1), prompt_b = prompt_of(9, 2);
  Outcome alone_a, alone_b;
  {
    auto engine = Engine::create(*l.model, *l.tokenizer, cfg);
    ASSERT_TRUE(engine.ok());
    alone_a = collect(*(*engine)->submit(greedy(prompt_a, 200)));
    alone_b = collect(*(*engine)->submit(greedy(prompt_b, 20)));
  }
  cfg.max_queue = 1;
  auto engine = Engine::create(*l.model, *l.tokenizer, cfg);
  ASSERT_TRUE(engine.ok());
  Engine& e = **engine;
  auto a = hold_slot(e, prompt_a);
  auto b = e.submit(greedy(prompt_b, 20, "b"));  // waits: the queue holds 1
  EXPECT_EQ(e.stats().n_queued, 1);
  EXPECT_EQ(e.stats().n_queued_prompt_tokens, 9);
  auto c = e.submit(greedy(prompt_of(5, 3), 20, "c"));
  // Refused inside submit(), before the engine thread saw it.
  ASSERT_TRUE(c->finished());
  std::vector<Event> ev = c->drain();
  ASSERT_EQ(ev.size(), 1u);
  expect_refusal(ev[0], ErrorReason::kOverloaded);
  EXPECT_EQ(e.stats().n_queued, 1);
  EXPECT_EQ(e.stats().n_queued_prompt_tokens, 9);
  // The running request and the queued one finish exactly as alone.
  Outcome got_a = collect(*a);
  EXPECT_EQ(got_a.last.finish, FinishReason::kMaxTokens);
  EXPECT_EQ(got_a.ids, alone_a.ids);
  Outcome got_b = collect(*b);
  EXPECT_EQ(got_b.ids, alone_b.ids);
  EXPECT_TRUE(wait_queue_empty(e));
  // Room again: a new request is accepted.
  EXPECT_EQ(collect(*e.submit(greedy(prompt_b, 20))).ids, alone_b.ids);
}

// Runs the engine one decode step at a time while held: each step's report
// (on_decode_step, after the step's events) waits for step() or open(), at
// most 10 s. What a client sees between a step's events and the engine's
// bookkeeping after them, deterministically. Test-only: a real sink must not
// block.
class StepGate : public obs::EngineSink {
 public:
  void on_decode_step(double, int) override {
    std::unique_lock<std::mutex> lock(mu_);
    if (!held_) return;
    ++n_waits_;
    cv_.notify_all();
    cv_.wait_for(lock, 10s, [&] { return released_ > 0 || !held_; });
    if (released_ > 0) --released_;
  }
  void on_first_token(double, double) override {}
  void on_inter_token(double) override {}
  void on_preemptions(int) override {}
  // Holds the engine at the end of its next decode step; true once it is there.
  bool hold() {
    std::unique_lock<std::mutex> lock(mu_);
    held_ = true;
    const int64_t seen = n_waits_;
    return cv_.wait_for(lock, 10s, [&] { return n_waits_ > seen; });
  }
  // Lets the held engine run one more decode step; true once it waits again.
  bool step() {
    std::unique_lock<std::mutex> lock(mu_);
    const int64_t seen = n_waits_;
    ++released_;
    cv_.notify_all();
    return cv_.wait_for(lock, 10s, [&] { return n_waits_ > seen; });
  }
  void open() {
    std::lock_guard<std::mutex> lock(mu_);
    held_ = false;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  int64_t n_waits_ = 0, released_ = 0;
};

// No queue (--max-queue 0): a client that submits the moment it has read the
// last event of a request (as a fan-out does with its next choice) finds that
// request's slot free. The engine frees it before that event, not at the end
// of the step (held here by the gate while the next submit is answered); a
// cancelled request's likewise.
TEST(EngineQueue, TheSlotIsFreeWhenTheLastEventArrives) {
  if constexpr (!obs::kEnabled) GTEST_SKIP() << "SKIPPED: ZL_OBS=OFF (the gate is an obs sink)";
  LoadedModel l = load_stories();
  REQUIRE_STORIES(l);
  StepGate gate;
  EngineConfig cfg = small_config();
  cfg.max_queue = 0;
  cfg.max_seqs = 2;
  cfg.obs_sink = &gate;
  auto engine = Engine::create(*l.model, *l.tokenizer, cfg);
  ASSERT_TRUE(engine.ok());
  Engine& e = **engine;
  // x decodes throughout (drained by its own thread): every step is a decode step.
  auto x = e.submit(greedy(prompt_of(8, 1), 200, "x"));
  Outcome ox;
  std::thread drain([&] { ox = collect(*x); });
  ASSERT_TRUE(gate.hold());
  // a ends (one token) in a step whose report the gate holds.
  auto a = e.submit(greedy(prompt_of(6, 2), 1, "a"));
  for (int i = 0; i < 10 && !a->finished(); ++i) ASSERT_TRUE(gate.step());
  ASSERT_TRUE(a->finished());
  ASSERT_EQ(collect(*a).last.kind, EventKind::kFinish);
  auto b = e.submit(greedy(prompt_of(6, 3), 100, "b"));
  EXPECT_FALSE(b->finished()) << "submitted after a's last event: refused, a's slot was still held";
  // b runs (paused when its 4 events are not drained), then is cancelled: the
  // step that drops it decodes x, and the gate holds that step's report.
  ASSERT_TRUE(gate.step());
  b->cancel();
  for (int i = 0; i < 10 && !b->finished(); ++i) ASSERT_TRUE(gate.step());
  ASSERT_TRUE(b->finished());
  ASSERT_EQ(collect(*b).last.finish, FinishReason::kCancelled);
  auto c = e.submit(greedy(prompt_of(6, 4), 2, "c"));
  EXPECT_FALSE(c->finished()) << "submitted after b's kCancelled: refused, b's slot was still held";
  gate.open();
  EXPECT_EQ(collect(*c).last.kind, EventKind::kFinish);
  drain.join();
  EXPECT_EQ(ox.last.kind, EventKind::kFinish);
  EXPECT_EQ(ox.ids.size(), 200u);
  e.stop();
}

TEST(EngineQueue, TheTokenBoundCountsQueuedPromptTokens) {
  LoadedModel l = load_stories();
  REQUIRE_STORIES(l);
  EngineConfig cfg = small_config();
  cfg.max_queue_tokens = 30;
  auto engine = Engine::create(*l.model, *l.tokenizer, cfg);
  ASSERT_TRUE(engine.ok());
  Engine& e = **engine;
  auto a = hold_slot(e, prompt_of(50, 1));  // 50 > 30: it got a slot at once, so it was never refused
  auto b = e.submit(greedy(prompt_of(20, 2), 8, "b"));
  auto c = e.submit(greedy(prompt_of(11, 3), 8, "c"));  // 20 + 11 > 30
  ASSERT_TRUE(c->finished());
  expect_refusal(c->drain().at(0), ErrorReason::kOverloaded);
  auto d = e.submit(greedy(prompt_of(10, 4), 8, "d"));  // 20 + 10 = 30
  EXPECT_FALSE(d->finished());
  EXPECT_EQ(e.stats().n_queued, 2);
  EXPECT_EQ(e.stats().n_queued_prompt_tokens, 30);
  // Cancelled while waiting: they leave the queue and its counters.
  b->cancel();
  d->cancel();
  EXPECT_EQ(collect(*b).last.finish, FinishReason::kCancelled);
  EXPECT_EQ(collect(*d).last.finish, FinishReason::kCancelled);
  EXPECT_TRUE(wait_queue_empty(e));
  EXPECT_EQ(collect(*a).last.finish, FinishReason::kMaxTokens);
}

TEST(EngineQueue, ARequestNotAdmittedInTimeEndsWithQueueTimeout) {
  LoadedModel l = load_stories();
  REQUIRE_STORIES(l);
  EngineConfig cfg = small_config();
  cfg.queue_timeout_ms = 300;
  auto engine = Engine::create(*l.model, *l.tokenizer, cfg);
  ASSERT_TRUE(engine.ok());
  Engine& e = **engine;
  auto a = hold_slot(e, prompt_of(12, 1));
  const auto t0 = Clock::now();
  auto b = e.submit(greedy(prompt_of(9, 2), 8, "b"));
  Outcome got_b = collect(*b);
  const auto waited = Clock::now() - t0;
  expect_refusal(got_b.last, ErrorReason::kQueueTimeout);
  EXPECT_TRUE(got_b.ids.empty());
  EXPECT_GE(waited, 300ms) << "expired before its timeout";
  EXPECT_TRUE(wait_queue_empty(e));
  // The holder was admitted in time: no timeout for it, whatever it waits now.
  Outcome got_a = collect(*a);
  EXPECT_EQ(got_a.last.finish, FinishReason::kMaxTokens);
  EXPECT_EQ(got_a.last.usage.n_generated_tokens, 200);
}

TEST(EngineQueue, CountersReturnToZeroAfterErrorsCancelsAndShutdown) {
  LoadedModel l = load_stories();
  REQUIRE_STORIES(l);
  EngineConfig cfg = small_config();
  cfg.max_queue = 8;
  auto engine = Engine::create(*l.model, *l.tokenizer, cfg);
  ASSERT_TRUE(engine.ok());
  Engine& e = **engine;
  // Errors at admission (a token outside the vocabulary, an empty prompt).
  EXPECT_EQ(collect(*e.submit(greedy({1, 100000}, 4))).last.kind, EventKind::kError);
  EXPECT_EQ(collect(*e.submit(greedy({}, 4))).last.kind, EventKind::kError);
  EXPECT_TRUE(wait_queue_empty(e));
  auto a = hold_slot(e, prompt_of(12, 1));
  std::vector<std::shared_ptr<RequestChannel>> waiting;
  for (int i = 0; i < 6; ++i) waiting.push_back(e.submit(greedy(prompt_of(5 + i, 10 + i), 8)));
  EXPECT_EQ(e.stats().n_queued, 6);
  EXPECT_EQ(e.stats().n_queued_prompt_tokens, 5 + 6 + 7 + 8 + 9 + 10);
  for (int i = 0; i < 3; ++i) waiting[i]->cancel();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(collect(*waiting[i]).last.finish, FinishReason::kCancelled);
  EXPECT_TRUE(test::wait_until([&] { return e.stats().n_queued == 3; }));
  EXPECT_EQ(e.stats().n_queued_prompt_tokens, 8 + 9 + 10);
  e.stop();
  for (int i = 3; i < 6; ++i) EXPECT_EQ(collect(*waiting[i]).last.error.reason(), ErrorReason::kEngineShuttingDown);
  EXPECT_EQ(e.stats().n_queued, 0);
  EXPECT_EQ(e.stats().n_queued_prompt_tokens, 0);
  EXPECT_EQ(collect(*a).last.error.reason(), ErrorReason::kEngineShuttingDown);
}

TEST(EngineQueue, APausedStreamIsPreemptedForOthersAndResumesExactly) {
  LoadedModel l = load_stories();
  REQUIRE_STORIES(l);
  EngineConfig cfg = small_config();
  const auto prompt_a = prompt_of(40, 1), prompt_b = prompt_of(9, 2);
  Outcome alone_a;
  {
    auto engine = Engine::create(*l.model, *l.tokenizer, cfg);
    ASSERT_TRUE(engine.ok());
    alone_a = collect(*(*engine)->submit(greedy(prompt_a, 200)));
  }
  cfg.max_pause_ms = 100;
  auto engine = Engine::create(*l.model, *l.tokenizer, cfg);
  ASSERT_TRUE(engine.ok());
  Engine& e = **engine;
  auto a = e.submit(greedy(prompt_a, 200, "a"));  // never drained until the end: paused, then preempted
  // a holds the slot before b arrives (submitted together, the latency policy would run the
  // shorter b first).
  ASSERT_TRUE(test::wait_until([&] { return a->pending() > 0; }));
  // The only slot is freed for b, which completes while a's client is still behind.
  Outcome got_b = collect(*e.submit(greedy(prompt_b, 30, "b")));
  EXPECT_EQ(got_b.last.finish, FinishReason::kMaxTokens);
  EXPECT_EQ(got_b.ids.size(), 30u);
  EXPECT_GE(e.stats().n_pause_preemptions, 1);
  // a waits, still paused: not readmitted while its client has not read.
  ASSERT_TRUE(test::wait_until([&] {
    const EngineStats s = e.stats();
    return s.n_running == 0 && s.n_waiting == 1;
  }));
  const size_t pending = a->pending();
  EXPECT_LE(pending, cfg.max_pending_events + 1);
  EXPECT_EQ(e.stats().n_queued, 0) << "a resumed sequence is not a queued request";
  // Reading resumes it: no token lost or repeated.
  Outcome got_a = collect(*a);
  EXPECT_EQ(got_a.last.finish, FinishReason::kMaxTokens);
  EXPECT_EQ(got_a.ids, alone_a.ids);
  EXPECT_EQ(got_a.text, alone_a.text);
  EXPECT_EQ(got_a.last.usage.n_generated_tokens, 200);
}

// Not a timed assertion: prints what a refusal costs the I/O thread (the
// channel, the bound check under the engine's lock, the error event).
TEST(EngineQueue, RefusalCostIsPrinted) {
  LoadedModel l = load_stories();
  REQUIRE_STORIES(l);
  EngineConfig cfg = small_config();
  cfg.max_queue = 0;
  auto engine = Engine::create(*l.model, *l.tokenizer, cfg);
  ASSERT_TRUE(engine.ok());
  Engine& e = **engine;
  auto a = hold_slot(e, prompt_of(12, 1));
  const Request r = greedy(prompt_of(64, 2), 16);
  constexpr int kN = 20000;
  int n_refused = 0;
  const auto t0 = Clock::now();
  for (int i = 0; i < kN; ++i) n_refused += e.submit(r)->finished() ? 1 : 0;
  const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / kN;
  EXPECT_EQ(n_refused, kN);
  std::printf("refused submit (64-token prompt, request copy included): %.0f ns each\n", ns);
  e.stop();
}

}  // namespace
}  // namespace zl
