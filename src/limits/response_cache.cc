#include "limits/response_cache.h"

#include <bit>
#include <cstring>
#include <limits>

namespace zl::limits {
namespace {

// cache_key() writes every field of these structs. A field added to them may
// change the engine's events: add it to the key, then update the size here.
static_assert(sizeof(SamplingParams) == 96, "SamplingParams changed: add the new field to cache_key()");
static_assert(sizeof(StopParams) == 184, "StopParams changed: add the new field to cache_key()");
static_assert(sizeof(SpanBudget) == 104, "SpanBudget changed: add the new field to cache_key()");
// (Request::speculative is left out: speculation never changes the tokens, seeded ones included;
// nor GrammarConstraint::cut_masks, a count shared by a request's choices: the constraint is
// keyed by its identity.)
static_assert(sizeof(Request) == 560, "Request changed: add the new field to cache_key() if it can change the answer");

// Bumped when the key's layout changes (keys never outlive the process; the
// byte only keeps layouts apart if two ever coexist).
constexpr char kKeyVersion = 2;

class KeyWriter {
 public:
  explicit KeyWriter(size_t reserve) { out_.reserve(reserve); }
  void u8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) { bytes(&v, sizeof v); }
  void i32(int32_t v) { bytes(&v, sizeof v); }
  void u64(uint64_t v) { bytes(&v, sizeof v); }
  // The bit pattern: -0 and 0 differ, every NaN is its own (both are harmless: a miss).
  void f32(float v) { u32(std::bit_cast<uint32_t>(v)); }
  void str(std::string_view s) {
    u64(s.size());
    out_.append(s);
  }
  void ids(const std::vector<int32_t>& v) {
    u64(v.size());
    bytes(v.data(), v.size() * sizeof(int32_t));
  }
  std::string take() { return std::move(out_); }

