// Template variables a request sets (llama.cpp / vLLM `chat_template_kwargs`,
// OpenAI `reasoning_effort`, Anthropic `output_config.effort`): parsed into
// ChatRequest::template_vars_json, which api/jinja_codec.h puts into the
// Jinja template's context next to messages, tools, … (README "Chat templates").
//
// Rules:
//   - chat_template_kwargs must be a JSON object (else a 400 naming it);
//     every key becomes a template variable with its JSON value (strings are
//     request input, as message text is: never parsed for special tokens).
//   - enable_thinking / thinking must be booleans: they are the request's
//     thinking switch (ChatRequest::thinking.enabled), which the context
//     already carries under both names; enable_thinking wins when both are set.
//   - Keys naming the context's own variables (messages, tools,
//     add_generation_prompt, bos_token, eos_token, date_string, datetime)
//     or the template's builtins (raise_exception, strftime_now, range,
//     namespace, dict) are a 400: the conversation goes through the API's
//     fields only, where it is validated, screened, counted and truncated.
//   - At most kMaxTemplateKwargs keys of at most kMaxTemplateKwargKeyBytes;
//     the values are bounded by the body size limit and the template's
//     render limits.
//   - `effort` (the API's reasoning effort, "" none) is the variable
//     reasoning_effort unless chat_template_kwargs sets it.
#pragma once

#include <boost/json/object.hpp>
#include <string_view>

#include "api/chat.h"

namespace zl::api {

inline constexpr size_t kMaxTemplateKwargs = 256;
inline constexpr size_t kMaxTemplateKwargKeyBytes = 256;

// Reads `chat_template_kwargs` of the body `o` (absent or null: none) and
// `effort` into r->template_vars_json and r->thinking.enabled. Throws
// FieldError (api/json_fields.h) on bad input.
void parse_template_vars(const boost::json::object& o, std::string_view effort, ChatRequest* r);

// Whether `name` is a variable the context sets itself (see above).
bool is_reserved_template_var(std::string_view name);

}  // namespace zl::api
