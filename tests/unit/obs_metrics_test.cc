// The metrics registry (src/obs): the exposition text byte for byte, the
// histogram's bucket arithmetic, exact totals under concurrent recording,
// the efficiency window, and the test's own exposition parser (which the
// server tests rely on) against valid and broken texts.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <vector>

#include "obs/efficiency.h"
#include "obs/engine_metrics.h"
#include "obs/metrics.h"
#include "support/prom_text.h"

namespace zl::obs {
namespace {

#define REQUIRE_OBS() \
  if (!kEnabled) GTEST_SKIP() << "built with ZL_OBS=OFF: recording is compiled away"

TEST(ObsMetricsTest, ExpositionOfASmallRegistryIsExact) {
  REQUIRE_OBS();
  Registry r;
  Family& req = r.add("test_requests_total", "Requests by route\nand \\status", MetricType::kCounter,
                      {"route", "status"});
  req.counter({"/a", "200"}).add(3);
  req.counter({"say \"hi\"\n\\", "500"}).add();
  r.add("test_temperature", "A gauge", MetricType::kGauge).gauge().set(-1.5);
  Histogram& h = r.add("test_latency_seconds", "A histogram", MetricType::kHistogram, {}, {0.1, 1}).histogram();
  h.observe(0.05);
  h.observe(0.1);  // on the bound: le="0.1"
  h.observe(0.5);
  h.observe(7);
  const std::string want =
      "# HELP test_requests_total Requests by route\\nand \\\\status\n"
      "# TYPE test_requests_total counter\n"
      "test_requests_total{route=\"/a\",status=\"200\"} 3\n"
      "test_requests_total{route=\"say \\\"hi\\\"\\n\\\\\",status=\"500\"} 1\n"
      "# HELP test_temperature A gauge\n"
      "# TYPE test_temperature gauge\n"
      "test_temperature -1.5\n"
      "# HELP test_latency_seconds A histogram\n"
      "# TYPE test_latency_seconds histogram\n"
      "test_latency_seconds_bucket{le=\"0.1\"} 2\n"
      "test_latency_seconds_bucket{le=\"1\"} 3\n"
      "test_latency_seconds_bucket{le=\"+Inf\"} 4\n"
      "test_latency_seconds_sum 7.65\n"
      "test_latency_seconds_count 4\n";
  const std::string got = r.render();
  EXPECT_EQ(got, want);
  const test::PromText t = test::parse_prom_text(got);
  EXPECT_TRUE(t.errors.empty()) << t.errors.front();
  EXPECT_EQ(t.value("test_requests_total", "test_requests_total", {{"route", "say \"hi\"\n\\"}, {"status", "500"}}), 1);
  const test::PromtoolResult p = test::promtool_check(got);
  if (!p.ran) {
    std::printf("SKIPPED promtool check (promtool is not installed)\n");
  } else {
    EXPECT_EQ(p.exit_code, 0) << p.output;
  }
}

TEST(ObsMetricsTest, HistogramBucketMath) {
  REQUIRE_OBS();
  Histogram h({0.001, 0.01, 0.1});
  for (double v : {0.0, 0.0005, 0.001, 0.0010001, 0.01, 0.05, 0.1, 0.2, 1e9}) h.observe(v);
  const Histogram::Snapshot s = h.snapshot();
  ASSERT_EQ(s.cumulative.size(), 4u);
  EXPECT_EQ(s.cumulative[0], 3u);  // 0, 0.0005, 0.001
  EXPECT_EQ(s.cumulative[1], 5u);  // + 0.0010001, 0.01
  EXPECT_EQ(s.cumulative[2], 7u);  // + 0.05, 0.1
  EXPECT_EQ(s.cumulative[3], 9u);  // + 0.2, 1e9
  EXPECT_EQ(s.count, 9u);
  EXPECT_DOUBLE_EQ(s.sum, 0.0005 + 0.001 + 0.0010001 + 0.01 + 0.05 + 0.1 + 0.2 + 1e9);
  // The shared bounds: ascending, from 0.5 ms.
  EXPECT_EQ(latency_buckets().front(), 0.0005);
  EXPECT_TRUE(std::is_sorted(latency_buckets().begin(), latency_buckets().end()));
}

TEST(ObsMetricsTest, ConcurrentRecordingSumsExactly) {
  REQUIRE_OBS();
  Registry r;
  Counter& c = r.add("test_total", "c", MetricType::kCounter).counter();
  Histogram& h = r.add("test_seconds", "h", MetricType::kHistogram, {}, latency_buckets()).histogram();
  Family& labelled = r.add("test_labelled_total", "l", MetricType::kCounter, {"k"});
  constexpr int kThreads = 8, kPerThread = 50000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Series creation races with recording on other series.
      Counter& mine = labelled.counter({std::to_string(t % 2)});
      for (int i = 0; i < kPerThread; ++i) {
        c.add();
        mine.add(2);
        h.observe(0.25);  // exactly representable: the sum is exact too
      }
    });
  }
  std::string during = r.render();  // a scrape while recording: still valid text
  for (auto& th : threads) th.join();
  EXPECT_TRUE(test::parse_prom_text(during).errors.empty());
  EXPECT_EQ(c.value(), int64_t{kThreads} * kPerThread);
  EXPECT_EQ(labelled.counter({"0"}).value() + labelled.counter({"1"}).value(), int64_t{2} * kThreads * kPerThread);
  const Histogram::Snapshot s = h.snapshot();
  EXPECT_EQ(s.count, uint64_t{kThreads} * kPerThread);
  EXPECT_EQ(s.sum, 0.25 * kThreads * kPerThread);
  const test::PromText t = test::parse_prom_text(r.render());
  EXPECT_EQ(t.value("test_seconds", "test_seconds_bucket", {{"le", "0.1"}}), 0);
  EXPECT_EQ(t.value("test_seconds", "test_seconds_bucket", {{"le", "0.25"}}), kThreads * kPerThread);
}

