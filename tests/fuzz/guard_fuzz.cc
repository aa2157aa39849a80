// libFuzzer target fuzz_guard: the guard (src/guard/) on arbitrary bytes.
// Input: byte 0 picks the mode. Odd: the rest is a policy file for
// parse_policy (never a crash; a policy it accepts compiles). Even: the rest
// is text for a fixed policy (every detector, phrases, a regex, a stop rule),
// fed to a StreamRedactor in pieces whose sizes come from byte 0.
// Invariants: matches lie inside the text, in order, without overlap; the
// stream's releases concatenate to redact(text) (up to a stop, to the
// redaction of the text before the stop match), every intermediate output
// being a prefix of that; nothing is held after finish().
#include <memory>
#include <string>

#include "fuzz/fuzz_target.h"
#include "guard/guard.h"
#include "guard/stream_redactor.h"

namespace {

using namespace zl::guard;

std::shared_ptr<const Guard> fixed_guard() {
  static const auto g = [] {
    auto p = parse_policy(R"(
[[rule]]
name = "pii"
pii = ["email", "phone", "credit_card", "iban", "us_ssn", "api_key"]
output = "redact"
[[rule]]
name = "codename"
phrases = ["project falcon", "falcon", "a\u0301b"]
output = "mask"
[[rule]]
name = "ticket"
regex = ["TICKET-[0-9]{2,6}(?:-[a-z]{1,3})?", "x.{0,4}y"]
output = "redact"
[[rule]]
name = "secret"
phrases = ["password is"]
output = "stop"
)");
    return Guard::compile(std::move(p).value()).value();
  }();
  return g;
}

}  // namespace

ZL_FUZZ_TARGET(fuzz_guard) {
  if (size < 1) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  if (data[0] & 1) {
    auto p = parse_policy(rest, "fuzz.toml");
    if (p.ok()) FUZZ_CHECK(Guard::compile(std::move(p).value()).ok());
    return 0;
  }
  const auto g = fixed_guard();
  const auto matches = g->scan(rest, Direction::kOutput);
  size_t last_end = 0;
  size_t stop_at = rest.size() + 1;
  std::vector<Match> before_stop;
  for (const Match& m : matches) {
    FUZZ_CHECK(m.start < m.end && m.end <= rest.size() && m.start >= last_end);
    last_end = m.end;
    if (stop_at > rest.size() && g->rule(m).output == OutputAction::kStop) stop_at = m.start;
    if (stop_at > rest.size()) before_stop.push_back(m);
  }
  const std::string want = stop_at > rest.size() ? g->redact(rest, Direction::kOutput)
                                                 : apply_redactions(*g, rest.substr(0, stop_at), before_stop);
  StreamRedactor r(g);
  std::string out;
  const size_t piece = 1 + (data[0] >> 1) % 9;
  for (size_t at = 0; at < rest.size() && !r.stopped(); at += piece) {
    out += r.feed(rest.substr(at, piece)).text;
    FUZZ_CHECK(want.compare(0, out.size(), out) == 0);
  }
  out += r.finish().text;
  FUZZ_CHECK(out == want);
  FUZZ_CHECK(r.stopped() || r.held_bytes() == 0);
  return 0;
}
