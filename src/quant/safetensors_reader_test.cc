// The safetensors reader: a valid file's tensors and metadata, and each
// refusal (header length, JSON, fields, dtype, offsets, overlaps) with the
// message naming the problem.
#include "quant/safetensors_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "quant/safetensors_test_util.h"
#include "util/error.h"

namespace tokenmill::quant {
namespace {

using testing::SafetensorsBuilder;

SafetensorsBuilder two_tensors() {
  SafetensorsBuilder b;
  b.add("a.qweight", "I32", {2, 3}, std::vector<int32_t>{1, 2, 3, 4, 5, 6});
  b.add("a.scales", "F16", {3}, std::vector<uint16_t>{0x3c00, 0x4000, 0x4200});
  b.header()["__metadata__"] = {{"format", "pt"}};
  return b;
}

// Parses bytes and returns the error message ("" when it parses).
std::string safetensors_error(const std::vector<uint8_t>& bytes) {
  try {
    SafetensorsFile::parse(bytes, "t.safetensors");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SafetensorsReader, ReadsTensorsAndMetadata) {
  const std::vector<uint8_t> bytes = two_tensors().bytes();
  const SafetensorsFile f = SafetensorsFile::parse(bytes, "t.safetensors");
  ASSERT_EQ(f.tensors().size(), 2u);
  const SafetensorsTensor* q = f.find("a.qweight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->dtype, "I32");
  EXPECT_EQ(q->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(q->num_elements(), 6);
  ASSERT_EQ(q->data.size(), 24u);
  int32_t last;
  std::memcpy(&last, q->data.data() + 20, 4);
  EXPECT_EQ(last, 6);
  EXPECT_EQ(f.find("a.scales")->shape_string(), "[3]");
  EXPECT_EQ(f.find("missing"), nullptr);
  EXPECT_EQ(f.metadata().at("format"), "pt");
}

TEST(SafetensorsReader, OpensAFile) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("tm_safetensors_" + std::to_string(::getpid()) + ".safetensors"))
          .string();
  const std::vector<uint8_t> bytes = two_tensors().bytes();
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  const SafetensorsFile f = SafetensorsFile::open(path);
  EXPECT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(f.name(), path);
  std::filesystem::remove(path);
}

TEST(SafetensorsReader, RefusesBadHeaderLength) {
  EXPECT_NE(safetensors_error({1, 2, 3}).find("shorter than the 8-byte header length"), std::string::npos);
  std::vector<uint8_t> bytes = two_tensors().bytes();
  bytes[0] = 0xff, bytes[1] = 0xff, bytes[2] = 0xff;  // beyond the file
  EXPECT_NE(safetensors_error(bytes).find("bad header length"), std::string::npos);
  std::vector<uint8_t> huge(8, 0);
  huge[7] = 0x7f;  // 2^62-ish: beyond the format's limit
  EXPECT_NE(safetensors_error(huge).find("bad header length"), std::string::npos);
}

TEST(SafetensorsReader, RefusesBadJson) {
  const SafetensorsBuilder b = two_tensors();
  EXPECT_NE(safetensors_error(b.bytes_with_header("{\"a\": ")).find("not valid JSON"), std::string::npos);
  EXPECT_NE(safetensors_error(b.bytes_with_header("[1, 2]")).find("not a JSON object"), std::string::npos);
  EXPECT_NE(safetensors_error(b.bytes_with_header("{\"__metadata__\": {\"k\": 1}}")).find("is not a string"),
            std::string::npos);
}

TEST(SafetensorsReader, RefusesBadEntries) {
  struct Case {
    const char* json;
    const char* message;
  };
  const Case cases[] = {
      {R"({"t": 5})", "entry is not a JSON object"},
      {R"({"t": {"dtype": "F16", "shape": [2]}})", "missing \"data_offsets\""},
      {R"({"t": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 4]}})", "unknown dtype 'Q4'"},
      {R"({"t": {"dtype": "F16", "shape": [-2], "data_offsets": [0, 4]}})", "not a non-negative integer"},
      {R"({"t": {"dtype": "F16", "shape": 2, "data_offsets": [0, 4]}})", "\"shape\" is not an array"},
      {R"({"t": {"dtype": "F16", "shape": [2], "data_offsets": [0]}})", "two non-negative integers"},
      {R"({"t": {"dtype": "F16", "shape": [2], "data_offsets": [4, 0]}})", "out of range"},
      {R"({"t": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4000]}})", "out of range"},
      {R"({"t": {"dtype": "F16", "shape": [3], "data_offsets": [0, 4]}})", "needs 6"},
      {R"({"t": {"dtype": "F64", "shape": [4611686018427387903, 4], "data_offsets": [0, 4]}})", "too large"},
      {R"({"t": {"dtype": "F16", "shape": [2], "data_offsets": [0, 4]},
           "u": {"dtype": "F16", "shape": [2], "data_offsets": [2, 6]}})",
       "overlap"},
  };
  SafetensorsBuilder b;
  const std::vector<uint8_t> data(32, 0);
  b.add("pad", "U8", {32}, data);
  for (const Case& c : cases) {
    const std::string error = safetensors_error(b.bytes_with_header(c.json));
    EXPECT_NE(error.find(c.message), std::string::npos) << c.json << " -> " << error;
    EXPECT_NE(error.find("t.safetensors"), std::string::npos) << error;
  }
}

TEST(SafetensorsReader, AcceptsEmptyTensorsAndTouchingRanges) {
  const std::string json = R"({"e": {"dtype": "F32", "shape": [0], "data_offsets": [2, 2]},
      "a": {"dtype": "F16", "shape": [1], "data_offsets": [0, 2]},
      "b": {"dtype": "F16", "shape": [1], "data_offsets": [2, 4]}})";
  SafetensorsBuilder b;
  b.add("pad", "U8", {4}, std::vector<uint8_t>(4, 0));
  const std::vector<uint8_t> bytes = b.bytes_with_header(json);
  const SafetensorsFile f = SafetensorsFile::parse(bytes, "t.safetensors");
  EXPECT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(f.find("e")->num_elements(), 0);
}

}  // namespace
}  // namespace tokenmill::quant
