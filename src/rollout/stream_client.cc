#include "rollout/stream_client.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/buffer_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

namespace zl::rollout {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
namespace json = boost::json;
using Clock = std::chrono::steady_clock;

constexpr size_t kMaxLineBytes = 4 << 20;  // one SSE line (a huge delta) at most
constexpr size_t kMaxErrorBody = 64 << 10;

const json::value* find_path(const json::value& v, std::initializer_list<std::string_view> path) {
  const json::value* cur = &v;
  for (std::string_view key : path) {
    const json::object* o = cur->if_object();
    if (!o) return nullptr;
    auto it = o->find(key);
    if (it == o->end()) return nullptr;
    cur = &it->value();
  }
  return cur;
}

std::string string_at(const json::value& v, std::initializer_list<std::string_view> path) {
  const json::value* x = find_path(v, path);
  return x && x->is_string() ? std::string(x->get_string()) : std::string();
}

int64_t int_at(const json::value& v, std::initializer_list<std::string_view> path) {
  const json::value* x = find_path(v, path);
  if (!x) return -1;
  if (x->is_int64()) return x->get_int64();
  if (x->is_uint64()) return static_cast<int64_t>(x->get_uint64());
  return -1;
}

// The envelope of an error body or event: Anthropic {"type":"error","error":{type,message}}
// or OpenAI {"error":{message,type,code}}.
void take_error(const json::value& v, StreamOutcome& out) {
  out.error_type = string_at(v, {"error", "type"});
  out.error = string_at(v, {"error", "message"});
  if (out.error.empty()) out.error = out.error_type.empty() ? "error" : out.error_type;
}

}  // namespace

void SseAnswerParser::feed(std::string_view bytes, double now_ms) {
  for (char c : bytes) {
    if (c != '\n') {
      if (line_.size() < kMaxLineBytes) line_ += c;
      continue;
    }
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    on_line(line_, now_ms);
    line_.clear();
  }
}

void SseAnswerParser::on_line(std::string_view line, double now_ms) {
  if (line.empty()) return on_event(now_ms);
  if (line.starts_with(':')) return;  // a comment (OpenAI-style keep-alive)
  auto value_of = [&](size_t n) {
    std::string_view v = line.substr(n);
    if (v.starts_with(' ')) v.remove_prefix(1);
    return v;
  };
  if (line.starts_with("event:")) {
    event_ = std::string(value_of(6));
  } else if (line.starts_with("data:")) {
    if (!data_.empty()) data_ += '\n';
    data_ += value_of(5);
  }
}

void SseAnswerParser::on_event(double now_ms) {
  const std::string event = std::move(event_);
  const std::string data = std::move(data_);
  event_.clear();
  data_.clear();
  if (data.empty()) return;
  if (data == "[DONE]") {
    saw_end_ = true;
    return;
  }
  boost::system::error_code ec;
  const json::value v = json::parse(data, ec);
  if (ec) return;  // not JSON: nothing a client could read either
  const std::string type = string_at(v, {"type"});
  auto on_delta = [&](std::string_view text) {
    if (acc_.first_token_ms < 0) acc_.first_token_ms = now_ms;
    acc_.last_token_ms = now_ms;
    const size_t room = max_text_ > acc_.text.size() ? max_text_ - acc_.text.size() : 0;
    acc_.text.append(text.substr(0, std::min(room, text.size())));
  };
  if (event == "error" || type == "error" || (type.empty() && find_path(v, {"error"}))) {
    take_error(v, acc_);
    return;
  }
  if (type == "content_block_delta") {
    const std::string dtype = string_at(v, {"delta", "type"});
    if (dtype == "text_delta") on_delta(string_at(v, {"delta", "text"}));
    if (dtype == "thinking_delta" || dtype == "input_json_delta") on_delta({});
  } else if (type == "message_start") {
    if (int64_t n = int_at(v, {"message", "usage", "output_tokens"}); n >= 0) acc_.total_tokens = n;
  } else if (type == "message_delta") {
    if (std::string s = string_at(v, {"delta", "stop_reason"}); !s.empty()) acc_.stop_reason = s;
    if (int64_t n = int_at(v, {"usage", "output_tokens"}); n >= 0) acc_.total_tokens = n;
  } else if (type == "message_stop") {
    saw_end_ = true;
  } else if (type.empty()) {  // OpenAI chunk
    if (const json::value* choices = find_path(v, {"choices"}); choices && choices->is_array() &&
                                                                  !choices->get_array().empty()) {
      const json::value& c0 = choices->get_array()[0];
      const json::value* content = find_path(c0, {"delta", "content"});
      if (!content) content = find_path(c0, {"text"});
      if (content && content->is_string() && !content->get_string().empty()) on_delta(content->get_string());
      if (find_path(c0, {"delta", "tool_calls"})) on_delta({});
      if (std::string f = string_at(c0, {"finish_reason"}); !f.empty()) acc_.stop_reason = f;
    }
    if (int64_t n = int_at(v, {"usage", "completion_tokens"}); n >= 0) acc_.total_tokens = n;
  }
}

