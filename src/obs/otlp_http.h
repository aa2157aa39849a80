// A minimal HTTP/1.1 client for the OTLP/HTTP exporter: one POST per call,
// a fresh connection each time (a batch every second or so does not need
// keep-alive), plain http:// only (a collector beside the engine; TLS is
// the collector's business). Boost.Beast on a private io_context, with a
// deadline on connect and one on the whole exchange (write + read).
//
// Thread-safety: post_json() is called by one thread (the exporter's);
// cancel() from any other. Blocks the calling thread for at most
// connect_timeout + send_timeout, less when cancelled.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "core/status.h"

namespace zl::obs {

struct HttpEndpoint {
  std::string host;
  std::string port = "80";
  std::string target;  // the path, e.g. "/v1/traces"
};

// "http://host[:port][/base]" -> host, port and base + `suffix` (a trailing
// '/' of the base is dropped). InvalidArgument for anything else (https,
// no host, a query, a bad port).
Result<HttpEndpoint> parse_http_url(std::string_view url, std::string_view suffix);

struct HttpPostResult {
  int status = 0;  // 0: no answer (connection refused, timeout, broken reply)
  std::string error;  // why, when status is 0
};

class OtlpHttpClient {
 public:
  OtlpHttpClient(HttpEndpoint endpoint, std::chrono::milliseconds connect_timeout,
                 std::chrono::milliseconds send_timeout)
      : endpoint_(std::move(endpoint)), connect_timeout_(connect_timeout), send_timeout_(send_timeout) {}

  // POSTs `body` as application/json; gives up at `deadline` at the latest.
  HttpPostResult post_json(const std::string& body, std::chrono::steady_clock::time_point deadline);
  // Ends a post_json() in progress at once (status 0) and refuses later ones.
  void cancel();

 private:
  std::mutex mu_;
  boost::asio::io_context* active_ = nullptr;  // the running post's; guarded by mu_
  bool cancelled_ = false;                      // guarded by mu_
  HttpEndpoint endpoint_;
  std::chrono::milliseconds connect_timeout_;
  std::chrono::milliseconds send_timeout_;
};

}  // namespace zl::obs
