// Guard throughput: bytes/s of the normaliser, Guard::scan and the stream
// redactor (deltas of a few bytes, as a token stream feeds it) for the full
// PII policy plus 1000 phrases, and for each half alone, on generated prose
// sprinkled with PII (deterministic; nothing downloaded). Single-threaded;
// the median of --rounds of the thread's CPU time (a busy machine's other
// processes do not count), checked: the stream's output equals redact().
//
//   guard_bench [--mib 4] [--rounds 5] [--delta 4]
#include <algorithm>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "guard/guard.h"
#include "guard/stream_redactor.h"

namespace {

using namespace zl::guard;

const char* kWords[] = {"the",    "of",      "and",     "river",   "garden",   "morning", "history", "village",
                        "quietly", "between", "question", "weather", "journey", "kitchen", "ancient", "measure",
                        "window", "letters", "summer",  "harbour", "children", "library", "mountain", "evening"};

std::string corpus(size_t n_bytes) {
  std::mt19937 rng(5);
  std::string s;
  while (s.size() < n_bytes) {
    const int r = static_cast<int>(rng() % 200);
    if (r == 0) {
      s += "mail john.doe@example.com ";
    } else if (r == 1) {
      s += "call (415) 555-2671 ";
    } else if (r == 2) {
      s += "card 4111 1111 1111 1111 ";
    } else if (r == 3) {
      s += "v1.2.3 on 2024-01-15 ";
    } else {
      s += kWords[rng() % std::size(kWords)];
      s += rng() % 12 == 0 ? ". " : " ";
    }
  }
  s.resize(n_bytes);
  return s;
}

// 1000 two- or three-word phrases from a made-up vocabulary.
std::vector<std::string> phrases() {
  std::mt19937 rng(9);
  const char* syll[] = {"zor", "qua", "vex", "lin", "tar", "mok", "ril", "pex", "dun", "sav", "kel", "bro"};
  std::vector<std::string> out;
  for (int i = 0; i < 1000; ++i) {
    std::string p;
    for (int w = 0, n = 2 + static_cast<int>(rng() % 2); w < n; ++w) {
      if (w) p += ' ';
      for (int k = 0; k < 3; ++k) p += syll[rng() % std::size(syll)];
    }
    out.push_back(p);
  }
  return out;
}

std::shared_ptr<const Guard> make_guard(bool pii, bool with_phrases) {
  Policy p;
  if (pii) {
    p.rules.push_back({.name = "pii",
                       .pii = {PiiKind::kEmail, PiiKind::kPhone, PiiKind::kCreditCard, PiiKind::kIban, PiiKind::kUsSsn,
                               PiiKind::kApiKey},
                       .output = OutputAction::kRedact});
  }
  if (with_phrases) p.rules.push_back({.name = "words", .phrases = phrases(), .output = OutputAction::kRedact});
  auto g = Guard::compile(std::move(p));
  if (!g.ok()) {
    std::fprintf(stderr, "guard_bench: %s\n", g.status().to_string().c_str());
    std::exit(1);
  }
  return std::move(g).value();
}

// Median seconds of `rounds` runs of f.
double median_seconds(int rounds, const std::function<void()>& f) {
  std::vector<double> t;
  for (int i = 0; i < rounds; ++i) {
    timespec a{}, b{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
    f();
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
    t.push_back(static_cast<double>(b.tv_sec - a.tv_sec) + 1e-9 * static_cast<double>(b.tv_nsec - a.tv_nsec));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 4;
  int rounds = 5;
  size_t delta = 4;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--mib")) mib = std::strtoul(argv[i + 1], nullptr, 10);
    if (!std::strcmp(argv[i], "--rounds")) rounds = std::atoi(argv[i + 1]);
    if (!std::strcmp(argv[i], "--delta")) delta = std::strtoul(argv[i + 1], nullptr, 10);
  }
  if (mib == 0 || rounds <= 0 || delta == 0) {
    std::fprintf(stderr, "usage: guard_bench [--mib N>0] [--rounds N>0] [--delta BYTES>0]\n");
    return 2;
  }
  const std::string text = corpus(mib << 20);
  const double mb = static_cast<double>(text.size()) / 1e6;
  std::printf("text: %.1f MB of prose with PII; stream deltas of %zu bytes; median of %d rounds\n", mb, delta, rounds);
  std::printf("%-22s %14s %14s %16s\n", "policy", "normalise MB/s", "scan MB/s", "stream MB/s");
  const double t_norm = median_seconds(rounds, [&] { volatile size_t n = normalize(text).size(); (void)n; });
  struct Case {
    const char* name;
    bool pii, phrases;
  };
  for (const Case c : {Case{"pii + 1000 phrases", true, true}, Case{"pii only", true, false},
                       Case{"1000 phrases only", false, true}}) {
    const auto g = make_guard(c.pii, c.phrases);
    size_t n_matches = 0;
    const double t_scan = median_seconds(rounds, [&] { n_matches = g->scan(text).size(); });
    std::string streamed;
    const double t_stream = median_seconds(rounds, [&] {
      StreamRedactor r(g);
      streamed.clear();
      for (size_t at = 0; at < text.size(); at += delta) streamed += r.feed(std::string_view(text).substr(at, delta)).text;
      streamed += r.finish().text;
    });
    if (streamed != g->redact(text, Direction::kOutput)) {
      std::fprintf(stderr, "guard_bench: the stream's output differs from redact(text)\n");
      return 1;
    }
    std::printf("%-22s %14.1f %14.1f %16.1f   (%zu matches, hold bound %zu bytes)\n", c.name, mb / t_norm, mb / t_scan,
                mb / t_stream, n_matches, g->max_match_bytes(Direction::kOutput));
  }
  return 0;
}
