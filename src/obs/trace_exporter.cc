#include "obs/trace_exporter.h"

#include <algorithm>
#include <utility>

#include "core/log.h"

namespace zl::obs {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kSpanKindInternal = 1;
constexpr int kSpanKindServer = 2;

uint64_t to_unix_ns(Clock::time_point t, int64_t steady_to_unix_ns) {
  const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  return static_cast<uint64_t>(std::max<int64_t>(0, ns + steady_to_unix_ns));
}

bool happened(Clock::time_point t) { return t != Clock::time_point{}; }

std::vector<SpanAttribute> request_attributes(const RequestTrace& t) {
  std::vector<SpanAttribute> a = {
      {.key = "zerolayer.request_id", .string_value = t.request_id},
      {.key = "zerolayer.api", .string_value = t.api},
      {.key = "http.route", .string_value = t.route},
      {.key = "gen_ai.request.model", .string_value = t.model},
      {.key = "http.response.status_code", .int_value = t.status},
      {.key = "zerolayer.n_prompt_tokens", .int_value = t.n_prompt_tokens},
      {.key = "zerolayer.n_cached_tokens", .int_value = t.n_cached_tokens},
      {.key = "zerolayer.n_generated_tokens", .int_value = t.n_generated_tokens},
      {.key = "zerolayer.finish_reason", .string_value = t.finish_reason},
  };
  if (!t.error_reason.empty()) a.push_back({.key = "zerolayer.error_reason", .string_value = t.error_reason});
  return a;
}

void append_attribute(std::string& out, const SpanAttribute& a) {
  out += "{\"key\":";
  log::append_json_string(out, a.key);
  if (a.int_value) {
    // proto3 JSON maps int64 to a decimal string.
    out += ",\"value\":{\"intValue\":\"" + std::to_string(*a.int_value) + "\"}}";
  } else {
    out += ",\"value\":{\"stringValue\":";
    log::append_json_string(out, a.string_value);
    out += "}}";
  }
}

void append_span(std::string& out, const Span& s) {
  out += "{\"traceId\":\"" + s.trace_id + "\",\"spanId\":\"" + s.span_id + "\"";
  if (!s.parent_span_id.empty()) out += ",\"parentSpanId\":\"" + s.parent_span_id + "\"";
  out += ",\"name\":";
  log::append_json_string(out, s.name);
  out += ",\"kind\":" + std::to_string(s.kind);
  out += ",\"startTimeUnixNano\":\"" + std::to_string(s.start_unix_nano) + "\"";
  out += ",\"endTimeUnixNano\":\"" + std::to_string(s.end_unix_nano) + "\",\"attributes\":[";
  for (size_t i = 0; i < s.attributes.size(); ++i) {
    if (i) out += ',';
    append_attribute(out, s.attributes[i]);
  }
  out += "],\"status\":{\"code\":" + std::string(s.error ? "2" : "1");
  if (!s.status_message.empty()) {
    out += ",\"message\":";
    log::append_json_string(out, s.status_message);
  }
  out += "}}";
}

}  // namespace

std::vector<Span> request_spans(const RequestTrace& t, int64_t steady_to_unix_ns) {
  auto ns = [&](Clock::time_point tp) { return to_unix_ns(tp, steady_to_unix_ns); };
  Span root{.trace_id = t.parent ? t.parent->trace_id : new_trace_id(),
            .span_id = new_span_id(),
            .parent_span_id = t.parent ? t.parent->parent_span_id : "",
            .name = "request",
            .kind = kSpanKindServer,
            .start_unix_nano = ns(t.t_start),
            .end_unix_nano = ns(std::max(t.t_end, t.t_start)),
            .attributes = request_attributes(t),
            .error = t.status >= 500 || !t.error_reason.empty(),
            .status_message = t.error_reason};
  const std::string trace_id = root.trace_id;
  const std::string root_id = root.span_id;
  std::vector<Span> spans;
  auto child = [&](const char* name, Clock::time_point from, Clock::time_point to) {
    if (!happened(from) || !happened(to) || to < from) return;
    spans.push_back(Span{.trace_id = trace_id,
                         .span_id = new_span_id(),
                         .parent_span_id = root_id,
                         .name = name,
                         .kind = kSpanKindInternal,
                         .start_unix_nano = ns(from),
                         .end_unix_nano = ns(to)});
  };
  spans.push_back(std::move(root));
  child("queue", t.t_submit, t.t_scheduled);
  child("prefill", t.t_scheduled, t.t_first_token);
  child("decode", t.t_first_token, t.t_last_token);
  spans[0].attributes.push_back({.key = "zerolayer.n_child_spans", .int_value = static_cast<int64_t>(spans.size() - 1)});
  return spans;
}

