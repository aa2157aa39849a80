#include "web/site.h"

#include <cstdlib>

#include "core/check.h"

namespace zl::web {
namespace {

// The page loads its own script and style, draws on canvas, and fetches only
// from its own origin (/v1/messages, /metrics). Nothing inline, no eval, no
// framing, no form posts elsewhere.
constexpr std::string_view kCsp =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

// Whether an If-None-Match value (a list of entity tags, or *) names `etag`.
// Weak comparison, as RFC 9110 §13.1.2 asks for If-None-Match.
bool etag_matches(std::string_view list, std::string_view etag) {
  size_t i = 0;
  while (i < list.size()) {
    while (i < list.size() && (list[i] == ' ' || list[i] == '\t' || list[i] == ',')) ++i;
    if (i >= list.size()) break;
    size_t end = list.find(',', i);
    if (end == std::string_view::npos) end = list.size();
    std::string_view tag = list.substr(i, end - i);
    while (!tag.empty() && (tag.back() == ' ' || tag.back() == '\t')) tag.remove_suffix(1);
    if (tag == "*") return true;
    if (tag.starts_with("W/")) tag.remove_prefix(2);
    if (tag == etag) return true;
    i = end;
  }
  return false;
}

}  // namespace

const Asset* find_asset(std::string_view name) {
  for (const Asset& a : embedded_assets()) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

const Asset& index_page() {
  const Asset* a = find_asset("index.html");
  CHECK(a != nullptr) << "the embedded web page has no index.html (cmake/web_embed.cmake)";
  return *a;
}

bool wants_html(std::string_view accept) {
  // Browsers put text/html in Accept for a navigation; nothing else does by default.
  for (size_t i = accept.find("text/html"); i != std::string_view::npos; i = accept.find("text/html", i + 1)) {
    // "text/html;q=0" refuses it.
    std::string_view rest = accept.substr(i + 9);
    rest = rest.substr(0, rest.find(','));
    size_t q = rest.find("q=");
    if (q == std::string_view::npos || std::strtod(std::string(rest.substr(q + 2)).c_str(), nullptr) > 0) return true;
  }
  return false;
}

void add_security_headers(http::HttpResponse& r) {
  r.headers.emplace_back("Content-Security-Policy", std::string(kCsp));
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
  r.headers.emplace_back("X-Frame-Options", "DENY");
}

http::HttpResponse asset_response(const Asset& asset, std::string_view if_none_match, bool immutable) {
  http::HttpResponse r;
  r.content_type = std::string(asset.content_type);
  r.headers.emplace_back("ETag", std::string(asset.etag));
  r.headers.emplace_back("Cache-Control", immutable ? "public, max-age=31536000, immutable" : "no-cache");
  add_security_headers(r);
  if (!if_none_match.empty() && etag_matches(if_none_match, asset.etag)) {
    r.status = 304;
    r.content_type.clear();  // a 304 has no body to describe
    return r;
  }
  r.status = 200;
  r.body = std::string(asset.body);
  return r;
}

}  // namespace zl::web
