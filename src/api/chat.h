// The API-neutral chat request: what api/anthropic and api/openai parse their
// JSON into, before the prompt is rendered and tokenized (PromptCodec) and
// turned into an engine Request (api/generation.h).
#pragma once

#include <cstdint>
#include <memory>
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

// A thinking block of an assistant turn sent back in the history (Anthropic
// thinking / redacted_thinking, OpenAI reasoning_content), in the turn's
// order. Whether and how a block is rendered is the chat template's business
// (api/thinking.h); context editing (api/context_edits.h) removes the blocks
// of earlier turns.
struct ThinkingBlock {
  std::string text;       // the reasoning ("" when redacted)
  std::string signature;  // as sent, opaque (Anthropic); "" from OpenAI
  bool redacted = false;  // redacted_thinking {data}: nothing the model can read
};

struct ChatMessage {
  std::string role;     // "system", "user", "assistant", "tool"
  std::string content;  // text blocks concatenated
  std::vector<ToolCall> tool_calls;  // assistant turns
  std::string tool_call_id;          // role "tool": the call it answers
  std::vector<ThinkingBlock> thinking;  // assistant turns, in order
  // The client's messages[i] this came from (an Anthropic turn with
  // tool_result blocks gives several); -1: not from `messages` (the
  // top-level system prompt). Truncation (api/context_policy.h) never
  // splits one client message and counts what it drops in them.
  int32_t source_index = -1;
};

// Reasoning switches of a request (Anthropic `thinking`, OpenAI
// chat_template_kwargs.enable_thinking / reasoning_effort "none").
struct ThinkingOptions {
  // nullopt: the template's default (thinking models think); false: the
  // template's switch off (Qwen3's empty <think></think>) where it has one.
  std::optional<bool> enabled;
  // Anthropic thinking.budget_tokens: the engine closes the thought after
  // this many thinking tokens (StopParams::span_budget). nullopt: no budget.
  std::optional<int32_t> budget_tokens;
};

// Anthropic context editing (`context_management.edits`, parsed by
// api/context_edits.h, applied there before the prompt is prepared).
struct ClearToolUsesEdit {
  enum class Trigger { kInputTokens, kToolUses };
  Trigger trigger = Trigger::kInputTokens;
  int64_t trigger_value = 100000;  // the edit applies when the prompt exceeds this
  int64_t keep_tool_uses = 3;      // the most recent tool uses are never cleared
  int64_t clear_at_least = 0;      // input tokens; 0: not set
  bool clear_all_inputs = false;   // clear_tool_inputs: true
  std::vector<std::string> clear_input_tools;  // clear_tool_inputs: [names]
  std::vector<std::string> exclude_tools;      // never cleared
};
struct ClearThinkingEdit {
  std::optional<int64_t> keep_turns = 1;  // nullopt: "all"
};
// Either edit or both; when both, thinking is cleared first (the order the
// API requires the client to send them in).
struct ContextManagement {
  std::optional<ClearThinkingEdit> clear_thinking;
  std::optional<ClearToolUsesEdit> clear_tool_uses;
};

// Structured output (api/structured_output.h): the answer is one JSON value
// (OpenAI response_format json_object / json_schema, Anthropic output_format,
// vLLM guided_json, llama-server json_schema), text matching a regex (vLLM
// guided_regex), one of several strings (vLLM guided_choice) or text a GBNF
// grammar matches (llama-server grammar, vLLM guided_grammar).
struct ResponseFormat {
  enum class Kind { kJsonObject, kJsonSchema, kRegex, kChoice, kGrammar };
  Kind kind = Kind::kJsonObject;
  std::string name;         // json_schema.name (informative)
  // kJsonSchema: the schema as sent (compact JSON); kRegex: the pattern;
  // kChoice: the choices as a JSON array; kGrammar: the GBNF text.
  std::string schema_json;
  // Compiled once while parsing (a bad schema is a 400 there).
  std::shared_ptr<const grammar::Grammar> grammar;
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
  // false: the prompt ends after the last message, no assistant turn opened
  // (vLLM's add_generation_prompt; /tokenize only: a generation always
  // opens one).
  bool add_generation_prompt = true;
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
  // A raw prompt sent as token ids (vLLM, llama-server, lm-eval's local-completions): the
  // prompt as given, no BOS added; `prompt` then holds their text (PromptCodec::decode_prompt,
  // set by the service before the guard sees it).
  std::optional<std::vector<int32_t>> prompt_ids;
  // /v1/completions with several prompts (an array of strings or of token-id arrays): the
  // ones after the first (which is `prompt` / `prompt_ids`), in order. Each is answered as
  // `n` choices of its own (api/fan_out.h).
  struct RawPrompt {
    std::string text;
    std::optional<std::vector<int32_t>> ids;
  };
  std::vector<RawPrompt> more_prompts;
  // OpenAI `n`: choices per prompt, each its own generation (1: one answer, as without it).
  int32_t n = 1;

  std::optional<int64_t> max_tokens;  // nullopt: up to the end of the context window
  SamplingParams sampling;
  std::vector<std::string> stop;
  // vLLM's extensions on both OpenAI routes (StopParams): extra token ids that end the
  // output, EOS/EOT not ending it, and a minimum output length before any of them may.
  std::vector<int32_t> stop_token_ids;
  bool ignore_eos = false;
  int32_t min_tokens = 0;
  // OpenAI logprobs (Request::logprobs): -1 none, else the alternatives per token
  // (chat top_logprobs, completions logprobs).
  int32_t logprobs = -1;
  // /v1/completions echo: the answer's text begins with the prompt's, and with logprobs
  // (prompt_logprobs = logprobs) its entries begin with the prompt tokens' (Request::
  // prompt_logprobs). max_tokens may then be 0: the prompt alone, nothing generated.
  bool echo = false;
  int32_t prompt_logprobs = -1;
  bool stream = false;
  bool include_usage = false;         // OpenAI stream_options.include_usage
  std::optional<http::StreamShape> shape;  // stream_options (stream only)
  std::string user;                   // metadata.user_id / user
  ThinkingOptions thinking;
  // Extra variables for a Jinja chat template (api/template_vars.h):
  // chat_template_kwargs and the reasoning effort, as one JSON object's
  // compact text; "" when none.
  std::string template_vars_json;
  // Anthropic context_management; nullopt when the request has none.
  std::optional<ContextManagement> context_management;
  std::optional<ContextPolicy> context_policy;  // the body's `context_policy`; none: the server's
  std::optional<ResponseFormat> response_format;  // none: free text
  std::optional<SpeculativeParams> speculative;  // the body's `speculative` (api/speculative.h); none: the server's
};

}  // namespace zl::api
