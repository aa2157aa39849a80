// `zerolayer serve`: the HTTP server with the Anthropic and OpenAI APIs.
// Wiring only: settings (cli/serve_config.h), engine + codec
// (cli/serve_engine.h), API routes (api/service.h), HTTP (http/server.h).
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "api/guard_input.h"
#include "api/service.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/serve.h"
#include "cli/serve_config.h"
#include "cli/serve_engine.h"
#include "core/log.h"
#include "guard/guard.h"
#include "http/server.h"
#include "limits/response_cache.h"
#include "limits/bucket_store.h"
#include "limits/keys.h"
#include "limits/quota.h"
#include "limits/redis_store.h"

namespace zl::cli {
namespace {

const char kSynopsis[] = "--model PATH [--host 127.0.0.1] [--port 8080] [--api-key KEY]... [flags]";

const char* signal_name(int sig) { return sig == SIGINT ? "SIGINT" : "SIGTERM"; }

// Graceful drain after the first stop signal `sig`: the server stops
// accepting and closes idle connections; returns once no request is in
// progress, after timeout_s, or at a second stop signal (taken from
// `signals`, which are blocked in every thread). The caller then stops.
void drain(http::HttpServer& server, int sig, int64_t timeout_s, const sigset_t& signals) {
  server.begin_drain();
  const int64_t n_in_progress = server.requests_in_progress();
  if (n_in_progress == 0) {
    log::info("stop signal received, no request in progress, stopping", {{"signal", signal_name(sig)}});
    return;
  }
  log::info("stop signal received, draining the requests in progress (the signal again stops at once)",
            {{"signal", signal_name(sig)}, {"n_in_progress", n_in_progress}, {"drain_timeout_s", timeout_s}});
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  const timespec poll_interval{.tv_sec = 0, .tv_nsec = 20'000'000};
  while (server.requests_in_progress() > 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      log::warn("drain timeout passed, stopping",
                {{"drain_timeout_s", timeout_s}, {"n_in_progress", server.requests_in_progress()}});
      return;
    }
    const int again = sigtimedwait(&signals, nullptr, &poll_interval);
    if (again > 0) {
      log::info("stop signal received during the drain, stopping at once", {{"signal", signal_name(again)}});
      return;
    }
  }
  log::info("requests drained, stopping");
}

// SIGHUP: the TLS certificate and key again; a bad file keeps the ones in force.
void reload_tls(http::HttpServer& server) {
  if (Status s = server.reload_tls(); !s.ok()) {
    log::error("TLS certificate not reloaded: the previous one stays in force", {{"error", s.message()}});
    return;
  }
  log::info("TLS certificate reloaded");
}

// SIGHUP: the keys file again (limits::reload_keys); a bad file keeps the
// keys in force and says why. `reloads`: zerolayer_keys_reloads_total{result}.
void reload_keys(limits::KeyStore* keys, limits::QuotaManager* quota, obs::Family* reloads) {
  if (!keys) {
    log::info("SIGHUP received: no keys file to reload (--keys)");
    return;
  }
  auto r = limits::reload_keys(*keys, *quota);
  reloads->counter({r.ok() ? "ok" : "error"}).add();
  if (!r.ok()) {
    log::error("keys file not reloaded: the previous keys stay in force", {{"error", r.status().message()}});
    return;
  }
  log::info("keys file reloaded", {{"path", keys->path()}, {"n_keys", static_cast<int64_t>(r->n_keys)},
                                   {"n_added", static_cast<int64_t>(r->n_added)},
                                   {"n_removed", static_cast<int64_t>(r->n_removed)}});
}

}  // namespace

