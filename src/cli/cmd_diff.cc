// `zerolayer diff --a URL --b URL --requests FILE.jsonl`: the seed's rollout
// comparison. Replays recorded Messages requests (one body a line, as
// `serve --record-requests` writes them), streamed, against a (the current
// path, the reference) and then against b (the candidate), each side with
// --concurrency requests in flight, and compares them request by request:
// time to the first and to the last token, output tokens, stop reason,
// status, and BLEU-4 of b's text against a's (rollout/bleu.h).
//
// Report (--out, JSON): per request both sides' figures and bleu4; a
// summary with p50/p95 of each side (successful requests), the p95 latency
// ratios b/a, the error rates and the mean BLEU-4 over the pairs where both
// answered. A table on stdout. Gates, each only when given:
//   --max-latency-ratio R   p95(b last_token_ms) <= R x p95(a last_token_ms)
//   --max-error-rate E      b's error rate <= E
//   --min-bleu X            mean BLEU-4 >= X
// Exit: 0 all given gates pass, 1 one fails (each failure printed) or the
// run could not be made, 2 usage errors (a bad flag, URL or requests file).
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json/object.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "obs/otlp_http.h"  // parse_http_url
#include "rollout/bleu.h"
#include "rollout/stream_client.h"

namespace zl::cli {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using rollout::StreamOutcome;

constexpr size_t kMaxRequests = 1'000'000;

// The requests file: one JSON object a line (blank lines and lines starting
// with '#' skipped), each sent with "stream": true.
Result<std::vector<std::string>> read_requests(const std::string& path) {
  std::ifstream f(path);
  if (!f) return invalid_argument("cannot read the requests file '" + path + "'");
  std::vector<std::string> out;
  std::string line;
  for (size_t line_no = 1; std::getline(f, line); ++line_no) {
    size_t b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos || line[b] == '#') continue;
    auto body = rollout::with_stream_true(line, /*openai=*/false);
    if (!body.ok()) return invalid_argument(path + ":" + std::to_string(line_no) + ": not a JSON object");
    if (out.size() >= kMaxRequests) return invalid_argument(path + ": more than 1000000 requests");
    out.push_back(std::move(body).value());
  }
  if (out.empty()) return invalid_argument("the requests file '" + path + "' holds no request");
  return out;
}

struct Side {
  std::string url;
  obs::HttpEndpoint endpoint;
  std::string api_key;
  std::vector<StreamOutcome> results;
};

// Replays every request against one side, `concurrency` at a time.
void replay(Side& side, const std::vector<std::string>& requests, int concurrency, std::chrono::milliseconds timeout) {
  side.results.assign(requests.size(), StreamOutcome{});
  asio::io_context ioc;
  size_t next = 0;
  auto worker = [&]() -> asio::awaitable<void> {
    while (next < requests.size()) {
      const size_t i = next++;
      rollout::StreamCall call;
      call.host = side.endpoint.host;
      call.port = side.endpoint.port;
      call.target = side.endpoint.target;
      call.body = requests[i];
      call.api_key = side.api_key;
      call.deadline = std::chrono::steady_clock::now() + timeout;
      side.results[i] = co_await rollout::stream_post(std::move(call));
    }
  };
  for (int w = 0; w < concurrency; ++w) asio::co_spawn(ioc, worker(), asio::detached);
  ioc.run();
}

// Nearest-rank percentile of the values >= 0; -1 when there are none.
double percentile(std::vector<double> v, double p) {
  std::erase_if(v, [](double x) { return x < 0; });
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  const size_t rank = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::clamp<size_t>(rank, 1, v.size()) - 1];
}

json::value num(double v) { return v >= 0 ? json::value(std::round(v * 1000) / 1000) : json::value(nullptr); }

struct SideSummary {
  double first_p50, first_p95, last_p50, last_p95;
  size_t n_errors = 0;
  double error_rate = 0;
};

SideSummary summarize(const Side& s) {
  std::vector<double> first, last;
  SideSummary out{};
  for (const StreamOutcome& r : s.results) {
    if (!r.ok()) {
      ++out.n_errors;
      continue;
    }
    first.push_back(r.first_token_ms);
    last.push_back(r.last_token_ms >= 0 ? r.last_token_ms : r.total_ms);
  }
  out.first_p50 = percentile(first, 50);
  out.first_p95 = percentile(first, 95);
  out.last_p50 = percentile(last, 50);
  out.last_p95 = percentile(last, 95);
  out.error_rate = s.results.empty() ? 0 : static_cast<double>(out.n_errors) / static_cast<double>(s.results.size());
  return out;
}

json::object side_json(const StreamOutcome& r) {
  json::object o{{"status", r.status},
                 {"first_token_ms", num(r.first_token_ms)},
                 {"last_token_ms", num(r.last_token_ms)},
                 {"total_ms", num(r.total_ms)},
                 {"total_tokens", r.total_tokens >= 0 ? json::value(r.total_tokens) : json::value(nullptr)},
                 {"stop_reason", r.stop_reason.empty() ? json::value(nullptr) : json::value(r.stop_reason)}};
  if (!r.ok()) o["error"] = r.error.empty() ? "HTTP status " + std::to_string(r.status) : r.error;
  return o;
}

