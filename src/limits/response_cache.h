// The response cache: whole answers to deterministic requests (greedy, or
// with a fixed seed), matched exactly, between the API layer and the engine
// (issue 15; README "Response cache").
//
// What is stored: the engine's API-neutral events of one answer (text deltas
// with their token ids, then the finish with its stop sequence and usage),
// compacted (CachedAnswer), for an answer that completed normally (end of
// sequence, max_tokens, a stop sequence, the context window) — never an
// error, a cancellation, a safety stop or a validate-mode answer. Nothing
// is formatted: a hit is replayed through the same GenerationSession as an
// engine answer (ReplayEngine), so one recording serves both APIs, streamed
// or not, with the requester's tool-call parsing and stream pacing.
//
// The key (cache_key()) is every input that can change those events: the
// tenant, the exact prompt ids, every sampling and stop parameter,
// return_token_ids, and whether the session ends the answer at its first
// tool call (ToolPlan::single_call: the recording then stops there). The
// whole key is stored and compared byte for byte; its hash only indexes.
//
// Memory: bytes() counts each entry's key, its answer (CachedAnswer::bytes)
// and a fixed overhead for the LRU list node, the index node and bucket and
// the shared ownership (kEntryOverhead). Least recently used entries are
// evicted to stay within max_bytes; an entry larger than max_bytes alone is
// not stored (and evicts nothing).
//
// Thread-safe (I/O threads): one mutex around the list and index. find() and
// insert() are O(1) on average plus the key's length (one hash, one compare);
// answers are immutable and shared, so a hit rebuilds its events outside
// the lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "engine/request.h"
#include "obs/metrics.h"

namespace zl::limits {

// A request whose answer can be cached: greedy (temperature 0) or seeded,
// generating (not validate mode, StopParams::prefill_only), and without
// logprobs (Request::logprobs: the recording does not keep them).
bool is_cacheable(const Request& r);

// The exact key of a request's answer (binary, length-prefixed fields).
// `single_call`: the session ends the answer at its first complete tool call
// (ToolPlan::single_call with tools active).
std::string cache_key(const Request& r, bool single_call);

// One recorded answer. Immutable once built (AnswerRecorder), shared by the
// cache and the hits being replayed.
class CachedAnswer {
 public:
  // The events to replay, in order: one kText per recorded delta (its text,
  // token ids and the cumulative usage then), then the kFinish (reason, stop
  // sequence, final usage). Every timing is `now`: a hit spends no engine
  // time (no queue, no prefill, no decode).
  std::vector<Event> events(Timings::Clock::time_point now) const;
  const Usage& usage() const { return usage_; }
  FinishReason finish() const { return finish_; }
  const std::string& text() const { return text_; }  // the deltas, concatenated
  size_t n_deltas() const { return deltas_.size(); }
  // Memory held (this object and its buffers' capacities).
  size_t bytes() const;

 private:
  friend class AnswerRecorder;
  struct Delta {
    uint32_t text_end = 0;     // end of this delta's text in text_
    uint32_t ids_end = 0;      // end of its token ids in ids_
    uint32_t n_generated = 0;  // Usage::n_generated_tokens at this event
  };
  std::string text_;
  std::vector<int32_t> ids_;
  std::vector<Delta> deltas_;
  std::string stop_sequence_;
  Usage usage_;
  FinishReason finish_ = FinishReason::kNone;
};

// Builds a CachedAnswer from the events a session consumes, in order
// (SessionOptions::on_event). Single-threaded (the session's I/O thread).
// Memory: at most max_bytes of answer content (then it gives up and frees
// it); the buffers' growth may hold up to twice that while recording.
class AnswerRecorder {
 public:
  explicit AnswerRecorder(size_t max_bytes) : max_bytes_(max_bytes) {}

  // kText: appended. kFinish with a normal reason (end of sequence,
  // max_tokens, stop sequence, context window): the answer is complete.
  // Anything else (an error, a cancellation, a safety stop, an event after
  // the finish, an answer past max_bytes): abandoned for good.
  void add(const Event& e);
  bool complete() const { return complete_; }
  // The complete answer (nullptr when not complete); the recorder is spent.
  std::shared_ptr<const CachedAnswer> take();

