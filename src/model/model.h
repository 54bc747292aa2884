// A loaded model: the mapped GGUF file, its hyperparameters, tensor views and
// the decoder forward pass shared by every architecture (the variants
// differ only in flags and optional tensors; see docs/architecture.md).
//
// Thread-safety: forward() uses per-model scratch buffers, so one caller at a
// time (the engine thread). The pool does the parallel work.
//
// K and V live in a paged pool (kv::PagedKvStorage) shared by every
// sequence; each chunk names its sequence's blocks through a block table.
// A model with both sliding-window and full-attention layers (gemma3) may
// keep them in two pools, one per KV layer group (kv_layer_groups): the window group's
// tables then hold only the blocks still inside the window.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "kernels/rope.h"
#include "kv/kv_policy.h"
#include "kv/paged_kv_storage.h"
#include "model/config.h"
#include "model/lora_adapter.h"
#include "model/matmul_hook.h"
#include "model/moe_ffn.h"
#include "model/parallel.h"
#include "model/rope_config.h"
#include "model/weights.h"
#include "util/thread_pool.h"

namespace tokenmill::model {

// Which tokens of a chunk need next-token logits. Prefill chunks that do not
// end a prompt need none, which skips the output projection (the largest
// matrix of small models) for them.
enum class LogitRows { kNone, kLast, kAll };

// One KV pool's block table for a chunk: blocks[i] holds logical block
// first + i, i.e. positions [(first + i) * block_size, (first + i + 1) * block_size).
struct ChunkTable {
  std::span<const int32_t> blocks;
  int64_t first = 0;  // > 0 only in a group with a window (blocks that left it are gone)
};

// A run of consecutive tokens of one sequence, at positions
// [start_pos, start_pos + tokens.size()). Their K/V are written to the
// sequence's blocks; positions [0, start_pos) must already be there.
struct SequenceChunk {
  std::span<const int32_t> tokens;
  int64_t start_pos = 0;
  // The sequence's block table in each pool passed to forward() (same
  // order). The held blocks cover [first * block_size, start_pos +
  // tokens.size()), where first * block_size is 0 in a group without a
  // window and at most max(0, start_pos - window + 1) in one with a window.
  std::span<const ChunkTable> tables;
  LogitRows logits = LogitRows::kLast;  // which of the chunk's tokens get a logits row
  // Also output every token's final hidden state (forward()'s `hidden`):
  // embedding requests pool them.
  bool hidden = false;
  // The LoRA adapter this chunk's tokens run with (loaded for this model;
  // null: the base weights). Chunks with different adapters share the base
  // products; each adapter's deltas go to its own rows (lora_apply.h).
  const LoraAdapter* adapter = nullptr;
  // The tokens' RoPE positions are their cache positions plus this: the
  // positions a KV policy evicted before them when it keeps true positions
  // (kv/kv_policy.h, kPreserve); 0 otherwise.
  int64_t rope_offset = 0;
  // Heavy-hitter KV policy (kv/kv_policy.h; may be null): [start_pos +
  // tokens.size()], indexed by cache position; every full-attention layer
  // adds each key's attention mass from the chunk's queries to it. Not with
  // a ParallelComm (each rank sees its own heads only).
  float* key_mass = nullptr;
};

// How many hidden-state rows forward() returns for a chunk.
inline int64_t num_hidden_rows(const SequenceChunk& chunk) {
  return chunk.hidden ? static_cast<int64_t>(chunk.tokens.size()) : 0;
}

// How many logits rows forward() returns for a chunk (kAll: one per token,
// kLast: one, kNone: none); chunks' rows follow each other in chunk order.
inline int64_t num_logit_rows(const SequenceChunk& chunk) {
  switch (chunk.logits) {
    case LogitRows::kAll: return static_cast<int64_t>(chunk.tokens.size());
    case LogitRows::kLast: return 1;
    case LogitRows::kNone: return 0;
  }
  return 0;
}

// Which layers' K/V a pool holds.
enum class KvGroup {
  kAll,     // every layer (one pool)
  kFull,    // the full-attention layers (two pools)
  kWindow,  // the sliding-window layers (two pools)
};

// A KV layer group: its layers, and how many positions a query attends in
// them (itself included; 0 = every position).
struct KvLayerGroup {
  KvGroup layers = KvGroup::kAll;
  int64_t window = 0;
};

class Model {
 public:
  // Maps and binds the file. Throws Error for unreadable or unsupported files.
  // With `comm` (which must outlive the model), binds only this rank's
  // shard (comm->shard(); model/parallel.h) and runs forward() together with
  // the other ranks; throws Error when the model cannot be split that way.
  // `rope` overrides the file's RoPE scaling and context (rope_config.h);
  // what it warns about is in notices().
  static std::unique_ptr<Model> load(const std::string& path, ParallelComm* comm = nullptr,
                                     const RopeOverrides& rope = {});
  ~Model();

