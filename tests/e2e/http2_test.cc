// HTTP/2 and TLS end to end, with real clients against
// `zerolayer_test_server serve --fake-engine` (and stories260K for the
// backpressure check): curl (--http2-prior-knowledge, --http2 over h2c
// upgrade and over TLS), Node's http2 module (tests/e2e/http2_client.mjs:
// pacing, settings, cancellation, the rapid-reset flood, a slow reader),
// h2load (hundreds of multiplexed streams) and openssl (the test's own CA
// and certificate). Each test skips when its program is missing.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <csignal>
#include <string>
#include <vector>

#include "support/http_client.h"
#include "support/metric_scrape.h"
#include "support/process.h"
#include "support/prom_text.h"
#include "support/real_model.h"
#include "support/temp_files.h"
#include "support/wait.h"

namespace zl::test {
namespace {

namespace json = boost::json;
using testing_support::register_temp_cleanup;
using testing_support::temp_file;

const auto* const kCleanup = register_temp_cleanup("http2_test");

bool has_program(const std::string& name) {
  return run_command("command -v " + name + " >/dev/null 2>&1").exit_code == 0;
}

#define REQUIRE_PROGRAM(name) \
  if (!has_program(name)) GTEST_SKIP() << "SKIPPED: " << name << " is not installed"

std::string url(int port, bool tls = false) {
  return std::string(tls ? "https://localhost:" : "http://127.0.0.1:") + std::to_string(port);
}

// A test CA and a server certificate for localhost/127.0.0.1 signed by it,
// as test temp files: ca.pem, cert.pem (the leaf then the CA: a chain), key.pem.
struct TestPki {
  std::string ca, cert, key;
  bool ok = false;
};

TestPki make_pki(const std::string& name) {
  const std::string p = temp_file("http2_test", name + "_");
  TestPki pki{.ca = p + "ca.pem", .cert = p + "cert.pem", .key = p + "key.pem"};
  const std::string ec = " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  const std::string cmd =
      "set -e; openssl req -x509" + ec + " -keyout " + p + "ca.key -out " + pki.ca +
      " -days 2 -subj /CN=zerolayer-test-ca 2>/dev/null"
      "; openssl req" + ec + " -keyout " + pki.key + " -out " + p + "leaf.csr -subj /CN=localhost 2>/dev/null"
      "; printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > " + p + "ext.cnf"
      "; openssl x509 -req -in " + p + "leaf.csr -CA " + pki.ca + " -CAkey " + p + "ca.key -CAcreateserial -CAserial " +
      p + "ca.srl -out " + p + "leaf.pem -days 2 -extfile " + p + "ext.cnf 2>/dev/null"
      "; cat " + p + "leaf.pem " + pki.ca + " > " + pki.cert;
  pki.ok = run_command(cmd).exit_code == 0;
  return pki;
}

// `node http2_client.mjs MODE URL ARG` -> its JSON line.
json::object node_client(const std::string& mode, const std::string& u, const std::string& arg = "",
                         const std::string& ca = "") {
  const std::string cmd = (ca.empty() ? "" : "ZL_CA=" + ca + " ") + "node " + ZL_SOURCE_DIR +
                          "/tests/e2e/http2_client.mjs " + mode + " " + u + " " + arg;
  CommandResult r = run_command(cmd);
  json::error_code ec;
  json::value v = json::parse(r.out, ec);
  if (ec || !v.is_object()) {
    ADD_FAILURE() << cmd << " printed: " << r.out;
    return {};
  }
  EXPECT_FALSE(v.as_object().contains("error")) << r.out;
  return v.as_object();
}

int64_t num(const json::object& o, const char* key) {
  const json::value* v = o.if_contains(key);
  if (!v) return -1;
  if (v->is_int64()) return v->as_int64();
  if (v->is_double()) return static_cast<int64_t>(v->as_double());
  if (v->is_bool()) return v->as_bool() ? 1 : 0;
  return -1;
}

std::string curl(const std::string& args) { return run_command("curl -s --max-time 20 " + args).out; }

constexpr const char* kChat =
    R"({"model":"m","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"Hi"}]})";
