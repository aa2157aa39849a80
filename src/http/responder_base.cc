#include "http/responder_base.h"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "core/log.h"

namespace zl::http::internal {

ResponderBase::ResponderBase(asio::io_context& ioc, const Router* router, const HttpRequest& req)
    : head_only_(req.method == "HEAD"), ioc_(ioc), router_(router), id_(req.request_id), method_(req.method),
      path_(req.path), version_(req.version) {}

void ResponderBase::mark_gone() {
  if (gone_ || ended_) return;
  gone_ = true;
  auto self = shared_from_this();
  if (auto fn = std::move(on_gone_)) guarded("on_client_gone", fn);
  release();
}

void ResponderBase::drained() {
  if (!on_drained_ || done()) return;
  // A copy: the callback may end the answer, which clears on_drained_.
  auto fn = on_drained_;
  guarded("on_drained", fn);
}

void ResponderBase::set_ended() {
  ended_ = true;
  auto self = shared_from_this();  // release() may drop the last outside reference
  release();
}

void ResponderBase::release() {
  on_gone_ = nullptr;
  on_drained_ = nullptr;
  held_.clear();  // may destroy the handler's state (which may hold us: we are kept by the caller)
}

void ResponderBase::post(std::function<void()> fn) {
  asio::post(ioc_, [w = weak_from_this(), fn = std::move(fn)] {
    auto self = w.lock();
    if (self && !self->done()) self->guarded("post", fn);
  });
}

void ResponderBase::post_after(std::chrono::milliseconds delay, std::function<void()> fn) {
  auto timer = std::make_shared<asio::steady_timer>(ioc_, delay);
  timer->async_wait([timer, w = weak_from_this(), fn = std::move(fn)](error_code ec) {
    auto self = w.lock();
    if (!ec && self && !self->done()) self->guarded("post_after", fn);
  });
}

void ResponderBase::fail_internal(std::string_view where, std::string_view what) {
  const bool answered = done();
  log::error("request handler threw", {{"request_id", id_}, {"where", where}, {"what", what}, {"path", path_},
                                       {"answer", answered ? "none (already complete)" : started_ ? "sse error" : "500"}});
  if (answered) return;
  auto self = shared_from_this();  // the answer's end may drop every other reference
  HttpRequest req;
  req.method = method_;
  req.target = path_;
  req.path = path_;
  req.request_id = id_;
  req.version = version_;
  try {
    if (started_) {
      write(router_->stream_error_event(HttpError::kInternal, req));
      end_stream();
    } else {
      send(router_->error_response(HttpError::kInternal, req));
    }
  } catch (const std::exception& e) {
    // Even the error answer failed: cut the connection (the client sees an
    // incomplete answer, never a hang).
    log::error("error answer failed, closing the connection", {{"request_id", id_}, {"what", e.what()}});
    abort_transport();
  }
}

}  // namespace zl::http::internal