json::object summary_json(const SideSummary& s, const std::string& url) {
  return {{"url", url},
          {"first_token_ms", json::object{{"p50", num(s.first_p50)}, {"p95", num(s.first_p95)}}},
          {"last_token_ms", json::object{{"p50", num(s.last_p50)}, {"p95", num(s.last_p95)}}},
          {"n_errors", s.n_errors},
          {"error_rate", s.error_rate}};
}

std::string ms_cell(double v) {
  if (v < 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", v);
  return buf;
}

struct Gate {
  std::string name;
  double limit;
  double value;  // NaN: could not be measured (fails)
  bool pass;
};

}  // namespace

int cmd_diff(int argc, char** argv, int first) {
  const std::vector<FlagSpec> specs = {
      {"a", true, "URL of the reference server (the current path), http://HOST:PORT[/base]"},
      {"b", true, "URL of the candidate server (the new path)"},
      {"requests", true, "JSON lines: one Anthropic Messages body a line (serve --record-requests writes them)"},
      {"api-key", true, "API key sent to both (x-api-key and Authorization: Bearer)"},
      {"api-key-a", true, "API key for a only (default: --api-key)"},
      {"api-key-b", true, "API key for b only (default: --api-key)"},
      {"concurrency", true, "requests in flight against each side (default 4)"},
      {"timeout-ms", true, "one request's deadline (default 120000)"},
      {"out", true, "write the JSON report to FILE"},
      {"max-latency-ratio", true, "gate: p95(b last token) <= R x p95(a last token), e.g. 0.7"},
      {"max-error-rate", true, "gate: b's error rate <= E, e.g. 0.00001"},
      {"min-bleu", true, "gate: mean BLEU-4 of b against a >= X"}};
  const std::string synopsis =
      "--a URL --b URL --requests FILE.jsonl [--api-key K] [--concurrency N] [--out report.json] "
      "[--max-latency-ratio 0.7] [--max-error-rate 0.00001] [--min-bleu X]";
  int code = 0;
  auto args = parse_command(argc, argv, first, "diff", synopsis, specs, &code);
  if (!args) return code;
  auto usage_error = [](const std::string& msg) { return report_error("diff", invalid_argument(msg)); };
  for (const char* required : {"a", "b", "requests"}) {
    if (!args->has(required)) return usage_error(std::string("--") + required + " is required");
  }
  Side a{.url = *args->get("a")}, b{.url = *args->get("b")};
  for (Side* s : {&a, &b}) {
    auto ep = obs::parse_http_url(s->url, "/v1/messages");
    if (!ep.ok()) return usage_error((s == &a ? "--a: " : "--b: ") + ep.status().message());
    s->endpoint = std::move(ep).value();
  }
  a.api_key = args->get_or("api-key-a", args->get_or("api-key", ""));
  b.api_key = args->get_or("api-key-b", args->get_or("api-key", ""));
  auto concurrency = args->get_int_in("concurrency", 4, 1, 1024);
  if (!concurrency.ok()) return report_error("diff", concurrency.status());
  auto timeout_ms = args->get_int_in("timeout-ms", 120000, 1, 86'400'000);
  if (!timeout_ms.ok()) return report_error("diff", timeout_ms.status());
  std::optional<double> max_ratio, max_error_rate, min_bleu;
  for (auto [name, out, lo, hi] : {std::tuple{"max-latency-ratio", &max_ratio, 0.0, 1e9},
                                   std::tuple{"max-error-rate", &max_error_rate, 0.0, 1.0},
                                   std::tuple{"min-bleu", &min_bleu, 0.0, 1.0}}) {
    if (!args->has(name)) continue;
    auto v = args->get_double(name, 0);
    if (!v.ok()) return report_error("diff", v.status());
    if (!(*v >= lo && *v <= hi)) {
      return usage_error("--" + std::string(name) + " must be in [" + (hi > 1 ? "0, 1e9" : "0, 1") + "]");
    }
    *out = *v;
  }
  auto requests = read_requests(*args->get("requests"));
  if (!requests.ok()) return report_error("diff", requests.status());

  const auto timeout = std::chrono::milliseconds(*timeout_ms);
  replay(a, *requests, static_cast<int>(*concurrency), timeout);
  replay(b, *requests, static_cast<int>(*concurrency), timeout);

  const SideSummary sa = summarize(a), sb = summarize(b);
  json::array per_request;
  double bleu_sum = 0;
  size_t n_pairs = 0, n_same_stop = 0, n_same_tokens = 0;
  for (size_t i = 0; i < requests->size(); ++i) {
    const StreamOutcome& ra = a.results[i];
    const StreamOutcome& rb = b.results[i];
    json::object row{{"index", i}, {"a", side_json(ra)}, {"b", side_json(rb)}, {"bleu4", nullptr}};
    if (ra.ok() && rb.ok()) {
      const double bl = rollout::bleu4(rb.text, ra.text);
      row["bleu4"] = std::round(bl * 1e6) / 1e6;
      bleu_sum += bl;
      ++n_pairs;
      n_same_stop += ra.stop_reason == rb.stop_reason;
      n_same_tokens += ra.total_tokens == rb.total_tokens;
    }
    per_request.push_back(std::move(row));
  }
  const double mean_bleu = n_pairs ? bleu_sum / static_cast<double>(n_pairs) : -1;
  auto ratio = [](double x, double y) { return x >= 0 && y > 0 ? x / y : -1.0; };
  const double ratio_first = ratio(sb.first_p95, sa.first_p95);
  const double ratio_last = ratio(sb.last_p95, sa.last_p95);

  std::vector<Gate> gates;
  if (max_ratio) gates.push_back({"max-latency-ratio", *max_ratio, ratio_last >= 0 ? ratio_last : NAN,
                                  ratio_last >= 0 && ratio_last <= *max_ratio});
  if (max_error_rate) gates.push_back({"max-error-rate", *max_error_rate, sb.error_rate, sb.error_rate <= *max_error_rate});
  if (min_bleu) gates.push_back({"min-bleu", *min_bleu, mean_bleu >= 0 ? mean_bleu : NAN,
                                 mean_bleu >= 0 && mean_bleu >= *min_bleu});
  const bool pass = std::all_of(gates.begin(), gates.end(), [](const Gate& g) { return g.pass; });

  json::array gates_json;
  for (const Gate& g : gates) {
    gates_json.push_back(json::object{{"name", g.name}, {"limit", g.limit},
                                      {"value", std::isnan(g.value) ? json::value(nullptr) : json::value(g.value)},
                                      {"pass", g.pass}});
  }
  const json::object report{
      {"n_requests", requests->size()},
      {"requests", std::move(per_request)},
      {"summary", json::object{{"a", summary_json(sa, a.url)},
                               {"b", summary_json(sb, b.url)},
                               {"latency_ratio", json::object{{"first_token_p95", num(ratio_first)},
                                                              {"last_token_p95", num(ratio_last)}}},
                               {"n_pairs", n_pairs},
                               {"mean_bleu4", mean_bleu >= 0 ? json::value(mean_bleu) : json::value(nullptr)},
                               {"same_stop_reason_rate", n_pairs ? json::value(double(n_same_stop) / n_pairs) : nullptr},
                               {"same_total_tokens_rate", n_pairs ? json::value(double(n_same_tokens) / n_pairs) : nullptr}}},
      {"gates", std::move(gates_json)},
      {"pass", pass}};
  if (auto out = args->get("out")) {
    std::ofstream f(*out, std::ios::trunc);
    f << json::serialize(report) << '\n';
    if (!f) return report_error("diff", internal_error("cannot write the report to '" + *out + "'"));
  }

  std::printf("%-22s %-18s %-18s\n", "", "a (reference)", "b (candidate)");
  std::printf("%-22s %-18zu %-18zu\n", "requests", requests->size(), requests->size());
  char ea[48], eb[48];
  std::snprintf(ea, sizeof ea, "%zu (%.4f%%)", sa.n_errors, 100 * sa.error_rate);
  std::snprintf(eb, sizeof eb, "%zu (%.4f%%)", sb.n_errors, 100 * sb.error_rate);
  std::printf("%-22s %-18s %-18s\n", "errors", ea, eb);
  std::printf("%-22s %-18s %-18s\n", "first token p50", ms_cell(sa.first_p50).c_str(), ms_cell(sb.first_p50).c_str());
  std::printf("%-22s %-18s %-18s\n", "first token p95", ms_cell(sa.first_p95).c_str(), ms_cell(sb.first_p95).c_str());
  std::printf("%-22s %-18s %-18s\n", "last token p50", ms_cell(sa.last_p50).c_str(), ms_cell(sb.last_p50).c_str());
  std::printf("%-22s %-18s %-18s\n", "last token p95", ms_cell(sa.last_p95).c_str(), ms_cell(sb.last_p95).c_str());
  std::printf("p95 ratio b/a: first token %s, last token %s\n",
              ratio_first >= 0 ? std::to_string(ratio_first).c_str() : "-",
              ratio_last >= 0 ? std::to_string(ratio_last).c_str() : "-");
  if (n_pairs) {
    std::printf("mean BLEU-4 (b against a): %.4f over %zu pairs; same stop reason %zu/%zu, same token count %zu/%zu\n",
                mean_bleu, n_pairs, n_same_stop, n_pairs, n_same_tokens, n_pairs);
  } else {
    std::printf("mean BLEU-4: - (no request answered on both sides)\n");
  }
  for (const Gate& g : gates) {
    std::printf("gate %-18s limit %-10g value %-12s %s\n", g.name.c_str(), g.limit,
                std::isnan(g.value) ? "-" : std::to_string(g.value).c_str(), g.pass ? "PASS" : "FAIL");
    if (!g.pass) std::fprintf(stderr, "zerolayer diff: gate %s failed\n", g.name.c_str());
  }
  std::fflush(stdout);
  return pass ? kExitOk : kExitRuntime;
}

}  // namespace zl::cli
