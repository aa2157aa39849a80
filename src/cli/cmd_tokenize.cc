// `zerolayer tokenize` and `zerolayer detokenize`: the model's own tokenizer
// on the command line. Only the GGUF metadata is read (no weights).
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "cli/model_loading.h"
#include "tokenizer/tokenizer.h"

namespace zl::cli {
namespace {

Result<std::unique_ptr<Tokenizer>> load_tokenizer(const Args& args) {
  auto path = args.has("model") ? Result<std::string>(*args.get("model")) : default_model_path();
  if (!path.ok()) return path.status();
  return Tokenizer::load(*path);
}

void write_stdout(const std::string& s) { std::fwrite(s.data(), 1, s.size(), stdout); }

}  // namespace

int cmd_tokenize(int argc, char** argv, int first) {
  int code = 0;
  auto args = parse_command(
      argc, argv, first, "tokenize", "[--model PATH] [--no-bos] [--json] [--parse-special] < text",
      {{"model", true, "GGUF model or vocabulary (default: $ZEROLAYER_MODEL or the demo model)"},
       {"text", true, "text to tokenize instead of stdin"},
       {"no-bos", false, "add neither BOS nor EOS (default: as the vocabulary says)"},
       {"parse-special", false, "match special-token text such as <|eot_id|> (default: literal text)"},
       {"json", false, "print a JSON array instead of space-separated ids"}},
      &code);
  if (!args) return code;
  auto tok = load_tokenizer(*args);
  if (!tok.ok()) return report_error("tokenize", tok.status());

  // stdin is taken byte for byte: `echo` adds a newline, which is tokenized too.
  std::string text;
  if (auto t = args->get("text")) {
    text = *t;
  } else {
    std::cin >> std::noskipws;
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    if (std::cin.bad()) return report_error("tokenize", io_error("reading stdin failed"));
  }
  const auto ids = (*tok)->encode(text, {.add_special = !args->has("no-bos"),
                                         .parse_special = args->has("parse-special")});
  const bool json = args->has("json");
  std::string out = json ? "[" : "";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) out += json ? ", " : " ";
    out += std::to_string(ids[i]);
  }
  out += json ? "]\n" : "\n";
  write_stdout(out);
  return kExitOk;
}

int cmd_detokenize(int argc, char** argv, int first) {
  int code = 0;
  auto args = parse_command(argc, argv, first, "detokenize", "[--model PATH] --ids 1,2,3",
                            {{"model", true, "GGUF model or vocabulary (default: $ZEROLAYER_MODEL or the demo model)"},
                             {"ids", true, "comma-separated token ids"},
                             {"render-special", false, "print control tokens (<s>, <|eot_id|>) as text"},
                             {"strip-leading-space", false, "drop the SPM space prefix of the first token"}},
                            &code);
  if (!args) return code;
  if (!args->has("ids")) return report_error("detokenize", invalid_argument("--ids is required"));
  auto ids = parse_id_list(*args->get("ids"));
  if (!ids.ok()) return report_error("detokenize", ids.status());
  auto tok = load_tokenizer(*args);
  if (!tok.ok()) return report_error("detokenize", tok.status());
  for (int32_t id : *ids) {
    if (!(*tok)->vocab().is_valid(id)) {
      return report_error("detokenize", invalid_argument("token id " + std::to_string(id) + " is outside [0, " +
                                                         std::to_string((*tok)->vocab().n_tokens()) + ")"));
    }
  }
  std::string text = (*tok)->decode(*ids, {.render_special = args->has("render-special"),
                                           .strip_leading_space = args->has("strip-leading-space")});
  if (isatty(STDOUT_FILENO)) text += "\n";  // exact bytes when piped
  write_stdout(text);
  return kExitOk;
}

}  // namespace zl::cli
