// A Responder that does nothing (no socket): for tests of the router and of
// code that only hands answers on. Subclass it to record what a test needs.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "http/message.h"

namespace zl::test {

class NullResponder : public http::Responder {
 public:
  const std::string& request_id() const override { return id_; }
  void send(http::HttpResponse) override {}
  void begin_stream(http::HttpResponse) override {}
  void write(std::string_view) override {}
  void end_stream() override {}
  size_t buffered_bytes() const override { return 0; }
  bool client_gone() const override { return false; }
  bool done() const override { return false; }
  void on_client_gone(std::function<void()>) override {}
  void on_drained(std::function<void()>) override {}
  void hold(std::shared_ptr<void>) override {}
  void post(std::function<void()>) override {}
  void post_after(std::chrono::milliseconds, std::function<void()>) override {}

 private:
  std::string id_ = "req_test";
};

}  // namespace zl::test
