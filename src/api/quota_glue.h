// Keys-file authentication and per-key quotas in the API layer: what
// ApiService does with limits/keys.h and limits/quota.h.
//
//   authorize():  QuotaGate::identify() finds a presented key in the keys
//                 file; its entry's name is the request's key id, hence its
//                 tenant (prefix-cache salt via tenant_of, metrics, logs).
//   generate():   after prepare_request (the exact prompt count) and before
//                 the engine: QuotaGate::admit(). Refused: 429 with the
//                 rate-limit headers (or 503 when the bucket store failed).
//                 Admitted: attach() adds the headers to the answer's head
//                 and holds the lease until the session ends.
//
// Output tokens are charged exactly once, whatever the path: a whole answer
// (or an error head) charges its final usage as its head is built, so the
// head's `remaining` includes it; a stream's head goes out before any
// output and reports the figures after admission, and the stream charges
// at its end (on_done: finished, error, cancelled, or the client gone: 499).
//
// Headers, for each limit that is set:
//   Anthropic routes: anthropic-ratelimit-{requests,input-tokens,output-tokens}-{limit,remaining,reset}
//     (reset: RFC 3339 UTC, the whole second when the bucket is full again)
//   OpenAI routes:    x-ratelimit-{limit,remaining,reset}-requests and -tokens
//     ("tokens": the input-token bucket when that limit is set, else the
//     output-token bucket; reset as a Go duration like OpenAI's: "1s",
//     "6m0s", "20ms"), plus -input-tokens and -output-tokens for each set.
// Thread-safe: admit/identify from any I/O thread; a ticket is used by its
// session's I/O thread only.
#pragma once

#include <array>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "api/errors.h"
#include "api/generation.h"
#include "api/metrics.h"
#include "http/message.h"
#include "limits/keys.h"
#include "limits/quota.h"
#include "obs/metrics.h"

namespace zl::api {

// "2026-12-01T15:08:20Z": `t` rounded up to the whole second.
std::string rfc3339_utc_ceil(std::chrono::system_clock::time_point t);
// A duration as Go's time.Duration prints it, rounded up to the
// millisecond: "0s", "20ms", "1s", "59.5s", "6m0s", "1h0m1.25s".
std::string go_duration(double seconds);
// What the headers say of a key's buckets: the figures, and when each
// bucket is full again (its snapshot's time + seconds_to_full), so that a
// head built long after the snapshot (a whole answer after a long
// generation) still gives the right reset.
struct RateLimitState {
  using SysClock = std::chrono::system_clock;
  limits::QuotaSnapshot snapshot;
  std::array<SysClock::time_point, limits::kNumBucketLimits> full_at{};

  // Every bucket of `s`, as taken at `at`.
  static RateLimitState of(const limits::QuotaSnapshot& s, SysClock::time_point at);
  // Replaces one bucket's entry with `s`'s, as taken at `at`.
  void update(limits::Limit limit, const limits::QuotaSnapshot& s, SysClock::time_point at);
};

// The rate-limit headers of `state` for `api` (see the file comment); `now`
// is when the head is built (OpenAI's resets are durations from it).
void append_ratelimit_headers(ApiKind api, const RateLimitState& state, std::chrono::system_clock::time_point now,
                              std::vector<http::Header>& out);

class QuotaGate;

// One tenant's metric series, looked up once (Family::counter scans its
// series under a lock: with many tenants, too slow for every request).
struct TenantCounters {
  obs::Counter* requests = nullptr;
  obs::Counter* input_tokens = nullptr;
  obs::Counter* output_tokens = nullptr;
  std::array<obs::Counter*, 4> rejections{};  // by limits::Limit
};

// An admitted request's hold on its key: the lease, and what the headers
// and metrics need. Shared by the session's head_headers and on_done.
class QuotaTicket {
 public:
  QuotaTicket(TenantCounters* counters, std::string tenant, ApiKind api, limits::Lease lease);
  // Charges the output tokens (once; later calls do nothing). The headers
  // then report the output bucket after the charge; requests and input
  // tokens stay as admitted (this request's charge, whatever refilled since).
  void charge_output(int64_t n_generated_tokens);
  // The headers of the key's buckets as they are now known.
  void append_headers(std::vector<http::Header>& out) const;
  // The session ended: charge_output of what it generated, or, when the
  // engine refused it before its first token (a 529: queue full, queue
  // timeout, shutting down), the admission's charge given back; then the
  // concurrency slot goes back.
  void finish(const SessionResult& r);
  const std::string& tenant() const { return tenant_; }
  // The generations the request may run at once under its key's
  // max_concurrent (limits::Lease::slots); 0: no such limit.
  int64_t slots() const { return lease_.slots(); }

 private:
  TenantCounters* counters_;  // owned by the gate, which outlives its sessions
  std::string tenant_;
  ApiKind api_;
  limits::Lease lease_;
  RateLimitState state_;
};

struct QuotaDecision {
  // Set: answer with this error (429 rate_limit_exceeded; 503
  // quota_backend_unavailable when the store failed; 401 when the key was
  // removed by a reload since authorize()) and `headers`.
  std::optional<ApiError> error;
  std::vector<http::Header> headers;
  // Admitted with a key from the keys file: pass to attach(). Null for
  // --api-key keys and servers without keys (no quota, no headers).
  std::shared_ptr<QuotaTicket> ticket;
  std::string tenant;  // the keys-file name ("" otherwise), for logs
};

class QuotaGate {
 public:
  // `keys`, `quota` and `registry` must outlive the gate. Registers the
  // metric families zerolayer_quota_rejections_total{tenant,limit},
  // zerolayer_tenant_requests_total{tenant} and
  // zerolayer_tenant_tokens_total{tenant,direction} (tenants: keys-file
  // names only, so the label set is bounded by the configured keys).
  QuotaGate(limits::KeyStore* keys, limits::QuotaManager* quota, obs::Registry& registry);

  // The key id of a keys-file key (its entry's name), or nullopt. One
  // SHA-256 and a constant-time scan of the current table.
  std::optional<std::string> identify(std::string_view presented) const;

  // Admission of a request whose authorize() gave `key_id`, with an exact
  // prompt of `n_input_tokens` (see limits::AdmitOptions: a cache hit
  // charges one request only; a validate request charges nothing).
  QuotaDecision admit(std::string_view key_id, ApiKind api, int64_t n_input_tokens, limits::AdmitOptions options = {});
  // The rate-limit headers of `key_id` as its buckets stand now, nothing
  // charged or counted: for the answers refused before admission (a 400).
  // Empty for keys outside the keys file, or when the store is unreachable.
  std::vector<http::Header> headers_now(std::string_view key_id, ApiKind api);

  // Adds the ticket's headers to the session's head (charging the output of
  // a non-streamed answer first) and charges/releases in on_done (wrapping
  // the on_done already set: call after it is).
  static void attach(std::shared_ptr<QuotaTicket> ticket, SessionOptions& options);

 private:
  // The series of `tenant`, created on first use (never dropped: bounded by
  // the names ever configured). One mutex and one hash lookup.
  TenantCounters* counters(const std::string& tenant);

  limits::KeyStore* keys_;
  limits::QuotaManager* quota_;
  obs::Family& rejections_;
  obs::Family& requests_;
  obs::Family& tokens_;
  std::mutex mu_;
  std::unordered_map<std::string, std::unique_ptr<TenantCounters>> tenants_;
};

}  // namespace zl::api
