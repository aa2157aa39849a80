#include "obs/trace_context.h"

#include <cstdint>
#include <cstdio>

#include "core/random_id.h"

namespace zl::obs {
namespace {

// True for n lowercase hex digits, not all '0'.
bool valid_hex_id(std::string_view s, size_t n) {
  if (s.size() != n) return false;
  bool non_zero = false;
  for (char c : s) {
    const bool digit = c >= '0' && c <= '9';
    if (!digit && !(c >= 'a' && c <= 'f')) return false;
    non_zero = non_zero || c != '0';
  }
  return non_zero;
}

std::string hex64() {
  uint64_t v = random_u64();
  if (v == 0) v = 1;  // an all-zero id is invalid
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

std::optional<TraceContext> parse_traceparent(std::string_view h) {
  // "00-" + 32 + "-" + 16 + "-" + 2 = 55 characters; version 00 has nothing after.
  if (h.size() != 55 || h.substr(0, 3) != "00-" || h[35] != '-' || h[52] != '-') return std::nullopt;
  const std::string_view trace_id = h.substr(3, 32);
  const std::string_view parent = h.substr(36, 16);
  const std::string_view flags = h.substr(53, 2);
  if (!valid_hex_id(trace_id, 32) || !valid_hex_id(parent, 16)) return std::nullopt;
  auto hexval = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
  const int hi = hexval(flags[0]);
  const int lo = hexval(flags[1]);
  if (hi < 0 || lo < 0) return std::nullopt;
  return TraceContext{.trace_id = std::string(trace_id),
                      .parent_span_id = std::string(parent),
                      .sampled = ((hi * 16 + lo) & 1) != 0};
}

std::string new_trace_id() { return hex64() + hex64(); }
std::string new_span_id() { return hex64(); }

}  // namespace zl::obs
