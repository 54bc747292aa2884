#include "model/model.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/interleave.h"
#include "kernels/ops.h"
#include "kernels/paged_attention.h"
#include "model/key_channel_scales.h"
#include "model/layer_ops.h"
#include "model/lora_apply.h"
#include "model/microbatch.h"
#include "model/moe_expert_parallel.h"
#include "model/moe_ffn.h"
#include "model/rope_config.h"
#include "model/shard.h"
#include "util/check.h"
#include "util/env.h"
#include "util/error.h"

namespace tokenmill::model {

// Activations of the current step, reused across steps (resized, never shrunk).
struct Model::Scratch {
  std::vector<float> x;            // [T, n_embd]   residual stream
  std::vector<float> xb;           // [T, n_embd]   normalised input / block output
  std::vector<float> q;            // [T, n_q_dim]
  std::vector<float> k;            // [T, n_kv_dim]
  std::vector<float> v;            // [T, n_kv_dim]
  std::vector<float> att;          // [T, n_q_dim]
  std::vector<float> gate;         // [T, n_ff]
  std::vector<float> up;           // [T, n_ff]
  std::vector<float> rows;         // [R, n_embd]   final hidden states that need logits
  std::vector<float> logits_part;  // [R, vocab share]  tensor parallel: this rank's columns
  std::vector<float> logits;       // [R, n_vocab]  pipeline: the rows sent back to the root
  int64_t num_tokens = 0;
  // LoRA: the step's token rows and logits rows by adapter (empty: none).
  std::vector<LoraRows> lora_tokens;
  std::vector<LoraRows> lora_logits;
  LoraScratch lora;
  MoeScratch moe;
  ExpertParallelScratch expert_parallel;
};

std::unique_ptr<Model> Model::load(const std::string& path, ParallelComm* comm, const RopeOverrides& rope) {
  return std::unique_ptr<Model>(new Model(gguf::GgufFile::open(path), comm, rope));
}

Model::Model(gguf::GgufFile file, ParallelComm* comm, const RopeOverrides& rope)
    : file_(std::move(file)),
      config_(ModelConfig::from_gguf(file_)),
      weights_(ModelWeights::bind(file_, config_)),
      scratch_(std::make_unique<Scratch>()) {
  comm_ = comm;
  notices_ = apply_rope_overrides(config_, rope);
  ModelShard whole;
  whole.layer_end = config_.n_layer;
  shard_ = comm_ != nullptr ? resolve_shard(comm_->shard(), config_, weights_) : whole;
  local_ = local_config(config_, shard_);
  if (shard_.sharded()) shard_weights(weights_, config_, shard_, column_copies_);
  // Layer i's index inside its group's pool (the stage's layers only).
  int64_t num_local = 0, num_global = 0;
  for (int64_t i = 0; i < config_.n_layer; ++i) {
    const bool in_stage = i >= shard_.layer_begin && i < shard_.layer_end;
    const bool local = config_.layer_is_local[static_cast<size_t>(i)];
    group_layer_.push_back(!in_stage ? -1 : local ? num_local++ : num_global++);
  }
  if (config_.is_moe())
    expert_load_.assign(static_cast<size_t>((shard_.layer_end - shard_.layer_begin) * config_.n_expert), 0);
  // TOKENMILL_EXPERTS=per-token: the reference order, for measuring what
  // grouping buys (docs/benchmarks.md). Read on every model, so a bad
  // value is an error everywhere.
  if (const char* mode = std::getenv("TOKENMILL_EXPERTS"); mode != nullptr && *mode != '\0') {
    const std::string_view m(mode);
    if (m == "per-token") {
      expert_compute_ = ExpertCompute::kPerToken;
    } else if (m != "grouped") {
      fail("TOKENMILL_EXPERTS='{}': expected 'grouped' (the default) or 'per-token'", m);
    }
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
    const bool mapped = !is_column_copy(w.data);
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
    if (mapped && w.data != weights_.tok_embd.data && kt.interleaved_max_tokens == kernels::KernelTable::kAnyTokens) {
      release_mapped_pages(w.data, static_cast<size_t>(gguf::row_bytes(w.type, w.cols) * w.rows));
    }
  };
  for (LayerWeights& l : weights_.layers) {
    for (kernels::WeightView* w :
         {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.gate_shexp, &l.up_shexp, &l.down_shexp})
      one(*w);
    for (std::vector<kernels::WeightView>* experts : {&l.gate_exps, &l.up_exps, &l.down_exps})
      for (kernels::WeightView& w : *experts) one(w);
  }
  if (shard_.last_stage()) one(weights_.output);  // other stages never project to the vocabulary
}

Model::~Model() = default;

bool Model::is_column_copy(const void* data) const {
  for (const auto& c : column_copies_)
    if (c.get() == data) return true;
  return false;
}

namespace {

// Sliding-window layers among [begin, end).
int64_t num_local_layers(const ModelConfig& c, int64_t begin, int64_t end) {
  return std::count(c.layer_is_local.begin() + begin, c.layer_is_local.begin() + end, true);
}

}  // namespace

bool Model::has_window_group() const {
  // The whole model decides (every rank of a pipeline keeps the same pools).
  const int64_t local = num_local_layers(config_, 0, config_.n_layer);
  return config_.sliding_window > 0 && local > 0 && local < config_.n_layer;
}

std::vector<KvLayerGroup> Model::kv_layer_groups(bool window_pool) const {
  if (!window_pool || !has_window_group()) return {{KvGroup::kAll, 0}};
  return {{KvGroup::kFull, 0}, {KvGroup::kWindow, config_.sliding_window}};
}

kv::KvGeometry Model::kv_geometry(int64_t block_size, kv::KvDtype dtype, KvGroup group) const {
  TM_CHECK(group == KvGroup::kAll || has_window_group());
  kv::KvGeometry g;
  const int64_t stage_layers = shard_.layer_end - shard_.layer_begin;
  const int64_t local = num_local_layers(config_, shard_.layer_begin, shard_.layer_end);
  g.n_layer = group == KvGroup::kAll ? stage_layers : group == KvGroup::kWindow ? local : stage_layers - local;
  if (g.n_layer == 0)
    fail("pipeline stage {} (layers {}..{}) has no {} layer: run it with one KV pool (--no-window-pool)",
         shard_.pp_stage, shard_.layer_begin, shard_.layer_end - 1,
         group == KvGroup::kWindow ? "sliding-window" : "full-attention");
  g.n_kv_dim = local_.n_kv_dim();
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
  return kernels::PagedKv{kv.keys(layer), kv.values(layer), kv::kv_storage_dtype(g.dtype),
                          g.block_size,   g.n_kv_dim,       kv.num_blocks()};
}

void resize(std::vector<float>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

}  // namespace

void Model::check_step(std::span<const SequenceChunk> chunks, std::span<kv::PagedKvStorage* const> pools,
                       std::span<const uint8_t> skip_layers) const {
  if (!skip_layers.empty() && static_cast<int64_t>(skip_layers.size()) != config_.n_layer)
    fail("forward: {} layer skip flags for a model of {} layers", skip_layers.size(), config_.n_layer);
  if (pools.size() == 2 && !has_window_group())
    fail("forward: a second KV pool needs sliding-window and full-attention layers");
  const std::vector<KvLayerGroup> groups = kv_layer_groups(pools.size() == 2);
  const int64_t bs = !pools.empty() && pools[0] != nullptr ? pools[0]->block_size() : 1;
  std::vector<kv::KvGeometry> geometries;
  for (const KvLayerGroup& g : groups) geometries.push_back(kv_geometry(bs, kv::KvDtype::F16, g.layers));
  validate_step(local_, chunks, pools, groups, geometries);
  for (const SequenceChunk& ch : chunks) {
    if (ch.adapter != nullptr && ch.adapter->base() != this)
      fail("forward: a chunk's LoRA adapter is for another model");
    if (ch.key_mass != nullptr && comm_ != nullptr)
      fail("forward: attention mass (the h2o KV policy) is not available with tensor or pipeline parallelism");
  }
}

void Model::forward(std::span<const SequenceChunk> chunks, std::span<kv::PagedKvStorage* const> pools,
                    std::vector<float>& logits, ThreadPool& pool, std::span<const uint8_t> skip_layers,
                    std::vector<float>* hidden) {
  check_step(chunks, pools, skip_layers);
  std::fill(expert_load_.begin(), expert_load_.end(), 0);
  for (const kv::PagedKvStorage* p : pools)
    if (kv::kv_keys_channel_scaled(p->geometry().dtype)) prepare_key_scales(pool);
  const int64_t V = config_.n_vocab;
  int64_t R = 0;
  int64_t H = 0;
  for (const SequenceChunk& ch : chunks) {
    R += num_logit_rows(ch);
    H += num_hidden_rows(ch);
  }
  const bool root = comm_ == nullptr || comm_->is_root();
  logits.resize(static_cast<size_t>(root ? R * V : 0));
  if (hidden != nullptr) {
    if (H > 0 && shard_.pp_size > 1) fail("forward: hidden states are not available with pipeline parallelism");
    hidden->resize(static_cast<size_t>(root ? H * config_.n_embd : 0));
  }
  if (shard_.pp_size == 1) {
    forward_part(chunks, pools, pool, skip_layers, logits.data(), 0,
                 hidden != nullptr && H > 0 && root ? hidden->data() : nullptr);
    if (comm_ != nullptr) comm_->wait_sends();
    return;
  }
  // Pipeline: the stages work on consecutive micro-batches at once; the
  // root (stage 0) gets each one's logits back from the last stage.
  const std::vector<std::vector<SequenceChunk>> parts = split_microbatches(chunks, shard_.microbatches);
  for (size_t m = 0; m < parts.size(); ++m)
    forward_part(parts[m], pools, pool, skip_layers, nullptr, static_cast<int>(m));
  if (root) {
    int64_t row = 0;
    for (size_t m = 0; m < parts.size(); ++m) {
      int64_t rows = 0;
      for (const SequenceChunk& ch : parts[m]) rows += num_logit_rows(ch);
      if (rows > 0) comm_->recv_logits(logits.data() + row * V, rows * V, static_cast<int>(m));
      row += rows;
    }
  }
  comm_->wait_sends();
}

void Model::forward_part(std::span<const SequenceChunk> chunks, std::span<kv::PagedKvStorage* const> pools,
                         ThreadPool& pool, std::span<const uint8_t> skip_layers, float* logits, int tag,
                         float* hidden) {
  const ModelConfig& c = local_;
  Scratch& s = *scratch_;
  int64_t T = 0;
  int64_t R = 0;
  for (const SequenceChunk& ch : chunks) {
    T += static_cast<int64_t>(ch.tokens.size());
    R += num_logit_rows(ch);
  }
  s.num_tokens = T;
  s.lora_tokens = lora_token_rows(chunks);
  s.lora_logits = lora_logit_rows(chunks);
  resize(s.x, T * c.n_embd);
  resize(s.xb, T * c.n_embd);
  resize(s.q, T * c.n_q_dim());
  resize(s.k, T * c.n_kv_dim());
  resize(s.v, T * c.n_kv_dim());
  resize(s.att, T * c.n_q_dim());
  resize(s.gate, T * c.n_ff);
  resize(s.up, T * c.n_ff);

  // Positions of the flat batch; the first stage starts the residual
  // stream from the embeddings (x[t] = embd_scale * E[token_t]), the others
  // receive it from the stage before.
  // Cache positions (what attention masks by) and RoPE positions (what the
  // rotations use): the same unless a KV policy evicted before the chunk.
  std::vector<int64_t> positions(static_cast<size_t>(T)), rope_positions(static_cast<size_t>(T));
  int64_t t = 0;
  for (const SequenceChunk& ch : chunks) {
    for (size_t i = 0; i < ch.tokens.size(); ++i, ++t) {
      positions[static_cast<size_t>(t)] = ch.start_pos + static_cast<int64_t>(i);
      rope_positions[static_cast<size_t>(t)] = positions[static_cast<size_t>(t)] + ch.rope_offset;
      if (!shard_.first_stage()) continue;
      float* row = s.x.data() + t * c.n_embd;
      kernels::dequantize_weight_row(weights_.tok_embd, ch.tokens[i], row);
      if (c.embd_scale != 1.0f) kernels::scale_inplace(row, c.embd_scale, c.n_embd);
    }
  }
  if (!shard_.first_stage()) comm_->recv_prev(s.x.data(), T * c.n_embd, tag);

  for (int64_t layer = shard_.layer_begin; layer < shard_.layer_end; ++layer) {
    if (!skip_layers.empty() && skip_layers[static_cast<size_t>(layer)] != 0) continue;
    attention_block(layer, chunks, positions, rope_positions, pools, pool);
    ffn_block(layer, pool);
  }
  if (!shard_.last_stage()) {
    comm_->send_next(s.x.data(), T * c.n_embd, tag);
    return;
  }
  if (hidden != nullptr) write_hidden_rows(chunks, hidden);
  if (R == 0) return;
  // Expert parallel with replicated attention: the other ranks' logits
  // would be the root's; nobody reads them.
  if (logits == nullptr && shard_.pp_size == 1 && shard_.tp_size == 1) return;

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
  // Granite divides the logits by logit_scale. The projection is linear, so
  // the rows are divided instead: one place, whatever the vocabulary split.
  if (c.logit_scale != 1.0f) kernels::scale_inplace(s.rows.data(), 1.0f / c.logit_scale, R * c.n_embd);
  project_logits(R, logits, tag, pool);
}

void Model::write_hidden_rows(std::span<const SequenceChunk> chunks, float* out) const {
  const ModelConfig& c = local_;
  const Scratch& s = *scratch_;
  int64_t t = 0;
  for (const SequenceChunk& ch : chunks) {
    const int64_t n = static_cast<int64_t>(ch.tokens.size());
    for (int64_t i = 0; i < num_hidden_rows(ch); ++i, out += c.n_embd)
      kernels::rms_norm(s.x.data() + (t + i) * c.n_embd, weights_.output_norm.data, out, c.n_embd, c.rms_eps);
    t += n;
  }
}

void Model::project_logits(int64_t R, float* logits, int tag, ThreadPool& pool) {
  Scratch& s = *scratch_;
  const int64_t V = config_.n_vocab;
  // Where the full rows go: straight into the caller's logits on the root,
  // else a buffer sent to it (pipeline) or nowhere (tensor ranks > 0).
  float* full = logits;
  if (full == nullptr) {
    resize(s.logits, R * V);
    full = s.logits.data();
  }
  // Gemma 2 soft-caps each logit, elementwise: the same on a rank's share.
  const float cap = config_.final_softcap;
  if (shard_.tp_size == 1) {
    matmul(weights_.output, s.rows.data(), R, full, pool);
    if (!s.lora_logits.empty())
      add_lora_deltas(
          s.lora_logits, [](const LoraAdapter& a) -> const LoraPair& { return a.output(); }, s.rows.data(), full, pool,
          s.lora);
    if (cap > 0.0f) softcap_inplace(full, R * V, cap, pool);
  } else {
    // Each tensor rank projects onto its share of the vocabulary.
    resize(s.logits_part, R * weights_.output.rows);
    matmul(weights_.output, s.rows.data(), R, s.logits_part.data(), pool);
    if (cap > 0.0f) softcap_inplace(s.logits_part.data(), R * weights_.output.rows, cap, pool);
    std::vector<int64_t> widths;
    for (int r = 0; r < shard_.tp_size; ++r) {
      ModelShard other = shard_;
      other.tp_rank = r;
      widths.push_back(vocab_part(config_, other).size());
    }
    comm_->tp_gather_columns(s.logits_part.data(), R, widths, full);
  }
  if (shard_.pp_size > 1 && shard_.tp_rank == 0) comm_->send_logits(full, R * V, tag);
}

void Model::matmul(const kernels::WeightView& w, const float* x, int64_t num_tokens, float* y, ThreadPool& pool) {
  if (matmul_hook_ != nullptr && matmul_hook_->matmul(w, x, num_tokens, y, pool)) return;
  kernels::matmul(w, x, num_tokens, y, pool);
}

void Model::layer_matmul(int64_t layer, LoraSlot slot, const kernels::WeightView& w, const float* x, float* y,
                         ThreadPool& pool) {
  Scratch& s = *scratch_;
  matmul(w, x, s.num_tokens, y, pool);
  if (s.lora_tokens.empty()) return;
  add_lora_deltas(
      s.lora_tokens, [&](const LoraAdapter& a) -> const LoraPair& { return a.pair(layer, slot); }, x, y, pool, s.lora);
}

kernels::RopeFrequencies Model::layer_rope(int64_t layer) const {
  const ModelConfig& c = local_;
  const bool local = c.layer_is_local[static_cast<size_t>(layer)];
  // The pairs' frequencies (scaling included: linear, llama3 factors, YaRN).
  const float* factors = c.rope_scaling != RopeScalingType::kLongRope ? weights_.rope_freqs.data
                         : rope_long_factors(c)                       ? weights_.rope_factors_long.data
                                                                      : weights_.rope_factors_short.data;
  return kernels::rope_frequencies(c.rope_dims, local ? c.rope_base_local : c.rope_base, rope_scaling_params(c, local),
                                   factors);
}

void Model::shift_keys(std::span<kv::PagedKvStorage* const> pools, std::span<const std::vector<kv::KeyShift>> shifts,
                       ThreadPool& pool) {
  if (comm_ != nullptr) fail("re-rotating cached keys is not supported with tensor or pipeline parallelism");
  if (shifts.size() > pools.size()) fail("shift_keys: shifts for {} pools, {} given", shifts.size(), pools.size());
  const ModelConfig& c = local_;
  for (int64_t layer = shard_.layer_begin; layer < shard_.layer_end; ++layer) {
    const bool local = c.layer_is_local[static_cast<size_t>(layer)];
    const size_t group = pools.size() == 2 && local ? 1 : 0;
    if (group >= shifts.size() || shifts[group].empty()) continue;
    const int64_t pool_layer =
        pools.size() == 2 ? group_layer_[static_cast<size_t>(layer)] : layer - shard_.layer_begin;
    const kernels::PagedKv cache = layer_kv(*pools[group], pool_layer);
    // The rotation by delta is the position's own: mscale (YaRN) stays
    // out, the key already carries it once.
    kernels::RopeFrequencies freqs = layer_rope(layer);
    freqs.mscale = 1.0;
    const std::vector<kv::KeyShift>& list = shifts[group];
    pool.parallel_for(static_cast<int64_t>(list.size()), [&](int, int64_t first, int64_t last) {
      std::vector<double> cos_d(static_cast<size_t>(c.rope_dims / 2)), sin_d(cos_d.size());
      for (int64_t i = first; i < last; ++i) {
        const kv::KeyShift& shift = list[static_cast<size_t>(i)];
        kernels::rope_angles(freqs, shift.delta, cos_d.data(), sin_d.data());
        kernels::paged_key_rotate(cache, shift.block, c.head_dim, c.rope_dims, cos_d.data(), sin_d.data(), c.rope_neox);
      }
    });
  }
}

void Model::prepare_key_scales(ThreadPool& pool) {
  if (!key_scales_.empty()) return;
  if (comm_ != nullptr)
    fail(
        "--kv-dtype q4_0_kc is not supported with tensor or pipeline parallelism (its key scales are measured in one "
        "process)");
  const ModelConfig& c = local_;
  const std::vector<int32_t> tokens = key_calibration_tokens(file_, c.n_vocab, std::min<int64_t>(c.n_ctx_train, 512));
  constexpr int64_t kBlock = 16;
  const int64_t n = static_cast<int64_t>(tokens.size());
  kv::PagedKvStorage storage(kv_geometry(kBlock, kv::KvDtype::F32), (n + kBlock - 1) / kBlock);
  std::vector<int32_t> blocks(static_cast<size_t>(storage.num_blocks()));
  for (size_t b = 0; b < blocks.size(); ++b) blocks[b] = static_cast<int32_t>(b);
  const ChunkTable table{blocks, 0};
  SequenceChunk chunk;
  chunk.tokens = tokens;
  chunk.tables = {&table, 1};
  chunk.logits = LogitRows::kNone;
  const int64_t layers = shard_.layer_end - shard_.layer_begin;
  std::vector<float> magnitudes(static_cast<size_t>(layers * c.n_kv_dim()), 0.0f);
  std::vector<float> logits;
  key_magnitudes_ = &magnitudes;
  try {
    forward({&chunk, 1}, storage, logits, pool);
  } catch (...) {
    key_magnitudes_ = nullptr;
    throw;
  }
  key_magnitudes_ = nullptr;
  // Heads are independent and every layer's row is whole heads, so all
  // layers go through at once.
  key_scales_ = key_scales_from_magnitudes(magnitudes, c.head_dim);
}

void Model::attention_block(int64_t layer, std::span<const SequenceChunk> chunks, std::span<const int64_t> positions,
                            std::span<const int64_t> rope_positions, std::span<kv::PagedKvStorage* const> pools,
                            ThreadPool& pool) {
  const ModelConfig& c = local_;  // this rank's heads
  const LayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
  Scratch& s = *scratch_;
  const int64_t T = s.num_tokens;
  const int64_t hd = c.head_dim;

  // q, k, v = projections of the (normalised) residual stream.
  const float* in = block_input(s.x.data(), w.attn_norm, s.xb.data(), T, c.n_embd, c.rms_eps);
  layer_matmul(layer, LoraSlot::kQ, w.wq, in, s.q.data(), pool);
  layer_matmul(layer, LoraSlot::kK, w.wk, in, s.k.data(), pool);
  layer_matmul(layer, LoraSlot::kV, w.wv, in, s.v.data(), pool);
  add_bias(s.q.data(), w.bq, T);
  add_bias(s.k.data(), w.bk, T);
  add_bias(s.v.data(), w.bv, T);
  // q/k norms span their weight's length: one head, or (olmo2) the whole
  // projection, which tensor parallelism refuses (resolve_shard).
  if (w.q_norm.present())
    norm_rows(s.q.data(), w.q_norm, s.q.data(), T * c.n_q_dim() / w.q_norm.size, w.q_norm.size, c.rms_eps);
  if (w.k_norm.present())
    norm_rows(s.k.data(), w.k_norm, s.k.data(), T * c.n_kv_dim() / w.k_norm.size, w.k_norm.size, c.rms_eps);

  // Rotary position embedding, per head, at each token's own position.
  const bool local = c.layer_is_local[static_cast<size_t>(layer)];
  // The pairs' frequencies once per layer, the angles once per token,
  // shared by its heads.
  const kernels::RopeFrequencies freqs = layer_rope(layer);
  pool.parallel_for(T, [&](int, int64_t first, int64_t last) {
    std::vector<double> cos_t(static_cast<size_t>(c.rope_dims / 2)), sin_t(cos_t.size());
    for (int64_t i = first; i < last; ++i) {
      kernels::rope_angles(freqs, rope_positions[static_cast<size_t>(i)], cos_t.data(), sin_t.data());
      for (int64_t h = 0; h < c.n_head; ++h)
        kernels::rope_apply(s.q.data() + (i * c.n_head + h) * hd, c.rope_dims, cos_t.data(), sin_t.data(), c.rope_neox);
      for (int64_t h = 0; h < c.n_kv_head; ++h)
        kernels::rope_apply(s.k.data() + (i * c.n_kv_head + h) * hd, c.rope_dims, cos_t.data(), sin_t.data(),
                            c.rope_neox);
    }
  });

  // Two pools: a local layer lives in the second (window) pool, at its
  // index among the local layers, and is read through the second table.
  const size_t group = pools.size() == 2 && local ? 1 : 0;
  const int64_t pool_layer = pools.size() == 2 ? group_layer_[static_cast<size_t>(layer)] : layer - shard_.layer_begin;

  // q4_0_kc: keys divided by their channels' scales, queries multiplied
  // (model/key_channel_scales.h).
  const KeyHeads key_heads{c.n_head, c.n_kv_head, hd, c.rope_dims, c.rope_neox};
  const int64_t local_layer = layer - shard_.layer_begin;
  if (key_magnitudes_ != nullptr)
    accumulate_key_magnitudes(s.k.data(), T, key_heads, key_magnitudes_->data() + local_layer * c.n_kv_dim());
  if (kv::kv_keys_channel_scaled(pools[group]->geometry().dtype))
    apply_key_scales(s.q.data(), s.k.data(), T, key_heads,
                     std::span<const float>(key_scales_)
                         .subspan(static_cast<size_t>(local_layer * c.n_kv_dim()), static_cast<size_t>(c.n_kv_dim())));

  // Write each sequence's new K/V into its blocks, then attend over all its
  // positions so far (read back through the same block table).
  const kernels::AttentionShape shape{c.n_head,      c.n_kv_head, hd, c.attn_scale, local ? c.sliding_window : 0,
                                      c.attn_softcap};
  const kernels::PagedKv cache = layer_kv(*pools[group], pool_layer);
  int64_t t0 = 0;
  for (const SequenceChunk& ch : chunks) {
    const int64_t n = static_cast<int64_t>(ch.tokens.size());
    const ChunkTable& table = ch.tables[group];
    kernels::paged_kv_write(cache, table.blocks, ch.start_pos, n, s.k.data() + t0 * c.n_kv_dim(),
                            s.v.data() + t0 * c.n_kv_dim(), table.first);
    // A sliding-window layer's mass would only ever favour its window.
    kernels::paged_attention(shape, s.q.data() + t0 * c.n_q_dim(), positions.data() + t0, n, cache, table.blocks,
                             ch.start_pos + n, s.att.data() + t0 * c.n_q_dim(), pool, table.first,
                             local ? nullptr : ch.key_mass);
    t0 += n;
  }

  // Output projection (gemma3, olmo2: normalised again; granite: scaled)
  // added to the residual stream; with tensor parallelism each rank's heads
  // give a partial sum.
  layer_matmul(layer, LoraSlot::kO, w.wo, s.att.data(), s.xb.data(), pool);
  if (shard_.tp_size > 1) comm_->tp_all_reduce_sum(s.xb.data(), T * c.n_embd);
  if (w.post_attn_norm.present()) norm_rows(s.xb.data(), w.post_attn_norm, s.xb.data(), T, c.n_embd, c.rms_eps);
  add_residual(s.x.data(), s.xb.data(), c.residual_scale, T * c.n_embd);
}

void Model::ffn_block(int64_t layer, ThreadPool& pool) {
  const ModelConfig& c = local_;  // this rank's FFN columns
  const LayerWeights& w = weights_.layers[static_cast<size_t>(layer)];
  Scratch& s = *scratch_;
  const int64_t T = s.num_tokens;
  if (c.is_moe()) {
    // Router, experts and shared expert (model/moe_ffn.h); the LoRA slots
    // and matmul hooks do not reach the experts.
    const float* in = block_input(s.x.data(), w.ffn_norm, s.xb.data(), T, c.n_embd, c.rms_eps);
    const std::span<int64_t> load(expert_load_.data() + (layer - shard_.layer_begin) * c.n_expert,
                                  static_cast<size_t>(c.n_expert));
    if (shard_.expert_parallel()) {
      moe_ffn_expert_parallel(w, c, shard_, *comm_, in, T, s.xb.data(), expert_compute_, s.moe, s.expert_parallel, pool,
                              load);
    } else {
      moe_ffn(w, c, in, T, s.xb.data(), expert_compute_, s.moe, pool, load);
    }
    finish_ffn(w);
    return;
  }

  // down( act(gate(x)) * up(x) ), with the extra norm after it (gemma3,
  // olmo2) and granite's residual multiplier.
  const float* in = block_input(s.x.data(), w.ffn_norm, s.xb.data(), T, c.n_embd, c.rms_eps);
  layer_matmul(layer, LoraSlot::kGate, w.w_gate, in, s.gate.data(), pool);
  layer_matmul(layer, LoraSlot::kUp, w.w_up, in, s.up.data(), pool);
  if (c.ffn_gelu) {
    kernels::geglu_tanh(s.gate.data(), s.up.data(), T * c.n_ff);
  } else {
    kernels::swiglu(s.gate.data(), s.up.data(), T * c.n_ff);
  }
  layer_matmul(layer, LoraSlot::kDown, w.w_down, s.gate.data(), s.xb.data(), pool);
  finish_ffn(w);
}

void Model::finish_ffn(const LayerWeights& w) {
  const ModelConfig& c = local_;
  Scratch& s = *scratch_;
  const int64_t T = s.num_tokens;
  // Expert parallel: the rows were gathered whole (moe_expert_parallel.h).
  if (shard_.tp_size > 1 && !(c.is_moe() && shard_.expert_parallel()))
    comm_->tp_all_reduce_sum(s.xb.data(), T * c.n_embd);
  if (w.post_ffn_norm.present()) norm_rows(s.xb.data(), w.post_ffn_norm, s.xb.data(), T, c.n_embd, c.rms_eps);
  add_residual(s.x.data(), s.xb.data(), c.residual_scale, T * c.n_embd);
}

}  // namespace tokenmill::model
