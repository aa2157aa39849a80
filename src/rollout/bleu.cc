#include "rollout/bleu.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>

namespace zl::rollout {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// n-gram -> count; the key joins the n words with '\x1f' (ASCII unit
// separator), counted the same way on both sides.
std::unordered_map<std::string, int> ngram_counts(const std::vector<std::string_view>& words, size_t n) {
  std::unordered_map<std::string, int> out;
  if (words.size() < n) return out;
  for (size_t i = 0; i + n <= words.size(); ++i) {
    std::string key(words[i]);
    for (size_t j = 1; j < n; ++j) {
      key += '\x1f';
      key += words[i + j];
    }
    ++out[key];
  }
  return out;
}

}  // namespace

std::vector<std::string_view> bleu_words(std::string_view text) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    size_t j = i;
    while (j < text.size() && !is_space(text[j])) ++j;
    if (j > i) out.push_back(text.substr(i, j - i));
    i = j;
  }
  return out;
}

double bleu4(std::string_view candidate, std::string_view reference) {
  const std::vector<std::string_view> cand = bleu_words(candidate);
  const std::vector<std::string_view> ref = bleu_words(reference);
  if (cand.empty() && ref.empty()) return 1.0;
  if (cand.empty() || ref.empty()) return 0.0;
  if (cand == ref) return 1.0;
  double log_sum = 0;
  for (size_t n = 1; n <= 4; ++n) {
    const auto c = ngram_counts(cand, n);
    const auto r = ngram_counts(ref, n);
    int matched = 0;
    int total = 0;
    for (const auto& [gram, count] : c) {
      total += count;
      auto it = r.find(gram);
      if (it != r.end()) matched += std::min(count, it->second);
    }
    if (matched == 0 || total == 0) return 0.0;
    log_sum += std::log(static_cast<double>(matched) / total) / 4.0;
  }
  const double c_len = static_cast<double>(cand.size());
  const double r_len = static_cast<double>(ref.size());
  const double bp = c_len >= r_len ? 1.0 : std::exp(1.0 - r_len / c_len);
  return bp * std::exp(log_sum);
}

}  // namespace zl::rollout
