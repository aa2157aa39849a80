#include "engine/kv_cache.h"

#include <algorithm>
#include <climits>

#include "core/check.h"

namespace zl {
namespace {

// splitmix64's finalizer: a cheap bijective 64-bit mixer.
uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

constexpr uint64_t kGolden = 0x9e3779b97f4a7c15ULL;

}  // namespace

// ---------------------------------------------------------------------------------------------
// BlockPool

BlockPool::BlockPool(BlockPoolConfig config) : config_(config) {
  CHECK(config_.block_size >= 1) << "block_size " << config_.block_size;
  CHECK(config_.n_blocks >= 0) << "n_blocks " << config_.n_blocks;
  blocks_.resize(config_.n_blocks);
  tokens_.resize(static_cast<size_t>(config_.n_blocks) * config_.block_size);
  free_.resize(config_.n_blocks);
  for (int32_t i = 0; i < config_.n_blocks; ++i) free_[i] = i;
  free_size_ = config_.n_blocks;
}

int32_t BlockPool::n_blocks_for(int64_t n_tokens) const {
  if (n_tokens <= 0) return 0;
  const int64_t n = (n_tokens + config_.block_size - 1) / config_.block_size;
  return static_cast<int32_t>(std::min<int64_t>(n, INT32_MAX));
}

BlockPoolStats BlockPool::stats() const {
  return {.n_blocks = config_.n_blocks,
          .n_used = n_used_,
          .n_free = n_free(),
          .n_cached = n_cached_,
          .n_evictions = n_evictions_,
          .n_hit_blocks = n_hit_blocks_};
}

int32_t BlockPool::refcount(BlockId b) const {
  CHECK(b >= 0 && b < config_.n_blocks) << "block " << b;
  return blocks_[b].refcount;
}

bool BlockPool::is_cached(BlockId b) const {
  CHECK(b >= 0 && b < config_.n_blocks) << "block " << b;
  return blocks_[b].refcount == 0 && blocks_[b].hashed;
}

std::vector<BlockId> BlockPool::lru_order() const {
  std::vector<BlockId> out;
  for (int32_t b = lru_head_; b != kNone; b = blocks_[b].lru_next) out.push_back(b);
  return out;
}

std::vector<BlockId> BlockPool::free_order() const {
  std::vector<BlockId> out;
  for (size_t i = 0; i < free_size_; ++i) out.push_back(free_[(free_head_ + i) % free_.size()]);
  return out;
}

void BlockPool::check_invariants() const {
  int32_t n_used = 0, n_cached = 0, n_free_state = 0;
  for (int32_t b = 0; b < config_.n_blocks; ++b) {
    const Block& blk = blocks_[b];
    CHECK(blk.refcount >= 0) << "block " << b;
    if (blk.refcount > 0) {
      ++n_used;
    } else if (blk.hashed) {
      ++n_cached;
    } else {
      ++n_free_state;
    }
    if (blk.hashed) {
      auto it = index_.find(blk.hash);
      CHECK(it != index_.end() && it->second == b) << "block " << b << " hashed but not indexed";
    }
  }
  CHECK(n_used == n_used_) << n_used << " vs " << n_used_;
  CHECK(n_cached == n_cached_) << n_cached << " vs " << n_cached_;
  CHECK(n_free_state == n_free()) << n_free_state << " vs " << n_free();
  CHECK(n_used + n_cached + n_free() == config_.n_blocks);
  for (BlockId b : free_order()) {
    CHECK(blocks_[b].refcount == 0 && !blocks_[b].hashed) << "free block " << b;
  }
  int32_t n_lru = 0;
  int32_t prev = kNone;
  for (int32_t b = lru_head_; b != kNone; b = blocks_[b].lru_next) {
    CHECK(is_cached(b)) << "LRU block " << b;
    CHECK(blocks_[b].lru_prev == prev) << "LRU link at " << b;
    prev = b;
    ++n_lru;
    CHECK(n_lru <= config_.n_blocks) << "LRU cycle";
  }
  CHECK(prev == lru_tail_);
  CHECK(n_lru == n_cached_);
  for (const auto& [hash, b] : index_) {
    CHECK(blocks_[b].hashed && blocks_[b].hash == hash) << "index entry for block " << b;
  }
}

BlockHash BlockPool::tenant_salt(std::string_view tenant) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a, then mixed
  for (unsigned char c : tenant) h = (h ^ c) * 0x100000001b3ULL;
  return mix64(h ^ (kGolden * (tenant.size() + 1)));
}

BlockHash BlockPool::chain_hash(BlockHash parent, std::span<const int32_t> tokens) {
  uint64_t h = mix64(parent + kGolden);
  for (int32_t t : tokens) h = mix64(h ^ (static_cast<uint32_t>(t) + kGolden));
  return mix64(h + tokens.size());
}

std::span<const int32_t> BlockPool::block_tokens(BlockId b) const {
  return {tokens_.data() + static_cast<size_t>(b) * config_.block_size,
          static_cast<size_t>(config_.block_size)};
}

