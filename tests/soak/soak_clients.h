// The soak test's clients: one function per kind of client, each doing one
// exchange with the server on its own connection and saying how it went.
// Good requests must be answered well (or with the typed overload); hostile
// ones must get their typed 4xx, and cut ones must not disturb anything else.
// Every wait has a deadline: a lost answer is a failure, never a hang.
// Thread-safe: clients share nothing but the port; randomness comes from the
// caller's generator (seeded, so a failing run can be repeated).
#pragma once

#include <array>
#include <memory>
#include <vector>
#include <random>
#include <string>
#include <thread>

#include "soak/soak_checks.h"
#include "support/http_client.h"

namespace zl::soak {

enum class Kind {
  kAnthropic,         // good: POST /v1/messages
  kAnthropicStream,   // good: the same, streamed
  kOpenAIChat,        // good: POST /v1/chat/completions
  kOpenAIChatStream,  // good: the same, streamed
  kCompletion,        // good: POST /v1/completions, streamed or not
  kKeepAlive,         // good: several requests on one connection, two of them pipelined
  kCutStream,         // a stream the client cuts (FIN or RST) at a random byte
  kCutBusy,           // a non-streamed generation the client leaves while it runs
  kSlowReader,        // a stream read a few bytes at a time (backpressure)
  kOversized,         // a body past --max-body-bytes: 413
  kMalformedJson,     // broken or ill-typed JSON: 400
  kMalformedHttp,     // broken HTTP: 4xx
  kOverContext,       // a prompt longer than the context: 400 context_length_exceeded
  kCutPipelined,      // two generations pipelined, the client gone before the answers
  kStalledReader,     // a stream never read (paused by backpressure), then left
  kSlowLoris,         // headers trickled in: cut at the header deadline
  kIdleFlood,         // many connections opened, some with a partial request, then closed
  kCount,
};
constexpr std::array<const char*, static_cast<size_t>(Kind::kCount)> kKindNames = {
    "anthropic", "anthropic_stream", "openai_chat", "openai_chat_stream", "completion", "keep_alive", "cut_stream",
    "cut_busy", "slow_reader", "oversized", "malformed_json", "malformed_http", "over_context", "cut_pipelined", "stalled_reader", "slow_loris", "idle_flood"};
// Relative frequency of each kind.
constexpr std::array<int, static_cast<size_t>(Kind::kCount)> kKindWeights = {10, 10, 8, 8, 5, 4, 8, 6, 3, 3, 6, 6, 4, 2, 2, 1, 1};

enum class Outcome { kOk, kRejected, kOverloaded, kCut, kFail, kCount };
constexpr std::array<const char*, static_cast<size_t>(Outcome::kCount)> kOutcomeNames = {"ok", "rejected", "overloaded",
                                                                                         "cut", "FAIL"};

struct Result {
  Outcome outcome = Outcome::kOk;
  std::string detail;  // kFail: what went wrong
};

struct Target {
  int port = 0;
  int max_body_bytes = 0;  // the server's --max-body-bytes
  int n_ctx = 0;           // the server's --ctx
};

// How long a good answer may take under full load before it counts as lost.
constexpr int kAnswerTimeoutMs = 60000;

using Rng = std::mt19937_64;

inline int uniform(Rng& rng, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }

inline std::string random_prompt(Rng& rng) {
  static const char* const kStarts[] = {"Tell me about the sea.", "Write a short story about a fox.",
                                        "What is a package manager?", "Describe the night sky.",
                                        "Once upon a time", "Explain how a compiler works.", "Hi"};
  static const char* const kWords[] = {"river", "stone", "light", "green", "quickly", "house", "über", "日本", "ok"};
  std::string p = kStarts[uniform(rng, 0, std::size(kStarts) - 1)];
  for (int i = uniform(rng, 0, 12); i > 0; --i) p += std::string(" ") + kWords[uniform(rng, 0, std::size(kWords) - 1)];
  return p;
}

// A good request body of `api` with random sampling settings.
inline std::string good_body(Rng& rng, Api api, bool stream, int max_tokens, const std::string& prompt) {
  json::object b{{"model", "soak"}, {"max_tokens", max_tokens}};
  if (api == Api::kOpenAICompletion) {
    b["prompt"] = prompt;
  } else {
    b["messages"] = json::array{json::object{{"role", "user"}, {"content", prompt}}};
    if (api == Api::kAnthropic && uniform(rng, 0, 3) == 0) b["system"] = "You are terse.";
  }
  if (stream) b["stream"] = true;
  if (uniform(rng, 0, 1) == 0) b["temperature"] = uniform(rng, 0, 10) / 10.0;
  if (uniform(rng, 0, 3) == 0) b["top_p"] = 0.9;
  if (uniform(rng, 0, 4) == 0) {
    if (api == Api::kAnthropic) {
      b["stop_sequences"] = json::array{"the"};
    } else {
      b["stop"] = json::array{"the"};
    }
  }
  if (stream && uniform(rng, 0, 2) == 0) {
    // The stream shaper: small events, coalescing delays (both APIs).
    json::object so{{"max_buffer_size", uniform(rng, 4, 64)}, {"min_delay_ms", uniform(rng, 0, 20)}};
    if (uniform(rng, 0, 1) == 0) so["network_rtt_ms"] = uniform(rng, 0, 300);
    if (api != Api::kAnthropic && uniform(rng, 0, 1) == 0) so["include_usage"] = true;
    b["stream_options"] = std::move(so);
  }
  return json::serialize(b);
}

inline const char* path_of(Api api) {
  switch (api) {
    case Api::kAnthropic: return "/v1/messages";
    case Api::kOpenAIChat: return "/v1/chat/completions";
    case Api::kOpenAICompletion: return "/v1/completions";
  }
  return "/";
}

// Checks one answer to a good request.
inline Result judge_good(const test::HttpReply& r, Api api, bool stream, int max_tokens) {
  if (!r.complete) return {Outcome::kFail, "no complete answer (status " + std::to_string(r.status) + ")"};
  if (typed_overload(r)) return {Outcome::kOverloaded, ""};
  if (r.status != 200) return {Outcome::kFail, "status " + std::to_string(r.status) + ": " + snippet(r.body)};
  bool overloaded = false;
  std::string bad;
  if (stream) {
    if (r.header("content-type").rfind("text/event-stream", 0) != 0) return {Outcome::kFail, "not an event stream"};
    bad = api == Api::kAnthropic ? check_anthropic_stream(r.body, max_tokens, &overloaded)
                                 : check_openai_stream(r.body, api, &overloaded);
  } else {
    json::object o;
    if (!parse_object(r.body, o)) return {Outcome::kFail, "not JSON: " + snippet(r.body)};
    bad = api == Api::kAnthropic ? check_anthropic_message(o, max_tokens) : check_openai_object(o, api, max_tokens);
  }
  if (!bad.empty()) return {Outcome::kFail, bad};
  return {overloaded ? Outcome::kOverloaded : Outcome::kOk, ""};
}

inline Result run_good(const Target& t, Rng& rng, Api api, bool stream) {
  // Now and then past the window: clamped, stopped by the context.
  const int max_tokens = uniform(rng, 0, 15) == 0 ? uniform(rng, 200, 5000) : uniform(rng, 1, 64);
  const std::string body = good_body(rng, api, stream, max_tokens, random_prompt(rng));
  test::RawClient c(t.port);
  if (!c.connected()) return {Outcome::kFail, "connect failed"};
  if (!c.send_raw(test::http_request("POST", path_of(api), body))) return {Outcome::kFail, "send failed"};
  Result res = judge_good(c.read_response(kAnswerTimeoutMs), api, stream, max_tokens);
  if (res.outcome == Outcome::kFail) res.detail += " | request: " + snippet(body);
  return res;
}

inline Api random_api(Rng& rng) { return static_cast<Api>(uniform(rng, 0, 2)); }

// GET /v1/models, count_tokens, then two generations pipelined, on one connection.
inline Result run_keep_alive(const Target& t, Rng& rng) {
  test::RawClient c(t.port);
  if (!c.connected()) return {Outcome::kFail, "connect failed"};
  if (!c.send_raw(test::http_request("GET", "/v1/models", ""))) return {Outcome::kFail, "send failed"};
  test::HttpReply r = c.read_response(kAnswerTimeoutMs);
  if (!r.complete || r.status != 200) return {Outcome::kFail, "/v1/models: status " + std::to_string(r.status)};
  const std::string count = R"({"model":"soak","messages":[{"role":"user","content":"How many tokens?"}]})";
  if (!c.send_raw(test::http_request("POST", "/v1/messages/count_tokens", count))) return {Outcome::kFail, "send failed"};
  r = c.read_response(kAnswerTimeoutMs);
  json::object o;
  if (!r.complete || r.status != 200 || !parse_object(r.body, o) || int_of(o, "input_tokens") <= 0) {
    return {Outcome::kFail, "count_tokens: status " + std::to_string(r.status) + ": " + snippet(r.body)};
  }
  const Api a1 = random_api(rng), a2 = random_api(rng);
  const int m1 = uniform(rng, 1, 32), m2 = uniform(rng, 1, 32);
  const bool s1 = uniform(rng, 0, 1) == 0;
  const std::string pipelined = test::http_request("POST", path_of(a1), good_body(rng, a1, s1, m1, random_prompt(rng))) +
                                test::http_request("POST", path_of(a2), good_body(rng, a2, false, m2, random_prompt(rng)));
  if (!c.send_raw(pipelined)) return {Outcome::kFail, "send failed"};
  Result first = judge_good(c.read_response(kAnswerTimeoutMs), a1, s1, m1);
  if (first.outcome == Outcome::kFail) return {Outcome::kFail, "pipelined 1: " + first.detail};
  Result second = judge_good(c.read_response(kAnswerTimeoutMs), a2, false, m2);
  if (second.outcome == Outcome::kFail) return {Outcome::kFail, "pipelined 2: " + second.detail};
  return first.outcome == Outcome::kOverloaded ? first : second;
}

// The status of the answer head in `bytes`, 0 when none has arrived yet.
inline int status_in(const std::string& bytes) {
  return bytes.rfind("HTTP/1.1 ", 0) == 0 && bytes.size() >= 12 ? std::atoi(bytes.c_str() + 9) : 0;
}

// True when `bytes` hold a whole answer: a chunked body's end, or a head with
// a status other than 200 (error answers are short, one recv).
inline bool answer_ended(const std::string& bytes) {
  if (bytes.size() >= 5 && bytes.compare(bytes.size() - 5, 5, "0\r\n\r\n") == 0) return true;
  const int status = status_in(bytes);
  return status != 0 && status != 200 && bytes.find("\r\n\r\n") != std::string::npos;
}

// A stream (or a non-streamed generation: busy) left at a random moment, by
// FIN or by RST. Whatever status arrived before must not be an untyped 5xx.
inline Result run_cut(const Target& t, Rng& rng, bool stream) {
  const Api api = random_api(rng);
  test::RawClient c(t.port);
  if (!c.connected()) return {Outcome::kFail, "connect failed"};
  const std::string body = good_body(rng, api, stream, uniform(rng, 32, 400), random_prompt(rng));
  if (!c.send_raw(test::http_request("POST", path_of(api), body))) return {Outcome::kFail, "send failed"};
  if (stream) {
    // At the chosen byte, or when the answer has ended before it.
    const size_t cut_at = static_cast<size_t>(uniform(rng, 0, 3000));
    c.read_until([&](const std::string& b) { return b.size() >= cut_at || answer_ended(b); }, kAnswerTimeoutMs);
  } else {
    // Leave while the generation runs (or just after it ended).
    c.read_until([](const std::string& b) { return b.find("\r\n\r\n") != std::string::npos; }, uniform(rng, 0, 150));
  }
  const int status = status_in(c.buffer());
  if (uniform(rng, 0, 1) == 0) {
    c.abort_now();
  } else {
    c.close_now();
  }
  if (status >= 500 && status != 529 && status != 503) return {Outcome::kFail, "status " + std::to_string(status)};
  return {Outcome::kCut, ""};
}

// A stream read a few bytes at a time with pauses, on a small receive buffer:
// the server's socket fills, the stream shaper and the engine pause the
// sequence; the answer must still arrive whole and well-formed.
inline Result run_slow_reader(const Target& t, Rng& rng) {
  const Api api = random_api(rng);
  const int max_tokens = uniform(rng, 64, 200);
  const std::string body = good_body(rng, api, true, max_tokens, random_prompt(rng));
  test::RawClient c(t.port, /*rcvbuf_bytes=*/2048);
  if (!c.connected()) return {Outcome::kFail, "connect failed"};
  if (!c.send_raw(test::http_request("POST", path_of(api), body))) return {Outcome::kFail, "send failed"};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kAnswerTimeoutMs);
  const std::chrono::milliseconds pause(uniform(rng, 1, 8));
  // Slowly until the end of the chunked body (or of a non-200 answer, read normally).
  for (;;) {
    if (answer_ended(c.buffer())) break;
    if (c.eof() || std::chrono::steady_clock::now() >= deadline) break;
    c.read_some(static_cast<size_t>(uniform(rng, 1, 200)), 1000);
    std::this_thread::sleep_for(pause);  // pacing, not a wait for an event
  }
  return judge_good(c.read_response(kAnswerTimeoutMs), api, true, max_tokens);
}

