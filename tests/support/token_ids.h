// Token id lists for tests that need distinct prompts and no model.
#pragma once

#include <cstdint>
#include <numeric>
#include <vector>

namespace zl::test {

// n consecutive ids from `first`: first, first + 1, ... (distinct prompts, no prefix hits).
inline std::vector<int32_t> consecutive_tokens(int32_t n, int32_t first) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

}  // namespace zl::test
