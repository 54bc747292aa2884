#include "spec/layer_skip.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "util/error.h"

namespace tokenmill::spec {
namespace {

using Flags = std::vector<uint8_t>;

TEST(LayerSkip, ListsAndRanges) {
  EXPECT_EQ(resolve_skip_layers("1-3", 6), (Flags{0, 1, 1, 1, 0, 0}));
  EXPECT_EQ(resolve_skip_layers("0,2,4-5", 6), (Flags{1, 0, 1, 0, 1, 1}));
  EXPECT_EQ(resolve_skip_layers("3", 6), (Flags{0, 0, 0, 1, 0, 0}));
}

TEST(LayerSkip, FractionIsACentredRunKeepingFirstAndLast) {
  EXPECT_EQ(resolve_skip_layers("0.5", 8), (Flags{0, 0, 1, 1, 1, 1, 0, 0}));
  EXPECT_EQ(resolve_skip_layers("0.34", 6), (Flags{0, 0, 1, 1, 0, 0}));
  // 0.99 of 4 layers would be all of them: capped at n_layer - 2.
  EXPECT_EQ(resolve_skip_layers("0.99", 4), (Flags{0, 1, 1, 0}));
  // Gemma 3 270M (18 layers), the default: layers 4..12.
  const Flags gemma = resolve_skip_layers("0.5", 18);
  EXPECT_EQ(std::count(gemma.begin(), gemma.end(), 1), 9);
  EXPECT_EQ(gemma[4], 1);
  EXPECT_EQ(gemma[12], 1);
  EXPECT_EQ(gemma[3], 0);
  EXPECT_EQ(gemma[13], 0);
}

TEST(LayerSkip, BadSpellingsAndImpossibleSetsAreClearErrors) {
  for (const char* bad : {"", "a", "3-", "-3", "5-2", "1,,2", "1.5", "0.0", "1e", "2 3"})
    EXPECT_THROW(check_skip_layers(bad), Error) << bad;
  EXPECT_THROW(resolve_skip_layers("4-6", 6), Error);  // layer 6 of 0..5
  EXPECT_THROW(resolve_skip_layers("0-5", 6), Error);  // every layer
  EXPECT_THROW(resolve_skip_layers("0.1", 4), Error);  // rounds to none
  try {
    resolve_skip_layers("2-9", 6);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layer 9 is past the model's last layer 5"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tokenmill::spec