void SseAnswerParser::finish(StreamOutcome& out) const {
  out.first_token_ms = acc_.first_token_ms;
  out.last_token_ms = acc_.last_token_ms;
  out.total_tokens = acc_.total_tokens;
  out.stop_reason = acc_.stop_reason;
  out.text = acc_.text;
  if (!acc_.error.empty()) {
    out.error = acc_.error;
    out.error_type = acc_.error_type;
  }
}

namespace {

asio::awaitable<void> exchange(const StreamCall& call, StreamOutcome* out) {
  auto ex = co_await asio::this_coro::executor;
  const Clock::time_point t0 = Clock::now();
  auto ms = [&] { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); };
  beast::tcp_stream stream(ex);
  stream.expires_at(call.deadline);
  asio::ip::tcp::resolver resolver(ex);
  auto endpoints = co_await resolver.async_resolve(call.host, call.port, asio::use_awaitable);
  if (auto [ec, ep] = co_await stream.async_connect(endpoints, asio::as_tuple(asio::use_awaitable)); ec) {
    out->error_type = ec == beast::error::timeout ? "timeout" : "connect";
    out->error = ec == beast::error::timeout ? "timed out" : "connect: " + ec.message();
    co_return;
  }
  bhttp::request<bhttp::string_body> req{bhttp::verb::post, call.target, 11};
  req.set(bhttp::field::host, call.host + ":" + call.port);
  req.set(bhttp::field::content_type, "application/json");
  req.set(bhttp::field::accept, "text/event-stream");
  req.set(bhttp::field::user_agent, "zerolayer-rollout");
  req.set("anthropic-version", "2023-06-01");
  if (!call.api_key.empty()) {
    req.set("x-api-key", call.api_key);
    req.set(bhttp::field::authorization, "Bearer " + call.api_key);
  }
  for (const auto& [k, v] : call.headers) req.set(k, v);
  req.body() = call.body;
  req.prepare_payload();
  co_await bhttp::async_write(stream, req, asio::use_awaitable);

  beast::flat_buffer buffer;
  bhttp::response_parser<bhttp::buffer_body> parser;
  parser.body_limit(boost::none);
  co_await bhttp::async_read_header(stream, buffer, parser, asio::use_awaitable);
  out->status = static_cast<int>(parser.get().result_int());
  const bool sse = std::string_view(parser.get()[bhttp::field::content_type]).starts_with("text/event-stream");
  SseAnswerParser sse_parser(call.max_text_bytes);
  std::string plain;  // a JSON answer (an error) is kept, bounded
  size_t n_total = 0;
  char chunk[16384];
  while (!parser.is_done()) {
    parser.get().body().data = chunk;
    parser.get().body().size = sizeof chunk;
    auto [ec, n] = co_await bhttp::async_read_some(stream, buffer, parser, asio::as_tuple(asio::use_awaitable));
    if (ec && ec != bhttp::error::need_buffer) throw boost::system::system_error(ec);
    const size_t got = sizeof chunk - parser.get().body().size;
    n_total += got;
    if (sse) {
      sse_parser.feed(std::string_view(chunk, got), ms());
    } else if (plain.size() < kMaxErrorBody) {
      plain.append(chunk, std::min(got, kMaxErrorBody - plain.size()));
    }
    if (n_total > call.max_stream_bytes) {
      out->error = "the answer is longer than " + std::to_string(call.max_stream_bytes) + " bytes";
      co_return;
    }
  }
  out->total_ms = ms();
  if (sse) {
    sse_parser.finish(*out);
    if (out->error.empty() && !sse_parser.saw_end()) out->error = "the stream ended before its last event";
  } else if (out->status != 200) {
    boost::system::error_code ec;
    const json::value v = json::parse(plain, ec);
    if (!ec) take_error(v, *out);
    if (out->error.empty()) out->error = "HTTP status " + std::to_string(out->status);
  } else {
    out->error = "the answer is not an event stream";
  }
  if (out->status != 200 && out->error.empty()) out->error = "HTTP status " + std::to_string(out->status);
}

}  // namespace

asio::awaitable<StreamOutcome> stream_post(StreamCall call) {
  StreamOutcome out;
  try {
    co_await exchange(call, &out);
  } catch (const boost::system::system_error& e) {
    const bool timeout = e.code() == beast::error::timeout || Clock::now() >= call.deadline;
    out.error_type = timeout ? "timeout" : out.status == 0 ? "connect" : "transport";
    out.error = timeout ? "timed out" : e.code().message();
  } catch (const std::exception& e) {
    out.error_type = "transport";
    out.error = e.what();
  }
  co_return out;
}

Result<std::string> with_stream_true(std::string_view body, bool openai) {
  boost::system::error_code ec;
  json::value v = json::parse(body, ec);
  if (ec || !v.is_object()) return invalid_argument("the request body is not a JSON object");
  json::object& o = v.get_object();
  o["stream"] = true;
  if (openai) {
    json::object so;
    if (auto it = o.find("stream_options"); it != o.end() && it->value().is_object()) so = it->value().get_object();
    so["include_usage"] = true;
    o["stream_options"] = std::move(so);
  }
  return json::serialize(v);
}

}  // namespace zl::rollout