// A body past the limit: announced by Content-Length (with part of it sent)
// or sent whole. 413 request_too_large in the API's envelope.
inline Result run_oversized(const Target& t, Rng& rng) {
  const Api api = random_api(rng);
  test::RawClient c(t.port);
  if (!c.connected()) return {Outcome::kFail, "connect failed"};
  const size_t n_body = static_cast<size_t>(t.max_body_bytes) + static_cast<size_t>(uniform(rng, 1, 256 << 10));
  const size_t n_sent = uniform(rng, 0, 1) == 0 ? n_body : static_cast<size_t>(uniform(rng, 0, 65536));
  std::string head = std::string("POST ") + path_of(api) +
                     " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                     std::to_string(n_body) + "\r\n\r\n";
  std::string body = R"({"model":"soak","messages":[{"role":"user","content":")";
  body.resize(n_sent, 'a');
  c.send_raw(head + body);  // the server may close before it has read it all
  std::string bad = check_error(c.read_response(kAnswerTimeoutMs), 413);
  if (!bad.empty()) return {Outcome::kFail, bad};
  return {Outcome::kRejected, ""};
}

// Bodies that are not a valid request of `api`; each must be a 400.
inline std::string malformed_body(Rng& rng, Api api) {
  const std::string good = good_body(rng, api, uniform(rng, 0, 1) == 0, 16, random_prompt(rng));
  switch (uniform(rng, 0, 9)) {
    case 0: return good.substr(0, static_cast<size_t>(uniform(rng, 0, static_cast<int>(good.size()) - 2)));
    case 1: return good + "}";
    case 2: return "[1,2,3]";
    case 3: return R"({"model":"soak","max_tokens":"many","messages":[{"role":"user","content":"hi"}]})";
    case 4: return R"({"model":"soak","max_tokens":16,"messages":"hi","prompt":7})";
    case 5: return R"({"model":"soak","max_tokens":-3,"messages":[{"role":"user","content":"hi"}],"prompt":"hi"})";
    case 6: return std::string(uniform(rng, 1, 5000), '[') + std::string(uniform(rng, 0, 5000), ']');
    case 7: return "{\"model\":\"soak\",\"max_tokens\":16,\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\x80\"}],"
                   "\"prompt\":\"\xc3\x28\"}";
    case 8: return R"({"model":"soak","max_tokens":16,"messages":[{"role":"robot","content":"hi"}],"prompt":[]})";
    default: return "";
  }
}

