// A grammar the mask's work bound is made for, and a vocabulary on which its
// masks reach the bound (grammar_test, structured_output_test).
#pragma once

#include <string>
#include <vector>

namespace zl::test {

// GBNF of `n` optional letters written out one by one: a run of letters
// splits between the items in ~n ways, each a parse stack of its own.
inline std::string optional_letters_gbnf(int n) {
  std::string text = "root ::=";
  for (int i = 0; i < n; ++i) text += " [a-z]?";
  return text;
}

// "" (id 0, the end) and every word of one to three letters a-z (18,278 tokens).
inline std::vector<std::string> short_words_vocab() {
  std::vector<std::string> vocab = {""};
  for (char a = 'a'; a <= 'z'; ++a) {
    vocab.push_back(std::string{a});
    for (char b = 'a'; b <= 'z'; ++b) {
      vocab.push_back(std::string{a, b});
      for (char c = 'a'; c <= 'z'; ++c) vocab.push_back(std::string{a, b, c});
    }
  }
  return vocab;
}

}  // namespace zl::test
