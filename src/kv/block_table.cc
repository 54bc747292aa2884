#include "kv/block_table.h"

#include <algorithm>
#include <optional>

#include "util/check.h"

namespace tokenmill::kv {

BlockTable::BlockTable(BlockAllocator& allocator, int32_t block_size)
    : allocator_(&allocator), block_size_(block_size) {
  TM_CHECK(block_size > 0);
}

BlockTable::BlockTable(BlockTable&& other) noexcept
    : allocator_(other.allocator_),
      block_size_(other.block_size_),
      num_tokens_(other.num_tokens_),
      first_block_(other.first_block_),
      blocks_(std::move(other.blocks_)) {
  other.blocks_.clear();
  other.num_tokens_ = 0;
  other.first_block_ = 0;
}

BlockTable& BlockTable::operator=(BlockTable&& other) noexcept {
  if (this == &other) return *this;
  free();
  allocator_ = other.allocator_;
  block_size_ = other.block_size_;
  num_tokens_ = other.num_tokens_;
  first_block_ = other.first_block_;
  blocks_ = std::move(other.blocks_);
  other.blocks_.clear();
  other.num_tokens_ = 0;
  other.first_block_ = 0;
  return *this;
}

namespace {

// True when the next written slot lies in the last block and that block is
// shared, i.e. writing it needs a private copy first.
bool last_block_needs_copy(int64_t num_tokens, int32_t block_size, const std::vector<BlockId>& blocks,
                           const BlockAllocator& allocator) {
  return num_tokens % block_size != 0 && !blocks.empty() && allocator.ref_count(blocks.back()) > 1;
}

}  // namespace

int64_t BlockTable::blocks_needed(int64_t n) const {
  if (n <= 0) return 0;
  TM_CHECK(allocator_ != nullptr);
  const BlockAllocator& allocator = *allocator_;
  const int64_t slack = end_block() * block_size_ - num_tokens_;
  const int64_t beyond = std::max<int64_t>(0, n - slack);
  const int64_t cow = last_block_needs_copy(num_tokens_, block_size_, blocks_, allocator) ? 1 : 0;
  return (beyond + block_size_ - 1) / block_size_ + cow;
}

int64_t BlockTable::max_appendable(int64_t available) const {
  TM_CHECK(allocator_ != nullptr);
  const BlockAllocator& allocator = *allocator_;
  int64_t slack = end_block() * block_size_ - num_tokens_;
  if (last_block_needs_copy(num_tokens_, block_size_, blocks_, allocator)) {
    if (available < 1) return 0;
    --available;
  }
  return slack + std::max<int64_t>(0, available) * block_size_;
}

bool BlockTable::append_slots(int64_t n, std::vector<BlockCopy>* copies) {
  TM_CHECK(n >= 0);
  if (n == 0) return true;
  TM_CHECK(allocator_ != nullptr);
  BlockAllocator& allocator = *allocator_;
  if (blocks_needed(n) > allocator.num_available()) return false;
  if (last_block_needs_copy(num_tokens_, block_size_, blocks_, allocator)) {
    const BlockId src = blocks_.back();
    const std::optional<BlockId> dst = allocator.allocate();
    TM_CHECK(dst.has_value());
    TM_CHECK(copies != nullptr);
    copies->push_back({src, *dst});
    allocator.release(src);
    blocks_.back() = *dst;
  }
  const int64_t target = num_tokens_ + n;
  while (end_block() * block_size_ < target) {
    const std::optional<BlockId> id = allocator.allocate();
    TM_CHECK(id.has_value());
    blocks_.push_back(*id);
  }
  num_tokens_ = target;
  return true;
}

void BlockTable::assign_prefix(std::span<const BlockId> blocks, int64_t first_block) {
  TM_CHECK(blocks_.empty() && num_tokens_ == 0 && first_block >= 0);
  blocks_.assign(blocks.begin(), blocks.end());
  first_block_ = first_block;
  num_tokens_ = end_block() * block_size_;
}

int64_t BlockTable::drop_before(int64_t pos) {
  TM_CHECK(pos <= num_tokens_);
  // Logical block b ends at (b + 1) * block_size; it goes when that is <= pos.
  const int64_t keep_from = std::max<int64_t>(first_block_, pos / block_size_);
  const int64_t n = std::min<int64_t>(keep_from - first_block_, static_cast<int64_t>(blocks_.size()));
  for (int64_t i = 0; i < n; ++i) allocator_->release(blocks_[static_cast<size_t>(i)]);
  blocks_.erase(blocks_.begin(), blocks_.begin() + n);
  first_block_ += n;
  return n;
}

void BlockTable::remove_block(int64_t k) {
  TM_CHECK(k >= 0 && (k + 1) * block_size_ <= num_tokens_);
  if (k >= first_block_) {
    const auto it = blocks_.begin() + (k - first_block_);
    allocator_->release(*it);
    blocks_.erase(it);
  } else {
    --first_block_;
  }
  num_tokens_ -= block_size_;
}

bool BlockTable::is_shared(size_t i) const {
  const BlockId id = blocks_.at(i);
  return allocator_->ref_count(id) > 1 || allocator_->is_cached(id);
}

bool BlockTable::make_private(size_t i, std::vector<BlockCopy>* copies) {
  if (!is_shared(i)) return true;
  const std::optional<BlockId> fresh = allocator_->allocate();
  if (!fresh) return false;
  copies->push_back({blocks_[i], *fresh});
  allocator_->release(blocks_[i]);
  blocks_[i] = *fresh;
  return true;
}

BlockTable BlockTable::fork() const {
  TM_CHECK(allocator_ != nullptr);
  for (BlockId id : blocks_) allocator_->retain(id);
  BlockTable copy(*allocator_, block_size_);
  copy.blocks_ = blocks_;
  copy.num_tokens_ = num_tokens_;
  copy.first_block_ = first_block_;
  return copy;
}

void BlockTable::truncate(int64_t n) {
  TM_CHECK(n >= first_block_ * block_size_ && n <= num_tokens_);
  const int64_t keep_end = std::max<int64_t>(first_block_, (n + block_size_ - 1) / block_size_);
  while (end_block() > keep_end) {
    allocator_->release(blocks_.back());
    blocks_.pop_back();
  }
  num_tokens_ = n;
}

void BlockTable::free() {
  // Tail first: cached blocks then sit in the evictable LRU list tail-first,
  // so eviction eats a cached chain from its end and its prefix stays usable.
  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) allocator_->release(*it);
  blocks_.clear();
  num_tokens_ = 0;
  first_block_ = 0;
}

}  // namespace tokenmill::kv
