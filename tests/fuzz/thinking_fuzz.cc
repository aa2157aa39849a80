// libFuzzer target fuzz_thinking: the thought parser (api/thinking.h) on
// arbitrary model output.
// Input: byte 0 bit 0: the prompt opened the thought (starts_inside); byte 1
// seeds the delta sizes (1..16 bytes; 0: one push); the rest is the output.
// Invariants: pieces are never empty, thought comes before answer and the
// kinds alternate; the thought never holds "</think>"; thought and answer
// together are never longer than the output; an output without "<think>"
// that the prompt did not open is the answer exactly; and the result does
// not depend on how the output was chunked.
#include <string>
#include <vector>

#include "api/thinking.h"
#include "fuzz/fuzz_target.h"

namespace {

using zl::api::ThoughtPiece;

std::pair<std::string, std::string> run(bool inside, std::string_view output, uint8_t chunk_seed) {
  zl::api::ThinkingParser parser(inside);
  std::vector<ThoughtPiece> pieces;
  uint32_t rng = chunk_seed;
  for (size_t i = 0; i < output.size();) {
    rng = rng * 1103515245u + 12345u;
    const size_t n = chunk_seed == 0 ? output.size() : std::min<size_t>(1 + (rng >> 16) % 16, output.size() - i);
    parser.push(output.substr(i, n), &pieces);
    i += n;
  }
  parser.finish(&pieces);
  std::string thought, answer;
  for (size_t i = 0; i < pieces.size(); ++i) {
    FUZZ_CHECK(!pieces[i].text.empty());
    if (i > 0) FUZZ_CHECK(pieces[i].thought != pieces[i - 1].thought);
    if (pieces[i].thought) {
      FUZZ_CHECK(answer.empty());
      thought += pieces[i].text;
    } else {
      answer += pieces[i].text;
    }
  }
  return {thought, answer};
}

}  // namespace

ZL_FUZZ_TARGET(fuzz_thinking) {
  if (size < 2) return 0;
  const bool inside = data[0] & 1;
  const std::string_view output(reinterpret_cast<const char*>(data + 2), size - 2);
  const auto whole = run(inside, output, 0);
  const auto chunked = run(inside, output, data[1] == 0 ? 1 : data[1]);
  FUZZ_CHECK(whole == chunked);
  FUZZ_CHECK(whole.first.find("</think>") == std::string::npos);
  FUZZ_CHECK(whole.first.size() + whole.second.size() <= output.size());
  if (!inside && output.find("<think>") == std::string_view::npos) FUZZ_CHECK(whole.second == output && whole.first.empty());
  return 0;
}
