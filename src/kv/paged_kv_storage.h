// The memory of the paged KV cache: a pool of fixed-size blocks, each holding
// `block_size` consecutive positions of K and V for every layer. Which block
// belongs to which sequence is decided elsewhere (block allocator, block
// tables); this class only owns the bytes and says where a position lives.
//
// Layout, per layer: K and V each [num_blocks, block_size, n_kv_dim] of dtype
// (quantized dtypes: [num_blocks, block_size] rows of kv_row_bytes, each row
// its groups of scale + codes; see kv_dtype.h).
// Position p of a sequence with block table `table` lives in block
// table[p / block_size] at slot p % block_size.
// Memory: 2 * n_layer * num_blocks * block_size * kv_row_bytes(dtype, n_kv_dim)
// (each of the 2 * n_layer arrays padded to a multiple of 64 bytes so that
// every array starts 64-byte aligned), allocated once at construction and
// left uninitialised: pages are committed only as blocks are first written,
// and a position is never read before it is written.
//
// Thread-safety: none of its own; the engine thread owns it. Kernels write
// disjoint rows from several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kv/kv_dtype.h"

namespace tokenmill::kv {

struct KvGeometry {
  int64_t n_layer = 0;
  int64_t n_kv_dim = 0;     // n_kv_head * head_dim
  int64_t block_size = 16;  // positions per block
  KvDtype dtype = KvDtype::F16;

  int64_t bytes_per_block() const;  // all layers, K and V
  int64_t bytes_per_token() const;  // all layers, K and V, scales included
};

class PagedKvStorage {
 public:
  // Throws Error for a non-positive geometry, num_blocks outside
  // [1, INT32_MAX], a size that overflows, or when the allocation fails.
  PagedKvStorage(const KvGeometry& geometry, int64_t num_blocks);

  // Largest block count whose storage (total_bytes, padding included) fits in
  // `bytes`; 0 when not even one block fits. Throws Error for a bad geometry.
  static int64_t blocks_for_budget(const KvGeometry& geometry, int64_t bytes);

  const KvGeometry& geometry() const { return geometry_; }
  int64_t num_blocks() const { return num_blocks_; }
  int64_t block_size() const { return geometry_.block_size; }
  int64_t total_bytes() const;

  // Base of layer `layer`'s K (V) array: [num_blocks, block_size, n_kv_dim].
  uint8_t* keys(int64_t layer);
  uint8_t* values(int64_t layer);
  const uint8_t* keys(int64_t layer) const;
  const uint8_t* values(int64_t layer) const;

  // Copies every layer's K and V of block `src` into block `dst` (copy-on-write).
  // Precondition (CHECK): both ids in [0, num_blocks). Cost: 2 * n_layer memcpy
  // of one block (bytes_per_block in all).
  void copy_block(int32_t src, int32_t dst);

 private:
  KvGeometry geometry_;
  int64_t num_blocks_ = 0;
  int64_t layer_bytes_ = 0;   // bytes of one layer's K (or V) array
  int64_t array_stride_ = 0;  // layer_bytes_ rounded up to 64: distance between arrays
  std::unique_ptr<uint8_t[], void (*)(uint8_t*)> memory_;
};

}  // namespace tokenmill::kv
