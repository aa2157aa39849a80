// /metrics after real traffic (issue 16): the served exposition goes through
// the test's Prometheus text parser (support/prom_text.h) and `promtool check
// metrics` when installed; every engine_* family of the issue must be there
// with its type, and the counters must move exactly as the traffic implies.
// Servers: `zerolayer_test_server --fake-engine` (API-side families,
// --metrics-compat vllm, --metrics-auth) and the real engine on stories260K
// (engine-side histograms; skipped without ../shared).
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "api/errors.h"  // error_reason_name
#include "core/error_reason.h"
#include "obs/metrics.h"  // kEnabled
#include "support/http_client.h"
#include "support/json_object.h"
#include "support/process.h"
#include "support/prom_text.h"
#include "support/real_model.h"
#include "support/wait.h"

namespace zl::test {
namespace {

namespace json = boost::json;

ServerProcess* g_open = nullptr;    // fake engine, no keys, vLLM aliases
ServerProcess* g_auth = nullptr;    // fake engine, a key, --metrics-auth
ServerProcess* g_keyed = nullptr;   // fake engine, a key, /metrics open (the default)

class MetricsEnv : public ::testing::Environment {
 public:
  void SetUp() override {
    g_open = new ServerProcess({"--fake-engine", "--fake-step-us", "300", "--model-alias", "m1", "--metrics-compat",
                                "vllm", "--request-log", "false"},
                               ZL_TEST_SERVER);
    g_auth = new ServerProcess({"--fake-engine", "--api-key", "k1", "--metrics-auth", "true", "--request-log", "false"},
                               ZL_TEST_SERVER);
    g_keyed = new ServerProcess({"--fake-engine", "--api-key", "k1", "--request-log", "false"}, ZL_TEST_SERVER);
  }
  void TearDown() override {
    delete g_open;
    delete g_auth;
    delete g_keyed;
  }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new MetricsEnv);

// The families issue 16 names, with their types.
const std::map<std::string, std::string> kRequiredFamilies = {
    {"engine_time_to_first_token_seconds", "histogram"}, {"engine_inter_token_latency_seconds", "histogram"},
    {"engine_request_duration_seconds", "histogram"},    {"engine_queue_time_seconds", "histogram"},
    {"engine_prefill_duration_seconds", "histogram"},    {"engine_decode_latency_seconds", "histogram"},
    {"engine_batch_size", "histogram"},                  {"engine_requests_running", "gauge"},
    {"engine_requests_waiting", "gauge"},                {"engine_requests_paused", "gauge"},
    {"engine_kv_cache_usage_percent", "gauge"},          {"engine_kv_blocks_used", "gauge"},
    {"engine_kv_blocks_cached", "gauge"},                {"engine_kv_blocks_capacity", "gauge"},
    {"engine_efficiency_ratio", "gauge"},                {"engine_prompt_tokens_total", "counter"},
    {"engine_generation_tokens_total", "counter"},       {"engine_cached_tokens_total", "counter"},
    {"engine_preemptions_total", "counter"},             {"engine_requests_total", "counter"},
    {"engine_requests_rejected_total", "counter"},       {"engine_tool_calls_total", "counter"},
    {"engine_tool_call_fallbacks_total", "counter"},     {"zerolayer_http_requests_total", "counter"},
    {"zerolayer_http_connections_open", "gauge"},        {"zerolayer_http_connections_total", "counter"},
};

// Scrapes, parses and checks the text; fails the test on any violation.
PromText scrape(int port, const std::vector<std::string>& headers = {}) {
  HttpReply r = fetch(port, "GET", "/metrics", "", headers);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("content-type"), "text/plain; version=0.0.4");
  PromText t = parse_prom_text(r.body);
  for (const std::string& e : t.errors) ADD_FAILURE() << "exposition: " << e;
  return t;
}

// promtool's only allowed complaint: its lint (exit 3) that vLLM's alias
// names contain ':' (they must, for the routers that read them).
void check_promtool(int port) {
  const PromtoolResult p = promtool_check(fetch(port, "GET", "/metrics").body);
  if (!p.ran) {
    std::printf("SKIPPED promtool check metrics (promtool is not installed; scripts/setup.sh installs it)\n");
    return;
  }
  if (p.exit_code == 0) return;
  EXPECT_EQ(p.exit_code, 3) << p.output;
  size_t b = 0;
  while (b < p.output.size()) {
    size_t e = p.output.find('\n', b);
    if (e == std::string::npos) e = p.output.size();
    const std::string line = p.output.substr(b, e - b);
    b = e + 1;
    if (line.empty()) continue;
    EXPECT_TRUE(line.starts_with("vllm:") && line.ends_with("metric names should not contain ':'")) << line;
  }
}

std::string msg_body(bool stream, int max_tokens = 20) {
  return R"({"model":"m","max_tokens":)" + std::to_string(max_tokens) + R"(,"stream":)" + (stream ? "true" : "false") +
         R"(,"messages":[{"role":"user","content":"Once upon a time"}]})";
}

std::string chat_body(bool stream, int max_tokens = 20) {
  return R"({"model":"m","max_tokens":)" + std::to_string(max_tokens) + R"(,"stream":)" + (stream ? "true" : "false") +
         R"(,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Once upon a time"}]})";
}

