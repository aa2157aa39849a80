// Serving benchmark: the HTTP server + Anthropic API + real engine, driven by
// an SSE client of our own (one epoll loop, non-blocking sockets), against
// the same engine configuration driven directly in-process, in the same run.
//
//   serve_bench [--model PATH] [--streams 1,8,64,256]
//               [--max-tokens 256,256,128,64] [--ctx 512] [--parallel 64]
//               [--threads 1] [--io-threads 1] [--reps 5]
//
// Per concurrency level c, `reps` times in alternation:
//   engine  c requests submitted at once to an Engine (no HTTP), greedy,
//           the same prompt ids and max_tokens; aggregate tokens/s.
//   served  c streaming POST /v1/messages at once over loopback; the client
//           records each connection's send time, first byte, and the arrival
//           of every content_block_delta; aggregate tokens/s from usage.
// Reported: median-of-reps throughput of each, the median ratio, TTFT (send -> first
// byte) and inter-token gaps (between consecutive deltas as the client sees
// them) p50/p99, and the server overhead per request: the time spent in
// server code, i.e. first byte - send minus the engine's part (from
// EngineApi::submit() to the token being sampled: inbox, queue, prefill):
//   (submit - send) + (first byte - engine t_first_token)
// with the times taken from the server's request log records (same process,
// same steady clock). The split of the overhead p50 goes to stderr, with
// where the front goes (the client's send burst, the wait for the server's
// first read, the server's gap between consecutive request reads) and the
// client thread's CPU time; ZL_BENCH_DEBUG=1 prints every request's split.
//
//   serve_bench --compare 1 [--bursts 1,16,64] [--mix short,mixed] [--reps 3]
//               [--max-tokens 64] [--model PATH] [--ctx N] [--parallel N] [--threads N]
//
// --compare 1: the scheduling policies side by side in the same run: two
// servers, `--schedule latency` and `--schedule throughput`, otherwise alike
// (--parallel 0: serve's default, from the KV budget). Per burst size and
// prompt mix (short: the usual one-line story prompt; mixed: 50-2000 prompt
// tokens), `reps` rounds, each sending the same burst of streaming requests
// at once to both servers in turn (alternating which goes first): TTFT (send
// -> first content_block_delta) p50/p90/p99 and aggregate tokens/s (usage
// output_tokens over first send -> last delta), medians over the rounds, and
// the latency/throughput ratios (median of the rounds' ratios). The context
// grows to hold the longest mixed prompt. Everything runs in this process: the
// server is built exactly as `zerolayer serve` builds it (cli::make_backend,
// api::ApiService, http::HttpServer).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "api/chat.h"
#include "api/request_log.h"
#include "api/service.h"
#include "cli/serve_config.h"
#include "cli/serve_engine.h"
#include "http/router.h"
#include "http/server.h"
#include "policy_table.h"

namespace {

using Clock = std::chrono::steady_clock;
using zl::api::RequestLog;

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5));
  return v[i];
}

std::string prompt_text(int level, int rep, int i) {
  return "Story " + std::to_string(level) + "-" + std::to_string(rep) + "-" + std::to_string(i) +
         ": once upon a time, a little girl";
}

// ---- the SSE client ----

struct Stream {
  int fd = -1;
  std::string request;
  size_t sent = 0;
  std::string buf;          // everything received
  size_t scan = 0;          // where the next delta search starts
  Clock::time_point t_send{}, t_first_byte{};
  std::vector<Clock::time_point> deltas;
  std::string request_id;
  int64_t output_tokens = 0;
  bool done = false;
};

constexpr std::string_view kDelta = "event: content_block_delta\n";

