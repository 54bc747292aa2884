#include "gguf/weight_types.h"

#include <gtest/gtest.h>

namespace tokenmill::gguf {
namespace {

TensorInfo tensor(TensorType type, uint64_t bytes) {
  TensorInfo t;
  t.type = type;
  t.num_bytes = bytes;
  return t;
}

TEST(WeightTypes, SharesAddUpAndComeLargestFirst) {
  const std::vector<TensorInfo> tensors = {tensor(TensorType::F32, 100), tensor(TensorType::Q4_K, 500),
                                           tensor(TensorType::Q6_K, 300), tensor(TensorType::Q4_K, 100)};
  const std::vector<TypeShare> shares = weight_type_shares(tensors);
  ASSERT_EQ(shares.size(), 3u);
  EXPECT_EQ(shares[0].type, "Q4_K");
  EXPECT_EQ(shares[0].bytes, 600u);
  EXPECT_DOUBLE_EQ(shares[0].share, 0.6);
  EXPECT_EQ(shares[1].type, "Q6_K");
  EXPECT_EQ(shares[2].type, "F32");
  EXPECT_DOUBLE_EQ(shares[0].share + shares[1].share + shares[2].share, 1.0);
}

TEST(WeightTypes, EmptyFileHasNoShares) { EXPECT_TRUE(weight_type_shares({}).empty()); }

TEST(WeightTypes, EqualBytesKeepNameOrder) {
  const std::vector<TensorInfo> tensors = {tensor(TensorType::Q8_0, 10), tensor(TensorType::F16, 10)};
  const std::vector<TypeShare> shares = weight_type_shares(tensors);
  ASSERT_EQ(shares.size(), 2u);
  EXPECT_EQ(shares[0].type, "F16");
  EXPECT_EQ(shares[1].type, "Q8_0");
}

}  // namespace
}  // namespace tokenmill::gguf
