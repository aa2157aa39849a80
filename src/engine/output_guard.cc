#include "engine/output_guard.h"

namespace zl {

OutputGuard::OutputGuard(std::shared_ptr<const guard::Guard> guard, const guard::TokenMaskTable* mask)
    : guard_(std::move(guard)), mask_(mask && !mask->empty() ? mask : nullptr) {
  if (guard_ && guard_->has_output_rules()) redactor_.emplace(guard_);
}

Sampler::Veto OutputGuard::veto() {
  if (!mask_) return nullptr;
  // Captures `this` only: fits std::function's inline buffer (no allocation per token).
  return [this](int32_t id) {
    const guard::MaskStep s = mask_->step(mask_state_, id);
    if (s.refused() && refused_rule_ < 0) refused_rule_ = s.rule;
    return s.refused();
  };
}

std::optional<GuardAction> OutputGuard::take_refusal() {
  if (refused_rule_ < 0) return std::nullopt;
  const auto rule = static_cast<uint32_t>(refused_rule_);
  refused_rule_ = -1;
  return GuardAction{.rule = rule, .action = "mask", .kind = "phrase"};
}

void OutputGuard::accept(int32_t token) {
  if (mask_) mask_state_ = mask_->step(mask_state_, token).state;
}

void OutputGuard::start_after(std::span<const int32_t> prompt) {
  if (!mask_) return;
  // The automaton's state depends on the last (longest phrase) bytes only;
  // 256 tokens cover phrases of 256 bytes whatever the tokens (costs < 1 µs).
  constexpr size_t kTail = 256;
  for (int32_t id : prompt.subspan(prompt.size() > kTail ? prompt.size() - kTail : 0)) {
    mask_state_ = mask_->advance(mask_state_, id);
  }
}

GuardedText OutputGuard::take(guard::Release r) {
  GuardedText out{.text = std::move(r.text), .stop = r.stop.has_value()};
  for (const guard::Match& m : r.matches) {
    if (r.stop && m.rule == r.stop->rule && m.start == r.stop->start) continue;  // reported as the stop
    out.actions.push_back({.rule = m.rule, .action = "redact", .kind = guard_->kind_name(m)});
  }
  if (r.stop) out.actions.push_back({.rule = r.stop->rule, .action = "stop", .kind = guard_->kind_name(*r.stop)});
  return out;
}

GuardedText OutputGuard::feed(std::string_view text) {
  if (!redactor_) return {.text = std::string(text)};
  if (redactor_->stopped()) return {};
  return take(redactor_->feed(text));
}

GuardedText OutputGuard::finish(std::string_view text) {
  if (!redactor_) return {.text = std::string(text)};
  GuardedText out = feed(text);
  if (out.stop || redactor_->stopped()) return out;
  GuardedText last = take(redactor_->finish());
  out.text += last.text;
  out.stop = last.stop;
  out.actions.insert(out.actions.end(), last.actions.begin(), last.actions.end());
  return out;
}

}  // namespace zl
