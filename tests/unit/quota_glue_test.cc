// The API side of per-key quotas (api/quota_glue.h): header formatting
// (RFC 3339, Go durations), the gate's decisions, and the output charge
// exactly once on every path of a session (whole answer, stream, error,
// client gone).
#include "api/quota_glue.h"

#include <gtest/gtest.h>

#include <ctime>
#include <map>

namespace zl::api {
namespace {

using limits::Limit;
using SysClock = std::chrono::system_clock;

std::map<std::string, std::string> as_map(const std::vector<http::Header>& h) {
  std::map<std::string, std::string> m;
  for (const auto& [k, v] : h) {
    EXPECT_EQ(m.count(k), 0u) << "header twice: " << k;
    m[k] = v;
  }
  return m;
}

TEST(QuotaHeaders, GoDurationsAsOpenAiSendsThem) {
  EXPECT_EQ(go_duration(0), "0s");
  EXPECT_EQ(go_duration(-3), "0s");
  EXPECT_EQ(go_duration(0.02), "20ms");
  EXPECT_EQ(go_duration(0.0201), "21ms");  // rounded up
  EXPECT_EQ(go_duration(0.999), "999ms");
  EXPECT_EQ(go_duration(1), "1s");
  EXPECT_EQ(go_duration(1.5), "1.5s");
  EXPECT_EQ(go_duration(8.64), "8.64s");
  EXPECT_EQ(go_duration(59.5), "59.5s");
  EXPECT_EQ(go_duration(60), "1m0s");
  EXPECT_EQ(go_duration(360), "6m0s");
  EXPECT_EQ(go_duration(90.25), "1m30.25s");
  EXPECT_EQ(go_duration(3601.25), "1h0m1.25s");
  EXPECT_EQ(go_duration(1e300), "2500000000h0m0s");  // clamped, not undefined
}

TEST(QuotaHeaders, Rfc3339RoundsUpToTheSecond) {
  const SysClock::time_point t{std::chrono::seconds(1796148000)};  // 2026-12-01T18:00:00Z
  EXPECT_EQ(rfc3339_utc_ceil(t), "2026-12-01T18:00:00Z");
  EXPECT_EQ(rfc3339_utc_ceil(t + std::chrono::milliseconds(1)), "2026-12-01T18:00:01Z");
  EXPECT_EQ(rfc3339_utc_ceil(t + std::chrono::hours(8) + std::chrono::seconds(59)), "2026-12-02T02:00:59Z");
  // Against the C library, over years, leap days and the end of a year.
  for (int64_t unix_s : {int64_t{0}, int64_t{951782399}, int64_t{951782400}, int64_t{1709208000}, int64_t{1798761599},
                         int64_t{4102444800}, int64_t{1796148000} + 12345}) {
    const std::time_t tt = static_cast<std::time_t>(unix_s);
    std::tm tm{};
    gmtime_r(&tt, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    EXPECT_EQ(rfc3339_utc_ceil(SysClock::time_point{std::chrono::seconds(unix_s)}), buf) << unix_s;
  }
}

limits::QuotaSnapshot snapshot(bool with_input) {
  limits::QuotaSnapshot s;
  s.buckets[0] = {.limit_per_minute = 60, .level = 41.7, .seconds_to_full = 18.3};
  if (with_input) s.buckets[1] = {.limit_per_minute = 200000, .level = -5, .seconds_to_full = 60.0015};
  s.buckets[2] = {.limit_per_minute = 40000, .level = 40000, .seconds_to_full = 0};
  return s;
}

TEST(QuotaHeaders, AnthropicHeadersForEachSetLimit) {
  const SysClock::time_point now{std::chrono::seconds(1796148000) + std::chrono::milliseconds(250)};
  std::vector<http::Header> h;
  append_ratelimit_headers(ApiKind::kAnthropic, RateLimitState::of(snapshot(true), now), now, h);
  EXPECT_EQ(as_map(h), (std::map<std::string, std::string>{
                           {"anthropic-ratelimit-requests-limit", "60"},
                           {"anthropic-ratelimit-requests-remaining", "41"},
                           {"anthropic-ratelimit-requests-reset", "2026-12-01T18:00:19Z"},  // 18.55 s on
                           {"anthropic-ratelimit-input-tokens-limit", "200000"},
                           {"anthropic-ratelimit-input-tokens-remaining", "0"},  // in debt: never negative
                           {"anthropic-ratelimit-input-tokens-reset", "2026-12-01T18:01:01Z"},
                           {"anthropic-ratelimit-output-tokens-limit", "40000"},
                           {"anthropic-ratelimit-output-tokens-remaining", "40000"},
                           {"anthropic-ratelimit-output-tokens-reset", "2026-12-01T18:00:01Z"},
                       }));
  h.clear();
  append_ratelimit_headers(ApiKind::kAnthropic, RateLimitState::of(limits::QuotaSnapshot{}, now), now, h);
  EXPECT_TRUE(h.empty());
}

TEST(QuotaHeaders, OpenAiTokensAreTheInputBucketWhenSetElseTheOutput) {
  std::vector<http::Header> h;
  const SysClock::time_point now = SysClock::now();
  append_ratelimit_headers(ApiKind::kOpenAI, RateLimitState::of(snapshot(true), now), now, h);
  EXPECT_EQ(as_map(h), (std::map<std::string, std::string>{
                           {"x-ratelimit-limit-requests", "60"},
                           {"x-ratelimit-remaining-requests", "41"},
                           {"x-ratelimit-reset-requests", "18.3s"},
                           {"x-ratelimit-limit-tokens", "200000"},
                           {"x-ratelimit-remaining-tokens", "0"},
                           {"x-ratelimit-reset-tokens", "1m0.002s"},
                           {"x-ratelimit-limit-input-tokens", "200000"},
                           {"x-ratelimit-remaining-input-tokens", "0"},
                           {"x-ratelimit-reset-input-tokens", "1m0.002s"},
                           {"x-ratelimit-limit-output-tokens", "40000"},
                           {"x-ratelimit-remaining-output-tokens", "40000"},
                           {"x-ratelimit-reset-output-tokens", "0s"},
                       }));
  h.clear();
  append_ratelimit_headers(ApiKind::kOpenAI, RateLimitState::of(snapshot(false), now), now, h);
  const auto m = as_map(h);
  EXPECT_EQ(m.at("x-ratelimit-limit-tokens"), "40000");
  EXPECT_EQ(m.count("x-ratelimit-limit-input-tokens"), 0u);
}

TEST(QuotaHeaders, ResetsCountFromTheSnapshotNotFromTheHead) {
  const SysClock::time_point taken{std::chrono::seconds(1796148000)};
  RateLimitState state = RateLimitState::of(snapshot(true), taken);
  // The head is built 10.5 s after the snapshot (a long whole answer).
  const SysClock::time_point head = taken + std::chrono::milliseconds(10500);
  std::vector<http::Header> h;
  append_ratelimit_headers(ApiKind::kOpenAI, state, head, h);
  EXPECT_EQ(as_map(h).at("x-ratelimit-reset-requests"), "7.8s");  // 18.3 - 10.5
  EXPECT_EQ(as_map(h).at("x-ratelimit-reset-output-tokens"), "0s");  // full before the head: never negative
  h.clear();
  append_ratelimit_headers(ApiKind::kAnthropic, state, head, h);
  EXPECT_EQ(as_map(h).at("anthropic-ratelimit-requests-reset"), "2026-12-01T18:00:19Z");
  // An update replaces one bucket, as of its own time.
  limits::QuotaSnapshot charged;
  charged.buckets[2] = {.limit_per_minute = 40000, .level = 39000, .seconds_to_full = 1.5};
  state.update(Limit::kOutputTokens, charged, head);
  h.clear();
  append_ratelimit_headers(ApiKind::kOpenAI, state, head, h);
  EXPECT_EQ(as_map(h).at("x-ratelimit-remaining-output-tokens"), "39000");
  EXPECT_EQ(as_map(h).at("x-ratelimit-reset-output-tokens"), "1.5s");
  EXPECT_EQ(as_map(h).at("x-ratelimit-remaining-requests"), "41");
}

// A gate over a keys file with one limited and one unlimited key, on a
// store with a clock that stands still.
struct Fixture {
  double t = 100;
  limits::LocalBucketStore store{[this] { return t; }};
  limits::QuotaManager quota{store};
  std::unique_ptr<limits::KeyStore> keys;
  obs::Registry registry;
  std::unique_ptr<QuotaGate> gate;

  Fixture() {
    auto table = limits::KeyTable::parse(
        "[[key]]\nname = \"a\"\nkey = \"ka\"\nrequests_per_minute = 10\noutput_tokens_per_minute = 100\n"
        "max_concurrent = 1\n[[key]]\nname = \"free\"\nkey = \"kf\"\n",
        "keys.toml");
    EXPECT_TRUE(table.ok());
    keys = std::make_unique<limits::KeyStore>("keys.toml", *table);
    gate = std::make_unique<QuotaGate>(keys.get(), &quota, registry);
  }
  int64_t output_left() {
    return quota.admit(*keys->current()->by_name("a"), 0, {.dry_run = true}).snapshot[Limit::kOutputTokens].remaining();
  }
};

TEST(QuotaGate, IdentifiesKeysAndAdmitsOnlyKeysFileIds) {
  Fixture f;
  EXPECT_EQ(f.gate->identify("ka"), "a");
  EXPECT_EQ(f.gate->identify("kb"), std::nullopt);
  // --api-key identities and keyless servers: no quota, no headers.
  for (std::string_view id : {"", "key:0123456789abcdef"}) {
    QuotaDecision d = f.gate->admit(id, ApiKind::kAnthropic, 10);
    EXPECT_FALSE(d.error);
    EXPECT_FALSE(d.ticket);
  }
  QuotaDecision free = f.gate->admit("free", ApiKind::kAnthropic, 10);
  ASSERT_TRUE(free.ticket);
  EXPECT_EQ(free.tenant, "free");
  std::vector<http::Header> h;
  free.ticket->append_headers(h);
  EXPECT_TRUE(h.empty());  // no limit set: no headers
  // A name that a reload removed since authorize(): 401.
  QuotaDecision gone = f.gate->admit("b", ApiKind::kAnthropic, 10);
  ASSERT_TRUE(gone.error);
  EXPECT_EQ(gone.error->reason, ErrorReason::kInvalidApiKey);
}

TEST(QuotaGate, ARefusalIsA429WithHeadersAndIsCounted) {
  Fixture f;
  QuotaDecision held = f.gate->admit("a", ApiKind::kOpenAI, 10);
  ASSERT_TRUE(held.ticket);
  QuotaDecision d = f.gate->admit("a", ApiKind::kOpenAI, 10);
  ASSERT_TRUE(d.error);
  EXPECT_EQ(d.error->reason, ErrorReason::kRateLimitExceeded);
  EXPECT_EQ(http_status(*d.error), 429);
  EXPECT_EQ(d.error->labels.limit, "concurrent");
  EXPECT_EQ(d.error->numbers.retry_after_ms, 1000);
  EXPECT_EQ(as_map(d.headers).at("x-ratelimit-remaining-requests"), "9");
  const std::string text = f.registry.render();
  EXPECT_NE(text.find("zerolayer_quota_rejections_total{tenant=\"a\",limit=\"concurrent\"} 1"), std::string::npos);
  EXPECT_NE(text.find("zerolayer_tenant_requests_total{tenant=\"a\"} 1"), std::string::npos);
  EXPECT_NE(text.find("zerolayer_tenant_tokens_total{tenant=\"a\",direction=\"input\"} 10"), std::string::npos);
}

// Runs what a session does with its options: the head (with the usage then
// known), then on_done (with the final usage).
std::map<std::string, std::string> run_session(SessionOptions& o, int64_t n_at_head, int64_t n_final, bool head) {
  std::vector<http::Header> h;
  if (head) {
    for (auto& add : o.head_headers) add(Usage{.n_generated_tokens = n_at_head}, h);
  }
  if (o.on_done) o.on_done(SessionResult{.status = head ? 200 : 499, .usage = {.n_generated_tokens = n_final}});
  return as_map(h);
}

TEST(QuotaGate, AWholeAnswerChargesAtItsHeadAndReportsIt) {
  Fixture f;
  int n_done = 0;
  SessionOptions o;
  o.on_done = [&](const SessionResult&) { ++n_done; };
  QuotaDecision d = f.gate->admit("a", ApiKind::kAnthropic, 10);
  QuotaGate::attach(d.ticket, o);
  auto h = run_session(o, 30, 30, /*head=*/true);
  EXPECT_EQ(h.at("anthropic-ratelimit-output-tokens-remaining"), "70");
  EXPECT_EQ(h.at("anthropic-ratelimit-requests-remaining"), "9");
  EXPECT_EQ(n_done, 1);  // the session's own on_done still runs
  EXPECT_EQ(f.output_left(), 70);  // charged once, not again in on_done
  EXPECT_EQ(f.quota.in_flight("a"), 0);
}

TEST(QuotaGate, AStreamReportsAdmissionAndChargesAtTheEnd) {
  Fixture f;
  SessionOptions o;
  o.stream = true;
  QuotaDecision d = f.gate->admit("a", ApiKind::kAnthropic, 10);
  QuotaGate::attach(d.ticket, o);
  auto h = run_session(o, 0, 42, /*head=*/true);
  EXPECT_EQ(h.at("anthropic-ratelimit-output-tokens-remaining"), "100");
  EXPECT_EQ(f.output_left(), 58);
  EXPECT_EQ(f.quota.in_flight("a"), 0);
  EXPECT_NE(f.registry.render().find("zerolayer_tenant_tokens_total{tenant=\"a\",direction=\"output\"} 42"),
            std::string::npos);
}

TEST(QuotaGate, AClientThatLeftIsChargedWhatWasGenerated) {
  Fixture f;
  SessionOptions o;
  QuotaDecision d = f.gate->admit("a", ApiKind::kOpenAI, 10);
  QuotaGate::attach(d.ticket, o);
  run_session(o, 0, 17, /*head=*/false);
  EXPECT_EQ(f.output_left(), 83);
  EXPECT_EQ(f.quota.in_flight("a"), 0);
}

TEST(QuotaGate, ARequestTheEngineRefusedCostsNothing) {
  Fixture f;
  for (bool stream : {false, true}) {
    SessionOptions o;
    o.stream = stream;
    QuotaDecision d = f.gate->admit("a", ApiKind::kAnthropic, 10);
    QuotaGate::attach(d.ticket, o);
    std::vector<http::Header> h;
    for (auto& add : o.head_headers) add(Usage{}, h);  // the 529's head
    o.on_done(SessionResult{.status = 529, .error_reason = ErrorReason::kOverloaded});
    EXPECT_EQ(f.quota.in_flight("a"), 0);
  }
  QuotaDecision after = f.gate->admit("a", ApiKind::kAnthropic, 10);
  EXPECT_EQ(after.ticket ? 1 : 0, 1);
  std::vector<http::Header> h;
  after.ticket->append_headers(h);
  EXPECT_EQ(as_map(h).at("anthropic-ratelimit-requests-remaining"), "9");  // only this one counted
  // Another failure (500) with no token is charged as it is.
  after.ticket->finish(SessionResult{.status = 500, .error_reason = ErrorReason::kInternalServerError});
  EXPECT_EQ(f.gate->admit("a", ApiKind::kAnthropic, 10, {.dry_run = true}).ticket ? 1 : 0, 1);
  h.clear();
  f.gate->admit("a", ApiKind::kAnthropic, 10, {.dry_run = true}).ticket->append_headers(h);
  EXPECT_EQ(as_map(h).at("anthropic-ratelimit-requests-remaining"), "9");
}

TEST(QuotaGate, AValidateRequestChargesNothing) {
  Fixture f;
  SessionOptions o;
  QuotaDecision d = f.gate->admit("a", ApiKind::kAnthropic, 10, {.dry_run = true});
  ASSERT_TRUE(d.ticket);
  QuotaGate::attach(d.ticket, o);
  auto h = run_session(o, 5, 5, /*head=*/true);
  EXPECT_EQ(h.at("anthropic-ratelimit-requests-remaining"), "10");
  EXPECT_EQ(f.output_left(), 100);
  EXPECT_NE(f.registry.render().find("zerolayer_tenant_requests_total{tenant=\"a\"} 0"), std::string::npos);
}

TEST(QuotaGate, AStoreErrorIsA503) {
  struct Down : limits::BucketStore {
    Result<limits::TakeResult> take(std::span<const limits::BucketOp>) override { return io_error("redis: timeout"); }
  } down;
  limits::QuotaManager quota(down);
  auto table = limits::KeyTable::parse("[[key]]\nname = \"a\"\nkey = \"ka\"\nrequests_per_minute = 1\n", "k");
  ASSERT_TRUE(table.ok());
  limits::KeyStore keys("k", *table);
  obs::Registry registry;
  QuotaGate gate(&keys, &quota, registry);
  QuotaDecision d = gate.admit("a", ApiKind::kAnthropic, 1);
  ASSERT_TRUE(d.error);
  EXPECT_EQ(d.error->reason, ErrorReason::kQuotaBackendUnavailable);
  EXPECT_EQ(http_status(*d.error), 503);
  EXPECT_TRUE(d.headers.empty());
}

}  // namespace
}  // namespace zl::api
