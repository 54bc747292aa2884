#include "gguf/tensor_type.h"

#include <gtest/gtest.h>

namespace tokenmill::gguf {
namespace {

// Expected block geometry from the GGUF block layouts (and the `gguf` Python
// package's GGML_QUANT_SIZES table).
TEST(TensorType, BlockGeometryMatchesGguf) {
  struct Case {
    uint32_t id;
    const char* name;
    int64_t block_size;
    int64_t bytes_per_block;
  };
  const Case cases[] = {
      {0, "F32", 1, 4},       {1, "F16", 1, 2},       {2, "Q4_0", 32, 18},    {3, "Q4_1", 32, 20},
      {6, "Q5_0", 32, 22},    {7, "Q5_1", 32, 24},    {8, "Q8_0", 32, 34},    {10, "Q2_K", 256, 84},
      {11, "Q3_K", 256, 110}, {12, "Q4_K", 256, 144}, {13, "Q5_K", 256, 176}, {14, "Q6_K", 256, 210},
      {15, "Q8_K", 256, 292}, {30, "BF16", 1, 2},
  };
  for (const Case& c : cases) {
    std::optional<TensorTypeInfo> info = tensor_type_info(c.id);
    ASSERT_TRUE(info.has_value()) << c.name;
    EXPECT_EQ(info->name, c.name);
    EXPECT_EQ(info->block_size, c.block_size) << c.name;
    EXPECT_EQ(info->bytes_per_block, c.bytes_per_block) << c.name;
    EXPECT_EQ(static_cast<uint32_t>(info->type), c.id);
    EXPECT_EQ(tensor_type_name(info->type), c.name);
  }
}

TEST(TensorType, UnknownIdsAreRejected) {
  EXPECT_FALSE(tensor_type_info(4).has_value());   // removed Q4_2
  EXPECT_FALSE(tensor_type_info(16).has_value());  // IQ2_XXS, not supported
  EXPECT_FALSE(tensor_type_info(0xFFFFFFFFu).has_value());
}

TEST(TensorType, NamesParseCaseInsensitively) {
  EXPECT_EQ(tensor_type_from_name("q4_k"), TensorType::Q4_K);
  EXPECT_EQ(tensor_type_from_name("F16"), TensorType::F16);
  EXPECT_EQ(tensor_type_from_name("bf16"), TensorType::BF16);
  EXPECT_FALSE(tensor_type_from_name("q4").has_value());
  EXPECT_FALSE(tensor_type_from_name("").has_value());
}

TEST(TensorType, RowBytes) {
  EXPECT_EQ(row_bytes(TensorType::F32, 10), 40);
  EXPECT_EQ(row_bytes(TensorType::Q8_0, 64), 68);
  EXPECT_EQ(row_bytes(TensorType::Q4_K, 512), 288);
  EXPECT_EQ(row_bytes(TensorType::Q6_K, 2048), 8 * 210);
  EXPECT_EQ(row_bytes(TensorType::F16, 0), 0);
}

}  // namespace
}  // namespace tokenmill::gguf
