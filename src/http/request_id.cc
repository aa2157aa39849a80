#include "http/request_id.h"

#include "core/random_id.h"

namespace zl::http {

bool is_valid_request_id(std::string_view id) {
  if (id.empty() || id.size() > kMaxRequestIdChars) return false;
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == ':' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string request_id_for(const std::vector<Header>& headers) {
  for (std::string_view name : {"x-request-id", "request-id"}) {
    for (const auto& [k, v] : headers) {
      if (k != name) continue;
      if (is_valid_request_id(v)) return v;
      break;  // the first of that name decides; an invalid one falls through to the next name
    }
  }
  return random_id("req_");
}

}  // namespace zl::http
