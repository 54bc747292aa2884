#include "model/model.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/interleave.h"
#include "kernels/ops.h"
#include "kernels/paged_attention.h"
#include "util/check.h"
#include "util/env.h"
#include "util/error.h"

namespace tokenmill::model {

// Activations of the current step, reused across steps (resized, never shrunk).
struct Model::Scratch {
  std::vector<float> x;     // [T, n_embd]   residual stream
  std::vector<float> xb;    // [T, n_embd]   normalised input / block output
  std::vector<float> q;     // [T, n_q_dim]
  std::vector<float> k;     // [T, n_kv_dim]
  std::vector<float> v;     // [T, n_kv_dim]
  std::vector<float> att;   // [T, n_q_dim]
  std::vector<float> gate;  // [T, n_ff]
  std::vector<float> up;    // [T, n_ff]
  std::vector<float> rows;  // [R, n_embd]   final hidden states that need logits
  int64_t num_tokens = 0;
};

std::unique_ptr<Model> Model::load(const std::string& path) {
  return std::unique_ptr<Model>(new Model(gguf::GgufFile::open(path)));
}

Model::Model(gguf::GgufFile file)
    : file_(std::move(file)),
      config_(ModelConfig::from_gguf(file_)),
      weights_(ModelWeights::bind(file_, config_)),
      scratch_(std::make_unique<Scratch>()) {
  int64_t num_local = 0, num_global = 0;
  for (int64_t i = 0; i < config_.n_layer; ++i) {
    group_layer_.push_back(config_.layer_is_local[static_cast<size_t>(i)] ? num_local++ : num_global++);
  }
  interleave_weights();
}

void Model::FreeDeleter::operator()(uint8_t* p) const { std::free(p); }

void Model::interleave_weights() {
  // TOKENMILL_REPACK: unset, "" or "1" repack where it pays, "0" never. Read
  // (and so validated) on every CPU, also where no kernel table reads the
  // interleaved layout: a bad setting is an error everywhere, not only on
  // AVX-512 machines.
  const bool repack = env_flag("TOKENMILL_REPACK", true);
  const kernels::KernelTable& kt = kernels::active_kernels();
  if (!repack) return;
  const auto one = [&](kernels::WeightView& w) {
    if (kt.of(w.type).gemm_interleaved == nullptr || w.rows == 0) return;
    const int64_t bytes = kernels::interleaved_bytes(w);
    auto* buf = static_cast<uint8_t*>(std::aligned_alloc(64, static_cast<size_t>((bytes + 63) / 64 * 64)));
    if (buf == nullptr) fail("out of memory repacking {} bytes of weights", bytes);
    interleaved_.emplace_back(buf);
    kernels::interleave_weights(w, buf);
    w.interleaved = buf;
    // The layer matrices are only read through the copy from now on (hooks
    // and other tables still can: the pages come back from the page cache)
    // unless the table multiplies many tokens from the file's blocks (AVX2:
    // prefill), which then keeps both resident.
    if (w.data != weights_.tok_embd.data && kt.interleaved_max_tokens == kernels::KernelTable::kAnyTokens) {
      release_mapped_pages(w.data, static_cast<size_t>(gguf::row_bytes(w.type, w.cols) * w.rows));
    }
  };
  for (LayerWeights& l : weights_.layers) {
    for (kernels::WeightView* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) one(*w);
  }
  one(weights_.output);
}

Model::~Model() = default;

namespace {

int64_t num_local_layers(const ModelConfig& c) {
  return std::count(c.layer_is_local.begin(), c.layer_is_local.end(), true);
}

}  // namespace

bool Model::has_window_group() const {
  const int64_t local = num_local_layers(config_);
  return config_.sliding_window > 0 && local > 0 && local < config_.n_layer;
}

std::vector<KvLayerGroup> Model::kv_layer_groups(bool window_pool) const {
  if (!window_pool || !has_window_group()) return {{KvGroup::kAll, 0}};
  return {{KvGroup::kFull, 0}, {KvGroup::kWindow, config_.sliding_window}};
}

kv::KvGeometry Model::kv_geometry(int64_t block_size, kv::KvDtype dtype, KvGroup group) const {
  TM_CHECK(group == KvGroup::kAll || has_window_group());
  kv::KvGeometry g;
  const int64_t local = num_local_layers(config_);
  g.n_layer = group == KvGroup::kAll ? config_.n_layer : group == KvGroup::kWindow ? local : config_.n_layer - local;
  g.n_kv_dim = config_.n_kv_dim();
  g.block_size = block_size;
  g.dtype = dtype;
  return g;
}

namespace {

void check_geometry(const kv::PagedKvStorage& kv, int64_t n_layer, int64_t n_kv_dim, const char* what) {
  const kv::KvGeometry& g = kv.geometry();
  if (g.n_layer != n_layer || g.n_kv_dim != n_kv_dim)
    fail("forward: the {}KV pool has {} layers of {} K/V dims, the model needs {} of {}", what, g.n_layer, g.n_kv_dim,
         n_layer, n_kv_dim);
}

// A table holding logical blocks [first, first + table.size()) must reach
// position end - 1 with ids inside the pool.
void check_table(std::span<const int32_t> table, int64_t first, int64_t end, const kv::PagedKvStorage& kv) {
  const int64_t bs = kv.block_size();
  const int64_t needed = (end + bs - 1) / bs - first;
  if (static_cast<int64_t>(table.size()) < needed)
    fail("forward: positions [{}, {}) need {} blocks of {}, the block table has {}", first * bs, end, needed, bs,
         table.size());
  for (int64_t b = 0; b < needed; ++b) {
    const int32_t id = table[static_cast<size_t>(b)];
    if (id < 0 || id >= kv.num_blocks()) fail("forward: block id {} is outside the pool [0, {})", id, kv.num_blocks());
  }
}

void validate_step(const ModelConfig& c, std::span<const SequenceChunk> chunks,
                   std::span<kv::PagedKvStorage* const> pools, std::span<const KvLayerGroup> groups,
                   std::span<const kv::KvGeometry> geometries) {
  if (pools.size() != groups.size())
    fail("forward: {} KV pools given, the model's layer groups need {}", pools.size(), groups.size());
  for (size_t g = 0; g < pools.size(); ++g) {
    if (pools[g] == nullptr) fail("forward: no KV pool for layer group {}", g);
    check_geometry(*pools[g], geometries[g].n_layer, c.n_kv_dim(),
                   groups[g].layers == KvGroup::kAll ? ""
                   : groups[g].window > 0            ? "sliding-window "
                                                     : "full-attention ");
    if (pools[g]->block_size() != pools[0]->block_size()) fail("forward: the KV pools differ in block size");
  }
  for (const SequenceChunk& ch : chunks) {
    if (ch.tokens.empty()) fail("forward: empty chunk");
    if (ch.start_pos < 0) fail("forward: chunk starts at negative position {}", ch.start_pos);
    for (int32_t t : ch.tokens) {
      if (t < 0 || t >= c.n_vocab) fail("token id {} is outside the vocabulary [0, {})", t, c.n_vocab);
    }
    if (ch.tables.size() != pools.size())
      fail("forward: a chunk has {} block tables for {} KV pools", ch.tables.size(), pools.size());
    const int64_t end = ch.start_pos + static_cast<int64_t>(ch.tokens.size());
    for (size_t g = 0; g < pools.size(); ++g) {
      const ChunkTable& t = ch.tables[g];
      const int64_t window = groups[g].window;
      const int64_t first_visible = window > 0 ? std::max<int64_t>(0, ch.start_pos - window + 1) : 0;
      if (t.first < 0 || t.first * pools[g]->block_size() > first_visible)
        fail("forward: the block table of layer group {} starts at block {}, position {} needs position {}", g, t.first,
             ch.start_pos, first_visible);
      check_table(t.blocks, t.first, end, *pools[g]);
    }
  }
}

// Layer `layer` of the pool, as the paged kernels see it.
kernels::PagedKv layer_kv(kv::PagedKvStorage& kv, int64_t layer) {
  const kv::KvGeometry& g = kv.geometry();
  return kernels::PagedKv{kv.keys(layer), kv.values(layer), g.dtype, g.block_size, g.n_kv_dim, kv.num_blocks()};
}

void resize(std::vector<float>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

// out[t] = rms_norm(in[t]) * w for each of T rows of length n.
void norm_rows(const float* in, const VectorView& w, float* out, int64_t rows, int64_t n, float eps) {
  for (int64_t t = 0; t < rows; ++t) kernels::rms_norm(in + t * n, w.data, out + t * n, n, eps);
}

void add_bias(float* y, const VectorView& b, int64_t rows) {
  if (!b.present()) return;
  for (int64_t t = 0; t < rows; ++t) kernels::add_inplace(y + t * b.size, b.data, b.size);
}

}  // namespace

void Model::forward(std::span<const SequenceChunk> chunks, std::span<kv::PagedKvStorage* const> pools,
                    std::vector<float>& logits, ThreadPool& pool, std::span<const uint8_t> skip_layers) {
  const ModelConfig& c = config_;
  if (!skip_layers.empty() && static_cast<int64_t>(skip_layers.size()) != c.n_layer)
    fail("forward: {} layer skip flags for a model of {} layers", skip_layers.size(), c.n_layer);
  if (pools.size() == 2 && !has_window_group())
    fail("forward: a second KV pool needs sliding-window and full-attention layers");
  const std::vector<KvLayerGroup> groups = kv_layer_groups(pools.size() == 2);
  const int64_t bs = !pools.empty() && pools[0] != nullptr ? pools[0]->block_size() : 1;
  std::vector<kv::KvGeometry> geometries;
  for (const KvLayerGroup& g : groups) geometries.push_back(kv_geometry(bs, kv::KvDtype::F16, g.layers));
  validate_step(c, chunks, pools, groups, geometries);
  Scratch& s = *scratch_;

  int64_t T = 0;
  int64_t R = 0;
  for (const SequenceChunk& ch : chunks) {
    T += static_cast<int64_t>(ch.tokens.size());
    R += num_logit_rows(ch);
  }
  s.num_tokens = T;
  resize(s.x, T * c.n_embd);
  resize(s.xb, T * c.n_embd);
  resize(s.q, T * c.n_q_dim());
  resize(s.k, T * c.n_kv_dim());
  resize(s.v, T * c.n_kv_dim());
  resize(s.att, T * c.n_q_dim());
  resize(s.gate, T * c.n_ff);
  resize(s.up, T * c.n_ff);

  // Embeddings: x[t] = embd_scale * E[token_t]; positions of the flat batch.
  std::vector<int64_t> positions(static_cast<size_t>(T));
  int64_t t = 0;
  for (const SequenceChunk& ch : chunks) {
    for (size_t i = 0; i < ch.tokens.size(); ++i, ++t) {
      float* row = s.x.data() + t * c.n_embd;
      kernels::dequantize_weight_row(weights_.tok_embd, ch.tokens[i], row);
      if (c.embd_scale != 1.0f) kernels::scale_inplace(row, c.embd_scale, c.n_embd);
      positions[static_cast<size_t>(t)] = ch.start_pos + static_cast<int64_t>(i);
    }
  }

  for (int64_t layer = 0; layer < c.n_layer; ++layer) {
    if (!skip_layers.empty() && skip_layers[static_cast<size_t>(layer)] != 0) continue;
    attention_block(layer, chunks, positions, pools, pool);
    ffn_block(layer, pool);
  }

  // Final norm and the output projection, only for the rows that need logits.
  resize(s.rows, R * c.n_embd);
  int64_t r = 0;
  t = 0;
  for (const SequenceChunk& ch : chunks) {
    const int64_t n = static_cast<int64_t>(ch.tokens.size());
    const int64_t first = t + n - num_logit_rows(ch);
    for (int64_t i = first; i < t + n; ++i, ++r) {
      kernels::rms_norm(s.x.data() + i * c.n_embd, weights_.output_norm.data, s.rows.data() + r * c.n_embd, c.n_embd,
                        c.rms_eps);
    }
    t += n;
  }
  logits.resize(static_cast<size_t>(R * c.n_vocab));
  if (R > 0) matmul(weights_.output, s.rows.data(), R, logits.data(), pool);
}

void Model::matmul(const kernels::WeightView& w, const float* x, int64_t num_tokens, float* y, ThreadPool& pool) {
  if (matmul_hook_ != nullptr && matmul_hook_->matmul(w, x, num_tokens, y, pool)) return;
  kernels::matmul(w, x, num_tokens, y, pool);
}

void Model::attention_block(int64_t layer, std::span<const SequenceChunk> chunks, std::span<const int64_t> positions,
                            std::span<kv::PagedKvStorage* const> pools, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const LayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
  Scratch& s = *scratch_;
  const int64_t T = s.num_tokens;
  const int64_t hd = c.head_dim;

  // q, k, v = projections of the normalised residual stream.
  norm_rows(s.x.data(), w.attn_norm, s.xb.data(), T, c.n_embd, c.rms_eps);
  matmul(w.wq, s.xb.data(), T, s.q.data(), pool);
  matmul(w.wk, s.xb.data(), T, s.k.data(), pool);
  matmul(w.wv, s.xb.data(), T, s.v.data(), pool);
  add_bias(s.q.data(), w.bq, T);
  add_bias(s.k.data(), w.bk, T);
  add_bias(s.v.data(), w.bv, T);
  if (w.q_norm.present()) norm_rows(s.q.data(), w.q_norm, s.q.data(), T * c.n_head, hd, c.rms_eps);
  if (w.k_norm.present()) norm_rows(s.k.data(), w.k_norm, s.k.data(), T * c.n_kv_head, hd, c.rms_eps);

  // Rotary position embedding, per head, at each token's own position.
  const bool local = c.layer_is_local[static_cast<size_t>(layer)];
  const float base = local ? c.rope_base_local : c.rope_base;
  const float freq_scale = local ? c.rope_freq_scale_local : c.rope_freq_scale;
  const float* factors = weights_.rope_freqs.data;
  // Angles once per token, shared by its heads; tokens split over the pool.
  pool.parallel_for(T, [&](int, int64_t first, int64_t last) {
    std::vector<double> cos_t(static_cast<size_t>(c.rope_dims / 2)), sin_t(cos_t.size());
    for (int64_t i = first; i < last; ++i) {
      kernels::rope_angles(c.rope_dims, positions[static_cast<size_t>(i)], base, freq_scale, factors, cos_t.data(),
                           sin_t.data());
      for (int64_t h = 0; h < c.n_head; ++h)
        kernels::rope_apply(s.q.data() + (i * c.n_head + h) * hd, c.rope_dims, cos_t.data(), sin_t.data(), c.rope_neox);
      for (int64_t h = 0; h < c.n_kv_head; ++h)
        kernels::rope_apply(s.k.data() + (i * c.n_kv_head + h) * hd, c.rope_dims, cos_t.data(), sin_t.data(),
                            c.rope_neox);
    }
  });

  // Write each sequence's new K/V into its blocks, then attend over all its
  // positions so far (read back through the same block table).
  const kernels::AttentionShape shape{c.n_head, c.n_kv_head, hd, c.attn_scale, local ? c.sliding_window : 0, 0.0f};
  // Two pools: a local layer lives in the second (window) pool, at its
  // index among the local layers, and is read through the second table.
  const size_t group = pools.size() == 2 && local ? 1 : 0;
  const int64_t pool_layer = pools.size() == 2 ? group_layer_[static_cast<size_t>(layer)] : layer;
  const kernels::PagedKv cache = layer_kv(*pools[group], pool_layer);
  int64_t t0 = 0;
  for (const SequenceChunk& ch : chunks) {
    const int64_t n = static_cast<int64_t>(ch.tokens.size());
    const ChunkTable& table = ch.tables[group];
    kernels::paged_kv_write(cache, table.blocks, ch.start_pos, n, s.k.data() + t0 * c.n_kv_dim(),
                            s.v.data() + t0 * c.n_kv_dim(), table.first);
    kernels::paged_attention(shape, s.q.data() + t0 * c.n_q_dim(), positions.data() + t0, n, cache, table.blocks,
                             ch.start_pos + n, s.att.data() + t0 * c.n_q_dim(), pool, table.first);
    t0 += n;
  }

  // Output projection (gemma3: normalised again) added to the residual stream.
  matmul(w.wo, s.att.data(), T, s.xb.data(), pool);
  if (w.post_attn_norm.present()) norm_rows(s.xb.data(), w.post_attn_norm, s.xb.data(), T, c.n_embd, c.rms_eps);
  kernels::add_inplace(s.x.data(), s.xb.data(), T * c.n_embd);
}

void Model::ffn_block(int64_t layer, ThreadPool& pool) {
  const ModelConfig& c = config_;
  const LayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
  Scratch& s = *scratch_;
  const int64_t T = s.num_tokens;

  // down( act(gate(x)) * up(x) ), with gemma3's extra norm after it.
  norm_rows(s.x.data(), w.ffn_norm, s.xb.data(), T, c.n_embd, c.rms_eps);
  matmul(w.w_gate, s.xb.data(), T, s.gate.data(), pool);
  matmul(w.w_up, s.xb.data(), T, s.up.data(), pool);
  if (c.ffn_gelu) {
    kernels::geglu_tanh(s.gate.data(), s.up.data(), T * c.n_ff);
  } else {
    kernels::swiglu(s.gate.data(), s.up.data(), T * c.n_ff);
  }
  matmul(w.w_down, s.gate.data(), T, s.xb.data(), pool);
  if (w.post_ffn_norm.present()) norm_rows(s.xb.data(), w.post_ffn_norm, s.xb.data(), T, c.n_embd, c.rms_eps);
  kernels::add_inplace(s.x.data(), s.xb.data(), T * c.n_embd);
}

}  // namespace tokenmill::model
