// The PII detectors: hand-written scanners over the normalised view (lower
// case ASCII after folding), each validating what it finds (Luhn, mod-97,
// SSN number rules, phone number plans, key shapes), so that near misses
// (a 16-digit number failing Luhn, 1.2.3, 2024-01-15, "sk-short") pass.
//
// Every detector obeys one reading discipline, which is what makes the
// stream redactor's hold-back exact: match(v, s) reads the code point before
// s (start_ok), then only a contiguous run of its class characters from s
// and the first character after that run, and never more than
// max_len + kLookahead bytes from s. So once the view holds a character
// outside the class after s, or more than max_len + kLookahead bytes after
// s, match(v, s) can no longer change when text is appended.
//
// All functions are pure and thread-safe; match costs O(max_len).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "guard/policy.h"

namespace zl::guard::detect {

constexpr size_t kLookahead = 2;

// A stretch of the view: text plus its per-byte flags (NormalizedText).
struct View {
  std::string_view text;
  const uint8_t* flags = nullptr;  // NormalizedText::kWasUpper per byte; may be null
};

struct Detector {
  PiiKind kind;
  size_t max_len;                          // longest match, in view bytes
  bool (*in_class)(unsigned char c);       // bytes a match and its run consist of
  bool (*start_ok)(View v, size_t s);      // may a match start at s (reads v[s-2..s], never past s)
  size_t (*match)(View v, size_t s);       // length of the longest valid match at s, 0 if none
  // Whether v[s, v.size()) could still grow into a match: false lets the
  // stream redactor release a trailing run early ("hello" is no API key).
  bool (*prefix_ok)(View v, size_t s);
};

const Detector& detector(PiiKind kind);

// Validation primitives, exposed for tests.
bool luhn_ok(std::string_view digits);
bool iban_ok(std::string_view compact);  // "DE89370400440532013000", any case
bool ssn_ok(std::string_view area, std::string_view group, std::string_view serial);

}  // namespace zl::guard::detect
