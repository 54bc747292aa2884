#include "model/lora_apply.h"

#include <algorithm>

#include "kernels/matmul.h"
#include "model/model.h"

namespace tokenmill::model {
namespace {

// Groups rows by adapter in first-seen order; `rows_of(chunk)` is how many
// rows a chunk has.
template <typename RowsOf>
std::vector<LoraRows> group_rows(std::span<const SequenceChunk> chunks, RowsOf rows_of) {
  std::vector<LoraRows> groups;
  int64_t row = 0;
  for (const SequenceChunk& ch : chunks) {
    const int64_t n = rows_of(ch);
    if (ch.adapter != nullptr && n > 0) {
      auto it = std::find_if(groups.begin(), groups.end(), [&](const LoraRows& g) { return g.adapter == ch.adapter; });
      if (it == groups.end()) it = groups.insert(groups.end(), LoraRows{ch.adapter, {}});
      for (int64_t i = 0; i < n; ++i) it->rows.push_back(row + i);
    }
    row += n;
  }
  return groups;
}

template <typename T>
void fit(std::vector<T>& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

}  // namespace

std::vector<LoraRows> lora_token_rows(std::span<const SequenceChunk> chunks) {
  return group_rows(chunks, [](const SequenceChunk& ch) { return static_cast<int64_t>(ch.tokens.size()); });
}

std::vector<LoraRows> lora_logit_rows(std::span<const SequenceChunk> chunks) {
  return group_rows(chunks, [](const SequenceChunk& ch) { return num_logit_rows(ch); });
}

void add_lora_deltas(std::span<const LoraRows> groups, const std::function<const LoraPair&(const LoraAdapter&)>& pick,
                     const float* x, float* y, ThreadPool& pool, LoraScratch& s) {
  for (const LoraRows& g : groups) {
    const LoraPair& p = pick(*g.adapter);
    if (!p.present()) continue;
    const int64_t n = static_cast<int64_t>(g.rows.size());
    const int64_t n_in = p.a.cols;
    const int64_t rank = p.a.rows;
    const int64_t n_out = p.b.rows;
    // One chunk's rows are consecutive: read them in place; else gather.
    const float* xs = x + g.rows.front() * n_in;
    if (g.rows.back() - g.rows.front() + 1 != n) {
      fit(s.x, n * n_in);
      for (int64_t i = 0; i < n; ++i)
        std::copy_n(x + g.rows[static_cast<size_t>(i)] * n_in, n_in, s.x.data() + i * n_in);
      xs = s.x.data();
    }
    fit(s.t, n * rank);
    fit(s.u, n * n_out);
    kernels::matmul(p.a, xs, n, s.t.data(), pool);
    kernels::matmul(p.b, s.t.data(), n, s.u.data(), pool);
    const float scale = p.scale;
    pool.parallel_for(n, [&](int, int64_t first, int64_t last) {
      for (int64_t i = first; i < last; ++i) {
        float* dst = y + g.rows[static_cast<size_t>(i)] * n_out;
        const float* src = s.u.data() + i * n_out;
        for (int64_t o = 0; o < n_out; ++o) dst[o] += scale * src[o];
      }
    });
  }
}

void add_lora_deltas_ref(std::span<const LoraRows> groups,
                         const std::function<const LoraPair&(const LoraAdapter&)>& pick, const float* x, float* y) {
  for (const LoraRows& g : groups) {
    const LoraPair& p = pick(*g.adapter);
    if (!p.present()) continue;
    const int64_t n_in = p.a.cols;
    const int64_t rank = p.a.rows;
    const int64_t n_out = p.b.rows;
    std::vector<float> a_row(static_cast<size_t>(n_in)), b_row(static_cast<size_t>(rank));
    std::vector<double> t(static_cast<size_t>(rank));
    for (int64_t row : g.rows) {
      const float* xr = x + row * n_in;
      for (int64_t r = 0; r < rank; ++r) {
        kernels::dequantize_weight_row(p.a, r, a_row.data());
        double acc = 0;
        for (int64_t c = 0; c < n_in; ++c) acc += static_cast<double>(a_row[static_cast<size_t>(c)]) * xr[c];
        t[static_cast<size_t>(r)] = acc;
      }
      for (int64_t o = 0; o < n_out; ++o) {
        kernels::dequantize_weight_row(p.b, o, b_row.data());
        double acc = 0;
        for (int64_t r = 0; r < rank; ++r)
          acc += static_cast<double>(b_row[static_cast<size_t>(r)]) * t[static_cast<size_t>(r)];
        y[row * n_out + o] += static_cast<float>(p.scale * acc);
      }
    }
  }
}

}  // namespace tokenmill::model
