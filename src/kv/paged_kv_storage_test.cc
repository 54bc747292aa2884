// PagedKvStorage: sizes by hand, alignment, layout (distinct arrays per
// layer, K apart from V), copy_block, budgets, and bad geometries.
#include "kv/paged_kv_storage.h"

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "kv/kv_dtype.h"
#include "kv/prefix_cache.h"
#include "util/error.h"

namespace tokenmill::kv {
namespace {

KvGeometry geometry(int64_t n_layer, int64_t n_kv_dim, int64_t block_size, KvDtype dtype) {
  KvGeometry g;
  g.n_layer = n_layer;
  g.n_kv_dim = n_kv_dim;
  g.block_size = block_size;
  g.dtype = dtype;
  return g;
}

TEST(KvDtype, NamesSizesRoundTrip) {
  EXPECT_EQ(kv_dtype_bits(KvDtype::F32), 32);
  EXPECT_EQ(kv_dtype_bits(KvDtype::F16), 16);
  EXPECT_EQ(kv_dtype_bits(KvDtype::Q4_0), 4);
  EXPECT_EQ(kv_dtype_name(KvDtype::F16), "f16");
  EXPECT_EQ(kv_dtype_from_name("f32"), KvDtype::F32);
  EXPECT_EQ(kv_dtype_from_name("f16"), KvDtype::F16);
  EXPECT_EQ(kv_dtype_from_name("q8_0"), KvDtype::Q8_0);
  EXPECT_EQ(kv_dtype_from_name("fp8_e4m3"), KvDtype::FP8_E4M3);
  EXPECT_EQ(kv_dtype_name(KvDtype::FP8_E4M3), "fp8_e4m3");
  EXPECT_EQ(kv_dtype_from_name("q4_0"), KvDtype::Q4_0);
  EXPECT_EQ(kv_dtype_name(KvDtype::Q4_0), "q4_0");
  EXPECT_EQ(kv_dtype_from_name("q4_0_kc"), KvDtype::Q4_0_KC);
  EXPECT_EQ(kv_dtype_name(KvDtype::Q4_0_KC), "q4_0_kc");
  EXPECT_EQ(kv_dtype_bits(KvDtype::Q4_0_KC), 4);
  // q4_0_kc is q4_0's bytes (the kernels read it as q4_0) with scaled keys.
  EXPECT_EQ(kv_storage_dtype(KvDtype::Q4_0_KC), KvDtype::Q4_0);
  EXPECT_EQ(kv_storage_dtype(KvDtype::Q8_0), KvDtype::Q8_0);
  EXPECT_TRUE(kv_keys_channel_scaled(KvDtype::Q4_0_KC));
  EXPECT_FALSE(kv_keys_channel_scaled(KvDtype::Q4_0));
  EXPECT_TRUE(kv_dtype_quantized(KvDtype::Q4_0_KC));
  EXPECT_EQ(kv_dtype_from_name("int4"), std::nullopt);
  EXPECT_EQ(kv_dtype_from_name(""), std::nullopt);
}

// Blocks written in another KV type hold other bytes: the prefix-cache
// namespace (which carries kv_dtype_name) separates every dtype.
TEST(KvDtype, EveryDtypeHasItsOwnPrefixNamespace) {
  std::vector<uint64_t> ids;
  for (KvDtype d : {KvDtype::F32, KvDtype::F16, KvDtype::Q8_0, KvDtype::FP8_E4M3, KvDtype::Q4_0, KvDtype::Q4_0_KC}) {
    CacheNamespace ns;
    ns.model = "m";
    ns.kv_dtype = std::string(kv_dtype_name(d));
    for (uint64_t id : ids) EXPECT_NE(id, namespace_id(ns)) << kv_dtype_name(d);
    ids.push_back(namespace_id(ns));
  }
}

TEST(KvGeometry, QuantizedBytesByHand) {
  // Gemma 3 270M in q8_0: each 256-element row is 8 groups of 32 codes plus
  // an fp16 scale = 272 bytes; 2 * 18 * 272 = 9792 bytes per token, 53 % of f16.
  const KvGeometry g = geometry(18, 256, 16, KvDtype::Q8_0);
  EXPECT_EQ(g.bytes_per_token(), 9792);
  // stories260K (5 layers, 4 KV heads of 8): one group of 32 per row, 34 bytes.
  EXPECT_EQ(geometry(5, 32, 16, KvDtype::FP8_E4M3).bytes_per_token(), 2 * 5 * 34);
  // A row that is not a multiple of 32 is one group: 40 + 2 bytes.
  EXPECT_EQ(geometry(1, 40, 16, KvDtype::Q8_0).bytes_per_token(), 84);
  // q4_0: 8 groups of 16 code bytes and a scale = 144 bytes per Gemma row,
  // 28 % of f16; a 40-element row is one group of 20 + 2 bytes.
  EXPECT_EQ(geometry(18, 256, 16, KvDtype::Q4_0).bytes_per_token(), 2 * 18 * 144);
  EXPECT_EQ(geometry(1, 40, 16, KvDtype::Q4_0).bytes_per_token(), 2 * 22);
  EXPECT_EQ(geometry(18, 256, 16, KvDtype::Q4_0_KC).bytes_per_token(), 2 * 18 * 144);
  PagedKvStorage s(g, 3);
  EXPECT_GE(s.total_bytes(), 3 * g.bytes_per_block());
  // copy_block moves whole quantized rows, scales included: 16 rows of 272.
  const int64_t block_bytes = 16 * 272;
  for (int64_t layer = 0; layer < 18; ++layer) {
    std::memset(s.keys(layer), 0, static_cast<size_t>(3 * block_bytes));
    std::memset(s.keys(layer), 7, static_cast<size_t>(block_bytes));
  }
  s.copy_block(0, 2);
  EXPECT_EQ(s.keys(17)[2 * block_bytes + block_bytes - 1], 7);
  EXPECT_EQ(s.keys(17)[2 * block_bytes - 1], 0);
}

TEST(KvGeometry, BytesByHand) {
  // Gemma 3 270M: 18 layers, 1 KV head of 256 dims. Per token: K and V,
  // 18 layers, 256 halves = 2 * 18 * 256 * 2 = 18432 bytes.
  const KvGeometry g = geometry(18, 256, 16, KvDtype::F16);
  EXPECT_EQ(g.bytes_per_token(), 18432);
  EXPECT_EQ(g.bytes_per_block(), 18432 * 16);
  EXPECT_EQ(geometry(2, 3, 5, KvDtype::F32).bytes_per_block(), 2 * 2 * 3 * 4 * 5);
}

TEST(PagedKvStorage, LayoutIsAlignedAndDisjoint) {
  // 3 layers, n_kv_dim 5, block 3, f16: one array is 7 * 3 * 5 * 2 = 210 bytes,
  // padded to 256.
  PagedKvStorage s(geometry(3, 5, 3, KvDtype::F16), 7);
  EXPECT_EQ(s.num_blocks(), 7);
  EXPECT_EQ(s.block_size(), 3);
  EXPECT_EQ(s.total_bytes(), 2 * 3 * 256);
  std::set<const uint8_t*> bases;
  for (int64_t l = 0; l < 3; ++l) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(s.keys(l)) % 64, 0u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(s.values(l)) % 64, 0u);
    EXPECT_GE(s.values(l) - s.keys(l), 210);
    bases.insert(s.keys(l));
    bases.insert(s.values(l));
    std::memset(s.keys(l), 0, 210);  // the whole array is writable (ASan checks the bounds)
    std::memset(s.values(l), 0, 210);
  }
  EXPECT_EQ(bases.size(), 6u);
  EXPECT_EQ(s.values(2) + 255, s.keys(0) + s.total_bytes() - 1);  // the last array ends the pool
}

