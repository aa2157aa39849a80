#include "api/thinking.h"

#include <openssl/evp.h>

#include "api/json_fields.h"
#include "api/prompt_codec.h"
#include "tokenizer/chat_template.h"

namespace zl::api {
namespace {

constexpr std::string_view kOpen = ThinkingFormat::kOpen;
constexpr std::string_view kClose = ThinkingFormat::kClose;
// What the engine forces when a budget runs out: the close as the templates
// write it, so the answer follows as it would have.
constexpr std::string_view kForcedClose = "\n</think>\n\n";

bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

// The longest proper suffix of `s` that is a prefix of `marker`.
size_t partial_marker_suffix(std::string_view s, std::string_view marker) {
  for (size_t k = std::min(s.size(), marker.size() - 1); k > 0; --k) {
    if (marker.starts_with(s.substr(s.size() - k))) return k;
  }
  return 0;
}

}  // namespace

// ---- ThinkingParser ----

ThinkingParser::ThinkingParser(bool starts_inside) : state_(starts_inside ? State::kInside : State::kStart) {}

void ThinkingParser::add(std::vector<ThoughtPiece>* out, bool thought, std::string_view text) {
  if (text.empty()) return;
  if (!out->empty() && out->back().thought == thought) {
    out->back().text.append(text);
  } else {
    out->push_back(ThoughtPiece{.thought = thought, .text = std::string(text)});
  }
}

void ThinkingParser::push(std::string_view text, std::vector<ThoughtPiece>* out) {
  switch (state_) {
    case State::kStart: return push_start(text, out);
    case State::kInside: return push_inside(text, out);
    case State::kAnswerStart: {
      while (!text.empty() && text.front() == '\n') text.remove_prefix(1);
      if (text.empty()) return;
      state_ = State::kAnswer;
      return add(out, false, text);
    }
    case State::kAnswer: return add(out, false, text);
  }
}

void ThinkingParser::push_start(std::string_view text, std::vector<ThoughtPiece>* out) {
  held_.append(text);
  size_t lead = 0;
  while (lead < held_.size() && is_space(held_[lead])) ++lead;
  const std::string_view t0 = std::string_view(held_).substr(lead);
  if (t0.size() < kOpen.size() && kOpen.starts_with(t0)) return;  // may still become "<think>"
  const std::string held = std::move(held_);
  held_.clear();
  const std::string_view t = std::string_view(held).substr(lead);
  if (t.starts_with(kOpen)) {
    state_ = State::kInside;
    return push_inside(t.substr(kOpen.size()), out);
  }
  state_ = State::kAnswer;  // no thought: the output is the answer, as it came
  add(out, false, held);
}

void ThinkingParser::push_inside(std::string_view text, std::vector<ThoughtPiece>* out) {
  held_.append(text);
  std::string_view all = held_;
  const size_t close = all.find(kClose);
  std::string_view body = close == std::string_view::npos ? all.substr(0, all.size() - partial_marker_suffix(all, kClose))
                                                          : all.substr(0, close);
  // Whitespace before the close is the template's, not the thought's (the
  // templates trim the reasoning they render).
  while (!body.empty() && is_space(body.back())) body.remove_suffix(1);
  if (!thought_started_) {
    while (!body.empty() && is_space(body.front())) body.remove_prefix(1);
  }
  if (!body.empty()) thought_started_ = true;
  add(out, true, body);
  if (close == std::string_view::npos) {
    held_.erase(0, static_cast<size_t>(body.data() + body.size() - all.data()));  // keep what follows `body`
    return;
  }
  std::string rest(all.substr(close + kClose.size()));
  held_.clear();
  state_ = State::kAnswerStart;
  push(rest, out);
}

void ThinkingParser::finish(std::vector<ThoughtPiece>* out) {
  std::string held = std::move(held_);
  held_.clear();
  if (state_ == State::kStart) {
    state_ = State::kAnswer;
    return add(out, false, held);
  }
  if (state_ != State::kInside) return;
  // An unterminated thought: what was held is thought too (its trailing whitespace dropped).
  std::string_view h = held;
  while (!h.empty() && is_space(h.back())) h.remove_suffix(1);
  if (!thought_started_) {
    while (!h.empty() && is_space(h.front())) h.remove_prefix(1);
  }
  add(out, true, h);
}

// ---- plan ----

ApiResult<ThinkingPlan> plan_thinking(const ChatRequest& chat, const PromptCodec& codec, StopParams* stop) {
  const ThinkingFormat f = codec.thinking_format();
  // A prefill (or a forced call) continues the answer itself: no thought.
  if (!f.enabled || chat.raw_prompt || chat.continue_final_message) return ThinkingPlan{};
  const PromptThought where = codec.prompt_thought(chat);
  // The template closed an empty thought itself (thinking off): the output
  // is the answer, constrained and parsed as one from its first token.
  if (where == PromptThought::kClosed) return ThinkingPlan{};
  ThinkingPlan plan{.active = true, .starts_inside = where == PromptThought::kOpen};
  if (!chat.thinking.budget_tokens || chat.thinking.enabled == false) return plan;
  Result<std::vector<int32_t>> end_ids = codec.encode_markup(kForcedClose);
  if (!end_ids.ok()) return from_status(end_ids.status());
  stop->span = SpanBudget{.open_at_start = plan.starts_inside,
                          .start_text = std::string(kOpen),
                          .end_text = std::string(kClose),
                          .end_ids = std::move(end_ids).value(),
                          .budget = *chat.thinking.budget_tokens};
  return plan;
}

// ---- signatures ----

ThoughtSigner::ThoughtSigner() : ctx_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr);
}

ThoughtSigner::~ThoughtSigner() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }

void ThoughtSigner::update(std::string_view text) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), text.data(), text.size());
}

std::string ThoughtSigner::signature() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), digest, &n);
  unsigned char b64[4 * ((EVP_MAX_MD_SIZE + 2) / 3) + 1];
  const int len = EVP_EncodeBlock(b64, digest, static_cast<int>(n));
  return "zl1." + std::string(reinterpret_cast<const char*>(b64), static_cast<size_t>(len));
}

std::string thought_signature(std::string_view text) {
  ThoughtSigner s;
  s.update(text);
  return s.signature();
}

// ---- Anthropic's `thinking` ----

ThinkingOptions parse_anthropic_thinking(const boost::json::value& v, std::optional<int64_t> max_tokens) {
  const auto& o = json_object(v, "thinking");
  const std::string type = json_string(require_field(o, "type", "thinking.type"), "thinking.type");
  if (type == "disabled") return ThinkingOptions{.enabled = false};
  if (type == "adaptive") return ThinkingOptions{.enabled = true};
  if (type != "enabled") {
    throw_field_error("thinking.type", "must be 'enabled', 'disabled' or 'adaptive'", ErrorReason::kInvalidValue);
  }
  const int64_t budget = json_int(require_field(o, "budget_tokens", "thinking.budget_tokens"), "thinking.budget_tokens",
                                  kMinThinkingBudget, INT32_MAX);
  if (max_tokens && budget >= *max_tokens) {
    throw_field_error("thinking.budget_tokens", "must be less than max_tokens (" + std::to_string(*max_tokens) + ")",
                      ErrorReason::kOutOfRange);
  }
  return ThinkingOptions{.enabled = true, .budget_tokens = static_cast<int32_t>(budget)};
}

}  // namespace zl::api