void on_bytes(Stream& s, const char* p, size_t n, Clock::time_point now) {
  if (s.buf.empty()) s.t_first_byte = now;
  s.buf.append(p, n);
  if (s.request_id.empty()) {
    const size_t h = s.buf.find("\r\nrequest-id: ");
    if (h != std::string::npos) {
      const size_t e = s.buf.find("\r\n", h + 2);
      if (e != std::string::npos) s.request_id = s.buf.substr(h + 14, e - h - 14);
    }
  }
  for (;;) {
    const size_t at = s.buf.find(kDelta, s.scan);
    if (at == std::string::npos) break;
    s.deltas.push_back(now);
    s.scan = at + kDelta.size();
  }
  if (s.buf.size() > kDelta.size()) s.scan = std::max(s.scan, s.buf.size() - kDelta.size());
  // The end: the last chunk, after message_stop (checked in that order: the
  // client shares the machine with the server, so it looks at 5 bytes per
  // read rather than scanning the tail of the buffer each time).
  if (s.buf.ends_with("0\r\n\r\n") &&
      s.buf.find("event: message_stop", s.buf.size() > 4096 ? s.buf.size() - 4096 : 0) != std::string::npos) {
    const size_t u = s.buf.rfind("\"output_tokens\":");
    if (u != std::string::npos) s.output_tokens = std::atoll(s.buf.c_str() + u + 16);
    s.done = true;
  }
}

// Runs all streams to completion on one epoll loop. Returns false on an error.
bool run_streams(int port, std::vector<Stream>& streams) {
  const int ep = epoll_create1(0);
  for (size_t i = 0; i < streams.size(); ++i) {
    Stream& s = streams[i];
    s.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connect(s.fd, reinterpret_cast<sockaddr*>(&a), sizeof a);  // EINPROGRESS
    epoll_event ev{.events = EPOLLOUT | EPOLLIN, .data = {.u64 = i}};
    epoll_ctl(ep, EPOLL_CTL_ADD, s.fd, &ev);
  }
  size_t n_done = 0;
  std::vector<epoll_event> events(streams.size());
  char tmp[65536];
  const auto deadline = Clock::now() + std::chrono::minutes(5);
  bool ok = true;
  while (n_done < streams.size()) {
    const int n = epoll_wait(ep, events.data(), static_cast<int>(events.size()), 1000);
    if (Clock::now() > deadline) {
      ok = false;
      break;
    }
    const auto now = Clock::now();
    for (int k = 0; k < n; ++k) {
      Stream& s = streams[events[k].data.u64];
      if (s.done) continue;
      if ((events[k].events & EPOLLOUT) && s.sent < s.request.size()) {
        if (s.sent == 0) s.t_send = Clock::now();
        const ssize_t w = send(s.fd, s.request.data() + s.sent, s.request.size() - s.sent, MSG_NOSIGNAL);
        if (w > 0) s.sent += static_cast<size_t>(w);
        if (s.sent == s.request.size()) {
          epoll_event ev{.events = EPOLLIN, .data = events[k].data};
          epoll_ctl(ep, EPOLL_CTL_MOD, s.fd, &ev);
        }
      }
      if (events[k].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        for (;;) {
          const ssize_t r = recv(s.fd, tmp, sizeof tmp, 0);
          if (r > 0) {
            on_bytes(s, tmp, static_cast<size_t>(r), now);
            continue;
          }
          if (r == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
            if (!s.done) ok = false;
            s.done = true;
          }
          break;
        }
        if (s.done) {
          ++n_done;
          epoll_ctl(ep, EPOLL_CTL_DEL, s.fd, nullptr);
          close(s.fd);
        }
      }
    }
  }
  close(ep);
  for (Stream& s : streams) {
    if (!s.done) close(s.fd);
  }
  return ok;
}

// ---- phases ----

struct PhaseResult {
  double tok_s = 0;
  int64_t n_tokens = 0;
  double wall_ms = 0;
  std::vector<double> ttft_ms, gap_ms, overhead_ms;
  std::vector<double> front_ms, back_ms;  // send -> EngineApi::submit(); engine t_first_token -> first byte
  std::vector<double> api_ms;             // request read -> submit (JSON parse, template, tokenize, submit)
  std::vector<double> first_delta_ms;     // send -> first content_block_delta (time to first token)
  // Where the front goes (one sample per rep): the client's send burst
  // (first to last send), the first send to the server's first request
  // read, the median gap between consecutive request reads on the server
  // (its serial cost per request), the median gap between consecutive
  // first bytes at the client, and the client thread's CPU time.
  std::vector<double> send_span_ms, first_read_ms, read_gap_us, first_byte_gap_us, client_cpu_ms;
};

