#include "cli/model_loading.h"
#include "tokenizer/tokenizer.h"

namespace zl::cli {

Result<std::vector<int32_t>> tokenize_prompt(const GgufFile& file, const std::string& text) {
  ASSIGN_OR_RETURN(auto tokenizer, Tokenizer::from_gguf(file));
  return tokenizer->encode(text, EncodeOptions{.add_special = true, .parse_special = false});
}

Result<std::string> detokenize_ids(const GgufFile& file, const std::vector<int32_t>& ids) {
  ASSIGN_OR_RETURN(auto tokenizer, Tokenizer::from_gguf(file));
  return tokenizer->decode(ids);
}

}  // namespace zl::cli
