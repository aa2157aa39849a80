// Block tool-call syntaxes (api/tool_calls.h's ToolCallParser drives them):
// a call block opens with a marker and is parsed once it is complete.
//
//   kMistral         [TOOL_CALLS][{"name": "f", "arguments": {...}}, ...]   (v0.3, Nemo)
//                    [TOOL_CALLS]f[ARGS]{...}  ([CALL_ID]id before [ARGS]
//                    allowed; Ministral 3, Devstral, Magistral), one block per call
//   kLlama3Pythonic  the answer starts with [f(a=1, b="x"), g()] (Llama 3.2/3.3
//                    pythonic, Llama 4 after <|python_start|>): Python literals
//                    (strings, numbers, True/False/None, lists, dicts)
//   kQwen3CoderXml   <tool_call><function=f><parameter=p>value</parameter>...
//                    </function></tool_call> (Qwen3-Coder, Qwen3.5); a value is
//                    JSON when it parses as a number, boolean, null, object or
//                    array, else the text (one newline trimmed at each end)
//   kHarmony         gpt-oss: <|channel|>commentary to=functions.f
//                    [<|constrain|>json]<|message|>{...}<|call|> (also
//                    `<|start|>assistant to=functions.f<|channel|>commentary …`);
//                    <|call|> may be missing at the end of the output (it is a
//                    stop token)
//   kDeepSeek        <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f
//                    ```json {...} ```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
//                    (R1), or <｜tool▁call▁begin｜>f<｜tool▁sep｜>{...}<｜tool▁call▁end｜> (V3.1)
//   kGranite         <|tool_call|>[{"name": "f", "arguments": {...}}, ...] (Granite 3.x)
//   kPhi             functools[{"name": "f", "arguments": {...}}, ...] (Phi-4-mini)
//
// A block that is not a complete, valid list of calls to offered tools is
// text, as for the other syntaxes (the same ToolFallback reasons). The calls
// of a block are emitted whole (kToolCall) as soon as the block closes, in
// both streaming modes.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "api/chat.h"

namespace zl::api {
enum class ToolSyntax;  // api/tool_calls.h
}

namespace zl::api::tool_formats {

// Whether `syntax` is one of the block syntaxes above.
bool is_block_syntax(ToolSyntax syntax);
// The markers that open a block (the first that occurs wins; at the same
// place, the longest).
const std::vector<std::string_view>& openers(ToolSyntax syntax);
// The opener a forced call's prefill opens the block with (the first of openers()).
std::string_view forced_opener(ToolSyntax syntax);
// Only at the start of the answer (kLlama3Pythonic), and the opener "[" is
// the block's first byte (kept_opener).
bool opens_at_start_only(ToolSyntax syntax);
bool kept_opener(std::string_view opener);
// A block cut by the end of the output is parsed as it is (kHarmony, whose
// <|call|> is a stop token).
bool ends_with_output(ToolSyntax syntax);

// Where a block ends, found incrementally (every byte looked at once or a
// bounded number of times).
class BlockEnd {
 public:
  enum class State { kMore, kEnd, kFail };
  explicit BlockEnd(ToolSyntax syntax) : syntax_(syntax) {}
  // `block`: the block so far (after the opener; grows between calls).
  // kEnd: end() is its length; kFail: it cannot be a call block.
  State advance(std::string_view block);
  size_t end() const { return end_; }

 private:
  // Balanced brackets from block[from]; python: '…' strings too.
  State brackets(std::string_view block, size_t from, bool python);
  State marker(std::string_view block, std::string_view close);

  ToolSyntax syntax_;
  size_t pos_ = 0;     // bytes looked at
  int phase_ = 0;      // syntax-specific
  size_t bracket_from_ = 0;
  int depth_ = 0;
  char quote_ = 0;
  bool escape_ = false;
  size_t end_ = 0;
};

struct BlockCall {
  std::string name;
  std::string arguments_json;  // a compact JSON object
};

// Per tool, the parameters whose schema is a string (type "string", or a
// const / enum of strings only). Qwen3-Coder XML writes values raw: such a
// parameter's value stays the text written ("42", "true", "null"), others
// read as JSON where they are JSON (numbers, booleans, objects), as
// Qwen's own parser converts by the schema's type.
using StringParams = std::map<std::string, std::set<std::string, std::less<>>, std::less<>>;

// The string parameters of `tools` (api/chat.h ToolDef JSON).
StringParams string_params_of(const std::vector<ToolDef>& tools);

// The calls of a complete block (the text after the opener, up to its end);
// nullopt when it is not a valid block (`bad_json`: it was not even JSON /
// the syntax's shape). `string_params` (may be null): see StringParams.
std::optional<std::vector<BlockCall>> parse_block(ToolSyntax syntax, std::string_view opener, std::string_view block,
                                                  bool* bad_json, const StringParams* string_params = nullptr);

// Python literal (pythonic calls' values) as JSON text; nullopt when not one.
std::optional<std::string> python_literal_to_json(std::string_view text);

}  // namespace zl::api::tool_formats
