#include "spec/ngram_draft.h"

#include <algorithm>

#include "core/check.h"

namespace zl::spec {

NgramIndex::NgramIndex(NgramConfig config) : config_(config) {
  CHECK(config_.n_min >= 1 && config_.n_min <= config_.n_max && config_.n_max <= kMaxNgram)
      << "n-gram sizes " << config_.n_min << ".." << config_.n_max;
  CHECK(config_.max_tokens >= 0);
  maps_.resize(static_cast<size_t>(config_.n_max - config_.n_min + 1));
}

uint64_t NgramIndex::hash(std::span<const int32_t> gram) {
  // FNV-1a over the ids, then a final mix (splitmix64's) so that near ids spread.
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : gram) {
    h ^= static_cast<uint32_t>(t);
    h *= 1099511628211ull;
  }
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

void NgramIndex::extend(std::span<const int32_t> tokens) {
  const int64_t n = static_cast<int64_t>(tokens.size());
  CHECK(n >= n_indexed_) << "the token list shrank from " << n_indexed_ << " to " << n;
  // An n-gram is indexed once its successor exists: ending before e, for e < n.
  const int64_t end = std::min<int64_t>(n - 1, config_.max_tokens);
  for (int64_t e = std::max<int64_t>(n_indexed_, 1); e <= end; ++e) {
    for (int32_t g = config_.n_min; g <= config_.n_max && g <= e; ++g) {
      maps_[g - config_.n_min][hash(tokens.subspan(e - g, g))] = static_cast<int32_t>(e);
    }
  }
  n_indexed_ = std::max<int64_t>(n_indexed_, std::min<int64_t>(n, config_.max_tokens + 1));
}

void NgramIndex::draft(std::span<const int32_t> tokens, int32_t k, std::vector<int32_t>* out) {
  out->clear();
  extend(tokens);
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (k <= 0) return;
  for (int32_t g = std::min<int64_t>(config_.n_max, n - 1); g >= config_.n_min; --g) {
    const std::span<const int32_t> suffix = tokens.subspan(n - g, g);
    const auto& map = maps_[g - config_.n_min];
    auto it = map.find(hash(suffix));
    if (it == map.end()) continue;
    const int64_t e = it->second;  // successor position of the earlier occurrence, < n
    if (e < g || !std::equal(suffix.begin(), suffix.end(), tokens.begin() + (e - g))) continue;  // collision
    const int64_t period = n - e;  // > 0
    for (int32_t j = 0; j < k; ++j) {
      // Past the end of the sequence the draft repeats itself with the loop's period.
      out->push_back(e + j < n ? tokens[e + j] : (*out)[j - period]);
    }
    return;
  }
}

size_t NgramIndex::n_entries() const {
  size_t n = 0;
  for (const auto& m : maps_) n += m.size();
  return n;
}

DraftLength::DraftLength(int32_t k_max) : k_max_(std::max(k_max, 1)), k_(k_max_) {}

int32_t DraftLength::next() {
  if (back_off_ > 0) {
    --back_off_;
    return 0;
  }
  return k_;
}

void DraftLength::on_verified(int32_t n_draft, int32_t n_accepted) {
  if (n_draft <= 0) return;
  if (n_accepted >= n_draft) {
    k_ = std::min(k_max_, std::max(k_ * 2, n_draft * 2));
    n_misses_ = 0;
    next_back_off_ = kMinBackOff;
    return;
  }
  if (n_accepted > 0) {
    k_ = std::clamp(n_accepted + 1, 1, k_max_);
    n_misses_ = 0;
    return;
  }
  k_ = std::max(1, k_ / 2);
  if (++n_misses_ >= kMissesToBackOff) {
    back_off_ = next_back_off_;
    next_back_off_ = std::min(kMaxBackOff, next_back_off_ * 2);
    n_misses_ = 0;
  }
}

}  // namespace zl::spec