std::vector<FlagSpec> serve_flags() {
  return {
      {"model", true, "GGUF model to serve (env ZEROLAYER_MODEL)"},
      {"host", true, "address to listen on (default 127.0.0.1)"},
      {"port", true, "port to listen on (default 8080; 0: any free port)"},
      {"api-key", true, "accepted API key, as x-api-key or Authorization: Bearer (repeatable; none: open)", true},
      {"api-key-file", true, "file with accepted API keys, one a line"},
      {"threads", true, "compute threads (default: one per core)"},
      {"ctx", true, "context window per sequence in tokens (default: the model's)"},
      {"parallel", true, "sequences decoded at once (default 0: as many as the KV cache holds at 512 tokens each, 4 to 64; printed at startup)"},
      {"kv-size", true, "KV cache size in tokens, shared by all sequences (default: ctx x parallel when --parallel is given, else ctx x 16; at most half the free memory, at least ctx; below ctx, long requests get 400 kv_cache_overflow)"},
      {"kv-type", true, "KV cache type: f16 (default), q8_0 (half the bytes) or f32"},
      {"batch-tokens", true, "token budget of one engine step: prefill chunks + decodes (default 512)"},
      {"schedule", true, "latency (default): new requests' first tokens first, shortest prompt first within a fairness bound; throughput: each step as full as the budget allows, in arrival order"},
      {"speculative", true, "speculative decoding: off (default without --draft-model; requests may still ask with \"speculative\": true), ngram (lossless n-gram / prompt-lookup drafts for every request that does not say false) or draft (drafts from --draft-model; the default with it)"},
      {"draft-model", true, "GGUF draft model with the model's vocabulary (a smaller or quantized sibling): speculative drafts come from it (default --speculative draft; with --speculative off, only requests that ask)"},
      {"draft-slots", true, "sequences drafting from --draft-model at once, each with a whole context of the draft's KV cache (default 0: parallel, at most the contexts the KV cache holds)"},
      {"draft-p-min", true, "the draft model drafts while it gives its token at least this probability (default 0.8, 0 to 1; 0: always k tokens)"},
      {"spec-draft-max", true, "speculative draft tokens verified per sequence and step at most (default 8, 1 to 32; adaptive below it; a request's draft_max may only lower it)"},
      {"spec-ngram-min", true, "shortest n-gram looked up for a draft (default 2; n-grams of up to max(4, this) tokens are tried, longest first)"},
      {"model-alias", true, "model id listed by /v1/models (default: the model file's name)"},
      {"chat-template", true, "a built-in chat template family instead of the model's Jinja template (llama3, chatml, …; with thoughts: qwen3, qwen3.5, qwq, deepseek-r1)"},
      {"chat-template-file", true, "a Jinja chat template file instead of the model's own"},
      {"io-threads", true, "HTTP I/O threads (default 1)"},
      {"max-body-bytes", true, "largest request body; larger is 413 (default 33554432)"},
      {"header-timeout-ms", true, "time to send the request headers (default 10000)"},
      {"body-timeout-ms", true, "time to send the request body (default 60000)"},
      {"idle-timeout-ms", true, "keep-alive idle time (default 60000)"},
      {"drain-timeout", true, "on SIGTERM/SIGINT, seconds for requests in progress to finish (default 30; 0: stop at once)"},
      {"sse-ping-interval", true,
       "streams: seconds without a write (a long prefill, a queue) before a keep-alive ping (default 5; fractions "
       "allowed; 0: none)"},
      {"max-pending-events", true, "pause a stream whose client lags this many events behind (default 256)"},
      {"request-log", true, "one line per request on stderr: JSON, or text on a terminal (default true)"},
      {"otlp-endpoint", true,
       "export traces (spans request/queue/prefill/decode) as OTLP/HTTP JSON to URL/v1/traces, e.g. "
       "http://127.0.0.1:4318 (default: none)"},
      {"log-format", true, "logs on stderr: json or text (default: json, text when stderr is a terminal)"},
      {"socket-send-buffer", true, "SO_SNDBUF of connections in bytes (default 0: kernel autotuning)"},
      {"max-header-bytes", true, "largest request header section (HTTP/2: header list); larger is 413 headers_too_large (default 65536)"},
      {"tls-cert", true, "TLS certificate, PEM (the chain may follow); with --tls-key the port speaks only TLS (re-read on SIGHUP)"},
      {"tls-key", true, "TLS private key, PEM (re-read on SIGHUP)"},
      {"h2-max-concurrent-streams", true, "HTTP/2 streams open at once per connection (default 128)"},
      {"h2-max-resets-per-s", true, "HTTP/2 stream resets a client may send per second before the connection closes (default 100)"},
      {"metrics-compat", true, "also export other servers' metric names on /metrics: vllm (default: none)"},
      {"metrics-auth", true, "/metrics requires an API key like the API routes (default false: open)"},
      {"mmap", true,
       "read the model's embeddings and norms from the file's mapping (default true); false: load them into memory "
       "and unmap the file, which may then change on disk while served (llama-server's --no-mmap)"},
      {"ui", true, "serve the web playground and dashboard to browsers at / and /ui/ (default true)"},
      {"keys", true, "TOML file of API keys with per-key quotas (re-read on SIGHUP; beside --api-key)"},
      {"max-queue", true, "requests waiting for a batch slot at most; more are 529/503 overloaded (default 4 x the resolved parallel)"},
      {"max-queue-tokens", true, "prompt tokens waiting at most (default 0: unlimited)"},
      {"queue-timeout-ms", true, "longest wait for a batch slot; then 529/503 queue_timeout (default 0: unlimited)"},
      {"max-pause-ms", true, "preempt a stream whose client stops reading for this long (default 0: never)"},
      {"degrade", true, "max-tokens: admit a request that overflows the KV cache with max_tokens lowered, and halve the grants of keys that overflow under KV pressure (x-engine-degraded; default none)"},
      {"kv-high-watermark", true, "KV cache usage above this fraction is pressure for --degrade (default 0.9)"},
      {"redis", true, "redis://HOST:PORT[/DB]: keep the --keys quota buckets in Redis, shared by replicas"},
      {"redis-fail", true, "when Redis is unreachable: open (local buckets, default) or closed (503)"},
      {"response-cache-mb", true, "exact-match cache of greedy/seeded answers, in MiB (default 0: off)"},
      {"guard", true, "TOML guard policy: input screening, output masking and redaction"},
      {"context-policy", true,
       "a prompt that leaves no room for the reserved output: error (400, default), drop_oldest or middle_out "
       "(drop whole turns until it fits; a request's context_policy overrides it)"},
      {"context-reserve", true, "tokens kept free for the answer when truncating: min(max_tokens, this) (default 256)"},
      {"host-name", true, "this replica's name: the x-engine-host header of every answer, `host` in /ready and /v1/models (default: the hostname)"},
      {"shadow", true, "http://HOST:PORT[/base]: replay a sampled fraction of generations there, streamed, and compare the answers (default: none)"},
      {"shadow-fraction", true, "fraction of generations mirrored to --shadow, by hash of metadata.user_id / user, else random (default 0.1)"},
      {"shadow-api-key", true, "API key sent to the --shadow endpoint (default: none)"},
      {"shadow-log", true, "append one JSON line per mirrored pair (times, tokens, stop reasons, BLEU-4) to FILE"},
      {"shadow-timeout-ms", true, "a shadow request's own deadline (default 60000)"},
      {"shadow-queue", true, "mirrored pairs not yet compared at most; more are dropped and counted (default 64)"},
      {"record-requests", true, "append every /v1/messages body to FILE, one a line: the input of `zerolayer diff --requests`"},
      {"config", true, "TOML file with any of these settings (keys with '_' for '-')"},
  };
}