TEST(PagedKvStorage, CopyBlockCopiesEveryLayerKAndVOnly) {
  const KvGeometry g = geometry(2, 4, 2, KvDtype::F32);
  PagedKvStorage s(g, 3);
  const int64_t block_bytes = 2 * 4 * 4;
  for (int64_t l = 0; l < 2; ++l) {
    for (int64_t i = 0; i < 3 * block_bytes; ++i) {
      s.keys(l)[i] = static_cast<uint8_t>(i + 10 * l);
      s.values(l)[i] = static_cast<uint8_t>(i + 10 * l + 100);
    }
  }
  s.copy_block(2, 0);
  for (int64_t l = 0; l < 2; ++l) {
    for (int64_t i = 0; i < block_bytes; ++i) {
      EXPECT_EQ(s.keys(l)[i], static_cast<uint8_t>(2 * block_bytes + i + 10 * l));
      EXPECT_EQ(s.values(l)[i], static_cast<uint8_t>(2 * block_bytes + i + 10 * l + 100));
      // Block 1 and the source are untouched.
      EXPECT_EQ(s.keys(l)[block_bytes + i], static_cast<uint8_t>(block_bytes + i + 10 * l));
      EXPECT_EQ(s.keys(l)[2 * block_bytes + i], static_cast<uint8_t>(2 * block_bytes + i + 10 * l));
    }
  }
}

