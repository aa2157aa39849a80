#include "api/template_vars.h"

#include <array>

#include "api/json_fields.h"
#include "core/json_text.h"

namespace zl::api {
namespace json = boost::json;

bool is_reserved_template_var(std::string_view name) {
  static constexpr std::array<std::string_view, 12> kReserved = {
      "messages",  "tools",           "add_generation_prompt", "bos_token", "eos_token", "date_string",
      "datetime",  "raise_exception", "strftime_now",          "range",     "namespace", "dict"};
  for (std::string_view r : kReserved) {
    if (name == r) return true;
  }
  return false;
}

void parse_template_vars(const json::object& o, std::string_view effort, ChatRequest* r) {
  json::object vars;
  if (const auto* f = find_field(o, "chat_template_kwargs")) {
    const json::object& kw = json_object(*f, "chat_template_kwargs");
    if (kw.size() > kMaxTemplateKwargs) {
      throw_field_error("chat_template_kwargs", "must have at most " + std::to_string(kMaxTemplateKwargs) + " keys",
                        ErrorReason::kOutOfRange);
    }
    for (const auto& [k, v] : kw) {
      const std::string key(k);
      if (key.empty() || key.size() > kMaxTemplateKwargKeyBytes) {
        throw_field_error("chat_template_kwargs",
                          "keys must be 1 to " + std::to_string(kMaxTemplateKwargKeyBytes) + " bytes long",
                          ErrorReason::kInvalidValue);
      }
      if (is_reserved_template_var(key)) {
        throw_field_error("chat_template_kwargs." + key,
                          "'" + key + "' is set by the server from the request's own fields and cannot be overridden",
                          ErrorReason::kInvalidValue);
      }
      if (key != "enable_thinking" && key != "thinking") vars[k] = v;
    }
    // The thinking switch (the context carries it as both names).
    if (const auto* t = find_field(kw, "thinking")) r->thinking.enabled = json_bool(*t, "chat_template_kwargs.thinking");
    if (const auto* e = find_field(kw, "enable_thinking")) {
      r->thinking.enabled = json_bool(*e, "chat_template_kwargs.enable_thinking");
    }
  }
  if (!effort.empty() && !vars.contains("reasoning_effort")) vars["reasoning_effort"] = effort;
  r->template_vars_json = vars.empty() ? std::string() : json_text(vars);
}

}  // namespace zl::api
