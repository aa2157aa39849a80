// zerolayer: one executable, many subcommands (DESIGN.md §5).
#include <cstdio>
#include <cstring>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"

namespace {

struct Command {
  const char* name;
  int (*run)(int, char**, int);
  const char* help;
};

constexpr Command kCommands[] = {
    {"serve", zl::cli::cmd_serve, "serve the Anthropic and OpenAI APIs over HTTP"},
    {"generate", zl::cli::cmd_generate, "generate tokens from a prompt (greedy or sampled)"},
    {"logits", zl::cli::cmd_logits, "print raw logits at every position (teacher forcing)"},
    {"inspect", zl::cli::cmd_inspect, "print a model's metadata, tensors and sizes"},
    {"make-model", zl::cli::cmd_make_model, "write a deterministic random-weight model"},
    {"tokenize", zl::cli::cmd_tokenize, "print the token ids of text read on stdin"},
    {"detokenize", zl::cli::cmd_detokenize, "print the text of token ids"},
    {"render", zl::cli::cmd_render, "print the prompt text a chat request (JSON on stdin) becomes"},
    {"bench", zl::cli::cmd_bench, "measure pp/tg/batched throughput against memory and int8 bounds"},
    {"probe", zl::cli::cmd_probe, "1-token health check: time to the first SSE event of a server"},
    {"diff", zl::cli::cmd_diff, "replay recorded requests against two servers and gate on latency, errors, BLEU-4"},
    {"guard", zl::cli::cmd_guard, "apply a guard policy to JSON lines: matches and redacted text"},
};

void print_usage(FILE* out) {
  std::fprintf(out, "zerolayer — an LLM inference server with the middleware inside\n\n");
  std::fprintf(out, "Usage: zerolayer <command> [flags]   (zerolayer <command> --help)\n\nCommands:\n");
  for (const auto& c : kCommands) std::fprintf(out, "  %-12s %s\n", c.name, c.help);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return zl::cli::kExitUsage;
  }
  const std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    print_usage(stdout);
    return zl::cli::kExitOk;
  }
  for (const auto& c : kCommands) {
    if (cmd == c.name) return c.run(argc, argv, 2);
  }
  std::fprintf(stderr, "zerolayer: unknown command '%s'\n\n", cmd.c_str());
  print_usage(stderr);
  return zl::cli::kExitUsage;
}
