#include "cli/serve_config.h"

#include <toml++/toml.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <unistd.h>  // gethostname

#include "cli/args.h"            // parse_bool_word
#include "cli/draft_setup.h"     // resolve_spec_method
#include "engine/request.h"     // kMaxSpecDraft
#include "kernels/attention.h"  // parse_kv_type
#include "spec/ngram_draft.h"   // kMaxNgram
#include "limits/redis_store.h"  // parse_redis_url
#include "obs/otlp_http.h"

namespace zl::cli {
namespace {

std::string env_name(const std::string& setting) {
  std::string out = "ZEROLAYER_";
  for (char c : setting) out += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string toml_key(const std::string& setting) {
  std::string out = setting;
  for (char& c : out) {
    if (c == '-') c = '_';
  }
  return out;
}

std::vector<std::string> split_keys(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) {
    while (!cur.empty() && std::isspace(static_cast<unsigned char>(cur.back()))) cur.pop_back();
    size_t b = 0;
    while (b < cur.size() && std::isspace(static_cast<unsigned char>(cur[b]))) ++b;
    if (b < cur.size()) out.push_back(cur.substr(b));
  }
  return out;
}

// A TOML scalar as the string a flag would carry.
std::optional<std::string> toml_scalar(const toml::node& n) {
  // Booleans first: toml++ converts a boolean to the integer 1 / 0 when asked for one.
  if (n.is_boolean()) return *n.value<bool>() ? "true" : "false";
  if (auto s = n.value<std::string>()) return *s;
  if (auto i = n.value<int64_t>()) return std::to_string(*i);
  if (auto d = n.value<double>()) {  // shortest round trip (std::to_string would print 1e-7 as 0.000000)
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, *d);
    return std::string(buf, r.ptr);
  }
  return std::nullopt;
}

struct Sources {
  std::map<std::string, std::string> values;  // setting -> raw value
  std::map<std::string, std::string> origin;  // setting -> "flag --x" / "ZEROLAYER_X" / "config file"
};

// Every key must be a setting (or api_key/api_keys): a misspelt key is an
// error, not a setting silently left at its default.
Status check_toml_keys(const std::string& path, const toml::table& t) {
  for (const auto& [key, node] : t) {
    const std::string k(key.str());
    bool known = k == "api_key" || k == "api_keys";
    for (const std::string& name : serve_setting_names()) known = known || k == toml_key(name);
    if (!known) return invalid_argument("config file " + path + ": unknown key '" + k + "'");
  }
  return {};
}

Status read_toml(const std::string& path, Sources* src, std::vector<std::string>* keys) {
  // Debian's toml++ is a compiled library built with exceptions: its parse
  // errors are caught here and nowhere else.
  toml::table t;
  try {
    t = toml::parse_file(path);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << "config file " << path << ": " << e.description() << " (line " << e.source().begin.line << ")";
    return invalid_argument(msg.str());
  }
  RETURN_IF_ERROR(check_toml_keys(path, t));
  for (const std::string& name : serve_setting_names()) {
    const toml::node* n = t.get(toml_key(name));
    if (!n) continue;
    auto v = toml_scalar(*n);
    if (!v) return invalid_argument("config file " + path + ": '" + toml_key(name) + "' must be a scalar");
    src->values[name] = *v;
    src->origin[name] = "config file " + path;
  }
  if (const toml::array* arr = t["api_keys"].as_array()) {
    for (const auto& item : *arr) {
      auto s = item.value<std::string>();
      if (!s) return invalid_argument("config file " + path + ": 'api_keys' must be an array of strings");
      keys->push_back(*s);
    }
  }
  if (auto k = t["api_key"].value<std::string>()) keys->push_back(*k);
  return {};
}

Status parse_int(const Sources& src, const std::string& name, int64_t min, int64_t max, int64_t* out) {
  auto it = src.values.find(name);
  if (it == src.values.end()) return {};
  const std::string& v = it->second;
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno != 0 || x < min || x > max) {
    return invalid_argument(src.origin.at(name) + ": " + name + " must be an integer in [" + std::to_string(min) +
                            ", " + std::to_string(max) + "], got '" + v + "'");
  }
  *out = x;
  return {};
}

