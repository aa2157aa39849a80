// Traces and log formats of `zerolayer serve` (issue 16): the W3C
// traceparent parser, the OTLP JSON encoding, and end to end the test-only
// server (--fake-engine) exporting to an OTLP capture server that runs in
// this test on 127.0.0.1; a collector that is down; --log-format json|text.
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cli/serve_config.h"
#include "obs/otlp_http.h"
#include "obs/trace_context.h"
#include "obs/trace_exporter.h"
#include "support/http_client.h"
#include "support/json_object.h"
#include "support/process.h"
#include "support/temp_files.h"
#include "support/wait.h"

namespace zl::test {
namespace {

namespace asio = boost::asio;
namespace bhttp = boost::beast::http;
namespace json = boost::json;
using tcp = asio::ip::tcp;

// An OTLP/HTTP collector stand-in: accepts connections on 127.0.0.1, reads
// one request per connection, answers `status`, keeps (target, body).
class CaptureServer {
 public:
  explicit CaptureServer(int status = 200) : acceptor_(ioc_, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
                                             status_(status) {
    thread_ = std::thread([this] { serve(); });
  }
  // Wakes the blocking accept with a connection of its own, then joins.
  ~CaptureServer() {
    stopping_ = true;
    tcp::socket wake(ioc_);
    boost::system::error_code ec;
    wake.connect(acceptor_.local_endpoint(), ec);
    thread_.join();
  }
  int port() const { return acceptor_.local_endpoint().port(); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port()); }

  // Waits until `pred(bodies)` holds; false after the deadline.
  template <typename Pred>
  bool wait_for(Pred pred, std::chrono::milliseconds timeout = kDefaultWait) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return pred(bodies_); });
  }
  std::vector<std::string> targets() {
    std::lock_guard lock(mu_);
    return targets_;
  }

 private:
  void serve() {
    for (;;) {
      tcp::socket sock(ioc_);
      boost::system::error_code ec;
      acceptor_.accept(sock, ec);
      if (stopping_) return;
      if (ec) continue;
      boost::beast::flat_buffer buf;
      bhttp::request<bhttp::string_body> req;
      bhttp::read(sock, buf, req, ec);
      if (ec) continue;
      bhttp::response<bhttp::string_body> res{static_cast<bhttp::status>(status_), 11};
      res.set(bhttp::field::content_type, "application/json");
      res.body() = "{}";
      res.prepare_payload();
      bhttp::write(sock, res, ec);
      {
        std::lock_guard lock(mu_);
        targets_.push_back(std::string(req.target()));
        bodies_.push_back(req.body());
      }
      cv_.notify_all();
    }
  }

  asio::io_context ioc_;
  tcp::acceptor acceptor_;
  int status_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> targets_;
  std::vector<std::string> bodies_;
};

