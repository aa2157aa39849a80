// StreamRedactor (guard/stream_redactor.h): each feed re-normalises the
// held text behind a little released context and resumes the scanning pass
// (guard/scan.h) where it last rested; what lies before the new resting
// position is final and leaves.
#include "guard/stream_redactor.h"

#include <algorithm>

#include "guard/scan.h"

namespace zl::guard {

namespace {
// Context kept when a released stretch produced no view bytes at all
// (only zero-width characters): beyond this it is dropped.
constexpr size_t kMaxContext = 4096;
constexpr size_t kContextViewBytes = 4;
}  // namespace

StreamRedactor::StreamRedactor(std::shared_ptr<const Guard> guard, StreamOptions options)
    : guard_(std::move(guard)),
      options_(options),
      active_(active_rules(guard_->policy(), Direction::kOutput, options_.redact_mask_rules)) {}

Release StreamRedactor::feed(std::string_view delta) {
  if (stopped_) return {};
  pending_.append(delta);
  return step(/*eof=*/false);
}

Release StreamRedactor::finish() {
  if (stopped_) return {};
  return step(/*eof=*/true);
}

Release StreamRedactor::step(bool eof) {
  Release out;
  const size_t stable = eof ? pending_.size() : stable_prefix_length(pending_);
  if (stable == 0) return out;
  const size_t ctx = context_.size();
  std::string window = context_;
  window.append(pending_, 0, stable);
  const NormalizedText view = normalize(window);
  const size_t from = static_cast<size_t>(
      std::lower_bound(view.src_begin.begin(), view.src_begin.end(), static_cast<uint32_t>(ctx)) - view.src_begin.begin());
  const PassResult pass = scan_pass(guard_->matchers(), view, from, active_, eof);
  size_t cut = pass.rest >= view.size() ? stable : view.src_begin[pass.rest] - ctx;

  std::vector<Match> matches = to_original(view, pass.matches, ctx);
  for (size_t i = 0; i < matches.size(); ++i) {
    if (guard_->rule(matches[i]).output != OutputAction::kStop) continue;
    cut = matches[i].start;
    out.stop = matches[i];
    out.stop->start += pending_offset_;
    out.stop->end += pending_offset_;
    matches.resize(i);
    stopped_ = true;
    break;
  }
  out.text = apply_redactions(*guard_, std::string_view(pending_).substr(0, cut), matches);
  for (Match& m : matches) {
    m.start += pending_offset_;
    m.end += pending_offset_;
  }
  out.matches = std::move(matches);

  // The new context: from the segment of the fourth-last view byte before
  // the cut (a segment boundary of the whole text) to the cut; detectors
  // look two bytes back (detectors.h).
  const size_t cut_w = ctx + cut;
  const auto it = std::lower_bound(view.src_begin.begin(), view.src_begin.end(), static_cast<uint32_t>(cut_w));
  if (it != view.src_begin.begin()) {
    const size_t j = static_cast<size_t>(it - view.src_begin.begin());
    const size_t k = view.src_begin[j >= kContextViewBytes ? j - kContextViewBytes : 0];
    context_.assign(window, k, cut_w - k);
  } else {
    context_.append(pending_, 0, cut);
    if (context_.size() > kMaxContext) context_.clear();
  }
  if (stopped_) {
    pending_offset_ += pending_.size();
    pending_.clear();
  } else {
    pending_.erase(0, cut);
    pending_offset_ += cut;
  }
  return out;
}

}  // namespace zl::guard