double api_requests(const PromText& t, const std::string& api, int status) {
  const double v = t.value("engine_requests_total", "engine_requests_total", {{"api", api}, {"status", std::to_string(status)}});
  return std::isnan(v) ? 0 : v;
}

TEST(MetricsTest, EveryFamilyAfterFakeTraffic) {
  if (!obs::kEnabled) GTEST_SKIP() << "built with ZL_OBS=OFF: nothing is recorded";
  ASSERT_TRUE(g_open->ok()) << g_open->startup_line();
  const int port = g_open->port();
  const PromText before = scrape(port);
  for (const auto& [name, type] : kRequiredFamilies) {
    auto it = before.families.find(name);
    ASSERT_NE(it, before.families.end()) << name;
    EXPECT_EQ(it->second.type, type) << name;
    EXPECT_FALSE(it->second.help.empty()) << name;
  }
  // Every typed reason is a series from the start, for both APIs.
  for (int r = 1; r < kNumErrorReasons; ++r) {
    for (const char* api : {"anthropic", "openai"}) {
      const std::string reason(api::error_reason_name(static_cast<ErrorReason>(r)));
      EXPECT_FALSE(std::isnan(before.value("engine_requests_rejected_total", "engine_requests_rejected_total",
                                           {{"api", api}, {"reason", reason}})))
          << api << " " << reason;
    }
  }
  // Traffic: 3 Anthropic answers (one streamed), 2 OpenAI chat streams, one
  // bad request on each API.
  for (bool stream : {false, false, true}) {
    ASSERT_EQ(fetch(port, "POST", "/v1/messages", msg_body(stream)).status, 200);
  }
  for (int i = 0; i < 2; ++i) ASSERT_EQ(fetch(port, "POST", "/v1/chat/completions", chat_body(true)).status, 200);
  ASSERT_EQ(fetch(port, "POST", "/v1/messages", "{not json").status, 400);
  ASSERT_EQ(fetch(port, "POST", "/v1/chat/completions", "[]").status, 400);

  PromText after;
  // The answer's metrics are recorded as it completes: poll for them.
  ASSERT_TRUE(wait_until([&] {
    after = scrape(port);
    return api_requests(after, "openai", 200) >= api_requests(before, "openai", 200) + 2;
  }));
  EXPECT_EQ(api_requests(after, "anthropic", 200) - api_requests(before, "anthropic", 200), 3);
  EXPECT_EQ(api_requests(after, "openai", 200) - api_requests(before, "openai", 200), 2);
  EXPECT_EQ(api_requests(after, "anthropic", 400) - api_requests(before, "anthropic", 400), 1);
  EXPECT_EQ(api_requests(after, "openai", 400) - api_requests(before, "openai", 400), 1);
  auto delta = [&](const std::string& family, const std::string& name,
                   const std::map<std::string, std::string>& labels = {}) {
    return after.value(family, name, labels) - before.value(family, name, labels);
  };
  EXPECT_EQ(delta("engine_requests_rejected_total", "engine_requests_rejected_total",
                  {{"api", "anthropic"}, {"reason", "invalid_json"}}),
            1);
  EXPECT_EQ(delta("engine_time_to_first_token_seconds", "engine_time_to_first_token_seconds_count"), 5);
  EXPECT_EQ(delta("engine_request_duration_seconds", "engine_request_duration_seconds_count"), 5);
  EXPECT_GT(delta("engine_request_duration_seconds", "engine_request_duration_seconds_sum"), 0);
  EXPECT_GT(delta("engine_generation_tokens_total", "engine_generation_tokens_total"), 0);
  EXPECT_GT(delta("engine_prompt_tokens_total", "engine_prompt_tokens_total"), 0);
  EXPECT_GE(delta("zerolayer_http_requests_total", "zerolayer_http_requests_total",
                  {{"route", "/metrics"}, {"status", "200"}}),
            1);
  EXPECT_GE(delta("zerolayer_http_connections_total", "zerolayer_http_connections_total"), 7);
  // 5 answers with a first token: the efficiency ratio has samples.
  const double eff = after.value("engine_efficiency_ratio");
  EXPECT_GT(eff, 0);
  EXPECT_LE(eff, 1.0 + 1e-9);  // the engine's first token cannot come after the server's first byte
  // vLLM aliases.
  for (const char* name : {"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:gpu_cache_usage_perc"}) {
    ASSERT_TRUE(after.families.count(name)) << name;
    EXPECT_EQ(after.families.at(name).type, "gauge");
    const double v = after.value(name, name, {{"model_name", "m1"}});
    EXPECT_FALSE(std::isnan(v)) << name;
  }
  EXPECT_NEAR(after.value("vllm:gpu_cache_usage_perc", "vllm:gpu_cache_usage_perc", {{"model_name", "m1"}}) * 100,
              after.value("engine_kv_cache_usage_percent"), 1e-9);
  check_promtool(port);
}

