// Settings of `zerolayer serve`: command-line flag > environment variable
// (ZEROLAYER_<NAME>, e.g. ZEROLAYER_PORT) > TOML file (--config, keys named
// like the flags with '_' for '-': `port = 8080`, `model_alias = "x"`; any
// other key is an error) > default. API keys: --api-key (repeatable), ZEROLAYER_API_KEY (comma
// separated), `api_key`/`api_keys` in TOML, and --api-key-file (one key a
// line); never printed.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"

namespace zl::guard {
class Guard;
}

namespace zl::cli {

struct ServeConfig {
  std::string model_path;
  std::string host = "127.0.0.1";
  int64_t port = 8080;
  std::vector<std::string> api_keys;  // empty: no authentication
  int64_t threads = 0;                // compute threads; 0: one per core
  int64_t ctx = 0;                    // context window per sequence; 0: the model's
  int64_t parallel = 0;               // sequences decoded at once; 0: from the KV budget (default_max_seqs)
  int64_t kv_size = 0;                // KV cache tokens; 0: ctx × parallel, capped by free memory
  std::string kv_type = "f16";        // KV cache element type: f16, q8_0 or f32
  int64_t batch_tokens = 512;         // token budget of one engine step
  std::string schedule = "latency";   // the scheduling policy: latency or throughput (engine/scheduler.h)
  // Speculative decoding (engine.h), resolved (cli/draft_setup.h's table): "ngram" or "draft"
  // makes it every request's default ("off": only requests that ask, `"speculative": true`);
  // draft tokens per step at most; shortest n-gram matched. draft_model_path: a draft model of
  // the same vocabulary (engine/draft_model.h; empty: none); draft_slots: sequences drafting
  // from it at once (0: the engine's default).
  std::string speculative = "off";
  int64_t spec_draft_max = 8;
  int64_t spec_ngram_min = 2;
  std::string draft_model_path;
  int64_t draft_slots = 0;
  double draft_p_min = 0.8;  // EngineConfig::draft_p_min
  std::string model_alias;            // the id in /v1/models; default: the model file's stem
  std::string chat_template;          // template family override; empty: from the model
  std::string chat_template_file;     // a Jinja template file instead of the model's
  int64_t io_threads = 1;
  int64_t max_body_bytes = 32ll << 20;
  int64_t max_header_bytes = 64ll << 10;  // request headers (HTTP/2: the decoded header list); 413 past this
  int64_t header_timeout_ms = 10000;
  int64_t body_timeout_ms = 60000;
  int64_t idle_timeout_ms = 60000;
  // SIGTERM/SIGINT: seconds that requests in progress get to finish; 0: stop at once.
  int64_t drain_timeout_s = 30;
  // Streams: seconds without a write before a keep-alive frame (SSE ping),
  // fractions allowed; 0: none.
  double sse_ping_interval_s = 5;
  // Backpressure: a sequence whose client lags this many events behind is paused.
  int64_t max_pending_events = 256;
  int64_t socket_send_buffer = 0;     // SO_SNDBUF of connections; 0: kernel autotuning
  std::string tls_cert;               // PEM certificate (chain allowed); with tls_key: the port speaks TLS only
  std::string tls_key;                // PEM private key
  int64_t h2_max_concurrent_streams = 128;  // HTTP/2 SETTINGS_MAX_CONCURRENT_STREAMS
  int64_t h2_max_resets_per_s = 100;  // HTTP/2 RST_STREAM frames per connection per second before GOAWAY
  bool request_log = true;            // one line per request on stderr
  // OTLP/HTTP JSON traces go to <otlp_endpoint>/v1/traces; empty: no traces.
  std::string otlp_endpoint;
  // "json" or "text"; empty: JSON unless stderr is a terminal (core/log.h).
  std::string log_format;
  std::string metrics_compat;         // "vllm": the vllm:* aliases on /metrics; "": none
  bool metrics_auth = false;          // /metrics requires an API key (when keys are configured)
  bool ui = true;                     // the web playground at / and /ui/ (--ui false: the plain banner only)
  // Serve the model files from their mapping (llama-server's default), or
  // (false) load what is read in place into memory and unmap them, so that
  // the files may change on disk while served (llama-server's --no-mmap).
  bool mmap = true;
  // Admission (src/limits/). Keys file with per-key quotas; empty: none.
  std::string keys_file;
  int64_t max_queue = -1;             // waiting requests at most; -1: 4 × the resolved parallel
  int64_t max_queue_tokens = 0;       // queued prompt tokens at most; 0: unlimited
  int64_t queue_timeout_ms = 0;       // longest wait in the queue; 0: unlimited
  int64_t max_pause_ms = 0;           // a paused (slow reader) sequence is preempted after this; 0: never
  std::string degrade;                // "max-tokens": admit KV overflows with max_tokens lowered; "": refuse
  double kv_high_watermark = 0.9;     // KV usage above this is pressure (degradation)
  std::string redis_url;              // redis://HOST:PORT[/DB]: shared quota buckets; empty: local
  std::string redis_fail = "open";    // Redis unreachable: "open" (local buckets) or "closed" (503)
  int64_t response_cache_mb = 0;      // exact-match response cache size; 0: off
  // The guard (src/guard/): a TOML policy file; empty: no guard.
  std::string guard_file;
  // guard_file compiled: loaded by run_serve before the backend (a bad file
  // stops the start with exit 2, naming the line), shared by the engine
  // (output rules, make_backend) and the API (input rules). Not a setting.
  std::shared_ptr<const guard::Guard> guard;
  // Truncation policies (api/context_policy.h): error, drop_oldest or
  // middle_out; tokens kept for the answer (min(max_tokens, this)).
  std::string context_policy = "error";
  int64_t context_reserve = 256;
  // Rollout (src/rollout/). The name in x-engine-host, /ready and /v1/models;
  // default: the machine's hostname.
  std::string host_name;
  std::string shadow_url;             // --shadow: mirror sampled generations there; empty: none
  double shadow_fraction = 0.1;       // of generation requests mirrored
  std::string shadow_api_key;         // sent to the shadow (never printed)
  std::string shadow_log;             // JSON lines, one per compared pair; empty: none
  int64_t shadow_timeout_ms = 60000;  // one shadow request, at most
  int64_t shadow_queue = 64;          // pairs not yet compared, at most (more: dropped)
  std::string record_requests;        // Messages bodies, one a line, for `zerolayer diff`; empty: none
  // Where each setting that was given came from, as a user would write it:
  // "--kv-size 100000000", "ZEROLAYER_KV_SIZE=100000000",
  // "kv_size = 100000000 in /etc/zl.toml". Absent: the default.
  std::map<std::string, std::string> given;
};

// The names of all settings ("model", "port", "api-key", …) as flags take them.
const std::vector<std::string>& serve_setting_names();

using EnvFn = std::function<const char*(const char*)>;

// Resolves the settings. `flags` maps a setting name to its flag value;
// `flag_api_keys` are the repeated --api-key values. InvalidArgument naming
// the setting and its source for bad values or an unreadable config file.
Result<ServeConfig> resolve_serve_config(const std::map<std::string, std::string>& flags,
                                         const std::vector<std::string>& flag_api_keys, const EnvFn& env);

}  // namespace zl::cli
