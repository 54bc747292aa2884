// The reader on malformed input: each case corrupts one thing and checks the
// message names it. Also typed getters and mutation robustness.
#include "gguf/reader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <random>

#include "gguf/test_util.h"
#include "gguf/writer.h"

namespace tokenmill::gguf {
namespace {

using testing::ByteBuilder;
using testing::find_after;
using ::testing::HasSubstr;
using testing::parse_error;
using testing::patch;
using ::testing::StartsWith;

// Two tensors: tensor_aa F32 [4] (16 bytes), tensor_bb Q8_0 [32, 2] (68 bytes).
std::vector<uint8_t> valid_file() {
  GgufWriter w;
  w.set("general.architecture", Value::str("llama"));
  w.set("llama.block_count", Value::u32(2));
  w.set("llama.rope.freq_base", Value::f32(10000.0f));
  w.set("tokenizer.ggml.add_bos_token", Value::boolean(true));
  w.set("tokenizer.ggml.tokens", Value::array(ValueType::STRING, {Value::str("<s>"), Value::str("hi")}));
  w.set("big", Value::u64(std::numeric_limits<uint64_t>::max()));
  w.add_tensor("tensor_aa", TensorType::F32, {4}, std::vector<uint8_t>(16, 1));
  w.add_tensor("tensor_bb", TensorType::Q8_0, {32, 2}, std::vector<uint8_t>(68, 2));
  return w.to_bytes();
}

// Position of tensor_bb's n_dims field (2 dims follow, then type, offset).
size_t bb_info(const std::vector<uint8_t>& bytes) { return find_after(bytes, "tensor_bb"); }
constexpr size_t kDims = 4, kType = 4 + 16, kOffset = 4 + 16 + 4;

TEST(ReaderMalformed, ValidBaseParses) {
  std::vector<uint8_t> bytes = valid_file();
  GgufFile f = GgufFile::parse(bytes, "model.gguf");
  ASSERT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(f.tensor("tensor_bb").num_bytes, 68u);
  EXPECT_EQ(f.tensor("tensor_bb").data[0], 2);
}

TEST(ReaderMalformed, TooSmallOrBadMagic) {
  EXPECT_EQ(parse_error({}), "model.gguf: file is too small to be GGUF (0 bytes)");
  ByteBuilder b;
  b.u32(0x4c4d4747).u32(3).u64(0).u64(0);  // "GGML"
  EXPECT_THAT(parse_error(b.bytes()), HasSubstr("model.gguf: not a GGUF file (magic bytes 47 47 4d 4c"));
}

TEST(ReaderMalformed, Versions) {
  EXPECT_THAT(parse_error(ByteBuilder().header(0, 0, 1).bytes()),
              HasSubstr("model.gguf: GGUF version 1 is not supported"));
  EXPECT_THAT(parse_error(ByteBuilder().header(0, 0, 0x03000000).bytes()),
              HasSubstr("0x03000000: the file looks big-endian"));
  EXPECT_THAT(parse_error(ByteBuilder().header(0, 0, 7).bytes()), HasSubstr("unsupported GGUF version 7"));
  EXPECT_EQ(parse_error(ByteBuilder().header(0, 0, 2).bytes()), "parsed OK");
  EXPECT_EQ(parse_error(ByteBuilder().header(0, 0, 3).bytes()), "parsed OK");
}

TEST(ReaderMalformed, TruncatedHeader) {
  ByteBuilder b;
  b.u32(kMagic).u32(3).u32(0);  // half a tensor count
  EXPECT_EQ(parse_error(b.bytes()),
            "model.gguf: unexpected end of file reading tensor count at offset 8 (file is 12 bytes)");
}

TEST(ReaderMalformed, AbsurdCounts) {
  EXPECT_THAT(parse_error(ByteBuilder().header(uint64_t{1} << 60, 0).bytes()),
              HasSubstr("tensor count 1152921504606846976 cannot fit in the file (24 bytes)"));
  EXPECT_THAT(parse_error(ByteBuilder().header(0, ~uint64_t{0}).bytes()),
              HasSubstr("metadata count 18446744073709551615 cannot fit"));
  ByteBuilder b;
  b.header(0, 1).str("k").u32(9).u32(4).u64(1000000000000).zeros(64);
  EXPECT_THAT(parse_error(b.bytes()), HasSubstr("array of 1000000000000 uint32 items at offset 41 in metadata key 'k' "
                                                "cannot fit in the 64 bytes left"));
}

TEST(ReaderMalformed, StringsPastEndOfFile) {
  ByteBuilder key;
  key.header(0, 1).u64(5000).zeros(20);
  EXPECT_EQ(parse_error(key.bytes()),
            "model.gguf: key of 5000 bytes at offset 24 in metadata entry 0 extends past end of "
            "file (52 bytes)");
  ByteBuilder value;
  value.header(0, 1).str("name").u32(8).u64(~uint64_t{0});
  EXPECT_THAT(parse_error(value.bytes()),
              HasSubstr("string of 18446744073709551615 bytes at offset 40 in metadata key 'name' "
                        "extends past end of file"));
}

TEST(ReaderMalformed, BadValueTypes) {
  EXPECT_THAT(parse_error(ByteBuilder().header(0, 1).str("k").u32(13).u8(0).bytes()),
              HasSubstr("unknown value type 13 at offset 33 in metadata key 'k'"));
  EXPECT_THAT(parse_error(ByteBuilder().header(0, 1).str("k").u32(9).u32(99).u64(0).bytes()),
              HasSubstr("unknown array element type 99"));
  EXPECT_THAT(parse_error(ByteBuilder().header(0, 1).str("k").u32(7).u8(2).bytes()),
              HasSubstr("invalid bool value 2 at offset 37 in metadata key 'k'"));
}

TEST(ReaderMalformed, ArraysNestedTooDeep) {
  ByteBuilder b;
  b.header(0, 1).str("deep").u32(9);
  for (int i = 0; i < 40; ++i) b.u32(9).u64(1);
  b.u32(0).u64(0);
  EXPECT_THAT(parse_error(b.bytes()), HasSubstr("arrays nested more than 16 deep"));
}

TEST(ReaderMalformed, DuplicateMetadataKey) {
  ByteBuilder b;
  b.header(0, 2).str("dup").u32(0).u8(1).str("dup").u32(0).u8(2);
  EXPECT_EQ(parse_error(b.bytes()), "model.gguf: duplicate metadata key 'dup'");
}

TEST(ReaderMalformed, DuplicateTensorName) {
  std::vector<uint8_t> bytes = valid_file();
  size_t at = find_after(bytes, "tensor_bb");
  bytes[at - 2] = 'a';
  bytes[at - 1] = 'a';
  EXPECT_EQ(parse_error(bytes), "model.gguf: duplicate tensor name 'tensor_aa'");
}

TEST(ReaderMalformed, BadAlignment) {
  auto with_alignment = [](uint32_t type, auto value) {
    ByteBuilder b;
    b.header(0, 1).str("general.alignment").u32(type).put(value);
    return parse_error(b.bytes());
  };
  EXPECT_THAT(with_alignment(4, uint32_t{48}), HasSubstr("model.gguf: general.alignment 48 is not a power of two"));
  EXPECT_THAT(with_alignment(4, uint32_t{0}), HasSubstr("general.alignment 0 is not a power of two"));
  EXPECT_THAT(with_alignment(5, int32_t{-64}), HasSubstr("general.alignment -64"));
  EXPECT_THAT(with_alignment(10, uint64_t{1} << 40), HasSubstr("not a power of two between 1 and 2^31"));
  EXPECT_THAT(with_alignment(6, 32.0f),
              HasSubstr("metadata key 'general.alignment' has type float32, expected an integer"));
  EXPECT_EQ(with_alignment(4, uint32_t{16}), "parsed OK");
}

TEST(ReaderMalformed, DimensionCounts) {
  for (uint32_t n : {0u, 5u}) {
    std::vector<uint8_t> bytes = valid_file();
    patch<uint32_t>(bytes, bb_info(bytes), n);
    EXPECT_EQ(parse_error(bytes),
              "model.gguf: tensor 'tensor_bb' has " + std::to_string(n) + " dimensions (must be 1 to 4)");
  }
}

TEST(ReaderMalformed, ZeroDimension) {
  std::vector<uint8_t> bytes = valid_file();
  patch<uint64_t>(bytes, bb_info(bytes) + kDims + 8, 0);
  EXPECT_EQ(parse_error(bytes), "model.gguf: tensor 'tensor_bb' dimension 1 is 0");
}

TEST(ReaderMalformed, ElementCountOverflow) {
  std::vector<uint8_t> bytes = valid_file();
  patch<uint64_t>(bytes, bb_info(bytes) + kDims + 8, uint64_t{1} << 62);  // 32 * 2^62
  EXPECT_THAT(parse_error(bytes), HasSubstr("tensor 'tensor_bb' element count overflows int64"));
  patch<uint64_t>(bytes, bb_info(bytes) + kDims, uint64_t{1} << 63);  // not an int64 at all
  EXPECT_THAT(parse_error(bytes), HasSubstr("dimension 0 is 9223372036854775808"));
}

TEST(ReaderMalformed, RowLengthNotWholeBlocks) {
  std::vector<uint8_t> bytes = valid_file();
  patch<uint64_t>(bytes, bb_info(bytes) + kDims, 48);
  EXPECT_EQ(parse_error(bytes),
            "model.gguf: tensor 'tensor_bb' row length 48 is not a multiple of the Q8_0 block size 32");
}

TEST(ReaderMalformed, UnknownTensorType) {
  std::vector<uint8_t> bytes = valid_file();
  patch<uint32_t>(bytes, bb_info(bytes) + kType, 99);
  EXPECT_THAT(parse_error(bytes), HasSubstr("model.gguf: tensor 'tensor_bb' has unknown type id 99"));
}

TEST(ReaderMalformed, MisalignedOffset) {
  std::vector<uint8_t> bytes = valid_file();
  patch<uint64_t>(bytes, bb_info(bytes) + kOffset, 33);
  EXPECT_EQ(parse_error(bytes), "model.gguf: tensor 'tensor_bb' data offset 33 is not a multiple of the alignment 32");
}

TEST(ReaderMalformed, DataPastEndOfFile) {
  std::vector<uint8_t> bytes = valid_file();
  const uint64_t data_offset = GgufFile::parse(bytes, "x").data_offset();
  const uint64_t size = bytes.size();
  patch<uint64_t>(bytes, bb_info(bytes) + kOffset, 1 << 20);
  EXPECT_EQ(parse_error(bytes), fmt::format("model.gguf: tensor 'tensor_bb' data [offset {}, 68 bytes] "
                                            "extends past end of file ({} bytes)",
                                            data_offset + (1 << 20), size));
  // An offset so large that offset + data start overflows is still reported.
  patch<uint64_t>(bytes, bb_info(bytes) + kOffset, ~uint64_t{31});
  EXPECT_THAT(parse_error(bytes), HasSubstr("extends past end of file"));
}

TEST(ReaderMalformed, TruncatedTensorData) {
  std::vector<uint8_t> bytes = valid_file();
  // Data: tensor_aa at 0 (16 bytes, padded to 32), tensor_bb at 32 (68 bytes).
  const uint64_t data_offset = GgufFile::parse(bytes, "x").data_offset();
  bytes.resize(data_offset + 32 + 67);
  EXPECT_EQ(parse_error(bytes), fmt::format("model.gguf: tensor 'tensor_bb' data [offset {}, 68 bytes] "
                                            "extends past end of file ({} bytes)",
                                            data_offset + 32, bytes.size()));
}

TEST(ReaderMalformed, EveryPrefixFailsCleanly) {
  std::vector<uint8_t> bytes = valid_file();
  const uint64_t data_end = GgufFile::parse(bytes, "x").data_offset() + 32 + 68;
  for (size_t n = 0; n < data_end; ++n) {
    std::span<const uint8_t> prefix(bytes.data(), n);
    EXPECT_THROW(GgufFile::parse(prefix, "x"), Error) << "prefix of " << n << " bytes";
  }
  // The final padding is optional.
  EXPECT_NO_THROW(GgufFile::parse(std::span<const uint8_t>(bytes.data(), data_end), "x"));
}

TEST(ReaderMalformed, RandomMutationsNeverCrash) {
  const std::vector<uint8_t> original = valid_file();
  std::mt19937 rng(1234);
  int parsed = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<uint8_t> bytes = original;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t at = rng() % bytes.size();
      bytes[at] = (rng() % 2) ? static_cast<uint8_t>(rng()) : 0xff;
    }
    try {
      GgufFile f = GgufFile::parse(bytes, "x");
      for (const TensorInfo& t : f.tensors()) {
        ASSERT_GE(t.data, bytes.data());
        ASSERT_LE(t.data + t.num_bytes, bytes.data() + bytes.size());
      }
      ++parsed;
    } catch (const Error& e) {
      ASSERT_THAT(e.what(), StartsWith("x: "));
    }
  }
  EXPECT_GT(parsed, 0);  // most single-byte edits of tensor data are harmless
}

