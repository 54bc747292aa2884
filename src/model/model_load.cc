// Loading a model: the mapped file's hyperparameters and tensor views, this
// rank's shard of them, and the interleaved copies of the weight matrices
// that the active kernels multiply faster.
#include <cstdlib>
#include <string_view>

#include "kernels/dispatch.h"
#include "kernels/interleave.h"
#include "model/model.h"
#include "model/model_internal.h"
#include "model/rope_config.h"
#include "model/shard.h"
#include "util/env.h"
#include "util/error.h"
#include "util/mapped_file.h"

namespace tokenmill::model {
namespace {

// TOKENMILL_EXPERTS=per-token: the reference order, for measuring what
// grouping buys (docs/benchmarks.md). Read on every model, so a bad value
// is an error everywhere.
ExpertCompute expert_compute_from_env(ExpertCompute fallback) {
  const char* mode = std::getenv("TOKENMILL_EXPERTS");
  if (mode == nullptr || *mode == '\0') return fallback;
  const std::string_view m(mode);
  if (m == "per-token") return ExpertCompute::kPerToken;
  if (m != "grouped") fail("TOKENMILL_EXPERTS='{}': expected 'grouped' (the default) or 'per-token'", m);
  return fallback;
}

}  // namespace

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
  expert_compute_ = expert_compute_from_env(expert_compute_);
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

}  // namespace tokenmill::model