// A fraction in [0, 1] ("0.8").
Status parse_fraction(const Sources& src, const std::string& name, double* out) {
  auto it = src.values.find(name);
  if (it == src.values.end()) return {};
  char* end = nullptr;
  const double f = std::strtod(it->second.c_str(), &end);
  if (it->second.empty() || *end != '\0' || !(f >= 0 && f <= 1)) {  // !(...) also refuses NaN
    return invalid_argument(src.origin.at(name) + ": " + name + " must be a fraction in [0, 1], got '" + it->second +
                            "'");
  }
  *out = f;
  return {};
}

// A number of seconds, fractions allowed ("0.05"), in [min, max].
Status parse_seconds(const Sources& src, const std::string& name, double min, double max, double* out) {
  auto it = src.values.find(name);
  if (it == src.values.end()) return {};
  const std::string& v = it->second;
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(v.c_str(), &end);
  // !(x >= min && x <= max) also refuses NaN.
  if (v.empty() || *end != '\0' || errno != 0 || !(x >= min && x <= max)) {
    std::ostringstream range;
    range << "[" << min << ", " << max << "]";
    return invalid_argument(src.origin.at(name) + ": " + name + " must be a number of seconds in " + range.str() +
                            ", got '" + v + "'");
  }
  *out = x;
  return {};
}

// true or false (also 1/0, yes/no: environment variables are often written
// so), the words the message names, as speculative's boolean forms.
Status parse_bool(const Sources& src, const std::string& name, bool* out) {
  auto it = src.values.find(name);
  if (it == src.values.end()) return {};
  const std::string& v = it->second;
  const std::optional<bool> b = parse_bool_word(v);
  if (!b) return invalid_argument(src.origin.at(name) + ": " + name + " must be true or false (or 1/0, yes/no), got '" + v + "'");
  *out = *b;
  return {};
}

// --host-name, --shadow*, --record-requests.
Status resolve_rollout(const Sources& src, ServeConfig* c) {
  auto str = [&](const std::string& name, std::string* out) {
    if (auto it = src.values.find(name); it != src.values.end()) *out = it->second;
  };
  str("host-name", &c->host_name);
  if (c->host_name.empty()) {
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) == 0) c->host_name = buf;
  }
  for (char ch : c->host_name) {  // a header value and a JSON string: printable ASCII, no spaces
    if (ch <= 0x20 || ch >= 0x7f) {
      return invalid_argument((src.origin.count("host-name") ? src.origin.at("host-name") : "hostname") +
                              ": host-name must be printable ASCII without spaces, got '" + c->host_name + "'");
    }
  }
  str("shadow", &c->shadow_url);
  if (!c->shadow_url.empty()) {
    if (auto e = obs::parse_http_url(c->shadow_url, ""); !e.ok()) {
      return invalid_argument(src.origin.at("shadow") + ": " + e.status().message());
    }
  }
  RETURN_IF_ERROR(parse_fraction(src, "shadow-fraction", &c->shadow_fraction));
  str("shadow-api-key", &c->shadow_api_key);
  str("shadow-log", &c->shadow_log);
  RETURN_IF_ERROR(parse_int(src, "shadow-timeout-ms", 1, 3600000, &c->shadow_timeout_ms));
  RETURN_IF_ERROR(parse_int(src, "shadow-queue", 1, 1 << 16, &c->shadow_queue));
  str("record-requests", &c->record_requests);
  return {};
}

}  // namespace

