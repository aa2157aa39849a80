// Admission control end to end on `zerolayer serve` with the real engine and
// stories260K: a full queue is 529 overloaded_error (OpenAI routes: 503) with
// retry-after while the running request finishes normally; a request that
// waits past --queue-timeout-ms gets queue_timeout, as an HTTP error or, on a
// stream already committed by keep-alive pings, as the SSE error event; and a
// stream whose client stops reading is preempted after --max-pause-ms so that
// another request runs, then resumes exactly once its client reads.
//
// The batch slot (--parallel 1) is held by a "holder": a streaming request
// whose client does not read, so backpressure pauses it in the batch (small
// socket buffers and --max-pending-events make that quick). Skipped, with a
// message, when ../shared is absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <boost/json.hpp>
#include <memory>
#include <string>
#include <vector>

#include "support/http_client.h"
#include "support/json_object.h"
#include "support/metric_scrape.h"
#include "support/process.h"
#include "support/prom_text.h"
#include "support/real_model.h"
#include "support/wait.h"

namespace zl::test {
namespace {

namespace json = boost::json;

std::string str(const json::value& v) { return v.is_string() ? std::string(v.get_string()) : "<not a string>"; }

// One batch slot, a 1024-token window, and backpressure that engages fast.
std::vector<std::string> server_args(std::vector<std::string> extra) {
  std::vector<std::string> args = {"--parallel", "1", "--ctx", "1024", "--max-pending-events", "8",
                                   "--socket-send-buffer", "16384"};
  args.insert(args.end(), extra.begin(), extra.end());
  return real_model_args(args);
}

bool wait_metric(int port, const std::string& name, double value) {
  return wait_until([&] { return scrape_metric(port, name) == value; });
}

// stories260K's end-of-sequence id, banned: the holder runs to the window.
constexpr const char* kHolderBody =
    R"({"model":"m","max_tokens":100000,"stream":true,"temperature":0,"logit_bias":{"2":-100},)"
    R"("stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Tell me a long story"}]})";

// Starts the holder on `c` (a client with a small receive buffer that does
// not read) and waits until it is paused in the batch (or, with
// --max-pause-ms, already preempted for it).
void start_holder(int port, RawClient& c) {
  ASSERT_TRUE(c.send_raw(http_request("POST", "/v1/chat/completions", kHolderBody)));
  ASSERT_TRUE(wait_until([&] {
    return scrape_metric(port, "engine_requests_paused") == 1 || scrape_metric(port, "engine_pause_preemptions_total") >= 1;
  })) << "the holder never paused";
}

// Reads the holder's whole stream: 200, [DONE], the window filled. Returns its text.
std::string finish_holder(RawClient& c) {
  HttpReply r = c.read_response(120000);
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(r.status, 200);
  std::vector<SseEvent> ev = parse_sse(r.body);
  EXPECT_GE(ev.size(), 3u);
  if (ev.size() < 3) return "";
  EXPECT_EQ(ev.back().data, "[DONE]");
  std::string text;
  for (size_t i = 0; i + 2 < ev.size(); ++i) {
    // Keep-alive pings (SSE comments) while the holder waits for the slot again.
    if (ev[i].data.empty()) continue;
    json::object o = parse_obj(ev[i].data);
    const json::array& choices = o["choices"].as_array();
    if (choices.empty()) continue;
    const json::object& delta = choices[0].as_object().at("delta").as_object();
    if (const json::value* t = delta.if_contains("content"); t && t->is_string()) text += t->get_string();
  }
  json::object usage = parse_obj(ev[ev.size() - 2].data)["usage"].as_object();
  EXPECT_EQ(usage["prompt_tokens"].as_int64() + usage["completion_tokens"].as_int64(), 1024);
  return text;
}

std::string anthropic_body(bool stream) {
  return std::string(R"({"model":"m","max_tokens":8,"temperature":0,)") + (stream ? R"("stream":true,)" : "") +
         R"("messages":[{"role":"user","content":"Hello"}]})";
}

std::string openai_body(bool stream) {
  return std::string(R"({"model":"m","max_tokens":8,"temperature":0,)") + (stream ? R"("stream":true,)" : "") +
         R"("messages":[{"role":"user","content":"Hello"}]})";
}

// retry-after (whole seconds) and retry-after-ms agree with the body's retry_after_ms.
void expect_retry_headers(const HttpReply& r, const json::object& numbers) {
  ASSERT_TRUE(numbers.contains("retry_after_ms")) << r.body;
  const int64_t ms = numbers.at("retry_after_ms").as_int64();
  EXPECT_GE(ms, 1000);
  EXPECT_EQ(r.header("retry-after-ms"), std::to_string(ms));
  EXPECT_EQ(r.header("retry-after"), std::to_string((ms + 999) / 1000));
}

void expect_anthropic_error(const HttpReply& r, const std::string& reason) {
  EXPECT_EQ(r.status, 529) << r.body;
  json::object o = parse_obj(r.body);
  EXPECT_EQ(str(o["type"]), "error");
  json::object& e = o["error"].as_object();
  EXPECT_EQ(str(e["type"]), "overloaded_error");
  json::object& detail = e["detail"].as_object();
  EXPECT_EQ(str(detail["reason"]), reason);
  expect_retry_headers(r, detail);
}

void expect_openai_error(const HttpReply& r, const std::string& reason) {
  EXPECT_EQ(r.status, 503) << r.body;
  json::object o = parse_obj(r.body);
  json::object& e = o["error"].as_object();
  EXPECT_EQ(str(e["type"]), "overloaded_error");
  EXPECT_EQ(str(e["code"]), reason);
  expect_retry_headers(r, e);
}

TEST(ServerQueueTest, AFullQueueIs529Or503WithRetryAfterAndTheRunningRequestFinishes) {
  REQUIRE_MODEL();
  ServerProcess s(server_args({"--max-queue", "1"}));
  ASSERT_TRUE(s.ok()) << s.startup_line();
  const int port = s.port();
  RawClient holder(port, /*rcvbuf_bytes=*/4096);
  start_holder(port, holder);
  // One request waits: the queue is full.
  RawClient queued(port);
  ASSERT_TRUE(queued.send_raw(http_request("POST", "/v1/messages", anthropic_body(false))));
  ASSERT_TRUE(wait_metric(port, "engine_queue_requests", 1));
  EXPECT_GT(scrape_metric(port, "engine_queue_prompt_tokens"), 0);
  for (bool stream : {false, true}) {
    expect_anthropic_error(fetch(port, "POST", "/v1/messages", anthropic_body(stream)), "overloaded");
    expect_openai_error(fetch(port, "POST", "/v1/chat/completions", openai_body(stream)), "overloaded");
  }
  EXPECT_EQ(scrape_metric(port, "engine_requests_rejected_total", {{"api", "anthropic"}, {"reason", "overloaded"}}), 2);
  EXPECT_EQ(scrape_metric(port, "engine_requests_rejected_total", {{"api", "openai"}, {"reason", "overloaded"}}), 2);
  EXPECT_EQ(scrape_metric(port, "engine_requests_running"), 1) << "the holder must still run";
  // Nothing already running was disturbed: the holder fills the window, the queued request answers.
  EXPECT_FALSE(finish_holder(holder).empty());
  HttpReply q = queued.read_response(60000);
  EXPECT_EQ(q.status, 200) << q.body;
  EXPECT_TRUE(wait_metric(port, "engine_queue_requests", 0));
  EXPECT_EQ(scrape_metric(port, "engine_queue_prompt_tokens"), 0);
  // Room again.
  EXPECT_EQ(fetch(port, "POST", "/v1/messages", anthropic_body(false), {}, 60000).status, 200);
}

TEST(ServerQueueTest, TheDefaultBoundIsFourTimesParallel) {
  REQUIRE_MODEL();
  ServerProcess s(server_args({}));  // --parallel 1: 4 may wait
  ASSERT_TRUE(s.ok()) << s.startup_line();
  const int port = s.port();
  RawClient holder(port, /*rcvbuf_bytes=*/4096);
  start_holder(port, holder);
  std::vector<std::unique_ptr<RawClient>> queued;
  for (int i = 0; i < 4; ++i) {
    queued.push_back(std::make_unique<RawClient>(port));
    ASSERT_TRUE(queued.back()->send_raw(http_request("POST", "/v1/messages", anthropic_body(false))));
  }
  ASSERT_TRUE(wait_metric(port, "engine_queue_requests", 4));
  expect_anthropic_error(fetch(port, "POST", "/v1/messages", anthropic_body(false)), "overloaded");
  EXPECT_FALSE(finish_holder(holder).empty());
  for (auto& c : queued) EXPECT_EQ(c->read_response(60000).status, 200);
}

TEST(ServerQueueTest, QueueTimeoutIsAnErrorAnswerOrTheSseErrorEventOnACommittedStream) {
  REQUIRE_MODEL();
  ServerProcess s(server_args({"--queue-timeout-ms", "400", "--sse-ping-interval", "0.05"}));
  ASSERT_TRUE(s.ok()) << s.startup_line();
  const int port = s.port();
  RawClient holder(port, /*rcvbuf_bytes=*/4096);
  start_holder(port, holder);
  expect_anthropic_error(fetch(port, "POST", "/v1/messages", anthropic_body(false)), "queue_timeout");
  expect_openai_error(fetch(port, "POST", "/v1/chat/completions", openai_body(false)), "queue_timeout");
  // Streams: pings commit them (200) while they wait; the timeout is then the SSE error event.
  HttpReply a = fetch(port, "POST", "/v1/messages", anthropic_body(true));
  ASSERT_EQ(a.status, 200) << a.body;
  std::vector<SseEvent> ev = parse_sse(a.body);
  ASSERT_GE(ev.size(), 3u) << a.body;
  EXPECT_EQ(ev.front().event, "message_start");
  EXPECT_TRUE(std::any_of(ev.begin(), ev.end(), [](const SseEvent& e) { return e.event == "ping"; })) << a.body;
  EXPECT_EQ(ev.back().event, "error") << a.body;
  ASSERT_FALSE(ev.back().data.empty()) << a.body;
  json::object err = parse_obj(ev.back().data);
  EXPECT_EQ(str(err["error"].at("type")), "overloaded_error");
  EXPECT_EQ(str(err["error"].at("detail").at("reason")), "queue_timeout");
  EXPECT_GE(err["error"].at("detail").at("retry_after_ms").as_int64(), 1000);
  HttpReply o = fetch(port, "POST", "/v1/chat/completions", openai_body(true));
  ASSERT_EQ(o.status, 200) << o.body;
  ev = parse_sse(o.body);
  ASSERT_FALSE(ev.empty());
  ASSERT_FALSE(ev.back().data.empty()) << o.body;
  err = parse_obj(ev.back().data);
  EXPECT_EQ(str(err["error"].at("code")), "queue_timeout") << o.body;
  EXPECT_EQ(scrape_metric(port, "engine_requests_rejected_total", {{"api", "anthropic"}, {"reason", "queue_timeout"}}), 2);
  // The queue gauge follows the answers on the engine thread: it reaches 0 shortly after.
  EXPECT_TRUE(wait_metric(port, "engine_queue_requests", 0)) << scrape_metric(port, "engine_queue_requests");
  EXPECT_FALSE(finish_holder(holder).empty());
}

TEST(ServerQueueTest, AStreamWhoseClientStopsReadingIsPreemptedAndResumesExactly) {
  REQUIRE_MODEL();
  ServerProcess s(server_args({"--max-pause-ms", "200"}));
  ASSERT_TRUE(s.ok()) << s.startup_line();
  const int port = s.port();
  // The holder's text when read at once.
  RawClient solo(port);
  ASSERT_TRUE(solo.send_raw(http_request("POST", "/v1/chat/completions", kHolderBody)));
  const std::string solo_text = finish_holder(solo);
  ASSERT_FALSE(solo_text.empty());
  RawClient holder(port, /*rcvbuf_bytes=*/4096);
  start_holder(port, holder);
  // Paused past --max-pause-ms, it gives up the only slot: another request runs meanwhile.
  HttpReply other = fetch(port, "POST", "/v1/messages", anthropic_body(false), {}, 60000);
  EXPECT_EQ(other.status, 200) << other.body;
  EXPECT_GE(scrape_metric(port, "engine_pause_preemptions_total"), 1);
  EXPECT_EQ(scrape_metric(port, "engine_preemptions_total"), 0) << "not counted as a KV-pressure preemption";
  // Read now: the same text, no token lost or repeated.
  EXPECT_EQ(finish_holder(holder), solo_text);
  EXPECT_TRUE(wait_metric(port, "engine_requests_running", 0));
}

}  // namespace
}  // namespace zl::test
