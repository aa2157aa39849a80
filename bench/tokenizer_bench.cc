// Tokenizer throughput: MB/s per vocabulary on generated English prose, code,
// CJK text and adversarial inputs, each at two sizes (x and 4x) so that the
// time ratio shows whether the cost grows linearly. Single-threaded; texts are
// generated here (deterministic), nothing is downloaded.
//
//   tokenizer_bench [SHARED_DIR] [--quick]
// SHARED_DIR defaults to the build's ZL_SHARED_DIR (../shared): every
// ggml-vocab-*.gguf under SHARED_DIR/vocab and models/stories260K.gguf.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"
#include "core/utf8.h"

namespace {

namespace fs = std::filesystem;
using zl::Tokenizer;

std::string prose(size_t n_bytes) {
  static const char* kWords[] = {
      "the",     "of",      "and",      "to",     "in",      "a",       "is",      "that",    "for",
      "it",      "as",      "was",      "with",   "be",      "by",      "on",      "not",     "he",
      "this",    "are",     "or",       "his",    "from",    "at",      "which",   "but",     "have",
      "an",      "had",     "they",     "you",    "were",    "their",   "one",     "all",     "we",
      "can",     "her",     "has",      "there",  "been",    "if",      "more",    "when",    "will",
      "would",   "who",     "so",       "no",     "time",    "people",  "river",   "garden",  "morning",
      "history", "village", "quietly",  "remarkable", "government", "understanding", "although",
      "children", "library", "mountain", "between", "afterwards", "question", "important", "weather",
      "journey", "kitchen", "ancient",  "measure", "beautiful", "carefully", "announced", "thousand",
      "yesterday", "whispered", "certainly", "evening", "window", "letters", "summer", "harbour",
  };
  std::mt19937 rng(7);
  std::uniform_int_distribution<size_t> word(0, std::size(kWords) - 1), len(6, 22), coin(0, 9);
  std::string s;
  while (s.size() < n_bytes) {
    const size_t n = len(rng);
    for (size_t i = 0; i < n; ++i) {
      std::string w = kWords[word(rng)];
      if (i == 0) w[0] = static_cast<char>(w[0] - 32);
      s += w;
      if (i + 1 < n) s += coin(rng) == 0 ? ", " : " ";
    }
    s += coin(rng) < 8 ? ". " : (coin(rng) < 5 ? "? " : ".\n\n");
  }
  s.resize(n_bytes);
  return s;
}

std::string code(size_t n_bytes) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> d(0, 999);
  static const char* kIds[] = {"count", "buffer", "index", "result", "node", "value", "offset", "size_t", "width"};
  std::string s;
  while (s.size() < n_bytes) {
    const char* a = kIds[d(rng) % std::size(kIds)];
    const char* b = kIds[d(rng) % std::size(kIds)];
    s += "// Computes the " + std::string(a) + " of a " + b + ".\n";
    s += "static int64_t compute_" + std::string(a) + "(const std::vector<int>& " + b + ", int k) {\n";
    s += "    int64_t total = 0;\n";
    s += "    for (size_t i = 0; i < " + std::string(b) + ".size(); ++i) {\n";
    s += "        if ((" + std::string(b) + "[i] & 0x" + std::to_string(d(rng)) + ") != 0) total += k * " +
         std::to_string(d(rng)) + ";\n";
    s += "        else total -= " + std::string(b) + "[i] >> 2;\n    }\n    return total;\n}\n\n";
  }
  s.resize(n_bytes);
  return s;
}

std::string cjk(size_t n_bytes) {
  std::mt19937 rng(13);
  std::uniform_int_distribution<uint32_t> han(0x4E00, 0x9FA5);
  std::uniform_int_distribution<int> d(0, 99);
  std::string s;
  while (s.size() + 8 < n_bytes) {
    zl::utf8::append(han(rng), &s);
    const int r = d(rng);
    if (r < 6) s += "，";
    else if (r < 9) s += "。";
    else if (r < 10) s += "\n";
  }
  return s;
}

std::string json(size_t n_bytes) {
  std::string s = "{\"items\":[";
  for (int i = 0; s.size() + 64 < n_bytes; ++i) {
    s += "{\"id\":" + std::to_string(i) + ",\"name\":\"item" + std::to_string(i * 31 % 977) +
         "\",\"tags\":[\"a\",\"b\"],\"price\":" + std::to_string(i % 100) + "." + std::to_string(i % 7) +
         ",\"ok\":true},";
  }
  s += "{}]}";
  return s;
}

// Best-of timing: repeats the encode until ~min_secs have passed.
double seconds_per_encode(const Tokenizer& t, const std::string& text, double min_secs, size_t* n_tokens) {
  double best = 1e30, spent = 0;
  int reps = 0;
  while (spent < min_secs || reps < 2) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto ids = t.encode(text, {.add_special = false});
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    *n_tokens = ids.size();
    best = std::min(best, s);
    spent += s;
    ++reps;
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  fs::path shared = ZL_SHARED_DIR;
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else {
      shared = argv[i];
    }
  }
  std::vector<fs::path> files;
  if (fs::exists(shared / "vocab")) {
    for (const auto& e : fs::directory_iterator(shared / "vocab")) {
      if (e.path().extension() == ".gguf") files.push_back(e.path());
    }
  }
  if (fs::exists(shared / "models" / "stories260K.gguf")) files.push_back(shared / "models" / "stories260K.gguf");
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "tokenizer_bench: no vocabularies under %s\n", shared.c_str());
    return 1;
  }

  const size_t base = quick ? (256 << 10) : (1 << 20);
  const double min_secs = quick ? 0.05 : 0.25;
  struct Input {
    const char* name;
    std::function<std::string(size_t)> make;
    size_t size;
  };
  const Input inputs[] = {
      {"english", prose, base},
      {"code", code, base},
      {"cjk", cjk, base},
      {"json-min", json, base},
      {"100k-a", [](size_t n) { return std::string(n, 'a'); }, 100000},
      {"100k-digits", [](size_t n) { return std::string(n, '7'); }, 100000},
  };
  std::printf("%-28s %-12s %10s %10s %10s %10s %8s\n", "vocabulary", "input", "bytes", "tokens", "MB/s", "MB/s@4x",
              "t4x/t1x");
  for (const fs::path& f : files) {
    auto tok = Tokenizer::load(f.string());
    if (!tok.ok()) {
      std::fprintf(stderr, "%s: %s\n", f.c_str(), tok.status().to_string().c_str());
      continue;
    }
    std::string name = f.stem().string();
    if (name.rfind("ggml-vocab-", 0) == 0) name = name.substr(11);
    for (const Input& in : inputs) {
      const std::string x1 = in.make(in.size), x4 = in.make(in.size * 4);
      size_t n1 = 0, n4 = 0;
      const double t1 = seconds_per_encode(**tok, x1, min_secs, &n1);
      const double t4 = seconds_per_encode(**tok, x4, min_secs, &n4);
      std::printf("%-28s %-12s %10zu %10zu %10.1f %10.1f %8.2f\n", name.c_str(), in.name, x1.size(), n1,
                  x1.size() / t1 / 1e6, x4.size() / t4 / 1e6, t4 / t1);
      std::fflush(stdout);
    }
  }
  return 0;
}