// A port where nothing listens: bound once, then closed.
int closed_port() {
  asio::io_context ioc;
  tcp::acceptor a(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  return a.local_endpoint().port();
}

// Every span of every captured export, with its service name checked.
std::vector<json::object> all_spans(const std::vector<std::string>& bodies) {
  std::vector<json::object> out;
  for (const std::string& b : bodies) {
    json::object req = parse_obj(b);
    for (auto& rs : req["resourceSpans"].as_array()) {
      for (auto& ss : rs.as_object().at("scopeSpans").as_array()) {
        for (auto& s : ss.as_object().at("spans").as_array()) out.push_back(s.as_object());
      }
    }
  }
  return out;
}

std::string str(const json::value* v) { return v && v->is_string() ? std::string(v->get_string()) : ""; }

// The attribute `key` of a span as a string (intValue is a decimal string too).
std::string attr(const json::object& span, const std::string& key) {
  for (auto& a : span.at("attributes").as_array()) {
    const json::object& o = a.as_object();
    if (str(o.if_contains("key")) != key) continue;
    const json::object& v = o.at("value").as_object();
    if (v.contains("stringValue")) return str(v.if_contains("stringValue"));
    if (v.contains("intValue")) return str(v.if_contains("intValue"));
  }
  return "<absent>";
}

uint64_t nanos(const json::object& span, const char* field) { return std::stoull(str(span.if_contains(field))); }

std::string message_body(bool stream) {
  return std::string(R"({"model":"m","max_tokens":5,"stream":)") + (stream ? "true" : "false") +
         R"(,"messages":[{"role":"user","content":"Hello there"}]})";
}

TEST(TraceContext, ParsesVersion00) {
  auto c = obs::parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(c->parent_span_id, "00f067aa0ba902b7");
  EXPECT_TRUE(c->sampled);
  EXPECT_FALSE(obs::parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")->sampled);
}

TEST(TraceContext, RejectsInvalidHeaders) {
  for (const char* h : {"", "garbage", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
                        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
                        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
                        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
                        "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}) {
    EXPECT_FALSE(obs::parse_traceparent(h)) << h;
  }
}

TEST(TraceContext, FreshIdsAreHexAndDistinct) {
  const std::string a = obs::new_trace_id(), b = obs::new_trace_id();
  EXPECT_EQ(a.size(), 32u);
  EXPECT_NE(a, b);
  EXPECT_TRUE(obs::parse_traceparent("00-" + a + "-" + obs::new_span_id() + "-01"));
}

TEST(OtlpHttp, ParsesEndpointUrls) {
  auto e = obs::parse_http_url("http://collector:4318/", "/v1/traces");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e.value().host, "collector");
  EXPECT_EQ(e.value().port, "4318");
  EXPECT_EQ(e.value().target, "/v1/traces");
  auto v6 = obs::parse_http_url("http://[::1]:9/otlp", "/v1/traces");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6.value().host, "::1");
  EXPECT_EQ(v6.value().target, "/otlp/v1/traces");
  EXPECT_EQ(obs::parse_http_url("http://h", "/x").value().port, "80");
  for (const char* bad : {"https://h:1", "h:1", "http://:1", "http://h:0", "http://h:99999", "http://h:1/a?b",
                          "http://[::1", "http://u@h:1"}) {
    EXPECT_FALSE(obs::parse_http_url(bad, "/v1/traces").ok()) << bad;
  }
}

const auto* const kCleanup = testing_support::register_temp_cleanup("zl_trace_test");

// Both settings from TOML, the environment over TOML, the flag over both.
TEST(TraceSettings, FlagOverEnvironmentOverToml) {
  const std::string path = testing_support::temp_file("zl_trace_test", "serve.toml");
  {
    std::ofstream f(path);
    f << "otlp_endpoint = \"http://127.0.0.1:4318\"\nlog_format = \"text\"\n";
  }
  std::map<std::string, std::string> env;
  auto env_fn = [&env](const char* n) { return env.count(n) ? env.at(n).c_str() : nullptr; };
  auto c = cli::resolve_serve_config({{"config", path}}, {}, env_fn);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c.value().otlp_endpoint, "http://127.0.0.1:4318");
  EXPECT_EQ(c.value().log_format, "text");
  env["ZEROLAYER_OTLP_ENDPOINT"] = "http://env:1";
  env["ZEROLAYER_LOG_FORMAT"] = "json";
  c = cli::resolve_serve_config({{"config", path}}, {}, env_fn);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.value().otlp_endpoint, "http://env:1");
  EXPECT_EQ(c.value().log_format, "json");
  c = cli::resolve_serve_config({{"config", path}, {"otlp-endpoint", "http://flag:2"}, {"log-format", "text"}}, {},
                                env_fn);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.value().otlp_endpoint, "http://flag:2");
  EXPECT_EQ(c.value().log_format, "text");
  env["ZEROLAYER_OTLP_ENDPOINT"] = "collector:4318";  // no scheme: refused, naming the source
  c = cli::resolve_serve_config({}, {}, env_fn);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("ZEROLAYER_OTLP_ENDPOINT"), std::string::npos) << c.status().message();
}

// The server's /metrics value of a counter family without labels; -1 when absent.
long long metric(int port, const std::string& name) {
  HttpReply r = fetch(port, "GET", "/metrics");
  const size_t at = r.body.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::atoll(r.body.c_str() + at + name.size() + 2);
}

