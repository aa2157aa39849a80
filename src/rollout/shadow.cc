#include "rollout/shadow.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <cmath>
#include <deque>
#include <random>
#include <thread>

#include "core/hash.h"
#include "core/log.h"
#include "obs/otlp_http.h"  // parse_http_url
#include "rollout/bleu.h"

namespace zl::rollout {
namespace asio = boost::asio;
namespace json = boost::json;

namespace {

// Ratios shadow / primary: 1/10 to 10x, finer around 1.
const std::vector<double>& ratio_buckets() {
  static const std::vector<double> b = {0.1, 0.25, 0.5, 0.7, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2, 4, 10};
  return b;
}
const std::vector<double>& bleu_buckets() {
  static const std::vector<double> b = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0};
  return b;
}

bool is_openai_route(std::string_view route) { return route.starts_with("/v1/chat/") || route == "/v1/completions"; }

double ratio(double shadow_ms, double primary_ms) {
  return shadow_ms >= 0 && primary_ms > 0 ? shadow_ms / primary_ms : -1;
}

json::value ms_or_null(double ms) { return ms >= 0 ? json::value(std::round(ms * 1000) / 1000) : json::value(nullptr); }

}  // namespace

struct ShadowCore {
  ShadowConfig cfg;
  obs::HttpEndpoint endpoint;  // target: the base path
  asio::io_context ioc;
  asio::executor_work_guard<asio::io_context::executor_type> work{ioc.get_executor()};
  std::thread thread;
  std::atomic<size_t> n_open{0};  // pairs mirrored and not yet finished
  obs::Family* outcomes = nullptr;
  obs::Histogram* ratio_first = nullptr;
  obs::Histogram* ratio_last = nullptr;
  obs::Histogram* bleu = nullptr;
  obs::Counter* mismatch_stop = nullptr;
  obs::Counter* mismatch_tokens = nullptr;
  // The shadow thread's alone:
  std::deque<std::shared_ptr<ShadowPair>> waiting;
  int in_flight = 0;
  FILE* log = nullptr;

  ~ShadowCore() {
    if (log) std::fclose(log);
  }

  void enqueue(std::shared_ptr<ShadowPair> pair) {
    waiting.push_back(std::move(pair));
    launch();
  }

  void launch() {
    while (in_flight < cfg.concurrency && !waiting.empty()) {
      std::shared_ptr<ShadowPair> pair = std::move(waiting.front());
      waiting.pop_front();
      ++in_flight;
      asio::co_spawn(ioc, run(pair), asio::detached);
    }
  }

  asio::awaitable<void> run(std::shared_ptr<ShadowPair> pair) {
    StreamOutcome out;
    Result<std::string> body = with_stream_true(pair->body_, is_openai_route(pair->route_));
    pair->body_.clear();
    pair->body_.shrink_to_fit();
    if (!body.ok()) {
      out.error = body.status().message();
      out.error_type = "invalid_request";
    } else {
      // (built outside co_await: GCC 12 miscompiles braced arrays in a coroutine's await expression)
      StreamCall call;
      call.host = endpoint.host;
      call.port = endpoint.port;
      call.target = endpoint.target + pair->route_;
      call.body = std::move(body).value();
      call.api_key = cfg.api_key;
      call.headers.emplace_back("x-engine-shadow", "1");
      call.headers.emplace_back("x-request-id", pair->request_id_);
      call.deadline = std::chrono::steady_clock::now() + cfg.timeout;
      call.max_text_bytes = cfg.max_text_bytes;
      out = co_await stream_post(std::move(call));
    }
    pair->shadow_ = std::move(out);
    --in_flight;
    launch();
    if (pair->primary_) finish(*pair);
  }

  static std::string outcome_of(const PrimaryAnswer& p, const StreamOutcome& s) {
    if (s.error_type == "timeout") return "timeout";
    if (s.status == 0 && (s.error_type == "connect" || s.error_type == "transport")) return "unreachable";
    if (!s.ok()) return "shadow_error";
    if (!p.complete) return "primary_error";
    return "compared";
  }

  void finish(ShadowPair& pair) {
    const PrimaryAnswer& p = *pair.primary_;
    const StreamOutcome& s = *pair.shadow_;
    const std::string outcome = outcome_of(p, s);
    outcomes->counter({outcome}).add();
    json::object line{{"ts", log::utc_timestamp()},
                      {"request_id", pair.request_id_},
                      {"route", pair.route_},
                      {"outcome", outcome},
                      {"primary", json::object{{"status", p.status},
                                               {"first_token_ms", ms_or_null(p.first_token_ms)},
                                               {"last_token_ms", ms_or_null(p.last_token_ms)},
                                               {"total_tokens", p.total_tokens},
                                               {"stop_reason", p.stop_reason}}},
                      {"shadow", json::object{{"status", s.status},
                                              {"first_token_ms", ms_or_null(s.first_token_ms)},
                                              {"last_token_ms", ms_or_null(s.last_token_ms)},
                                              {"total_tokens", s.total_tokens},
                                              {"stop_reason", s.stop_reason}}}};
    if (!s.error.empty()) line["shadow"].as_object()["error"] = s.error;
    if (outcome == "compared") {
      const double r_first = ratio(s.first_token_ms, p.first_token_ms);
      const double r_last = ratio(s.last_token_ms, p.last_token_ms);
      const double b = bleu4(s.text, p.text);
      if (r_first >= 0) ratio_first->observe(r_first);
      if (r_last >= 0) ratio_last->observe(r_last);
      bleu->observe(b);
      const bool same_stop = s.stop_reason == p.stop_reason;
      const bool same_tokens = s.total_tokens == p.total_tokens;
      if (!same_stop) mismatch_stop->add();
      if (!same_tokens) mismatch_tokens->add();
      line["first_token_ratio"] = r_first >= 0 ? json::value(r_first) : json::value(nullptr);
      line["last_token_ratio"] = r_last >= 0 ? json::value(r_last) : json::value(nullptr);
      line["bleu4"] = b;
      line["same_stop_reason"] = same_stop;
      line["same_total_tokens"] = same_tokens;
    }
    if (log) {
      std::string text = json::serialize(line);
      text += '\n';
      std::fwrite(text.data(), 1, text.size(), log);
      std::fflush(log);
    }
    n_open.fetch_sub(1, std::memory_order_relaxed);
  }
};

