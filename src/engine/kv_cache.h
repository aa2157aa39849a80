// Paged KV cache bookkeeping: which block ids hold which positions of which sequence.
//
// Design
// ------
// The KV storage itself (floats per layer per block) belongs to the model backend. This file
// only hands out block ids 0..n_blocks-1 and keeps their accounting. A block holds
// `block_size` consecutive positions of one sequence; a sequence's block table maps position p
// to block table[p / block_size], slot p % block_size.
//
// Every block is in exactly one of three states:
//   free    refcount 0, no hash          in the free list (FIFO: allocated from the front,
//                                        released to the back; initially 0, 1, 2, ...)
//   used    refcount >= 1                held by that many SequenceBlocks
//   cached  refcount 0, full and hashed  in the LRU list and the hash index, reusable by a
//                                        later prompt with the same prefix
// so n_used + n_free + n_cached == n_blocks at all times.
//
// Prefix caching. Once all block_size positions of a block are computed, its owner commits it:
// its hash is H(parent_hash, its tokens), where the parent of a sequence's first block is the
// tenant salt (a hash of Request::tenant). Equal hashes therefore mean "same tokens from
// position 0, same tenant", and one tenant can never hit (or time) another tenant's blocks.
// Lookups also compare the stored parent hash and tokens, so a 64-bit hash collision cannot
// hand out wrong KV (only a collision of two tenants' salts could, odds 2^-64).
// A block whose refcount drops to 0 stays findable ("cached") and is evicted — least recently
// released first — only when a block is needed and the free list is empty. A sequence
// releases its blocks last-to-first, so a chain's deeper blocks are evicted before the blocks
// they depend on (a lookup walks a chain from its root and stops at the first miss).
//
// No copy-on-write. Only full, committed blocks are ever shared, and a sequence writes KV only
// at positions >= its n_computed. A prefix match stops at least one token short of the prompt
// (the last token must be computed to get logits), at a block boundary, so every position a
// sequence will write lies in a block it allocated itself and nobody else can hold yet.
// When two sequences compute the same block at the same time, the first commit is indexed and
// the second block stays private (freed, not cached, on release).
//
// Ownership. SequenceBlocks is the only way to hold blocks: it returns them in its destructor
// (and on release()), so a cancelled or failed request cannot leak a block. The pool must
// outlive every SequenceBlocks attached to it.
//
// Thread-safety: none. The pool and all SequenceBlocks are owned by the engine thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace zl {

using BlockId = int32_t;
using BlockHash = uint64_t;

struct BlockPoolConfig {
  int32_t block_size = 16;      // tokens per block
  int32_t n_blocks = 0;         // ids 0..n_blocks-1
  bool prefix_caching = true;   // false: nothing is ever committed or matched
};

struct BlockPoolStats {
  int32_t n_blocks = 0;
  int32_t n_used = 0;           // refcount >= 1
  int32_t n_free = 0;           // refcount 0, no content worth keeping
  int32_t n_cached = 0;         // refcount 0, findable by hash, evictable
  int64_t n_evictions = 0;      // cached blocks reused for something else, since start
  int64_t n_hit_blocks = 0;     // blocks served by prefix matches, since start
};

// The result of a prefix lookup. Valid only until the pool next changes.
struct PrefixMatch {
  std::vector<BlockId> blocks;  // matched blocks, in position order
  BlockHash last_hash = 0;      // chain hash of the last matched block (the salt if none)
  int32_t n_tokens = 0;         // blocks.size() * block_size
  int32_t n_unreferenced = 0;   // matched blocks now cached (refcount 0): taking them removes
                                // them from the evictable set
};

class BlockPool {
 public:
  // CHECKs block_size >= 1 and n_blocks >= 0. Cost O(n_blocks).
  explicit BlockPool(BlockPoolConfig config);
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  int32_t block_size() const { return config_.block_size; }
  int32_t n_blocks() const { return config_.n_blocks; }
  bool prefix_caching() const { return config_.prefix_caching; }

  int32_t n_used() const { return n_used_; }
  int32_t n_free() const { return static_cast<int32_t>(free_size_); }
  int32_t n_cached() const { return n_cached_; }
  // Blocks that allocation can take now: free ones, then evicted cached ones.
  int32_t n_available() const { return n_free() + n_cached_; }
  bool can_allocate(int32_t n) const { return n <= n_available(); }
  // Blocks needed to hold n_tokens positions: ceil(n_tokens / block_size).
  int32_t n_blocks_for(int64_t n_tokens) const;
  BlockPoolStats stats() const;

  // Inspection, O(1) unless noted (tests, metrics, debugging).
  int32_t refcount(BlockId b) const;
  bool is_cached(BlockId b) const;             // refcount 0 and hashed
  // Cached blocks, next to be evicted first. O(n_cached).
  std::vector<BlockId> lru_order() const;
  // The free list, next to be allocated first. O(n_free).
  std::vector<BlockId> free_order() const;
  // CHECKs every internal invariant (states, counts, list links, index). O(n_blocks).
  void check_invariants() const;

  // The parent hash of a tenant's first block.
  static BlockHash tenant_salt(std::string_view tenant);
  // H(parent, tokens): the chain hash of a full block.
  static BlockHash chain_hash(BlockHash parent, std::span<const int32_t> tokens);

  // Longest chain of committed blocks matching tokens[0, n_blocks * block_size) for the tenant
  // whose salt is `salt`, at most max_blocks blocks. Pure: takes nothing, touches no LRU order.
  // Cost O(matched tokens).
  PrefixMatch match_prefix(BlockHash salt, std::span<const int32_t> tokens,
                           int32_t max_blocks) const;