TEST(Traces, SpansJoinTheCallersTrace) {
  CaptureServer collector;
  ServerProcess server({"--fake-engine", "--fake-step-us", "2000", "--model-alias", "fake-model", "--otlp-endpoint",
                        collector.url()},
                       ZL_TEST_SERVER);
  ASSERT_TRUE(server.ok());
  const std::string trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
  const std::string parent = "00f067aa0ba902b7";
  HttpReply r = fetch(server.port(), "POST", "/v1/messages", message_body(false),
                      {"traceparent: 00-" + trace_id + "-" + parent + "-01"});
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string request_id = r.header("request-id");
  ASSERT_TRUE(collector.wait_for([](const std::vector<std::string>& b) { return all_spans(b).size() >= 4; }));
  EXPECT_EQ(collector.targets().at(0), "/v1/traces");
  std::vector<std::string> bodies;
  collector.wait_for([&](const std::vector<std::string>& b) { bodies = b; return true; });
  std::map<std::string, json::object> by_name;
  for (json::object& s : all_spans(bodies)) by_name[str(s.if_contains("name"))] = s;
  ASSERT_EQ(by_name.size(), 4u);
  const json::object& req = by_name.at("request");
  EXPECT_EQ(str(req.if_contains("traceId")), trace_id);
  EXPECT_EQ(str(req.if_contains("parentSpanId")), parent);
  EXPECT_EQ(req.at("kind").as_int64(), 2);
  EXPECT_EQ(str(req.if_contains("spanId")).size(), 16u);
  EXPECT_EQ(attr(req, "zerolayer.request_id"), request_id);
  EXPECT_EQ(attr(req, "zerolayer.api"), "anthropic");
  EXPECT_EQ(attr(req, "http.route"), "/v1/messages");
  EXPECT_EQ(attr(req, "gen_ai.request.model"), "fake-model");
  EXPECT_EQ(attr(req, "http.response.status_code"), "200");
  EXPECT_EQ(attr(req, "zerolayer.n_generated_tokens"), "5");
  EXPECT_GT(std::stoll(attr(req, "zerolayer.n_prompt_tokens")), 0);
  EXPECT_EQ(attr(req, "zerolayer.n_cached_tokens"), "0");
  EXPECT_EQ(attr(req, "zerolayer.finish_reason"), "max_tokens");
  EXPECT_EQ(attr(req, "zerolayer.error_reason"), "<absent>");
  EXPECT_EQ(req.at("status").as_object().at("code").as_int64(), 1);
  // Nesting: the three phases are children of `request`, in its trace, in order.
  uint64_t t_prev = nanos(req, "startTimeUnixNano");
  for (const char* name : {"queue", "prefill", "decode"}) {
    const json::object& s = by_name.at(name);
    EXPECT_EQ(str(s.if_contains("traceId")), trace_id) << name;
    EXPECT_EQ(str(s.if_contains("parentSpanId")), str(req.if_contains("spanId"))) << name;
    EXPECT_LE(t_prev, nanos(s, "startTimeUnixNano")) << name;
    EXPECT_LE(nanos(s, "startTimeUnixNano"), nanos(s, "endTimeUnixNano")) << name;
    EXPECT_LE(nanos(s, "endTimeUnixNano"), nanos(req, "endTimeUnixNano")) << name;
    t_prev = nanos(s, "endTimeUnixNano");
  }
  // Four tokens after the first at 2 ms a step: the decode span is not empty.
  EXPECT_GE(nanos(by_name.at("decode"), "endTimeUnixNano") - nanos(by_name.at("decode"), "startTimeUnixNano"),
            4'000'000u);
  // Within a minute of now: steady times were mapped to Unix time.
  const uint64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                              std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_LT(now_ns - nanos(req, "startTimeUnixNano"), 60'000'000'000ull);
  EXPECT_TRUE(wait_until([&] { return metric(server.port(), "engine_trace_spans_exported_total") >= 4; }));
  EXPECT_EQ(metric(server.port(), "engine_trace_spans_dropped_total"), 0);
}

// The product binary on the real engine (stories260K): a streamed request's
// spans, with the engine's own phase timings.
TEST(Traces, RealEngineStream) {
  const std::string model = shared_dir() + "/models/stories260K.gguf";
  if (!file_exists(model)) GTEST_SKIP() << "SKIPPED: " << model << " missing";
  CaptureServer collector;
  ServerProcess server({"--model", model, "--otlp-endpoint", collector.url() + "/"});
  ASSERT_TRUE(server.ok());
  const std::string trace_id = obs::new_trace_id();
  const std::string parent = obs::new_span_id();
  HttpReply r = fetch(server.port(), "POST", "/v1/messages", message_body(true),
                      {"traceparent: 00-" + trace_id + "-" + parent + "-01"});
  ASSERT_EQ(r.status, 200) << r.body;
  std::vector<std::string> bodies;
  ASSERT_TRUE(collector.wait_for([&](const std::vector<std::string>& b) {
    bodies = b;
    return all_spans(b).size() >= 4;
  }));
  EXPECT_EQ(collector.targets().at(0), "/v1/traces");
  std::map<std::string, json::object> by_name;
  for (json::object& s : all_spans(bodies)) by_name[str(s.if_contains("name"))] = s;
  const json::object& req = by_name.at("request");
  EXPECT_EQ(str(req.if_contains("traceId")), trace_id);
  EXPECT_EQ(str(req.if_contains("parentSpanId")), parent);
  EXPECT_EQ(attr(req, "gen_ai.request.model"), "stories260K");
  EXPECT_EQ(attr(req, "zerolayer.n_generated_tokens"), "5");
  for (const char* name : {"queue", "prefill", "decode"}) {
    EXPECT_EQ(str(by_name.at(name).if_contains("parentSpanId")), str(req.if_contains("spanId"))) << name;
  }
  EXPECT_LE(nanos(by_name.at("prefill"), "endTimeUnixNano"), nanos(by_name.at("decode"), "startTimeUnixNano"));
}

TEST(Traces, InvalidTraceparentStartsANewTrace) {
  CaptureServer collector;
  ServerProcess server({"--fake-engine", "--otlp-endpoint", collector.url()}, ZL_TEST_SERVER);
  ASSERT_TRUE(server.ok());
  HttpReply r = fetch(server.port(), "POST", "/v1/chat/completions",
                      R"({"model":"m","max_tokens":3,"messages":[{"role":"user","content":"Hi"}]})",
                      {"traceparent: 00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01"});
  ASSERT_EQ(r.status, 200) << r.body;
  std::vector<std::string> bodies;
  ASSERT_TRUE(collector.wait_for([&](const std::vector<std::string>& b) {
    bodies = b;
    return all_spans(b).size() >= 4;
  }));
  for (const json::object& s : all_spans(bodies)) {
    if (str(s.if_contains("name")) != "request") continue;
    EXPECT_EQ(str(s.if_contains("traceId")).size(), 32u);
    EXPECT_NE(str(s.if_contains("traceId")), "4bf92f3577b34da6a3ce929d0e0e4736");
    EXPECT_FALSE(s.contains("parentSpanId"));
    EXPECT_EQ(attr(s, "zerolayer.api"), "openai");
  }
}

TEST(Traces, CollectorDownDropsAndServingGoesOn) {
  ServerProcess server({"--fake-engine", "--otlp-endpoint", "http://127.0.0.1:" + std::to_string(closed_port())},
                       ZL_TEST_SERVER);
  ASSERT_TRUE(server.ok());
  for (bool stream : {false, true}) {
    HttpReply r = fetch(server.port(), "POST", "/v1/messages", message_body(stream));
    EXPECT_EQ(r.status, 200) << r.body;
  }
  EXPECT_TRUE(wait_until([&] { return metric(server.port(), "engine_trace_spans_dropped_total") >= 8; }));
  EXPECT_EQ(metric(server.port(), "engine_trace_spans_exported_total"), 0);
  EXPECT_EQ(fetch(server.port(), "POST", "/v1/messages", message_body(false)).status, 200);
}

// A collector that accepts connections (the kernel's backlog) but never
// answers: every POST ends at the send timeout, the spans are dropped, the
// server answers meanwhile, and its shutdown is bounded by the exporter's.
TEST(Traces, StalledCollectorTimesOutAndShutdownIsBounded) {
  asio::io_context ioc;
  tcp::acceptor silent(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));  // listens, never accepts
  ServerProcess server({"--fake-engine", "--otlp-endpoint",
                        "http://127.0.0.1:" + std::to_string(silent.local_endpoint().port())},
                       ZL_TEST_SERVER);
  ASSERT_TRUE(server.ok());
  ASSERT_EQ(fetch(server.port(), "POST", "/v1/messages", message_body(false)).status, 200);
  // The first batch leaves after the 1 s flush interval and hangs in the send:
  // requests are answered while it does.
  for (int i = 0; i < 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(fetch(server.port(), "POST", "/v1/messages", message_body(false)).status, 200);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
  }
  // Two attempts of 2 s each, then the batch is dropped.
  EXPECT_TRUE(wait_until([&] { return metric(server.port(), "engine_trace_spans_dropped_total") >= 4; }));
  EXPECT_EQ(metric(server.port(), "engine_trace_spans_exported_total"), 0);
  // More spans, one more stalled batch: SIGTERM returns within about the 2 s
  // shutdown timeout (plus the process's own exit), not after every timeout.
  ASSERT_EQ(fetch(server.port(), "POST", "/v1/messages", message_body(false)).status, 200);
  ASSERT_TRUE(wait_until([&] {
    return metric(server.port(), "engine_trace_spans_dropped_total") >= 16;  // the first four requests' spans
  }));
  ASSERT_EQ(fetch(server.port(), "POST", "/v1/messages", message_body(false)).status, 200);
  const auto t_stop = std::chrono::steady_clock::now();
  EXPECT_EQ(server.stop(), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t_stop, std::chrono::milliseconds(4500));
}

