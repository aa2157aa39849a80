// `zerolayer probe URL`: the 1-token health check (DESIGN.md §3). A streamed
// `POST URL/v1/messages` with max_tokens 1 and a tiny user message; the time
// from opening the connection (after name resolution) to the first SSE
// `data:` line is the probe's TTFT, compared with --timeout-ms.
//
// Exit: 0 when the first event came within the budget; 1 over it or on any
// error (unreachable, non-200, not an event stream, no data event, an SSE
// error event, the overall deadline); 2 on usage errors (https URLs too:
// TLS is a later issue). The whole probe is bounded by
// max(5 s, 10 x budget): a server that accepts and then says nothing cannot
// hang it.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"

namespace zl::cli {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using Clock = std::chrono::steady_clock;

struct ProbeUrl {
  std::string host;
  std::string port = "80";
  std::string base;  // path prefix without a trailing '/'
};

// http://host[:port][/base]. InvalidArgument for anything else.
Result<ProbeUrl> parse_url(std::string_view url) {
  if (url.starts_with("https://")) {
    return invalid_argument("https URLs are not supported yet (TLS comes later): use http://");
  }
  if (!url.starts_with("http://")) return invalid_argument("the URL must start with http:// (got '" + std::string(url) + "')");
  url.remove_prefix(7);
  const size_t slash = url.find('/');
  std::string_view authority = url.substr(0, slash);
  ProbeUrl u;
  if (slash != std::string_view::npos) u.base = std::string(url.substr(slash));
  while (!u.base.empty() && u.base.back() == '/') u.base.pop_back();
  if (authority.starts_with('[')) {  // [v6]:port
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return invalid_argument("bad IPv6 host in the URL");
    u.host = std::string(authority.substr(1, close - 1));
    authority.remove_prefix(close + 1);
    if (!authority.empty() && !authority.starts_with(':')) return invalid_argument("bad host in the URL");
    if (!authority.empty()) u.port = std::string(authority.substr(1));
  } else {
    const size_t colon = authority.find(':');
    u.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) u.port = std::string(authority.substr(colon + 1));
  }
  if (u.host.empty()) return invalid_argument("the URL has no host");
  if (u.port.empty() || u.port.size() > 5 || u.port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(u.port) < 1 || std::stoi(u.port) > 65535) {
    return invalid_argument("bad port in the URL");
  }
  return u;
}

struct ProbeResult {
  int status = 0;            // HTTP status; 0 when none came
  double ttft_ms = -1;       // connect -> first `data:` line; < 0: none
  double total_ms = -1;      // connect -> end of the stream
  std::string error;         // empty: the exchange itself went well
};

// Reads SSE bytes as they come: notes the first `data:` line and an
// `event: error`. Lines may be split across reads.
class SseWatcher {
 public:
  void feed(std::string_view bytes) {
    for (char c : bytes) {
      if (c != '\n') {
        if (line_.size() < 64) line_ += c;  // only line starts matter
        continue;
      }
      if (!line_.empty() && line_.back() == '\r') line_.pop_back();
      if (line_.starts_with("data:")) ++n_data_;
      if (line_ == "event: error" || line_ == "event:error") saw_error_ = true;
      line_.clear();
    }
  }
  int n_data() const { return n_data_; }
  bool saw_error() const { return saw_error_; }

 private:
  std::string line_;
  int n_data_ = 0;
  bool saw_error_ = false;
};

asio::awaitable<void> run_probe(const ProbeUrl& url, std::string api_key, Clock::time_point deadline,
                                ProbeResult* out) {
  auto ex = co_await asio::this_coro::executor;
  asio::ip::tcp::resolver resolver(ex);
  auto endpoints = co_await resolver.async_resolve(url.host, url.port, asio::use_awaitable);
  beast::tcp_stream stream(ex);
  stream.expires_at(deadline);
  const Clock::time_point t0 = Clock::now();
  auto ms_since_t0 = [&] { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); };
  co_await stream.async_connect(endpoints, asio::use_awaitable);

  bhttp::request<bhttp::string_body> req{bhttp::verb::post, url.base + "/v1/messages", 11};
  req.set(bhttp::field::host, url.host);
  req.set(bhttp::field::content_type, "application/json");
  req.set(bhttp::field::accept, "text/event-stream");
  req.set(bhttp::field::user_agent, "zerolayer-probe");
  req.set("anthropic-version", "2023-06-01");
  if (!api_key.empty()) req.set("x-api-key", api_key);
  req.body() = R"({"model":"probe","max_tokens":1,"stream":true,"messages":[{"role":"user","content":"ping"}]})";
  req.prepare_payload();
  co_await bhttp::async_write(stream, req, asio::use_awaitable);

  beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::buffer_body> parser;
  parser.body_limit(boost::none);
  co_await bhttp::async_read_header(stream, buffer, parser, asio::use_awaitable);
  out->status = static_cast<int>(parser.get().result_int());
  if (out->status != 200) {
    out->error = "HTTP status " + std::to_string(out->status);
    co_return;
  }
  const std::string content_type(parser.get()[bhttp::field::content_type]);
  if (!content_type.starts_with("text/event-stream")) {
    out->error = "the answer is not an event stream (Content-Type: " + content_type + ")";
    co_return;
  }
  SseWatcher sse;
  char chunk[4096];
  // Bounded: a max_tokens 1 stream is a few hundred bytes; 1 MiB is plenty.
  size_t n_total = 0;
  while (!parser.is_done()) {
    parser.get().body().data = chunk;
    parser.get().body().size = sizeof chunk;
    auto [ec, n] = co_await bhttp::async_read(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
    if (ec && ec != bhttp::error::need_buffer) throw boost::system::system_error(ec);
    const size_t got = sizeof chunk - parser.get().body().size;
    n_total += got;
    sse.feed(std::string_view(chunk, got));
    if (out->ttft_ms < 0 && sse.n_data() > 0) out->ttft_ms = ms_since_t0();
    if (n_total > (1u << 20)) {
      out->error = "the stream is longer than 1 MiB";
      co_return;
    }
  }
  out->total_ms = ms_since_t0();
  if (sse.saw_error()) {
    out->error = "the stream ended with an error event";
  } else if (sse.n_data() == 0) {
    out->error = "the stream carried no data event";
  }
}