inline Result run_malformed_json(const Target& t, Rng& rng) {
  const Api api = random_api(rng);
  const std::string body = malformed_body(rng, api);
  test::RawClient c(t.port);
  if (!c.connected()) return {Outcome::kFail, "connect failed"};
  if (!c.send_raw(test::http_request("POST", path_of(api), body))) return {Outcome::kFail, "send failed"};
  std::string bad = check_error(c.read_response(kAnswerTimeoutMs), 400);
  if (!bad.empty()) return {Outcome::kFail, bad + " | request: " + snippet(body)};
  return {Outcome::kRejected, ""};
}

// Broken HTTP: each must be answered by a 4xx in an error envelope, and the
// connection closed.
inline Result run_malformed_http(const Target& t, Rng& rng) {
  static const char* const kCases[] = {
      "GARBAGE\r\n\r\n",
      "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
      "GET / HTTP/9.9\r\n\r\n",
      "GET / HTTP/1.1\r\nno colon here\r\n\r\n",
      "POST /v1/messages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
      "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\nabcdefg",
      "\x16\x03\x01\x02\x01\x01\x05\x01\xfc\x03\x03\r\n\r\n",  // like a TLS ClientHello
      "GET /\x01\x02 HTTP/1.1\r\n\r\n",
  };
  std::string bytes;
  const int which = uniform(rng, 0, static_cast<int>(std::size(kCases)));
  if (which == static_cast<int>(std::size(kCases))) {
    bytes = "GET / HTTP/1.1\r\nX-Big: " + std::string(70000, 'h') + "\r\n\r\n";  // headers past the limit
  } else {
    bytes = kCases[which];
  }
  test::RawClient c(t.port);
  if (!c.connected()) return {Outcome::kFail, "connect failed"};
  c.send_raw(bytes);
  const test::HttpReply r = c.read_response(kAnswerTimeoutMs);
  if (!r.complete || r.status < 400 || r.status >= 500) {
    return {Outcome::kFail, "case " + std::to_string(which) + ": status " + std::to_string(r.status)};
  }
  std::string bad = check_error(r, r.status);
  if (!bad.empty()) return {Outcome::kFail, "case " + std::to_string(which) + ": " + bad};
  return {Outcome::kRejected, ""};
}