void ShadowPair::primary_done(PrimaryAnswer answer) {
  if (primary_given_.exchange(true)) return;
  std::shared_ptr<ShadowCore> core = core_.lock();
  if (!core) return;
  // The handler holds the core by pointer: it only runs on the core's own
  // thread, which stops before the core goes (a shared_ptr here would keep
  // the core alive from inside its own io_context).
  asio::post(core->ioc, [c = core.get(), self = shared_from_this(), a = std::move(answer)]() mutable {
    self->primary_ = std::move(a);
    if (self->shadow_) c->finish(*self);
  });
}

Result<std::unique_ptr<Shadow>> Shadow::create(ShadowConfig config, obs::Registry& registry) {
  ASSIGN_OR_RETURN(obs::HttpEndpoint ep, obs::parse_http_url(config.url, ""));
  if (!(config.fraction >= 0 && config.fraction <= 1)) return invalid_argument("the shadow fraction must be in [0, 1]");
  if (config.concurrency < 1 || config.queue_capacity < 1) return invalid_argument("the shadow queue must hold one request");
  auto core = std::make_shared<ShadowCore>();
  core->endpoint = std::move(ep);
  while (!core->endpoint.target.empty() && core->endpoint.target.back() == '/') core->endpoint.target.pop_back();
  if (!config.log_path.empty()) {
    core->log = std::fopen(config.log_path.c_str(), "a");
    if (!core->log) return invalid_argument("cannot open the shadow log '" + config.log_path + "' for appending");
  }
  core->cfg = std::move(config);
  core->outcomes = &registry.add("engine_shadow_requests_total",
                                 "Shadow traffic (--shadow): mirrored requests by outcome (compared, shadow_error, "
                                 "timeout, unreachable, dropped, primary_error)",
                                 obs::MetricType::kCounter, {"outcome"});
  for (const char* o : {"compared", "shadow_error", "timeout", "unreachable", "dropped", "primary_error"}) {
    core->outcomes->counter({o});
  }
  obs::Family& ratios = registry.add("engine_shadow_latency_ratio",
                                     "Shadow / primary time to the first and to the last token, per compared pair",
                                     obs::MetricType::kHistogram, {"phase"}, ratio_buckets());
  core->ratio_first = &ratios.histogram({"first_token"});
  core->ratio_last = &ratios.histogram({"last_token"});
  core->bleu = &registry
                    .add("engine_shadow_bleu4", "BLEU-4 of the shadow's text against the primary's, per compared pair",
                         obs::MetricType::kHistogram, {}, bleu_buckets())
                    .histogram();
  obs::Family& mismatches = registry.add("engine_shadow_mismatches_total",
                                         "Compared pairs whose stop reason or output token count differ",
                                         obs::MetricType::kCounter, {"field"});
  core->mismatch_stop = &mismatches.counter({"stop_reason"});
  core->mismatch_tokens = &mismatches.counter({"total_tokens"});
  ShadowCore* raw = core.get();
  core->thread = std::thread([raw] { raw->ioc.run(); });
  return std::unique_ptr<Shadow>(new Shadow(std::move(core)));
}

Shadow::~Shadow() {
  core_->work.reset();
  core_->ioc.stop();
  if (core_->thread.joinable()) core_->thread.join();
}

const ShadowConfig& Shadow::config() const { return core_->cfg; }

bool user_in_fraction(std::string_view user, double fraction) {
  const uint64_t h = stable_hash64(user);
  // The top 53 bits as a fraction in [0, 1).
  return static_cast<double>(h >> 11) * 0x1.0p-53 < fraction;
}

bool Shadow::sampled(std::string_view user) const {
  const double f = core_->cfg.fraction;
  if (f <= 0) return false;
  if (f >= 1) return true;
  if (!user.empty()) return user_in_fraction(user, f);
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return std::uniform_real_distribution<double>(0, 1)(rng) < f;
}

std::shared_ptr<ShadowPair> Shadow::mirror(std::string request_id, std::string route, std::string body) {
  ShadowCore& core = *core_;
  if (core.n_open.fetch_add(1, std::memory_order_relaxed) >= core.cfg.queue_capacity) {
    core.n_open.fetch_sub(1, std::memory_order_relaxed);
    core.outcomes->counter({"dropped"}).add();
    return nullptr;
  }
  std::shared_ptr<ShadowPair> pair(new ShadowPair());
  pair->core_ = core_;
  pair->request_id_ = std::move(request_id);
  pair->route_ = std::move(route);
  pair->body_ = std::move(body);
  asio::post(core.ioc, [c = &core, pair] { c->enqueue(pair); });  // (by pointer: see primary_done)
  return pair;
}

}  // namespace zl::rollout
