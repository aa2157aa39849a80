// The API service: registers every route on the HTTP router and wires
// parse -> auth -> prepare -> engine -> format.
//
//   HEAD /, GET /health            liveness (no auth)
//   GET /, GET /ui/{file}          the web playground for browsers (no auth; api/web_routes.cc)
//   GET /ready                     model loaded and the engine stepping (no auth)
//   GET /metrics                   Prometheus text (no auth unless ApiConfig::metrics_auth)
//   POST /v1/messages              Anthropic (+ count_tokens)
//   GET /v1/models, /v1/models/{id}  both APIs (a merged model object)
//   POST /v1/chat/completions, /v1/completions   OpenAI
// Generation routes answer with Server-Timing (api/server_timing.h) and take
// X-Engine-Mode: validate (api/validate.h).
// Routes under /v1/chat and /v1/completions answer errors in the OpenAI
// envelope; every other route in the Anthropic one.
//
// Thread-safe after construction: handlers run on any I/O thread.
#pragma once

#include <boost/json/object.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "api/context_policy.h"
#include "api/errors.h"
#include "api/fan_out.h"
#include "api/generation.h"
#include "api/metrics.h"
#include "api/prompt_codec.h"
#include "api/quota_glue.h"
#include "api/request_log.h"
#include "api/server_timing.h"
#include "engine/request.h"
#include "guard/guard.h"
#include "http/offload.h"
#include "http/router.h"
#include "limits/response_cache.h"
#include "limits/kv_admission.h"
#include "obs/trace_exporter.h"
#include "rollout/request_recorder.h"
#include "rollout/shadow.h"

namespace zl::api {

struct ApiConfig {
  std::string model_alias = "zerolayer";  // the id /v1/models lists
  std::vector<std::string> api_keys;      // empty: no authentication
  int64_t model_created_unix = 0;
  // How long the engine may hold work without stepping before /ready fails.
  std::chrono::milliseconds stall_timeout{10000};
  // Streams: a keep-alive frame (Anthropic `event: ping`, OpenAI `: ping`)
  // after this long without a write, e.g. during a long prefill; the
  // stream's head and start are then sent before the first token. 0: none.
  std::chrono::milliseconds sse_ping_interval{5000};
  // Called once per answered request (any thread); none: no request logs.
  RequestLogSink request_log;
  // OTLP traces of each generation (obs/trace_exporter.h); none: no traces.
  // Must outlive the service.
  obs::TraceExporter* tracer = nullptr;
  // The registry /metrics renders, shared with the engine's sink (the
  // engine's families are in it); none: the service makes its own.
  std::shared_ptr<obs::ServerMetrics> metrics;
  bool metrics_vllm_compat = false;  // --metrics-compat vllm: the vllm:* aliases
  bool metrics_auth = false;         // /metrics requires an API key (when keys are configured)
  bool ui = true;                    // --ui: the web playground at / and /ui/ (web/site.h)
  // --response-cache-mb (limits/response_cache.h): answers to greedy or
  // seeded requests replayed from memory; none: off.
  std::shared_ptr<limits::ResponseCache> response_cache;
  // KV-aware admission: --degrade max-tokens, --kv-high-watermark (limits/kv_admission.h).
  limits::KvAdmissionConfig kv_admission;
  // --keys (api/quota_glue.h): the keys file and the quotas over its
  // buckets. Both or neither; must outlive the service. A keys file turns
  // authentication on beside api_keys.
  limits::KeyStore* keys = nullptr;
  limits::QuotaManager* quota = nullptr;
  // The guard (--guard): its input rules screen every generation and
  // count_tokens request (api/guard_input.h); the engine applies its output
  // rules (EngineConfig::guard). Null: none.
  std::shared_ptr<const guard::Guard> guard;
  // Truncation policies (api/context_policy.h): --context-policy (a request's
  // `context_policy` overrides it) and --context-reserve.
  ContextPolicy context_policy = ContextPolicy::kError;
  int64_t context_reserve = kDefaultContextReserve;
  // --host-name: every answer carries x-engine-host with it; /ready and
  // /v1/models report it (`host`). Empty: no header.
  std::string host_name;
  // --shadow (rollout/shadow.h): sampled generations mirrored and compared. Null: none.
  std::shared_ptr<rollout::Shadow> shadow;
  // --record-requests (rollout/request_recorder.h): Messages bodies for `zerolayer diff`. Null: none.
  std::shared_ptr<rollout::RequestRecorder> request_recorder;
  // Requests whose work grows with their body (the generation routes,
  // count_tokens, /tokenize, /detokenize: JSON, template, tokenizer, guard)
  // are handled on offload_threads threads of their own from
  // offload_min_body_bytes of body on (http/offload.h), so that a large one
  // does not hold up the other answers of its I/O thread; smaller ones on
  // the I/O thread. 0 threads: all on the I/O thread.
  int offload_threads = 2;
  size_t offload_min_body_bytes = size_t{64} << 10;
};

class ApiService {
 public:
  // engine and codec must outlive the service.
  ApiService(ApiConfig config, EngineApi* engine, const PromptCodec* codec);

  void register_routes(http::Router& router);
  // Called before each /metrics render (any I/O thread), e.g. to copy the
  // server's connection counters into their gauges.
  void set_on_scrape(std::function<void()> fn) { on_scrape_ = std::move(fn); }
  // Once the HTTP server has stopped, before the engine goes: lets the
  // handlers running off the I/O thread (ApiConfig::offload_threads) finish.
  void stop() { offload_.stop(); }

