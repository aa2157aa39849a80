// What a finished generation tells the trace exporter (obs/trace_exporter.h):
// the session's result and the engine's timings (engine/request.h Timings,
// carried in SessionResult from the last event) as an obs::RequestTrace.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "api/generation.h"
#include "obs/trace_exporter.h"

namespace zl::api {

// `t_start`: the request's arrival; the answer's end is now.
obs::RequestTrace request_trace(const SessionResult& r, const std::optional<obs::TraceContext>& parent,
                                const std::string& request_id, std::string_view api, const std::string& route,
                                const std::string& model, std::chrono::steady_clock::time_point t_start);

}  // namespace zl::api