  // The hyperparameters of the file (also on a sharded rank).
  const ModelConfig& config() const { return config_; }
  // Warnings from loading (e.g. a context past the trained one, unscaled).
  const std::vector<std::string>& notices() const { return notices_; }
  // This rank's part: every layer, head and column without a ParallelComm.
  const ModelShard& shard() const { return shard_; }
  ParallelComm* comm() const { return comm_; }
  const gguf::GgufFile& file() const { return file_; }
  const ModelWeights& weights() const { return weights_; }

  // The KV pool geometry this model needs (n_layer, n_kv_dim) for the given
  // block size and element type: every layer, or one group's layers (of
  // this rank's stage and KV heads when sharded).
  kv::KvGeometry kv_geometry(int64_t block_size, kv::KvDtype dtype, KvGroup group = KvGroup::kAll) const;
  // Whether two pools are possible: the model has sliding-window layers and
  // at least one full-attention layer.
  bool has_window_group() const;
  // The KV layer groups forward() takes one pool each for, in order: every
  // layer, or (window_pool and has_window_group()) the full-attention
  // layers, then the sliding-window ones (window = sliding_window).
  std::vector<KvLayerGroup> kv_layer_groups(bool window_pool) const;

  // Runs one step over a flat batch made of the chunks, in order, and writes
  // their logits to `logits` as rows [num_rows, n_vocab]: every token's row
  // for chunks with LogitRows::kAll, the last row for kLast, none for kNone.
  // `pools` holds one pool per group of kv_layer_groups() (1 or 2); each
  // chunk's K/V go into them through its tables. Checked (Error): no empty
  // chunk, tokens inside the vocabulary, start_pos >= 0, one table per pool,
  // long enough and starting early enough, with ids inside the pool, and each
  // pool's geometry matching kv_geometry() of its group. Not checked (the
  // caller's contract): positions [0, start_pos) of each sequence are
  // already written, and no two chunks write the same block.
  //
  // skip_layers (empty, or one flag per layer): layers flagged non-zero are
  // left out, the residual stream passing them unchanged, and their K/V at
  // the chunks' positions are not written. Self-speculative decoding drafts
  // this way; the target's verification pass later writes every layer.
  //
  // Sharded (comm() set): every rank calls forward() with the same chunks
  // (the root publishes them first, ParallelComm::publish_step); only the
  // root gets logits, the others an empty vector.
  //
  // hidden (may be null): receives [H, n_embd], the final hidden state of
  // every token of the chunks with `hidden` set, in chunk order (H = their
  // tokens): the output of the final norm, the vector the LM head reads.
  // Root only, like logits (other ranks need not flag their chunks). Error
  // with a pipeline (pp > 1): its root never sees the last stage's rows.
  void forward(std::span<const SequenceChunk> chunks, std::span<kv::PagedKvStorage* const> pools,
               std::vector<float>& logits, ThreadPool& pool, std::span<const uint8_t> skip_layers = {},
               std::vector<float>* hidden = nullptr);
  // The checks forward() starts with (Error for a bad step), so a root can
  // refuse a step before it announces it to the other ranks.
  void check_step(std::span<const SequenceChunk> chunks, std::span<kv::PagedKvStorage* const> pools,
                  std::span<const uint8_t> skip_layers = {}) const;
  // One pool holding every layer.
  void forward(std::span<const SequenceChunk> chunks, kv::PagedKvStorage& kv, std::vector<float>& logits,
               ThreadPool& pool) {
    kv::PagedKvStorage* const pools[] = {&kv};
    forward(chunks, pools, logits, pool);
  }

