// The Server-Timing response header (W3C Server Timing): where the server
// spent a request's time, in milliseconds, per phase:
//
//   parse     the request body parsed into a ChatRequest (API layer)
//   tokenize  chat template + tokenizer + context checks (prepare_request)
//   queue     engine.submit -> first scheduled           (Timings::t_queued_ms)
//   prefill   scheduled -> first token (validate: -> prompt computed)
//   decode    first token -> last token
//
// e.g. `Server-Timing: parse;dur=0.120, tokenize;dur=0.300, queue;dur=0.010,
// prefill;dur=4.200, decode;dur=55.100`. Only known phases are listed: a
// stream's head goes out before decode ends (and, committed early by a
// keep-alive, before the first token), an error before the engine ran has
// no engine phases. Phases are consecutive and do not overlap, so their sum
// is at most the request's wall time.
#pragma once

#include <optional>
#include <string>

#include "engine/request.h"

namespace zl::api {

struct ServerTiming {
  std::optional<double> parse_ms;
  std::optional<double> tokenize_ms;
  std::optional<double> queue_ms;
  std::optional<double> prefill_ms;
  std::optional<double> decode_ms;

  // Adds the engine's phases that `t` has reached: queue once scheduled,
  // prefill once the first token came (or the prompt was computed), decode
  // when `with_decode` and a token came.
  void add_engine(const Timings& t, bool with_decode);
  // The header value ("" when no phase is known). Durations are clamped at
  // 0 and printed with 3 decimals.
  std::string header_value() const;
};

}  // namespace zl::api
