#include "tokenizer/detokenizer.h"

#include "core/utf8.h"

namespace zl {

std::string Utf8Holdback::push(std::string_view bytes) {
  std::string buf;
  if (held_.empty()) {
    buf.assign(bytes);
  } else {
    buf = std::move(held_);
    buf.append(bytes);
  }
  held_.clear();
  const size_t keep = utf8::incomplete_suffix_length(buf);
  held_.assign(buf, buf.size() - keep, keep);
  buf.resize(buf.size() - keep);
  if (utf8::is_valid(buf)) return buf;
  return utf8::sanitize(buf);
}

std::string Utf8Holdback::flush() {
  std::string out;
  for (size_t i = 0; i < held_.size(); ++i) out += utf8::kReplacement;
  held_.clear();
  return out;
}

std::string IncrementalDetokenizer::push(TokenId id) {
  piece_.clear();
  tokenizer_->append_piece(id, opts_.render_special, &piece_);
  if (!seen_text_ && !piece_.empty()) {
    seen_text_ = true;
    if (opts_.strip_leading_space && piece_[0] == ' ') piece_.erase(0, 1);
  }
  return holdback_.push(piece_);
}

}  // namespace zl