// Runs the probe within `deadline`; errors of the exchange land in the result.
ProbeResult probe(const ProbeUrl& url, const std::string& api_key, Clock::duration overall) {
  ProbeResult result;
  asio::io_context ioc;
  const Clock::time_point deadline = Clock::now() + overall;
  bool finished = false;
  asio::co_spawn(ioc, run_probe(url, api_key, deadline, &result), [&](std::exception_ptr e) {
    finished = true;
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const boost::system::system_error& se) {
      result.error = se.code() == beast::error::timeout ? "timed out" : se.code().message();
    } catch (const std::exception& ex) {
      result.error = ex.what();
    }
  });
  ioc.run_until(deadline);
  if (!finished) result.error = "timed out";  // (name resolution: tcp_stream's timer covers the rest)
  return result;
}

void append_number_or_null(std::string& out, double v) {
  if (v < 0) {
    out += "null";
    return;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  out += buf;
}

std::string json_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

int cmd_probe(int argc, char** argv, int first) {
  const std::vector<FlagSpec> specs = {
      {"api-key", true, "API key, sent as x-api-key (default: none)"},
      {"timeout-ms", true, "budget for the first event in ms (default 50); 1 above it"},
      {"json", false, "print {\"ok\",\"status\",\"ttft_ms\",\"total_ms\",\"error\"} on stdout"}};
  const std::string synopsis = "URL [--api-key K] [--timeout-ms 50] [--json]";
  // The URL is the first argument (Args takes flags only).
  const bool has_url = first < argc && argv[first][0] != '-';
  int code = 0;
  auto args = parse_command(argc, argv, has_url ? first + 1 : first, "probe", synopsis, specs, &code);
  if (!args) return code;
  if (!has_url) return report_error("probe", invalid_argument("the server URL is required (e.g. http://127.0.0.1:8080)"));
  auto url = parse_url(argv[first]);
  if (!url.ok()) return report_error("probe", url.status());
  auto budget_ms = args->get_double("timeout-ms", 50);
  if (!budget_ms.ok()) return report_error("probe", budget_ms.status());
  if (!(*budget_ms >= 0) || *budget_ms > 3'600'000) {
    return report_error("probe", invalid_argument("--timeout-ms must be in [0, 3600000]"));
  }
  const auto overall = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double, std::milli>(std::max(5000.0, 10 * *budget_ms)));
  ProbeResult r = probe(*url, args->get_or("api-key", ""), overall);
  if (r.error.empty() && r.ttft_ms > *budget_ms) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "over budget: first event after %.3f ms > %g ms", r.ttft_ms, *budget_ms);
    r.error = buf;
  }
  const bool ok = r.error.empty();
  if (args->has("json")) {
    std::string j = std::string("{\"ok\":") + (ok ? "true" : "false") + ",\"status\":";
    j += r.status > 0 ? std::to_string(r.status) : "null";
    j += ",\"ttft_ms\":";
    append_number_or_null(j, r.ttft_ms);
    j += ",\"total_ms\":";
    append_number_or_null(j, r.total_ms);
    j += ",\"error\":";
    j += ok ? "null" : "\"" + json_escape(r.error) + "\"";
    j += "}\n";
    std::fputs(j.c_str(), stdout);
  } else if (r.ttft_ms >= 0) {
    std::printf("%.3f\n", r.ttft_ms);  // the first event's time in ms, alone: easy to script
  }
  if (!ok && !args->has("json")) std::fprintf(stderr, "zerolayer probe: %s\n", r.error.c_str());
  return ok ? kExitOk : kExitRuntime;
}

}  // namespace zl::cli
