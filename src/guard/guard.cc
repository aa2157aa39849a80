// Guard (guard/guard.h): compiling a policy into matchers, and the
// whole-text operations on top of the scanning pass (guard/scan.h).
#include "guard/guard.h"

#include <algorithm>

#include "guard/detectors.h"
#include "guard/scan.h"

namespace zl::guard {
namespace {

std::vector<char> redact_rules(const Policy& policy, Direction direction) {
  if (direction != Direction::kInput) return active_rules(policy, direction);
  std::vector<char> active(policy.rules.size(), 0);
  for (size_t r = 0; r < policy.rules.size(); ++r) active[r] = policy.rules[r].input == InputAction::kRedact;
  return active;
}

std::vector<Match> scan_with(const Matchers& m, std::string_view text, const std::vector<char>& active) {
  if (std::find(active.begin(), active.end(), 1) == active.end()) return {};
  const NormalizedText view = normalize(text);
  const PassResult pass = scan_pass(m, view, 0, active, /*eof=*/true);
  return to_original(view, pass.matches, 0);
}

}  // namespace

Guard::Guard(Policy policy, std::unique_ptr<Matchers> matchers)
    : policy_(std::move(policy)), matchers_(std::move(matchers)) {}
Guard::~Guard() = default;

Result<std::shared_ptr<const Guard>> Guard::compile(Policy policy) {
  RETURN_IF_ERROR(validate_policy(policy));
  auto m = std::make_unique<Matchers>();
  m->phrase_max.assign(policy.rules.size(), 0);
  for (size_t r = 0; r < policy.rules.size(); ++r) {
    const Rule& rule = policy.rules[r];
    const auto ri = static_cast<uint32_t>(r);
    for (PiiKind kind : rule.pii) m->pii.push_back({ri, kind});
    for (const std::string& phrase : rule.phrases) {
      const std::string n = normalize_text(phrase);
      m->phrases.add(n, ri);
      m->phrase_max[r] = std::max(m->phrase_max[r], n.size());
    }
    for (const std::string& pattern : rule.regexes) {
      auto re = BoundedRegex::compile(pattern);
      if (!re.ok()) return re.status().with_context("rule '" + rule.name + "': regex '" + pattern + "'");
      m->regexes.push_back({ri, std::move(re).value()});
    }
  }
  m->phrases.build();
  return std::shared_ptr<const Guard>(new Guard(std::move(policy), std::move(m)));
}

Result<std::shared_ptr<const Guard>> Guard::load(const std::string& path) {
  ASSIGN_OR_RETURN(Policy policy, load_policy(path));
  return compile(std::move(policy));
}

std::vector<Match> Guard::scan(std::string_view text, Direction direction) const {
  return scan_with(*matchers_, text, active_rules(policy_, direction));
}

std::string Guard::redact(std::string_view text, Direction direction) const {
  return apply_redactions(*this, text, scan_with(*matchers_, text, redact_rules(policy_, direction)));
}

InputDecision Guard::screen_input(std::string_view text) const {
  InputDecision d;
  d.matches = scan(text, Direction::kInput);
  for (const Match& m : d.matches) {
    if (policy_.rules[m.rule].input == InputAction::kBlock) {
      d.blocked_by = m.rule;
      return d;
    }
  }
  d.text = apply_redactions(*this, text, d.matches);
  return d;
}

std::string Guard::placeholder(const Match& m) const {
  const std::string_view label = m.type == MatcherType::kPii ? pii_kind_name(m.pii) : std::string_view(rule(m).name);
  return "[REDACTED:" + std::string(label) + "]";
}

std::string_view Guard::kind_name(const Match& m) const {
  switch (m.type) {
    case MatcherType::kPii: return pii_kind_name(m.pii);
    case MatcherType::kPhrase: return "phrase";
    case MatcherType::kRegex: return "regex";
  }
  return "";
}

bool Guard::has_input_rules() const {
  const auto a = active_rules(policy_, Direction::kInput);
  return std::find(a.begin(), a.end(), 1) != a.end();
}

bool Guard::has_output_rules() const {
  const auto a = active_rules(policy_, Direction::kOutput);
  return std::find(a.begin(), a.end(), 1) != a.end();
}

size_t Guard::max_match_bytes(Direction direction) const {
  const auto active = active_rules(policy_, direction);
  size_t n = 0;
  for (const auto& pii : matchers_->pii) {
    if (active[pii.rule]) n = std::max(n, detect::detector(pii.kind).max_len + detect::kLookahead);
  }
  for (size_t r = 0; r < active.size(); ++r) {
    if (active[r]) n = std::max(n, matchers_->phrase_max[r]);
  }
  for (const auto& re : matchers_->regexes) {
    if (active[re.rule]) n = std::max(n, re.re.max_len());
  }
  return n;
}

std::vector<Guard::MaskPhrase> Guard::mask_phrases() const {
  std::vector<MaskPhrase> out;
  for (size_t r = 0; r < policy_.rules.size(); ++r) {
    if (policy_.rules[r].output != OutputAction::kMask) continue;
    for (const std::string& p : policy_.rules[r].phrases) out.push_back({static_cast<uint32_t>(r), normalize_text(p)});
  }
  return out;
}

std::string apply_redactions(const Guard& guard, std::string_view text, const std::vector<Match>& matches) {
  std::string out;
  out.reserve(text.size());
  size_t at = 0;
  for (const Match& m : matches) {
    out.append(text.substr(at, m.start - at));
    out += guard.placeholder(m);
    at = m.end;
  }
  out.append(text.substr(at));
  return out;
}

}  // namespace zl::guard
