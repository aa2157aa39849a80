// A compiled guard: every rule's matchers ready to scan text, and the
// decisions built on them (input screening, redaction).
//
// Matching semantics (the same for scan, redact, screen_input and the
// stream redactor, which therefore agree byte for byte):
//   - matchers run on the normalised view (guard/normalize.h);
//   - one left-to-right pass: at each position, every active matcher offers
//     its longest match starting there; the longest offer wins (equal
//     lengths: the earlier rule, then pii before phrases before regexes); the
//     pass resumes after it, so matches never overlap;
//   - a match is reported in ORIGINAL byte offsets (whole code points).
// "Active" rules for a direction: kInput those with input != allow, kOutput
// those with output != allow, kAll every rule (the `guard` command).
//
// Placeholders: a PII match becomes "[REDACTED:<kind>]" ("[REDACTED:email]"),
// a phrase or regex match "[REDACTED:<rule name>]".
//
// Thread-safety: a Guard is immutable after compile(); every const method
// may run on any thread concurrently. Share it as shared_ptr<const Guard>.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "guard/normalize.h"
#include "guard/policy.h"

namespace zl::guard {

enum class Direction : uint8_t { kInput, kOutput, kAll };

enum class MatcherType : uint8_t { kPii, kPhrase, kRegex };

struct Match {
  uint32_t rule = 0;                 // index into Guard::policy().rules
  MatcherType type = MatcherType::kPii;
  PiiKind pii = PiiKind::kEmail;     // meaningful when type == kPii
  size_t start = 0;                  // original bytes [start, end)
  size_t end = 0;
};

// What screen_input decided about one text.
struct InputDecision {
  std::optional<uint32_t> blocked_by;  // the first matching rule with input = block
  std::string text;                    // the text with every redact-rule match replaced (valid when not blocked)
  std::vector<Match> matches;          // every active input match (block and redact rules)
};

class Guard;
class Matchers;  // guard.cc: the compiled matchers

class Guard {
 public:
  // Compiles a policy (validate_policy first). Cost: O(total phrase bytes +
  // regex NFA states); a 1000-phrase policy compiles in milliseconds.
  static Result<std::shared_ptr<const Guard>> compile(Policy policy);
  // load_policy + compile.
  static Result<std::shared_ptr<const Guard>> load(const std::string& path);

  ~Guard();
  Guard(const Guard&) = delete;
  Guard& operator=(const Guard&) = delete;

  const Policy& policy() const { return policy_; }
  const Rule& rule(const Match& m) const { return policy_.rules[m.rule]; }

  // Every match of the rules active in `direction`, in text order.
  // Cost: O(bytes x matchers' constant) plus, per candidate position, work
  // bounded by the longest pattern; transient memory about 17 bytes per
  // byte of text (the view, its map, the phrase table).
  std::vector<Match> scan(std::string_view text, Direction direction = Direction::kAll) const;

  // `text` with every match of the rules active in `direction` replaced by
  // its placeholder (for kInput only rules with input = redact; for kOutput
  // rules with output = redact, mask or stop; for kAll every rule).
  std::string redact(std::string_view text, Direction direction) const;

  // The input side: block if any block rule matches, otherwise the text
  // with redact-rule matches replaced.
  InputDecision screen_input(std::string_view text) const;

  // "[REDACTED:email]" / "[REDACTED:codename]".
  std::string placeholder(const Match& m) const;
  // The kind label of a match: pii_kind_name for PII, "phrase", "regex".
  std::string_view kind_name(const Match& m) const;

  // Whether any rule is active in the direction (false: skip the work).
  bool has_input_rules() const;
  bool has_output_rules() const;

  // Longest possible match of the rules active in `direction`, in bytes of
  // the normalised view: the stream redactor's hold-back bound.
  size_t max_match_bytes(Direction direction) const;

  // The phrases of rules with output = mask, normalised (normalize_text),
  // with their rule index: what the sampler's token automaton is built from.
  struct MaskPhrase {
    uint32_t rule;
    std::string normalized;
  };
  std::vector<MaskPhrase> mask_phrases() const;

  // Internal (stream_redactor.cc): the matchers.
  const Matchers& matchers() const { return *matchers_; }

 private:
  Guard(Policy policy, std::unique_ptr<Matchers> matchers);
  Policy policy_;
  std::unique_ptr<Matchers> matchers_;
};

// Writes `text` with `matches` (sorted, non-overlapping, original offsets
// relative to `text`) replaced by their placeholders.
std::string apply_redactions(const Guard& guard, std::string_view text, const std::vector<Match>& matches);

}  // namespace zl::guard
