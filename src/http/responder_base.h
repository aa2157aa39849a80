// The protocol-independent half of a Responder (internal to src/http): the
// callbacks, held state, posting, and the exception boundary. The HTTP/1.1
// exchange and the HTTP/2 stream add how bytes reach the wire.
//
// The exception boundary: every piece of handler code the server runs for a
// request -- the handler itself (dispatch), what it post()s or post_after()s,
// its on_drained and on_client_gone callbacks -- runs through guarded(). An
// exception there is logged with the request id and becomes the answer: a
// 500 in the API's envelope when nothing has been sent, or the API's SSE
// error frame and the stream's end after a 200. The connection and every
// other request on the loop go on.
//
// Lives on its connection's I/O thread (post() is the thread-safe entry).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "http/conn_shared.h"
#include "http/message.h"
#include "http/router.h"

namespace zl::http::internal {

class ResponderBase : public Responder, public std::enable_shared_from_this<ResponderBase> {
 public:
  ResponderBase(asio::io_context& ioc, const Router* router, const HttpRequest& req);

  const std::string& request_id() const override { return id_; }
  bool client_gone() const override { return gone_; }
  bool done() const override { return ended_ || gone_; }
  void on_client_gone(std::function<void()> fn) override { on_gone_ = std::move(fn); }
  void on_drained(std::function<void()> fn) override { on_drained_ = std::move(fn); }
  void hold(std::shared_ptr<void> state) override {
    if (!done()) held_.push_back(std::move(state));
  }
  void post(std::function<void()> fn) override;
  void post_after(std::chrono::milliseconds delay, std::function<void()> fn) override;

  // Runs `fn` (handler code, named `where` in the log) behind the boundary.
  template <typename Fn>
  void guarded(std::string_view where, Fn&& fn) {
    try {
      fn();
    } catch (const std::exception& e) {
      fail_internal(where, e.what());
    } catch (...) {
      fail_internal(where, "an exception of unknown type");
    }
  }

  // Connection side: the client has gone (on_client_gone runs once).
  void mark_gone();
  // Connection side: everything queued has been written (on_drained runs).
  void drained();

 protected:
  // The answer is complete: drops the callbacks and held state.
  void set_ended();
  // The error answer itself failed: cut the transport.
  virtual void abort_transport() = 0;

  bool started_ = false;
  bool head_only_;

 private:
  void release();
  // The boundary's answer for an exception `what` thrown in `where`.
  void fail_internal(std::string_view where, std::string_view what);

  asio::io_context& ioc_;
  const Router* router_;
  std::string id_;
  // The request line, for the error answer's envelope (the API is chosen by path).
  std::string method_;
  std::string path_;
  int version_;
  bool ended_ = false;
  bool gone_ = false;
  std::function<void()> on_gone_;
  std::function<void()> on_drained_;
  std::vector<std::shared_ptr<void>> held_;
};

}  // namespace zl::http::internal
