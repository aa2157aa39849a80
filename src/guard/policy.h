// The guard's policy: named rules, each a set of matchers (PII detectors,
// literal phrases, bounded regexes) and what to do with a match on the way
// in (the prompt) and on the way out (the generated text).
//
// The file is TOML (README "Guard"):
//
//   [[rule]]
//   name = "pii"                     # unique; the label in errors, metrics, logs
//   pii = ["email", "phone", "credit_card", "iban", "us_ssn", "api_key"]
//   phrases = ["project falcon"]     # literal, case-insensitive (normalised)
//   regex = ["TICKET-[0-9]{6}"]      # bounded length only: no * + {n,}
//   input = "redact"                 # allow | block | redact        (default allow)
//   output = "redact"                # allow | mask | redact | stop  (default allow)
//
// A rule needs at least one matcher. `output = "mask"` (forbid the token that
// would complete a phrase, at sampling time) works on phrases only: a mask
// rule with pii or regex is a load error. Unknown keys are errors (a typo
// must not silently disable a rule). Every error names the file and the line.
//
// Thread-safety: a Policy is a plain value; load_policy is reentrant.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace zl::guard {

// The PII detectors (guard/detectors.h), each with its own validation.
enum class PiiKind : uint8_t {
  kEmail,
  kPhone,       // North American and E.164 forms
  kCreditCard,  // 13..19 digits, Luhn
  kIban,        // mod-97
  kUsSsn,       // area/group/serial rules
  kApiKey,      // sk-..., sk-ant-..., AKIA..., ghp_...
};
inline constexpr int kNumPiiKinds = 6;

// "email", "phone", "credit_card", "iban", "us_ssn", "api_key": the policy
// spelling, the placeholder label ([REDACTED:email]) and the metric label.
std::string_view pii_kind_name(PiiKind kind);
std::optional<PiiKind> parse_pii_kind(std::string_view name);

enum class InputAction : uint8_t { kAllow, kBlock, kRedact };
enum class OutputAction : uint8_t { kAllow, kMask, kRedact, kStop };
// The policy spelling, also the `action` metric label: "allow", "block", ...
std::string_view input_action_name(InputAction action);
std::string_view output_action_name(OutputAction action);

struct Rule {
  std::string name;
  std::vector<PiiKind> pii;          // no duplicates
  std::vector<std::string> phrases;  // as written; matched normalised (guard/normalize.h)
  std::vector<std::string> regexes;  // as written; validated bounded at load
  InputAction input = InputAction::kAllow;
  OutputAction output = OutputAction::kAllow;
  int line = 0;  // 1-based line of the rule's [[rule]] header in the file (0: built in code)
};

struct Policy {
  std::vector<Rule> rules;  // in file order: on overlapping matches of equal length, the earlier rule wins
};

// Reads and validates a policy file. Errors (InvalidArgument, or NotFound/Io
// for the file itself) read "<path>:<line>: <what>", e.g.
// "guard.toml:12: regex 'a+' is unbounded ('+'); use {n,m}".
Result<Policy> load_policy(const std::string& path);
// The same on text already in memory; `source` names it in messages.
Result<Policy> parse_policy(std::string_view toml_text, std::string_view source = "policy");

// Checks a policy built in code (what load_policy checks after parsing):
// unique non-empty names, a matcher per rule, mask only on phrases, phrases
// that are not empty after normalisation, bounded valid regexes.
Status validate_policy(const Policy& policy, std::string_view source = "policy");

}  // namespace zl::guard