 private:
  using Api = ApiKind;
  static Api api_of(const http::HttpRequest& req);
  // The identity of the request's API key (its prefix-cache tenant; "" when
  // the server has no keys), or nullopt after answering 401. A keys-file
  // key's identity is its entry's name (a key in both lists: the file's).
  std::optional<std::string> authorize(const http::HttpRequest& req, http::Responder& res, const std::string& route);
  // `timing`: the phases known so far, sent as Server-Timing (none: no header).
  // `headers`: added to the answer (rate-limit headers); `tenant`: the request log's.
  void send_error(const http::HttpRequest& req, http::Responder& res, const std::string& route, const ApiError& e,
                  const ServerTiming* timing = nullptr, std::vector<http::Header> headers = {},
                  std::string_view tenant = {});
  // send_error for an authenticated generation request refused before
  // admission: with its key's rate-limit headers as they stand (keys file).
  void send_keyed_error(const http::HttpRequest& req, http::Responder& res, const std::string& route,
                        const std::string& key_id, const ApiError& e, const ServerTiming* timing = nullptr);
  void send_json(const http::HttpRequest& req, http::Responder& res, const std::string& route, std::string body);
  // Metrics and the request log of an answer without generation.
  // `error_reason`: the request log's error_reason (a reason's table name; "stalled" for /ready).
  void record(const http::HttpRequest& req, const std::string& route, int status, std::string_view error_reason = {},
              std::string_view tenant = {});

  void handle_messages(http::HttpRequest& req, std::shared_ptr<http::Responder> res);
  void handle_count_tokens(http::HttpRequest& req, std::shared_ptr<http::Responder> res);
  // POST /tokenize, /detokenize (api/tokenize_api.h).
  void handle_tokenize(http::HttpRequest& req, std::shared_ptr<http::Responder> res);
  void handle_detokenize(http::HttpRequest& req, std::shared_ptr<http::Responder> res);
  void handle_openai(http::HttpRequest& req, std::shared_ptr<http::Responder> res, bool chat);
  void handle_models(http::HttpRequest& req, std::shared_ptr<http::Responder> res);
  void handle_model(http::HttpRequest& req, std::shared_ptr<http::Responder> res);
  void handle_ready(http::HttpRequest& req, std::shared_ptr<http::Responder> res);
  void handle_metrics(http::HttpRequest& req, std::shared_ptr<http::Responder> res);
  void handle_root(http::HttpRequest& req, std::shared_ptr<http::Responder> res);
  void handle_ui_asset(http::HttpRequest& req, std::shared_ptr<http::Responder> res);

  // Submits a parsed chat and answers through `res`, in the wire format
  // that make_formatter gives for the prepared request (of `prompt`, and as
  // choice `choice` of a fan-out; nullopt: the only answer).
  using FormatterFactory = std::function<std::unique_ptr<EventFormatter>(
      const Prepared&, const ChatRequest& prompt, std::optional<int> choice)>;
  // `prompts`: the chat, or a completion's prompts (the first holds the
  // shared settings). `key_id`: what authorize() returned; `timing`: the
  // parse phase (Server-Timing). With fan_format, each prompt is answered
  // as prompts[0].n choices, joined by a FanOut (api/fan_out.h) when there
  // is more than one. A validate-mode request (api/validate.h) is checked as
  // the request itself (every prompt, the quota with every choice's slot),
  // then prefilled only, its first prompt once, and answered by the
  // validate formatter.
  void generate(const http::HttpRequest& req, std::shared_ptr<http::Responder> res, const std::string& route,
                const std::string& key_id, std::vector<ChatRequest> prompts, ServerTiming timing,
                const FormatterFactory& make_formatter, const std::optional<FanOutFormat>& fan_format = std::nullopt);
  // KV-aware admission (limits/kv_admission.h) of a prepared request, per API
  // key (else per tenant): the 400 kv_cache_overflow to send, or none after
  // setting the granted max_tokens (and x-engine-degraded when lowered).
  std::optional<ApiError> admit_kv(const http::HttpRequest& req, const std::string& key_id, const ChatRequest& chat,
                                   const EngineStats& stats, Prepared& p, SessionOptions& opts);
  boost::json::object model_object() const;  // /v1/models entry (both SDKs)

  ApiConfig config_;
  std::vector<std::string> key_ids_;  // identity of config_.api_keys[i] (never the key itself)
  EngineApi* engine_;
  const PromptCodec* codec_;
  std::shared_ptr<obs::ServerMetrics> metrics_root_;  // declared before metrics_, which registers in it
  ApiMetrics metrics_;
  std::unique_ptr<QuotaGate> quota_;  // a keys file was given (ApiConfig::keys)
  std::function<void()> on_scrape_;
  limits::KvAdmission kv_admission_{config_.kv_admission};
  std::mutex ready_mu_;
  int64_t last_steps_ = -1;
  std::chrono::steady_clock::time_point last_step_change_ = std::chrono::steady_clock::now();
  // Last: its threads stop (finishing the handlers they run) before the rest goes.
  http::HandlerOffload offload_{config_.offload_threads, config_.offload_min_body_bytes};
};

}  // namespace zl::api