TEST(MetricsTest, AliasesOnlyWithCompat) {
  ASSERT_TRUE(g_keyed->ok());
  const PromText t = scrape(g_keyed->port());
  EXPECT_FALSE(t.families.count("vllm:num_requests_running"));
  EXPECT_TRUE(t.families.count("engine_requests_running"));
}

TEST(MetricsTest, MetricsAuth) {
  ASSERT_TRUE(g_auth->ok()) << g_auth->startup_line();
  HttpReply no_key = fetch(g_auth->port(), "GET", "/metrics");
  EXPECT_EQ(no_key.status, 401);
  auto o = parse_obj(no_key.body);
  EXPECT_EQ(o["type"].as_string(), "error") << no_key.body;
  EXPECT_EQ(o["error"].as_object()["type"].as_string(), "authentication_error") << no_key.body;
  EXPECT_EQ(fetch(g_auth->port(), "GET", "/metrics", "", {"x-api-key: wrong"}).status, 401);
  scrape(g_auth->port(), {"x-api-key: k1"});
  scrape(g_auth->port(), {"Authorization: Bearer k1"});
  // The refusals are counted like any other 401 (seen with a key).
  const PromText t = scrape(g_auth->port(), {"x-api-key: k1"});
  EXPECT_GE(t.value("zerolayer_http_requests_total", "zerolayer_http_requests_total",
                    {{"route", "/metrics"}, {"status", "401"}}),
            2);
  // Default: /metrics is open even when the API needs a key.
  ASSERT_TRUE(g_keyed->ok());
  EXPECT_EQ(fetch(g_keyed->port(), "GET", "/metrics").status, 200);
  EXPECT_EQ(fetch(g_keyed->port(), "POST", "/v1/messages", msg_body(false)).status, 401);
}

TEST(MetricsTest, BadCompatValueIsRefused) {
  ServerProcess bad({"--fake-engine", "--metrics-compat", "tgi"}, ZL_TEST_SERVER);
  EXPECT_FALSE(bad.ok());
}

// ---- the real engine: engine-side histograms move exactly ----

