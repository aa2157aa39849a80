// The admission path of one request with per-key quotas, without Redis
// (README "Keys and quotas"; target: < 20 µs a request).
//
//   admission_bench [--keys 100] [--requests 200000] [--rounds 5] [--threads 1]
//
// Per request, as ApiService runs it (api/quota_glue.h): the key lookup
// (QuotaGate::identify: one SHA-256 and a constant-time compare with every
// entry of a table of --keys keys), the admission (QuotaGate::admit: the
// entry by name, QuotaManager::admit's concurrency slot and one atomic take
// over 3 buckets of a LocalBucketStore, the metrics), attach(), the head's
// rate-limit headers after the output charge (a second take), and on_done
// (the slot back). The request is picked round-robin over the keys, with
// limits high enough never to refuse. The parts are also timed alone.
// Prints the median µs per request over rounds and its ratio to 20 µs.
// With --threads N, N threads run the whole path at once (shared store and
// registry: the contention of N I/O threads); µs is then wall time per
// request per thread.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "api/quota_glue.h"
#include "limits/bucket_store.h"
#include "limits/keys.h"
#include "limits/quota.h"
#include "obs/metrics.h"

namespace {

using Clock = std::chrono::steady_clock;
constexpr double kTargetUs = 20;

struct Options {
  int n_keys = 100;
  int n_requests = 200000;
  int n_rounds = 5;
  int n_threads = 1;
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const int v = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--keys")) o.n_keys = std::max(1, v);
    else if (!std::strcmp(argv[i], "--requests")) o.n_requests = std::max(1, v);
    else if (!std::strcmp(argv[i], "--rounds")) o.n_rounds = std::max(1, v);
    else if (!std::strcmp(argv[i], "--threads")) o.n_threads = std::max(1, v);
    else std::fprintf(stderr, "admission_bench: unknown flag %s (ignored)\n", argv[i]);
  }
  return o;
}

std::string key_of(int i) { return "sk-bench-" + std::to_string(i) + "-0123456789abcdef0123456789abcdef"; }

std::string keys_toml(int n) {
  std::string t;
  for (int i = 0; i < n; ++i) {
    t += "[[key]]\nname = \"tenant-" + std::to_string(i) + "\"\nkey = \"" + key_of(i) +
         "\"\nrequests_per_minute = 1000000000\ninput_tokens_per_minute = 1000000000\n"
         "output_tokens_per_minute = 1000000000\nmax_concurrent = 1000\n";
  }
  return t;
}

// Median of `rounds` timings of `fn(i)` over n calls, µs per call.
double median_us(int rounds, int n, const std::function<void(int)>& fn) {
  std::vector<double> us;
  for (int r = 0; r < rounds; ++r) {
    const auto t0 = Clock::now();
    for (int i = 0; i < n; ++i) fn(i);
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / n);
  }
  std::sort(us.begin(), us.end());
  return us[us.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  using namespace zl;
  const Options o = parse(argc, argv);
  auto table = limits::KeyTable::parse(keys_toml(o.n_keys), "bench.toml");
  if (!table.ok()) {
    std::fprintf(stderr, "admission_bench: %s\n", table.status().to_string().c_str());
    return 1;
  }
  limits::KeyStore keys("bench.toml", *table);
  limits::LocalBucketStore store;
  limits::QuotaManager quota(store);
  obs::Registry registry;
  api::QuotaGate gate(&keys, &quota, registry);
  std::vector<std::string> presented;
  for (int i = 0; i < o.n_keys; ++i) presented.push_back(key_of(i));
  const auto now = std::chrono::system_clock::now();

  // One request through the whole path; returns the header count (kept live).
  auto request = [&](int i) {
    const std::string& k = presented[static_cast<size_t>(i % o.n_keys)];
    std::optional<std::string> id = gate.identify(k);
    api::QuotaDecision d = gate.admit(*id, i % 2 ? api::ApiKind::kOpenAI : api::ApiKind::kAnthropic, 120);
    api::SessionOptions opts;
    api::QuotaGate::attach(std::move(d.ticket), opts);
    std::vector<http::Header> headers;
    for (auto& add : opts.head_headers) add(Usage{.n_prompt_tokens = 120, .n_generated_tokens = 40}, headers);
    opts.on_done(api::SessionResult{.status = 200, .usage = {.n_prompt_tokens = 120, .n_generated_tokens = 40}});
    if (headers.size() < 9) std::abort();  // every limit is set: 9 (Anthropic) or 12 (OpenAI) headers
  };
  const int n = o.n_requests;
  request(0);  // warm-up: metric series, buckets, the digest implementation

  double whole_us = 0;
  if (o.n_threads == 1) {
    whole_us = median_us(o.n_rounds, n, request);
  } else {
    std::vector<double> rounds;
    for (int r = 0; r < o.n_rounds; ++r) {
      const auto t0 = Clock::now();
      std::vector<std::thread> threads;
      for (int t = 0; t < o.n_threads; ++t) {
        threads.emplace_back([&, t] {
          for (int i = 0; i < n; ++i) request(i * o.n_threads + t);
        });
      }
      for (auto& th : threads) th.join();
      rounds.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / n);
    }
    std::sort(rounds.begin(), rounds.end());
    whole_us = rounds[rounds.size() / 2];
  }

  // The parts alone.
  volatile unsigned char sink = 0;  // keeps the digests live
  const double sha_us = median_us(o.n_rounds, n, [&](int i) {
    sink = limits::sha256(presented[static_cast<size_t>(i % o.n_keys)])[0];
  });
  const double find_us = median_us(o.n_rounds, n, [&](int i) {
    if (!keys.current()->find(presented[static_cast<size_t>(i % o.n_keys)])) std::abort();
  });
  const std::shared_ptr<const limits::KeyTable> t = keys.current();
  const double admit_us = median_us(o.n_rounds, n, [&](int i) {
    limits::Admission a = quota.admit(t->entries()[static_cast<size_t>(i % o.n_keys)], 120);
    if (!a.status.ok()) std::abort();
  });
  limits::Admission sample = quota.admit(t->entries()[0], 120);
  const api::RateLimitState state = api::RateLimitState::of(sample.snapshot, now);
  const double anthropic_us = median_us(o.n_rounds, n, [&](int) {
    std::vector<http::Header> h;
    api::append_ratelimit_headers(api::ApiKind::kAnthropic, state, now, h);
  });
  const double openai_us = median_us(o.n_rounds, n, [&](int) {
    std::vector<http::Header> h;
    api::append_ratelimit_headers(api::ApiKind::kOpenAI, state, now, h);
  });

  std::printf("admission path, %d keys, %d requests x %d rounds, %d thread(s), no Redis (medians)\n", o.n_keys, n,
              o.n_rounds, o.n_threads);
  std::printf("  whole path per request       %8.3f us   (target %.0f us: %.3f of it)\n", whole_us, kTargetUs,
              whole_us / kTargetUs);
  std::printf("  parts alone:\n");
  std::printf("    SHA-256 of the key         %8.3f us\n", sha_us);
  std::printf("    lookup over %3d keys       %8.3f us   (SHA-256 + constant-time scan)\n", o.n_keys, find_us);
  std::printf("    QuotaManager::admit        %8.3f us   (slot + one take over 3 buckets)\n", admit_us);
  std::printf("    Anthropic headers (9)      %8.3f us\n", anthropic_us);
  std::printf("    OpenAI headers (12)        %8.3f us\n", openai_us);
  return 0;
}