std::optional<ServeCommandLine> parse_serve_command(int argc, char** argv, int first,
                                                    const std::vector<FlagSpec>& extra_flags, const EnvFn& env,
                                                    int* exit_code) {
  std::vector<FlagSpec> specs = serve_flags();
  specs.insert(specs.end(), extra_flags.begin(), extra_flags.end());
  auto args = parse_command(argc, argv, first, "serve", kSynopsis, specs, exit_code);
  if (!args) return std::nullopt;
  std::map<std::string, std::string> flags;
  for (const std::string& name : serve_setting_names()) {
    if (auto v = args->get(name)) flags[name] = *v;
  }
  if (auto v = args->get("config")) flags["config"] = *v;
  auto config = resolve_serve_config(flags, args->get_all("api-key"), env);
  if (!config.ok()) {
    *exit_code = report_error("serve", config.status());
    return std::nullopt;
  }
  return ServeCommandLine{.args = std::move(args).value(), .config = std::move(config).value()};
}

int run_serve(int argc, char** argv, int first, const ServeHooks& hooks) {
  int code = kExitOk;
  auto cmdline = parse_serve_command(argc, argv, first, hooks.extra_flags,
                                     [](const char* n) { return std::getenv(n); }, &code);
  if (!cmdline) return code;
  if (!cmdline->config.guard_file.empty()) {
    // Before the model loads: a bad policy fails the start at once.
    auto guard = guard::Guard::load(cmdline->config.guard_file);
    if (!guard.ok()) {
      report_error("serve", guard.status());
      return kExitUsage;
    }
    cmdline->config.guard = std::move(guard).value();
  }
  const ServeConfig& cfg = cmdline->config;
  if (!cfg.log_format.empty()) log::set_format(cfg.log_format == "text" ? log::Format::kText : log::Format::kJson);

  // SIGINT/SIGTERM (and SIGHUP, the keys file's reload) are taken by
  // sigwait below; block them before any thread starts.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigset_t wait_signals = stop_signals;
  sigaddset(&wait_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &wait_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // Before the engine (which reports into it) and destroyed after it.
  auto metrics = std::make_shared<obs::ServerMetrics>();
  auto backend = hooks.make_backend(cfg, cmdline->args, &metrics->engine);
  if (!backend.ok()) return report_error("serve", backend.status());
  ServeBackend& b = backend.value();

  api::ApiConfig api_cfg;
  api_cfg.model_alias = cfg.model_alias.empty() ? b.default_alias : cfg.model_alias;
  api_cfg.api_keys = cfg.api_keys;
  // Whole milliseconds; a positive interval stays positive (at least 1 ms).
  api_cfg.sse_ping_interval = std::chrono::milliseconds(
      cfg.sse_ping_interval_s > 0 ? std::max<int64_t>(1, std::llround(cfg.sse_ping_interval_s * 1000)) : 0);
  if (cfg.request_log) api_cfg.request_log = api::stderr_request_log();
  std::unique_ptr<obs::TraceExporter> tracer;
  if (!cfg.otlp_endpoint.empty()) {
    auto t = obs::TraceExporter::create({.endpoint = cfg.otlp_endpoint});
    if (!t.ok()) return report_error("serve", t.status());
    tracer = std::move(t).value();
    api_cfg.tracer = tracer.get();
  }
  api_cfg.metrics = metrics;
  api_cfg.metrics_vllm_compat = cfg.metrics_compat == "vllm";
  api_cfg.metrics_auth = cfg.metrics_auth;
  api_cfg.ui = cfg.ui;
  if (cfg.response_cache_mb > 0) {  // --response-cache-mb (limits/response_cache.h)
    api_cfg.response_cache = std::make_shared<limits::ResponseCache>(static_cast<size_t>(cfg.response_cache_mb) << 20,
                                                                     &metrics->registry);
  }
  api_cfg.kv_admission = {.degrade = cfg.degrade == "max-tokens", .high_watermark = cfg.kv_high_watermark};
  // --keys: the keys file and per-key quotas over local token buckets
  // (limits/keys.h, limits/quota.h). Destroyed after the server.
  std::unique_ptr<limits::KeyStore> keys;
  std::unique_ptr<limits::BucketStore> buckets;
  std::unique_ptr<limits::QuotaManager> quota;
  obs::Family* key_reloads = nullptr;
  if (!cfg.keys_file.empty()) {
    auto k = limits::KeyStore::open(cfg.keys_file);
    if (!k.ok()) return report_error("serve", k.status());
    keys = std::move(k).value();
    if (!cfg.redis_url.empty()) {  // --redis: buckets shared by replicas (limits/redis_store.h)
      auto shared = limits::open_redis_bucket_store(cfg.redis_url, cfg.redis_fail, &metrics->registry);
      if (!shared.ok()) return report_error("serve", shared.status().with_context("--redis"));
      buckets = std::move(shared).value();
    } else {
      buckets = std::make_unique<limits::LocalBucketStore>();
    }
    quota = std::make_unique<limits::QuotaManager>(*buckets);
    api_cfg.keys = keys.get();
    api_cfg.quota = quota.get();
    key_reloads = &metrics->registry.add("zerolayer_keys_reloads_total", "Reloads of the keys file (SIGHUP), by result",
                                         obs::MetricType::kCounter, {"result"});
    key_reloads->counter({"ok"});
    key_reloads->counter({"error"});
  }
  api_cfg.guard = cfg.guard;
  if (cfg.guard) api::register_guard_metrics(*cfg.guard, metrics->engine.guard_actions());
  api_cfg.context_policy = api::parse_context_policy(cfg.context_policy).value_or(api::ContextPolicy::kError);
  api_cfg.context_reserve = cfg.context_reserve;
  if (!cfg.redis_url.empty() && !quota) log::warn("--redis is unused without --keys: no per-key quotas to share");
  api_cfg.host_name = cfg.host_name;
  if (!cfg.shadow_url.empty()) {  // --shadow (rollout/shadow.h)
    auto shadow = rollout::Shadow::create({.url = cfg.shadow_url,
                                           .fraction = cfg.shadow_fraction,
                                           .api_key = cfg.shadow_api_key,
                                           .log_path = cfg.shadow_log,
                                           .timeout = std::chrono::milliseconds(cfg.shadow_timeout_ms),
                                           .queue_capacity = static_cast<size_t>(cfg.shadow_queue)},
                                          metrics->registry);
    if (!shadow.ok()) return report_error("serve", shadow.status().with_context("--shadow"));
    api_cfg.shadow = std::move(shadow).value();
  }
  if (!cfg.record_requests.empty()) {
    auto rec = rollout::RequestRecorder::open(cfg.record_requests);
    if (!rec.ok()) return report_error("serve", rec.status().with_context("--record-requests"));
    api_cfg.request_recorder = std::move(rec).value();
  }
  api::ApiService service(api_cfg, b.engine.get(), b.codec.get());
  http::Router router;
  service.register_routes(router);

  http::ServerConfig http_cfg;
  http_cfg.host = cfg.host;
  http_cfg.port = static_cast<uint16_t>(cfg.port);
  http_cfg.n_io_threads = static_cast<int>(cfg.io_threads);
  http_cfg.max_body_bytes = static_cast<uint64_t>(cfg.max_body_bytes);
  http_cfg.max_header_bytes = static_cast<uint32_t>(cfg.max_header_bytes);
  http_cfg.header_timeout = std::chrono::milliseconds(cfg.header_timeout_ms);
  http_cfg.body_timeout = std::chrono::milliseconds(cfg.body_timeout_ms);
  http_cfg.idle_timeout = std::chrono::milliseconds(cfg.idle_timeout_ms);
  http_cfg.socket_send_buffer = static_cast<int>(cfg.socket_send_buffer);
  http_cfg.tls_cert_file = cfg.tls_cert;
  http_cfg.tls_key_file = cfg.tls_key;
  http_cfg.h2_max_concurrent_streams = static_cast<uint32_t>(cfg.h2_max_concurrent_streams);
  http_cfg.h2_max_resets_per_s = static_cast<uint32_t>(cfg.h2_max_resets_per_s);
  http::HttpServer server(http_cfg, &router);
  obs::Gauge& connections_open =
      metrics->registry.add("zerolayer_http_connections_open", "Open HTTP connections", obs::MetricType::kGauge).gauge();
  obs::Counter& connections_total =
      metrics->registry.add("zerolayer_http_connections_total", "HTTP connections accepted", obs::MetricType::kCounter)
          .counter();
  obs::Counter& h2_connections_total =
      metrics->registry
          .add("zerolayer_http2_connections_total",
               "HTTP/2 connections (prior knowledge, Upgrade: h2c or ALPN h2)", obs::MetricType::kCounter)
          .counter();
  obs::Counter& h2_abuse_closed =
      metrics->registry
          .add("zerolayer_http2_abuse_closed_total",
               "HTTP/2 connections closed with GOAWAY for rapid resets or PING/SETTINGS floods",
               obs::MetricType::kCounter)
          .counter();
  obs::Counter& spans_exported = metrics->registry
                                     .add("engine_trace_spans_exported_total", "Spans the OTLP collector accepted",
                                          obs::MetricType::kCounter)
                                     .counter();
  obs::Counter& spans_dropped =
      metrics->registry
          .add("engine_trace_spans_dropped_total",
               "Spans dropped: the export queue was full or the collector did not take them", obs::MetricType::kCounter)
          .counter();
  service.set_on_scrape([&server, &tracer, &connections_open, &connections_total, &spans_exported, &spans_dropped,
                         &h2_connections_total, &h2_abuse_closed] {
    const http::ServerCounters c = server.counters();
    h2_connections_total.mirror(c.n_h2_sessions_total);
    h2_abuse_closed.mirror(c.n_h2_abuse_closed_total);
    connections_open.set(static_cast<double>(c.n_connections_open));
    connections_total.mirror(static_cast<int64_t>(c.n_connections_total));
    spans_exported.mirror(tracer ? static_cast<int64_t>(tracer->spans_exported()) : 0);
    spans_dropped.mirror(tracer ? static_cast<int64_t>(tracer->spans_dropped()) : 0);
  });
  if (Status s = server.listen(); !s.ok()) return report_error("serve", s);
  server.start();
  log::info("serving", {{"model", api_cfg.model_alias}, {"host", cfg.host}, {"port", static_cast<int64_t>(server.port())},
                        {"otlp_endpoint", cfg.otlp_endpoint}});

  const std::string url = std::string(server.tls() ? "https://" : "http://") + (cfg.host.find(':') != std::string::npos ? "[" + cfg.host + "]" : cfg.host) +
                          ":" + std::to_string(server.port());
  std::printf("zerolayer: serving %s at %s (Anthropic base URL %s, OpenAI base URL %s/v1)%s\n",
              api_cfg.model_alias.c_str(), url.c_str(), url.c_str(), url.c_str(),
              cfg.api_keys.empty() && !keys ? "" : ", API key required");
  std::fflush(stdout);

  int sig = 0;
  for (;;) {
    sigwait(&wait_signals, &sig);
    if (sig != SIGHUP) break;
    reload_keys(keys.get(), quota.get(), key_reloads);
    if (server.tls()) reload_tls(server);
  }
  if (cfg.drain_timeout_s > 0) {
    drain(server, sig, cfg.drain_timeout_s, stop_signals);
  } else {
    log::info("stop signal received, stopping", {{"signal", signal_name(sig)}});
  }
  // Order: no more I/O, then the engine (its thread may still notify channels),
  // then the server's connections (destroyed with it).
  server.stop();
  service.stop();  // handlers still running off the I/O threads, before the engine goes
  b.engine.reset();
  tracer.reset();  // flushes the last spans (bounded by its shutdown timeout)
  return kExitOk;
}

int cmd_serve(int argc, char** argv, int first) {
  return run_serve(argc, argv, first,
                   {.make_backend = [](const ServeConfig& config, const Args&, obs::EngineSink* sink) {
                     return make_backend(config, sink);
                   }});
}

}  // namespace zl::cli
