#include "model/shard.h"

#include <algorithm>
#include <cstring>

#include "gguf/tensor_type.h"
#include "util/check.h"
#include "util/error.h"

namespace tokenmill::model {

IndexRange even_part(int64_t n, int parts, int index) {
  TM_CHECK(parts > 0 && index >= 0 && index < parts);
  const int64_t base = n / parts;
  const int64_t extra = n % parts;
  const int64_t begin = index * base + std::min<int64_t>(index, extra);
  return IndexRange{begin, begin + base + (index < extra ? 1 : 0)};
}

namespace {

// Rows [r.begin, r.end) of w, as a view.
kernels::WeightView row_view(const kernels::WeightView& w, IndexRange r) {
  kernels::WeightView v = w;
  v.data = static_cast<const uint8_t*>(w.data) + r.begin * gguf::row_bytes(w.type, w.cols);
  v.rows = r.size();
  v.interleaved = nullptr;
  return v;
}

VectorView vector_part(const VectorView& v, IndexRange r) {
  if (!v.present()) return v;
  return VectorView{v.data + r.begin, r.size()};
}

// Columns [c.begin, c.end) of every row of w, copied (they must start and
// end on block boundaries: resolve_shard checked it).
kernels::WeightView column_copy(const kernels::WeightView& w, IndexRange c,
                                std::vector<std::unique_ptr<uint8_t[]>>& owned) {
  const gguf::TensorTypeInfo& info = gguf::tensor_type_info(w.type);
  TM_CHECK(c.begin % info.block_size == 0 && c.end % info.block_size == 0);
  const int64_t src_row = gguf::row_bytes(w.type, w.cols);
  const int64_t dst_row = gguf::row_bytes(w.type, c.size());
  const int64_t offset = c.begin / info.block_size * info.bytes_per_block;
  auto buf = std::make_unique<uint8_t[]>(static_cast<size_t>(dst_row * w.rows));
  const auto* src = static_cast<const uint8_t*>(w.data);
  for (int64_t r = 0; r < w.rows; ++r)
    std::memcpy(buf.get() + r * dst_row, src + r * src_row + offset, static_cast<size_t>(dst_row));
  kernels::WeightView v = w;
  v.data = buf.get();
  v.cols = c.size();
  v.interleaved = nullptr;
  owned.push_back(std::move(buf));
  return v;
}

void check_columns(const char* what, const kernels::WeightView& w, IndexRange c, const ModelShard& s) {
  const int64_t block = gguf::tensor_type_info(w.type).block_size;
  if (c.begin % block != 0 || c.size() % block != 0)
    fail(
        "tensor parallel over {} ranks: {} would be split at column {} of {}, inside its {}-column {} blocks; "
        "use fewer ranks or a file with smaller blocks (e.g. Q8_0)",
        s.tp_size, what, c.begin, w.cols, block, gguf::tensor_type_name(w.type));
}

// The matrices each tensor rank holds a share of the columns of (every
// rank's share, so that every rank refuses the same shard).
void check_split_columns(const ModelShard& s, const ModelConfig& c, const ModelWeights& w) {
  for (int r = 0; r < s.tp_size; ++r) {
    ModelShard probe = s;
    probe.tp_rank = r;
    for (const LayerWeights& l : w.layers) {
      check_columns("the attention output projection", l.wo, even_part(c.n_q_dim(), s.tp_size, r), probe);
      if (!c.is_moe()) check_columns("the FFN down projection", l.w_down, even_part(c.n_ff, s.tp_size, r), probe);
      if (s.ep_size > 1) continue;
      for (const kernels::WeightView& d : l.down_exps)
        check_columns("an expert's down projection", d, even_part(c.n_ff_exp, s.tp_size, r), probe);
      if (c.n_ff_shexp > 0)
        check_columns("the shared expert's down projection", l.down_shexp, even_part(c.n_ff_shexp, s.tp_size, r),
                      probe);
    }
  }
}

}  // namespace

ModelShard resolve_shard(const ModelShard& shard, const ModelConfig& c, const ModelWeights& w) {
  ModelShard s = shard;
  if (s.tp_size < 1 || s.pp_size < 1) fail("--tp and --pp must be at least 1");
  if (s.pp_size > c.n_layer)
    fail("pipeline parallel over {} stages: the model has only {} layers", s.pp_size, c.n_layer);
  const IndexRange layers = even_part(c.n_layer, s.pp_size, s.pp_stage);
  s.layer_begin = layers.begin;
  s.layer_end = layers.end;
  if (s.microbatches < 1) s.microbatches = 1;
  if (s.ep_size > 1) {
    if (!c.is_moe())
      fail("expert parallel over {} ranks: '{}' is a dense model (no experts); use --tp or --pp", s.ep_size,
           c.arch_name);
    if (c.n_expert < s.ep_size)
      fail("expert parallel over {} ranks: the model has only {} experts per layer", s.ep_size, c.n_expert);
    if (s.pp_size > 1) fail("expert parallelism with a pipeline (--pp) is not supported");
    if (s.tp_size > 1 && s.tp_size != s.ep_size)
      fail("expert parallel over {} ranks needs --tp {} or --tp 1, got --tp {}", s.ep_size, s.ep_size, s.tp_size);
  }
  if (s.tp_size == 1) return s;
  // olmo2 normalises q and k over all heads at once: a rank holding some
  // heads cannot compute that mean without another all-reduce per layer.
  if (c.qk_norm == ModelConfig::QkNorm::kFullWidth)
    fail(
        "tensor parallel over {} ranks: architecture '{}' normalises q and k across all heads, which tokenmill "
        "cannot split over ranks; run it with --tp 1 (pipeline parallelism --pp works)",
        s.tp_size, c.arch_name);
  // Fewer KV heads than ranks: each KV head is replicated on the ranks
  // whose query heads use it (as vLLM does), which needs whole groups.
  if (c.n_kv_head % s.tp_size != 0 && s.tp_size % c.n_kv_head != 0)
    fail("tensor parallel over {} ranks: the model's {} KV heads neither divide by {} nor divide it", s.tp_size,
         c.n_kv_head, s.tp_size);
  if (c.n_head % s.tp_size != 0)
    fail("tensor parallel over {} ranks: the model's {} attention heads do not divide by {}", s.tp_size, c.n_head,
         s.tp_size);
  // Experts are split like a dense FFN: each rank holds a share of every
  // expert's hidden columns (and of the shared expert's).
  const auto divides = [&](const char* what, int64_t width) {
    if (width % s.tp_size != 0)
      fail("tensor parallel over {} ranks: {} {} does not divide by {}", s.tp_size, what, width, s.tp_size);
  };
  if (c.is_moe()) {
    if (s.ep_size == 1) {  // with experts spread over the ranks, each expert stays whole
      divides("the experts' FFN width", c.n_ff_exp);
      divides("the shared expert's FFN width", c.n_ff_shexp);
    }
  } else {
    divides("the FFN width", c.n_ff);
  }
  check_split_columns(s, c, w);
  return s;
}

ModelConfig local_config(const ModelConfig& config, const ModelShard& shard) {
  ModelConfig c = config;
  c.n_head /= shard.tp_size;
  c.n_kv_head = std::max<int64_t>(1, c.n_kv_head / shard.tp_size);  // replicated when fewer than ranks
  c.n_ff /= shard.tp_size;
  if (shard.ep_size == 1) {  // expert parallel: experts (and the shared one) whole
    c.n_ff_exp /= shard.tp_size;
    c.n_ff_shexp /= shard.tp_size;
  }
  return c;
}

IndexRange kv_head_part(const ModelConfig& c, const ModelShard& s) {
  if (c.n_kv_head >= s.tp_size) return even_part(c.n_kv_head, s.tp_size, s.tp_rank);
  const int64_t head = static_cast<int64_t>(s.tp_rank) * c.n_kv_head / s.tp_size;  // the one its queries use
  return IndexRange{head, head + 1};
}

IndexRange expert_part(const ModelConfig& config, const ModelShard& shard) {
  return even_part(config.n_expert, shard.ep_size, shard.ep_rank);
}

IndexRange vocab_part(const ModelConfig& config, const ModelShard& shard) {
  return even_part(config.n_vocab, shard.tp_size, shard.tp_rank);
}

void shard_weights(ModelWeights& w, const ModelConfig& c, const ModelShard& s,
                   std::vector<std::unique_ptr<uint8_t[]>>& owned) {
  const int64_t hd = c.head_dim;
  const IndexRange q = even_part(c.n_head, s.tp_size, s.tp_rank);
  const IndexRange kv = kv_head_part(c, s);
  const IndexRange q_rows{q.begin * hd, q.end * hd};
  const IndexRange kv_rows{kv.begin * hd, kv.end * hd};
  const IndexRange ff = even_part(c.n_ff, s.tp_size, s.tp_rank);
  for (int64_t i = 0; i < c.n_layer; ++i) {
    LayerWeights& l = w.layers[static_cast<size_t>(i)];
    if (i < s.layer_begin || i >= s.layer_end) {
      l = LayerWeights{};  // another stage's layer: never read here
      continue;
    }
    if (s.ep_size > 1) {
      // Other ranks' experts: never read here (their pages stay on disk).
      const IndexRange mine = expert_part(c, s);
      for (std::vector<kernels::WeightView>* experts : {&l.gate_exps, &l.up_exps, &l.down_exps})
        for (int64_t e = 0; e < c.n_expert; ++e)
          if (e < mine.begin || e >= mine.end) (*experts)[static_cast<size_t>(e)] = kernels::WeightView{};
    }
    if (s.tp_size == 1) continue;
    l.wq = row_view(l.wq, q_rows);
    l.wk = row_view(l.wk, kv_rows);
    l.wv = row_view(l.wv, kv_rows);
    l.bq = vector_part(l.bq, q_rows);
    l.bk = vector_part(l.bk, kv_rows);
    l.bv = vector_part(l.bv, kv_rows);
    l.wo = column_copy(l.wo, q_rows, owned);
    if (s.ep_size > 1) continue;  // the FFN is the experts', whole on their ranks
    if (!c.is_moe()) {
      l.w_gate = row_view(l.w_gate, ff);
      l.w_up = row_view(l.w_up, ff);
      l.w_down = column_copy(l.w_down, ff, owned);
      continue;
    }
    const IndexRange ff_exp = even_part(c.n_ff_exp, s.tp_size, s.tp_rank);
    for (size_t e = 0; e < l.gate_exps.size(); ++e) {
      l.gate_exps[e] = row_view(l.gate_exps[e], ff_exp);
      l.up_exps[e] = row_view(l.up_exps[e], ff_exp);
      l.down_exps[e] = column_copy(l.down_exps[e], ff_exp, owned);
    }
    if (c.n_ff_shexp > 0) {
      const IndexRange ff_sh = even_part(c.n_ff_shexp, s.tp_size, s.tp_rank);
      l.gate_shexp = row_view(l.gate_shexp, ff_sh);
      l.up_shexp = row_view(l.up_shexp, ff_sh);
      l.down_shexp = column_copy(l.down_shexp, ff_sh, owned);
    }
  }
  if (s.tp_size > 1) w.output = row_view(w.output, vocab_part(c, s));
}

}  // namespace tokenmill::model