const std::vector<std::string>& serve_setting_names() {
  static const std::vector<std::string> kNames = {
      "model",           "host",           "port",           "threads",         "ctx",
      "parallel",        "model-alias",    "chat-template",  "chat-template-file", "io-threads",      "max-body-bytes",
      "header-timeout-ms", "body-timeout-ms", "idle-timeout-ms", "api-key-file",
      "max-pending-events", "socket-send-buffer", "request-log",
      "kv-size",         "kv-type",        "batch-tokens",   "drain-timeout",
      "sse-ping-interval", "otlp-endpoint", "log-format", "metrics-compat", "metrics-auth",
      "keys",            "max-queue",      "max-queue-tokens", "queue-timeout-ms", "max-pause-ms",
      "degrade",         "kv-high-watermark", "redis",       "redis-fail",      "response-cache-mb",
      "guard",           "context-policy", "context-reserve", "host-name",     "shadow",
      "shadow-fraction", "shadow-api-key", "shadow-log",      "shadow-timeout-ms", "shadow-queue",
      "record-requests", "ui",
      "max-header-bytes", "tls-cert",      "tls-key",        "h2-max-concurrent-streams", "h2-max-resets-per-s", "schedule",
      "speculative",     "spec-draft-max", "spec-ngram-min", "draft-model",   "draft-slots",
      "draft-p-min",     "mmap"};
  return kNames;
}

