// Minimal bodies so that the headers link; replaced by the implementation.
#include "guard/guard.h"
#include "guard/stream_redactor.h"

namespace zl::guard {

class Matchers {};

std::string_view pii_kind_name(PiiKind kind) {
  static constexpr std::string_view kNames[] = {"email", "phone", "credit_card", "iban", "us_ssn", "api_key"};
  return kNames[static_cast<int>(kind)];
}
std::optional<PiiKind> parse_pii_kind(std::string_view name) {
  for (int i = 0; i < kNumPiiKinds; ++i) {
    if (pii_kind_name(static_cast<PiiKind>(i)) == name) return static_cast<PiiKind>(i);
  }
  return std::nullopt;
}
std::string_view input_action_name(InputAction a) {
  static constexpr std::string_view kNames[] = {"allow", "block", "redact"};
  return kNames[static_cast<int>(a)];
}
std::string_view output_action_name(OutputAction a) {
  static constexpr std::string_view kNames[] = {"allow", "mask", "redact", "stop"};
  return kNames[static_cast<int>(a)];
}
Result<Policy> load_policy(const std::string& path) { return unsupported("guard: not implemented yet"); }
Result<Policy> parse_policy(std::string_view, std::string_view) { return unsupported("guard: not implemented yet"); }
Status validate_policy(const Policy&, std::string_view) { return Status::ok_status(); }

NormalizedText normalize(std::string_view original, uint32_t base) { return {}; }
std::string normalize_text(std::string_view original) { return std::string(original); }
size_t stable_prefix_length(std::string_view original) { return original.size(); }
uint32_t fold_code_point(uint32_t cp, bool) { return cp; }

Guard::Guard(Policy policy, std::unique_ptr<Matchers> m) : policy_(std::move(policy)), matchers_(std::move(m)) {}
Guard::~Guard() = default;
Result<std::shared_ptr<const Guard>> Guard::compile(Policy policy) {
  return std::shared_ptr<const Guard>(new Guard(std::move(policy), std::make_unique<Matchers>()));
}
Result<std::shared_ptr<const Guard>> Guard::load(const std::string& path) {
  ASSIGN_OR_RETURN(auto p, load_policy(path));
  return compile(std::move(p));
}
std::vector<Match> Guard::scan(std::string_view, Direction) const { return {}; }
std::string Guard::redact(std::string_view text, Direction) const { return std::string(text); }
InputDecision Guard::screen_input(std::string_view text) const { return {.text = std::string(text)}; }
std::string Guard::placeholder(const Match& m) const { return "[REDACTED]"; }
std::string_view Guard::kind_name(const Match& m) const { return "phrase"; }
bool Guard::has_input_rules() const { return false; }
bool Guard::has_output_rules() const { return false; }
size_t Guard::max_match_bytes(Direction) const { return 0; }
std::vector<Guard::MaskPhrase> Guard::mask_phrases() const { return {}; }
std::string apply_redactions(const Guard&, std::string_view text, const std::vector<Match>&) { return std::string(text); }

StreamRedactor::StreamRedactor(std::shared_ptr<const Guard> guard, StreamOptions options)
    : guard_(std::move(guard)), options_(options) {}
Release StreamRedactor::feed(std::string_view delta) { return {.text = std::string(delta)}; }
Release StreamRedactor::finish() { return {}; }
Release StreamRedactor::step(bool) { return {}; }

}  // namespace zl::guard