inline Result run_over_context(const Target& t, Rng& rng) {
  const Api api = random_api(rng);
  std::string prompt;
  const int n_words = t.n_ctx + uniform(rng, 1, 4 * t.n_ctx);
  for (int i = 0; i < n_words; ++i) prompt += i % 2 ? " river" : " stone";
  const std::string body = good_body(rng, api, uniform(rng, 0, 1) == 0, 16, prompt);
  test::RawClient c(t.port);
  if (!c.connected()) return {Outcome::kFail, "connect failed"};
  if (!c.send_raw(test::http_request("POST", path_of(api), body))) return {Outcome::kFail, "send failed"};
  std::string bad = check_error(c.read_response(kAnswerTimeoutMs), 400, "context_length_exceeded");
  if (!bad.empty()) return {Outcome::kFail, bad};
  return {Outcome::kRejected, ""};
}

// Two generations pipelined; the client leaves (FIN or RST) before or while
// the first is answered, with the second's bytes still unparsed on the server.
inline Result run_cut_pipelined(const Target& t, Rng& rng) {
  test::RawClient c(t.port);
  if (!c.connected()) return {Outcome::kFail, "connect failed"};
  std::string bytes;
  for (int i = 0; i < 2; ++i) {
    const Api api = random_api(rng);
    bytes += test::http_request("POST", path_of(api), good_body(rng, api, false, uniform(rng, 100, 400), random_prompt(rng)));
  }
  if (!c.send_raw(bytes)) return {Outcome::kFail, "send failed"};
  c.read_until([](const std::string& b) { return b.find("\r\n\r\n") != std::string::npos; }, uniform(rng, 0, 100));
  const int status = status_in(c.buffer());
  if (uniform(rng, 0, 1) == 0) {
    c.abort_now();
  } else {
    c.close_now();
  }
  if (status >= 500 && status != 529 && status != 503) return {Outcome::kFail, "status " + std::to_string(status)};
  return {Outcome::kCut, ""};
}

