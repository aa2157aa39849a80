// `/` and `/ui/{file}`: the web playground (web/site.h) for browsers, the
// plain-text banner for everything else. No auth: the page holds no data;
// what it fetches (/v1/messages, /metrics) is authorized as usual, with the
// key the user types into it.
#include "api/service.h"
#include "web/site.h"

namespace zl::api {

void ApiService::handle_root(http::HttpRequest& req, std::shared_ptr<http::Responder> res) {
  http::HttpResponse r;
  if (config_.ui && web::wants_html(req.header("accept"))) {
    r = web::asset_response(web::index_page(), req.header("if-none-match"), /*immutable=*/false);
  } else {
    // curl, probes and load balancers: what `GET /` always answered.
    r = http::HttpResponse{.status = 200, .content_type = "text/plain", .headers = {}, .body = "zerolayer\n"};
  }
  if (config_.ui) r.headers.emplace_back("Vary", "Accept");
  record(req, "/", r.status);
  res->send(std::move(r));
}

void ApiService::handle_ui_asset(http::HttpRequest& req, std::shared_ptr<http::Responder> res) {
  const std::string& name = req.path_params.empty() ? std::string() : req.path_params[0];
  const web::Asset* asset = name == "index.html" ? nullptr : web::find_asset(name);
  if (!asset) {
    send_error(req, *res, "/ui", ApiError{.reason = ErrorReason::kNotFound, .message = "no such file: /ui/" + name});
    return;
  }
  // Every name but the page's own carries a hash of its content.
  http::HttpResponse r = web::asset_response(*asset, req.header("if-none-match"), /*immutable=*/true);
  record(req, "/ui", r.status);
  res->send(std::move(r));
}

}  // namespace zl::api