TEST(ObsMetricsTest, EngineMetricsFeedTheirFamilies) {
  REQUIRE_OBS();
  ServerMetrics m;
  EngineSink& sink = m.engine;
  sink.on_first_token(0.002, 0.03);
  sink.on_decode_step(0.004, 3);
  sink.on_decode_step(0.006, 5);
  sink.on_inter_token(0.004);
  sink.on_preemptions(2);
  const test::PromText t = test::parse_prom_text(m.registry.render());
  ASSERT_TRUE(t.errors.empty()) << t.errors.front();
  EXPECT_EQ(t.value("engine_queue_time_seconds", "engine_queue_time_seconds_count"), 1);
  EXPECT_EQ(t.value("engine_prefill_duration_seconds", "engine_prefill_duration_seconds_sum"), 0.03);
  EXPECT_EQ(t.value("engine_decode_latency_seconds", "engine_decode_latency_seconds_count"), 2);
  EXPECT_EQ(t.value("engine_batch_size", "engine_batch_size_bucket", {{"le", "4"}}), 1);
  EXPECT_EQ(t.value("engine_batch_size", "engine_batch_size_bucket", {{"le", "8"}}), 2);
  EXPECT_EQ(t.value("engine_inter_token_latency_seconds", "engine_inter_token_latency_seconds_count"), 1);
  EXPECT_EQ(t.value("engine_preemptions_total"), 2);
}

TEST(ObsMetricsTest, EfficiencyRatioIsARatioOfP95s) {
  REQUIRE_OBS();
  EfficiencyWindow w;
  EXPECT_TRUE(std::isnan(w.ratio()));
  // 100 requests: engine 1..100 ms, client 10..1000 ms: p95s are 95 and 950.
  for (int i = 1; i <= 100; ++i) w.add(i * 0.001, i * 0.01);
  EXPECT_NEAR(w.ratio(), 0.1, 1e-12);
  w.add(0.5, 0);  // no client time: ignored
  EXPECT_NEAR(w.ratio(), 0.1, 1e-12);
  // The window keeps the last kWindow samples: old ones fall out.
  for (size_t i = 0; i < EfficiencyWindow::kWindow; ++i) w.add(0.02, 0.04);
  EXPECT_DOUBLE_EQ(w.ratio(), 0.5);
  std::vector<double> v = {5, 1, 4, 2, 3};
  EXPECT_EQ(EfficiencyWindow::quantile(v.data(), v.size(), 0.95), 5);
  EXPECT_EQ(EfficiencyWindow::quantile(v.data(), v.size(), 0.5), 3);
}

TEST(ObsMetricsTest, NamesAndNumbers) {
  EXPECT_TRUE(valid_metric_name("vllm:num_requests_running"));
  EXPECT_FALSE(valid_metric_name("9lives"));
  EXPECT_FALSE(valid_metric_name("a-b"));
  EXPECT_FALSE(valid_label_name("le"));
  EXPECT_FALSE(valid_label_name("__name"));
  EXPECT_FALSE(valid_label_name("a:b"));
  std::string s;
  append_number(s, INFINITY);
  s += ' ';
  append_number(s, NAN);
  s += ' ';
  append_number(s, 0.0005);
  s += ' ';
  append_number(s, 1e21);
  EXPECT_EQ(s, "+Inf NaN 0.0005 1e+21");
}

// The parser that the server tests trust must reject what Prometheus rejects.
TEST(ObsMetricsTest, ParserRejectsBrokenTexts) {
  const char* bad[] = {
      "x 1",                                                     // no final newline
      "x{a=\"1\" 2\n",                                           // unterminated labels
      "x{a=\"\\t\"} 2\n",                                        // bad escape
      "x two\n",                                                 // bad value
      "# TYPE x counter\nx -1\n",                                // negative counter
      "# TYPE x gauge\nx 1\n# TYPE y gauge\ny 1\nx 2\n",         // not contiguous
      "x 1\nx 2\n",                                              // duplicate series
      "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_sum 1\nh_count 1\n",  // not cumulative
      "# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_sum 1\nh_count 1\n",                          // no +Inf
      "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_sum 1\nh_count 1\n",                       // +Inf != count
      "# TYPE x nonsense\nx 1\n",
      "1x 1\n",
  };
  for (const char* text : bad) EXPECT_FALSE(test::parse_prom_text(text).errors.empty()) << text;
  const test::PromText ok = test::parse_prom_text(
      "# HELP h x\n# TYPE h histogram\nh_bucket{le=\"1\"} 1\nh_bucket{le=\"+Inf\"} 2\nh_sum 3.5\nh_count 2\n"
      "# comment\nx{a=\"q\\\"\\\\\\n\"} NaN 1700000000\n");
  EXPECT_TRUE(ok.errors.empty()) << ok.errors.front();
  EXPECT_EQ(ok.families.at("h").type, "histogram");
  EXPECT_EQ(ok.families.at("x").samples.at(0).labels.at("a"), "q\"\\\n");
}

}  // namespace
}  // namespace zl::obs
