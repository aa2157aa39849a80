#include "http/request_parser.h"

#include <boost/beast/http/error.hpp>
#include <cctype>

namespace zl::http {

namespace bhttp = boost::beast::http;

std::optional<HttpError> feed_parser(BeastRequestParser& parser, boost::beast::flat_buffer& buf) {
  // The parser takes a complete header at once (it returns need_more
  // until the whole header is buffered), then the body as it comes.
  while (buf.size() > 0 && !parser.is_done()) {
    boost::system::error_code ec;
    const size_t used = parser.put(buf.data(), ec);
    buf.consume(used);
    if (ec == bhttp::error::need_more) break;
    if (ec == bhttp::error::body_limit) return HttpError::kBodyTooLarge;
    if (ec == bhttp::error::header_limit) return HttpError::kHeadersTooLarge;
    if (ec) return HttpError::kBadRequest;
    if (used == 0) break;
  }
  return std::nullopt;
}

HttpRequest to_request(BeastRequest&& m) {
  HttpRequest req;
  req.method = std::string(m.method_string());
  req.target = std::string(m.target());
  const size_t q = req.target.find('?');
  req.path = req.target.substr(0, q);
  if (q != std::string::npos) req.query = req.target.substr(q + 1);
  req.version = m.version() == 10 ? 10 : 11;
  req.headers.reserve(16);
  for (const auto& f : m) {
    std::string name(f.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    req.headers.emplace_back(std::move(name), std::string(f.value()));
  }
  req.body = std::move(m.body());
  return req;
}

}  // namespace zl::http