  // Rotates the cached keys of blocks by RoPE: shifts[g] lists blocks of
  // pools[g] and the positions to move each by (KV policy kRerotate,
  // kv/kv_policy.h); every layer of the group, with its own RoPE base. The
  // quantized types are dequantized, rotated and quantized again. Not with
  // a ParallelComm (Error).
  void shift_keys(std::span<kv::PagedKvStorage* const> pools, std::span<const std::vector<kv::KeyShift>> shifts,
                  ThreadPool& pool);

  // Measures the per-channel key scales of the q4_0_kc KV cache
  // (model/key_channel_scales.h) from a fixed text, once; forward() does it
  // on its first step with such a pool, the engine at start so that no
  // request waits for it. Error with a ParallelComm. The scales:
  // [this rank's layers, n_kv_dim] (empty before).
  void prepare_key_scales(ThreadPool& pool);
  const std::vector<float>& key_scales() const { return key_scales_; }

  // Mixture-of-experts models: how forward() computes the experts
  // (model/moe_ffn.h; grouped by default).
  void set_expert_compute(ExpertCompute mode) { expert_compute_ = mode; }
  // Tokens each expert of each of this rank's layers ran in the last
  // forward() call: [stage layers, n_expert] (empty for a dense model).
  // Every layer routes every token to n_expert_used experts.
  std::span<const int64_t> expert_load() const { return expert_load_; }

  // Routes every weight product of forward() through `hook` (null: none).
  // The hook must outlive its use; set it between forward calls only.
  void set_matmul_hook(MatmulHook* hook) { matmul_hook_ = hook; }

 private:
  Model(gguf::GgufFile file, ParallelComm* comm, const RopeOverrides& rope);

  struct Scratch;  // model_internal.h
  // Where a layer's K/V live among forward()'s pools: the pool (its KV
  // layer group's index) and the layer's index inside it.
  struct KvSlot {
    size_t group = 0;
    int64_t pool_layer = 0;
  };
  KvSlot kv_slot(int64_t layer, size_t num_pools) const;

  // One micro-batch (the whole step without a pipeline) through this
  // stage's layers; on the last stage its logits rows go to `logits` (null:
  // a buffer, sent to the root with a pipeline). `tag` numbers it.
  void forward_part(std::span<const SequenceChunk> chunks, std::span<kv::PagedKvStorage* const> pools, ThreadPool& pool,
                    std::span<const uint8_t> skip_layers, float* logits, int tag, float* hidden = nullptr);
  // The scratch rows and LoRA rows for the chunks' T tokens.
  void reserve_scratch(std::span<const SequenceChunk> chunks, int64_t T);
  // x [T, n_embd] = embd_scale * E[token] for every token (first stage).
  void embed_tokens(std::span<const SequenceChunk> chunks);
  // The final norm of the R rows that need logits into scratch rows [R,
  // n_embd], divided by granite's logit_scale (last stage).
  void final_norm_rows(std::span<const SequenceChunk> chunks, int64_t R);
  // The final norm of every token of the chunks with `hidden` set, into
  // `out` [H, n_embd] (last stage).
  void write_hidden_rows(std::span<const SequenceChunk> chunks, float* out) const;
  // The output projection of the scratch rows (R of them) into `logits`.
  void project_logits(int64_t R, float* logits, int tag, ThreadPool& pool);
  bool is_column_copy(const void* data) const;

