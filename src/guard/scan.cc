// The scanning pass (guard/scan.h).
#include "guard/scan.h"

#include <algorithm>
#include <limits>

#include "guard/detectors.h"

namespace zl::guard {
namespace {

bool segment_start(const NormalizedText& v, size_t p) {
  return p == 0 || p >= v.size() || v.src_begin[p] != v.src_begin[p - 1];
}
// The first segment start after p (or the end).
size_t next_segment(const NormalizedText& v, size_t p) {
  const uint32_t b = v.src_begin[p];
  ++p;
  while (p < v.size() && v.src_begin[p] == b) ++p;
  return p;
}
// e moved forward to a segment start (a match never ends inside a segment).
size_t to_segment_end(const NormalizedText& v, size_t e) {
  while (e > 0 && e < v.size() && v.src_begin[e] == v.src_begin[e - 1]) ++e;
  return e;
}

// The earliest segment start >= from at which an active matcher is still
// undecided at the end of the view (detectors.h, regex.h, phrases.h say
// when each is). `phrase_depth`: PhraseSet::scan's return value.
size_t hold_position(const Matchers& m, const NormalizedText& view, size_t from, const std::vector<char>& active,
                     size_t phrase_depth, bool phrases_active) {
  const size_t end = view.size();
  size_t hold = end;
  const detect::View dv{view.text, view.flags.data()};
  for (const Matchers::Pii& pii : m.pii) {
    if (!active[pii.rule]) continue;
    const detect::Detector& d = detect::detector(pii.kind);
    const size_t bound = d.max_len + detect::kLookahead;
    const size_t lo = std::max(from, end > bound ? end - bound : size_t{0});
    size_t r = end;
    while (r > lo && d.in_class(static_cast<unsigned char>(view.text[r - 1]))) --r;
    for (size_t s = r; s < hold; ++s) {
      if (segment_start(view, s) && d.start_ok(dv, s) && d.prefix_ok(dv, s)) {
        hold = s;
        break;
      }
    }
  }
  if (phrases_active && phrase_depth > 0) hold = std::min(hold, std::max(from, end - phrase_depth));
  for (const Matchers::Regex& re : m.regexes) {
    if (!active[re.rule]) continue;
    const size_t lo = std::max(from, end > re.re.max_len() ? end - re.re.max_len() : size_t{0});
    hold = std::min(hold, re.re.earliest_live_start(view.text, lo, [&](size_t s) { return segment_start(view, s); }));
  }
  return hold;
}

struct Offer {
  size_t len = 0;
  uint32_t rule = std::numeric_limits<uint32_t>::max();
  MatcherType type = MatcherType::kPii;
  PiiKind pii = PiiKind::kEmail;

  // Longest first; equal lengths: the earlier rule, then pii < phrase < regex.
  void consider(size_t l, uint32_t r, MatcherType t, PiiKind k) {
    if (l == 0) return;
    if (l > len || (l == len && (r < rule || (r == rule && t < type)))) *this = {l, r, t, k};
  }
};

}  // namespace

std::vector<char> active_rules(const Policy& policy, Direction direction, bool with_mask) {
  std::vector<char> active(policy.rules.size(), 0);
  for (size_t r = 0; r < policy.rules.size(); ++r) {
    const Rule& rule = policy.rules[r];
    switch (direction) {
      case Direction::kInput: active[r] = rule.input != InputAction::kAllow; break;
      case Direction::kOutput:
        active[r] = rule.output == OutputAction::kRedact || rule.output == OutputAction::kStop ||
                    (with_mask && rule.output == OutputAction::kMask);
        break;
      case Direction::kAll: active[r] = 1; break;
    }
  }
  return active;
}

PassResult scan_pass(const Matchers& m, const NormalizedText& view, size_t from, const std::vector<char>& active,
                     bool eof) {
  PassResult result;
  const size_t end = view.size();
  std::vector<PhraseSet::Occurrence> occurrences;
  const size_t depth = m.phrases.scan(view.text, from, &occurrences);
  bool phrases_active = false;
  for (size_t r = 0; r < active.size(); ++r) phrases_active |= active[r] && m.phrase_max[r] > 0;
  const size_t hold = eof ? end : hold_position(m, view, from, active, depth, phrases_active);

  // Active phrase occurrences before the hold, by start; at one start the
  // longest (then the earliest rule) first. Few: only real occurrences.
  std::erase_if(occurrences, [&](const PhraseSet::Occurrence& o) { return !active[o.rule] || o.start >= hold || o.start < from; });
  std::sort(occurrences.begin(), occurrences.end(), [](const PhraseSet::Occurrence& a, const PhraseSet::Occurrence& b) {
    return a.start != b.start ? a.start < b.start : a.len != b.len ? a.len > b.len : a.rule < b.rule;
  });
  size_t next_occurrence = 0;

  const detect::View dv{view.text, view.flags.data()};
  size_t p = from;
  while (p < hold) {
    Offer offer;
    for (const Matchers::Pii& pii : m.pii) {
      if (!active[pii.rule]) continue;
      const detect::Detector& d = detect::detector(pii.kind);
      if (d.start_ok(dv, p)) offer.consider(d.match(dv, p), pii.rule, MatcherType::kPii, pii.kind);
    }
    while (next_occurrence < occurrences.size() && occurrences[next_occurrence].start < p) ++next_occurrence;
    if (next_occurrence < occurrences.size() && occurrences[next_occurrence].start == p) {
      const PhraseSet::Occurrence& o = occurrences[next_occurrence];
      offer.consider(o.len, o.rule, MatcherType::kPhrase, PiiKind::kEmail);
    }
    for (const Matchers::Regex& re : m.regexes) {
      if (active[re.rule]) offer.consider(re.re.match(view.text, p), re.rule, MatcherType::kRegex, PiiKind::kEmail);
    }
    if (offer.len == 0) {
      p = next_segment(view, p);
      continue;
    }
    const size_t e = to_segment_end(view, p + offer.len);
    result.matches.push_back({offer.rule, offer.type, offer.pii, p, e});
    p = e;
  }
  result.rest = std::min(p, end);
  return result;
}

std::vector<Match> to_original(const NormalizedText& view, const std::vector<ViewMatch>& matches, size_t base) {
  std::vector<Match> out;
  out.reserve(matches.size());
  for (const ViewMatch& vm : matches) {
    const auto [b, e] = view.original_range(vm.begin, vm.end);
    out.push_back({.rule = vm.rule, .type = vm.type, .pii = vm.pii, .start = b - base, .end = e - base});
  }
  return out;
}

}  // namespace zl::guard
