#include "api/fan_out.h"

#include <algorithm>

#include "http/sse.h"

namespace zl::api {

// Choice i's view of the answer: its writes go to the fan-out, everything
// else to the real responder.
class FanOut::Choice final : public http::Responder {
 public:
  Choice(std::shared_ptr<FanOut> fan, int i) : fan_(std::move(fan)), i_(i) {}

  const std::string& request_id() const override { return fan_->real_->request_id(); }
  void send(http::HttpResponse response) override {
    if (fan_->answered_[i_]) return;
    fan_->answered_[i_] = true;
    fan_->on_send(i_, std::move(response));
  }
  void begin_stream(http::HttpResponse head) override {
    if (!fan_->answered_[i_]) fan_->on_begin(std::move(head));
  }
  void write(std::string_view bytes) override {
    if (!fan_->answered_[i_]) fan_->on_write(bytes);
  }
  void end_stream() override { fan_->answered_[i_] = true; }
  size_t buffered_bytes() const override { return fan_->real_->buffered_bytes(); }
  bool client_gone() const override { return fan_->real_->client_gone(); }
  bool done() const override { return fan_->answered_[i_] || fan_->real_->done(); }
  void on_client_gone(std::function<void()> fn) override { fan_->gone_[i_] = std::move(fn); }
  void on_drained(std::function<void()> fn) override { fan_->drained_[i_] = std::move(fn); }
  void hold(std::shared_ptr<void> state) override { fan_->real_->hold(std::move(state)); }
  void post(std::function<void()> fn) override { fan_->real_->post(std::move(fn)); }
  void post_after(std::chrono::milliseconds delay, std::function<void()> fn) override {
    fan_->real_->post_after(delay, std::move(fn));
  }

