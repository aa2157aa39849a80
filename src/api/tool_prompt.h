// Tools on the prompt side, in each model family's own format (the output
// side is api/tool_calls.h). The texts follow the families' published chat
// templates (the Jinja in the GGUFs; Qwen2.5/Qwen3 and Llama 3.1/3.2):
//
//   Hermes (ChatML: Qwen2.5, Qwen3, SmolLM3)
//     system turn: [system text + "\n\n"] + hermes_tools_section()
//     assistant turn with calls: text, then per call (newline-separated)
//       <tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>
//     tool results: one user turn per run of consecutive results,
//       <tool_response>\n…\n</tool_response> joined by "\n"
//   Llama 3 JSON (Llama 3.1/3.2/3.3 custom tools)
//     system turn: llama3_system_head() + system text
//     the first user turn starts with llama3_tools_preamble(): the
//       instruction and the tools as indented JSON (in the system turn
//       instead when the conversation does not start with a user turn)
//     assistant turn with calls: {"name": "f", "parameters": {"a": 1}}
//       (several joined by "; "); the turn's text is not rendered, as in
//       Meta's template, which has no text beside a call
//     tool results: an ipython turn each, content as sent (Meta's Jinja
//       quotes a string result as JSON, a quirk of `is iterable`; Meta's
//       prompt-format guide shows it raw)
//   The system head carries the template's own default date: a fixed date
//   keeps the prompt, and its cached prefix, the same from day to day.
// JSON in the prompt is written as Python's json.dumps writes it (the
// templates' tojson): ", " and ": " separators, or indent=4 for Llama's tools.
//
// Thread-safe (pure functions).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "api/chat.h"
#include "api/tool_calls.h"
#include "tokenizer/chat_template.h"

namespace boost::json {
class value;
}

namespace zl::api {

// The syntax a template family's models were trained on; kNone for families
// without native tool calling (they keep the generic rendering, no parsing).
ToolSyntax tool_syntax_for(ChatTemplateKind kind);

// What a request does with tools, decided once from the request and the
// model's syntax; rendering and output parsing both follow it.
struct ToolPlan {
  // kNone: no tools offered natively (none given, tool_choice "none", or a
  // family without native syntax); the output is not parsed.
  ToolSyntax syntax = ToolSyntax::kNone;
  std::vector<std::string> names;  // the callable tools
  // The start of the answer, rendered into the prompt as an assistant
  // prefill and fed to the parser as its seed: tool_choice "any" opens a
  // call (the model picks the name), "tool:X" opens a call to X (the model
  // writes the arguments). Empty for "auto", and when the request has a
  // prefill of its own (continue_final_message). It ends without a space
  // (`"arguments":`) so the model's next token is the usual ` {`.
  // The block syntaxes (api/tool_formats.h) prefill their opener alone
  // ([TOOL_CALLS], "[", <tool_call>, …) for both: the model writes the
  // name, which the grammar keeps to the named tool.
  std::string prefill;
  // ChatRequest::parallel_tool_calls false: the first complete call ends the
  // answer (ToolParserOptions::single_call) and the generation.
  bool single_call = false;
  // Qwen3-Coder XML: the tools' string parameters (ToolParserOptions).
  std::shared_ptr<const tool_formats::StringParams> string_params;

  bool active() const { return syntax != ToolSyntax::kNone; }
};

ToolPlan plan_tools(const ChatRequest& chat, ToolSyntax native);

// JSON as Python's json.dumps(v, ensure_ascii=False[, indent]) writes it.
std::string python_json(const boost::json::value& v, int indent = 0);
// The same for JSON text; text that is not JSON is returned unchanged.
std::string python_json_text(std::string_view json, int indent = 0);

// Hermes: the "# Tools" section of the system turn.
std::string hermes_tools_section(const std::vector<ToolDef>& tools);
// Hermes: one call as an assistant turn writes it.
std::string hermes_call(const ToolCall& call);
// Hermes: one tool result.
std::string hermes_tool_response(std::string_view content);

// Llama 3: what the system turn starts with when tools are offered:
// "Environment: ipython\nCutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n".
std::string llama3_system_head();
// Llama 3: the instruction and tools that open the first user turn (the
// user's text follows directly).
std::string llama3_tools_preamble(const std::vector<ToolDef>& tools);
// Llama 3: the same for the system turn (no user turn to put them in).
std::string llama3_tools_system(const std::vector<ToolDef>& tools);
// Llama 3: one call as an assistant turn writes it.
std::string llama3_call(const ToolCall& call);

}  // namespace zl::api
