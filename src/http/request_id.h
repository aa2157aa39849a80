// Request ids: a client's (or a gateway's) id is kept so that one id follows
// a request through every hop; anything else gets a fresh "req_…" id.
//
// Accepted: the first `x-request-id`, else the first `request-id` header,
// when it has 1..kMaxRequestIdChars characters of [A-Za-z0-9._:-]. An
// invalid one (too long, empty, other characters: it would reach response
// headers and log lines) is replaced silently, not an error.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "http/message.h"

namespace zl::http {

inline constexpr size_t kMaxRequestIdChars = 128;

bool is_valid_request_id(std::string_view id);

// The incoming id when valid, else a fresh one. `headers`: names lowercased.
// Thread-safe; O(number of headers).
std::string request_id_for(const std::vector<Header>& headers);

}  // namespace zl::http
