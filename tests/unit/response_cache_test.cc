// The response cache (limits/response_cache.h) without a server: the key's
// sensitivity to every input, the recorder's rules, LRU order and the byte
// bound, the replay channel, the metrics, and a thread-safety smoke test.
#include "limits/response_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <set>
#include <thread>

namespace zl::limits {
namespace {

Request greedy_request() {
  Request r;
  r.id = "req-1";
  r.tenant = "key:0123456789abcdef/";
  r.prompt_ids = {1, 15043, 29892, 3186};
  r.sampling.temperature = 0.0f;
  r.stop.max_tokens = 32;
  return r;
}

Event text_event(std::string text, std::vector<int32_t> ids, int64_t n_generated) {
  return Event{.kind = EventKind::kText,
               .text = std::move(text),
               .token_ids = std::move(ids),
               .usage = {.n_prompt_tokens = 4, .n_cached_tokens = 1, .n_generated_tokens = n_generated}};
}

Event finish_event(FinishReason reason, int64_t n_generated, std::string stop_sequence = {}) {
  return Event{.kind = EventKind::kFinish,
               .finish = reason,
               .stop_sequence = std::move(stop_sequence),
               .usage = {.n_prompt_tokens = 4, .n_cached_tokens = 1, .n_generated_tokens = n_generated}};
}

// A recorded answer of `n_deltas` deltas of `text_bytes` bytes each.
std::shared_ptr<const CachedAnswer> answer_of(int n_deltas, size_t text_bytes = 4) {
  AnswerRecorder rec(1 << 30);
  for (int i = 0; i < n_deltas; ++i) rec.add(text_event(std::string(text_bytes, 'a' + i % 26), {i}, i + 1));
  rec.add(finish_event(FinishReason::kMaxTokens, n_deltas));
  return rec.take();
}

TEST(ResponseCacheKey, GreedyOrSeededRequestsAreCacheable) {
  Request r = greedy_request();
  EXPECT_TRUE(is_cacheable(r));
  r.sampling.temperature = 1.0f;
  EXPECT_FALSE(is_cacheable(r));  // random: another answer each time
  r.sampling.seed = 42;
  EXPECT_TRUE(is_cacheable(r));
  r.stop.prefill_only = true;  // validate mode generates nothing
  EXPECT_FALSE(is_cacheable(r));
  r.stop.prefill_only = false;
  r.logprobs = 0;  // a recording has no logprobs: such requests bypass the cache
  EXPECT_FALSE(is_cacheable(r));
}

TEST(ResponseCacheKey, EveryInputThatShapesTheAnswerChangesTheKey) {
  const Request base = greedy_request();
  const std::string key = cache_key(base, false);
  // What does not change the engine's events does not change the key.
  Request same = base;
  same.id = "another-request-id";
  same.priority = 7;
  EXPECT_EQ(cache_key(same, false), key);

  const std::vector<std::pair<std::string, std::function<void(Request&)>>> changes = {
      {"tenant", [](Request& r) { r.tenant = "key:fedcba9876543210/"; }},
      {"tenant user", [](Request& r) { r.tenant += "alice"; }},
      {"prompt id", [](Request& r) { r.prompt_ids[2] = 29893; }},
      {"prompt length", [](Request& r) { r.prompt_ids.push_back(13); }},
      {"temperature", [](Request& r) { r.sampling.temperature = 0.5f; }},
      {"top_k", [](Request& r) { r.sampling.top_k = 40; }},
      {"top_p", [](Request& r) { r.sampling.top_p = 0.9f; }},
      {"min_p", [](Request& r) { r.sampling.min_p = 0.05f; }},
      {"repetition_penalty", [](Request& r) { r.sampling.repetition_penalty = 1.1f; }},
      {"presence_penalty", [](Request& r) { r.sampling.presence_penalty = 0.5f; }},
      {"frequency_penalty", [](Request& r) { r.sampling.frequency_penalty = 0.5f; }},
      {"penalty_last_n", [](Request& r) { r.sampling.penalty_last_n = -1; }},
      {"seed", [](Request& r) { r.sampling.seed = 1; }},
      {"seed 0", [](Request& r) { r.sampling.seed = 0; }},  // a seed of 0 is not "no seed"
      {"logit_bias", [](Request& r) { r.sampling.logit_bias[2] = -100; }},
      {"max_tokens", [](Request& r) { r.stop.max_tokens = 33; }},
      {"stop_token_ids", [](Request& r) { r.stop.stop_token_ids = {13}; }},
      {"stop_strings", [](Request& r) { r.stop.stop_strings = {"\n"}; }},
      {"ignore_eos", [](Request& r) { r.stop.ignore_eos = true; }},
      {"min_tokens", [](Request& r) { r.stop.min_tokens = 5; }},
      {"prefill_only", [](Request& r) { r.stop.prefill_only = true; }},
      {"return_token_ids", [](Request& r) { r.return_token_ids = true; }},
      {"logprobs", [](Request& r) { r.logprobs = 2; }},
  };
  std::set<std::string> keys = {key};
  for (const auto& [name, change] : changes) {
    Request r = base;
    change(r);
    const std::string k = cache_key(r, false);
    EXPECT_NE(k, key) << name;
    keys.insert(k);
  }
  EXPECT_EQ(keys.size(), changes.size() + 1) << "two different changes gave the same key";
  EXPECT_NE(cache_key(base, true), key) << "single_call";
}

TEST(ResponseCacheKey, FieldBoundariesCannotBeShifted) {
  // Length prefixes: moving bytes from one string to the next is another key.
  Request a = greedy_request(), b = greedy_request();
  a.stop.stop_strings = {"ab", "c"};
  b.stop.stop_strings = {"a", "bc"};
  EXPECT_NE(cache_key(a, false), cache_key(b, false));
  a = greedy_request();
  b = greedy_request();
  a.sampling.logit_bias = {{2, -1.0f}, {3, 1.0f}};
  b.sampling.logit_bias = {{3, 1.0f}, {2, -1.0f}};  // the same map, built in another order
  EXPECT_EQ(cache_key(a, false), cache_key(b, false));
}

TEST(AnswerRecorder, KeepsEveryDeltaItsIdsAndTheFinish) {
  AnswerRecorder rec(1 << 20);
  rec.add(text_event("Once", {9038}, 1));
  rec.add(text_event("", {29871}, 2));  // ids advanced, no text yet (a split UTF-8 sequence)
  rec.add(text_event(" upon\xe2\x80\x94", {2501, 30098}, 4));
  EXPECT_FALSE(rec.complete());
  rec.add(finish_event(FinishReason::kStopSequence, 4, "END"));
  ASSERT_TRUE(rec.complete());
  std::shared_ptr<const CachedAnswer> a = rec.take();
  ASSERT_TRUE(a);
  EXPECT_EQ(a->text(), "Once upon\xe2\x80\x94");
  EXPECT_EQ(a->n_deltas(), 3u);
  EXPECT_EQ(rec.take(), nullptr);  // spent

  const auto now = Timings::Clock::now();
  std::vector<Event> ev = a->events(now);
  ASSERT_EQ(ev.size(), 4u);
  EXPECT_EQ(ev[0].text, "Once");
  EXPECT_EQ(ev[0].token_ids, std::vector<int32_t>{9038});
  EXPECT_EQ(ev[0].usage.n_generated_tokens, 1);
  EXPECT_EQ(ev[1].text, "");
  EXPECT_EQ(ev[1].token_ids, std::vector<int32_t>{29871});
  EXPECT_EQ(ev[2].text, " upon\xe2\x80\x94");
  EXPECT_EQ(ev[2].token_ids, (std::vector<int32_t>{2501, 30098}));
  EXPECT_EQ(ev[2].usage.n_generated_tokens, 4);
  for (const Event& e : ev) {
    EXPECT_EQ(e.usage.n_prompt_tokens, 4);
    EXPECT_EQ(e.usage.n_cached_tokens, 1);
    // A replay spends no engine time: every phase starts and ends now.
    EXPECT_EQ(e.timings.t_submit, now);
    EXPECT_EQ(e.timings.t_first_token, now);
    EXPECT_EQ(e.timings.t_queued_ms(), 0);
    EXPECT_EQ(e.timings.t_prefill_ms(), 0);
    EXPECT_EQ(e.timings.t_decode_ms(), 0);
  }
  EXPECT_EQ(ev[3].kind, EventKind::kFinish);
  EXPECT_EQ(ev[3].finish, FinishReason::kStopSequence);
  EXPECT_EQ(ev[3].stop_sequence, "END");
  EXPECT_EQ(ev[3].usage.n_generated_tokens, 4);
}

TEST(AnswerRecorder, OnlyANormalFinishCompletesAnAnswer) {
  for (FinishReason r : {FinishReason::kEndOfSequence, FinishReason::kMaxTokens, FinishReason::kStopSequence,
                         FinishReason::kContextWindow}) {
    AnswerRecorder rec(1 << 20);
    rec.add(text_event("x", {}, 1));
    rec.add(finish_event(r, 1));
    EXPECT_TRUE(rec.take()) << finish_reason_name(r);
  }
  for (FinishReason r : {FinishReason::kSafety, FinishReason::kCancelled, FinishReason::kError, FinishReason::kNone}) {
    AnswerRecorder rec(1 << 20);
    rec.add(text_event("x", {}, 1));
    rec.add(finish_event(r, 1));
    EXPECT_FALSE(rec.complete()) << finish_reason_name(r);
    EXPECT_EQ(rec.take(), nullptr) << finish_reason_name(r);
  }
  AnswerRecorder error(1 << 20);
  error.add(text_event("x", {}, 1));
  error.add(Event{.kind = EventKind::kError, .error = internal_error("boom")});
  EXPECT_EQ(error.take(), nullptr);
  // Never finished (the client left): nothing.
  AnswerRecorder unfinished(1 << 20);
  unfinished.add(text_event("x", {}, 1));
  EXPECT_EQ(unfinished.take(), nullptr);
  // An event after the finish: not an answer the engine gives.
  AnswerRecorder after(1 << 20);
  after.add(finish_event(FinishReason::kEndOfSequence, 0));
  after.add(text_event("x", {}, 1));
  EXPECT_EQ(after.take(), nullptr);
  // Nothing revives an abandoned recording.
  AnswerRecorder revived(1 << 20);
  revived.add(finish_event(FinishReason::kError, 0));
  revived.add(finish_event(FinishReason::kEndOfSequence, 0));
  EXPECT_EQ(revived.take(), nullptr);
}

TEST(AnswerRecorder, GivesUpPastItsBound) {
  AnswerRecorder rec(sizeof(CachedAnswer) + 100);
  for (int i = 0; i < 100; ++i) rec.add(text_event("0123456789", {}, i + 1));
  rec.add(finish_event(FinishReason::kMaxTokens, 100));
  EXPECT_EQ(rec.take(), nullptr);
}

TEST(ResponseCache, StoresFindsAndIsolatesTenants) {
  ResponseCache cache(1 << 20);
  Request alice = greedy_request();
  alice.tenant = "key:aaaa/";
  Request bob = alice;
  bob.tenant = "key:bbbb/";
  EXPECT_EQ(cache.lookup(alice, false).outcome, CacheLookup::Outcome::kMiss);
  ASSERT_TRUE(cache.insert(cache_key(alice, false), answer_of(3)));
  CacheLookup hit = cache.lookup(alice, false);
  EXPECT_TRUE(hit.hit());
  ASSERT_TRUE(hit.answer);
  EXPECT_EQ(hit.answer->n_deltas(), 3u);
  // Another key's client sending the very same request: never alice's answer.
  EXPECT_EQ(cache.lookup(bob, false).outcome, CacheLookup::Outcome::kMiss);
  Request random = alice;
  random.sampling.temperature = 0.7f;
  EXPECT_EQ(cache.lookup(random, false).outcome, CacheLookup::Outcome::kNotCacheable);
  const ResponseCacheStats s = cache.stats();
  EXPECT_EQ(s.n_hits, 1);
  EXPECT_EQ(s.n_misses, 2);  // not-cacheable lookups count nothing
  EXPECT_EQ(s.n_entries, 1);
}

TEST(ResponseCache, EvictsTheLeastRecentlyUsedWithinTheByteBound) {
  auto answer = answer_of(8);
  const size_t one = ResponseCache::entry_bytes(1, *answer);
  ResponseCache cache(3 * one + one / 2);  // room for three entries
  ASSERT_TRUE(cache.insert("A", answer));
  ASSERT_TRUE(cache.insert("B", answer));
  ASSERT_TRUE(cache.insert("C", answer));
  EXPECT_EQ(cache.entries(), 3u);
  EXPECT_EQ(cache.bytes(), 3 * one);
  ASSERT_TRUE(cache.find("A"));  // A is now the most recent: B is the oldest
  ASSERT_TRUE(cache.insert("D", answer));
  EXPECT_EQ(cache.find("B"), nullptr);
  EXPECT_TRUE(cache.find("C"));
  EXPECT_TRUE(cache.find("A"));
  EXPECT_TRUE(cache.find("D"));
  EXPECT_EQ(cache.stats().n_evictions, 1);
  EXPECT_LE(cache.bytes(), cache.max_bytes());
  // Order now (most recent first): D, A, C. Two new entries evict C, then A.
  ASSERT_TRUE(cache.insert("E", answer));
  EXPECT_EQ(cache.find("C"), nullptr);
  ASSERT_TRUE(cache.insert("F", answer));
  EXPECT_EQ(cache.find("A"), nullptr);
  EXPECT_TRUE(cache.find("D"));
  EXPECT_EQ(cache.stats().n_evictions, 3);
  // Replacing a key's answer does not count it twice.
  ASSERT_TRUE(cache.insert("F", answer));
  EXPECT_EQ(cache.entries(), 3u);
  EXPECT_EQ(cache.bytes(), 3 * one);
  cache.clear();
  EXPECT_EQ(cache.entries(), 0u);
  EXPECT_EQ(cache.bytes(), 0u);
}

TEST(ResponseCache, CountsKeyAnswerAndOverheadHonestly) {
  auto small = answer_of(1, 1);
  auto big = answer_of(1000, 100);
  // The answer's buffers are in its bytes: 100 000 bytes of text, 1000 ids, 1000 deltas.
  EXPECT_GE(big->bytes(), 100000u + 1000u * sizeof(int32_t) + 1000u * 12);
  EXPECT_GE(small->bytes(), sizeof(CachedAnswer));
  const std::string key(4096, 'k');
  EXPECT_GE(ResponseCache::entry_bytes(key.size(), *small), key.size() + small->bytes() + 64);
  ResponseCache cache(1 << 20);
  ASSERT_TRUE(cache.insert(key, small));
  EXPECT_EQ(cache.bytes(), ResponseCache::entry_bytes(key.size(), *small));
}

TEST(ResponseCache, AnEntryLargerThanTheBoundIsNotStoredAndEvictsNothing) {
  auto small = answer_of(1);
  auto big = answer_of(1000, 100);
  ResponseCache cache(ResponseCache::entry_bytes(1, *big) - 1);
  ASSERT_TRUE(cache.insert("s", small));
  EXPECT_FALSE(cache.insert("b", big));
  EXPECT_EQ(cache.find("b"), nullptr);
  EXPECT_TRUE(cache.find("s"));
  EXPECT_EQ(cache.stats().n_evictions, 0);
}

TEST(ResponseCache, RecordIntoLeavesOutAnAnswerTooLargeForTheBound) {
  auto big = answer_of(1000, 100);
  const std::string key = cache_key(greedy_request(), false);
  for (size_t slack : {size_t{0}, size_t{1}}) {
    // Exactly the entry's size: stored; one byte less: not.
    auto cache = std::make_shared<ResponseCache>(ResponseCache::entry_bytes(key.size(), *big) - slack);
    auto tap = record_into(cache, key);
    for (const Event& e : big->events(Timings::Clock::now())) tap(e);
    EXPECT_EQ(cache->entries(), slack == 0 ? 1u : 0u) << slack;
  }
}

TEST(ResponseCache, RecordIntoStoresOnlyACompleteAnswer) {
  auto cache = std::make_shared<ResponseCache>(1 << 20);
  const Request r = greedy_request();
  {
    auto tap = record_into(cache, cache_key(r, false));
    tap(text_event("Once", {}, 1));
    tap(finish_event(FinishReason::kCancelled, 1));
  }
  EXPECT_EQ(cache->entries(), 0u);
  {
    auto tap = record_into(cache, cache_key(r, false));
    tap(text_event("Once", {}, 1));  // the client left: no finish
  }
  EXPECT_EQ(cache->entries(), 0u);
  auto tap = record_into(cache, cache_key(r, false));
  tap(text_event("Once", {}, 1));
  tap(text_event(" upon", {}, 2));
  tap(finish_event(FinishReason::kEndOfSequence, 2));
  ASSERT_EQ(cache->entries(), 1u);
  CacheLookup hit = cache->lookup(r, false);
  ASSERT_TRUE(hit.hit());
  EXPECT_EQ(hit.answer->text(), "Once upon");
  EXPECT_EQ(hit.answer->usage().n_generated_tokens, 2);
}

TEST(ReplayEngine, SubmitReturnsAFinishedChannelWithTheRecordedEvents) {
  auto answer = answer_of(3);
  ReplayEngine engine(answer);
  Request r = greedy_request();
  r.id = "req-replay";
  std::shared_ptr<RequestChannel> ch = engine.submit(r);
  EXPECT_EQ(ch->request_id(), "req-replay");
  EXPECT_TRUE(ch->finished());
  std::vector<Event> ev = ch->drain();
  ASSERT_EQ(ev.size(), 4u);
  EXPECT_EQ(ev[0].text + ev[1].text + ev[2].text, answer->text());
  EXPECT_EQ(ev[3].finish, FinishReason::kMaxTokens);
  EXPECT_EQ(ev[3].usage.n_generated_tokens, 3);
  // Each hit gets its own channel.
  EXPECT_EQ(engine.submit(r)->drain().size(), 4u);
}

TEST(ResponseCache, ExportsItsMetrics) {
  obs::Registry registry;
  auto answer = answer_of(2);
  ResponseCache cache(ResponseCache::entry_bytes(1, *answer) + 10, &registry);
  cache.find("x");
  cache.insert("x", answer);
  cache.find("x");
  cache.insert("y", answer);  // evicts x
  const std::string text = registry.render();
  auto value = [&](const std::string& name) {
    const size_t at = text.find("\n" + name + " ");
    return at == std::string::npos ? -1.0 : std::atof(text.c_str() + at + name.size() + 2);
  };
  EXPECT_EQ(value("zerolayer_response_cache_hits_total"), 1);
  EXPECT_EQ(value("zerolayer_response_cache_misses_total"), 1);
  EXPECT_EQ(value("zerolayer_response_cache_evictions_total"), 1);
  EXPECT_EQ(value("zerolayer_response_cache_entries"), 1);
  EXPECT_EQ(value("zerolayer_response_cache_bytes"), static_cast<double>(cache.bytes()));
}

// Several I/O threads at once: no lost bytes, the bound holds, hits see
// whole answers. (Run under scripts/tsan.sh for the race check proper.)
TEST(ResponseCache, ThreadSafetySmoke) {
  auto answer = answer_of(4);
  const size_t one = ResponseCache::entry_bytes(3, *answer);
  ResponseCache cache(20 * one);
  std::atomic<int64_t> n_hits{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 4000; ++i) {
        char key[8];
        std::snprintf(key, sizeof key, "k%02d", (i * 7 + t) % 50);  // one size: one entry_bytes
        if (auto a = cache.find(key)) {
          EXPECT_EQ(a->text(), answer->text());
          ++n_hits;
        } else {
          cache.insert(key, answer);
        }
        if (i % 1000 == 999 && t == 0) cache.clear();
        EXPECT_LE(cache.bytes(), cache.max_bytes());
      }
    });
  }
  for (auto& th : threads) th.join();
  const ResponseCacheStats s = cache.stats();
  EXPECT_EQ(s.n_hits, n_hits.load());
  EXPECT_EQ(s.n_hits + s.n_misses, 4 * 4000);
  EXPECT_LE(cache.entries(), 20u);
  // Every entry is counted once: the bytes are the entries' sum.
  EXPECT_EQ(cache.bytes(), cache.entries() * one);
}

