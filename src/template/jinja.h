// A sandboxed Jinja2 interpreter for chat templates.
//
// Covers what published chat templates use, with the environment Hugging
// Face's apply_chat_template sets up (trim_blocks, lstrip_blocks, loop
// controls, `raise_exception`, `strftime_now`, tojson with json.dumps'
// separators and insertion order):
//   statements  if/elif/else, for (tuple targets, `if` filter, else, loop.*,
//               break/continue), set (targets, namespace attributes, block
//               set), macro/call (defaults, keyword arguments, caller),
//               filter blocks, raw, generation (rendered as its body)
//   expressions literals (str, int, float, list, tuple, dict), arithmetic,
//               comparisons, and/or/not, in, is [not] tests, a if c else b,
//               ~, subscripts and slices, attributes, calls (methods of
//               str/list/dict), filters
// The template is parsed once (parse errors name the line); each render
// walks the tree. A render is bounded (RenderLimits): call depth, loop
// iterations, output size and wall time; going past one is an error, never
// a crash or a hang.
//
// Errors: parse() gives InvalidArgument "template NAME line N: …"; render()
// gives InvalidArgument with ErrorReason::kInvalidPrompt, whose message is
// the template's own for raise_exception (TemplateError::kRaised) and
// "chat template: …" for everything else.
//
// Thread-safety: a parsed Template is immutable; render() may run on many
// threads at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "template/value.h"

namespace zl::tmpl {

struct Node;

struct RenderLimits {
  int max_call_depth = 64;             // nested macro calls and recursion
  int64_t max_loop_iterations = 1000000;  // all loops of a render together
  size_t max_output_bytes = 64u << 20;
  std::chrono::milliseconds max_time{500};  // real templates take well under 1 ms; renders run on an I/O thread
};

// The rendered text, in pieces: markup (template text, special-token text
// honoured when tokenizing) and input (text that came from the request
// unchanged or only cut/trimmed: never parsed for special tokens).
struct Rendered {
  struct Part {
    std::string text;
    bool from_input = false;
  };
  std::vector<Part> parts;
  std::string text() const;
};

class Template {
 public:
  // Parses `source`; `name` is used in error messages (a file name).
  static Result<Template> parse(std::string_view source, std::string name = "chat template");

  // Renders with `context` (a dict: messages, tools, add_generation_prompt, …).
  Result<Rendered> render(const Value& context, const RenderLimits& limits = {}) const;

  const std::string& source() const { return *source_; }
  const std::string& name() const { return name_; }

 private:
  std::shared_ptr<const std::string> source_;
  std::string name_;
  std::shared_ptr<const Node> root_;
};

}  // namespace zl::tmpl
