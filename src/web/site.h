// The web playground and dashboard (web/), built into the binary: the page at
// `/` and its assets under `/ui/`. The files are byte arrays generated at
// build time (cmake/web_embed.cmake) from web/dist, or from a fresh build of
// web/src when web/node_modules is present. No file is read at run time.
//
// What the answers carry: a strict Content-Security-Policy (the page loads
// only its own script and style and talks only to its own origin), an ETag
// on every file (If-None-Match answers 304), and for the hashed asset names
// (app.<hash>.js) a year-long immutable cache; the page itself is
// revalidated on every load (no-cache), so a new binary's page is seen at once.
//
// Thread-safe: everything here is immutable after static initialization.
#pragma once

#include <span>
#include <string_view>

#include "http/message.h"  // HttpResponse

namespace zl::web {

struct Asset {
  std::string_view name;          // file name under /ui/ ("index.html" is the page at /)
  std::string_view content_type;  // with charset for text
  std::string_view etag;          // quoted strong validator, e.g. "\"3f2a…\""
  std::string_view body;
};

// Every embedded file (generated code).
std::span<const Asset> embedded_assets();

// The file of that name, or null.
const Asset* find_asset(std::string_view name);

// The page at `/`.
const Asset& index_page();

// Whether a request with this Accept header wants the HTML page: browsers
// send text/html first; curl (*/*), probes and SDKs do not and keep getting
// the plain-text banner at `/`.
bool wants_html(std::string_view accept);

// The answer for GET or HEAD of `asset`: 200 with the body, or 304 without
// one when `if_none_match` names its ETag. `immutable`: a hashed name,
// cached for a year; otherwise revalidated each time.
http::HttpResponse asset_response(const Asset& asset, std::string_view if_none_match, bool immutable);

// The headers every answer of the page carries (CSP and friends).
void add_security_headers(http::HttpResponse& r);

}  // namespace zl::web