// The cost on the request path, printed (no timed assertion): building the
// key, one lookup (a miss, then a hit) and rebuilding a hit's events, for
// prompts of several lengths, in a cache of 1000 other entries.
TEST(ResponseCacheBench, LookupCostPerRequest) {
  using Clock = std::chrono::steady_clock;
  ResponseCache cache(size_t{1} << 30);
  auto answer = answer_of(256, 4);  // 256 deltas: a 256-token answer
  for (int i = 0; i < 1000; ++i) {
    Request other = greedy_request();
    other.prompt_ids.assign(512, i);
    cache.insert(cache_key(other, false), answer);
  }
  for (size_t n_prompt : {128, 2048, 8192}) {
    Request r = greedy_request();
    r.prompt_ids.resize(n_prompt, 1000);
    constexpr int kIters = 2000;
    auto t0 = Clock::now();
    for (int i = 0; i < kIters; ++i) {
      r.prompt_ids[0] = -1 - i;  // a different key each time: all misses
      CacheLookup l = cache.lookup(r, false);
      ASSERT_EQ(l.outcome, CacheLookup::Outcome::kMiss);
    }
    const double miss_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / kIters;
    r.prompt_ids[0] = 1;
    cache.insert(cache_key(r, false), answer);
    t0 = Clock::now();
    for (int i = 0; i < kIters; ++i) ASSERT_TRUE(cache.lookup(r, false).hit());
    const double hit_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / kIters;
    std::printf("[ bench ] prompt %5zu tokens: lookup miss %.2f us, hit %.2f us\n", n_prompt, miss_us, hit_us);
  }
  constexpr int kIters = 2000;
  const auto t0 = Clock::now();
  size_t n = 0;
  for (int i = 0; i < kIters; ++i) n += answer->events(Clock::now()).size();
  const double replay_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / kIters;
  std::printf("[ bench ] replay events of a 256-delta answer: %.2f us (%zu events)\n", replay_us, n / kIters);
}

}  // namespace
}  // namespace zl::limits
