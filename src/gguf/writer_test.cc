// Writer -> reader round trips, and the writer's own input checks.
#include "gguf/writer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <limits>

#include "gguf/reader.h"
#include "gguf/test_util.h"
#include "util/error.h"

namespace tokenmill::gguf {
namespace {

using ::testing::HasSubstr;

// Deep structural equality, exact type tags included.
void expect_same(const Value& a, const Value& b, const std::string& where) {
  ASSERT_EQ(a.type, b.type) << where;
  ASSERT_EQ(a.data.index(), b.data.index()) << where;
  if (a.is_array()) {
    const Array& x = a.as_array();
    const Array& y = b.as_array();
    ASSERT_EQ(x.element_type, y.element_type) << where;
    ASSERT_EQ(x.items.size(), y.items.size()) << where;
    for (size_t i = 0; i < x.items.size(); ++i) {
      expect_same(x.items[i], y.items[i], where + "[" + std::to_string(i) + "]");
    }
  } else if (a.type == ValueType::FLOAT32 || a.type == ValueType::FLOAT64) {
    EXPECT_EQ(std::get<double>(a.data), std::get<double>(b.data)) << where;
  } else if (a.is_string()) {
    EXPECT_EQ(a.as_string(), b.as_string()) << where;
  } else if (std::holds_alternative<uint64_t>(a.data)) {
    EXPECT_EQ(std::get<uint64_t>(a.data), std::get<uint64_t>(b.data)) << where;
  } else {
    EXPECT_EQ(std::get<int64_t>(a.data), std::get<int64_t>(b.data)) << where;
  }
}

std::vector<MetadataEntry> all_value_types() {
  using VT = ValueType;
  return {
      {"general.architecture", Value::str("llama")},
      {"t.u8", Value::u8(250)},
      {"t.i8", {VT::INT8, int64_t{-128}}},
      {"t.u16", {VT::UINT16, uint64_t{65535}}},
      {"t.i16", {VT::INT16, int64_t{-32768}}},
      {"t.u32", Value::u32(4000000000u)},
      {"t.i32", Value::i32(std::numeric_limits<int32_t>::min())},
      {"t.f32", Value::f32(0.15625f)},
      {"t.bool", Value::boolean(true)},
      {"t.string", Value::str("h\xc3\xa9llo\nworld")},
      {"t.empty_string", Value::str("")},
      {"t.u64", Value::u64(std::numeric_limits<uint64_t>::max())},
      {"t.i64", Value::i64(std::numeric_limits<int64_t>::min())},
      {"t.f64", Value::f64(3.141592653589793)},
      {"t.ints", Value::array(VT::INT32, {Value::i32(1), Value::i32(-2), Value::i32(3)})},
      {"t.strings", Value::array(VT::STRING, {Value::str("a"), Value::str(""), Value::str("ccc")})},
      {"t.empty", Value::array(VT::FLOAT32, {})},
      {"t.nested", Value::array(VT::ARRAY, {Value::array(VT::UINT8, {Value::u8(1), Value::u8(2)}),
                                            Value::array(VT::STRING, {Value::str("x")}), Value::array(VT::BOOL, {})})},
      {"t.nested3",
       Value::array(VT::ARRAY, {Value::array(VT::ARRAY, {Value::array(VT::FLOAT64, {Value::f64(-0.5)})})})},
  };
}

struct TestTensor {
  std::string name;
  TensorType type;
  std::vector<int64_t> dims;
};

const TestTensor kTensors[] = {
    {"token_embd.weight", TensorType::Q4_K, {256, 3}},
    {"norm.weight", TensorType::F32, {5}},  // 20 bytes: needs padding
    {"blk.0.attn_q.weight", TensorType::Q8_0, {64, 2, 1, 3}},
    {"blk.0.ffn.weight", TensorType::Q4_0, {32, 2, 2}},
    {"half", TensorType::F16, {3, 1}},
    {"brain", TensorType::BF16, {7}},
};

std::vector<uint8_t> pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(seed * 31 + i * 7);
  return v;
}

GgufWriter make_writer(uint32_t alignment) {
  GgufWriter w(alignment);
  for (MetadataEntry& e : all_value_types()) w.set(e.key, e.value);
  uint8_t seed = 1;
  for (const TestTensor& t : kTensors) {
    int64_t rows = 1;
    for (size_t d = 1; d < t.dims.size(); ++d) rows *= t.dims[d];
    w.add_tensor(t.name, t.type, t.dims, pattern(row_bytes(t.type, t.dims[0]) * rows, seed++));
  }
  return w;
}

class RoundTrip : public ::testing::TestWithParam<uint32_t> {};

TEST_P(RoundTrip, MetadataAndTensorsSurvive) {
  const uint32_t alignment = GetParam();
  std::vector<uint8_t> bytes = make_writer(alignment).to_bytes();
  GgufFile f = GgufFile::parse(bytes, "rt.gguf");
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), alignment);
  EXPECT_EQ(f.file_size(), bytes.size());
  EXPECT_EQ(f.data_offset() % alignment, 0u);
  EXPECT_EQ(bytes.size() % alignment, 0u);

  std::vector<MetadataEntry> expected = all_value_types();
  size_t first = 0;
  if (alignment != kDefaultAlignment) {
    // The writer records a non-default alignment as the first key.
    ASSERT_GE(f.metadata().size(), 1u);
    EXPECT_EQ(f.metadata()[0].key, "general.alignment");
    expect_same(f.metadata()[0].value, Value::u32(alignment), "general.alignment");
    first = 1;
  } else {
    EXPECT_FALSE(f.has("general.alignment"));
  }
  ASSERT_EQ(f.metadata().size(), expected.size() + first);
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(f.metadata()[first + i].key, expected[i].key);
    expect_same(f.metadata()[first + i].value, expected[i].value, expected[i].key);
  }

  ASSERT_EQ(f.tensors().size(), std::size(kTensors));
  uint8_t seed = 1;
  for (size_t i = 0; i < std::size(kTensors); ++i) {
    const TestTensor& want = kTensors[i];
    const TensorInfo& t = f.tensors()[i];
    EXPECT_EQ(t.name, want.name);
    EXPECT_EQ(&f.tensor(want.name), &t);
    EXPECT_EQ(t.type, want.type);
    ASSERT_EQ(t.num_dims, want.dims.size());
    for (size_t d = 0; d < 4; ++d) EXPECT_EQ(t.dims[d], d < want.dims.size() ? want.dims[d] : 1);
    EXPECT_EQ(t.offset % alignment, 0u);
    EXPECT_EQ(static_cast<uint64_t>(t.data - bytes.data()) % alignment, 0u);
    std::vector<uint8_t> data = pattern(t.num_bytes, seed++);
    EXPECT_EQ(t.num_bytes, static_cast<uint64_t>(row_bytes(t.type, t.row_length()) * t.num_rows()));
    EXPECT_TRUE(std::equal(data.begin(), data.end(), t.data)) << t.name;
  }
  EXPECT_EQ(f.tensors()[2].shape_string(), "[64, 2, 1, 3]");
  EXPECT_EQ(f.tensors()[2].num_elements(), 384);
  EXPECT_EQ(f.tensors()[0].num_bytes, 3u * 144);
  EXPECT_EQ(f.tensors()[1].offset, alignment == 1 ? 432u : 448u);  // 3 * 144 bytes, padded
}

