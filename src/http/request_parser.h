// The server's HTTP/1.1 request parsing apart from its sockets: server.cc
// feeds it each connection's buffered bytes; the fuzz target
// (tests/fuzz/http_fuzz.cc) feeds it arbitrary bytes. Beast types appear
// here, so only server.cc and that target include this header (the API
// layer sees message.h).
#pragma once

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <optional>

#include "http/message.h"

namespace zl::http {

using BeastRequest = boost::beast::http::request<boost::beast::http::string_body>;
using BeastRequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

// Feeds `buf` to `parser` (consuming what it takes) until the request is
// complete or more bytes are needed. The error to answer (and close on) for
// malformed HTTP, headers past the parser's header_limit, or a body past its
// body_limit; nullopt otherwise (parser.is_done() tells which). Bytes after a
// complete request stay in `buf` (a pipelined request).
std::optional<HttpError> feed_parser(BeastRequestParser& parser, boost::beast::flat_buffer& buf);

// A complete request as the API layer sees it: the target split into path
// and query, header names lowercased, the body moved out of `m`.
HttpRequest to_request(BeastRequest&& m);

}  // namespace zl::http
