// Shadow traffic (--shadow URL): a sampled fraction of generation requests
// is replayed, streamed, to another endpoint (the old path, or the next
// version), and each pair of answers is compared. The client's answer is
// the primary's, always: the shadow never delays or fails it.
//
//   sampled(user)   the decision: a hash of the client's user id
//                   (metadata.user_id / OpenAI `user`) against the fraction,
//                   so one user is always in or always out; no user id: random.
//   mirror()        a pair starts: its shadow request goes into a bounded
//                   queue (capacity pairs not yet compared; full: dropped,
//                   counted) served by the shadow's own thread and
//                   io_context, `concurrency` requests at once, each with
//                   its own deadline (timeout).
//   ShadowPair::primary_done()  the primary's answer as its client got it
//                   (the API layer taps the session's events). The pair is
//                   compared once both sides are in, on the shadow's thread:
//                   first- and last-token times, total tokens, stop reason,
//                   BLEU-4 of the shadow's text against the primary's.
//
// Results: engine_shadow_requests_total{outcome}, the histograms
// engine_shadow_latency_ratio{phase} (shadow / primary) and
// engine_shadow_bleu4, engine_shadow_mismatches_total{field}; one JSON line
// per pair in the shadow log (--shadow-log).
// Outcomes: compared (both answered in full), shadow_error (the shadow
// answered an error), timeout, unreachable (no connection), dropped (queue
// full), primary_error (the primary failed or its client left: the shadow's
// side is logged, nothing compared).
//
// What the primary pays: the sampling hash, a copy of the request body and
// of its answer text (bounded), two posts to the shadow thread. Nothing
// blocks an I/O thread. Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"
#include "obs/metrics.h"
#include "rollout/stream_client.h"

namespace zl::rollout {

struct ShadowConfig {
  std::string url;        // http://host[:port][/base]: the route is appended
  double fraction = 0.1;  // of generation requests, in [0, 1]
  std::string api_key;    // sent to the shadow; empty: none
  std::string log_path;   // JSON lines, appended; empty: no log
  std::chrono::milliseconds timeout{60000};  // one shadow request, connect to last byte
  size_t queue_capacity = 64;  // pairs not yet compared, at most
  int concurrency = 4;         // shadow requests in flight at once
  size_t max_text_bytes = 256 << 10;  // of each side's text kept for BLEU-4
};

// The primary's answer, as its client saw it (times from the request's arrival).
struct PrimaryAnswer {
  int status = 0;              // 499: the client went away
  bool complete = false;       // a full answer (no error, not cut short)
  double first_token_ms = -1;
  double last_token_ms = -1;
  int64_t total_tokens = 0;
  std::string stop_reason;     // in the route's API vocabulary
  std::string text;
};

class Shadow;
struct ShadowCore;

class ShadowPair : public std::enable_shared_from_this<ShadowPair> {
 public:
  // Any thread, once. Hands the answer to the shadow's thread.
  void primary_done(PrimaryAnswer answer);

 private:
  friend struct ShadowCore;
  friend class Shadow;
  std::weak_ptr<ShadowCore> core_;  // owned by the Shadow alone
  std::string request_id_;
  std::string route_;
  std::string body_;
  std::atomic<bool> primary_given_{false};
  // The shadow thread's alone:
  std::optional<PrimaryAnswer> primary_;
  std::optional<StreamOutcome> shadow_;
  std::chrono::system_clock::time_point t_mirrored_ = std::chrono::system_clock::now();
};

class Shadow {
 public:
  // InvalidArgument for a bad URL or fraction; an unwritable log is an error too.
  static Result<std::unique_ptr<Shadow>> create(ShadowConfig config, obs::Registry& registry);
  ~Shadow();  // stops the thread: pairs not compared yet are abandoned

  bool sampled(std::string_view user) const;
  // Starts a pair for a request on `route` ("/v1/messages", "/v1/chat/completions",
  // "/v1/completions") with its raw body. Null when the queue is full (counted
  // as dropped).
  std::shared_ptr<ShadowPair> mirror(std::string request_id, std::string route, std::string body);
  const ShadowConfig& config() const;

 private:
  explicit Shadow(std::shared_ptr<ShadowCore> core) : core_(std::move(core)) {}
  std::shared_ptr<ShadowCore> core_;
};

// Whether a user id lands in the sampled fraction (stable across replicas
// and restarts: core/hash.h).
bool user_in_fraction(std::string_view user, double fraction);

}  // namespace zl::rollout
