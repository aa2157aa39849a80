// Subcommands of the zerolayer executable. Each takes the full argv and the
// index of its first own argument, and returns an exit status (cli/args.h).
#pragma once

namespace zl::cli {

int cmd_generate(int argc, char** argv, int first);
int cmd_logits(int argc, char** argv, int first);
int cmd_inspect(int argc, char** argv, int first);
int cmd_make_model(int argc, char** argv, int first);
int cmd_tokenize(int argc, char** argv, int first);
int cmd_detokenize(int argc, char** argv, int first);
int cmd_render(int argc, char** argv, int first);
int cmd_bench(int argc, char** argv, int first);
int cmd_serve(int argc, char** argv, int first);
int cmd_probe(int argc, char** argv, int first);
int cmd_guard(int argc, char** argv, int first);
int cmd_diff(int argc, char** argv, int first);

}  // namespace zl::cli