// A stream whose client reads nothing for a while (its sequence is paused
// once the socket and the event queue fill), then leaves.
inline Result run_stalled_reader(const Target& t, Rng& rng) {
  const Api api = random_api(rng);
  test::RawClient c(t.port, /*rcvbuf_bytes=*/1024);
  if (!c.connected()) return {Outcome::kFail, "connect failed"};
  if (!c.send_raw(test::http_request("POST", path_of(api), good_body(rng, api, true, 5000, random_prompt(rng))))) {
    return {Outcome::kFail, "send failed"};
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(uniform(rng, 50, 1500)));  // the stall itself
  if (uniform(rng, 0, 1) == 0) {
    c.abort_now();
  } else {
    c.close_now();
  }
  return {Outcome::kCut, ""};
}

// A request's head sent a few bytes at a time, never finished: the server
// closes the connection at its header deadline (an answer, if any, a 4xx).
inline Result run_slow_loris(const Target& t, Rng& rng) {
  test::RawClient c(t.port);
  if (!c.connected()) return {Outcome::kFail, "connect failed"};
  const std::string head = "POST /v1/messages HTTP/1.1\r\nHost: x\r\nX-Slow: ";
  for (size_t i = 0; i < head.size() && !c.eof(); i += 4) {
    if (!c.send_raw(head.substr(i, 4))) break;
    c.read_until([](const std::string&) { return false; }, uniform(rng, 5, 50));  // pacing; notices a close
  }
  for (int i = 0; !c.eof() && i < 100; ++i) {
    if (!c.send_raw("a")) break;
    c.read_until([](const std::string&) { return false; }, 100);
  }
  if (!c.wait_closed(kAnswerTimeoutMs)) return {Outcome::kFail, "not closed at the header deadline"};
  const int status = status_in(c.buffer());
  if (status != 0 && (status < 400 || status >= 500)) return {Outcome::kFail, "status " + std::to_string(status)};
  return {Outcome::kRejected, ""};
}

