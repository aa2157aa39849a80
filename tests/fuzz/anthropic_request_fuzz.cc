// libFuzzer target fuzz_anthropic_request: POST /v1/messages and
// /v1/messages/count_tokens bodies (fuzz/request_fuzz.h says what is checked).
#include "api/anthropic/messages.h"
#include "fuzz/request_fuzz.h"

ZL_FUZZ_TARGET(fuzz_anthropic_request) {
  static const zl::fuzz::RequestApi api{
      .parse = zl::api::anthropic::parse_messages_request,
      .parse_other = zl::api::anthropic::parse_count_tokens_request,
      .make_formatter = [](const zl::api::ChatRequest& chat) {
        return zl::api::anthropic::make_formatter(chat.model, "req_fuzz", !chat.tools.empty());
      }};
  return zl::fuzz::fuzz_request(api, data, size);
}