TEST_P(RoundTrip, ParsedFileReencodesToTheSameBytes) {
  std::vector<uint8_t> bytes = make_writer(GetParam()).to_bytes();
  GgufFile f = GgufFile::parse(bytes, "rt.gguf");
  GgufWriter again(f.alignment());
  for (const MetadataEntry& e : f.metadata()) again.set(e.key, e.value);
  for (const TensorInfo& t : f.tensors()) {
    again.add_tensor(t.name, t.type, std::vector<int64_t>(t.dims, t.dims + t.num_dims),
                     std::vector<uint8_t>(t.data, t.data + t.num_bytes));
  }
  EXPECT_EQ(again.to_bytes(), bytes);
}

INSTANTIATE_TEST_SUITE_P(Alignments, RoundTrip, ::testing::Values(32u, 64u, 1u));

TEST(Writer, EmptyFileIsJustTheHeader) {
  std::vector<uint8_t> bytes = GgufWriter().to_bytes();
  // magic, version 3, 0 tensors, 0 keys, padded to 32.
  testing::ByteBuilder want;
  want.header(0, 0).zeros(8);
  EXPECT_EQ(bytes, want.bytes());
}

TEST(Writer, SetReplacesKeepingOrder) {
  GgufWriter w;
  w.set("a", Value::u8(1));
  w.set("b", Value::u8(2));
  w.set("a", Value::str("x"));
  GgufFile f = GgufFile::parse(w.to_bytes(), "w.gguf");
  ASSERT_EQ(f.metadata().size(), 2u);
  EXPECT_EQ(f.metadata()[0].key, "a");
  EXPECT_EQ(f.get_string("a"), "x");
}

