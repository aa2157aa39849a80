// BLEU-4 of one candidate text against one reference (Papineni et al. 2002,
// "BLEU: a Method for Automatic Evaluation of Machine Translation"): the
// geometric mean of the modified (clipped) 1..4-gram precisions, uniform
// weights, times the brevity penalty exp(1 - r/c) when the candidate is
// shorter than the reference. Tokens are whitespace-separated words
// (case-sensitive, punctuation attached), as the seed compares answers.
//
// Edge cases, chosen so that a comparison of two answers reads naturally:
// both texts empty (or whitespace only) -> 1; one empty -> 0; a precision
// of 0 (no shared n-gram of some order, which includes a candidate of fewer
// than four words that is not identical to the reference) -> 0, as the
// unsmoothed metric (NLTK's sentence_bleu without smoothing, sacreBLEU's
// `none`). Identical texts of any length -> 1.
//
// Pure function, thread-safe; O(n) in the words of both texts.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace zl::rollout {

std::vector<std::string_view> bleu_words(std::string_view text);
double bleu4(std::string_view candidate, std::string_view reference);

}  // namespace zl::rollout