 private:
  std::shared_ptr<FanOut> fan_;
  int i_;
};

FanOut::FanOut(std::shared_ptr<http::Responder> real, int n_choices, int n_per_prompt, bool stream,
               FanOutFormat format, std::function<void(const SessionResult&)> on_done,
               std::vector<SessionOptions::HeadHeaders> head_headers, int max_running)
    : real_(std::move(real)),
      n_choices_(n_choices),
      n_per_prompt_(std::max(1, n_per_prompt)),
      stream_(stream),
      format_(std::move(format)),
      on_done_(std::move(on_done)),
      head_headers_(std::move(head_headers)),
      responses_(n_choices),
      results_(n_choices),
      answered_(n_choices, false),
      gone_(n_choices),
      drained_(n_choices),
      deferred_(n_choices),
      released_(n_choices, false),
      started_(n_choices, false),
      max_running_(std::max(0, max_running)) {}

std::shared_ptr<FanOut> FanOut::create(std::shared_ptr<http::Responder> real, int n_choices, int n_per_prompt,
                                       bool stream, FanOutFormat format,
                                       std::function<void(const SessionResult&)> on_done,
                                       std::vector<SessionOptions::HeadHeaders> head_headers, int max_running) {
  auto fan = std::make_shared<FanOut>(real, n_choices, n_per_prompt, stream, std::move(format), std::move(on_done),
                                      std::move(head_headers), max_running);
  real->hold(fan);
  std::weak_ptr<FanOut> weak = fan;
  real->on_client_gone([weak] {
    if (auto f = weak.lock()) f->cancel_others(-1);
  });
  real->on_drained([weak] {
    auto f = weak.lock();
    if (!f) return;
    const std::vector<std::function<void()>> fns = f->drained_;  // a callback may register again
    for (const auto& fn : fns) {
      if (fn) fn();
    }
  });
  return fan;
}

std::shared_ptr<http::Responder> FanOut::choice(int i) { return std::make_shared<Choice>(shared_from_this(), i); }

std::function<void(const SessionResult&)> FanOut::choice_done(int i) {
  return [self = shared_from_this(), i](const SessionResult& r) { self->on_done(i, r); };
}

void FanOut::defer(int i, std::function<void()> start) { deferred_[i] = std::move(start); }

void FanOut::start_deferred(int first, int last) {
  for (int i = std::max(first, 0); i < std::min(last, n_choices_); ++i) released_[i] = true;
  start_released();
}

void FanOut::start_released() {
  for (int i = 0; i < n_choices_ && !stopped_ && (max_running_ == 0 || n_running_ < max_running_); ++i) {
    if (!deferred_[i] || !released_[i]) continue;
    std::function<void()> start = std::move(deferred_[i]);
    deferred_[i] = nullptr;
    started_[i] = true;
    ++n_running_;
    start();
  }
}

Usage FanOut::join_usage(const std::vector<Usage>& usages, int n_per_prompt) {
  Usage total;
  const int n = std::max(1, n_per_prompt);
  for (size_t k = 0; k < usages.size(); k += n) {
    // A prompt counts once: the figures of its choice that saw it (a cancelled one may not have).
    const Usage* seen = &usages[k];
    for (size_t i = k; i < std::min(usages.size(), k + n); ++i) {
      if (usages[i].n_prompt_tokens > seen->n_prompt_tokens) seen = &usages[i];
      total.n_generated_tokens += usages[i].n_generated_tokens;
    }
    total.n_prompt_tokens += seen->n_prompt_tokens;
    total.n_cached_tokens += seen->n_cached_tokens;
  }
  return total;
}

void FanOut::add_head_headers(http::HttpResponse& response, const Usage& usage) const {
  for (const SessionOptions::HeadHeaders& add : head_headers_) add(usage, response.headers);
}

void FanOut::on_send(int i, http::HttpResponse response) {
  if (stream_ && real_started_) {  // an error before this choice's stream began: an event of the stream
    std::string frame;
    http::append_sse_data(frame, response.body);
    real_->write(frame);
    return;
  }
  const bool failed = response.status != 200;
  responses_[i] = std::move(response);
  if (!stream_ && failed) cancel_others(i);  // the answer is this error: the others' work is lost anyway
}

void FanOut::on_begin(http::HttpResponse head) {
  if (!real_started_) return start_real_stream(std::move(head));
  if (!head.body.empty()) real_->write(head.body);
}

void FanOut::start_real_stream(http::HttpResponse head) {
  add_head_headers(head, Usage{});
  real_->begin_stream(std::move(head));
  real_started_ = true;
  for (std::optional<http::HttpResponse>& early : responses_) {  // choices that failed before any stream began
    if (!early) continue;
    std::string frame;
    http::append_sse_data(frame, early->body);
    real_->write(frame);
    early.reset();
  }
}

void FanOut::on_write(std::string_view bytes) {
  if (real_started_) real_->write(bytes);
}

void FanOut::cancel_others(int except) {
  stopped_ = true;  // (a choice that ends below starts no other)
  for (int j = 0; j < n_choices_; ++j) {  // the choices not started end as gone, never started
    if (j == except || !deferred_[j]) continue;
    deferred_[j] = nullptr;
    answered_[j] = true;
    on_done(j, SessionResult{.status = 499, .error_reason = ErrorReason::kClientGone});
  }
  for (int j = 0; j < n_choices_; ++j) {
    if (j == except || answered_[j] || !gone_[j]) continue;
    std::function<void()> fn = std::move(gone_[j]);
    gone_[j] = nullptr;
    fn();
  }
}

void FanOut::on_done(int i, const SessionResult& r) {
  if (results_[i]) return;
  results_[i] = r;
  if (started_[i]) --n_running_;
  if (++n_done_ == n_choices_) return finish();
  start_released();  // its running slot is free
}

void FanOut::finish() {
  if (finished_) return;
  finished_ = true;
  std::vector<Usage> usages;
  SessionResult total = *results_[0];
  total.t_first_ms = -1;
  total.n_tool_calls = 0;
  total.n_tool_fallbacks = {};
  total.error_reason.reset();
  for (const std::optional<SessionResult>& r : results_) {
    usages.push_back(r->usage);
    if (r->t_first_ms >= 0 && (total.t_first_ms < 0 || r->t_first_ms < total.t_first_ms)) total.t_first_ms = r->t_first_ms;
    total.t_total_ms = std::max(total.t_total_ms, r->t_total_ms);
    total.n_tool_calls += r->n_tool_calls;
    for (size_t k = 0; k < total.n_tool_fallbacks.size(); ++k) total.n_tool_fallbacks[k] += r->n_tool_fallbacks[k];
    if (!total.error_reason && r->error_reason) total.error_reason = r->error_reason;
  }
  total.usage = join_usage(usages, n_per_prompt_);
  const bool gone = real_->client_gone();
  if (stream_ && real_started_) {
    real_->write(format_.stream_tail(total.usage));
    real_->end_stream();
    total.status = 200;
  } else {
    bool all_ok = true;
    for (const std::optional<http::HttpResponse>& r : responses_) all_ok = all_ok && r && r->status == 200;
    std::optional<http::HttpResponse> answer;
    if (all_ok && !stream_) {
      std::vector<std::string> bodies;
      for (std::optional<http::HttpResponse>& r : responses_) bodies.push_back(std::move(r->body));
      answer = http::HttpResponse{.status = 200, .content_type = responses_[0]->content_type,
                                  .headers = std::move(responses_[0]->headers),
                                  .body = format_.merge(bodies, total.usage)};
    } else {
      for (size_t j = 0; j < responses_.size(); ++j) {
        if (responses_[j] && responses_[j]->status != 200) {  // the first error is the answer, and its reason
          answer = std::move(responses_[j]);
          total.error_reason = results_[j]->error_reason;
          break;
        }
      }
    }
    if (answer && !gone) {
      total.status = answer->status;
      add_head_headers(*answer, total.usage);
      real_->send(std::move(*answer));
    } else {
      total.status = 499;
    }
  }
  if (gone) {
    total.status = 499;
    if (!total.error_reason) total.error_reason = ErrorReason::kClientGone;
  }
  if (auto fn = std::move(on_done_)) fn(total);
}

}  // namespace zl::api
