#include "obs/otlp_http.h"

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cstdlib>

namespace zl::obs {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;

Result<HttpEndpoint> parse_http_url(std::string_view url, std::string_view suffix) {
  const std::string_view scheme = "http://";
  auto bad = [&](std::string_view why) {
    return invalid_argument("URL '" + std::string(url) + "': " + std::string(why));
  };
  if (url.substr(0, scheme.size()) != scheme) return bad("expected http://host[:port][/path] (plain HTTP; https is not supported here)");
  std::string_view rest = url.substr(scheme.size());
  const size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  if (path.find_first_of("?#") != std::string_view::npos) return bad("a query or fragment is not allowed");
  HttpEndpoint e;
  if (!authority.empty() && authority.front() == '[') {  // [::1]:4318
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("unterminated IPv6 address");
    e.host = std::string(authority.substr(1, close - 1));
    authority.remove_prefix(close + 1);
    if (!authority.empty() && authority.front() != ':') return bad("junk after the IPv6 address");
    if (!authority.empty()) e.port = std::string(authority.substr(1));
  } else {
    const size_t colon = authority.find(':');
    e.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) e.port = std::string(authority.substr(colon + 1));
  }
  if (e.host.empty() || e.host.find('@') != std::string::npos) return bad("no host");
  char* end = nullptr;
  const long port = std::strtol(e.port.c_str(), &end, 10);
  if (e.port.empty() || *end != '\0' || port < 1 || port > 65535) return bad("bad port");
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  e.target = std::string(path) + std::string(suffix);
  return e;
}

HttpPostResult OtlpHttpClient::post_json(const std::string& body, std::chrono::steady_clock::time_point deadline) {
  using Clock = std::chrono::steady_clock;
  asio::io_context ioc;
  beast::tcp_stream stream(ioc);
  HttpPostResult result;
  beast::error_code failure;
  const char* stage = "resolve";
  auto left = [&](std::chrono::milliseconds cap) {
    const auto until_deadline = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    return std::max(std::chrono::milliseconds(1), std::min(cap, until_deadline));
  };

  bhttp::request<bhttp::string_body> req{bhttp::verb::post, endpoint_.target, 11};
  req.set(bhttp::field::host, endpoint_.host);
  req.set(bhttp::field::content_type, "application/json");
  req.set(bhttp::field::user_agent, "zerolayer");
  req.body() = body;
  req.prepare_payload();
  beast::flat_buffer buffer;
  bhttp::response<bhttp::string_body> res;

  // Numeric hosts resolve without a lookup; names go through the resolver
  // synchronously (getaddrinfo has no timeout: name a collector by address
  // or /etc/hosts where that matters).
  tcp::resolver resolver(ioc);
  beast::error_code ec;
  auto endpoints = resolver.resolve(endpoint_.host, endpoint_.port, ec);
  if (ec) return HttpPostResult{.status = 0, .error = "resolve: " + ec.message()};

  stream.expires_after(left(connect_timeout_));
  stream.async_connect(endpoints, [&](beast::error_code e, const tcp::endpoint&) {
    if (e) {
      stage = "connect";
      failure = e;
      return;
    }
    stream.expires_after(left(send_timeout_));
    bhttp::async_write(stream, req, [&](beast::error_code e2, size_t) {
      if (e2) {
        stage = "send";
        failure = e2;
        return;
      }
      bhttp::async_read(stream, buffer, res, [&](beast::error_code e3, size_t) {
        if (e3) {
          stage = "read";
          failure = e3;
          return;
        }
        result.status = static_cast<int>(res.result_int());
      });
    });
  });
  {
    std::lock_guard lock(mu_);
    if (cancelled_) return HttpPostResult{.status = 0, .error = "cancelled"};
    active_ = &ioc;
  }
  ioc.run();
  {
    // Stopped by cancel(): the pending handlers are destroyed with ioc,
    // never run (the stream closes its socket first).
    std::lock_guard lock(mu_);
    active_ = nullptr;
    if (cancelled_ && result.status == 0 && !failure) result.error = "cancelled";
  }
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  if (failure) result.error = std::string(stage) + ": " + failure.message();
  return result;
}

void OtlpHttpClient::cancel() {
  std::lock_guard lock(mu_);
  cancelled_ = true;
  if (active_) active_->stop();
}

}  // namespace zl::obs