  // x += attention over the chunks' cached positions (model_layer.cc), in
  // the steps below, on the scratch rows of the step's T tokens.
  void attention_block(int64_t layer, std::span<const SequenceChunk> chunks, std::span<const int64_t> positions,
                       std::span<const int64_t> rope_positions, std::span<kv::PagedKvStorage* const> pools,
                       ThreadPool& pool);
  // q [T, n_q_dim], k and v [T, n_kv_dim] from the normalised x, with their
  // biases and q/k norms.
  void project_qkv(int64_t layer, ThreadPool& pool);
  // RoPE on q and k, each token at its rope_positions [T] entry.
  void rotate_qk(int64_t layer, std::span<const int64_t> rope_positions, ThreadPool& pool);
  // The q4_0_kc key channel scales on q and k (a cache of that dtype), and
  // the keys' magnitudes while prepare_key_scales measures them.
  void scale_keys(int64_t layer, kv::KvDtype dtype);
  // Each chunk's k, v into its blocks of `kv`, then att [T, n_q_dim] =
  // attention of its queries over its positions so far.
  void write_kv_and_attend(int64_t layer, std::span<const SequenceChunk> chunks, std::span<const int64_t> positions,
                           kv::PagedKvStorage& kv, KvSlot slot, ThreadPool& pool);
  // x += the output projection of att (normalised again where the
  // architecture does).
  void attention_output(int64_t layer, ThreadPool& pool);
  // The RoPE frequencies of a layer (its base: local or global).
  kernels::RopeFrequencies layer_rope(int64_t layer) const;
  void ffn_block(int64_t layer, ThreadPool& pool);
  // The FFN output in scratch xb: tensor-parallel sum, post-norm, residual.
  void finish_ffn(const LayerWeights& w);
  // y = W x through the hook, if any, else kernels::matmul.
  void matmul(const kernels::WeightView& w, const float* x, int64_t num_tokens, float* y, ThreadPool& pool);
  // A layer's product over the step's tokens, plus the LoRA deltas of the
  // chunks' adapters for that layer and slot.
  void layer_matmul(int64_t layer, LoraSlot slot, const kernels::WeightView& w, const float* x, float* y,
                    ThreadPool& pool);

  // Gives the layer matrices (and the output matrix) an interleaved copy
  // (kernels/interleave.h) when the active kernel table multiplies that
  // layout and TOKENMILL_REPACK is not 0.
  void interleave_weights();

  struct FreeDeleter {
    void operator()(uint8_t* p) const;
  };

  gguf::GgufFile file_;
  ModelConfig config_;
  std::vector<std::string> notices_;
  ModelWeights weights_;
  std::vector<std::unique_ptr<uint8_t[], FreeDeleter>> interleaved_;
  std::vector<std::unique_ptr<uint8_t[]>> column_copies_;  // tensor parallel: copied column shares
  ModelShard shard_;
  ModelConfig local_;  // what this rank computes with (model/shard.h local_config)
  ParallelComm* comm_ = nullptr;
  std::unique_ptr<Scratch> scratch_;
  // Layer i's index inside its group's pool with two pools (from
  // layer_is_local).
  std::vector<int64_t> group_layer_;
  MatmulHook* matmul_hook_ = nullptr;
  ExpertCompute expert_compute_ = ExpertCompute::kGrouped;
  std::vector<int64_t> expert_load_;  // expert_load()
  std::vector<float> key_scales_;     // prepare_key_scales
  // While prepare_key_scales runs: the keys' magnitudes [layers, n_kv_dim].
  std::vector<float>* key_magnitudes_ = nullptr;
};

}  // namespace tokenmill::model
