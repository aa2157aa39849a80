// W3C Trace Context (https://www.w3.org/TR/trace-context/): the `traceparent`
// header that lets the engine's spans join a caller's trace, and the ids of
// OTLP spans as lowercase hex.
//
//   traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
//                version-trace id (32 hex)-parent span id (16 hex)-flags
//
// Only version 00 is honoured, with exactly that shape; an id of all zeros,
// uppercase hex, another version or any other deviation makes the header
// invalid, and an invalid header is ignored (the request starts a new trace),
// as the specification asks of a receiver. Pure functions, thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace zl::obs {

struct TraceContext {
  std::string trace_id;        // 32 lowercase hex digits, not all zero
  std::string parent_span_id;  // 16 lowercase hex digits, not all zero; empty: a root span
  bool sampled = true;         // flags bit 0 of the incoming header
};

// The caller's context, or nullopt for an absent or invalid header.
std::optional<TraceContext> parse_traceparent(std::string_view header);

// Fresh random ids (core/random_id.h: distinct within the process, never all zero).
std::string new_trace_id();  // 32 hex digits
std::string new_span_id();   // 16 hex digits

}  // namespace zl::obs
