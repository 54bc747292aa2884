#include "kv/paged_kv_storage.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "util/check.h"
#include "util/error.h"

namespace tokenmill::kv {
namespace {

constexpr int64_t kAlign = 64;

int64_t checked_mul(int64_t a, int64_t b, const char* what) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) fail("KV cache: {} overflows ({} x {})", what, a, b);
  return r;
}

int64_t round_up(int64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

void validate(const KvGeometry& g) {
  if (g.n_layer <= 0 || g.n_kv_dim <= 0 || g.block_size <= 0)
    fail("KV cache geometry must be positive: n_layer={}, n_kv_dim={}, block_size={}", g.n_layer, g.n_kv_dim,
         g.block_size);
  if (g.dtype != KvDtype::F32 && g.dtype != KvDtype::F16 && !kv_dtype_quantized(g.dtype))
    fail("KV cache: unknown element type");
  if (g.n_kv_dim > (int64_t{1} << 30)) fail("KV cache: n_kv_dim {} is too large", g.n_kv_dim);
  if (kv_storage_dtype(g.dtype) == KvDtype::Q4_0 && kv_quant_group(g.n_kv_dim) % 2 != 0)
    fail("KV cache: q4_0 packs two elements per byte, and this model's {} K/V elements per position are odd",
         g.n_kv_dim);
}

// Bytes of one layer's K (or V) array of `num_blocks` blocks.
int64_t array_bytes(const KvGeometry& g, int64_t num_blocks) {
  const int64_t row = kv_row_bytes(g.dtype, g.n_kv_dim);
  return checked_mul(checked_mul(num_blocks, g.block_size, "positions"), row, "layer size");
}

// Total bytes of the pool: 2 * n_layer arrays, each padded to kAlign.
int64_t pool_bytes(const KvGeometry& g, int64_t num_blocks) {
  const int64_t stride = array_bytes(g, num_blocks);
  if (stride > std::numeric_limits<int64_t>::max() - kAlign) fail("KV cache: layer size overflows");
  return checked_mul(checked_mul(2, g.n_layer, "arrays"), round_up(stride), "pool size");
}

void free_aligned(uint8_t* p) { std::free(p); }

}  // namespace

int64_t KvGeometry::bytes_per_token() const { return 2 * n_layer * kv_row_bytes(dtype, n_kv_dim); }

int64_t KvGeometry::bytes_per_block() const { return bytes_per_token() * block_size; }

PagedKvStorage::PagedKvStorage(const KvGeometry& geometry, int64_t num_blocks)
    : geometry_(geometry), num_blocks_(num_blocks), memory_(nullptr, free_aligned) {
  validate(geometry_);
  if (num_blocks < 1 || num_blocks > std::numeric_limits<int32_t>::max())
    fail("KV cache: block count {} is outside [1, {}]", num_blocks, std::numeric_limits<int32_t>::max());
  layer_bytes_ = array_bytes(geometry_, num_blocks_);
  array_stride_ = round_up(layer_bytes_);
  const int64_t total = pool_bytes(geometry_, num_blocks_);
  // Every array stride is a multiple of kAlign, so `total` is too, as
  // aligned_alloc requires.
  memory_.reset(static_cast<uint8_t*>(std::aligned_alloc(kAlign, static_cast<size_t>(total))));
  if (memory_ == nullptr) fail("KV cache: cannot allocate {} bytes ({} blocks)", total, num_blocks);
}

int64_t PagedKvStorage::blocks_for_budget(const KvGeometry& geometry, int64_t bytes) {
  validate(geometry);
  if (bytes <= 0) return 0;
  int64_t n = std::min<int64_t>(bytes / geometry.bytes_per_block(), std::numeric_limits<int32_t>::max());
  // The padding adds at most 2 * n_layer * 63 bytes, so few steps back suffice.
  while (n > 0 && pool_bytes(geometry, n) > bytes) --n;
  return n;
}

int64_t PagedKvStorage::total_bytes() const { return 2 * geometry_.n_layer * array_stride_; }

uint8_t* PagedKvStorage::keys(int64_t layer) {
  TM_DCHECK(layer >= 0 && layer < geometry_.n_layer);
  return memory_.get() + 2 * layer * array_stride_;
}

uint8_t* PagedKvStorage::values(int64_t layer) { return keys(layer) + array_stride_; }

const uint8_t* PagedKvStorage::keys(int64_t layer) const { return const_cast<PagedKvStorage*>(this)->keys(layer); }

const uint8_t* PagedKvStorage::values(int64_t layer) const { return const_cast<PagedKvStorage*>(this)->values(layer); }

void PagedKvStorage::copy_block(int32_t src, int32_t dst) {
  TM_CHECK(src >= 0 && src < num_blocks_ && dst >= 0 && dst < num_blocks_);
  if (src == dst) return;
  const int64_t block_bytes = layer_bytes_ / num_blocks_;
  for (int64_t layer = 0; layer < geometry_.n_layer; ++layer) {
    for (uint8_t* base : {keys(layer), values(layer)}) {
      std::memcpy(base + dst * block_bytes, base + src * block_bytes, static_cast<size_t>(block_bytes));
    }
  }
}

}  // namespace tokenmill::kv
