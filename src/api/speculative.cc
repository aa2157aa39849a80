#include "api/speculative.h"

#include "api/json_fields.h"

namespace zl::api {

void parse_speculative_field(const boost::json::object& body, ChatRequest* chat) {
  const boost::json::value* f = find_field(body, "speculative");
  if (!f) return;
  SpeculativeParams p;
  if (f->is_bool()) {
    p.enabled = f->get_bool();
  } else if (f->is_object()) {
    // Members absent or null are not set; an object that sets none ({} or all null) is not set
    // at all: the server's setting. {"draft_max": N} alone means on, at most N.
    bool any = false;
    for (const auto& [key, value] : f->get_object()) {
      if (key != "enabled" && key != "draft_max") {
        throw_field_error("speculative." + std::string(key), "unknown field (expected enabled, draft_max)",
                          ErrorReason::kInvalidValue);
      }
      if (value.is_null()) continue;
      any = true;
      if (key == "enabled") {
        p.enabled = json_bool(value, "speculative.enabled");
      } else if (key == "draft_max") {
        p.draft_max = static_cast<int32_t>(json_int(value, "speculative.draft_max", 1, kMaxSpecDraft));
      }
    }
    if (!any) return;
  } else {
    throw_field_error("speculative", "must be true, false or an object {\"draft_max\": N}",
                      ErrorReason::kInvalidValue);
  }
  chat->speculative = p;
}

}  // namespace zl::api