 private:
  void abandon();
  size_t max_bytes_;
  std::shared_ptr<CachedAnswer> answer_ = std::make_shared<CachedAnswer>();
  bool complete_ = false;
  bool abandoned_ = false;
};

struct ResponseCacheStats {
  int64_t n_hits = 0;
  int64_t n_misses = 0;
  int64_t n_evictions = 0;
  int64_t n_entries = 0;
  int64_t n_bytes = 0;
};

// What generate() does with one request (ResponseCache::lookup).
struct CacheLookup {
  enum class Outcome { kNotCacheable, kHit, kMiss };
  Outcome outcome = Outcome::kNotCacheable;
  std::string key;                             // kMiss: where its answer goes
  std::shared_ptr<const CachedAnswer> answer;  // kHit: what to replay
  bool hit() const { return outcome == Outcome::kHit; }
  bool cacheable() const { return outcome != Outcome::kNotCacheable; }
};

class ResponseCache {
  struct Entry {
    std::string key;
    std::shared_ptr<const CachedAnswer> answer;
    size_t bytes = 0;
  };
  using Lru = std::list<Entry>;  // front: most recently used

 public:
  // What an entry costs besides its key's and its answer's own buffers
  // (CachedAnswer::bytes counts the answer object): the LRU list node (two
  // links and the entry), the index node (next link, key view, list
  // position, cached hash) and its bucket pointer, the answer's shared_ptr
  // control block (vtable pointer, two counts), and the allocator's header
  // on each of those three allocations.
  static constexpr size_t kMallocOverhead = 16;
  static constexpr size_t kEntryOverhead =
      (2 * sizeof(void*) + sizeof(Entry)) +
      (sizeof(void*) + sizeof(std::string_view) + sizeof(Lru::iterator) + sizeof(size_t)) + sizeof(void*) +
      (sizeof(void*) + 2 * sizeof(int32_t)) + 3 * kMallocOverhead;

  // `registry`: where the zerolayer_response_cache_* families go (none: not exported).
  explicit ResponseCache(size_t max_bytes, obs::Registry* registry = nullptr);
  ResponseCache(const ResponseCache&) = delete;
  ResponseCache& operator=(const ResponseCache&) = delete;

  // The answer stored under `key` (made most recently used), or nullptr.
  // Counts a hit or a miss.
  std::shared_ptr<const CachedAnswer> find(std::string_view key);
  // Stores `answer` under `key` (replacing what was there), then evicts the
  // least recently used entries until bytes() <= max_bytes(). False, and
  // nothing changed, when the entry alone exceeds max_bytes().
  bool insert(std::string key, std::shared_ptr<const CachedAnswer> answer);
  // The serving path: not cacheable (nothing counted), a hit or a miss.
  CacheLookup lookup(const Request& r, bool single_call);
  void clear();

  size_t max_bytes() const { return max_bytes_; }
  size_t bytes() const;
  size_t entries() const;
  ResponseCacheStats stats() const;
  // The bytes an entry counts against the bound.
  static size_t entry_bytes(size_t key_size, const CachedAnswer& answer);

 private:
  void erase_locked(Lru::iterator it);
  void publish_locked();  // the gauges

  const size_t max_bytes_;
  mutable std::mutex mu_;
  Lru lru_;
  // Views into the entries' own keys (list nodes never move).
  std::unordered_map<std::string_view, Lru::iterator> index_;
  size_t bytes_ = 0;
  ResponseCacheStats stats_;
  obs::Counter* hits_ = nullptr;
  obs::Counter* misses_ = nullptr;
  obs::Counter* evictions_ = nullptr;
  obs::Gauge* bytes_gauge_ = nullptr;
  obs::Gauge* entries_gauge_ = nullptr;
};

// The session tap of a miss (SessionOptions::on_event): records the events
// and stores the answer in `cache` under `key` when it completes normally.
// Runs on the session's I/O thread; holds at most what the bound leaves
// beside the key (cache->max_bytes() less the key and the entry overhead)
// while recording, and gives up beyond it.
std::function<void(const Event&)> record_into(std::shared_ptr<ResponseCache> cache, std::string key);

// An EngineApi that answers from a recorded answer: submit() returns a
// channel with every event already pushed (fresh timings, zero engine time)
// and never reaches an engine. Lives only for the call to submit()
// (GenerationSession::start keeps the channel, not the engine).
class ReplayEngine : public EngineApi {
 public:
  explicit ReplayEngine(std::shared_ptr<const CachedAnswer> answer) : answer_(std::move(answer)) {}
  std::shared_ptr<RequestChannel> submit(Request request) override;
  EngineStats stats() const override { return {}; }

 private:
  std::shared_ptr<const CachedAnswer> answer_;
};

}  // namespace zl::limits
