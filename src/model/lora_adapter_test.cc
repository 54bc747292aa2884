// LoRA adapters on tiny synthetic models: the logits with an adapter equal
// those of the base with merged weights W + scale B A (every architecture,
// phi3's fused tensors included); a batch mixing adapters and the base gives
// each sequence the logits it gets alone; the grouped delta kernel matches
// its double-precision reference; bad adapter files are refused by name;
// the identity follows the contents, not the file name.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "kv/paged_kv_storage.h"
#include "model/lora_adapter.h"
#include "model/lora_apply.h"
#include "model/model.h"
#include "model/single_sequence.h"
#include "model/synth.h"
#include "model/synth_lora.h"
#include "model/test_gguf_variants.h"
#include "util/error.h"
#include "util/fp16.h"

namespace tokenmill::model {
namespace {

using test_files::f32_bytes;
using test_files::random_tokens;

// A file written from a GgufWriter into the temporary folder, removed with
// the object.
class TempGguf {
 public:
  TempGguf(const gguf::GgufWriter& w, const std::string& tag) {
    path_ = (std::filesystem::temp_directory_path() / ("tm_lora_" + tag + "_" + std::to_string(getpid()) + ".gguf"))
                .string();
    w.write(path_);
  }
  ~TempGguf() { std::filesystem::remove(path_); }
  TempGguf(const TempGguf&) = delete;
  TempGguf& operator=(const TempGguf&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A tensor's values as floats (any type).
std::vector<float> values(const gguf::TensorInfo& t) {
  const kernels::WeightView w{t.type, t.data, t.num_rows(), t.row_length(), nullptr};
  std::vector<float> out(static_cast<size_t>(t.num_elements()));
  for (int64_t r = 0; r < w.rows; ++r) kernels::dequantize_weight_row(w, r, out.data() + r * w.cols);
  return out;
}

// The base file with every adapted tensor replaced by W + scale B A (in
// double, stored F32), the reference the adapter must reproduce.
gguf::GgufWriter merged(const gguf::GgufFile& base, const gguf::GgufFile& lora, float user_scale) {
  const double alpha = lora.get_float_or("adapter.lora.alpha", 0.0);
  gguf::GgufWriter w;
  for (const gguf::MetadataEntry& e : base.metadata()) w.set(e.key, e.value);
  for (const gguf::TensorInfo& t : base.tensors()) {
    const std::vector<int64_t> dims(t.dims, t.dims + t.num_dims);
    const gguf::TensorInfo* a = lora.find_tensor(t.name + ".lora_a");
    if (a == nullptr) {
      w.add_tensor(t.name, t.type, dims, std::vector<uint8_t>(t.data, t.data + t.num_bytes));
      continue;
    }
    const gguf::TensorInfo& b = lora.tensor(t.name + ".lora_b");
    const int64_t n_in = t.row_length(), n_out = t.num_rows(), rank = a->num_rows();
    const double scale = alpha != 0 ? user_scale * alpha / static_cast<double>(rank) : user_scale;
    std::vector<float> wv = values(t);
    const std::vector<float> av = values(*a), bv = values(b);
    for (int64_t o = 0; o < n_out; ++o)
      for (int64_t i = 0; i < n_in; ++i) {
        double d = 0;
        for (int64_t r = 0; r < rank; ++r)
          d += static_cast<double>(bv[static_cast<size_t>(o * rank + r)]) * av[static_cast<size_t>(r * n_in + i)];
        wv[static_cast<size_t>(o * n_in + i)] += static_cast<float>(scale * d);
      }
    w.add_tensor(t.name, gguf::TensorType::F32, dims, f32_bytes(wv));
  }
  return w;
}

SynthLoraOptions lora_options(uint64_t seed, int64_t rank = 4, gguf::TensorType type = gguf::TensorType::F32) {
  SynthLoraOptions o;
  o.rank = rank;
  o.alpha = 8.0f;
  o.seed = seed;
  o.type = type;
  o.strength = 0.5f;
  return o;
}

std::vector<float> logits_alone(Model& m, const LoraAdapter* adapter, const std::vector<int32_t>& tokens,
                                ThreadPool& pool) {
  SingleSequence seq(m, static_cast<int64_t>(tokens.size()), kv::KvDtype::F32);
  seq.set_adapter(adapter);
  std::vector<float> logits;
  seq.forward(tokens, true, logits, pool);
  return logits;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, std::fabs(double(x)));
  return m;
}

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}

class LoraMerged : public ::testing::TestWithParam<SynthArch> {};

TEST_P(LoraMerged, AdapterLogitsEqualMergedWeights) {
  test_files::TinyModelFile base(GetParam(), 5, "tm_lora_base");
  SynthLoraOptions o = lora_options(11);
  o.targets = {};
  const gguf::GgufWriter lw = build_synth_lora(base.model().file(), o);
  const TempGguf lora_file(lw, "merged_adapter");
  const auto adapter = LoraAdapter::load(lora_file.path(), base.model(), "a", 0.75f);
  const gguf::GgufFile lora = gguf::GgufFile::open(lora_file.path());
  const TempGguf merged_file(merged(base.model().file(), lora, 0.75f), "merged_model");
  const std::unique_ptr<Model> merged_model = Model::load(merged_file.path());

  ThreadPool pool(2);
  const std::vector<int32_t> tokens = random_tokens(12, base.model().config().n_vocab, 3);
  const std::vector<float> with = logits_alone(base.model(), adapter.get(), tokens, pool);
  const std::vector<float> ref = logits_alone(*merged_model, nullptr, tokens, pool);
  const std::vector<float> plain = logits_alone(base.model(), nullptr, tokens, pool);
  const double scale = std::max(1.0, max_abs(ref));
  EXPECT_LT(max_diff(with, ref), 2e-4 * scale);
  // The adapter matters: far from the base logits.
  EXPECT_GT(max_diff(plain, ref), 100 * 2e-4 * scale);
}

INSTANTIATE_TEST_SUITE_P(Archs, LoraMerged,
                         ::testing::Values(SynthArch::kLlama, SynthArch::kQwen2, SynthArch::kGemma3, SynthArch::kPhi3,
                                           SynthArch::kQwen3, SynthArch::kOlmo2, SynthArch::kGranite,
                                           SynthArch::kGemma2),
                         [](const auto& info) { return std::string(synth_arch_name(info.param)); });

// Sequences with adapters A and B and none, in one forward pass over one
// paged pool, each get the logits they get alone.
TEST(LoraBatch, MixedAdaptersInOneStepMatchEachAlone) {
  test_files::TinyModelFile base(SynthArch::kLlama, 9, "tm_lora_batch");
  Model& m = base.model();
  const TempGguf fa(build_synth_lora(m.file(), lora_options(1)), "batch_a");
  const TempGguf fb(build_synth_lora(m.file(), lora_options(2, 8)), "batch_b");
  const auto a = LoraAdapter::load(fa.path(), m, "a");
  const auto b = LoraAdapter::load(fb.path(), m, "b");
  const LoraAdapter* which[] = {a.get(), nullptr, b.get(), a.get()};
  const int64_t lengths[] = {7, 5, 9, 1};

  constexpr int64_t kBlock = 16;
  kv::PagedKvStorage kv(m.kv_geometry(kBlock, kv::KvDtype::F32), 4);
  ThreadPool pool(2);
  std::vector<std::vector<int32_t>> tokens, tables;
  std::vector<ChunkTable> chunk_tables;
  std::vector<SequenceChunk> chunks;
  for (int i = 0; i < 4; ++i) {
    tokens.push_back(random_tokens(lengths[i], m.config().n_vocab, 20 + i));
    tables.push_back({i});
  }
  for (int i = 0; i < 4; ++i) chunk_tables.push_back(ChunkTable{tables[static_cast<size_t>(i)], 0});
  for (int i = 0; i < 4; ++i) {
    SequenceChunk c{tokens[static_cast<size_t>(i)], 0, {&chunk_tables[static_cast<size_t>(i)], 1}, LogitRows::kAll};
    c.adapter = which[i];
    chunks.push_back(c);
  }
  std::vector<float> together;
  m.forward(chunks, kv, together, pool);
  const int64_t V = m.config().n_vocab;
  int64_t row = 0;
  for (int i = 0; i < 4; ++i) {
    const std::vector<float> alone = logits_alone(m, which[i], tokens[static_cast<size_t>(i)], pool);
    const std::vector<float> part(together.begin() + row * V, together.begin() + (row + lengths[i]) * V);
    EXPECT_LT(max_diff(part, alone), 1e-4 * std::max(1.0, max_abs(alone))) << "sequence " << i;
    row += lengths[i];
  }
}

// The grouped kernel (gathered rows, kernels::matmul in every adapter type)
// against the double-precision reference.
TEST(LoraApply, GroupedDeltasMatchReference) {
  test_files::TinyModelFile base(SynthArch::kLlama, 4, "tm_lora_apply");
  Model& m = base.model();
  ThreadPool pool(2);
  for (gguf::TensorType type : {gguf::TensorType::F32, gguf::TensorType::F16, gguf::TensorType::Q8_0}) {
    const TempGguf f1(build_synth_lora(m.file(), lora_options(5, 32, type)), "apply_1");
    const TempGguf f2(build_synth_lora(m.file(), lora_options(6, 32, type)), "apply_2");
    const auto a1 = LoraAdapter::load(f1.path(), m, "1");
    const auto a2 = LoraAdapter::load(f2.path(), m, "2");
    const LoraPair& p = a1->pair(1, LoraSlot::kGate);
    ASSERT_TRUE(p.present());
    const int64_t n_in = p.a.cols, n_out = p.b.rows, rows = 9;
    std::vector<float> x(static_cast<size_t>(rows * n_in));
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(0.37 * double(i));
    std::vector<float> y(static_cast<size_t>(rows * n_out), 0.5f), y_ref = y;
    // Interleaved, non-contiguous row sets; rows 4 and 8 have no adapter.
    const std::vector<LoraRows> groups = {{a1.get(), {0, 2, 3, 7}}, {a2.get(), {1, 5, 6}}};
    const auto pick = [](const LoraAdapter& a) -> const LoraPair& { return a.pair(1, LoraSlot::kGate); };
    LoraScratch scratch;
    add_lora_deltas(groups, pick, x.data(), y.data(), pool, scratch);
    add_lora_deltas_ref(groups, pick, x.data(), y_ref.data());
    const double tol = type == gguf::TensorType::F32 ? 1e-5 : 2e-3;
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_NEAR(y[i], y_ref[i], tol * std::max(1.0, std::fabs(double(y_ref[i]))))
          << "type " << int(type) << " i " << i;
    for (int64_t r : {4, 8})
      for (int64_t o = 0; o < n_out; ++o) ASSERT_EQ(y[static_cast<size_t>(r * n_out + o)], 0.5f);
  }
}

// phi3 stores q/k/v and gate/up fused: one LoRA pair per fused tensor is
// split into per-slot row ranges of B sharing A.
TEST(LoraAdapter, FusedTensorsSplitIntoSlots) {
  test_files::TinyModelFile base(SynthArch::kPhi3, 2, "tm_lora_phi3");
  const Model& m = base.model();
  const TempGguf f(build_synth_lora(m.file(), lora_options(3)), "phi3");
  const auto a = LoraAdapter::load(f.path(), m, "p");
  const ModelConfig& c = m.config();
  const LoraPair& q = a->pair(0, LoraSlot::kQ);
  const LoraPair& k = a->pair(0, LoraSlot::kK);
  const LoraPair& v = a->pair(0, LoraSlot::kV);
  ASSERT_TRUE(q.present() && k.present() && v.present());
  EXPECT_EQ(q.a.data, k.a.data);
  EXPECT_EQ(q.b.rows, c.n_q_dim());
  EXPECT_EQ(k.b.rows, c.n_kv_dim());
  EXPECT_EQ(static_cast<const uint8_t*>(k.b.data) - static_cast<const uint8_t*>(q.b.data),
            c.n_q_dim() * gguf::row_bytes(q.b.type, q.b.cols));
  EXPECT_EQ(a->pair(0, LoraSlot::kGate).b.rows, c.n_ff);
  EXPECT_EQ(a->pair(0, LoraSlot::kUp).b.rows, c.n_ff);
  EXPECT_EQ(a->num_adapted(), 4 * c.n_layer);  // attn_qkv, attn_output, ffn_up, ffn_down
}

TEST(LoraAdapter, IdentityFollowsContentsAndScale) {
  test_files::TinyModelFile base(SynthArch::kLlama, 2, "tm_lora_identity");
  const Model& m = base.model();
  const gguf::GgufWriter w1 = build_synth_lora(m.file(), lora_options(1));
  const TempGguf f1(w1, "id1"), f1_copy(w1, "id1_copy");
  const TempGguf f2(build_synth_lora(m.file(), lora_options(2)), "id2");
  const auto a = LoraAdapter::load(f1.path(), m, "x");
  EXPECT_EQ(a->identity(), LoraAdapter::load(f1_copy.path(), m, "y")->identity());
  EXPECT_NE(a->identity(), LoraAdapter::load(f2.path(), m, "x")->identity());
  EXPECT_NE(a->identity(), LoraAdapter::load(f1.path(), m, "x", 0.5f)->identity());
  EXPECT_EQ(a->name(), "x");
  EXPECT_EQ(a->alpha(), 8.0f);
  EXPECT_EQ(a->max_rank(), 4);
  EXPECT_EQ(a->base(), &m);
}

// The message loading `w` as an adapter for `m` throws, or "(no error)".
std::string load_error(const gguf::GgufWriter& w, const Model& m) {
  const TempGguf f(w, "bad");
  try {
    LoraAdapter::load(f.path(), m, "bad");
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// The adapter `good` with `edit` applied to its writer copy.
template <typename Edit>
gguf::GgufWriter edited(const gguf::GgufFile& good, Edit edit) {
  gguf::GgufWriter w;
  for (const gguf::MetadataEntry& e : good.metadata()) w.set(e.key, e.value);
  edit(w, good);
  return w;
}

void add_all_tensors(gguf::GgufWriter& w, const gguf::GgufFile& f, const std::string& skip = "") {
  for (const gguf::TensorInfo& t : f.tensors())
    if (t.name != skip)
      w.add_tensor(t.name, t.type, std::vector<int64_t>(t.dims, t.dims + t.num_dims),
                   std::vector<uint8_t>(t.data, t.data + t.num_bytes));
}

gguf::GgufWriter copy_of(const gguf::GgufFile& f) {
  gguf::GgufWriter w;
  for (const gguf::MetadataEntry& e : f.metadata()) w.set(e.key, e.value);
  add_all_tensors(w, f);
  return w;
}

TEST(LoraAdapter, BadFilesAreRefusedByName) {
  test_files::TinyModelFile base(SynthArch::kLlama, 2, "tm_lora_bad");
  const Model& m = base.model();
  const std::vector<uint8_t> bytes = build_synth_lora(m.file(), lora_options(1)).to_bytes();
  const gguf::GgufFile good = gguf::GgufFile::parse(bytes, "good.gguf");
  const auto with_key = [&](const std::string& key, gguf::Value v) {
    return edited(good, [&](gguf::GgufWriter& w, const gguf::GgufFile& f) {
      w.set(key, v);
      add_all_tensors(w, f);
    });
  };
  const auto has = [](const std::string& msg, const std::string& part) {
    return msg.find(part) != std::string::npos
               ? ::testing::AssertionSuccess()
               : ::testing::AssertionFailure() << "'" << msg << "' lacks '" << part << "'";
  };
  EXPECT_TRUE(has(load_error(with_key("general.type", gguf::Value::str("model")), m), "not a LoRA adapter"));
  EXPECT_TRUE(has(load_error(with_key("adapter.type", gguf::Value::str("control_vector")), m), "only 'lora'"));
  EXPECT_TRUE(has(load_error(with_key("general.architecture", gguf::Value::str("qwen2")), m),
                  "for architecture 'qwen2', the base model is 'llama'"));
  // A model file is not an adapter.
  EXPECT_TRUE(has(load_error(copy_of(m.file()), m), "not a LoRA adapter"));
  EXPECT_TRUE(
      has(load_error(edited(good, [](gguf::GgufWriter& w,
                                     const gguf::GgufFile& f) { add_all_tensors(w, f, "blk.0.attn_q.weight.lora_b"); }),
                     m),
          "'blk.0.attn_q.weight.lora_a' has no 'blk.0.attn_q.weight.lora_b'"));
  const int64_t n_embd = m.config().n_embd;
  const auto with_tensor = [&](const std::string& name, std::vector<int64_t> dims) {
    return edited(good, [&](gguf::GgufWriter& w, const gguf::GgufFile& f) {
      add_all_tensors(w, f);
      int64_t n = 1;
      for (int64_t d : dims) n *= d;
      w.add_tensor(name, gguf::TensorType::F32, dims, std::vector<uint8_t>(static_cast<size_t>(n) * 4));
    });
  };
  const auto with_pair = [&](const std::string& base_name, std::vector<int64_t> a, std::vector<int64_t> b) {
    return edited(good, [&](gguf::GgufWriter& w, const gguf::GgufFile& f) {
      add_all_tensors(w, f);
      for (const auto& [suffix, dims] : {std::pair{".lora_a", a}, std::pair{".lora_b", b}})
        w.add_tensor(base_name + suffix, gguf::TensorType::F32, dims,
                     std::vector<uint8_t>(static_cast<size_t>(dims[0] * dims[1]) * 4));
    });
  };
  EXPECT_TRUE(has(load_error(with_tensor("blk.0.attn_q.weight.bias", {4}), m), "is not a LoRA tensor"));
  EXPECT_TRUE(
      has(load_error(with_pair("token_embd.weight", {n_embd, 4}, {4, m.config().n_vocab}), m), "token embedding"));
  EXPECT_TRUE(has(load_error(with_pair("blk.0.attn_norm.weight", {n_embd, 4}, {4, 1}), m), "not a linear layer"));
  EXPECT_TRUE(has(load_error(with_pair("blk.0.nothing.weight", {n_embd, 4}, {4, n_embd}), m), "has no tensor"));
  EXPECT_TRUE(has(load_error(with_pair("blk.99.attn_q.weight", {n_embd, 4}, {4, n_embd}), m), "has no tensor"));
  // Shapes: the wrong input width, the wrong output width, ranks that disagree.
  const std::string wq = "blk.1.attn_q.weight";
  EXPECT_TRUE(has(load_error(edited(good,
                                    [&](gguf::GgufWriter& w, const gguf::GgufFile& f) {
                                      add_all_tensors(w, f, wq + ".lora_a");
                                      w.add_tensor(wq + ".lora_a", gguf::TensorType::F32, {n_embd + 1, 4},
                                                   std::vector<uint8_t>(static_cast<size_t>((n_embd + 1) * 4) * 4));
                                    }),
                             m),
                  "does not fit the base tensor"));
  EXPECT_TRUE(has(load_error(edited(good,
                                    [&](gguf::GgufWriter& w, const gguf::GgufFile& f) {
                                      add_all_tensors(w, f, wq + ".lora_b");
                                      w.add_tensor(wq + ".lora_b", gguf::TensorType::F32, {5, n_embd},
                                                   std::vector<uint8_t>(static_cast<size_t>(5 * n_embd) * 4));
                                    }),
                             m),
                  "disagree on the rank"));
  // Q8_0 rows must be whole blocks: a rank-4 lora_b cannot be Q8_0.
  SynthLoraOptions q8 = lora_options(1, 4, gguf::TensorType::F32);
  q8.type = gguf::TensorType::Q8_0;
  try {
    build_synth_lora(m.file(), q8);
    ADD_FAILURE() << "synth-lora accepted Q8_0 with rank 4";
  } catch (const Error& e) {
    EXPECT_TRUE(has(e.what(), "not a multiple of"));
  }
  // An empty adapter has nothing to apply.
  EXPECT_TRUE(has(load_error(edited(good, [](gguf::GgufWriter&, const gguf::GgufFile&) {}), m), "no LoRA tensors"));
}

TEST(SynthLora, TargetsAndDeterminism) {
  test_files::TinyModelFile base(SynthArch::kLlama, 2, "tm_lora_synth");
  const Model& m = base.model();
  SynthLoraOptions o = lora_options(7);
  o.targets = {"attn_q", "attn_v", "output"};
  const std::vector<uint8_t> bytes = build_synth_lora(m.file(), o).to_bytes();
  EXPECT_EQ(bytes, build_synth_lora(m.file(), o).to_bytes());
  const gguf::GgufFile f = gguf::GgufFile::parse(bytes, "t.gguf");
  EXPECT_EQ(f.get_string("general.type"), "adapter");
  EXPECT_EQ(f.get_string("adapter.type"), "lora");
  EXPECT_EQ(static_cast<int64_t>(f.tensors().size()), 2 * (2 * m.config().n_layer + 1));
  EXPECT_NE(f.find_tensor("output.weight.lora_b"), nullptr);
  EXPECT_EQ(f.find_tensor("blk.0.attn_k.weight.lora_a"), nullptr);
  const TempGguf file(build_synth_lora(m.file(), o), "targets");
  const auto a = LoraAdapter::load(file.path(), m, "t");
  EXPECT_TRUE(a->output().present());
  EXPECT_TRUE(a->pair(0, LoraSlot::kV).present());
  EXPECT_FALSE(a->pair(0, LoraSlot::kK).present());
  o.targets = {"attn_qkv"};
  EXPECT_THROW(build_synth_lora(m.file(), o), Error);  // llama has no fused q/k/v
  o.targets = {"nonsense"};
  EXPECT_THROW(build_synth_lora(m.file(), o), Error);
}

}  // namespace
}  // namespace tokenmill::model
