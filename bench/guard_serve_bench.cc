// Guard benchmark: served tokens/s with a guard policy against no guard, in
// the same run.
//
//   guard_serve_bench [--model PATH] [--streams 1,16] [--max-tokens 128] [--phrases 1000]
//               [--parallel 16] [--threads 1] [--reps 5]
//
// One process holds two servers built as `zerolayer serve` builds them
// (cli::make_backend, api::ApiService, http::HttpServer), same configuration,
// one with the guard and one without. The policy: every PII detector with
// input = redact and output = redact, plus a mask rule with --phrases
// pseudo-random two-word phrases over lowercase letters (deterministic: the
// same every run; they share the alphabet of the model's text, so the phrase
// automaton is off its root state most of the time, the costly case). Per
// concurrency level, `reps` times in alternation (guarded, then plain),
// `streams` concurrent streaming POST /v1/chat/completions (greedy, EOS
// banned, include_usage) each on its own connection and thread; tokens/s =
// generated tokens (usage) / phase wall time. Then the same requests
// straight to each server's engine (no HTTP), alternating likewise.
// Reported: the median over reps of each, and the median of the per-rep
// ratios guarded/plain; then the guard's per-token costs alone (mask step,
// redactor feed) and its hold-back on story text.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "api/guard_input.h"
#include "api/service.h"
#include "cli/serve_config.h"
#include "cli/serve_engine.h"
#include "guard/guard.h"
#include "guard/stream_redactor.h"
#include "guard/token_mask.h"
#include "http/router.h"
#include "http/server.h"
#include "tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  for (size_t p = 0; p < s.size();) {
    out.push_back(std::atoi(s.c_str() + p));
    p = s.find(',', p);
    if (p == std::string::npos) break;
    ++p;
  }
  return out;
}

// The policy text: PII redaction both ways and `n_phrases` masked phrases.
std::string policy_text(int n_phrases) {
  std::mt19937 rng(2026);
  auto word = [&] {
    std::string w(5 + rng() % 6, 'a');
    for (char& c : w) c = static_cast<char>('a' + rng() % 26);
    return w;
  };
  std::string phrases;
  for (int i = 0; i < n_phrases; ++i) phrases += (i ? ", \"" : "\"") + word() + " " + word() + "\"";
  return "[[rule]]\nname = \"pii\"\npii = [\"email\", \"phone\", \"credit_card\", \"iban\", \"us_ssn\", \"api_key\"]\n"
         "input = \"redact\"\noutput = \"redact\"\n\n[[rule]]\nname = \"codenames\"\nphrases = [" + phrases +
         "]\noutput = \"mask\"\n";
}

// One server as `zerolayer serve` builds it.
struct Served {
  std::shared_ptr<zl::obs::ServerMetrics> metrics = std::make_shared<zl::obs::ServerMetrics>();
  zl::cli::ServeBackend backend;
  std::unique_ptr<zl::api::ApiService> service;
  zl::http::Router router;
  std::unique_ptr<zl::http::HttpServer> server;
};

std::unique_ptr<Served> make_server(const zl::cli::ServeConfig& cfg) {
  auto s = std::make_unique<Served>();
  auto backend = zl::cli::make_backend(cfg, &s->metrics->engine);
  if (!backend.ok()) {
    std::fprintf(stderr, "guard_serve_bench: %s\n", backend.status().message().c_str());
    return nullptr;
  }
  s->backend = std::move(backend).value();
  zl::api::ApiConfig api_cfg;
  api_cfg.metrics = s->metrics;
  api_cfg.guard = cfg.guard;
  if (cfg.guard) zl::api::register_guard_metrics(*cfg.guard, s->metrics->engine.guard_actions());
  s->service = std::make_unique<zl::api::ApiService>(api_cfg, s->backend.engine.get(), s->backend.codec.get());
  s->service->register_routes(s->router);
  s->server = std::make_unique<zl::http::HttpServer>(zl::http::ServerConfig{.port = 0}, &s->router);
  if (!s->server->listen().ok()) return nullptr;
  s->server->start();
  return s;
}

// One streamed request on its own connection (Connection: close, read to
// EOF); the generated tokens from the final usage chunk, or -1.
int64_t stream_one(int port, const std::string& body) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return -1;
  }
  const std::string req = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                          "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) +
                          "\r\n\r\n" + body;
  for (size_t sent = 0; sent < req.size();) {
    const ssize_t n = send(fd, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  std::string got;
  char buf[16384];
  for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) got.append(buf, static_cast<size_t>(n));
  close(fd);
  const size_t at = got.rfind("\"completion_tokens\":");
  return at == std::string::npos ? -1 : std::atoll(got.c_str() + at + 20);
}

