// GPTQ/AWQ import pieces: the settings files and their refusals, unpacking
// of both packings (written here from the layout in packed_int4_checkpoint.h)
// with its shape/group refusals, llama's rotary row order, and the GGUF
// encoding: exact where the type holds the codes, re-rounded (and
// measured) where it cannot.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/quant.h"
#include "quant/checkpoint_config.h"
#include "quant/checkpoint_tensors.h"
#include "quant/int4_gguf_encode.h"
#include "quant/packed_int4_checkpoint.h"
#include "quant/safetensors_test_util.h"
#include "util/error.h"
#include "util/fp16.h"

namespace tokenmill::quant {
namespace {

using gguf::TensorType;
using nlohmann::json;
using testing::SafetensorsBuilder;

// A layer's logical contents, before packing.
struct LogicalLayer {
  int64_t rows = 0, cols = 0, group = 0;
  std::vector<uint8_t> codes;    // [rows, cols]
  std::vector<uint8_t> zeros;    // [groups, rows], 1..15 so v1 packing round-trips
  std::vector<uint16_t> scales;  // [groups, rows]
  std::vector<int32_t> g_idx;    // [cols]
};

LogicalLayer random_layer(int64_t rows, int64_t cols, int64_t group, bool sym, uint32_t seed) {
  std::mt19937 rng(seed);
  LogicalLayer l{rows, cols, group, {}, {}, {}, {}};
  const int64_t groups = cols / group;
  for (int64_t i = 0; i < rows * cols; ++i) l.codes.push_back(static_cast<uint8_t>(rng() % 16));
  for (int64_t i = 0; i < groups * rows; ++i) {
    l.zeros.push_back(sym ? 8 : static_cast<uint8_t>(1 + rng() % 15));
    l.scales.push_back(fp32_to_fp16(0.001f + 0.01f * static_cast<float>(rng() % 1000) / 1000.0f));
  }
  for (int64_t i = 0; i < cols; ++i) l.g_idx.push_back(static_cast<int32_t>(i / group));
  return l;
}

// GPTQ: codes along the input dim, zeros along the output dim.
void add_gptq(SafetensorsBuilder& b, const std::string& prefix, const LogicalLayer& l, bool v1, bool with_g_idx) {
  std::vector<int32_t> qw(static_cast<size_t>(l.cols / 8 * l.rows), 0);
  for (int64_t r = 0; r < l.cols / 8; ++r)
    for (int64_t o = 0; o < l.rows; ++o)
      for (int k = 0; k < 8; ++k)
        qw[r * l.rows + o] |= static_cast<int32_t>(l.codes[o * l.cols + 8 * r + k] << (4 * k));
  const int64_t groups = l.cols / l.group;
  std::vector<int32_t> qz(static_cast<size_t>(groups * l.rows / 8), 0);
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t o = 0; o < l.rows; ++o)
      qz[g * l.rows / 8 + o / 8] |=
          static_cast<int32_t>(((l.zeros[g * l.rows + o] - (v1 ? 1 : 0)) & 15) << (4 * (o % 8)));
  b.add(prefix + ".qweight", "I32", {l.cols / 8, l.rows}, qw);
  b.add(prefix + ".qzeros", "I32", {groups, l.rows / 8}, qz);
  b.add(prefix + ".scales", "F16", {groups, l.rows}, l.scales);
  if (with_g_idx) b.add(prefix + ".g_idx", "I32", {l.cols}, l.g_idx);
}

// AWQ: codes and zeros along the output dim, interleaved 0,2,4,6,1,3,5,7.
void add_awq(SafetensorsBuilder& b, const std::string& prefix, const LogicalLayer& l) {
  const int order[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  const int64_t words = l.rows / 8, groups = l.cols / l.group;
  std::vector<int32_t> qw(static_cast<size_t>(l.cols * words), 0), qz(static_cast<size_t>(groups * words), 0);
  for (int64_t i = 0; i < l.cols; ++i)
    for (int64_t c = 0; c < words; ++c)
      for (int k = 0; k < 8; ++k) qw[i * words + c] |= l.codes[(8 * c + order[k]) * l.cols + i] << (4 * k);
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t c = 0; c < words; ++c)
      for (int k = 0; k < 8; ++k) qz[g * words + c] |= l.zeros[g * l.rows + 8 * c + order[k]] << (4 * k);
  b.add(prefix + ".qweight", "I32", {l.cols, words}, qw);
  b.add(prefix + ".qzeros", "I32", {groups, words}, qz);
  b.add(prefix + ".scales", "F16", {groups, l.rows}, l.scales);
}

CheckpointConfig config_of(const std::string& text, CheckpointMethod method = CheckpointMethod::kGptq) {
  return parse_checkpoint_config(json::parse(text), method, "test.json");
}

std::string config_error(const std::string& text, CheckpointMethod method = CheckpointMethod::kGptq) {
  try {
    config_of(text, method);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

PackedLinear packed_from(const SafetensorsFile& f, const std::string& prefix) {
  return PackedLinear{prefix, f.find(prefix + ".qweight"), f.find(prefix + ".qzeros"), f.find(prefix + ".scales"),
                      f.find(prefix + ".g_idx")};
}

void expect_same(const Int4Matrix& m, const LogicalLayer& l) {
  ASSERT_EQ(m.codes, l.codes);
  ASSERT_EQ(m.zeros, l.zeros);
  ASSERT_EQ(m.scales, l.scales);
  ASSERT_EQ(m.group, l.g_idx);
}

TEST(CheckpointConfig, ReadsGptqAndAwqSettings) {
  const CheckpointConfig g = config_of(R"({"bits": 4, "group_size": 128, "desc_act": true, "sym": false})");
  EXPECT_EQ(g.group_size, 128);
  EXPECT_TRUE(g.desc_act);
  EXPECT_TRUE(g.zero_stored_minus_one);  // "gptq" (v1) when unstated
  EXPECT_FALSE(config_of(R"({"bits": 4, "group_size": -1, "checkpoint_format": "gptq_v2"})").zero_stored_minus_one);
  const CheckpointConfig a =
      config_of(R"({"quant_method": "awq", "bits": 4, "group_size": 64, "version": "GEMM", "zero_point": true})",
                CheckpointMethod::kAwq);
  EXPECT_EQ(a.group_size, 64);
  EXPECT_EQ(a.format, "gemm");
  EXPECT_FALSE(a.zero_stored_minus_one);
}

TEST(CheckpointConfig, RefusesWhatItCannotImport) {
  EXPECT_NE(config_error(R"({"bits": 8, "group_size": 128})").find("bits = 8"), std::string::npos);
  EXPECT_NE(config_error(R"({"bits": 4, "group_size": 0})").find("unsupported group size 0"), std::string::npos);
  EXPECT_NE(config_error(R"({"bits": 4, "checkpoint_format": "marlin"})").find("unknown checkpoint format 'marlin'"),
            std::string::npos);
  EXPECT_NE(config_error(R"({"quant_method": "awq", "bits": 4})").find("use --from awq"), std::string::npos);
  EXPECT_NE(config_error(R"({"quant_method": "exl2", "bits": 4})").find("unknown quantization method"),
            std::string::npos);
  EXPECT_NE(config_error(R"({"quant_method": "awq", "version": "gemv"})", CheckpointMethod::kAwq).find("gemv"),
            std::string::npos);
  EXPECT_NE(config_error(R"({"quant_method": "awq", "zero_point": false})", CheckpointMethod::kAwq).find("zero_point"),
            std::string::npos);
  EXPECT_NE(config_error(R"({"bits": "4"})").find("not an integer"), std::string::npos);
}

TEST(PackedInt4, UnpacksGptqV1V2AndAwq) {
  const LogicalLayer l = random_layer(16, 64, 32, false, 1);
  SafetensorsBuilder b;
  add_gptq(b, "v1", l, true, true);
  add_gptq(b, "v2", l, false, false);
  add_awq(b, "awq", l);
  const std::vector<uint8_t> bytes = b.bytes();
  const SafetensorsFile f = SafetensorsFile::parse(bytes, "c.safetensors");
  expect_same(unpack_linear(packed_from(f, "v1"), config_of(R"({"group_size": 32})"), 16, 64), l);
  expect_same(
      unpack_linear(packed_from(f, "v2"), config_of(R"({"group_size": 32, "checkpoint_format": "gptq_v2"})"), 16, 64),
      l);
  expect_same(unpack_linear(packed_from(f, "awq"), config_of(R"({"group_size": 32})", CheckpointMethod::kAwq), 16, 64),
              l);
}

TEST(PackedInt4, GptqV1ZeroOfZeroReadsAsSixteen) {
  LogicalLayer l = random_layer(8, 32, 32, false, 2);
  l.zeros[3] = 16;  // stored as (16 - 1) & 15 = 15, read back as 15 + 1, as AutoGPTQ does
  SafetensorsBuilder b;
  add_gptq(b, "p", l, true, false);
  const std::vector<uint8_t> bytes = b.bytes();
  const SafetensorsFile f = SafetensorsFile::parse(bytes, "c.safetensors");
  const Int4Matrix m = unpack_linear(packed_from(f, "p"), config_of(R"({"group_size": -1})"), 8, 32);
  EXPECT_EQ(m.zeros[3], 16);
  EXPECT_EQ(m.num_groups, 1);
}

std::string unpack_error(const SafetensorsFile& f, const std::string& prefix, const std::string& config, int64_t rows,
                         int64_t cols, CheckpointMethod method = CheckpointMethod::kGptq) {
  try {
    unpack_linear(packed_from(f, prefix), config_of(config, method), rows, cols);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(PackedInt4, RefusesShapesGroupsAndIndices) {
  LogicalLayer l = random_layer(16, 64, 32, false, 3);
  SafetensorsBuilder b;
  add_gptq(b, "p", l, true, true);
  l.g_idx[5] = 7;
  add_gptq(b, "bad_g", l, true, true);
  const std::vector<uint8_t> bytes = b.bytes();
  const SafetensorsFile f = SafetensorsFile::parse(bytes, "c.safetensors");
  const std::string g32 = R"({"group_size": 32})";
  EXPECT_NE(unpack_error(f, "p", g32, 24, 64)
                .find("p.qweight: shape [8, 16] does not match the base model: expected "
                      "[8, 24]"),
            std::string::npos);
  EXPECT_NE(unpack_error(f, "p", R"({"group_size": 48})", 16, 64)
                .find("group size 48: it does not divide the input "
                      "dimension 64"),
            std::string::npos);
  EXPECT_NE(unpack_error(f, "p", R"({"group_size": 16})", 16, 64).find("p.qzeros: shape [2, 2]"), std::string::npos);
  EXPECT_NE(unpack_error(f, "bad_g", g32, 16, 64).find("g_idx[5] = 7 is outside the 2 groups"), std::string::npos);
  EXPECT_NE(unpack_error(f, "nothing", g32, 16, 64).find("missing tensor nothing.qweight"), std::string::npos);
  EXPECT_NE(unpack_error(f, "p", g32, 16, 64, CheckpointMethod::kAwq).find("shape [8, 16]"), std::string::npos);
}

TEST(PackedInt4, RopeRowOrderMatchesLlamaCppPermute) {
  // Two heads of 4 rows: HF rows (h, k, j) -> GGUF rows (h, j, k).
  EXPECT_EQ(rope_row_order(8, 2), (std::vector<int64_t>{0, 2, 1, 3, 4, 6, 5, 7}));
  EXPECT_THROW(rope_row_order(6, 2), Error);
  Int4Matrix m;
  m.rows = 4, m.cols = 1, m.num_groups = 1;
  m.codes = {10, 11, 12, 13};
  m.zeros = {1, 2, 3, 4};
  m.scales = {5, 6, 7, 8};
  reorder_rows(m, rope_row_order(4, 1));
  EXPECT_EQ(m.codes, (std::vector<uint8_t>{10, 12, 11, 13}));
  EXPECT_EQ(m.zeros, (std::vector<uint8_t>{1, 3, 2, 4}));
  EXPECT_EQ(m.scales, (std::vector<uint16_t>{5, 7, 6, 8}));
}

TEST(CheckpointTensors, MapsProjectionNames) {
  EXPECT_EQ(linear_layer_name("model.layers.12.mlp.down_proj").gguf_name, "blk.12.ffn_down.weight");
  EXPECT_EQ(linear_layer_name("model.layers.0.self_attn.o_proj").gguf_bias, "blk.0.attn_output.bias");
  EXPECT_EQ(linear_layer_name("model.language_model.layers.1.self_attn.q_proj").role, "attn_q");
  EXPECT_THROW(linear_layer_name("model.layers.0.mlp.experts.0.up_proj"), Error);
  EXPECT_THROW(linear_layer_name("model.layers.x.mlp.up_proj"), Error);
  EXPECT_THROW(linear_layer_name("lm_head"), Error);
}

Int4Matrix matrix_of(const LogicalLayer& l) {
  Int4Matrix m;
  m.rows = l.rows, m.cols = l.cols, m.num_groups = l.cols / l.group;
  m.codes = l.codes, m.zeros = l.zeros, m.scales = l.scales, m.group = l.g_idx;
  return m;
}

// Max |decoded - checkpoint value| over the whole matrix, decoded by the
// reference dequantizer (independent of the encoder's own measurement).
double decoded_error(const Int4Matrix& m, TensorType type, const std::vector<uint8_t>& bytes) {
  std::vector<float> row(static_cast<size_t>(m.cols));
  double worst = 0;
  const int64_t rb = gguf::row_bytes(type, m.cols);
  for (int64_t r = 0; r < m.rows; ++r) {
    kernels::dequantize_row_ref(type, bytes.data() + r * rb, row.data(), m.cols);
    for (int64_t c = 0; c < m.cols; ++c)
      worst = std::max(worst, static_cast<double>(std::fabs(row[c] - m.value(r, c))));
  }
  return worst;
}

TEST(Int4Encode, ExactWhereTheTypeHoldsTheCodes) {
  ThreadPool pool(2);
  Int4Matrix asym = matrix_of(random_layer(8, 128, 64, false, 4));
  asym.zeros[0] = 16;  // q - z reaches -16: still inside Q5_0 and Q8_0
  const Int4Matrix sym = matrix_of(random_layer(8, 128, 128, true, 5));
  EXPECT_TRUE(groups_align_to_blocks(asym));
  EXPECT_FALSE(all_zeros_are_eight(asym));
  EXPECT_TRUE(all_zeros_are_eight(sym));
  using Case = std::pair<const Int4Matrix*, TensorType>;
  for (const auto& [m, type] : {Case{&asym, TensorType::Q5_0}, Case{&asym, TensorType::Q8_0},
                                Case{&sym, TensorType::Q4_0}, Case{&sym, TensorType::Q5_0}}) {
    Int4EncodeStats st;
    const std::vector<uint8_t> bytes = encode_int4_matrix(*m, type, pool, st);
    EXPECT_EQ(st.requantized_blocks, 0) << gguf::tensor_type_name(type);
    EXPECT_EQ(st.max_abs_error, 0.0) << gguf::tensor_type_name(type);
    EXPECT_EQ(decoded_error(*m, type, bytes), 0.0) << gguf::tensor_type_name(type);
  }
}

TEST(Int4Encode, NearestOrReRoundedOtherwiseWithTheErrorMeasured) {
  ThreadPool pool(1);
  const Int4Matrix asym = matrix_of(random_layer(8, 64, 32, false, 6));
  Int4EncodeStats q41;
  const std::vector<uint8_t> b41 = encode_int4_matrix(asym, TensorType::Q4_1, pool, q41);
  EXPECT_EQ(q41.requantized_blocks, 0);
  EXPECT_EQ(decoded_error(asym, TensorType::Q4_1, b41), q41.max_abs_error);
  EXPECT_LT(q41.max_abs_error, 2e-4);  // the fp16 rounding of -s*z with s <= 0.011, z <= 15
  Int4EncodeStats q40;
  encode_int4_matrix(asym, TensorType::Q4_0, pool, q40);
  EXPECT_GT(q40.requantized_blocks, 0);  // blocks whose zero is not 8
  EXPECT_GT(q40.max_abs_error, 0.0);
  // Act order: shuffled groups span blocks, so every block is re-rounded.
  LogicalLayer act = random_layer(8, 64, 16, false, 7);
  std::shuffle(act.g_idx.begin(), act.g_idx.end(), std::mt19937(8));
  const Int4Matrix m = matrix_of(act);
  EXPECT_FALSE(groups_align_to_blocks(m));
  Int4EncodeStats st;
  const std::vector<uint8_t> bytes = encode_int4_matrix(m, TensorType::Q8_0, pool, st);
  EXPECT_EQ(st.requantized_blocks, st.num_blocks);
  EXPECT_GT(st.max_abs_error, 0.0);
  EXPECT_EQ(decoded_error(m, TensorType::Q8_0, bytes), st.max_abs_error);
  EXPECT_LT(st.max_abs_error, 0.011 * 16 / 127.0);  // half a Q8_0 step of the block's range, with slack
}

}  // namespace
}  // namespace tokenmill::quant