double thread_cpu_ms() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// The median gap between consecutive times (sorted first), in microseconds.
double median_gap_us(std::vector<Clock::time_point> t) {
  if (t.size() < 2) return 0;
  std::sort(t.begin(), t.end());
  std::vector<double> gaps;
  for (size_t i = 1; i < t.size(); ++i) gaps.push_back(1000.0 * ms(t[i] - t[i - 1]));
  return percentile(gaps, 0.5);
}

PhaseResult run_engine(zl::EngineApi& engine, const zl::api::PromptCodec& codec, int level, int rep, int max_tokens) {
  std::vector<std::shared_ptr<zl::RequestChannel>> channels;
  std::vector<zl::Request> requests;
  for (int i = 0; i < level; ++i) {
    zl::api::ChatRequest chat;
    chat.messages.push_back({.role = "user", .content = prompt_text(level, rep, i)});
    zl::Request r;
    r.id = "engine-" + std::to_string(i);
    r.prompt_ids = codec.encode_chat(chat).value();
    r.sampling.temperature = 0;
    r.stop.max_tokens = max_tokens;
    requests.push_back(std::move(r));
  }
  const auto t0 = Clock::now();
  for (auto& r : requests) channels.push_back(engine.submit(std::move(r)));
  PhaseResult out;
  Clock::time_point t_end = t0;
  // Drain every channel as it fills (an undrained channel would pause its
  // sequence: backpressure), waiting on the first unfinished one.
  std::vector<bool> done(channels.size(), false);
  for (size_t n_done = 0; n_done < channels.size();) {
    size_t first = 0;
    while (done[first]) ++first;
    for (size_t i = first; i < channels.size(); ++i) {
      if (done[i]) continue;
      auto events = i == first ? channels[i]->wait_and_drain(std::chrono::milliseconds(1)) : channels[i]->drain();
      for (zl::Event& e : events) {
        if (e.kind == zl::EventKind::kText) continue;
        done[i] = true;
        ++n_done;
        out.n_tokens += e.usage.n_generated_tokens;
        out.ttft_ms.push_back(ms(e.timings.t_first_token - e.timings.t_submit));
        t_end = std::max(t_end, e.timings.t_last_token);
      }
    }
  }
  out.wall_ms = ms(t_end - t0);
  out.tok_s = static_cast<double>(out.n_tokens) * 1000.0 / out.wall_ms;
  return out;
}

struct LogStore {
  std::mutex mu;
  std::map<std::string, RequestLog> by_id;
};

