// TEMPORARY until the tokenizer lands (issue 3).
#include "cli/model_loading.h"

namespace zl::cli {

Result<std::vector<int32_t>> tokenize_prompt(const GgufFile& file, const std::string& text) {
  return unsupported("--prompt needs the tokenizer");
}

Result<std::string> detokenize_ids(const GgufFile& file, const std::vector<int32_t>& ids) {
  return std::string();
}

}  // namespace zl::cli

#include "cli/commands.h"
#include <cstdio>
namespace zl::cli {
// TEMPORARY weak fallbacks until src/cli/cmd_tokenize.cc lands.
__attribute__((weak)) int cmd_tokenize(int, char**, int) { std::fprintf(stderr, "not yet\n"); return 1; }
__attribute__((weak)) int cmd_detokenize(int, char**, int) { std::fprintf(stderr, "not yet\n"); return 1; }
}  // namespace zl::cli