PrefixMatch BlockPool::match_prefix(BlockHash salt, std::span<const int32_t> tokens,
                                    int32_t max_blocks) const {
  PrefixMatch m;
  m.last_hash = salt;
  if (!config_.prefix_caching) return m;
  const int32_t bs = config_.block_size;
  const int64_t n_full = static_cast<int64_t>(tokens.size()) / bs;
  const int64_t limit = std::min<int64_t>(n_full, max_blocks);
  for (int64_t i = 0; i < limit; ++i) {
    auto chunk = tokens.subspan(i * bs, bs);
    const BlockHash h = chain_hash(m.last_hash, chunk);
    auto b = find(m.last_hash, chunk, h);
    if (!b) break;
    m.blocks.push_back(*b);
    if (blocks_[*b].refcount == 0) ++m.n_unreferenced;
    m.last_hash = h;
  }
  m.n_tokens = static_cast<int32_t>(m.blocks.size()) * bs;
  return m;
}

std::optional<BlockId> BlockPool::find(BlockHash parent, std::span<const int32_t> tokens,
                                       BlockHash hash) const {
  auto it = index_.find(hash);
  if (it == index_.end()) return std::nullopt;
  const Block& blk = blocks_[it->second];
  if (blk.parent != parent) return std::nullopt;
  auto stored = block_tokens(it->second);
  if (!std::equal(stored.begin(), stored.end(), tokens.begin(), tokens.end())) return std::nullopt;
  return it->second;
}

BlockId BlockPool::allocate() {
  CHECK(can_allocate(1)) << "allocate() with no free or cached block";
  BlockId b;
  if (free_size_ > 0) {
    b = free_[free_head_];
    free_head_ = (free_head_ + 1) % free_.size();
    --free_size_;
  } else {
    b = lru_head_;
    lru_unlink(b);
    unindex(b);
    --n_cached_;
    ++n_evictions_;
  }
  Block& blk = blocks_[b];
  DCHECK(blk.refcount == 0 && !blk.hashed);
  blk.refcount = 1;
  ++n_used_;
  return b;
}

void BlockPool::retain(BlockId b) {
  CHECK(b >= 0 && b < config_.n_blocks) << "block " << b;
  Block& blk = blocks_[b];
  if (blk.refcount == 0) {
    CHECK(blk.hashed) << "retain() of free block " << b;
    lru_unlink(b);
    --n_cached_;
    ++n_used_;
  }
  ++blk.refcount;
}

void BlockPool::release(BlockId b) {
  CHECK(b >= 0 && b < config_.n_blocks) << "block " << b;
  Block& blk = blocks_[b];
  CHECK(blk.refcount > 0) << "release() of unreferenced block " << b;
  if (--blk.refcount > 0) return;
  --n_used_;
  if (blk.hashed) {
    lru_push_back(b);
    ++n_cached_;
  } else {
    free_[(free_head_ + free_size_) % free_.size()] = b;
    ++free_size_;
  }
}

bool BlockPool::commit(BlockId b, BlockHash parent, std::span<const int32_t> tokens,
                       BlockHash hash) {
  CHECK(b >= 0 && b < config_.n_blocks) << "block " << b;
  CHECK(static_cast<int32_t>(tokens.size()) == config_.block_size);
  Block& blk = blocks_[b];
  CHECK(blk.refcount > 0) << "commit() of unreferenced block " << b;
  if (blk.hashed) return blk.hash == hash;
  if (index_.contains(hash)) return false;  // someone computed the same block first
  blk.hashed = true;
  blk.hash = hash;
  blk.parent = parent;
  std::copy(tokens.begin(), tokens.end(),
            tokens_.begin() + static_cast<size_t>(b) * config_.block_size);
  index_.emplace(hash, b);
  return true;
}

void BlockPool::lru_push_back(BlockId b) {
  Block& blk = blocks_[b];
  blk.lru_prev = lru_tail_;
  blk.lru_next = kNone;
  if (lru_tail_ != kNone) {
    blocks_[lru_tail_].lru_next = b;
  } else {
    lru_head_ = b;
  }
  lru_tail_ = b;
}

void BlockPool::lru_unlink(BlockId b) {
  Block& blk = blocks_[b];
  if (blk.lru_prev != kNone) {
    blocks_[blk.lru_prev].lru_next = blk.lru_next;
  } else {
    lru_head_ = blk.lru_next;
  }
  if (blk.lru_next != kNone) {
    blocks_[blk.lru_next].lru_prev = blk.lru_prev;
  } else {
    lru_tail_ = blk.lru_prev;
  }
  blk.lru_prev = blk.lru_next = kNone;
}

void BlockPool::unindex(BlockId b) {
  Block& blk = blocks_[b];
  if (!blk.hashed) return;
  index_.erase(blk.hash);
  blk.hashed = false;
  blk.hash = blk.parent = 0;
}

// ---------------------------------------------------------------------------------------------
// SequenceBlocks

SequenceBlocks::SequenceBlocks(BlockPool& pool, std::string_view tenant)
    : pool_(&pool), salt_(BlockPool::tenant_salt(tenant)), last_hash_(salt_) {}

