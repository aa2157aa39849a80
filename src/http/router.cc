#include "http/router.h"

#include <algorithm>

namespace zl::http {
namespace {

std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < path.size()) {
    if (path[i] == '/') {
      ++i;
      continue;
    }
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    out.emplace_back(path.substr(i, j - i));
    i = j;
  }
  return out;
}

bool is_capture(const std::string& seg) { return seg.size() >= 2 && seg.front() == '{' && seg.back() == '}'; }

void add_headers(HttpResponse& r, const std::vector<Header>& headers) {
  r.headers.insert(r.headers.end(), headers.begin(), headers.end());
}

// The handler's Responder with the router's common headers added to every
// head; everything else goes straight through. Lives as long as the handler
// keeps it (the inner one as long as it does).
class CommonHeadersResponder final : public Responder {
 public:
  CommonHeadersResponder(std::shared_ptr<Responder> inner, const std::vector<Header>* headers)
      : inner_(std::move(inner)), headers_(headers) {}
  const std::string& request_id() const override { return inner_->request_id(); }
  void send(HttpResponse r) override {
    add_headers(r, *headers_);
    inner_->send(std::move(r));
  }
  void begin_stream(HttpResponse head) override {
    add_headers(head, *headers_);
    inner_->begin_stream(std::move(head));
  }
  void write(std::string_view bytes) override { inner_->write(bytes); }
  void end_stream() override { inner_->end_stream(); }
  size_t buffered_bytes() const override { return inner_->buffered_bytes(); }
  bool client_gone() const override { return inner_->client_gone(); }
  bool done() const override { return inner_->done(); }
  void on_client_gone(std::function<void()> fn) override { inner_->on_client_gone(std::move(fn)); }
  void on_drained(std::function<void()> fn) override { inner_->on_drained(std::move(fn)); }
  void hold(std::shared_ptr<void> state) override { inner_->hold(std::move(state)); }
  void post(std::function<void()> fn) override { inner_->post(std::move(fn)); }
  void post_after(std::chrono::milliseconds delay, std::function<void()> fn) override {
    inner_->post_after(delay, std::move(fn));
  }

 private:
  std::shared_ptr<Responder> inner_;
  const std::vector<Header>* headers_;  // the router's, which outlives every exchange
};

}  // namespace

std::string_view HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k == name) return v;
  }
  return {};
}

bool HttpRequest::has_header(std::string_view name) const {
  return std::any_of(headers.begin(), headers.end(), [&](const Header& h) { return h.first == name; });
}

void Router::add(std::string method, std::string pattern, Handler handler) {
  routes_.push_back(Route{std::move(method), split_path(pattern), std::move(handler)});
}

bool Router::match(const Route& r, std::string_view path, std::vector<std::string>* params) {
  std::vector<std::string> segs = split_path(path);
  if (segs.size() != r.segments.size()) return false;
  params->clear();
  for (size_t i = 0; i < segs.size(); ++i) {
    if (is_capture(r.segments[i])) {
      params->push_back(segs[i]);
    } else if (segs[i] != r.segments[i]) {
      return false;
    }
  }
  return true;
}

void Router::dispatch(HttpRequest& request, const std::shared_ptr<Responder>& plain_responder) const {
  const std::shared_ptr<Responder> responder =
      common_headers_.empty() ? plain_responder
                              : std::make_shared<CommonHeadersResponder>(plain_responder, &common_headers_);
  bool path_known = false;
  std::vector<std::string> params;
  const Route* head_fallback = nullptr;
  for (const Route& r : routes_) {
    if (!match(r, request.path, &params)) continue;
    path_known = true;
    if (r.method == request.method) {
      request.path_params = std::move(params);
      r.handler(request, responder);
      return;
    }
    if (request.method == "HEAD" && r.method == "GET" && !head_fallback) head_fallback = &r;
  }
  if (head_fallback) {
    match(*head_fallback, request.path, &params);
    request.path_params = std::move(params);
    head_fallback->handler(request, responder);
    return;
  }
  plain_responder->send(error_response(path_known ? HttpError::kMethodNotAllowed : HttpError::kNotFound, request));
}

HttpResponse Router::error_response(HttpError error, const HttpRequest& request) const {
  if (error_formatter_) {
    HttpResponse r = error_formatter_(error, request);
    add_headers(r, common_headers_);
    return r;
  }
  HttpResponse r;
  add_headers(r, common_headers_);
  switch (error) {
    case HttpError::kBadRequest: r.status = 400; break;
    case HttpError::kNotFound: r.status = 404; break;
    case HttpError::kMethodNotAllowed: r.status = 405; break;
    case HttpError::kBodyTooLarge: r.status = 413; break;
    case HttpError::kHeadersTooLarge: r.status = 431; break;
    case HttpError::kInternal: r.status = 500; break;
  }
  r.body = "{\"error\":{\"status\":" + std::to_string(r.status) + "}}";
  return r;
}

std::string Router::stream_error_event(HttpError error, const HttpRequest& request) const {
  if (stream_error_formatter_) return stream_error_formatter_(error, request);
  const int status = error == HttpError::kInternal ? 500 : 400;
  return "event: error\ndata: {\"error\":{\"status\":" + std::to_string(status) + "}}\n\n";
}

}  // namespace zl::http
