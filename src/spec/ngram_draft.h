// Speculative decoding drafts from the sequence itself (prompt lookup / n-gram drafting), and
// the per-sequence controller that decides how long a draft to try.
//
// Design
// ------
// Agents' answers copy spans of their input, and random-weight models loop: the next tokens
// often already appear earlier in the sequence. NgramIndex keeps, for every n in [n_min, n_max],
// a hash of each n-gram of the sequence -> the position right after its most recent occurrence
// that has a successor. draft() looks up the sequence's last n tokens (longest n first), and
// proposes the tokens that followed that earlier occurrence. When the occurrence is so recent
// that its successors run into the end of the sequence (a loop of period p < k), the draft
// continues the period (token j of the draft repeats token j - p), which is what the loop does.
//
// The engine verifies a draft of k tokens in one forward pass of k + 1 positions (engine.cc);
// the index only proposes and never decides what is emitted, so a wrong draft costs compute,
// never correctness.
//
// Costs: extend() is O(new tokens x levels x n_max) (hashing; a 20k-token prompt is indexed
// once, in ~1 ms); draft() is O(levels x n_max + k). Memory: one hash-map entry per indexed
// n-gram (levels x tokens, at most max_tokens x levels: tokens past max_tokens are not indexed,
// the index keeps what it has). Thread-safety: none; one per sequence, engine thread.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace zl::spec {

struct NgramConfig {
  int32_t n_min = 2;               // shortest n-gram matched (>= 1)
  int32_t n_max = 4;               // longest n-gram matched (>= n_min, <= kMaxNgram)
  int32_t max_tokens = 1 << 20;    // tokens indexed at most (bounds the memory)
};

inline constexpr int32_t kMaxNgram = 16;

class NgramIndex {
 public:
  // CHECKs 1 <= n_min <= n_max <= kMaxNgram.
  explicit NgramIndex(NgramConfig config = {});

  // Indexes what `tokens` holds beyond what was indexed before. `tokens` must extend the
  // token list of the previous calls (a sequence only grows); shorter lists CHECK-fail.
  void extend(std::span<const int32_t> tokens);

  // Up to `k` tokens likely to follow `tokens` (the whole sequence, as last passed to
  // extend(); extend() is called here first), written to *out (cleared). Empty when no
  // earlier occurrence of the last n_min tokens exists. The match is verified token by token,
  // so a hash collision proposes nothing rather than a wrong continuation.
  void draft(std::span<const int32_t> tokens, int32_t k, std::vector<int32_t>* out);

  int64_t n_indexed() const { return n_indexed_; }
  size_t n_entries() const;
  const NgramConfig& config() const { return config_; }

 private:
  static uint64_t hash(std::span<const int32_t> gram);

  NgramConfig config_;
  int64_t n_indexed_ = 0;  // tokens[0, n_indexed_) were seen by extend()
  // Per n (index n - n_min): hash of an n-gram ending before position e -> e (the position of
  // its successor), the most recent one.
  std::vector<std::unordered_map<uint64_t, int32_t>> maps_;
};

// How long a draft each step should try, following the recent acceptance: start at k_max;
// all accepted -> double (up to k_max); a partial acceptance -> the accepted count + 1; none
// accepted -> halve; after kMissesToBackOff passes in a row without an accepted token, drafting
// stops for a back-off of steps that doubles with each such run (16 .. 512 steps) and is reset
// by a fully accepted draft. So text that does not repeat costs a few short verify passes
// now and then, and looping text runs at k_max. Pure state machine, O(1).
class DraftLength {
 public:
  static constexpr int32_t kMissesToBackOff = 3;
  static constexpr int32_t kMinBackOff = 16, kMaxBackOff = 512;

  explicit DraftLength(int32_t k_max = 8);

  // The draft length to try at this step (0: don't draft now). Counts a step of back-off.
  int32_t next();
  // The outcome of a verified draft of `n_draft` tokens of which `n_accepted` matched.
  void on_verified(int32_t n_draft, int32_t n_accepted);

  int32_t k_max() const { return k_max_; }
  int32_t k() const { return k_; }

 private:
  int32_t k_max_;
  int32_t k_;
  int32_t n_misses_ = 0;     // verify passes in a row without an accepted token
  int32_t back_off_ = 0;     // steps left without drafting
  int32_t next_back_off_ = kMinBackOff;
};

}  // namespace zl::spec