TEST(Traces, BadEndpointIsAUsageError) {
  ServerProcess server({"--fake-engine", "--otlp-endpoint", "https://collector:4318"}, ZL_TEST_SERVER);
  EXPECT_FALSE(server.ok());
  EXPECT_EQ(server.wait_exit(10000), 2);
}

TEST(TraceExporter, FlushesAtShutdownAndCountsRefusals) {
  CaptureServer refusing(400);
  {
    auto ex = obs::TraceExporter::create({.endpoint = refusing.url(), .flush_interval = std::chrono::hours(1)});
    ASSERT_TRUE(ex.ok());
    ex.value()->record(obs::RequestTrace{.request_id = "r1", .t_start = std::chrono::steady_clock::now(),
                                         .t_end = std::chrono::steady_clock::now()});
    // The destructor flushes: one POST (a 400 is not retried), one span dropped.
    ex.value().reset();
  }
  EXPECT_TRUE(refusing.wait_for([](const std::vector<std::string>& b) { return b.size() == 1; }));
  CaptureServer accepting;
  auto ex = obs::TraceExporter::create({.endpoint = accepting.url(), .max_queue_spans = 3,
                                        .flush_interval = std::chrono::hours(1)});
  ASSERT_TRUE(ex.ok());
  const auto now = std::chrono::steady_clock::now();
  // Request + queue span (2); the next request's 2 do not fit a queue of 3.
  ex.value()->record(obs::RequestTrace{.t_start = now, .t_submit = now, .t_scheduled = now, .t_end = now});
  ex.value()->record(obs::RequestTrace{.t_start = now, .t_submit = now, .t_scheduled = now, .t_end = now});
  EXPECT_EQ(ex.value()->spans_dropped(), 2u);
  ex.value().reset();
  EXPECT_TRUE(accepting.wait_for([](const std::vector<std::string>& b) { return all_spans(b).size() == 2; }));
}