TEST(MetricsTest, EngineFamiliesMoveWithRealTraffic) {
  if (!obs::kEnabled) GTEST_SKIP() << "built with ZL_OBS=OFF: nothing is recorded";
  REQUIRE_MODEL();
  ServerProcess s({"--model", model_path(), "--threads", "1", "--parallel", "4", "--request-log", "false"});
  ASSERT_TRUE(s.ok()) << s.startup_line();
  const PromText before = scrape(s.port());
  for (const auto& [name, type] : kRequiredFamilies) EXPECT_TRUE(before.families.count(name)) << name;
  constexpr int kRequests = 4;
  std::vector<int64_t> n_in(kRequests), n_out(kRequests), n_cached(kRequests);
  std::vector<std::thread> clients;
  for (int i = 0; i < kRequests; ++i) {
    clients.emplace_back([&, i] {
      HttpReply r = fetch(s.port(), "POST", "/v1/messages", msg_body(false, 16 + 8 * i));
      if (r.status != 200) return;
      auto u = parse_obj(r.body)["usage"].as_object();
      // Anthropic's input_tokens excludes what the prefix cache served.
      n_in[i] = u["input_tokens"].as_int64() + (u.contains("cache_read_input_tokens") ? u["cache_read_input_tokens"].as_int64() : 0);
      n_cached[i] = u.contains("cache_read_input_tokens") ? u["cache_read_input_tokens"].as_int64() : 0;
      n_out[i] = u["output_tokens"].as_int64();
    });
  }
  for (auto& t : clients) t.join();
  int64_t sum_in = 0, sum_out = 0, sum_gaps = 0, sum_cached = 0;
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_GT(n_out[i], 0) << "request " << i << " failed";
    sum_in += n_in[i];
    sum_cached += n_cached[i];
    sum_out += n_out[i];
    sum_gaps += n_out[i] - 1;  // an inter-token gap per token after the first
  }
  PromText after;
  // The engine reports a decode step after the events of that step (an
  // answer's last one among them): wait until it is idle and the last step
  // is counted (its batches sum to at least the tokens, checked below).
  ASSERT_TRUE(wait_until([&] {
    after = scrape(s.port());
    return api_requests(after, "anthropic", 200) >= kRequests && after.value("engine_requests_running") == 0 &&
           after.value("engine_requests_waiting") == 0 &&
           after.value("engine_batch_size", "engine_batch_size_sum") -
                   before.value("engine_batch_size", "engine_batch_size_sum") >=
               static_cast<double>(sum_out);
  }));
  auto delta = [&](const std::string& family, const std::string& suffix) {
    return after.value(family, family + suffix) - before.value(family, family + suffix);
  };
  EXPECT_EQ(delta("engine_queue_time_seconds", "_count"), kRequests);
  EXPECT_EQ(delta("engine_prefill_duration_seconds", "_count"), kRequests);
  EXPECT_GT(delta("engine_prefill_duration_seconds", "_sum"), 0);
  EXPECT_EQ(delta("engine_inter_token_latency_seconds", "_count"), sum_gaps);
  const double steps = delta("engine_decode_latency_seconds", "_count");
  EXPECT_GE(steps, static_cast<double>(*std::max_element(n_out.begin(), n_out.end())));
  EXPECT_LE(steps, static_cast<double>(sum_out));
  EXPECT_EQ(delta("engine_batch_size", "_count"), steps);
  // Each decode step's batch counts its sequences: the batch sizes sum to at
  // least the tokens sampled (prefill chunks may ride along).
  EXPECT_GE(delta("engine_batch_size", "_sum"), static_cast<double>(sum_out));
  EXPECT_EQ(delta("engine_generation_tokens_total", ""), sum_out);
  EXPECT_EQ(delta("engine_prompt_tokens_total", ""), sum_in);
  EXPECT_EQ(delta("engine_cached_tokens_total", ""), sum_cached);
  EXPECT_EQ(delta("engine_time_to_first_token_seconds", "_count"), kRequests);
  EXPECT_GT(after.value("engine_kv_blocks_capacity"), 0);
  const double eff = after.value("engine_efficiency_ratio");
  EXPECT_GT(eff, 0);
  EXPECT_LE(eff, 1.0 + 1e-9);
  check_promtool(s.port());
}

}  // namespace
}  // namespace zl::test
