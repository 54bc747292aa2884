// MappedFile and release_mapped_pages: releasing pages of a read-only map
// (what the model does after repacking weights) must leave the bytes
// readable and unchanged, for ranges that start and end inside pages.
#include "util/mapped_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "util/error.h"

namespace tokenmill {
namespace {

TEST(MappedFile, ReleasedPagesReadBackUnchanged) {
  const auto path = std::filesystem::temp_directory_path() / ("tm_mapped_" + std::to_string(getpid()) + ".bin");
  std::vector<char> bytes(5 * 4096 + 123);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 131 + 7) % 251);
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  {
    const MappedFile map = MappedFile::open(path.string());
    ASSERT_EQ(map.size(), bytes.size());
    release_mapped_pages(map.data() + 100, map.size() - 300);  // partial first and last pages
    release_mapped_pages(map.data(), map.size());
    release_mapped_pages(map.data() + 10, 0);  // empty: nothing to do
    for (size_t i = 0; i < bytes.size(); ++i) ASSERT_EQ(static_cast<char>(map.data()[i]), bytes[i]) << i;
  }
  std::filesystem::remove(path);
}

TEST(MappedFile, MissingFileIsAnError) { EXPECT_THROW(MappedFile::open("/nonexistent/tokenmill/file.gguf"), Error); }

}  // namespace
}  // namespace tokenmill
