// libFuzzer target fuzz_openai_request: POST /v1/chat/completions and
// /v1/completions bodies (fuzz/request_fuzz.h says what is checked).
#include "api/openai/chat_completions.h"
#include "fuzz/request_fuzz.h"

ZL_FUZZ_TARGET(fuzz_openai_request) {
  static const zl::fuzz::RequestApi api{
      .parse = zl::api::openai::parse_chat_request,
      .parse_other = zl::api::openai::parse_completion_request,
      .make_formatter = [](const zl::api::ChatRequest& chat) {
        using zl::api::openai::Kind;
        return zl::api::openai::make_formatter(chat.raw_prompt ? Kind::kCompletion : Kind::kChat, chat.model,
                                               chat.include_usage);
      }};
  return zl::fuzz::fuzz_request(api, data, size);
}
