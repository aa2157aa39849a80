// `zerolayer render`: the exact prompt text a chat request becomes (the
// model's chat template, the generation prompt added), for debugging
// templates. Reads one request body (JSON) on stdin; only the GGUF metadata
// is read (no weights).
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include "api/anthropic/messages.h"
#include "api/openai/chat_completions.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/model_loading.h"
#include "cli/prompt_codec_setup.h"
#include "tokenizer/tokenizer.h"

namespace zl::cli {

int cmd_render(int argc, char** argv, int first) {
  int code = 0;
  auto args = parse_command(
      argc, argv, first, "render",
      "[--model PATH] [--chat-template-file FILE | --chat-template NAME] [--api openai|anthropic] < request.json",
      {{"model", true, "GGUF model or vocabulary (default: $ZEROLAYER_MODEL or the demo model)"},
       {"chat-template-file", true, "a Jinja chat template file instead of the model's own"},
       {"chat-template", true, "a built-in chat template family instead of the model's own"},
       {"api", true, "the body's API: openai (chat completions, default) or anthropic (messages)"}},
      &code);
  if (!args) return code;
  const std::string api = args->has("api") ? *args->get("api") : "openai";
  if (api != "openai" && api != "anthropic") {
    return report_error("render", invalid_argument("--api must be openai or anthropic, got '" + api + "'"));
  }
  auto path = args->has("model") ? Result<std::string>(*args->get("model")) : default_model_path();
  if (!path.ok()) return report_error("render", path.status());
  auto tok = Tokenizer::load(*path);
  if (!tok.ok()) return report_error("render", tok.status());
  auto codec = make_prompt_codec(tok->get(), {.name = args->has("chat-template") ? *args->get("chat-template") : "",
                                              .file = args->has("chat-template-file") ? *args->get("chat-template-file") : ""});
  if (!codec.ok()) return report_error("render", codec.status());

  std::cin >> std::noskipws;
  const std::string body(std::istreambuf_iterator<char>(std::cin), {});
  if (std::cin.bad()) return report_error("render", io_error("reading stdin failed"));
  auto chat = api == "openai" ? api::openai::parse_chat_request(body) : api::anthropic::parse_messages_request(body);
  if (!chat.ok()) {
    const std::string param = chat.error().param.empty() ? "" : " (" + chat.error().param + ")";
    return report_error("render", invalid_argument(chat.error().message + param));
  }
  auto text = (*codec)->render_text(chat.value());
  if (!text.ok()) return report_error("render", text.status());
  std::fwrite(text->data(), 1, text->size(), stdout);
  return kExitOk;
}

}  // namespace zl::cli
