// The deploy/ files (deploy/README.md): the Prometheus alert rules pass
// `promtool check rules` (SKIPPED without promtool, Debian package
// `prometheus`), the blackbox module passes the exporter's --config.check
// (SKIPPED without prometheus-blackbox-exporter), and the Grafana dashboard
// parses, has the Prometheus datasource variable, and every PromQL
// expression in it and in the rules names only metrics that issue 16 fixes
// (the engine_* list below; the rules may also use Prometheus' `up` and the
// blackbox exporter's probe_*).
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <cctype>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/process.h"

namespace zl::test {
namespace {

namespace json = boost::json;

const std::string kDeploy = std::string(ZL_SOURCE_DIR) + "/deploy";

// The engine_* families of issue 16 (histograms by their base name).
const std::set<std::string> kHistograms = {
    "engine_time_to_first_token_seconds", "engine_inter_token_latency_seconds", "engine_request_duration_seconds",
    "engine_queue_time_seconds",          "engine_prefill_duration_seconds",    "engine_decode_latency_seconds",
    "engine_batch_size"};
const std::set<std::string> kOthers = {
    "engine_requests_running",   "engine_requests_waiting",     "engine_requests_paused",
    "engine_kv_cache_usage_percent", "engine_kv_blocks_used",   "engine_kv_blocks_cached",
    "engine_kv_blocks_capacity",    "engine_efficiency_ratio",     "engine_prompt_tokens_total",
    "engine_generation_tokens_total", "engine_cached_tokens_total", "engine_preemptions_total",
    "engine_requests_total",     "engine_requests_rejected_total", "engine_tool_calls_total"};

bool known_engine_metric(const std::string& name) {
  if (kOthers.count(name)) return true;
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s = suffix;
    if (name.size() > s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0 &&
        kHistograms.count(name.substr(0, name.size() - s.size()))) {
      return true;
    }
  }
  return false;
}

// The metric names a PromQL expression selects: identifiers outside label
// matchers {…}, ranges […] and strings, that are not a function call, an
// operator keyword, or the label list of by/without/on/ignoring/group_*.
std::vector<std::string> metric_names(const std::string& expr) {
  static const std::set<std::string> kKeywords = {"by",  "without", "on", "ignoring", "group_left", "group_right",
                                                  "bool", "and",   "or", "unless",   "offset",     "inf", "nan"};
  std::vector<std::string> out;
  size_t i = 0;
  bool skip_group = false;  // the next (…) is a label list
  auto skip_to = [&](char close) {
    while (i < expr.size() && expr[i] != close) ++i;
    ++i;
  };
  while (i < expr.size()) {
    const char c = expr[i];
    if (c == '{') { ++i; skip_to('}'); continue; }
    if (c == '[') { ++i; skip_to(']'); continue; }
    if (c == '"' || c == '\'') { ++i; skip_to(c); continue; }
    if (c == '(' && skip_group) { skip_group = false; ++i; skip_to(')'); continue; }
    if (c == '$') {  // a Grafana variable
      ++i;
      while (i < expr.size() && (std::isalnum(static_cast<unsigned char>(expr[i])) || expr[i] == '_')) ++i;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      while (i < expr.size() && (std::isalnum(static_cast<unsigned char>(expr[i])) || expr[i] == '.')) ++i;
      continue;
    }
    if (!std::isalpha(static_cast<unsigned char>(c)) && c != '_' && c != ':') { ++i; continue; }
    size_t b = i;
    while (i < expr.size() && (std::isalnum(static_cast<unsigned char>(expr[i])) || expr[i] == '_' || expr[i] == ':')) ++i;
    const std::string word = expr.substr(b, i - b);
    size_t j = i;
    while (j < expr.size() && expr[j] == ' ') ++j;
    // Aggregations may put their by/without clause before the parenthesis.
    static const std::set<std::string> kAggregations = {"sum",     "min",      "max",          "avg",  "count",
                                                        "stddev",  "stdvar",   "topk",         "bottomk",
                                                        "quantile", "count_values", "group"};
    if (kAggregations.count(word)) continue;
    if (kKeywords.count(word)) {
      skip_group = word != "and" && word != "or" && word != "unless" && word != "bool" && word != "offset";
      continue;
    }
    if (j < expr.size() && expr[j] == '(') continue;  // a function
    out.push_back(word);
  }
  return out;
}

TEST(Deploy, PromqlNameExtraction) {
  EXPECT_EQ(metric_names("histogram_quantile(0.95, sum by (le) (rate(engine_batch_size_bucket{instance=~\"a\"}"
                         "[$__rate_interval])))"),
            std::vector<std::string>{"engine_batch_size_bucket"});
  EXPECT_EQ(metric_names("a / ignoring (reason) group_left sum by (instance) (b) > 0.05 and c == 0"),
            (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_FALSE(known_engine_metric("engine_made_up_total"));
  EXPECT_FALSE(known_engine_metric("engine_requests_running_bucket"));
  EXPECT_TRUE(known_engine_metric("engine_queue_time_seconds_count"));
}

// The `expr:` values of a rules file: one line, or a `|` block below it.
std::vector<std::string> rule_exprs(const std::string& yaml) {
  std::vector<std::string> out;
  std::istringstream in(yaml);
  std::string line;
  std::vector<std::string> lines;
  while (std::getline(in, line)) lines.push_back(line);
  for (size_t k = 0; k < lines.size(); ++k) {
    const size_t at = lines[k].find("expr:");
    if (at == std::string::npos || lines[k].find_first_not_of(' ') != at) continue;
    std::string v = lines[k].substr(at + 5);
    if (v.find('|') == std::string::npos) {
      out.push_back(v);
      continue;
    }
    std::string block;
    while (k + 1 < lines.size() && lines[k + 1].find_first_not_of(' ') > at) block += lines[++k] + "\n";
    out.push_back(block);
  }
  return out;
}

TEST(Deploy, AlertRulesPassPromtool) {
  if (run_command("command -v promtool >/dev/null 2>&1").exit_code != 0) GTEST_SKIP() << "promtool not installed";
  const CommandResult r = run_command("promtool check rules " + kDeploy + "/prometheus/zerolayer-alerts.yml 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("SUCCESS"), std::string::npos) << r.out;
  const CommandResult c = run_command("promtool check config " + kDeploy + "/prometheus/scrape.yml 2>&1");
  EXPECT_EQ(c.exit_code, 0) << c.out;
}

TEST(Deploy, AlertRulesUseKnownMetrics) {
  const std::string yaml = read_file(kDeploy + "/prometheus/zerolayer-alerts.yml");
  const std::vector<std::string> exprs = rule_exprs(yaml);
  ASSERT_GE(exprs.size(), 5u);
  std::set<std::string> used;
  for (const std::string& e : exprs) {
    for (const std::string& m : metric_names(e)) {
      used.insert(m);
      const bool external = m == "up" || m.rfind("probe_", 0) == 0;
      EXPECT_TRUE(external || known_engine_metric(m)) << m << " in " << e;
    }
  }
  // The seed's alerts: TTFT p95, probe p95, errors by reason, KV usage, not ready.
  for (const char* m : {"engine_time_to_first_token_seconds_bucket", "probe_duration_seconds",
                        "engine_requests_rejected_total", "engine_kv_cache_usage_percent", "up"}) {
    EXPECT_TRUE(used.count(m)) << m;
  }
  EXPECT_NE(yaml.find("> 0.05"), std::string::npos);  // probe p95 > 50 ms
}

TEST(Deploy, BlackboxModulePassesItsCheck) {
  if (run_command("command -v prometheus-blackbox-exporter >/dev/null 2>&1").exit_code != 0) {
    GTEST_SKIP() << "prometheus-blackbox-exporter not installed";
  }
  const CommandResult r = run_command("prometheus-blackbox-exporter --config.check --config.file=" + kDeploy +
                                      "/blackbox/blackbox.yml 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

TEST(Deploy, DashboardIsValidAndUsesKnownMetrics) {
  boost::system::error_code ec;
  json::value v = json::parse(read_file(kDeploy + "/grafana/zerolayer-dashboard.json"), ec);
  ASSERT_FALSE(ec) << ec.message();
  const json::object& d = v.as_object();
  EXPECT_GE(d.at("schemaVersion").as_int64(), 36);
  EXPECT_FALSE(d.at("uid").as_string().empty());
  bool has_datasource_var = false;
  for (const json::value& t : d.at("templating").at("list").as_array()) {
    has_datasource_var = has_datasource_var || (t.at("type") == "datasource" && t.at("query") == "prometheus");
  }
  EXPECT_TRUE(has_datasource_var);
  std::set<std::string> used;
  std::set<int64_t> ids;
  for (const json::value& pv : d.at("panels").as_array()) {
    const json::object& p = pv.as_object();
    EXPECT_TRUE(ids.insert(p.at("id").as_int64()).second) << "duplicate panel id";
    ASSERT_TRUE(p.contains("gridPos"));
    if (p.at("type") == "row") continue;
    EXPECT_EQ(p.at("datasource").at("uid"), "${datasource}") << p.at("title");
    ASSERT_FALSE(p.at("targets").as_array().empty()) << p.at("title");
    for (const json::value& t : p.at("targets").as_array()) {
      const std::string expr(t.at("expr").as_string());
      const std::vector<std::string> names = metric_names(expr);
      EXPECT_FALSE(names.empty()) << expr;
      for (const std::string& m : names) {
        used.insert(m);
        EXPECT_TRUE(known_engine_metric(m)) << m << " in " << expr;
      }
    }
  }
  for (const char* m : {"engine_time_to_first_token_seconds_bucket", "engine_inter_token_latency_seconds_bucket",
                        "engine_requests_total", "engine_requests_rejected_total", "engine_queue_time_seconds_bucket",
                        "engine_prefill_duration_seconds_bucket", "engine_decode_latency_seconds_bucket",
                        "engine_batch_size_bucket", "engine_requests_running", "engine_requests_waiting",
                        "engine_requests_paused", "engine_kv_cache_usage_percent", "engine_efficiency_ratio",
                        "engine_generation_tokens_total"}) {
    EXPECT_TRUE(used.count(m)) << "no panel on " << m;
  }
}

}  // namespace
}  // namespace zl::test
