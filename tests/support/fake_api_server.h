// The API routes (api::ApiService) over a fake engine, behind a real
// HttpServer on a free port: what the in-process server tests talk to.
// Torn down like `serve`: no more I/O, then the engine, then the server.
#pragma once

#include <memory>

#include "api/service.h"
#include "support/fake_engine.h"
#include "http/router.h"
#include "http/server.h"

namespace zl::test {

class FakeApiServer {
 public:
  // http.port is replaced by 0 (any free port).
  FakeApiServer(fake::FakeEngineConfig engine, api::ApiConfig api, http::ServerConfig http,
                fake::FakeCodec codec = fake::FakeCodec())
      : codec_(codec),
        engine_(std::make_unique<fake::FakeEngine>(engine)),
        service_(std::make_unique<api::ApiService>(std::move(api), engine_.get(), &codec_)) {
    service_->register_routes(router_);
    http.port = 0;
    server_ = std::make_unique<http::HttpServer>(http, &router_);
    listening_ = server_->listen().ok();
    if (listening_) server_->start();
  }
  ~FakeApiServer() {
    server_->stop();
    service_->stop();
    engine_.reset();
    server_.reset();
  }
  FakeApiServer(const FakeApiServer&) = delete;
  FakeApiServer& operator=(const FakeApiServer&) = delete;

  bool listening() const { return listening_; }
  int port() const { return server_->port(); }
  http::HttpServer& server() { return *server_; }
  fake::FakeEngine& engine() { return *engine_; }

 private:
  fake::FakeCodec codec_;
  http::Router router_;
  std::unique_ptr<fake::FakeEngine> engine_;
  std::unique_ptr<api::ApiService> service_;
  std::unique_ptr<http::HttpServer> server_;
  bool listening_ = false;
};

}  // namespace zl::test
