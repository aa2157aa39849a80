// The `speculative` extension field of both APIs (Anthropic Messages, OpenAI chat and
// completions): whether this request uses speculative decoding (engine.h), and its draft length.
//   "speculative": true | false             on / off, the server's draft length
//   "speculative": {"draft_max": N}         on, at most N draft tokens a step (1..32)
//   "speculative": {"enabled": B, "draft_max": N}
//   "speculative": {"enabled": B}          on / off, the server's draft length
// Absent, null, {} or an object whose members are all null: the server's --speculative (a null
// member counts as absent). Anything else is a 400 invalid_request_error
// (reason invalid_value) naming the field.
#pragma once

#include <boost/json/object.hpp>

#include "api/chat.h"

namespace zl::api {

// Sets chat->speculative from body["speculative"]; throws a FieldError (json_fields.h) when invalid.
void parse_speculative_field(const boost::json::object& body, ChatRequest* chat);

}  // namespace zl::api