// A POST in flight when the exporter is destroyed is cancelled at the
// shutdown timeout, not left to its own (long) send timeout.
TEST(TraceExporter, ShutdownCancelsAStalledPost) {
  asio::io_context ioc;
  tcp::acceptor silent(ioc, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  auto ex = obs::TraceExporter::create({.endpoint = "http://127.0.0.1:" + std::to_string(silent.local_endpoint().port()),
                                        .max_batch_spans = 1,
                                        .send_timeout = std::chrono::seconds(30),
                                        .shutdown_timeout = std::chrono::milliseconds(200)});
  ASSERT_TRUE(ex.ok());
  const auto now = std::chrono::steady_clock::now();
  ex.value()->record(obs::RequestTrace{.t_start = now, .t_end = now});  // one span: a batch at once
  // The POST is in flight once its connection is accepted (and then never answered).
  tcp::socket conn(ioc);
  silent.accept(conn);
  const auto t0 = std::chrono::steady_clock::now();
  ex.value().reset();
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(took, std::chrono::seconds(3));
  EXPECT_GE(took, std::chrono::milliseconds(150));
}

// Runs the test server with stderr into a temporary file; returns it.
struct LoggedServer {
  std::unique_ptr<ServerProcess> server;
  FILE* err = nullptr;
  std::string log() const {
    std::fflush(err);
    return read_file("/proc/self/fd/" + std::to_string(fileno(err)));
  }
};

LoggedServer start_logged(const std::vector<std::string>& args) {
  LoggedServer s;
  s.err = std::tmpfile();
  const int saved = dup(2);
  dup2(fileno(s.err), 2);  // the child inherits it as its stderr
  s.server = std::make_unique<ServerProcess>(args, ZL_TEST_SERVER);
  dup2(saved, 2);
  close(saved);
  return s;
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < s.size()) {
    size_t end = s.find('\n', pos);
    if (end == std::string::npos) end = s.size();
    if (end > pos) out.push_back(s.substr(pos, end - pos));
    pos = end + 1;
  }
  return out;
}

