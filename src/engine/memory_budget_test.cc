#include "engine/memory_budget.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace tokenmill::engine {
namespace {

TEST(MemoryBudgetTest, ParsesMemAvailable) {
  const char* meminfo =
      "MemTotal:       16314568 kB\n"
      "MemFree:         1234567 kB\n"
      "MemAvailable:    8000000 kB\n"
      "Buffers:          123456 kB\n";
  EXPECT_EQ(parse_mem_available(meminfo), int64_t{8000000} * 1024);
  EXPECT_EQ(parse_mem_available("MemTotal: 1 kB\n"), std::nullopt);
}

TEST(MemoryBudgetTest, ReadsThisMachine) {
  const std::optional<int64_t> avail = mem_available_bytes();
  if (!avail) GTEST_SKIP() << "no MemAvailable in /proc/meminfo";
  EXPECT_GT(*avail, 0);
}

TEST(MemoryBudgetTest, ParsesByteSizes) {
  EXPECT_EQ(parse_byte_size("1073741824"), 1073741824);
  EXPECT_EQ(parse_byte_size("512M"), 512LL << 20);
  EXPECT_EQ(parse_byte_size("512MiB"), 512LL << 20);
  EXPECT_EQ(parse_byte_size("4g"), 4LL << 30);
  EXPECT_EQ(parse_byte_size("1.5GB"), 3LL << 29);
  EXPECT_EQ(parse_byte_size("64 K"), 65536);
  EXPECT_THROW(parse_byte_size("lots"), Error);
  EXPECT_THROW(parse_byte_size("4X"), Error);
  EXPECT_THROW(parse_byte_size("-1G"), Error);
}

}  // namespace
}  // namespace tokenmill::engine