TEST(Writer, AlignmentKeyFollowsTheWriter) {
  GgufWriter w(64);
  w.set("general.alignment", Value::u32(32));  // would lie about the padding
  std::vector<uint8_t> bytes = w.to_bytes();
  GgufFile f = GgufFile::parse(bytes, "w.gguf");
  EXPECT_EQ(f.get_int("general.alignment"), 64);
  EXPECT_EQ(f.metadata().size(), 1u);
}

TEST(Writer, RejectsBadInput) {
  EXPECT_THROW(GgufWriter(48), Error);
  EXPECT_THROW(GgufWriter(0), Error);
  GgufWriter w;
  w.add_tensor("a", TensorType::F32, {2}, std::vector<uint8_t>(8));
  auto message = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_THAT(message([&] { w.add_tensor("a", TensorType::F32, {2}, std::vector<uint8_t>(8)); }),
              HasSubstr("duplicate tensor name 'a'"));
  EXPECT_THAT(message([&] { w.add_tensor("b", TensorType::F32, {3}, std::vector<uint8_t>(8)); }),
              HasSubstr("has 8 bytes of data, expected 12"));
  EXPECT_THAT(message([&] { w.add_tensor("c", TensorType::Q4_0, {16}, std::vector<uint8_t>(9)); }),
              HasSubstr("row length 16 is not a multiple of the Q4_0 block size 32"));
  EXPECT_THAT(message([&] { w.add_tensor("d", TensorType::F32, {1, 1, 1, 1, 1}, {}); }), HasSubstr("5 dimensions"));
  EXPECT_THAT(message([&] { w.add_tensor("e", TensorType::F32, {4, 0}, {}); }), HasSubstr("dimension 1 is 0"));
  EXPECT_THAT(message([&] { w.set("k", Value::array(ValueType::INT32, {Value::u8(1)})); }),
              HasSubstr("array item 0 has type uint8, but the array holds int32"));
  EXPECT_THAT(message([&] { w.set("k", Value{ValueType::UINT8, uint64_t{300}}); }), HasSubstr("not a valid uint8"));
}

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "gguf_test_XXXXXX").string();
    path_ = mkdtemp(pattern.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

TEST(Writer, WritesFileAtomically) {
  TempDir dir;
  std::string path = dir.file("model.gguf");
  GgufWriter w = make_writer(64);
  w.write(path);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  GgufFile f = GgufFile::open(path);
  EXPECT_EQ(f.name(), path);
  EXPECT_EQ(f.tensors().size(), std::size(kTensors));
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  std::vector<uint8_t> expected = w.to_bytes();
  EXPECT_EQ(f.file_size(), expected.size());
}

TEST(Writer, FailedWriteLeavesNothing) {
  TempDir dir;
  std::string path = dir.file("missing_dir/model.gguf");
  try {
    GgufWriter().write(path);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("cannot create"));
    EXPECT_THAT(e.what(), HasSubstr("model.gguf.tmp"));
  }
  // Renaming onto a directory fails after the temporary was written.
  std::filesystem::create_directory(dir.file("taken.gguf"));
  EXPECT_THROW(GgufWriter().write(dir.file("taken.gguf")), Error);
  EXPECT_FALSE(std::filesystem::exists(dir.file("taken.gguf.tmp")));
}

}  // namespace
}  // namespace tokenmill::gguf
