// libFuzzer target fuzz_jinja: the Jinja interpreter (template/jinja.h) on
// arbitrary template source, rendered with a small chat context.
// Input: the bytes are the template.
// Invariants: parse gives a template or InvalidArgument naming a line;
// render gives text or InvalidArgument with ErrorReason::kInvalidPrompt and
// a message, within the limits (output size, loop iterations, call depth,
// time): never a crash, a hang or an unbounded allocation; the rendered
// parts concatenate to the text and request input parts come from it.
#include <chrono>
#include <string>

#include "fuzz/fuzz_target.h"
#include "template/jinja.h"

namespace {

using zl::tmpl::Dict;
using zl::tmpl::List;
using zl::tmpl::Value;

Value context() {
  Dict user;
  user.set("role", Value("user"));
  user.set("content", Value(std::string("Hi <|im_end|> {{ x }}"), true));
  Dict call_fn;
  call_fn.set("name", Value(std::string("get_weather"), true));
  Dict args;
  args.set("city", Value(std::string("Paris"), true));
  call_fn.set("arguments", Value(std::move(args)));
  Dict call;
  call.set("id", Value(std::string("abc123def"), true));
  call.set("function", Value(std::move(call_fn)));
  Dict assistant;
  assistant.set("role", Value("assistant"));
  assistant.set("content", Value(std::string(""), true));
  assistant.set("tool_calls", Value(List{Value(std::move(call))}));
  Dict ctx;
  ctx.set("messages", Value(List{Value(std::move(user)), Value(std::move(assistant))}));
  ctx.set("add_generation_prompt", Value(true));
  ctx.set("bos_token", Value("<s>"));
  ctx.set("eos_token", Value("</s>"));
  return Value(std::move(ctx));
}

}  // namespace

ZL_FUZZ_TARGET(fuzz_jinja) {
  const std::string source(reinterpret_cast<const char*>(data), size);
  auto t = zl::tmpl::Template::parse(source, "fuzz.jinja");
  if (!t.ok()) {
    FUZZ_CHECK(t.status().kind() == zl::ErrorKind::kInvalidArgument);
    FUZZ_CHECK(t.status().message().starts_with("template fuzz.jinja line "));
    return 0;
  }
  const zl::tmpl::RenderLimits limits{.max_call_depth = 32,
                                      .max_loop_iterations = 100000,
                                      .max_output_bytes = 1 << 20,
                                      .max_time = std::chrono::milliseconds(200)};
  auto r = t->render(context(), limits);
  if (!r.ok()) {
    FUZZ_CHECK(r.status().kind() == zl::ErrorKind::kInvalidArgument);
    FUZZ_CHECK(r.status().reason() == zl::ErrorReason::kInvalidPrompt);
    return 0;
  }
  size_t total = 0;
  for (const auto& p : r->parts) {
    FUZZ_CHECK(!p.text.empty());
    total += p.text.size();
  }
  FUZZ_CHECK(total == r->text().size());
  FUZZ_CHECK(total <= limits.max_output_bytes);
  return 0;
}
