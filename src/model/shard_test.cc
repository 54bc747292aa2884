// Model shards: the parts of heads, KV heads, FFN columns and vocabulary
// cover each range exactly once; impossible splits are clear errors.
#include "model/shard.h"

#include <gtest/gtest.h>

#include "util/error.h"

namespace tokenmill::model {
namespace {

TEST(Shard, EvenPartsCoverTheRange) {
  for (int64_t n : {0, 1, 7, 64, 262145}) {
    for (int parts = 1; parts <= 5; ++parts) {
      int64_t next = 0;
      for (int i = 0; i < parts; ++i) {
        const IndexRange r = even_part(n, parts, i);
        EXPECT_EQ(r.begin, next);
        EXPECT_LE(r.size() - n / parts, 1);
        next = r.end;
      }
      EXPECT_EQ(next, n);
    }
  }
}

ModelConfig config(int64_t heads, int64_t kv_heads) {
  ModelConfig c;
  c.n_layer = 4;
  c.n_embd = 256;
  c.n_head = heads;
  c.n_kv_head = kv_heads;
  c.head_dim = 64;
  c.n_ff = 512;
  c.n_vocab = 1000;
  c.layer_is_local.assign(4, false);
  return c;
}

ModelWeights weights(const ModelConfig& c, gguf::TensorType type) {
  ModelWeights w;
  w.layers.resize(static_cast<size_t>(c.n_layer));
  for (LayerWeights& l : w.layers) {
    l.wo = {type, nullptr, c.n_embd, c.n_q_dim()};
    l.w_down = {type, nullptr, c.n_embd, c.n_ff};
  }
  return w;
}

TEST(Shard, KvHeadsAreSplitOrReplicated) {
  ModelShard s;
  s.tp_size = 4;
  const ModelConfig split = config(8, 4);
  for (int r = 0; r < 4; ++r) {
    s.tp_rank = r;
    EXPECT_EQ(kv_head_part(split, s).begin, r);
    EXPECT_EQ(kv_head_part(split, s).size(), 1);
  }
  // One KV head for four query heads (Gemma 3 270M) over two ranks: both
  // hold it.
  const ModelConfig one = config(4, 1);
  s.tp_size = 2;
  for (int r = 0; r < 2; ++r) {
    s.tp_rank = r;
    EXPECT_EQ(kv_head_part(one, s).begin, 0);
    EXPECT_EQ(local_config(one, s).n_kv_head, 1);
    EXPECT_EQ(local_config(one, s).n_head, 2);
  }
}

TEST(Shard, ResolveSplitsLayersAndRefusesWhatDoesNotDivide) {
  const ModelConfig c = config(8, 4);
  ModelShard s;
  s.pp_size = 3;
  s.pp_stage = 2;
  const ModelShard r = resolve_shard(s, c, weights(c, gguf::TensorType::Q8_0));
  EXPECT_EQ(r.layer_begin, 3);  // 4 layers over 3 stages: 2, 1, 1
  EXPECT_EQ(r.layer_end, 4);
  s.pp_size = 5;
  s.pp_stage = 0;
  EXPECT_THROW(resolve_shard(s, c, weights(c, gguf::TensorType::Q8_0)), Error);  // more stages than layers
  ModelShard t;
  t.tp_size = 3;
  EXPECT_THROW(resolve_shard(t, config(6, 3), weights(config(6, 3), gguf::TensorType::Q8_0)), Error);
  t.tp_size = 2;
  EXPECT_NO_THROW(resolve_shard(t, c, weights(c, gguf::TensorType::Q8_0)));
  // Q4_K blocks hold 256 columns: 512 query columns over 4 ranks would cut them.
  t.tp_size = 4;
  try {
    resolve_shard(t, c, weights(c, gguf::TensorType::Q4_K));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("256-column Q4_K blocks"), std::string::npos) << e.what();
  }
}

// olmo2's q/k norms take one mean over all heads, which no rank has alone;
// per-head norms (qwen3, gemma3) split with the heads.
TEST(Shard, FullWidthQkNormsRefuseTensorParallelOnly) {
  ModelConfig c = config(8, 4);
  c.arch_name = "olmo2";
  c.qk_norm = ModelConfig::QkNorm::kFullWidth;
  ModelShard t;
  t.tp_size = 2;
  try {
    resolve_shard(t, c, weights(c, gguf::TensorType::Q8_0));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("olmo2"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--tp 1"), std::string::npos) << e.what();
  }
  ModelShard p;
  p.pp_size = 2;
  EXPECT_NO_THROW(resolve_shard(p, c, weights(c, gguf::TensorType::Q8_0)));
  c.qk_norm = ModelConfig::QkNorm::kPerHead;
  EXPECT_NO_THROW(resolve_shard(t, c, weights(c, gguf::TensorType::Q8_0)));
}

}  // namespace
}  // namespace tokenmill::model