// Connections opened at once, most idle, some with half a request, all
// closed after a moment; then a good request on a fresh connection.
inline Result run_idle_flood(const Target& t, Rng& rng) {
  {
    std::vector<std::unique_ptr<test::RawClient>> conns;
    for (int i = uniform(rng, 10, 60); i > 0; --i) {
      conns.push_back(std::make_unique<test::RawClient>(t.port));
      if (conns.back()->connected() && uniform(rng, 0, 3) == 0) conns.back()->send_raw("GET /health HT");
    }
    conns.back()->read_until([](const std::string&) { return false; }, uniform(rng, 10, 200));
    for (auto& c : conns) {
      if (uniform(rng, 0, 1) == 0) c->abort_now();
    }
  }
  return run_good(t, rng, random_api(rng), false);
}

inline Result run_client(Kind kind, const Target& t, Rng& rng) {
  switch (kind) {
    case Kind::kAnthropic: return run_good(t, rng, Api::kAnthropic, false);
    case Kind::kAnthropicStream: return run_good(t, rng, Api::kAnthropic, true);
    case Kind::kOpenAIChat: return run_good(t, rng, Api::kOpenAIChat, false);
    case Kind::kOpenAIChatStream: return run_good(t, rng, Api::kOpenAIChat, true);
    case Kind::kCompletion: return run_good(t, rng, Api::kOpenAICompletion, uniform(rng, 0, 1) == 0);
    case Kind::kKeepAlive: return run_keep_alive(t, rng);
    case Kind::kCutStream: return run_cut(t, rng, true);
    case Kind::kCutBusy: return run_cut(t, rng, false);
    case Kind::kSlowReader: return run_slow_reader(t, rng);
    case Kind::kOversized: return run_oversized(t, rng);
    case Kind::kMalformedJson: return run_malformed_json(t, rng);
    case Kind::kMalformedHttp: return run_malformed_http(t, rng);
    case Kind::kOverContext: return run_over_context(t, rng);
    case Kind::kCutPipelined: return run_cut_pipelined(t, rng);
    case Kind::kStalledReader: return run_stalled_reader(t, rng);
    case Kind::kSlowLoris: return run_slow_loris(t, rng);
    case Kind::kIdleFlood: return run_idle_flood(t, rng);
    case Kind::kCount: break;
  }
  return {Outcome::kFail, "unknown kind"};
}

}  // namespace zl::soak