Result<ServeConfig> resolve_serve_config(const std::map<std::string, std::string>& flags,
                                         const std::vector<std::string>& flag_api_keys, const EnvFn& env) {
  Sources src;
  std::vector<std::string> toml_keys;
  std::string config_path;
  if (auto it = flags.find("config"); it != flags.end()) {
    config_path = it->second;
  } else if (const char* e = env("ZEROLAYER_CONFIG"); e && *e) {
    config_path = e;
  }
  if (!config_path.empty()) RETURN_IF_ERROR(read_toml(config_path, &src, &toml_keys));
  for (const std::string& name : serve_setting_names()) {
    if (const char* e = env(env_name(name).c_str()); e && *e) {
      src.values[name] = e;
      src.origin[name] = env_name(name);
    }
    if (auto it = flags.find(name); it != flags.end()) {
      src.values[name] = it->second;
      src.origin[name] = "--" + name;
    }
  }

  ServeConfig c;
  for (const auto& [name, origin] : src.origin) {
    const std::string& v = src.values.at(name);
    if (origin.rfind("--", 0) == 0) {
      c.given[name] = origin + " " + v;
    } else if (origin.rfind("ZEROLAYER_", 0) == 0) {
      c.given[name] = origin + "=" + v;
    } else {
      c.given[name] = toml_key(name) + " = " + v + " in " + config_path;
    }
  }
  auto str = [&](const std::string& name, std::string* out) {
    if (auto it = src.values.find(name); it != src.values.end()) *out = it->second;
  };
  str("model", &c.model_path);
  str("host", &c.host);
  str("model-alias", &c.model_alias);
  str("chat-template", &c.chat_template);
  str("chat-template-file", &c.chat_template_file);
  str("otlp-endpoint", &c.otlp_endpoint);
  if (!c.otlp_endpoint.empty()) {
    // Checked here, before the model loads: a typo is a usage error at once.
    if (auto e = obs::parse_http_url(c.otlp_endpoint, "/v1/traces"); !e.ok()) {
      return invalid_argument(src.origin.at("otlp-endpoint") + ": " + e.status().message());
    }
  }
  str("log-format", &c.log_format);
  if (!c.log_format.empty() && c.log_format != "json" && c.log_format != "text") {
    return invalid_argument(src.origin.at("log-format") + ": log-format must be json or text, got '" + c.log_format +
                            "'");
  }
  RETURN_IF_ERROR(parse_int(src, "port", 0, 65535, &c.port));
  RETURN_IF_ERROR(parse_int(src, "threads", 0, 1024, &c.threads));
  RETURN_IF_ERROR(parse_int(src, "ctx", 0, 1 << 24, &c.ctx));
  RETURN_IF_ERROR(parse_int(src, "parallel", 0, 4096, &c.parallel));
  RETURN_IF_ERROR(parse_int(src, "kv-size", 0, 1ll << 32, &c.kv_size));
  RETURN_IF_ERROR(parse_int(src, "batch-tokens", 1, 1 << 20, &c.batch_tokens));
  str("schedule", &c.schedule);
  if (c.schedule != "latency" && c.schedule != "throughput") {
    return invalid_argument(src.origin.at("schedule") + ": schedule must be latency or throughput, got '" +
                            c.schedule + "'");
  }
  str("draft-model", &c.draft_model_path);
  RETURN_IF_ERROR(parse_int(src, "draft-slots", 0, 4096, &c.draft_slots));
  RETURN_IF_ERROR(parse_fraction(src, "draft-p-min", &c.draft_p_min));
  {
    auto given = [&c](const char* name) {
      auto it = c.given.find(name);
      return it == c.given.end() ? std::string() : it->second;
    };
    std::string value;
    str("speculative", &value);
    ASSIGN_OR_RETURN(c.speculative,
                     resolve_spec_method(value, given("speculative"), c.draft_model_path, given("draft-model")));
  }
  RETURN_IF_ERROR(parse_int(src, "spec-draft-max", 1, kMaxSpecDraft, &c.spec_draft_max));
  RETURN_IF_ERROR(parse_int(src, "spec-ngram-min", 1, spec::kMaxNgram, &c.spec_ngram_min));
  str("kv-type", &c.kv_type);
  if (KvType t; !parse_kv_type(c.kv_type.c_str(), &t)) {
    return invalid_argument(src.origin.at("kv-type") + ": kv-type must be f16, q8_0 or f32, got '" + c.kv_type + "'");
  }
  RETURN_IF_ERROR(parse_int(src, "io-threads", 1, 64, &c.io_threads));
  RETURN_IF_ERROR(parse_int(src, "max-body-bytes", 1024, 1ll << 32, &c.max_body_bytes));
  RETURN_IF_ERROR(parse_int(src, "max-header-bytes", 1024, 1 << 24, &c.max_header_bytes));
  RETURN_IF_ERROR(parse_int(src, "header-timeout-ms", 10, 3600000, &c.header_timeout_ms));
  RETURN_IF_ERROR(parse_int(src, "body-timeout-ms", 10, 3600000, &c.body_timeout_ms));
  RETURN_IF_ERROR(parse_int(src, "idle-timeout-ms", 10, 3600000, &c.idle_timeout_ms));
  RETURN_IF_ERROR(parse_int(src, "drain-timeout", 0, 3600, &c.drain_timeout_s));
  RETURN_IF_ERROR(parse_seconds(src, "sse-ping-interval", 0, 3600, &c.sse_ping_interval_s));
  RETURN_IF_ERROR(parse_int(src, "max-pending-events", 1, 1 << 20, &c.max_pending_events));
  RETURN_IF_ERROR(parse_int(src, "socket-send-buffer", 0, 1 << 30, &c.socket_send_buffer));
  str("tls-cert", &c.tls_cert);
  str("tls-key", &c.tls_key);
  if (c.tls_cert.empty() != c.tls_key.empty()) {
    const std::string given = c.tls_cert.empty() ? "tls-key" : "tls-cert";
    return invalid_argument(src.origin.at(given) + ": TLS needs both tls-cert and tls-key");
  }
  RETURN_IF_ERROR(parse_int(src, "h2-max-concurrent-streams", 1, 1 << 20, &c.h2_max_concurrent_streams));
  RETURN_IF_ERROR(parse_int(src, "h2-max-resets-per-s", 1, 1 << 20, &c.h2_max_resets_per_s));
  RETURN_IF_ERROR(parse_bool(src, "request-log", &c.request_log));
  RETURN_IF_ERROR(parse_bool(src, "metrics-auth", &c.metrics_auth));
  RETURN_IF_ERROR(parse_bool(src, "ui", &c.ui));
  RETURN_IF_ERROR(parse_bool(src, "mmap", &c.mmap));
  str("metrics-compat", &c.metrics_compat);
  if (!c.metrics_compat.empty() && c.metrics_compat != "vllm" && c.metrics_compat != "none") {
    return invalid_argument(src.origin.at("metrics-compat") + ": metrics-compat must be vllm or none, got '" +
                            c.metrics_compat + "'");
  }

  str("keys", &c.keys_file);
  RETURN_IF_ERROR(parse_int(src, "max-queue", 0, 1 << 20, &c.max_queue));
  RETURN_IF_ERROR(parse_int(src, "max-queue-tokens", 0, 1ll << 40, &c.max_queue_tokens));
  RETURN_IF_ERROR(parse_int(src, "queue-timeout-ms", 0, 86400000, &c.queue_timeout_ms));
  RETURN_IF_ERROR(parse_int(src, "max-pause-ms", 0, 86400000, &c.max_pause_ms));
  str("degrade", &c.degrade);
  if (c.degrade == "none") c.degrade.clear();
  if (!c.degrade.empty() && c.degrade != "max-tokens") {
    return invalid_argument(src.origin.at("degrade") + ": degrade must be max-tokens or none, got '" + c.degrade + "'");
  }
  {
    double w = c.kv_high_watermark;
    if (auto it = src.values.find("kv-high-watermark"); it != src.values.end()) {
      char* end = nullptr;
      w = std::strtod(it->second.c_str(), &end);
      if (it->second.empty() || *end != '\0' || !(w > 0 && w <= 1)) {
        return invalid_argument(src.origin.at("kv-high-watermark") +
                                ": kv-high-watermark must be a fraction in (0, 1], got '" + it->second + "'");
      }
    }
    c.kv_high_watermark = w;
  }
  str("redis", &c.redis_url);
  if (!c.redis_url.empty()) {  // checked here, before the model loads; connected in run_serve
    if (auto u = limits::parse_redis_url(c.redis_url); !u.ok()) {
      return invalid_argument(src.origin.at("redis") + ": " + u.status().message());
    }
  }
  str("redis-fail", &c.redis_fail);
  if (c.redis_fail != "open" && c.redis_fail != "closed") {
    return invalid_argument(src.origin.at("redis-fail") + ": redis-fail must be open or closed, got '" + c.redis_fail +
                            "'");
  }
  RETURN_IF_ERROR(parse_int(src, "response-cache-mb", 0, 1 << 20, &c.response_cache_mb));
  str("guard", &c.guard_file);
  str("context-policy", &c.context_policy);
  if (c.context_policy != "error" && c.context_policy != "drop_oldest" && c.context_policy != "middle_out") {
    return invalid_argument(src.origin.at("context-policy") +
                            ": context-policy must be error, drop_oldest or middle_out, got '" + c.context_policy + "'");
  }
  RETURN_IF_ERROR(parse_int(src, "context-reserve", 1, 1 << 24, &c.context_reserve));
  RETURN_IF_ERROR(resolve_rollout(src, &c));
  // API keys: the highest source that gives any wins, like every setting.
  std::vector<std::string> keys = flag_api_keys;
  if (keys.empty()) {
    if (const char* e = env("ZEROLAYER_API_KEY"); e && *e) keys = split_keys(e, ',');
  }
  if (keys.empty()) keys = toml_keys;
  if (auto it = src.values.find("api-key-file"); it != src.values.end()) {
    std::ifstream f(it->second);
    if (!f) return invalid_argument(src.origin.at("api-key-file") + ": cannot read API key file '" + it->second + "'");
    std::stringstream ss;
    ss << f.rdbuf();
    for (std::string& k : split_keys(ss.str(), '\n')) keys.push_back(std::move(k));
  }
  c.api_keys = std::move(keys);
  return c;
}

}  // namespace zl::cli