// `streams` concurrent requests; tokens/s over the phase.
double run_phase(int port, int streams, int max_tokens, int rep) {
  std::vector<int64_t> tokens(streams, 0);
  std::vector<std::thread> threads;
  const auto t0 = Clock::now();
  for (int i = 0; i < streams; ++i) {
    threads.emplace_back([&, i] {
      const std::string body = R"({"model":"m","max_tokens":)" + std::to_string(max_tokens) +
                               R"(,"temperature":0,"logit_bias":{"2":-100},"stream":true,)"
                               R"("stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Story )" +
                               std::to_string(rep) + "-" + std::to_string(i) + R"(: once upon a time, a little girl"}]})";
      tokens[i] = stream_one(port, body);
    });
  }
  for (std::thread& t : threads) t.join();
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  int64_t n = 0;
  for (int64_t t : tokens) {
    if (t < 0) std::fprintf(stderr, "guard_serve_bench: a stream failed\n");
    n += std::max<int64_t>(t, 0);
  }
  return static_cast<double>(n) / s;
}

// The same requests submitted straight to a server's engine (no HTTP, no
// input screening): what the output guard costs the decode loop, without
// the stream coalescing that held-back text brings to the served phase.
double run_engine(const Served& s, int streams, int max_tokens, int rep) {
  std::vector<std::shared_ptr<zl::RequestChannel>> channels;
  const auto t0 = Clock::now();
  for (int i = 0; i < streams; ++i) {
    zl::api::ChatRequest chat;
    chat.messages.push_back({.role = "user", .content = "Story " + std::to_string(rep) + "-" + std::to_string(i) +
                                                        ": once upon a time, a little girl"});
    zl::Request r;
    r.id = "engine-" + std::to_string(i);
    r.prompt_ids = s.backend.codec->encode_chat(chat).value();
    r.sampling.temperature = 0;
    r.sampling.logit_bias[2] = -100;
    r.stop.max_tokens = max_tokens;
    channels.push_back(s.backend.engine->submit(std::move(r)));
  }
  // Every channel drained as it fills (an undrained one would pause its
  // sequence: backpressure), waiting on the first unfinished one.
  int64_t n = 0;
  std::vector<bool> done(channels.size(), false);
  for (size_t n_done = 0, first = 0; n_done < channels.size();) {
    while (done[first]) ++first;
    for (size_t i = first; i < channels.size(); ++i) {
      if (done[i]) continue;
      auto events = i == first ? channels[i]->wait_and_drain(std::chrono::milliseconds(1)) : channels[i]->drain();
      for (zl::Event& e : events) {
        if (e.kind == zl::EventKind::kText) continue;
        n += e.usage.n_generated_tokens;
        done[i] = true;
        ++n_done;
      }
    }
  }
  return static_cast<double>(n) / std::chrono::duration<double>(Clock::now() - t0).count();
}

