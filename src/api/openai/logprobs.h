// OpenAI's logprobs objects from the engine's entries (Event::logprobs).
//
// Each token is written as its text and its bytes: `token` is the piece made valid UTF-8
// (a piece that is part of a character has U+FFFD in its place), `bytes` the exact piece.
// JSON has no -inf: a logprob below -9999 (a banned or -inf logit) is written as -9999.0,
// as vLLM does.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "engine/request.h"

namespace zl::api::openai {

// A logprob as a JSON number: the shortest text that reads back as the same float.
void append_logprob(std::string& out, float logprob);

// Chat: the array of `logprobs.content`, one object per token:
// {"token","logprob","bytes","top_logprobs":[{"token","logprob","bytes"}…]}.
void append_chat_logprobs(std::string& out, std::span<const TokenLogprobs> entries);

// Completions (the legacy format):
// {"tokens":[…],"token_logprobs":[…],"top_logprobs":[{token: logprob}…],"text_offset":[…]}.
// A top_logprobs object holds the chosen token, then the alternatives (a text seen already in
// the object is left out: JSON keys are unique). text_offset: where each token's text begins,
// in characters of the answer's tokens so far; *text_offset carries it from call to call. An
// entry without a value (the first prompt token's, with echo: logprob NaN) is null in
// token_logprobs and in top_logprobs, as on OpenAI and vLLM.
void append_completion_logprobs(std::string& out, std::span<const TokenLogprobs> entries, int64_t* text_offset);

}  // namespace zl::api::openai