// `texts`: the prompts (plain words, nothing to escape); null: prompt_text().
PhaseResult run_served(int port, LogStore& logs, int level, int rep, int max_tokens,
                       const std::vector<std::string>* texts = nullptr) {
  std::vector<Stream> streams(level);
  for (int i = 0; i < level; ++i) {
    const std::string body = R"({"model":"m","max_tokens":)" + std::to_string(max_tokens) +
                             R"(,"temperature":0,"stream":true,"messages":[{"role":"user","content":")" +
                             (texts ? (*texts)[i] : prompt_text(level, rep, i)) + "\"}]}";
    streams[i].request = "POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                         "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  }
  const auto t0 = Clock::now();
  const double cpu0 = thread_cpu_ms();
  if (!run_streams(port, streams)) std::fprintf(stderr, "serve_bench: some streams failed at %d\n", level);
  PhaseResult out;
  out.client_cpu_ms.push_back(thread_cpu_ms() - cpu0);
  std::vector<Clock::time_point> sends, reads, first_bytes;
  Clock::time_point t_end = t0;
  std::lock_guard<std::mutex> lock(logs.mu);
  for (const Stream& s : streams) {
    out.n_tokens += s.output_tokens;
    if (!s.deltas.empty()) t_end = std::max(t_end, s.deltas.back());
    out.ttft_ms.push_back(ms(s.t_first_byte - s.t_send));
    if (!s.deltas.empty()) out.first_delta_ms.push_back(ms(s.deltas.front() - s.t_send));
    sends.push_back(s.t_send);
    first_bytes.push_back(s.t_first_byte);
    for (size_t k = 1; k < s.deltas.size(); ++k) out.gap_ms.push_back(ms(s.deltas[k] - s.deltas[k - 1]));
    auto it = logs.by_id.find(s.request_id);
    if (it != logs.by_id.end()) {
      const zl::Timings& t = it->second.engine;
      // Time in server code: before the request reaches the engine, and
      // from the sampled token to the client. Between the two (inbox, queue,
      // prefill) is the engine's time to first token.
      const double front = ms(it->second.t_submit - s.t_send), back = ms(s.t_first_byte - t.t_first_token);
      out.overhead_ms.push_back(front + back);
      if (std::getenv("ZL_BENCH_DEBUG")) {
        std::fprintf(stderr, "  %s send->read %.3f read->submit %.3f (send at %.6f s)\n", s.request_id.c_str(),
                     ms(it->second.t_start - s.t_send), ms(it->second.t_submit - it->second.t_start),
                     std::chrono::duration<double>(s.t_send.time_since_epoch()).count());
        std::fprintf(stderr, "  %s front %.3f engine %.3f back %.3f (queued %.3f prefill %.3f) first-token-at-io %.3f\n",
                     s.request_id.c_str(), front, ms(t.t_first_token - it->second.t_submit), back,
                     ms(t.t_scheduled - t.t_submit), ms(t.t_first_token - t.t_scheduled),
                     ms(it->second.t_start - s.t_send) + it->second.t_first_token_ms - ms(t.t_first_token - s.t_send));
      }
      out.front_ms.push_back(front);
      out.back_ms.push_back(back);
      out.api_ms.push_back(ms(it->second.t_submit - it->second.t_start));
      reads.push_back(it->second.t_start);
    }
  }
  if (!sends.empty() && !reads.empty()) {
    const auto [first_send, last_send] = std::minmax_element(sends.begin(), sends.end());
    out.send_span_ms.push_back(ms(*last_send - *first_send));
    out.first_read_ms.push_back(ms(*std::min_element(reads.begin(), reads.end()) - *first_send));
    out.read_gap_us.push_back(median_gap_us(reads));
    out.first_byte_gap_us.push_back(median_gap_us(first_bytes));
  }
  out.wall_ms = ms(t_end - t0);
  out.tok_s = static_cast<double>(out.n_tokens) * 1000.0 / out.wall_ms;
  return out;
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  size_t p = 0;
  while (p < s.size()) {
    out.push_back(std::atoi(s.c_str() + p));
    p = s.find(',', p);
    if (p == std::string::npos) break;
    ++p;
  }
  return out;
}


// ---- --compare: the scheduling policies on the same bursts ----

// One server as `zerolayer serve` builds it.
struct ServedStack {
  zl::cli::ServeBackend backend;
  LogStore logs;
  std::unique_ptr<zl::api::ApiService> service;
  std::unique_ptr<zl::http::Router> router;
  std::unique_ptr<zl::http::HttpServer> server;
};

std::unique_ptr<ServedStack> start_stack(const zl::cli::ServeConfig& cfg, int io_threads) {
  auto st = std::make_unique<ServedStack>();
  auto backend = zl::cli::make_backend(cfg);
  if (!backend.ok()) {
    std::fprintf(stderr, "serve_bench: %s\n", backend.status().message().c_str());
    return nullptr;
  }
  st->backend = std::move(backend).value();
  zl::api::ApiConfig api_cfg;
  api_cfg.metrics = std::make_shared<zl::obs::ServerMetrics>();
  LogStore* logs = &st->logs;
  api_cfg.request_log = [logs](const RequestLog& r) {
    std::lock_guard<std::mutex> lock(logs->mu);
    logs->by_id[r.request_id] = r;
  };
  st->service = std::make_unique<zl::api::ApiService>(api_cfg, st->backend.engine.get(), st->backend.codec.get());
  st->router = std::make_unique<zl::http::Router>();
  st->service->register_routes(*st->router);
  st->server = std::make_unique<zl::http::HttpServer>(zl::http::ServerConfig{.port = 0, .n_io_threads = io_threads},
                                                      st->router.get());
  if (!st->server->listen().ok()) return nullptr;
  st->server->start();
  return st;
}