 private:
  friend class SequenceBlocks;

  static constexpr int32_t kNone = -1;
  struct Block {
    int32_t refcount = 0;
    bool hashed = false;        // in index_ (content is tokens_ row b, chained on parent)
    BlockHash hash = 0;
    BlockHash parent = 0;
    int32_t lru_prev = kNone;   // links in the cached list, when refcount == 0 && hashed
    int32_t lru_next = kNone;
  };

  // note: call only if can_allocate(1). Takes the front of the free list, else evicts the
  // least recently released cached block. Returns it with refcount 1. O(1).
  BlockId allocate();
  // refcount++ (a cached block leaves the LRU list). O(1).
  void retain(BlockId b);
  // refcount--; at 0 the block becomes cached (if hashed) or free. O(1).
  void release(BlockId b);
  // Indexes the full block b (held by the caller) under `hash`. If another block already has
  // this hash, b stays unindexed and false is returned. O(block_size).
  bool commit(BlockId b, BlockHash parent, std::span<const int32_t> tokens, BlockHash hash);
  // Verified lookup of one block. O(block_size).
  std::optional<BlockId> find(BlockHash parent, std::span<const int32_t> tokens,
                              BlockHash hash) const;

  void lru_push_back(BlockId b);
  void lru_unlink(BlockId b);
  void unindex(BlockId b);
  std::span<const int32_t> block_tokens(BlockId b) const;

  BlockPoolConfig config_;
  std::vector<Block> blocks_;
  std::vector<int32_t> tokens_;             // n_blocks x block_size: content of hashed blocks
  std::vector<BlockId> free_;               // ring buffer used as a FIFO
  size_t free_head_ = 0;                    // index in free_ of the next block to allocate
  size_t free_size_ = 0;
  int32_t lru_head_ = kNone;                // least recently released cached block
  int32_t lru_tail_ = kNone;
  int32_t n_used_ = 0;
  int32_t n_cached_ = 0;
  int64_t n_evictions_ = 0;
  int64_t n_hit_blocks_ = 0;
  std::unordered_map<BlockHash, BlockId> index_;
};

// The blocks of one sequence: its block table, and the owner that returns them to the pool.
// Move-only. Destruction or release() returns every block (last to first). A default
// constructed (detached) value holds nothing and accepts only release().
class SequenceBlocks {
 public:
  SequenceBlocks() = default;
  SequenceBlocks(BlockPool& pool, std::string_view tenant);
  ~SequenceBlocks() { release(); }
  SequenceBlocks(SequenceBlocks&& other) noexcept;
  SequenceBlocks& operator=(SequenceBlocks&& other) noexcept;
  SequenceBlocks(const SequenceBlocks&) = delete;
  SequenceBlocks& operator=(const SequenceBlocks&) = delete;

  // The block ids, in position order. Position p lives in table()[p / block_size].
  const std::vector<BlockId>& table() const { return table_; }
  int32_t n_blocks() const { return static_cast<int32_t>(table_.size()); }
  // Positions the table can hold: n_blocks() * block_size.
  int32_t capacity() const;
  int32_t n_committed_blocks() const { return n_committed_; }
  BlockHash salt() const { return salt_; }

  // Cached prefix of `tokens` for this tenant, at most (tokens.size() - 1) / block_size blocks
  // (the last token is always left to compute). Pure. O(matched tokens).
  PrefixMatch find_prefix(std::span<const int32_t> tokens) const;

  // For a sequence that holds no blocks yet: takes the cached prefix of `tokens` and reserves
  // room for n_cached + min(max_compute, tokens.size() - n_cached) positions, n_cached being
  // the prefix length (0 without use_cache). All or nothing: returns n_cached, or nullopt
  // (nothing taken) when the pool cannot supply the blocks. CHECKs tokens is not empty.
  // O(tokens + blocks).
  std::optional<int32_t> allocate_prompt(std::span<const int32_t> tokens,
                                         int32_t max_compute = INT32_MAX, bool use_cache = true);

  // Blocks the pool must supply for the table to hold n_tokens positions (0 if it already can).
  int32_t n_blocks_needed(int32_t n_tokens) const;
  // Grows the table to hold n_tokens positions. All or nothing: false (table unchanged) when
  // the pool is short. O(new blocks).
  bool reserve(int32_t n_tokens);

  // Returns the blocks past those needed for n_tokens positions (never a committed one), last
  // to first: what a rejected speculative draft had reserved (engine.cc). O(returned blocks).
  void shrink(int32_t n_tokens);

  // Records that positions [0, n_computed) hold the KV of tokens[0, n_computed): every full
  // block among them not yet committed is hashed and indexed for prefix reuse. `tokens` is the
  // sequence's token list (at least n_computed long). No-op without prefix caching.
  // O(newly full blocks * block_size).
  void commit(std::span<const int32_t> tokens, int32_t n_computed);

  // Returns every block (last to first) and empties the table. Stays attached to the pool, so
  // allocate_prompt() may start over (a preempted sequence recomputes). Idempotent. O(blocks).
  void release();

 private:
  BlockPool* pool_ = nullptr;
  BlockHash salt_ = 0;
  std::vector<BlockId> table_;
  int32_t n_committed_ = 0;     // table_[0, n_committed_) are committed full blocks
  BlockHash last_hash_ = 0;     // chain hash of block n_committed_ - 1 (salt_ if none)
};

}  // namespace zl
