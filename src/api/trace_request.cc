#include "api/trace_request.h"

#include "api/errors.h"

namespace zl::api {

obs::RequestTrace request_trace(const SessionResult& r, const std::optional<obs::TraceContext>& parent,
                                const std::string& request_id, std::string_view api, const std::string& route,
                                const std::string& model, std::chrono::steady_clock::time_point t_start) {
  return obs::RequestTrace{
      .parent = parent,
      .request_id = request_id,
      .api = std::string(api),
      .route = route,
      .model = model,
      .status = r.status,
      .n_prompt_tokens = r.usage.n_prompt_tokens,
      .n_cached_tokens = r.usage.n_cached_tokens,
      .n_generated_tokens = r.usage.n_generated_tokens,
      .finish_reason = std::string(finish_reason_name(r.finish)),
      .error_reason = r.error_reason ? std::string(error_reason_name(*r.error_reason)) : "",
      .t_start = t_start,
      // The engine's own submit time when it ran, else when the session submitted.
      .t_submit = r.timings.t_submit != obs::RequestTrace::Clock::time_point{} ? r.timings.t_submit : r.t_submit,
      .t_scheduled = r.timings.t_scheduled,
      .t_first_token = r.timings.t_first_token,
      .t_last_token = r.timings.t_last_token,
      .t_end = std::chrono::steady_clock::now(),
  };
}

}  // namespace zl::api