SequenceBlocks::SequenceBlocks(SequenceBlocks&& other) noexcept
    : pool_(other.pool_),
      salt_(other.salt_),
      table_(std::move(other.table_)),
      n_committed_(other.n_committed_),
      last_hash_(other.last_hash_) {
  other.table_.clear();
  other.n_committed_ = 0;
  other.last_hash_ = other.salt_;
}

SequenceBlocks& SequenceBlocks::operator=(SequenceBlocks&& other) noexcept {
  if (this == &other) return *this;
  release();
  pool_ = other.pool_;
  salt_ = other.salt_;
  table_ = std::move(other.table_);
  n_committed_ = other.n_committed_;
  last_hash_ = other.last_hash_;
  other.table_.clear();
  other.n_committed_ = 0;
  other.last_hash_ = other.salt_;
  return *this;
}

int32_t SequenceBlocks::capacity() const {
  return pool_ ? n_blocks() * pool_->block_size() : 0;
}

PrefixMatch SequenceBlocks::find_prefix(std::span<const int32_t> tokens) const {
  CHECK(pool_) << "detached SequenceBlocks";
  if (tokens.empty()) {
    PrefixMatch none;
    none.last_hash = salt_;
    return none;
  }
  const int32_t max_blocks = static_cast<int32_t>((tokens.size() - 1) / pool_->block_size());
  return pool_->match_prefix(salt_, tokens, max_blocks);
}

std::optional<int32_t> SequenceBlocks::allocate_prompt(std::span<const int32_t> tokens,
                                                       int32_t max_compute, bool use_cache) {
  CHECK(pool_) << "detached SequenceBlocks";
  CHECK(table_.empty()) << "allocate_prompt() on a sequence that holds blocks";
  CHECK(!tokens.empty()) << "allocate_prompt() with no tokens";
  CHECK(max_compute >= 1) << "max_compute " << max_compute;
  PrefixMatch m = use_cache ? find_prefix(tokens) : PrefixMatch{.last_hash = salt_};
  const int64_t n_rest = static_cast<int64_t>(tokens.size()) - m.n_tokens;
  const int64_t n_hold = m.n_tokens + std::min<int64_t>(max_compute, n_rest);
  const int32_t n_new = pool_->n_blocks_for(n_hold) - static_cast<int32_t>(m.blocks.size());
  // Taking the matched cached blocks removes them from what allocate() could evict.
  if (!pool_->can_allocate(n_new + m.n_unreferenced)) return std::nullopt;
  for (BlockId b : m.blocks) pool_->retain(b);  // before allocate(): they must not be evicted
  pool_->n_hit_blocks_ += static_cast<int64_t>(m.blocks.size());
  table_ = std::move(m.blocks);
  n_committed_ = n_blocks();
  last_hash_ = m.last_hash;
  for (int32_t i = 0; i < n_new; ++i) table_.push_back(pool_->allocate());
  return m.n_tokens;
}

int32_t SequenceBlocks::n_blocks_needed(int32_t n_tokens) const {
  CHECK(pool_) << "detached SequenceBlocks";
  return std::max(0, pool_->n_blocks_for(n_tokens) - n_blocks());
}

bool SequenceBlocks::reserve(int32_t n_tokens) {
  const int32_t n_new = n_blocks_needed(n_tokens);
  if (!pool_->can_allocate(n_new)) return false;
  for (int32_t i = 0; i < n_new; ++i) table_.push_back(pool_->allocate());
  return true;
}

void SequenceBlocks::commit(std::span<const int32_t> tokens, int32_t n_computed) {
  CHECK(pool_) << "detached SequenceBlocks";
  CHECK(n_computed >= 0 && static_cast<size_t>(n_computed) <= tokens.size())
      << "n_computed " << n_computed << " of " << tokens.size() << " tokens";
  CHECK(n_computed <= capacity()) << "n_computed " << n_computed << " > capacity " << capacity();
  if (!pool_->prefix_caching()) return;
  const int32_t bs = pool_->block_size();
  const int32_t n_full = n_computed / bs;
  for (; n_committed_ < n_full; ++n_committed_) {
    auto chunk = tokens.subspan(static_cast<size_t>(n_committed_) * bs, bs);
    const BlockHash h = BlockPool::chain_hash(last_hash_, chunk);
    pool_->commit(table_[n_committed_], last_hash_, chunk, h);
    last_hash_ = h;  // the chain follows content, indexed or not
  }
}

void SequenceBlocks::shrink(int32_t n_tokens) {
  CHECK(pool_) << "detached SequenceBlocks";
  const size_t keep = static_cast<size_t>(std::max(pool_->n_blocks_for(std::max(n_tokens, 0)), n_committed_));
  while (table_.size() > keep) {
    pool_->release(table_.back());
    table_.pop_back();
  }
}

void SequenceBlocks::release() {
  if (!pool_) return;
  for (auto it = table_.rbegin(); it != table_.rend(); ++it) pool_->release(*it);
  table_.clear();
  n_committed_ = 0;
  last_hash_ = salt_;
}

}  // namespace zl