TEST(Getters, TypedAccess) {
  std::vector<uint8_t> bytes = valid_file();
  GgufFile f = GgufFile::parse(bytes, "model.gguf");
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("llama.block_count"), 2);
  EXPECT_DOUBLE_EQ(f.get_float("llama.rope.freq_base"), 10000.0);
  EXPECT_DOUBLE_EQ(f.get_float("llama.block_count"), 2.0);  // integers widen
  EXPECT_TRUE(f.get_bool("tokenizer.ggml.add_bos_token"));
  EXPECT_EQ(f.get_array("tokenizer.ggml.tokens").items.size(), 2u);
  EXPECT_EQ(f.get_int_or("llama.context_length", 4096), 4096);
  EXPECT_EQ(f.get_string_or("general.name", "unnamed"), "unnamed");
  EXPECT_DOUBLE_EQ(f.get_float_or("x", 0.5), 0.5);
  EXPECT_FALSE(f.get_bool_or("x", false));
  EXPECT_EQ(f.find("nope"), nullptr);
  EXPECT_EQ(f.find_tensor("nope"), nullptr);
}

TEST(Getters, ErrorsNameFileAndKey) {
  std::vector<uint8_t> bytes = valid_file();
  GgufFile f = GgufFile::parse(bytes, "model.gguf");
  auto message = [](auto&& fn) -> std::string {
    try {
      fn();
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_EQ(message([&] { f.get_int("llama.context_length"); }),
            "model.gguf: metadata key 'llama.context_length' is missing");
  EXPECT_EQ(message([&] { f.get_int("general.architecture"); }),
            "model.gguf: metadata key 'general.architecture' has type string, expected an integer");
  EXPECT_EQ(message([&] { f.get_int_or("general.architecture", 1); }),
            "model.gguf: metadata key 'general.architecture' has type string, expected an integer");
  EXPECT_EQ(message([&] { f.get_string("llama.block_count"); }),
            "model.gguf: metadata key 'llama.block_count' has type uint32, expected a string");
  EXPECT_EQ(message([&] { f.get_float("tokenizer.ggml.tokens"); }),
            "model.gguf: metadata key 'tokenizer.ggml.tokens' has type array, expected a number");
  EXPECT_EQ(message([&] { f.get_bool("llama.block_count"); }),
            "model.gguf: metadata key 'llama.block_count' has type uint32, expected a bool");
  EXPECT_EQ(message([&] { f.get_array("general.architecture"); }),
            "model.gguf: metadata key 'general.architecture' has type string, expected an array");
  EXPECT_THAT(message([&] { f.get_int("big"); }), HasSubstr("does not fit a signed 64-bit integer"));
  EXPECT_EQ(message([&] { f.tensor("output.weight"); }), "model.gguf: tensor 'output.weight' is missing");
}

}  // namespace
}  // namespace tokenmill::gguf