 private:
  void bytes(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  std::string out_;
};

bool normal_finish(FinishReason r) {
  switch (r) {
    case FinishReason::kEndOfSequence:
    case FinishReason::kMaxTokens:
    case FinishReason::kStopSequence:
    case FinishReason::kContextWindow:
      return true;
    default:
      return false;
  }
}

}  // namespace

bool is_cacheable(const Request& r) {
  // Logprobs are not recorded: such a request neither hits nor fills the cache.
  return (r.sampling.temperature == 0.0f || r.sampling.seed.has_value()) && !r.stop.prefill_only && r.logprobs < 0 &&
         r.prompt_logprobs < 0;
}

std::string cache_key(const Request& r, bool single_call) {
  const SamplingParams& s = r.sampling;
  const StopParams& st = r.stop;
  KeyWriter w(64 + r.tenant.size() + r.prompt_ids.size() * sizeof(int32_t));
  w.u8(kKeyVersion);
  w.str(r.tenant);
  w.ids(r.prompt_ids);
  w.f32(s.temperature);
  w.i32(s.top_k);
  w.f32(s.top_p);
  w.f32(s.min_p);
  w.f32(s.repetition_penalty);
  w.f32(s.presence_penalty);
  w.f32(s.frequency_penalty);
  w.i32(s.penalty_last_n);
  w.u8(s.seed.has_value());
  w.u64(s.seed.value_or(0));
  w.u64(s.logit_bias.size());
  for (const auto& [id, bias] : s.logit_bias) {  // ordered: one byte string per map
    w.i32(id);
    w.f32(bias);
  }
  w.i32(st.max_tokens);
  w.ids(st.stop_token_ids);
  w.u64(st.stop_strings.size());
  for (const std::string& stop : st.stop_strings) w.str(stop);
  w.u8(st.ignore_eos);
  w.i32(st.min_tokens);
  w.u8(st.prefill_only);
  w.u8(st.span.has_value());  // a reasoning budget shapes the answer too
  if (st.span) {
    w.u8(st.span->open_at_start);
    w.str(st.span->start_text);
    w.str(st.span->end_text);
    w.ids(st.span->end_ids);
    w.i32(st.span->budget);
  }
  w.u8(r.return_token_ids);
  w.i32(r.logprobs);  // is_cacheable() keeps them out; keyed all the same
  w.i32(r.prompt_logprobs);
  w.u8(single_call);
  w.u8(r.constraint.has_value());  // structured output: the grammar's source decides the answer
  if (r.constraint) w.str(r.constraint->identity);
  return w.take();
}

// ---- CachedAnswer ----

std::vector<Event> CachedAnswer::events(Timings::Clock::time_point now) const {
  Timings t{.t_submit = now, .t_scheduled = now, .t_prefilled = now};
  if (!deltas_.empty()) t.t_first_token = t.t_last_token = now;
  std::vector<Event> out;
  out.reserve(deltas_.size() + 1);
  uint32_t text_begin = 0, ids_begin = 0;
  for (const Delta& d : deltas_) {
    Usage u = usage_;
    u.n_generated_tokens = d.n_generated;
    out.push_back(Event{.kind = EventKind::kText,
                        .text = text_.substr(text_begin, d.text_end - text_begin),
                        .token_ids = std::vector<int32_t>(ids_.begin() + ids_begin, ids_.begin() + d.ids_end),
                        .usage = u,
                        .timings = t});
    text_begin = d.text_end;
    ids_begin = d.ids_end;
  }
  out.push_back(Event{.kind = EventKind::kFinish,
                      .finish = finish_,
                      .stop_sequence = stop_sequence_,
                      .usage = usage_,
                      .timings = t});
  return out;
}

size_t CachedAnswer::bytes() const {
  // Each buffer also pays the allocator's header (counted even when a short
  // string lives inline: a slight overcount, never an undercount).
  return sizeof(CachedAnswer) + text_.capacity() + ids_.capacity() * sizeof(int32_t) +
         deltas_.capacity() * sizeof(Delta) + stop_sequence_.capacity() + 4 * ResponseCache::kMallocOverhead;
}

// ---- AnswerRecorder ----

void AnswerRecorder::abandon() {
  abandoned_ = true;
  complete_ = false;
  answer_.reset();  // frees what was recorded
}

void AnswerRecorder::add(const Event& e) {
  if (abandoned_) return;
  if (complete_) return abandon();  // nothing follows a finish
  CachedAnswer& a = *answer_;
  if (e.kind == EventKind::kText) {
    const size_t text_end = a.text_.size() + e.text.size();
    const size_t ids_end = a.ids_.size() + e.token_ids.size();
    constexpr size_t kMax = std::numeric_limits<uint32_t>::max();
    // The bound before growing: never more than max_bytes_ held (and the
    // 32-bit offsets cannot overflow).
    const size_t need = sizeof(CachedAnswer) + text_end + ids_end * sizeof(int32_t) +
                        (a.deltas_.size() + 1) * sizeof(CachedAnswer::Delta);
    if (need > max_bytes_ || text_end > kMax || ids_end > kMax || e.usage.n_generated_tokens < 0 ||
        static_cast<uint64_t>(e.usage.n_generated_tokens) > kMax) {
      return abandon();
    }
    a.text_.append(e.text);
    a.ids_.insert(a.ids_.end(), e.token_ids.begin(), e.token_ids.end());
    a.deltas_.push_back(CachedAnswer::Delta{.text_end = static_cast<uint32_t>(text_end),
                                            .ids_end = static_cast<uint32_t>(ids_end),
                                            .n_generated = static_cast<uint32_t>(e.usage.n_generated_tokens)});
    return;
  }
  if (e.kind != EventKind::kFinish || !normal_finish(e.finish)) return abandon();
  a.finish_ = e.finish;
  a.stop_sequence_ = e.stop_sequence;
  a.usage_ = e.usage;
  a.text_.shrink_to_fit();
  a.ids_.shrink_to_fit();
  a.deltas_.shrink_to_fit();
  if (a.bytes() > max_bytes_) return abandon();
  complete_ = true;
}

std::shared_ptr<const CachedAnswer> AnswerRecorder::take() {
  if (!complete_) return nullptr;
  complete_ = false;
  abandoned_ = true;  // spent
  return std::move(answer_);
}

// ---- ResponseCache ----

ResponseCache::ResponseCache(size_t max_bytes, obs::Registry* registry) : max_bytes_(max_bytes) {
  if (!registry) return;
  using obs::MetricType;
  hits_ = &registry->add("zerolayer_response_cache_hits_total",
                         "Cacheable requests answered from the response cache", MetricType::kCounter)
               .counter();
  misses_ = &registry->add("zerolayer_response_cache_misses_total",
                           "Cacheable requests (temperature 0 or a seed) not found in the response cache",
                           MetricType::kCounter)
                 .counter();
  evictions_ = &registry->add("zerolayer_response_cache_evictions_total",
                              "Answers evicted from the response cache to stay within its memory bound",
                              MetricType::kCounter)
                    .counter();
  bytes_gauge_ = &registry->add("zerolayer_response_cache_bytes",
                                "Memory the response cache holds (keys, answers, per-entry overhead)",
                                MetricType::kGauge)
                      .gauge();
  entries_gauge_ =
      &registry->add("zerolayer_response_cache_entries", "Answers in the response cache", MetricType::kGauge).gauge();
}

size_t ResponseCache::entry_bytes(size_t key_size, const CachedAnswer& answer) {
  return key_size + kMallocOverhead + answer.bytes() + kEntryOverhead;
}

std::shared_ptr<const CachedAnswer> ResponseCache::find(std::string_view key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = index_.find(key);
  if (it == index_.end()) {
    ++stats_.n_misses;
    if (misses_) misses_->add();
    return nullptr;
  }
  lru_.splice(lru_.begin(), lru_, it->second);  // most recently used; iterators stay valid
  ++stats_.n_hits;
  if (hits_) hits_->add();
  return it->second->answer;
}

bool ResponseCache::insert(std::string key, std::shared_ptr<const CachedAnswer> answer) {
  if (!answer) return false;
  key.shrink_to_fit();  // (capacity() == size() once the key is past the inline buffer)
  const size_t n = entry_bytes(key.size(), *answer);
  if (n > max_bytes_) return false;
  std::lock_guard<std::mutex> lock(mu_);
  if (auto old = index_.find(key); old != index_.end()) erase_locked(old->second);
  lru_.push_front(Entry{.key = std::move(key), .answer = std::move(answer), .bytes = n});
  index_.emplace(std::string_view(lru_.front().key), lru_.begin());
  bytes_ += n;
  while (bytes_ > max_bytes_) {
    erase_locked(std::prev(lru_.end()));  // never the new entry: it fits alone
    ++stats_.n_evictions;
    if (evictions_) evictions_->add();
  }
  publish_locked();
  return true;
}

void ResponseCache::erase_locked(Lru::iterator it) {
  index_.erase(std::string_view(it->key));
  bytes_ -= it->bytes;
  lru_.erase(it);
}

void ResponseCache::publish_locked() {
  stats_.n_bytes = static_cast<int64_t>(bytes_);
  stats_.n_entries = static_cast<int64_t>(lru_.size());
  if (bytes_gauge_) bytes_gauge_->set(static_cast<double>(bytes_));
  if (entries_gauge_) entries_gauge_->set(static_cast<double>(lru_.size()));
}

CacheLookup ResponseCache::lookup(const Request& r, bool single_call) {
  CacheLookup out;
  if (!is_cacheable(r)) return out;
  out.key = cache_key(r, single_call);
  out.answer = find(out.key);
  out.outcome = out.answer ? CacheLookup::Outcome::kHit : CacheLookup::Outcome::kMiss;
  return out;
}

void ResponseCache::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  index_.clear();
  lru_.clear();
  bytes_ = 0;
  publish_locked();
}

size_t ResponseCache::bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return bytes_;
}

size_t ResponseCache::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

ResponseCacheStats ResponseCache::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

std::function<void(const Event&)> record_into(std::shared_ptr<ResponseCache> cache, std::string key) {
  // The answer's share of the bound: what is left beside its key.
  const size_t beside = ResponseCache::entry_bytes(key.size(), CachedAnswer()) - CachedAnswer().bytes();
  const size_t max_answer = cache->max_bytes() > beside ? cache->max_bytes() - beside : 0;
  auto recorder = std::make_shared<AnswerRecorder>(max_answer);
  return [cache = std::move(cache), key = std::move(key), recorder](const Event& e) mutable {
    recorder->add(e);
    if (recorder->complete()) cache->insert(std::move(key), recorder->take());
  };
}

// ---- ReplayEngine ----

std::shared_ptr<RequestChannel> ReplayEngine::submit(Request request) {
  auto channel = std::make_shared<RequestChannel>(std::move(request.id));
  for (Event& e : answer_->events(Timings::Clock::now())) channel->push(std::move(e));
  return channel;
}

}  // namespace zl::limits