constexpr const char* kMessages = R"({"model":"m","max_tokens":8,"messages":[{"role":"user","content":"Hi"}]})";

std::vector<std::string> fake_args(std::vector<std::string> extra = {}) {
  std::vector<std::string> a = {"--fake-engine", "--fake-step-us", "500", "--request-log", "false"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

TEST(Http2, CurlPriorKnowledgeStreamsAndAnswers) {
  REQUIRE_PROGRAM("curl");
  ServerProcess s(fake_args(), ZL_TEST_SERVER);
  ASSERT_TRUE(s.ok());
  const std::string head = curl("--http2-prior-knowledge -i " + url(s.port()) + "/v1/models");
  EXPECT_EQ(head.rfind("HTTP/2 200", 0), 0u) << head;
  EXPECT_NE(head.find("\nrequest-id: req_"), std::string::npos) << head;
  // A streamed answer: SSE frames over DATA, ending with [DONE].
  const std::string sse = curl("--http2-prior-knowledge -N -H 'content-type: application/json' -d '" +
                               std::string(kChat) + "' " + url(s.port()) + "/v1/chat/completions");
  EXPECT_NE(sse.find("data: {"), std::string::npos) << sse;
  EXPECT_NE(sse.find("data: [DONE]\n\n"), std::string::npos) << sse;
  // A complete answer, and an error in the API's envelope.
  const std::string msg = curl("--http2-prior-knowledge -H 'content-type: application/json' -d '" +
                               std::string(kMessages) + "' " + url(s.port()) + "/v1/messages");
  EXPECT_NE(msg.find(R"("type":"message")"), std::string::npos) << msg;
  const std::string missing = curl("--http2-prior-knowledge -i " + url(s.port()) + "/v1/nope");
  EXPECT_EQ(missing.rfind("HTTP/2 404", 0), 0u) << missing;
  // HTTP/1.1 on the same port goes on as before.
  EXPECT_EQ(curl("--http1.1 -i " + url(s.port()) + "/v1/models").rfind("HTTP/1.1 200", 0), 0u);
  EXPECT_GE(scrape_metric(s.port(), "zerolayer_http2_connections_total"), 3);
}

// Limits over h2: a header list past --max-header-bytes and a body past
// --max-body-bytes are 413 (reasons headers_too_large, body_too_large) in the
// API's envelope, as over HTTP/1.1; the connection goes on.
TEST(Http2, HeaderAndBodyLimits) {
  REQUIRE_PROGRAM("curl");
  ServerProcess s(fake_args({"--max-body-bytes", "2048", "--max-header-bytes", "8192"}), ZL_TEST_SERVER);
  ASSERT_TRUE(s.ok());
  std::string big_header;
  for (int i = 0; i < 4; ++i) big_header += " -H 'x-big" + std::to_string(i) + ": " + std::string(3000, 'a') + "'";
  const std::string h = curl("--http2-prior-knowledge -i " + big_header + " " + url(s.port()) + "/v1/models");
  EXPECT_EQ(h.rfind("HTTP/2 413", 0), 0u) << h.substr(0, 300);  // as over HTTP/1.1
  EXPECT_NE(h.find(R"("reason":"headers_too_large")"), std::string::npos) << h.substr(0, 600);
  const std::string body = temp_file("http2_test", "big_body.json");
  ASSERT_EQ(run_command("head -c 4096 /dev/zero | tr '\\0' a > " + body).exit_code, 0);
  const std::string b = curl("--http2-prior-knowledge -i -H 'content-type: application/json' --data-binary @" + body +
                             " " + url(s.port()) + "/v1/messages");
  EXPECT_EQ(b.rfind("HTTP/2 413", 0), 0u) << b.substr(0, 300);
  EXPECT_NE(b.find(R"("type":"error")"), std::string::npos) << b;
  EXPECT_EQ(curl("--http2-prior-knowledge -i " + url(s.port()) + "/v1/models").rfind("HTTP/2 200", 0), 0u);
}

TEST(Http2, CurlUpgradeH2c) {
  REQUIRE_PROGRAM("curl");
  ServerProcess s(fake_args(), ZL_TEST_SERVER);
  ASSERT_TRUE(s.ok());
  const std::string out = curl("--http2 -i " + url(s.port()) + "/v1/models");
  EXPECT_EQ(out.rfind("HTTP/1.1 101 Switching Protocols", 0), 0u) << out;
  EXPECT_NE(out.find("HTTP/2 200"), std::string::npos) << out;
  EXPECT_NE(out.find(R"("object":"list")"), std::string::npos) << out;
}

TEST(Http2, TlsAlpnH2AndHttp11) {
  REQUIRE_PROGRAM("curl");
  REQUIRE_PROGRAM("openssl");
  TestPki pki = make_pki("tls_alpn");
  ASSERT_TRUE(pki.ok);
  ServerProcess s(fake_args({"--tls-cert", pki.cert, "--tls-key", pki.key}), ZL_TEST_SERVER);
  ASSERT_TRUE(s.ok()) << s.startup_line();
  EXPECT_NE(s.startup_line().find("https://127.0.0.1:"), std::string::npos) << s.startup_line();
  const std::string base = "--cacert " + pki.ca + " " + url(s.port(), true);
  const std::string h2 = curl("--http2 -i " + base + "/v1/models");
  EXPECT_EQ(h2.rfind("HTTP/2 200", 0), 0u) << h2;
  const std::string sse = curl("--http2 -N -H 'content-type: application/json' -d '" + std::string(kChat) + "' " +
                               base + "/v1/chat/completions");
  EXPECT_NE(sse.find("data: [DONE]\n\n"), std::string::npos) << sse;
  const std::string h1 = curl("--http1.1 -i " + base + "/v1/models");
  EXPECT_EQ(h1.rfind("HTTP/1.1 200", 0), 0u) << h1;
  // With TLS on, the port speaks only TLS; TLS 1.1 and older are refused.
  EXPECT_NE(run_command("curl -s --max-time 5 " + url(s.port()) + "/v1/models").exit_code, 0);
  EXPECT_NE(run_command("curl -s --max-time 5 --tlsv1.1 --tls-max 1.1 " + base + "/v1/models").exit_code, 0);
  EXPECT_EQ(run_command("curl -s --max-time 5 --tlsv1.2 --tls-max 1.2 " + base + "/v1/models").exit_code, 0);
}

TEST(Http2, TlsReloadOnSighup) {
  REQUIRE_PROGRAM("curl");
  REQUIRE_PROGRAM("openssl");
  TestPki first = make_pki("reload_first");
  TestPki second = make_pki("reload_second");
  ASSERT_TRUE(first.ok && second.ok);
  const std::string cert = temp_file("http2_test", "reload_cert.pem");
  const std::string key = temp_file("http2_test", "reload_key.pem");
  ASSERT_EQ(run_command("cp " + first.cert + " " + cert + " && cp " + first.key + " " + key).exit_code, 0);
  ServerProcess s(fake_args({"--tls-cert", cert, "--tls-key", key}), ZL_TEST_SERVER);
  ASSERT_TRUE(s.ok());
  const std::string u = url(s.port(), true) + "/v1/models";
  EXPECT_EQ(run_command("curl -s --max-time 5 --cacert " + first.ca + " " + u).exit_code, 0);
  // A broken file at SIGHUP keeps the certificate in force.
  ASSERT_EQ(run_command("echo broken > " + cert).exit_code, 0);
  s.signal(SIGHUP);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(run_command("curl -s --max-time 5 --cacert " + first.ca + " " + u).exit_code, 0);
  // The second CA's certificate after SIGHUP.
  ASSERT_EQ(run_command("cp " + second.cert + " " + cert + " && cp " + second.key + " " + key).exit_code, 0);
  s.signal(SIGHUP);
  EXPECT_TRUE(wait_until(
      [&] { return run_command("curl -s --max-time 5 --cacert " + second.ca + " " + u).exit_code == 0; },
      std::chrono::seconds(5)));
  EXPECT_NE(run_command("curl -s --max-time 5 --cacert " + first.ca + " " + u).exit_code, 0);
}

TEST(Http2, TlsWithoutKeyIsAUsageError) {
  CommandResult r = run_command(std::string(ZL_TEST_SERVER) + " serve --fake-engine --port 0 --tls-cert x.pem 2>&1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("tls-key"), std::string::npos) << r.out;
  CommandResult missing = run_command(std::string(ZL_TEST_SERVER) +
                                      " serve --fake-engine --port 0 --tls-cert /nonexistent.pem --tls-key k.pem 2>&1");
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.out.find("/nonexistent.pem"), std::string::npos) << missing.out;
}

TEST(Http2, NodeStreamingPacingAndSettings) {
  REQUIRE_PROGRAM("node");
  ServerProcess s(fake_args({"--h2-max-concurrent-streams", "64"}), ZL_TEST_SERVER);
  ASSERT_TRUE(s.ok());
  json::object settings = node_client("settings", url(s.port()));
  EXPECT_EQ(num(settings, "maxConcurrentStreams"), 64);
  EXPECT_EQ(num(settings, "headerTableSize"), 4096);
  EXPECT_EQ(num(settings, "models_status"), 200);
  // min_delay_ms paces the content events over h2 as over HTTP/1.1.
  json::object paced = node_client("stream", url(s.port()), "150");
  EXPECT_EQ(num(paced, "status"), 200);
  EXPECT_EQ(num(paced, "done"), 1);
  EXPECT_GE(num(paced, "n_chunks"), 3);
  // Tokens come 50 ms apart ([[fake:slow]]); paced, 150 ms (arrival jitter on a loaded machine allowed).
  EXPECT_GE(num(paced, "min_gap_ms"), 100) << json::serialize(paced);
  // A stream reset by the client ends its request in the engine.
  json::object cancelled = node_client("cancel", url(s.port()));
  EXPECT_EQ(num(cancelled, "running_after"), 0) << json::serialize(cancelled);
}

TEST(Http2, NodeOverTlsWithTestCa) {
  REQUIRE_PROGRAM("node");
  REQUIRE_PROGRAM("openssl");
  TestPki pki = make_pki("node_tls");
  ASSERT_TRUE(pki.ok);
  ServerProcess s(fake_args({"--tls-cert", pki.cert, "--tls-key", pki.key}), ZL_TEST_SERVER);
  ASSERT_TRUE(s.ok());
  json::object settings = node_client("settings", url(s.port(), true), "", pki.ca);
  EXPECT_EQ(settings["alpn"], "h2");
  EXPECT_EQ(num(settings, "models_status"), 200);
  json::object paced = node_client("stream", url(s.port(), true), "100", pki.ca);
  EXPECT_EQ(num(paced, "done"), 1);
}

// CVE-2023-44487: a flood of open-then-cancel streams closes the connection
// with GOAWAY(ENHANCE_YOUR_CALM) and leaves nothing running behind it.
TEST(Http2, RapidResetFloodIsCutAndLeavesNoWork) {
  REQUIRE_PROGRAM("node");
  ServerProcess s(fake_args({"--h2-max-resets-per-s", "50"}), ZL_TEST_SERVER);
  ASSERT_TRUE(s.ok());
  json::object r = node_client("rapid-reset", url(s.port()), "3000");
  EXPECT_EQ(num(r, "goaway_code"), 11) << json::serialize(r);  // ENHANCE_YOUR_CALM
  EXPECT_LT(num(r, "sent"), 3000);
  EXPECT_TRUE(wait_until([&] {
    return scrape_metric(s.port(), "engine_requests_running") == 0 && scrape_metric(s.port(), "engine_kv_blocks_used") == 0;
  }, std::chrono::seconds(10)));
  EXPECT_GE(scrape_metric(s.port(), "zerolayer_http2_abuse_closed_total"), 1);
  // The server goes on.
  const std::string next = curl("--http2-prior-knowledge -i -H 'content-type: application/json' -d '" +
                                std::string(kMessages) + "' " + url(s.port()) + "/v1/messages");
  EXPECT_EQ(next.rfind("HTTP/2 200", 0), 0u) << next;
}

// One HTTP/2 frame: a 9-byte header (length, type, flags, stream id) and its payload.
std::string frame(uint8_t type, uint8_t flags, uint32_t stream, const std::string& payload) {
  std::string f;
  const size_t n = payload.size();
  f += static_cast<char>((n >> 16) & 0xff);
  f += static_cast<char>((n >> 8) & 0xff);
  f += static_cast<char>(n & 0xff);
  f += static_cast<char>(type);
  f += static_cast<char>(flags);
  for (int shift = 24; shift >= 0; shift -= 8) f += static_cast<char>((stream >> shift) & 0xff);
  return f + payload;
}

// The error code of the first GOAWAY in `bytes` (server frames), or -1.
int64_t goaway_code(const std::string& bytes) {
  size_t pos = 0;
  while (pos + 9 <= bytes.size()) {
    const auto* b = reinterpret_cast<const uint8_t*>(bytes.data() + pos);
    const size_t len = (size_t{b[0]} << 16) | (size_t{b[1]} << 8) | b[2];
    if (pos + 9 + len > bytes.size()) break;
    if (b[3] == 7 && len >= 8) {
      const uint8_t* e = b + 9 + 4;
      return (int64_t{e[0]} << 24) | (int64_t{e[1]} << 16) | (int64_t{e[2]} << 8) | e[3];
    }
    pos += 9 + len;
  }
  return -1;
}

// A PING flood (frames written by hand) is cut with GOAWAY(ENHANCE_YOUR_CALM).
TEST(Http2, PingFloodIsCut) {
  ServerProcess s(fake_args(), ZL_TEST_SERVER);
  ASSERT_TRUE(s.ok());
  RawClient c(s.port());
  ASSERT_TRUE(c.connected());
  std::string flood = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, "");
  for (int i = 0; i < 500; ++i) flood += frame(6, 0, 0, std::string(8, static_cast<char>(i)));
  c.send_raw(flood);
  c.read_until([](const std::string& b) { return goaway_code(b) >= 0; }, 5000);
  EXPECT_EQ(goaway_code(c.buffer()), 11);  // ENHANCE_YOUR_CALM
  EXPECT_TRUE(c.wait_closed(5000));
  EXPECT_GE(scrape_metric(s.port(), "zerolayer_http2_abuse_closed_total"), 1);
}

// Slow starts are cut at --header-timeout-ms: half an HTTP/2 preface, a TLS
// client that never says hello.
TEST(Http2, PrefaceAndHandshakeTimeouts) {
  ServerProcess s(fake_args({"--header-timeout-ms", "300"}), ZL_TEST_SERVER);
  ASSERT_TRUE(s.ok());
  RawClient half(s.port());
  ASSERT_TRUE(half.send_raw("PRI * HTTP/2.0\r\n"));
  EXPECT_TRUE(half.wait_closed(5000));
  RawClient silent_h2(s.port());
  ASSERT_TRUE(silent_h2.send_raw("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"));  // the preface, then no SETTINGS
  EXPECT_TRUE(silent_h2.wait_closed(5000));
  if (!has_program("openssl")) GTEST_SKIP() << "SKIPPED: openssl is not installed (the TLS half)";
  TestPki pki = make_pki("timeouts");
  ASSERT_TRUE(pki.ok);
  ServerProcess t(fake_args({"--header-timeout-ms", "300", "--tls-cert", pki.cert, "--tls-key", pki.key}),
                  ZL_TEST_SERVER);
  ASSERT_TRUE(t.ok());
  RawClient silent_tls(t.port());
  ASSERT_TRUE(silent_tls.connected());
  EXPECT_TRUE(silent_tls.wait_closed(5000));
}

TEST(Http2, H2loadHundredsOfMultiplexedStreams) {
  REQUIRE_PROGRAM("h2load");
  ServerProcess s({"--fake-engine", "--fake-step-us", "50", "--request-log", "false", "--h2-max-concurrent-streams",
                   "256"},
                  ZL_TEST_SERVER);
  ASSERT_TRUE(s.ok());
  const std::string body = temp_file("http2_test", "h2load_body.json");
  ASSERT_EQ(run_command(std::string("printf '%s' '") + kMessages + "' > " + body).exit_code, 0);
  CommandResult r = run_command("timeout 60 h2load -n 1200 -c 2 -m 300 -d " + body +
                                " -H 'content-type: application/json' " + url(s.port()) + "/v1/messages 2>&1");
  EXPECT_NE(r.out.find("1200 succeeded, 0 failed, 0 errored, 0 timeout"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("status codes: 1200 2xx"), std::string::npos) << r.out;
  EXPECT_EQ(scrape_metric(s.port(), "engine_requests_running"), 0);
}

// Backpressure on the real engine: a stream whose flow-control window stays
// full pauses its sequence, which resumes once the client reads.
TEST(Http2, SlowReaderPausesTheSequenceRealModel) {
  REQUIRE_MODEL();
  REQUIRE_PROGRAM("node");
  ServerProcess s(real_model_args({"--ctx", "1024", "--parallel", "2", "--max-pending-events", "8"}));
  ASSERT_TRUE(s.ok());
  json::object r = node_client("slow-reader", url(s.port()));
  EXPECT_EQ(num(r, "status"), 200);
  EXPECT_EQ(num(r, "paused_seen"), 1) << json::serialize(r);
  EXPECT_EQ(num(r, "done"), 1);
  EXPECT_TRUE(wait_until([&] {
    return scrape_metric(s.port(), "engine_requests_paused") == 0 && scrape_metric(s.port(), "engine_requests_running") == 0;
  }, std::chrono::seconds(10)));
}

// Drain: GOAWAY(NO_ERROR) to an h2 client; its stream in progress completes.
TEST(Http2, DrainLetsTheStreamInProgressFinish) {
  REQUIRE_PROGRAM("curl");
  ServerProcess s(fake_args(), ZL_TEST_SERVER);
  ASSERT_TRUE(s.ok());
  const std::string out = temp_file("http2_test", "drain_out.txt");
  const std::string body =
      R"({"model":"m","max_tokens":20,"stream":true,"messages":[{"role":"user","content":"[[fake:slow]] Hi"}]})";
  const std::string cmd = "curl -s --max-time 20 --http2-prior-knowledge -N -H 'content-type: application/json' -d '" +
                          body + "' " + url(s.port()) + "/v1/chat/completions > " + out + " &";
  ASSERT_EQ(run_command(cmd).exit_code, 0);
  ASSERT_TRUE(wait_until([&] { return scrape_metric(s.port(), "engine_requests_running") == 1; }, std::chrono::seconds(5)));
  s.signal(SIGTERM);
  EXPECT_EQ(s.wait_exit(15000), 0);
  EXPECT_NE(read_file(out).find("data: [DONE]"), std::string::npos) << read_file(out);
}

}  // namespace
}  // namespace zl::test
