// The API-neutral chat request: what api/anthropic and api/openai parse their
// JSON into, before the prompt is rendered and tokenized (PromptCodec) and
// turned into an engine Request (api/generation.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/request.h"
#include "http/stream_shaper.h"

namespace zl::api {

struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments_json;  // the input object, serialized
};

// A tool the client offers, in the form OpenAI sends and chat templates
// render it.
struct ToolDef {
  std::string name;
  // {"type":"function","function":{"name":…,"description":…,"parameters":{…}}}
  // (compact JSON; an Anthropic tool's input_schema is its "parameters").
  std::string json;
};

struct ChatMessage {
  std::string role;     // "system", "user", "assistant", "tool"
  std::string content;  // text blocks concatenated
  std::vector<ToolCall> tool_calls;  // assistant turns
  std::string tool_call_id;          // role "tool": the call it answers
  // The client's messages[i] this came from (an Anthropic turn with
  // tool_result blocks gives several); -1: not from `messages` (the
  // top-level system prompt). Truncation (api/context_policy.h) never
  // splits one client message and counts what it drops in them.
  int32_t source_index = -1;
};

// What to do when the prompt and the reserved output do not fit the window
// (api/context_policy.h): --context-policy, or the body's `context_policy`.
enum class ContextPolicy { kError, kDropOldest, kMiddleOut };

struct ChatRequest {
  std::string model;
  // In order. A top-level system prompt comes first as role "system";
  // role "system" entries inside the conversation stay where they were sent.
  std::vector<ChatMessage> messages;
  // The last message is an assistant turn to continue (prefill): the prompt
  // ends inside that turn, and the answer is the continuation only.
  bool continue_final_message = false;
  std::string tools_json;   // the tools array as sent (JSON), empty when none
  std::vector<ToolDef> tools;  // the same tools, one form for both APIs
  // "", "auto", "any", "none", or "tool:<name>" (<name> is one of `tools`).
  // OpenAI's "required" is "any", its {"type":"function",…} is "tool:<name>".
  std::string tool_choice;
  // false: at most one tool call, the first one ends the answer (Anthropic
  // tool_choice.disable_parallel_tool_use: true, OpenAI parallel_tool_calls: false).
  bool parallel_tool_calls = true;

  // OpenAI /v1/completions: a raw prompt, no chat template.
  bool raw_prompt = false;
  std::string prompt;

  std::optional<int64_t> max_tokens;  // nullopt: up to the end of the context window
  SamplingParams sampling;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;         // OpenAI stream_options.include_usage
  std::optional<http::StreamShape> shape;  // stream_options (stream only)
  std::string user;                   // metadata.user_id / user
  std::optional<ContextPolicy> context_policy;  // the body's `context_policy`; none: the server's
};

}  // namespace zl::api
