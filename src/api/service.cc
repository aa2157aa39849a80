#include "api/service.h"

#include <algorithm>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <cstdio>
#include <ctime>

#include "api/anthropic/messages.h"
#include "api/context_edits.h"
#include "api/errors.h"
#include "api/generation.h"
#include "api/guard_input.h"
#include "api/json_fields.h"
#include "api/json_util.h"
#include "api/openai/chat_completions.h"
#include "api/shadow_glue.h"
#include "api/tokenize_api.h"
#include "api/trace_request.h"
#include "api/validate.h"
#include "core/hash.h"
#include "http/sse.h"

namespace zl::api {
namespace {

// When the server had the whole request; now for a request built elsewhere.
RequestLog::Clock::time_point received_at(const http::HttpRequest& req) {
  return req.t_received != RequestLog::Clock::time_point{} ? req.t_received : RequestLog::Clock::now();
}

double ms_since(RequestLog::Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(RequestLog::Clock::now() - t).count();
}

// Constant-time for keys of equal length: the time taken does not reveal
// how much of a key matched.
bool key_equals(std::string_view a, std::string_view b) {
  if (a.size() != b.size() || b.empty()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// "key:" + 16 hex digits of a 64-bit hash of the key (FNV-1a, then the
// splitmix64 finalizer): names the key in the prefix-cache salt without
// holding the key itself. Not a secret-keeping digest (a guessable key can
// be found from it): it stays inside the process and is never logged.
std::string key_identity(std::string_view key) {
  const uint64_t h = stable_hash64(key);
  char buf[24];
  std::snprintf(buf, sizeof buf, "key:%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string rfc3339(int64_t unix_time) {
  std::time_t t = static_cast<std::time_t>(unix_time);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

ApiService::ApiService(ApiConfig config, EngineApi* engine, const PromptCodec* codec)
    : config_(std::move(config)),
      engine_(engine),
      codec_(codec),
      metrics_root_(config_.metrics ? config_.metrics : std::make_shared<obs::ServerMetrics>()),
      metrics_(metrics_root_.get(), MetricsOptions{.vllm_compat = config_.metrics_vllm_compat,
                                                   .model_name = config_.model_alias}) {
  if (config_.model_created_unix == 0) config_.model_created_unix = std::time(nullptr);
  for (const std::string& k : config_.api_keys) key_ids_.push_back(key_identity(k));
  if (config_.keys && config_.quota) {
    quota_ = std::make_unique<QuotaGate>(config_.keys, config_.quota, metrics_root_->registry);
  }
}

ApiService::Api ApiService::api_of(const http::HttpRequest& req) {
  const std::string_view p = req.path;
  if (p.starts_with("/v1/chat/") || p == "/v1/completions" || p.starts_with("/v1/completions/")) return Api::kOpenAI;
  if (p == "/tokenize" || p == "/detokenize") return Api::kOpenAI;  // llama-server's and vLLM's routes
  return Api::kAnthropic;
}

void ApiService::register_routes(http::Router& router) {
  using http::HttpRequest;
  using R = std::shared_ptr<http::Responder>;
  if (!config_.host_name.empty()) router.set_common_headers({{"x-engine-host", config_.host_name}});
  router.set_error_formatter([this](http::HttpError error, const HttpRequest& req) {
    const ApiError e = from_http_error(error, req);
    http::HttpResponse r = api_of(req) == Api::kOpenAI ? openai_error_response(e)
                                                       : anthropic_error_response(e, req.request_id);
    record(req, "other", r.status, error_reason_name(e.reason));
    metrics_.on_error(api_of(req), e.reason);
    return r;
  });
  // A handler that threw after its stream's 200: the API's SSE error frame.
  router.set_stream_error_formatter([this](http::HttpError error, const HttpRequest& req) {
    const ApiError e = from_http_error(error, req);
    record(req, "other", 200, error_reason_name(e.reason));  // the status that went out
    metrics_.on_error(api_of(req), e.reason);
    std::string out;
    if (api_of(req) == Api::kOpenAI) {
      http::append_sse_data(out, openai_error_json(e));
    } else {
      http::append_sse_event(out, "error", anthropic_error_json(e, req.request_id));
    }
    return out;
  });
  router.add("GET", "/", [this](HttpRequest& q, R res) { handle_root(q, std::move(res)); });
  if (config_.ui) router.add("GET", "/ui/{file}", [this](HttpRequest& q, R res) { handle_ui_asset(q, std::move(res)); });
  router.add("GET", "/health", [this](HttpRequest& q, R res) { send_json(q, *res, "/health", R"({"status":"ok"})"); });
  router.add("GET", "/ready", [this](HttpRequest& q, R res) { handle_ready(q, std::move(res)); });
  router.add("GET", "/metrics", [this](HttpRequest& q, R res) { handle_metrics(q, std::move(res)); });
  // (offload_: large bodies handled off the I/O thread, ApiConfig::offload_threads)
  router.add("POST", "/v1/messages",
             offload_.wrap([this](HttpRequest& q, R res) { handle_messages(q, std::move(res)); }));
  router.add("POST", "/v1/messages/count_tokens",
             offload_.wrap([this](HttpRequest& q, R res) { handle_count_tokens(q, std::move(res)); }));
  router.add("POST", "/v1/chat/completions",
             offload_.wrap([this](HttpRequest& q, R res) { handle_openai(q, std::move(res), true); }));
  router.add("POST", "/v1/completions",
             offload_.wrap([this](HttpRequest& q, R res) { handle_openai(q, std::move(res), false); }));
  router.add("POST", "/tokenize", offload_.wrap([this](HttpRequest& q, R res) { handle_tokenize(q, std::move(res)); }));
  router.add("POST", "/detokenize",
             offload_.wrap([this](HttpRequest& q, R res) { handle_detokenize(q, std::move(res)); }));
  router.add("GET", "/v1/models", [this](HttpRequest& q, R res) { handle_models(q, std::move(res)); });
  router.add("GET", "/v1/models/{id}", [this](HttpRequest& q, R res) { handle_model(q, std::move(res)); });
}

std::optional<std::string> ApiService::authorize(const http::HttpRequest& req, http::Responder& res,
                                                 const std::string& route) {
  if (config_.api_keys.empty() && !quota_) return std::string();
  std::string_view key = req.header("x-api-key");
  if (key.empty()) {
    std::string_view auth = req.header("authorization");
    if (auth.size() > 7 && (auth.substr(0, 7) == "Bearer " || auth.substr(0, 7) == "bearer ")) key = auth.substr(7);
  }
  if (!key.empty()) {
    // Every key is compared (no early exit): the time does not say which matched.
    std::optional<size_t> match;
    for (size_t i = 0; i < config_.api_keys.size(); ++i) {
      if (key_equals(key, config_.api_keys[i])) match = i;
    }
    // The keys file too, whatever the list gave (api/quota_glue.h).
    std::optional<std::string> file_key = quota_ ? quota_->identify(key) : std::nullopt;
    if (file_key) return file_key;
    if (match) return key_ids_[*match];
  }
  ApiError e{.reason = key.empty() ? ErrorReason::kMissingApiKey : ErrorReason::kInvalidApiKey,
             .message = key.empty() ? "missing API key: send x-api-key or Authorization: Bearer" : "invalid API key"};
  send_error(req, res, route, e);
  return std::nullopt;
}

void ApiService::send_error(const http::HttpRequest& req, http::Responder& res, const std::string& route,
                            const ApiError& e, const ServerTiming* timing, std::vector<http::Header> headers,
                            std::string_view tenant) {
  http::HttpResponse r = api_of(req) == Api::kOpenAI ? openai_error_response(e) : anthropic_error_response(e, req.request_id);
  record(req, route, r.status, error_reason_name(e.reason), tenant);
  for (http::Header& h : headers) r.headers.push_back(std::move(h));
  metrics_.on_error(api_of(req), e.reason);
  if (timing) {
    std::string value = timing->header_value();
    if (!value.empty()) r.headers.emplace_back("Server-Timing", std::move(value));
  }
  res.send(std::move(r));
}

void ApiService::record(const http::HttpRequest& req, const std::string& route, int status,
                        std::string_view error_reason, std::string_view tenant) {
  metrics_.on_request(route, status);
  if (!config_.request_log) return;
  RequestLog log{.request_id = req.request_id, .method = req.method, .route = route, .status = status,
                 .error_reason = std::string(error_reason), .t_start = received_at(req), .tenant = std::string(tenant)};
  config_.request_log(log);
}

void ApiService::send_keyed_error(const http::HttpRequest& req, http::Responder& res, const std::string& route,
                                  const std::string& key_id, const ApiError& e, const ServerTiming* timing) {
  std::vector<http::Header> headers = quota_ ? quota_->headers_now(key_id, api_of(req)) : std::vector<http::Header>{};
  // A keys-file key (it has headers) names its tenant in the request log.
  const std::string_view tenant = headers.empty() ? std::string_view() : std::string_view(key_id);
  send_error(req, res, route, e, timing, std::move(headers), tenant);
}

void ApiService::send_json(const http::HttpRequest& req, http::Responder& res, const std::string& route,
                           std::string body) {
  record(req, route, 200);
  res.send(http::HttpResponse{.status = 200, .content_type = "application/json", .headers = {}, .body = std::move(body)});
}

void ApiService::generate(const http::HttpRequest& req, std::shared_ptr<http::Responder> res,
                          const std::string& route, const std::string& key_id, std::vector<ChatRequest> prompts,
                          ServerTiming timing, const FormatterFactory& make_formatter,
                          const std::optional<FanOutFormat>& fan_format) {
  const EngineStats stats = engine_->stats();
  // A validated request is checked as the request itself (every prompt, every
  // choice's quota slot) and prefills its first prompt, once.
  const bool validate = is_validate_mode(req);
  const ChatRequest& chat = prompts.front();
  const int n_per_prompt = !fan_format ? 1 : std::max<int>(1, chat.n);
  const auto t_prepare = RequestLog::Clock::now();
  // A sequence holds at most the KV cache's capacity when it is below n_ctx.
  const ContextOptions context{.policy = chat.context_policy.value_or(config_.context_policy),
                               .reserve = config_.context_reserve,
                               .n_window = limits::kv_max_tokens_fit(limits::kv_snapshot(stats), 0).value_or(0)};
  std::vector<Prepared> prepared;
  for (size_t k = 0; k < prompts.size(); ++k) {
    ApiResult<Prepared> p = prepare_request(prompts[k], *codec_, stats.n_ctx, req.request_id, key_id, context);
    if (!p.ok()) {
      ApiError e = p.error();
      if (prompts.size() > 1 && e.param == "prompt") e.param = index_param("prompt", k);
      timing.tokenize_ms = ms_since(t_prepare);
      return send_keyed_error(req, *res, route, key_id, e, &timing);
    }
    prepared.push_back(std::move(p).value());
  }
  timing.tokenize_ms = ms_since(t_prepare);
  const int n_choices = static_cast<int>(prepared.size()) * n_per_prompt;
  SessionOptions opts;
  opts.timing = timing;
  opts.stream = chat.stream;
  opts.shape = chat.shape;
  opts.max_tokens_clamped = prepared[0].max_tokens_clamped;
  opts.n_prompt_tokens = prepared[0].n_prompt_tokens;
  opts.ping_interval = config_.sse_ping_interval;
  opts.tools = prepared[0].tools;
  opts.thinking = prepared[0].thinking;
  const ContextTruncation truncation = prepared[0].truncation;
  for (const Prepared& p : prepared) {  // the metric for each prompt; the header and log for the first
    if (p.truncation.applied() && !validate) metrics_.on_truncation(p.truncation.policy, p.truncation.n_tokens);
  }
  if (truncation.applied()) {  // x-engine-context-truncated, the metric; the request log below
    opts.head_headers.push_back([v = truncation.header_value()](const Usage&, std::vector<http::Header>& h) {
      h.emplace_back("x-engine-context-truncated", v);
    });
  }
  // KV-aware admission: a 400 kv_cache_overflow, or a lower max_tokens (each
  // prompt's; x-engine-degraded for the first).
  std::vector<bool> clamped(prepared.size());
  for (size_t k = 0; k < prepared.size(); ++k) {
    SessionOptions other{.max_tokens_clamped = prepared[k].max_tokens_clamped};
    SessionOptions& o = k == 0 ? opts : other;
    if (std::optional<ApiError> e = admit_kv(req, key_id, prompts[k], stats, prepared[k], o)) {
      return send_keyed_error(req, *res, route, key_id, *e, &timing);
    }
    clamped[k] = o.max_tokens_clamped;
  }
  // One generation answers alone; several are joined by a FanOut below.
  const bool single = validate || n_choices == 1;
  std::unique_ptr<EventFormatter> formatter =
      single ? make_formatter(prepared[0], prompts[0], std::nullopt) : nullptr;
  if (validate) {
    // Everything above ran as for a real request; the engine prefills and
    // stops (validate.h). The answer is JSON, whatever `stream` asked.
    prepared[0].request.stop.prefill_only = true;
    opts.stream = false;
    opts.shape.reset();
    opts.tools = ToolPlan{};
    opts.thinking = ThinkingPlan{};
    const int64_t n_kv_available =
        stats.n_kv_blocks_total > 0 ? (stats.n_kv_blocks_total - stats.n_kv_blocks_used) * stats.kv_block_size : -1;
    formatter = make_validate_formatter(ValidateContext{.n_ctx = stats.n_ctx,
                                                        .n_kv_tokens_available = n_kv_available,
                                                        .template_name = codec_->template_name(),
                                                        .stream = chat.stream,
                                                        .shape = chat.shape,
                                                        .include_usage = chat.include_usage},
                                        std::move(formatter));
  }
  // Response cache (limits/response_cache.h): a greedy or seeded request is
  // looked up by everything that shapes its engine events; a hit replays the
  // recorded events through the same session (no engine time), a miss
  // records its answer. x-engine-cache: hit / miss on cacheable requests only.
  limits::CacheLookup cached;
  if (config_.response_cache && !validate && n_choices == 1) {
    cached = config_.response_cache->lookup(prepared[0].request, opts.tools.active() && opts.tools.single_call);
  }
  const bool cache_hit = cached.hit();
  // Per-key quotas (api/quota_glue.h): admitted with the exact prompt count
  // (a cache hit: one request, no tokens), before the engine sees the
  // request; refused: 429 and nothing runs.
  QuotaDecision quota;
  if (quota_) {
    int64_t n_prompt_tokens = 0;  // each prompt once, whatever n is
    for (const Prepared& p : prepared) n_prompt_tokens += p.n_prompt_tokens;
    quota = quota_->admit(key_id, api_of(req), n_prompt_tokens,
                          {.charge_tokens = !cache_hit, .dry_run = validate, .slots = n_choices});
    if (quota.error) return send_error(req, *res, route, *quota.error, &timing, std::move(quota.headers), quota.tenant);
  }
  if (cached.cacheable()) {
    opts.head_headers.push_back([cache_hit](const Usage&, std::vector<http::Header>& h) {
      h.emplace_back("x-engine-cache", cache_hit ? "hit" : "miss");
    });
  }
  if (cached.cacheable() && !cache_hit) {
    opts.on_event = limits::record_into(config_.response_cache, std::move(cached.key));
  }
  limits::ReplayEngine replay(cached.answer);
  // From the request's arrival: parsing, the template and tokenizing count
  // in time-to-first-token and total time, as the client sees them.
  const auto t_start = received_at(req);
  opts.t_start = t_start;
  std::optional<obs::TraceContext> trace_parent;
  if (config_.tracer) trace_parent = obs::parse_traceparent(req.header("traceparent"));
  opts.on_done = [this, route, t_start, api = api_of(req), id = req.request_id, method = req.method,
                  stream = chat.stream && !validate, validate, trace_parent,
                  rtt_us = req.tcp_rtt_us, tenant = quota.tenant, truncation](const SessionResult& r) {
    if (config_.tracer) config_.tracer->record(request_trace(r, trace_parent, id, api_kind_name(api), route,
                                                             config_.model_alias, t_start));
    metrics_.on_request(route, r.status);
    if (!validate) {  // a validated request generated nothing
      metrics_.on_generation(r.usage, r.t_first_ms, r.t_total_ms);
      if (r.t_first_ms >= 0 && r.timings.t_first_token != Timings::Clock::time_point{}) {
        metrics_.on_first_byte(std::chrono::duration<double, std::milli>(r.timings.t_first_token - t_start).count(),
                               r.t_first_ms, rtt_us);
      }
      metrics_.on_tool_calls(api, r.n_tool_calls, r.n_tool_fallbacks);
    }
    if (r.error_reason) metrics_.on_error(api, *r.error_reason);
    if (!config_.request_log) return;
    config_.request_log(RequestLog{.request_id = id, .method = method, .route = route, .status = r.status,
                                   .generation = true, .stream = stream, .usage = r.usage, .finish = r.finish,
                                   .error_reason = r.error_reason ? std::string(error_reason_name(*r.error_reason)) : "",
                                   .t_start = t_start,
                                   .t_first_token_ms = r.t_first_ms, .t_total_ms = r.t_total_ms,
                                   .t_submit = r.t_submit, .engine = r.timings, .tenant = tenant,
                                   .truncation = truncation});
  };
  const int64_t quota_slots = quota.ticket ? quota.ticket->slots() : 0;  // 0: the key has no max_concurrent
  if (quota.ticket) QuotaGate::attach(std::move(quota.ticket), opts);
  if (!validate) {
    if (config_.request_recorder && api_of(req) == Api::kAnthropic) config_.request_recorder->record(req.body);
    // (a fan-out is not mirrored: the shadow's comparison taps one generation's events)
    if (config_.shadow && n_choices == 1) mirror_to_shadow(*config_.shadow, req, route, chat.user, api_of(req), opts);
  }
  if (single) {
    GenerationSession::start(cache_hit ? static_cast<EngineApi&>(replay) : *engine_, std::move(prepared[0].request),
                             std::move(opts), std::move(formatter), std::move(res));
    return;
  }
  // Several choices: one session each, joined on `res`; the whole answer's
  // duties (on_done, head headers) run once, on the joined answer. At most
  // the engine's batch slots run at once (more would wait in its queue, or
  // be refused there however idle the server), and for a key with
  // max_concurrent the slots its request holds; the others start as they end.
  int64_t max_running = stats.max_seqs;
  if (quota_slots > 0) max_running = max_running > 0 ? std::min(max_running, quota_slots) : quota_slots;
  auto fan = FanOut::create(std::move(res), n_choices, n_per_prompt, opts.stream, *fan_format, std::move(opts.on_done),
                            std::move(opts.head_headers), static_cast<int>(std::min<int64_t>(max_running, n_choices)));
  opts.on_done = nullptr;
  opts.head_headers.clear();
  opts.on_event = nullptr;
  // A prompt's first choice may start now; its others once it has prefilled
  // (its first event, or its end), to take the prompt from the prefix cache.
  for (int i = 0; i < n_choices; ++i) {
    const size_t k = static_cast<size_t>(i / n_per_prompt);
    const int j = i % n_per_prompt, others = i + 1, end = i - j + n_per_prompt;
    SessionOptions o = opts;
    o.max_tokens_clamped = clamped[k];
    o.n_prompt_tokens = prepared[k].n_prompt_tokens;
    o.tools = prepared[k].tools;
    o.thinking = prepared[k].thinking;
    o.on_done = fan->choice_done(i);
    if (j == 0 && n_per_prompt > 1) {
      o.on_event = [fan, others, end](const Event&) { fan->start_deferred(others, end); };
      o.on_done = [fan, others, end, done = std::move(o.on_done)](const SessionResult& r) {
        fan->start_deferred(others, end);
        done(r);
      };
    }
    Request r = prepared[k].request;
    if (i > 0) r.id += "." + std::to_string(i);
    // A seeded request stays reproducible, its choices different: choice j of a prompt takes seed + j.
    if (r.sampling.seed) *r.sampling.seed += static_cast<uint64_t>(j);
    // (the formatter is made now: the factory's captures end with this call)
    auto f = std::make_shared<std::unique_ptr<EventFormatter>>(make_formatter(prepared[k], prompts[k], i));
    fan->defer(i, [this, fan, i, r = std::move(r), o = std::move(o), f]() mutable {
      GenerationSession::start(*engine_, std::move(r), std::move(o), std::move(*f), fan->choice(i));
    });
  }
  for (int i = 0; i < n_choices; i += n_per_prompt) fan->start_deferred(i, i + 1);
}

std::optional<ApiError> ApiService::admit_kv(const http::HttpRequest& req, const std::string& key_id,
                                             const ChatRequest& chat, const EngineStats& stats, Prepared& p,
                                             SessionOptions& opts) {
  Request& r = p.request;
  const bool dry_run = is_validate_mode(req);
  const limits::KvAdmissionDecision kv = kv_admission_.decide(
      {.tenant = key_id.empty() ? std::string_view(r.tenant) : std::string_view(key_id),
       .n_prompt = p.n_prompt_tokens, .max_tokens = r.stop.max_tokens, .requested = chat.max_tokens,
       .dry_run = dry_run},
      limits::kv_snapshot(stats), std::chrono::steady_clock::now());
  if (!kv.status.ok()) {
    ApiError e = from_status(kv.status);
    e.param = "max_tokens";
    return e;
  }
  r.stop.max_tokens = static_cast<int32_t>(kv.max_tokens);
  if (kv.clamped) opts.max_tokens_clamped = true;  // the cache bounds it as the window would
  if (kv.degraded != limits::KvDegrade::kNone) {
    opts.max_tokens_clamped = false;  // the lowered max_tokens ends it: stop reason max_tokens
    if (!dry_run) metrics_.on_degraded(kv.degraded);
    opts.head_headers.push_back([n = kv.max_tokens](const Usage&, std::vector<http::Header>& headers) {
      headers.emplace_back("x-engine-degraded", "max_tokens=" + std::to_string(n));
    });
  }
  return std::nullopt;
}

void ApiService::handle_messages(http::HttpRequest& req, std::shared_ptr<http::Responder> res) {
  const std::string route = "/v1/messages";
  const std::optional<std::string> key_id = authorize(req, *res, route);
  if (!key_id) return;
  ApiResult<ChatRequest> chat = anthropic::parse_messages_request(req.body);
  ServerTiming timing{.parse_ms = ms_since(received_at(req))};
  if (!chat.ok()) return send_keyed_error(req, *res, route, *key_id, chat.error(), &timing);
  // The guard's input rules first: context editing then counts (and decides
  // on) what the model will see, and nothing it clears escapes screening.
  if (auto refused = guard_chat_input(config_.guard.get(), chat.value(), req.request_id, &metrics_root_->engine)) {
    return send_keyed_error(req, *res, route, *key_id, *refused, &timing);
  }
  // Context editing (api/context_edits.h): what the model sees, reported on the answer.
  ApiResult<ContextEditReport> edits = apply_context_edits(&chat.value(), *codec_);
  if (!edits.ok()) return send_keyed_error(req, *res, route, *key_id, edits.error(), &timing);
  const std::string model = chat.value().model;
  std::vector<ChatRequest> prompts;
  prompts.push_back(std::move(chat.value()));
  generate(req, std::move(res), route, *key_id, std::move(prompts), timing,
           [&](const Prepared& p, const ChatRequest&, std::optional<int>) {
    // (a thought, when there is one, must be block 0: blocks open lazily)
    return anthropic::make_formatter(model, req.request_id, /*lazy_blocks=*/p.tools.active() || p.thinking.active,
                                     edits.value());
  });
}

void ApiService::handle_count_tokens(http::HttpRequest& req, std::shared_ptr<http::Responder> res) {
  const std::string route = "/v1/messages/count_tokens";
  if (!authorize(req, *res, route)) return;
  ApiResult<ChatRequest> chat = anthropic::parse_count_tokens_request(req.body);
  if (!chat.ok()) return send_error(req, *res, route, chat.error());
  // What the model would see: redacted (or refused) as a generation would be.
  if (auto refused = guard_chat_input(config_.guard.get(), chat.value(), req.request_id, &metrics_root_->engine)) {
    return send_error(req, *res, route, *refused);
  }
  ApiResult<ContextEditReport> edits = apply_context_edits(&chat.value(), *codec_);
  if (!edits.ok()) return send_error(req, *res, route, edits.error());
  if (edits.value().requested) {  // the edited count, exact, and the count as sent
    return send_json(req, *res, route, boost::json::serialize(boost::json::object{
        {"input_tokens", edits.value().n_tokens},
        {"context_management", boost::json::object{{"original_input_tokens", edits.value().n_original_tokens}}}}));
  }
  Result<std::vector<int32_t>> ids = codec_->encode_chat(chat.value());
  if (!ids.ok()) return send_error(req, *res, route, from_status(ids.status()));
  send_json(req, *res, route, boost::json::serialize(boost::json::object{{"input_tokens", ids->size()}}));
}

void ApiService::handle_tokenize(http::HttpRequest& req, std::shared_ptr<http::Responder> res) {
  const std::string route = "/tokenize";
  if (!authorize(req, *res, route)) return;
  ApiResult<TokenizeQuery> q = parse_tokenize_request(req.body);
  if (!q.ok()) return send_error(req, *res, route, q.error());
  // What the model would see: screened (redacted or refused) as a generation would be.
  ChatRequest raw{.raw_prompt = true, .prompt = q.value().text};
  ChatRequest& screened = q.value().chat ? *q.value().chat : raw;
  if (auto refused = guard_chat_input(config_.guard.get(), screened, req.request_id, &metrics_root_->engine)) {
    return send_error(req, *res, route, *refused);
  }
  const TokenizeQuery& query = q.value();
  Result<std::vector<int32_t>> ids = query.chat ? codec_->encode_chat(*query.chat)
                                                : codec_->encode_with(raw.prompt, query.add_special, query.parse_special);
  if (!ids.ok()) return send_error(req, *res, route, from_status(ids.status()));
  std::vector<std::string> pieces, strs;
  if (query.with_pieces) {
    Result<std::vector<std::string>> p = codec_->token_pieces(*ids);
    if (!p.ok()) return send_error(req, *res, route, from_status(p.status()));
    pieces = std::move(p).value();
  }
  if (query.token_strs) {
    Result<std::vector<std::string>> t = codec_->token_strings(*ids);
    if (!t.ok()) return send_error(req, *res, route, from_status(t.status()));
    strs = std::move(t).value();
  }
  send_json(req, *res, route, tokenize_response(query, *ids, pieces, strs, engine_->stats().n_ctx));
}

void ApiService::handle_detokenize(http::HttpRequest& req, std::shared_ptr<http::Responder> res) {
  const std::string route = "/detokenize";
  if (!authorize(req, *res, route)) return;
  ApiResult<std::vector<int32_t>> ids = parse_detokenize_request(req.body);
  if (!ids.ok()) return send_error(req, *res, route, ids.error());
  Result<std::string> text = codec_->decode_prompt(ids.value());
  if (!text.ok()) {
    ApiError e = from_status(text.status());
    e.param = "tokens";
    if (e.message.starts_with("prompt[")) {  // the codec names the prompt: "prompt[3] = …"
      e.message = "tokens" + e.message.substr(6);
      e.param = e.message.substr(0, e.message.find(']') + 1);
    }
    return send_error(req, *res, route, e);
  }
  send_json(req, *res, route, detokenize_response(*text));
}

void ApiService::handle_openai(http::HttpRequest& req, std::shared_ptr<http::Responder> res, bool chat_api) {
  const std::string route = chat_api ? "/v1/chat/completions" : "/v1/completions";
  const std::optional<std::string> key_id = authorize(req, *res, route);
  if (!key_id) return;
  ApiResult<ChatRequest> chat = chat_api ? openai::parse_chat_request(req.body) : openai::parse_completion_request(req.body);
  ServerTiming timing{.parse_ms = ms_since(received_at(req))};
  if (!chat.ok()) return send_keyed_error(req, *res, route, *key_id, chat.error(), &timing);
  // The prompts: the request's first, then a completion's others (each a copy of the request).
  std::vector<ChatRequest> prompts;
  std::vector<ChatRequest::RawPrompt> more = std::move(chat.value().more_prompts);
  chat.value().more_prompts.clear();
  prompts.push_back(std::move(chat.value()));
  for (ChatRequest::RawPrompt& m : more) {
    ChatRequest c = prompts.front();
    c.prompt = std::move(m.text);
    c.prompt_ids = std::move(m.ids);
    prompts.push_back(std::move(c));
  }
  for (size_t k = 0; k < prompts.size(); ++k) {
    ChatRequest& c = prompts[k];
    if (const auto& ids = c.prompt_ids) {  // token ids: their text for the guard (and logs)
      Result<std::string> text = codec_->decode_prompt(*ids);
      if (!text.ok()) {
        ApiError e = from_status(text.status());
        e.param = "prompt";
        if (prompts.size() > 1) {  // "prompt[i] = …" names the id within prompt k
          e.param = index_param("prompt", k);
          if (e.message.starts_with("prompt[")) e.message = e.param + e.message.substr(6);
        }
        return send_keyed_error(req, *res, route, *key_id, e, &timing);
      }
      c.prompt = std::move(text).value();
    }
    if (auto refused = guard_chat_input(config_.guard.get(), c, req.request_id, &metrics_root_->engine)) {
      return send_keyed_error(req, *res, route, *key_id, *refused, &timing);
    }
  }
  const openai::Kind kind = chat_api ? openai::Kind::kChat : openai::Kind::kCompletion;
  const std::string model = prompts.front().model;
  const bool include_usage = prompts.front().include_usage;
  // Several choices (n, several prompts) are joined by a FanOut; one answer needs none.
  const bool fan_out = prompts.size() > 1 || prompts.front().n > 1;
  // Every choice of the answer shares its id and creation time.
  const std::string answer_id = openai::new_answer_id(kind);
  const int64_t created = std::time(nullptr);
  generate(req, std::move(res), route, *key_id, std::move(prompts), timing,
           [&](const Prepared& p, const ChatRequest& c, std::optional<int> choice) {
             std::optional<std::string> echo;
             if (c.echo) echo = c.prompt;
             std::optional<openai::ChoiceSlot> slot;
             if (choice) slot = openai::ChoiceSlot{.index = *choice, .id = answer_id, .created = created};
             return openai::make_formatter(kind, model, include_usage, p.request.logprobs >= 0, std::move(echo),
                                           std::move(slot));
           },
           fan_out ? std::optional(openai::fan_out_format(kind, model, include_usage, answer_id, created)) : std::nullopt);
}

// Cold-path bodies are built with Boost.JSON (the hot SSE frames by hand).
boost::json::object ApiService::model_object() const {
  const EngineStats stats = engine_->stats();
  boost::json::object m{{"type", "model"},
                        {"id", config_.model_alias},
                        {"display_name", config_.model_alias},
                        {"created_at", rfc3339(config_.model_created_unix)},
                        {"object", "model"},
                        {"created", config_.model_created_unix},
                        {"owned_by", "zerolayer"}};
  if (stats.n_ctx > 0) {
    // One sequence's room: the window, or a KV cache smaller than it (--kv-size).
    const std::optional<int64_t> kv_fit = limits::kv_max_tokens_fit(limits::kv_snapshot(stats), 1);
    const int64_t room = kv_fit ? std::min(stats.n_ctx - 1, *kv_fit) : stats.n_ctx - 1;
    m["max_input_tokens"] = room;
    m["max_tokens"] = room;
    m["max_model_len"] = stats.n_ctx;  // vLLM's field: the context window
  }
  return m;
}

void ApiService::handle_models(http::HttpRequest& req, std::shared_ptr<http::Responder> res) {
  const std::string route = "/v1/models";
  if (!authorize(req, *res, route)) return;
  // One body that both SDKs parse: OpenAI's list and Anthropic's page.
  const boost::json::object body{{"object", "list"},
                                 {"data", boost::json::array{model_object()}},
                                 {"has_more", false},
                                 {"first_id", config_.model_alias},
                                 {"last_id", config_.model_alias},
                                 {"host", config_.host_name}};
  send_json(req, *res, route, boost::json::serialize(body));
}

void ApiService::handle_model(http::HttpRequest& req, std::shared_ptr<http::Responder> res) {
  const std::string route = "/v1/models/{id}";
  if (!authorize(req, *res, route)) return;
  if (req.path_params.empty() || req.path_params[0] != config_.model_alias) {
    ApiError e{.reason = ErrorReason::kModelNotFound,
               .message = "model '" + (req.path_params.empty() ? std::string() : req.path_params[0]) +
                          "' not found; this server serves '" + config_.model_alias + "'"};
    return send_error(req, *res, route, e);
  }
  send_json(req, *res, route, boost::json::serialize(model_object()));
}

void ApiService::handle_ready(http::HttpRequest& req, std::shared_ptr<http::Responder> res) {
  const EngineStats s = engine_->stats();
  const auto now = std::chrono::steady_clock::now();
  bool stalled = false;
  {
    std::lock_guard<std::mutex> lock(ready_mu_);
    if (s.n_steps != last_steps_ || (s.n_running == 0 && s.n_waiting == 0)) {
      last_steps_ = s.n_steps;
      last_step_change_ = now;
    } else {
      stalled = now - last_step_change_ > config_.stall_timeout;
    }
  }
  std::string body = boost::json::serialize(boost::json::object{{"status", stalled ? "stalled" : "ready"},
                                                                 {"n_running", s.n_running},
                                                                 {"n_waiting", s.n_waiting},
                                                                 {"n_steps", s.n_steps},
                                                                 {"host", config_.host_name}});
  if (!stalled) return send_json(req, *res, "/ready", std::move(body));
  record(req, "/ready", 503, "stalled");
  res->send(http::HttpResponse{.status = 503, .content_type = "application/json", .headers = {}, .body = std::move(body)});
}

void ApiService::handle_metrics(http::HttpRequest& req, std::shared_ptr<http::Responder> res) {
  if (config_.metrics_auth && !authorize(req, *res, "/metrics")) return;
  record(req, "/metrics", 200);
  if (on_scrape_) on_scrape_();
  std::string body = metrics_.render(engine_->stats());
  res->send(http::HttpResponse{.status = 200, .content_type = "text/plain; version=0.0.4", .headers = {}, .body = std::move(body)});
}

}  // namespace zl::api
