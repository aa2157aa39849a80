#include "api/server_timing.h"

#include <algorithm>
#include <cstdio>

namespace zl::api {

void ServerTiming::add_engine(const Timings& t, bool with_decode) {
  using TP = Timings::Clock::time_point;
  if (t.t_scheduled == TP{}) return;
  queue_ms = t.t_queued_ms();
  if (t.t_first_token == TP{} && t.t_prefilled == TP{}) return;
  prefill_ms = t.t_prefill_ms();
  if (with_decode && t.t_first_token != TP{}) decode_ms = t.t_decode_ms();
}

std::string ServerTiming::header_value() const {
  std::string out;
  auto add = [&](const char* name, const std::optional<double>& ms) {
    if (!ms) return;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%s%s;dur=%.3f", out.empty() ? "" : ", ", name, std::max(0.0, *ms));
    out += buf;
  };
  add("parse", parse_ms);
  add("tokenize", tokenize_ms);
  add("queue", queue_ms);
  add("prefill", prefill_ms);
  add("decode", decode_ms);
  return out;
}

}  // namespace zl::api
