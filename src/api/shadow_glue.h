// The API side of shadow traffic (rollout/shadow.h) and of request
// recording (rollout/request_recorder.h): which generation requests are
// mirrored, and the primary's answer as its client got it, tapped from the
// session (SessionOptions::on_event / on_done, chained after those set
// before). Runs on the I/O thread; costs a copy of the body and of the
// answer text (bounded by ShadowConfig::max_text_bytes) for a sampled request.
#pragma once

#include <string_view>

#include "api/generation.h"
#include "api/metrics.h"  // ApiKind
#include "http/message.h"
#include "rollout/shadow.h"

namespace zl::api {

// Mirrors the request to `shadow` when it is sampled (by `user`; a request
// that is itself a shadow copy, header x-engine-shadow, never is). Call last
// before GenerationSession::start: opts.on_event and opts.on_done are final.
void mirror_to_shadow(rollout::Shadow& shadow, const http::HttpRequest& req, std::string_view route,
                      std::string_view user, ApiKind api, SessionOptions& opts);

}  // namespace zl::api