std::string encode_otlp_json(const std::vector<Span>& spans, const std::string& service_name) {
  std::string out = R"({"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":)";
  log::append_json_string(out, service_name);
  out += R"(}}]},"scopeSpans":[{"scope":{"name":"zerolayer"},"spans":[)";
  for (size_t i = 0; i < spans.size(); ++i) {
    if (i) out += ',';
    append_span(out, spans[i]);
  }
  out += "]}]}]}";
  return out;
}

Result<std::unique_ptr<TraceExporter>> TraceExporter::create(TraceExporterConfig config) {
  ASSIGN_OR_RETURN(HttpEndpoint endpoint, parse_http_url(config.endpoint, "/v1/traces"));
  return std::unique_ptr<TraceExporter>(new TraceExporter(std::move(config), std::move(endpoint)));
}

TraceExporter::TraceExporter(TraceExporterConfig config, HttpEndpoint endpoint)
    : config_(std::move(config)), client_(std::move(endpoint), config_.connect_timeout, config_.send_timeout) {
  // Never reallocated under the lock on the I/O thread: the bound is the capacity.
  queue_.reserve(config_.max_queue_spans);
  thread_ = std::thread([this] { run(); });
}

TraceExporter::~TraceExporter() {
  std::unique_lock lock(mu_);
  stopping_ = true;
  cv_.notify_all();
  // A POST in flight keeps its own timeouts; past the shutdown deadline it is cancelled.
  if (!cv_.wait_for(lock, config_.shutdown_timeout, [this] { return exited_; })) client_.cancel();
  lock.unlock();
  thread_.join();
}

void TraceExporter::record(const RequestTrace& trace) {
  if (trace.parent && !trace.parent->sampled) return;
  const int64_t offset = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch() - Clock::now().time_since_epoch())
                             .count();
  std::vector<Span> spans = request_spans(trace, offset);
  bool wake = false;
  {
    std::lock_guard lock(mu_);
    if (stopping_ || queue_.size() + spans.size() > config_.max_queue_spans) {
      n_dropped_.fetch_add(spans.size(), std::memory_order_relaxed);
      return;
    }
    for (Span& s : spans) queue_.push_back(std::move(s));
    wake = queue_.size() >= config_.max_batch_spans;
  }
  if (wake) cv_.notify_one();
}

void TraceExporter::run() {
  std::unique_lock lock(mu_);
  std::optional<Clock::time_point> shutdown_deadline;
  for (;;) {
    if (!stopping_) {
      cv_.wait_for(lock, config_.flush_interval,
                   [&] { return stopping_ || queue_.size() >= config_.max_batch_spans; });
    }
    if (stopping_ && !shutdown_deadline) shutdown_deadline = Clock::now() + config_.shutdown_timeout;
    if (shutdown_deadline && (queue_.empty() || Clock::now() >= *shutdown_deadline)) {
      n_dropped_.fetch_add(queue_.size(), std::memory_order_relaxed);
      queue_.clear();
      exited_ = true;
      cv_.notify_all();
      return;
    }
    if (queue_.empty()) continue;
    const size_t n = std::min(queue_.size(), config_.max_batch_spans);
    std::vector<Span> batch(std::make_move_iterator(queue_.begin()), std::make_move_iterator(queue_.begin() + n));
    queue_.erase(queue_.begin(), queue_.begin() + n);
    lock.unlock();
    const auto deadline = shutdown_deadline ? *shutdown_deadline
                                            : Clock::now() + 2 * (config_.connect_timeout + config_.send_timeout);
    export_batch(std::move(batch), deadline);
    lock.lock();
  }
}

void TraceExporter::export_batch(std::vector<Span> batch, Clock::time_point deadline) {
  const std::string body = encode_otlp_json(batch, config_.service_name);
  HttpPostResult r{.status = 0, .error = "the shutdown deadline passed"};
  for (int attempt = 0; attempt < 2 && Clock::now() < deadline; ++attempt) {
    r = client_.post_json(body, deadline);
    if (r.status >= 200 && r.status < 300) {
      n_exported_.fetch_add(batch.size(), std::memory_order_relaxed);
      failing_ = false;
      return;
    }
    // 4xx other than 429 says the collector will never take this body.
    if (r.status >= 400 && r.status < 500 && r.status != 429) break;
  }
  n_dropped_.fetch_add(batch.size(), std::memory_order_relaxed);
  if (failing_) return;  // one warning per outage, not one per batch
  failing_ = true;
  log::warn("trace export failed, spans dropped",
            {{"n_spans", batch.size()}, {"status", r.status}, {"error", r.error}, {"endpoint", config_.endpoint}});
}

}  // namespace zl::obs
