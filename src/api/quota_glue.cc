#include "api/quota_glue.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/log.h"

namespace zl::api {
namespace {

using limits::BucketReport;
using limits::Limit;
using SysClock = std::chrono::system_clock;

// name, then value, for each of limit / remaining / reset.
void add_anthropic(std::string_view what, const BucketReport& b, SysClock::time_point full_at,
                   std::vector<http::Header>& out) {
  if (!b.set()) return;
  const std::string prefix = "anthropic-ratelimit-" + std::string(what);
  out.emplace_back(prefix + "-limit", std::to_string(b.limit_per_minute));
  out.emplace_back(prefix + "-remaining", std::to_string(b.remaining()));
  out.emplace_back(prefix + "-reset", rfc3339_utc_ceil(full_at));
}

void add_openai(std::string_view what, const BucketReport& b, SysClock::time_point full_at, SysClock::time_point now,
                std::vector<http::Header>& out) {
  if (!b.set()) return;
  out.emplace_back("x-ratelimit-limit-" + std::string(what), std::to_string(b.limit_per_minute));
  out.emplace_back("x-ratelimit-remaining-" + std::string(what), std::to_string(b.remaining()));
  out.emplace_back("x-ratelimit-reset-" + std::string(what),
                   go_duration(std::chrono::duration<double>(full_at - now).count()));
}

// A keys-file name never contains ':'; --api-key identities are "key:…".
bool is_keys_file_id(std::string_view key_id) { return !key_id.empty() && key_id.find(':') == std::string_view::npos; }

}  // namespace

std::string rfc3339_utc_ceil(SysClock::time_point t) {
  // By hand from the civil calendar (<chrono>): strftime costs ~1 µs, and
  // an Anthropic head has three of these.
  using namespace std::chrono;
  const sys_seconds s = ceil<seconds>(t);
  const sys_days day = floor<days>(s);
  const year_month_day ymd{day};
  const hh_mm_ss<seconds> hms{s - day};
  const auto put = [](char* at, unsigned v, int n_digits) {
    for (int i = n_digits - 1; i >= 0; --i, v /= 10) at[i] = static_cast<char>('0' + v % 10);
  };
  std::string out = "0000-00-00T00:00:00Z";
  put(&out[0], static_cast<unsigned>(std::clamp(static_cast<int>(ymd.year()), 0, 9999)), 4);
  put(&out[5], static_cast<unsigned>(ymd.month()), 2);
  put(&out[8], static_cast<unsigned>(ymd.day()), 2);
  put(&out[11], static_cast<unsigned>(hms.hours().count()), 2);
  put(&out[14], static_cast<unsigned>(hms.minutes().count()), 2);
  put(&out[17], static_cast<unsigned>(hms.seconds().count()), 2);
  return out;
}

std::string go_duration(double seconds) {
  // Rounded up: a client that waits this long finds the bucket full.
  const double ms_f = std::ceil(std::max(0.0, seconds) * 1000 - 1e-6);
  const int64_t ms = ms_f > 9e15 ? int64_t{9'000'000'000'000'000} : std::max<int64_t>(0, static_cast<int64_t>(ms_f));
  if (ms == 0) return "0s";
  if (ms < 1000) return std::to_string(ms) + "ms";
  const int64_t h = ms / 3'600'000;
  const int64_t m = ms / 60'000 % 60;
  const int64_t s = ms / 1000 % 60;
  const int64_t frac = ms % 1000;
  std::string out;
  if (h > 0) out += std::to_string(h) + "h";
  if (h > 0 || m > 0) out += std::to_string(m) + "m";
  out += std::to_string(s);
  if (frac > 0) {
    char buf[8];
    std::snprintf(buf, sizeof buf, ".%03lld", static_cast<long long>(frac));
    std::string f = buf;
    while (f.back() == '0') f.pop_back();
    out += f;
  }
  out += 's';
  return out;
}

RateLimitState RateLimitState::of(const limits::QuotaSnapshot& s, SysClock::time_point at) {
  RateLimitState state;
  for (int i = 0; i < limits::kNumBucketLimits; ++i) state.update(static_cast<Limit>(i), s, at);
  return state;
}

void RateLimitState::update(Limit limit, const limits::QuotaSnapshot& s, SysClock::time_point at) {
  const size_t i = static_cast<size_t>(limit);
  snapshot.buckets[i] = s.buckets[i];
  const double ms = std::ceil(std::max(0.0, s.buckets[i].seconds_to_full) * 1000);
  full_at[i] = at + std::chrono::milliseconds(static_cast<int64_t>(std::min(ms, 1e12)));
}

void append_ratelimit_headers(ApiKind api, const RateLimitState& state, SysClock::time_point now,
                              std::vector<http::Header>& out) {
  const auto bucket = [&](Limit l) -> const BucketReport& { return state.snapshot[l]; };
  const auto full_at = [&](Limit l) { return state.full_at[static_cast<size_t>(l)]; };
  if (api == ApiKind::kAnthropic) {
    add_anthropic("requests", bucket(Limit::kRequests), full_at(Limit::kRequests), out);
    add_anthropic("input-tokens", bucket(Limit::kInputTokens), full_at(Limit::kInputTokens), out);
    add_anthropic("output-tokens", bucket(Limit::kOutputTokens), full_at(Limit::kOutputTokens), out);
    return;
  }
  const Limit tokens = bucket(Limit::kInputTokens).set() ? Limit::kInputTokens : Limit::kOutputTokens;
  add_openai("requests", bucket(Limit::kRequests), full_at(Limit::kRequests), now, out);
  add_openai("tokens", bucket(tokens), full_at(tokens), now, out);
  add_openai("input-tokens", bucket(Limit::kInputTokens), full_at(Limit::kInputTokens), now, out);
  add_openai("output-tokens", bucket(Limit::kOutputTokens), full_at(Limit::kOutputTokens), now, out);
}

// ---- QuotaTicket ----

QuotaTicket::QuotaTicket(TenantCounters* counters, std::string tenant, ApiKind api, limits::Lease lease)
    : counters_(counters),
      tenant_(std::move(tenant)),
      api_(api),
      lease_(std::move(lease)),
      state_(RateLimitState::of(lease_.snapshot(), SysClock::now())) {}

void QuotaTicket::charge_output(int64_t n_generated_tokens) {
  if (lease_.output_charged()) return;  // charged already, or nothing to charge (cache hit, validate)
  const Status s = lease_.charge_output(n_generated_tokens);
  if (!s.ok()) {
    log::warn("output tokens not charged: the quota store failed",
              {{"tenant", tenant_}, {"n_tokens", n_generated_tokens}, {"error", s.to_string()}});
    return;
  }
  state_.update(Limit::kOutputTokens, lease_.snapshot(), SysClock::now());
  if (n_generated_tokens > 0) counters_->output_tokens->add(n_generated_tokens);
}

void QuotaTicket::append_headers(std::vector<http::Header>& out) const {
  append_ratelimit_headers(api_, state_, SysClock::now(), out);
}

void QuotaTicket::finish(const SessionResult& r) {
  const bool refused_by_engine = r.usage.n_generated_tokens == 0 && r.error_reason &&
                                 error_type(*r.error_reason) == ErrorType::kOverloaded;
  if (!refused_by_engine) {
    charge_output(r.usage.n_generated_tokens);
  } else if (Status s = lease_.refund_admission(); !s.ok()) {
    log::warn("admission not refunded: the quota store failed", {{"tenant", tenant_}, {"error", s.to_string()}});
  }
  lease_.release();
}

// ---- QuotaGate ----

QuotaGate::QuotaGate(limits::KeyStore* keys, limits::QuotaManager* quota, obs::Registry& registry)
    : keys_(keys),
      quota_(quota),
      rejections_(registry.add("zerolayer_quota_rejections_total",
                               "Requests refused by a per-key limit (429), by keys-file name and limit",
                               obs::MetricType::kCounter, {"tenant", "limit"})),
      requests_(registry.add("zerolayer_tenant_requests_total", "Requests admitted, by keys-file name",
                             obs::MetricType::kCounter, {"tenant"})),
      tokens_(registry.add("zerolayer_tenant_tokens_total",
                           "Tokens charged to a key's quota, by keys-file name and direction (input, output)",
                           obs::MetricType::kCounter, {"tenant", "direction"})) {}

std::optional<std::string> QuotaGate::identify(std::string_view presented) const {
  const std::shared_ptr<const limits::KeyTable> table = keys_->current();
  const limits::KeyEntry* e = table->find(presented);
  if (!e) return std::nullopt;
  return e->name;
}

TenantCounters* QuotaGate::counters(const std::string& tenant) {
  std::lock_guard<std::mutex> lock(mu_);
  std::unique_ptr<TenantCounters>& c = tenants_[tenant];
  if (!c) {
    c = std::make_unique<TenantCounters>();
    c->requests = &requests_.counter({tenant});
    c->input_tokens = &tokens_.counter({tenant, "input"});
    c->output_tokens = &tokens_.counter({tenant, "output"});
    for (size_t i = 0; i < c->rejections.size(); ++i) {
      c->rejections[i] = &rejections_.counter({tenant, std::string(limits::limit_name(static_cast<Limit>(i)))});
    }
  }
  return c.get();
}

std::vector<http::Header> QuotaGate::headers_now(std::string_view key_id, ApiKind api) {
  std::vector<http::Header> out;
  if (!is_keys_file_id(key_id)) return out;
  const std::shared_ptr<const limits::KeyTable> table = keys_->current();
  const limits::KeyEntry* entry = table->by_name(key_id);
  if (!entry) return out;
  const limits::Admission a = quota_->admit(*entry, 0, {.dry_run = true});
  if (!a.status.ok() && a.status.reason() != ErrorReason::kRateLimitExceeded) return out;  // no figures
  const auto now = SysClock::now();
  append_ratelimit_headers(api, RateLimitState::of(a.snapshot, now), now, out);
  return out;
}

QuotaDecision QuotaGate::admit(std::string_view key_id, ApiKind api, int64_t n_input_tokens,
                               limits::AdmitOptions options) {
  QuotaDecision d;
  if (!is_keys_file_id(key_id)) return d;
  const std::shared_ptr<const limits::KeyTable> table = keys_->current();
  const limits::KeyEntry* entry = table->by_name(key_id);
  if (!entry) {  // removed by a reload since authorize()
    d.error = ApiError{.reason = ErrorReason::kInvalidApiKey, .message = "invalid API key"};
    return d;
  }
  d.tenant = entry->name;
  TenantCounters* c = counters(d.tenant);
  limits::Admission a = quota_->admit(*entry, n_input_tokens, options);
  if (!a.status.ok()) {
    const auto now = SysClock::now();
    append_ratelimit_headers(api, RateLimitState::of(a.snapshot, now), now, d.headers);
    if (a.status.reason() == ErrorReason::kRateLimitExceeded) {
      d.error = from_status(a.status);
      for (size_t i = 0; i < c->rejections.size(); ++i) {
        if (limits::limit_name(static_cast<Limit>(i)) == d.error->labels.limit) c->rejections[i]->add();
      }
    } else {
      // FailoverBucketStore (--redis-fail closed) logged its outage once; anything else is news.
      if (a.status.reason() != ErrorReason::kQuotaBackendUnavailable) {
        log::warn("request refused: the quota store failed", {{"tenant", d.tenant}, {"error", a.status.to_string()}});
      }
      d.error = ApiError{.reason = ErrorReason::kQuotaBackendUnavailable,
                         .message = "the quota backend is unavailable; retry later",
                         .numbers = {.retry_after_ms = 1000}};
    }
    return d;
  }
  if (!options.dry_run) {
    c->requests->add();
    if (options.charge_tokens && n_input_tokens > 0) c->input_tokens->add(n_input_tokens);
  }
  d.ticket = std::make_shared<QuotaTicket>(c, d.tenant, api, std::move(a.lease));
  return d;
}

void QuotaGate::attach(std::shared_ptr<QuotaTicket> ticket, SessionOptions& options) {
  const bool stream = options.stream;
  // A whole answer's head (or an error head) is built once the usage is
  // final: charge it first, so `remaining` includes it. A stream's head
  // precedes its output: it reports the figures after admission.
  options.head_headers.push_back([ticket, stream](const Usage& usage, std::vector<http::Header>& headers) {
    if (!stream) ticket->charge_output(usage.n_generated_tokens);
    ticket->append_headers(headers);
  });
  options.on_done = [ticket, prev = std::move(options.on_done)](const SessionResult& r) {
    ticket->finish(r);
    if (prev) prev(r);
  };
}

}  // namespace zl::api