TEST(PagedKvStorage, BlocksForBudgetIsTheLargestThatFits) {
  const KvGeometry g = geometry(3, 5, 3, KvDtype::F16);  // 180 bytes per block
  for (int64_t budget : {0L, 100L, 383L, 384L, 1000L, 1536L, 1537L, 100000L}) {
    const int64_t n = PagedKvStorage::blocks_for_budget(g, budget);
    if (n > 0) {
      EXPECT_LE(PagedKvStorage(g, n).total_bytes(), budget) << budget;
    }
    EXPECT_GT(PagedKvStorage(g, n + 1).total_bytes(), budget) << budget;
  }
  // One or two blocks: each array 30 or 60 bytes padded to 64, so 6 * 64 = 384 bytes.
  EXPECT_EQ(PagedKvStorage::blocks_for_budget(g, 383), 0);
  EXPECT_EQ(PagedKvStorage::blocks_for_budget(g, 384), 2);
  // 8 blocks: 240 bytes -> 256, 6 * 256 = 1536; 9 and 10 blocks: 270 and 300 -> 320, 1920.
  EXPECT_EQ(PagedKvStorage::blocks_for_budget(g, 1536), 8);
  EXPECT_EQ(PagedKvStorage::blocks_for_budget(g, 1919), 8);
  EXPECT_EQ(PagedKvStorage::blocks_for_budget(g, 1920), 10);
}

TEST(PagedKvStorage, BadGeometryThrows) {
  EXPECT_THROW(PagedKvStorage(geometry(0, 4, 16, KvDtype::F16), 1), Error);
  EXPECT_THROW(PagedKvStorage(geometry(1, 0, 16, KvDtype::F16), 1), Error);
  EXPECT_THROW(PagedKvStorage(geometry(1, 4, 0, KvDtype::F16), 1), Error);
  EXPECT_THROW(PagedKvStorage(geometry(1, 4, 16, KvDtype::F16), 0), Error);
  EXPECT_THROW(PagedKvStorage(geometry(1, 4, 16, KvDtype::F16), int64_t{1} << 40), Error);
  EXPECT_THROW(PagedKvStorage(geometry(1 << 20, 1 << 20, 1 << 20, KvDtype::F32), 1 << 20), Error);
  EXPECT_THROW(PagedKvStorage::blocks_for_budget(geometry(1, -1, 16, KvDtype::F16), 100), Error);
  // q4_0 packs two elements a byte: an odd row (one group) cannot be stored.
  try {
    PagedKvStorage(geometry(1, 33, 16, KvDtype::Q4_0), 1);
    ADD_FAILURE() << "an odd q4_0 row was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q4_0"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(PagedKvStorage(geometry(1, 34, 16, KvDtype::Q4_0), 1));
}

}  // namespace
}  // namespace tokenmill::kv
