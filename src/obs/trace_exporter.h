// OTLP traces (issue 16): the spans of each generation, exported as OTLP/HTTP
// JSON (an ExportTraceServiceRequest: resourceSpans -> scopeSpans -> spans)
// by POST to <endpoint>/v1/traces.
//
// Per request four spans: `request` (kind SERVER; the root of a new trace,
// or a child of the caller's span when the request carried a valid W3C
// traceparent, obs/trace_context.h) and its children `queue` (submitted ->
// first admitted to a batch), `prefill` (admitted -> first token) and
// `decode` (first token -> last token). Attributes on `request`: request id,
// api, route, model, HTTP status, token counts, finish reason, error reason.
//
// Threads: record() is called on an I/O thread once per answered generation.
// It builds the spans (a few small strings) and appends them to a bounded
// queue under a mutex held for a vector append: it never waits on the
// network. A background thread takes batches (max_batch spans, or whatever
// is queued each flush_interval), encodes them and POSTs them (connect and
// send timeouts; one retry). When the queue is full new spans are dropped;
// when the collector is down or answers an error twice, the batch is
// dropped; both are counted (spans_dropped). The destructor flushes what is
// queued until shutdown_timeout has passed, then cancels a POST still in
// flight and drops the rest: it returns within about shutdown_timeout.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/status.h"
#include "obs/otlp_http.h"
#include "obs/trace_context.h"

namespace zl::obs {

// One generation as the API layer saw it. Times are steady_clock; zero
// (a default time point) means the phase never happened (e.g. no token).
struct RequestTrace {
  using Clock = std::chrono::steady_clock;
  std::optional<TraceContext> parent;  // from the request's traceparent
  std::string request_id;
  std::string api;      // "anthropic", "openai"
  std::string route;    // the route pattern
  std::string model;    // the served model's id
  int status = 0;       // HTTP status; 499: the client went away
  int64_t n_prompt_tokens = 0;
  int64_t n_cached_tokens = 0;
  int64_t n_generated_tokens = 0;
  std::string finish_reason;  // engine/request.h finish_reason_name()
  std::string error_reason;   // error.detail.reason; empty: none
  Clock::time_point t_start{};        // the request arrived
  Clock::time_point t_submit{};       // handed to the engine
  Clock::time_point t_scheduled{};    // first admitted to a batch
  Clock::time_point t_first_token{};
  Clock::time_point t_last_token{};
  Clock::time_point t_end{};          // the answer was complete
};

struct SpanAttribute {
  std::string key;
  std::string string_value;
  std::optional<int64_t> int_value;  // set: an intValue, else stringValue
};

// One finished span, times in Unix nanoseconds.
struct Span {
  std::string trace_id;
  std::string span_id;
  std::string parent_span_id;  // empty: a root span
  std::string name;
  int kind = 1;  // OTLP SpanKind: 1 INTERNAL, 2 SERVER
  uint64_t start_unix_nano = 0;
  uint64_t end_unix_nano = 0;
  std::vector<SpanAttribute> attributes;
  bool error = false;  // status code 2 (ERROR), else 1 (OK)
  std::string status_message;
};

// The spans of one request (request first, then its children that
// happened), with steady times mapped to Unix time through `steady_to_unix`
// (the offset system_clock - steady_clock, in ns).
std::vector<Span> request_spans(const RequestTrace& t, int64_t steady_to_unix_ns);

// The OTLP JSON ExportTraceServiceRequest body for `spans` of one service.
std::string encode_otlp_json(const std::vector<Span>& spans, const std::string& service_name);

struct TraceExporterConfig {
  std::string endpoint;  // "http://host:port[/base]"; spans go to <base>/v1/traces
  std::string service_name = "zerolayer";
  size_t max_queue_spans = 4096;  // spans waiting; more are dropped
  size_t max_batch_spans = 512;   // spans per POST
  std::chrono::milliseconds flush_interval{1000};
  std::chrono::milliseconds connect_timeout{1000};
  std::chrono::milliseconds send_timeout{2000};
  std::chrono::milliseconds shutdown_timeout{2000};
};

class TraceExporter {
 public:
  // InvalidArgument for a bad endpoint URL. Starts the export thread.
  static Result<std::unique_ptr<TraceExporter>> create(TraceExporterConfig config);
  ~TraceExporter();  // flushes (bounded by shutdown_timeout), joins the thread
  TraceExporter(const TraceExporter&) = delete;
  TraceExporter& operator=(const TraceExporter&) = delete;

  // Queues the spans of one request (none when the caller's traceparent
  // said not sampled). Thread-safe, never blocks on the network.
  void record(const RequestTrace& trace);

  uint64_t spans_exported() const { return n_exported_.load(std::memory_order_relaxed); }
  uint64_t spans_dropped() const { return n_dropped_.load(std::memory_order_relaxed); }
  // (serve mirrors both into engine_trace_spans_exported_total and
  // engine_trace_spans_dropped_total at each /metrics scrape.)

 private:
  TraceExporter(TraceExporterConfig config, HttpEndpoint endpoint);
  void run();
  // POSTs one batch (one retry); counts it exported or dropped.
  void export_batch(std::vector<Span> batch, std::chrono::steady_clock::time_point deadline);

  TraceExporterConfig config_;
  OtlpHttpClient client_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Span> queue_;  // guarded by mu_
  bool stopping_ = false;    // guarded by mu_
  bool exited_ = false;      // guarded by mu_: run() has returned
  bool failing_ = false;     // the export thread's: the last batch failed
  std::atomic<uint64_t> n_exported_{0};
  std::atomic<uint64_t> n_dropped_{0};
  std::thread thread_;
};

}  // namespace zl::obs