TEST(LogFormat, JsonLinesForStartupAndRequests) {
  LoggedServer s = start_logged({"--fake-engine", "--log-format", "json"});
  ASSERT_TRUE(s.server->ok());
  HttpReply r = fetch(s.server->port(), "POST", "/v1/messages", message_body(false));
  ASSERT_EQ(r.status, 200);
  const std::string id = r.header("request-id");
  ASSERT_TRUE(wait_until([&] { return s.log().find(id) != std::string::npos; }));
  bool saw_startup = false, saw_request = false;
  for (const std::string& line : lines_of(s.log())) {
    json::object o = parse_obj(line);
    EXPECT_FALSE(str(o.if_contains("ts")).empty()) << line;
    EXPECT_FALSE(str(o.if_contains("level")).empty()) << line;
    saw_startup = saw_startup || str(o.if_contains("msg")) == "serving";
    saw_request = saw_request || str(o.if_contains("request_id")) == id;
  }
  EXPECT_TRUE(saw_startup) << s.log();
  EXPECT_TRUE(saw_request) << s.log();
  std::fclose(s.err);
}

TEST(LogFormat, TextLinesForHumans) {
  // The environment variable, overridden by nothing: text.
  setenv("ZEROLAYER_LOG_FORMAT", "text", 1);
  LoggedServer s = start_logged({"--fake-engine"});
  unsetenv("ZEROLAYER_LOG_FORMAT");
  ASSERT_TRUE(s.server->ok());
  HttpReply r = fetch(s.server->port(), "POST", "/v1/messages", message_body(false));
  ASSERT_EQ(r.status, 200);
  const std::string id = r.header("request-id");
  ASSERT_TRUE(wait_until([&] { return s.log().find(id) != std::string::npos; }));
  const std::vector<std::string> lines = lines_of(s.log());
  ASSERT_FALSE(lines.empty());
  bool saw_startup = false;
  for (const std::string& line : lines) {
    EXPECT_NE(line.front(), '{') << line;
    saw_startup = saw_startup || line.find(" INFO serving") != std::string::npos;
  }
  EXPECT_TRUE(saw_startup) << s.log();
  std::fclose(s.err);
}

TEST(LogFormat, FlagOverridesEnvironmentAndBadValueIsRefused) {
  setenv("ZEROLAYER_LOG_FORMAT", "text", 1);
  LoggedServer s = start_logged({"--fake-engine", "--log-format", "json"});
  unsetenv("ZEROLAYER_LOG_FORMAT");
  ASSERT_TRUE(s.server->ok());
  ASSERT_TRUE(wait_until([&] { return s.log().find("serving") != std::string::npos; }));
  EXPECT_EQ(s.log().front(), '{') << s.log();
  std::fclose(s.err);
  ServerProcess bad({"--fake-engine", "--log-format", "xml"}, ZL_TEST_SERVER);
  EXPECT_FALSE(bad.ok());
  EXPECT_EQ(bad.wait_exit(10000), 2);
}

}  // namespace
}  // namespace zl::test