// A prompt text of about n_tokens chat-template tokens (at least), from story words.
std::string text_of_tokens(const zl::api::PromptCodec& codec, int n_tokens, const std::string& head) {
  static const char* kWords[] = {"once", "upon", "a", "time", "there", "was", "a", "little", "girl", "named",
                                 "Lily", "who", "liked", "to", "play", "in", "the", "park", "with", "her", "dog"};
  auto build = [&](int n_words) {
    std::string t = head;
    for (int w = 0; w < n_words; ++w) t.append(" ").append(kWords[w % (sizeof kWords / sizeof *kWords)]);
    return t;
  };
  auto count = [&](const std::string& t) {
    zl::api::ChatRequest chat;
    chat.messages.push_back({.role = "user", .content = t});
    auto ids = codec.encode_chat(chat);
    return ids.ok() ? static_cast<int>(ids->size()) : 0;
  };
  int lo = 0, hi = 8;
  while (count(build(hi)) < n_tokens) hi *= 2;
  while (lo < hi) {  // the fewest words reaching n_tokens
    const int mid = (lo + hi) / 2;
    if (count(build(mid)) < n_tokens) lo = mid + 1; else hi = mid;
  }
  return build(lo);
}


int compare_policies(std::map<std::string, std::string>& a) {
  const std::vector<int> bursts = parse_list(a.count("bursts") ? a["bursts"] : "1,16,64");
  const std::string mix_arg = a.count("mix") ? a["mix"] : "short,mixed";
  std::vector<std::string> mixes;
  for (const char* m : {"short", "mixed"}) {
    if (mix_arg.find(m) != std::string::npos) mixes.push_back(m);
  }
  const int max_tokens = std::max(1, std::atoi(a["max-tokens"].c_str()));
  const int reps = std::max(1, std::atoi(a["reps"].c_str()));
  const bool any_mixed = std::find(mixes.begin(), mixes.end(), "mixed") != mixes.end();
  zl::cli::ServeConfig cfg;
  cfg.model_path = a["model"];
  cfg.ctx = std::max<int64_t>(std::atoll(a["ctx"].c_str()), any_mixed ? 2000 + max_tokens + 64 : 0);
  cfg.parallel = std::atoll(a["parallel"].c_str());
  cfg.threads = std::atoll(a["threads"].c_str());
  for (int b : bursts) cfg.max_queue = std::max<int64_t>(cfg.max_queue, b);  // no load shedding here
  std::unique_ptr<ServedStack> stacks[2];
  for (int k = 0; k < 2; ++k) {
    cfg.schedule = k == 0 ? "latency" : "throughput";
    stacks[k] = start_stack(cfg, std::max(1, std::atoi(a["io-threads"].c_str())));
    if (!stacks[k]) return 1;
  }
  const zl::api::PromptCodec& codec = *stacks[0]->backend.codec;
  std::printf("policies, same run: %s, ctx %lld, parallel %lld (0: from the KV budget), threads %lld, max_tokens %d, "
              "%d rounds (medians; ratios: median of the rounds' ratios)\n",
              cfg.model_path.c_str(), static_cast<long long>(cfg.ctx), static_cast<long long>(cfg.parallel),
              static_cast<long long>(cfg.threads), max_tokens, reps);
  zl::bench::print_policy_header();
  std::mt19937 rng(11);
  for (int burst : bursts) {
    for (const std::string& mix : mixes) {
      std::vector<zl::bench::BurstStats> per[2];
      for (int rep = 0; rep < reps; ++rep) {
        std::vector<std::string> texts;
        std::uniform_int_distribution<int> len(50, 2000);
        for (int i = 0; i < burst; ++i) {
          const std::string head = "Story " + std::to_string(burst) + "-" + std::to_string(rep) + "-" + std::to_string(i) + ":";
          texts.push_back(mix == "mixed" ? text_of_tokens(codec, len(rng), head) : head + " once upon a time, a little girl");
        }
        zl::bench::BurstStats got[2];
        for (int k = 0; k < 2; ++k) {
          const int which = (rep + k) % 2;  // alternate which policy runs first
          ServedStack& st = *stacks[which];
          PhaseResult r = run_served(st.server->port(), st.logs, burst, rep, max_tokens, &texts);
          got[which] = {.p50 = percentile(r.first_delta_ms, 0.5), .p90 = percentile(r.first_delta_ms, 0.9),
                        .p99 = percentile(r.first_delta_ms, 0.99), .tok_s = r.tok_s};
        }
        for (int k = 0; k < 2; ++k) per[k].push_back(got[k]);
      }
      zl::bench::print_policy_rows(burst, mix, per);
    }
  }
  for (auto& st : stacks) st->server->stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> a = {{"model", std::string(ZL_SHARED_DIR) + "/models/stories260K.gguf"},
                                          {"streams", "1,8,64,256"}, {"max-tokens", "256,256,128,64"},
                                          {"ctx", "512"}, {"parallel", "64"},
                                          {"threads", "1"}, {"io-threads", "1"}, {"reps", "5"},
                                          {"compare", "0"}, {"bursts", "1,16,64"}, {"mix", "short,mixed"}};
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (!k.starts_with("--") || !a.count(k.substr(2))) {
      std::fprintf(stderr, "usage: serve_bench [--model PATH] [--streams 1,8,64,256] [--max-tokens 256,256,128,64 (per level)] "
                           "[--ctx N] [--parallel N] [--threads N] [--io-threads N] [--reps N]\n"
                           "       serve_bench --compare 1 [--bursts 1,16,64] [--mix short,mixed] [--max-tokens 64] [--reps 3] "
                           "[--parallel 0] [--model PATH] [--ctx N] [--threads N]\n");
      return 2;
    }
    a[k.substr(2)] = argv[i + 1];
  }
  if (a["compare"] == "1") {
    // Defaults of this mode where the flag was not given: serve's --parallel, 64 tokens, 3 rounds.
    auto given = [&](const char* f) {
      for (int i = 1; i < argc; ++i) {
        if (std::string(argv[i]) == f) return true;
      }
      return false;
    };
    if (!given("--parallel")) a["parallel"] = "0";
    if (!given("--max-tokens")) a["max-tokens"] = "64";
    if (!given("--reps")) a["reps"] = "3";
    return compare_policies(a);
  }
  zl::cli::ServeConfig cfg;
  cfg.model_path = a["model"];
  cfg.ctx = std::atoll(a["ctx"].c_str());
  cfg.parallel = std::atoll(a["parallel"].c_str());
  cfg.threads = std::atoll(a["threads"].c_str());
  // Every stream of the largest level may wait at once: a throughput
  // benchmark, not a load-shedding one (--max-queue's default is 4 × parallel).
  for (int level : parse_list(a["streams"])) cfg.max_queue = std::max<int64_t>(cfg.max_queue, level);
  // Two engines with the same configuration: one behind the server, one driven directly.
  // The served one records every metric as `zerolayer serve` does (with
  // ZL_OBS=OFF the recording compiles away: the metrics benchmark's baseline).
  auto metrics = std::make_shared<zl::obs::ServerMetrics>();
  auto served_backend = zl::cli::make_backend(cfg, &metrics->engine);
  auto direct_backend = zl::cli::make_backend(cfg);
  if (!served_backend.ok() || !direct_backend.ok()) {
    std::fprintf(stderr, "serve_bench: %s\n",
                 (!served_backend.ok() ? served_backend.status() : direct_backend.status()).message().c_str());
    return 1;
  }
  LogStore logs;
  zl::api::ApiConfig api_cfg;
  api_cfg.metrics = metrics;
  api_cfg.request_log = [&logs](const RequestLog& r) {
    std::lock_guard<std::mutex> lock(logs.mu);
    logs.by_id[r.request_id] = r;
  };
  zl::api::ApiService service(api_cfg, served_backend->engine.get(), served_backend->codec.get());
  zl::http::Router router;
  service.register_routes(router);
  zl::http::ServerConfig http_cfg{.port = 0, .n_io_threads = std::max(1, std::atoi(a["io-threads"].c_str()))};
  zl::http::HttpServer server(http_cfg, &router);
  if (!server.listen().ok()) return 1;
  server.start();

  const int reps = std::max(1, std::atoi(a["reps"].c_str()));
  std::printf("| streams | max_tokens | engine tok/s | served tok/s | served/engine | TTFT p50 / p99 ms | "
              "inter-token p50 / p99 ms | overhead p50 / p99 ms |\n|---|---|---|---|---|---|---|---|\n");
  const std::vector<int> levels = parse_list(a["streams"]), budgets = parse_list(a["max-tokens"]);
  for (size_t li = 0; li < levels.size(); ++li) {
    const int level = levels[li];
    const int max_tokens = budgets.empty() ? 64 : budgets[std::min(li, budgets.size() - 1)];
    // Throughput: medians over reps, and the median of each rep's
    // served/engine ratio (the two phases of a rep run back to back, so the
    // machine's other load hits them alike). Latencies: all reps' samples.
    PhaseResult best_engine, best_served;
    std::vector<double> engine_tok_s, served_tok_s, ratios;
    // One stream gives one TTFT sample per rep: take more.
    const int level_reps = level == 1 ? 4 * reps : reps;
    for (int rep = 0; rep < level_reps; ++rep) {
      PhaseResult e = run_engine(*direct_backend->engine, *direct_backend->codec, level, rep, max_tokens);
      PhaseResult s = run_served(server.port(), logs, level, rep, max_tokens);
      engine_tok_s.push_back(e.tok_s);
      served_tok_s.push_back(s.tok_s);
      ratios.push_back(s.tok_s / e.tok_s);
      for (auto [to, from] : {std::pair{&best_served.ttft_ms, &s.ttft_ms}, {&best_served.gap_ms, &s.gap_ms},
                              {&best_served.overhead_ms, &s.overhead_ms}, {&best_served.front_ms, &s.front_ms},
                              {&best_served.back_ms, &s.back_ms},
                              {&best_served.api_ms, &s.api_ms},
                              {&best_served.send_span_ms, &s.send_span_ms},
                              {&best_served.first_read_ms, &s.first_read_ms},
                              {&best_served.read_gap_us, &s.read_gap_us},
                              {&best_served.first_byte_gap_us, &s.first_byte_gap_us},
                              {&best_served.client_cpu_ms, &s.client_cpu_ms}}) {
        to->insert(to->end(), from->begin(), from->end());
      }
    }
    std::printf("| %d | %d | %.0f | %.0f | %.1f%% | %.2f / %.2f | %.3f / %.3f | %.3f / %.3f |\n", level, max_tokens,
                percentile(engine_tok_s, 0.5), percentile(served_tok_s, 0.5), 100.0 * percentile(ratios, 0.5),
                percentile(best_served.ttft_ms, 0.5), percentile(best_served.ttft_ms, 0.99),
                percentile(best_served.gap_ms, 0.5), percentile(best_served.gap_ms, 0.99),
                percentile(best_served.overhead_ms, 0.5), percentile(best_served.overhead_ms, 0.99));
    std::fflush(stdout);
    std::string per_rep;
    for (double r : ratios) per_rep.append(" ").append(std::to_string(static_cast<int>(100 * r + 0.5))).append("%");
    std::fprintf(stderr, "  %d streams: served/engine per rep:%s\n", level, per_rep.c_str());
    std::fprintf(stderr, "  %d streams: overhead = front (send -> submit) p50 %.3f ms [of which request read -> submit (parse, template, tokenize) %.3f ms]"
                 " + back (token -> client) p50 %.3f ms\n",
                 level, percentile(best_served.front_ms, 0.5), percentile(best_served.api_ms, 0.5),
                 percentile(best_served.back_ms, 0.5));
    std::fprintf(stderr, "  %d streams: (medians over reps) the client sends over %.3f ms; the server reads the first request %.3f ms "
                 "after the first send, then one every %.1f us; first bytes reach the client every %.1f us; client thread CPU %.1f ms a phase\n",
                 level, percentile(best_served.send_span_ms, 0.5), percentile(best_served.first_read_ms, 0.5),
                 percentile(best_served.read_gap_us, 0.5), percentile(best_served.first_byte_gap_us, 0.5),
                 percentile(best_served.client_cpu_ms, 0.5));
  }
  server.stop();
  service.stop();
  return 0;
}
