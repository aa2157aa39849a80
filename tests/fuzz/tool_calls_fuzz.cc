// libFuzzer target fuzz_tool_calls: the tool-call parser (api/tool_calls.h)
// on arbitrary model output, streamed and not.
// Input: byte 0 picks the syntax (bits 0-1 and 6-7: none, Hermes, Llama 3
// JSON, Hermes, then the block syntaxes of api/tool_formats.h: Mistral,
// Llama 3 pythonic, Qwen3-Coder XML, harmony, DeepSeek, Granite, Phi),
// single_call (bit 2), stream_arguments (bit 3) and tool_choice (bits 4-5:
// auto, any, the tool "f": a seed as plan_tools() makes it); byte 1 seeds
// the delta sizes (1..16 bytes); the rest is the output.
// Invariants: calls name an offered tool and carry a JSON object; a streamed
// call's deltas are never empty, always a valid JSON prefix, and
// concatenate to its arguments at kToolCallEnd; nothing follows an abort or
// the single call; the text is never longer than the output (the seed never
// shows); without a syntax the text is the output; and the answer (adjacent
// text and deltas merged) does not depend on how the output was chunked.
#include <string>
#include <vector>

#include "api/json_scan.h"
#include "api/tool_calls.h"
#include "api/tool_prompt.h"
#include "fuzz/fuzz_support.h"

namespace {

using zl::api::AnswerPart;
using Kind = AnswerPart::Kind;

const std::vector<std::string> kTools = {"get_weather", "search", "f"};

bool offered(const std::string& name) {
  for (const std::string& t : kTools) {
    if (t == name) return true;
  }
  return false;
}

bool is_json_object(const std::string& s) { return s.starts_with('{') && zl::fuzz::is_json(s); }

// Feeds `output` in deltas (sizes from `chunk_seed`; 0: one push), checks the
// streaming contract, and returns the parts with adjacent text and adjacent
// deltas merged.
std::vector<AnswerPart> run(const zl::api::ToolPlan& plan, bool stream, std::string_view output, uint8_t chunk_seed) {
  zl::api::ToolCallParser parser(plan.syntax, plan.names, plan.prefill,
                                 {.single_call = plan.single_call, .stream_arguments = stream});
  std::vector<AnswerPart> parts;
  uint32_t rng = chunk_seed;
  for (size_t i = 0; i < output.size();) {
    rng = rng * 1103515245u + 12345u;
    const size_t n = chunk_seed == 0 ? output.size() : std::min<size_t>(1 + (rng >> 16) % 16, output.size() - i);
    parser.push(output.substr(i, n), &parts);
    i += n;
  }
  parser.finish(&parts);

  std::vector<AnswerPart> merged;
  size_t text_bytes = 0;
  int n_calls = 0;
  bool in_call = false;
  std::string args;
  zl::api::JsonScanner scan;
  for (size_t i = 0; i < parts.size(); ++i) {
    const AnswerPart& p = parts[i];
    switch (p.kind) {
      case Kind::kText:
        FUZZ_CHECK(!in_call);
        text_bytes += p.text.size();
        break;
      case Kind::kToolCall:
        FUZZ_CHECK(!in_call);
        FUZZ_CHECK(offered(p.call.name));
        FUZZ_CHECK(is_json_object(p.call.arguments_json));
        ++n_calls;
        break;
      case Kind::kToolCallStart:
        FUZZ_CHECK(stream && !in_call && offered(p.call.name));
        in_call = true;
        args.clear();
        scan = zl::api::JsonScanner();
        break;
      case Kind::kToolCallDelta:
        FUZZ_CHECK(in_call && !p.text.empty());
        for (char c : p.text) FUZZ_CHECK(scan.feed(c) != zl::api::JsonScanner::Byte::kError);
        args += p.text;
        break;
      case Kind::kToolCallEnd:
        FUZZ_CHECK(in_call && offered(p.call.name));
        FUZZ_CHECK(p.call.arguments_json == args && is_json_object(args));
        in_call = false;
        ++n_calls;
        break;
      case Kind::kToolCallAbort:
        FUZZ_CHECK(in_call && i + 1 == parts.size() && parser.aborted());
        break;
      case Kind::kThinking:  // (the thinking parser's, never the tool parser's)
        break;
    }
    const bool mergeable = p.kind == Kind::kText || p.kind == Kind::kToolCallDelta;
    if (mergeable && !merged.empty() && merged.back().kind == p.kind) {
      merged.back().text += p.text;
    } else {
      merged.push_back(p);
    }
  }
  FUZZ_CHECK(!in_call || parser.aborted());
  FUZZ_CHECK(n_calls == parser.n_calls());
  FUZZ_CHECK(text_bytes <= output.size());
  if (plan.single_call) FUZZ_CHECK(n_calls <= 1);
  if (!plan.active()) FUZZ_CHECK(merged.empty() || (merged.size() == 1 && merged[0].text == output));
  return merged;
}

bool same(const std::vector<AnswerPart>& a, const std::vector<AnswerPart>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].kind != b[i].kind || a[i].text != b[i].text || a[i].call.name != b[i].call.name ||
        a[i].call.arguments_json != b[i].call.arguments_json || a[i].abort_reason != b[i].abort_reason) {
      return false;
    }
  }
  return true;
}

}  // namespace

ZL_FUZZ_TARGET(fuzz_tool_calls) {
  if (size < 2) return 0;
  using zl::api::ToolSyntax;
  const ToolSyntax syntaxes[] = {ToolSyntax::kNone,          ToolSyntax::kHermes,         ToolSyntax::kLlama3Json,
                                 ToolSyntax::kHermes,        ToolSyntax::kMistral,        ToolSyntax::kLlama3Pythonic,
                                 ToolSyntax::kQwen3CoderXml, ToolSyntax::kHarmony,        ToolSyntax::kDeepSeek,
                                 ToolSyntax::kGranite,       ToolSyntax::kPhi,            ToolSyntax::kMistral,
                                 ToolSyntax::kQwen3CoderXml, ToolSyntax::kHarmony,        ToolSyntax::kDeepSeek,
                                 ToolSyntax::kLlama3Pythonic};
  zl::api::ChatRequest chat;
  for (const std::string& name : kTools) {
    chat.tools.push_back({.name = name, .json = R"({"type":"function","function":{"name":")" + name + "\"}}"});
  }
  const char* choices[] = {"auto", "any", "tool:f", ""};
  chat.tool_choice = choices[(data[0] >> 4) & 3];
  chat.parallel_tool_calls = !(data[0] & 4);
  const zl::api::ToolPlan plan = zl::api::plan_tools(chat, syntaxes[(data[0] & 3) | ((data[0] >> 6) << 2)]);
  const bool stream = data[0] & 8;
  const std::string_view output(reinterpret_cast<const char*>(data + 2), size - 2);

  const auto chunked = run(plan, stream, output, data[1] | 1);
  const auto whole = run(plan, stream, output, 0);
  FUZZ_CHECK(same(chunked, whole));
  return 0;
}