// The guard's own per-token costs on the decode path, alone: the mask
// table's step() and the stream redactor's feed(), over a story's tokens.
void per_token_costs(const std::string& model, const zl::guard::Guard& guard) {
  auto tok = zl::Tokenizer::load(model);
  if (!tok.ok()) return;
  std::vector<std::string> pieces;
  for (int32_t id = 0; id < (*tok)->vocab().n_tokens(); ++id) pieces.push_back((*tok)->token_to_piece(id));
  auto t0 = Clock::now();
  auto mask = zl::guard::build_token_mask(guard, pieces);
  const double build_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  std::string text;
  for (int i = 0; i < 50; ++i) {
    text += " there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red "
            "ball. She wanted to play with it, but it was too high. Lily asked her mom to help her.";
  }
  const std::vector<int32_t> ids = (*tok)->encode(text, {.add_special = false});
  int32_t state = 0;
  int64_t n_refused = 0;
  t0 = Clock::now();
  for (int r = 0; r < 100; ++r) {
    for (int32_t id : ids) {
      const zl::guard::MaskStep s = mask->step(state, id);
      n_refused += s.refused();
      state = s.state;
    }
  }
  const double mask_ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / (100.0 * ids.size());
  size_t n_out = 0;
  t0 = Clock::now();
  for (int r = 0; r < 10; ++r) {
    zl::guard::StreamRedactor redactor(std::shared_ptr<const zl::guard::Guard>(&guard, [](const zl::guard::Guard*) {}));
    for (int32_t id : ids) n_out += redactor.feed(pieces[id]).text.size();
    n_out += redactor.finish().text.size();
  }
  const double redact_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / (10.0 * ids.size());
  // The hold-back: bytes held after each token, and how many tokens each
  // byte waited before it was released.
  zl::guard::StreamRedactor redactor(std::shared_ptr<const zl::guard::Guard>(&guard, [](const zl::guard::Guard*) {}));
  std::vector<size_t> fed_at;  // per byte fed: the token index
  size_t released = 0, held_sum = 0, held_max = 0, wait_max = 0;
  double wait_sum = 0;
  for (size_t t = 0; t < ids.size(); ++t) {
    fed_at.insert(fed_at.end(), pieces[ids[t]].size(), t);
    const size_t out = redactor.feed(pieces[ids[t]]).text.size();
    // Released bytes map to fed bytes one to one without matches (this text has none).
    for (size_t b = released; b < std::min(released + out, fed_at.size()); ++b) {
      wait_sum += static_cast<double>(t - fed_at[b]);
      wait_max = std::max(wait_max, t - fed_at[b]);
    }
    released += out;
    held_sum += redactor.held_bytes();
    held_max = std::max(held_max, redactor.held_bytes());
  }
  std::printf("\nper token, alone: mask step %.1f ns (table %.1f MB, %d states, built in %.1f ms), "
              "redactor feed %.2f us (%zu tokens, %lld refused, %zu bytes out)\n"
              "hold-back on this text: %.1f bytes held after a token on average, %zu at most; a byte waits %.2f "
              "tokens on average, %zu at most\n",
              mask_ns, static_cast<double>(mask->memory_bytes()) / 1e6, mask->automaton().n_states(), build_ms,
              redact_us, ids.size(), static_cast<long long>(n_refused), n_out / 10,
              static_cast<double>(held_sum) / static_cast<double>(ids.size()), held_max,
              wait_sum / static_cast<double>(std::max<size_t>(released, 1)), wait_max);
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> a = {{"model", std::string(ZL_SHARED_DIR) + "/models/stories260K.gguf"},
                                          {"streams", "1,16"}, {"max-tokens", "128"}, {"phrases", "1000"},
                                          {"parallel", "16"}, {"threads", "1"}, {"reps", "5"}};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    if (!k.starts_with("--") || !a.count(k.substr(2))) {
      std::fprintf(stderr, "usage: guard_serve_bench [--model PATH] [--streams 1,16] [--max-tokens 128] [--phrases 1000] "
                           "[--parallel 16] [--threads 1] [--reps 5]\n");
      return 2;
    }
    a[k.substr(2)] = argv[i + 1];
  }
  zl::cli::ServeConfig cfg;
  cfg.model_path = a["model"];
  cfg.ctx = 512;
  cfg.parallel = std::atoll(a["parallel"].c_str());
  cfg.threads = std::atoll(a["threads"].c_str());
  auto plain = make_server(cfg);
  auto policy = zl::guard::parse_policy(policy_text(std::atoi(a["phrases"].c_str())), "guard_serve_bench policy");
  if (!policy.ok()) {
    std::fprintf(stderr, "guard_serve_bench: %s\n", policy.status().to_string().c_str());
    return 1;
  }
  auto guard = zl::guard::Guard::compile(std::move(policy).value());
  if (!guard.ok()) {
    std::fprintf(stderr, "guard_serve_bench: %s\n", guard.status().to_string().c_str());
    return 1;
  }
  cfg.guard = guard.value();
  auto guarded = make_server(cfg);
  if (!plain || !guarded) return 1;

  const int reps = std::max(1, std::atoi(a["reps"].c_str()));
  const int max_tokens = std::atoi(a["max-tokens"].c_str());
  std::printf("| streams | max_tokens | served: no guard tok/s | guard tok/s | guard/no guard | engine alone: "
              "no guard tok/s | guard tok/s | guard/no guard |\n|---|---|---|---|---|---|---|---|\n");
  for (int streams : parse_list(a["streams"])) {
    std::vector<double> with, without, ratios, e_with, e_without, e_ratios;
    run_phase(guarded->server->port(), streams, max_tokens, -1);  // warm-up
    run_phase(plain->server->port(), streams, max_tokens, -1);
    for (int rep = 0; rep < reps; ++rep) {
      // The order alternates too: neither phase always runs first.
      double g = 0, p = 0;
      if (rep % 2 == 0) g = run_phase(guarded->server->port(), streams, max_tokens, rep);
      p = run_phase(plain->server->port(), streams, max_tokens, rep);
      if (rep % 2 == 1) g = run_phase(guarded->server->port(), streams, max_tokens, rep);
      with.push_back(g);
      without.push_back(p);
      ratios.push_back(g / p);
      double eg = 0, ep = 0;
      if (rep % 2 == 0) eg = run_engine(*guarded, streams, max_tokens, rep);
      ep = run_engine(*plain, streams, max_tokens, rep);
      if (rep % 2 == 1) eg = run_engine(*guarded, streams, max_tokens, rep);
      e_with.push_back(eg);
      e_without.push_back(ep);
      e_ratios.push_back(eg / ep);
    }
    std::printf("| %d | %d | %.0f | %.0f | %.1f%% | %.0f | %.0f | %.1f%% |\n", streams, max_tokens, median(without),
                median(with), 100.0 * median(ratios), median(e_without), median(e_with), 100.0 * median(e_ratios));
    std::fflush(stdout);
  }
  per_token_costs(a["model"], *cfg.guard);
  guarded->server->stop();
  plain->server->stop();
  return 0;
}
