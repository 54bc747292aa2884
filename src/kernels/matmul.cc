// matmul driver: validates shapes once, picks a path per weight matrix, and
// shares the rows out over the thread pool. The per-ISA arithmetic is in the
// KernelTable: its type-independent entries and the weight type's row
// (type_kernels.h). choose_path tries the paths below in the order
// interleaved, integer decode, int16 packed panels, fused float decode,
// FP32 panels, and takes the first one the row has a kernel for.
//
// Paths:
//  - integer decode (rows with q16_rows, num_tokens <= the row's
//    q16_row_max_tokens): x is quantized once per call, by the calling
//    thread, to int16 blocks (quantize_act.h); each row is then one pass
//    of integer dot products over its bytes (type_kernels.h).
//  - fused float decode (rows with fused_rows but no q16_rows): rows
//    dequantized and dotted in registers, never stored.
//  - int16 packed panels (rows with q16_decode_row, calls of more than
//    q16_row_max_tokens tokens: prefill, batched decode): a thread
//    widens a panel of rows to int16 once (Q4_0 straight from its blocks,
//    pack_q16_blocks), packs it (gemm.h) and runs the 16-row integer
//    micro-kernel over the call's int16 activations; same numerics as the
//    integer decode path.
//  - interleaved (weights with an interleaved copy made at load,
//    interleave.h, and a row with gemm_interleaved): up to the table's
//    interleaved_max_tokens (AVX-512: every count; AVX2: 16); 16 rows at a
//    time, no per-call packing, same numerics as the int16 packed panels.
//  - FP32 panels (float types, and types without q16 kernels): a thread
//    dequantizes a panel of rows once into a 64-byte aligned FP32 scratch
//    that stays in L2 (packed from kPackedMinTokens tokens), then runs the
//    register-tiled FP32 micro-kernel over blocks of tokens sized for L2.
//    Dequantization is paid once per row per call.
//
// Work split: the rows of every matrix of the call are cut into units (row
// chunks or panels); each thread streams through its own contiguous share
// of them and then helps with the others' (UnitQueue), so a thread
// descheduled on a busy machine delays at most one unit and the threads
// finish together. Each output is computed by the same
// operation sequence whichever thread takes its unit, so results do not
// depend on the thread count.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/gemm.h"
#include "kernels/interleave.h"
#include "kernels/matmul.h"
#include "util/check.h"
#include "util/int_math.h"

namespace tokenmill::kernels {
namespace {

constexpr int64_t kRowQuad = 4;                   // rows per register tile
constexpr int64_t kTokenTriple = 3;               // tokens per register tile
constexpr int64_t kPanelBytes = 256 * 1024;       // dequantized panel budget (L2)
constexpr int64_t kTokenBlockBytes = 256 * 1024;  // x rows reused across a panel
constexpr int64_t kUnitsPerThread = 16;           // decode row chunks per thread
constexpr int64_t kPackedPanelRows = 64;          // x reuse per panel (L3 traffic / 64)

// Per-thread scratch buffers (slot 0: decoded rows, slot 1: a packed
// panel), 64-byte aligned, grown on demand, freed at thread exit. Pool
// threads live as long as the pool, so they are allocated once.
void* thread_scratch_bytes(int slot, int64_t bytes) {
  struct Buffer {
    void* data = nullptr;
    int64_t capacity = 0;
    ~Buffer() { std::free(data); }
  };
  thread_local Buffer buffers[2];
  Buffer& buffer = buffers[slot];
  if (buffer.capacity < bytes) {
    std::free(buffer.data);
    buffer.capacity = round_up(bytes, 64);
    buffer.data = std::aligned_alloc(64, static_cast<size_t>(buffer.capacity));
    TM_CHECK_MSG(buffer.data != nullptr, "out of memory for matmul scratch");
  }
  return buffer.data;
}

float* thread_scratch(int slot, int64_t num_floats) {
  return static_cast<float*>(thread_scratch_bytes(slot, num_floats * static_cast<int64_t>(sizeof(float))));
}

enum class Path { kQ16, kFused, kPanels, kPacked, kQ16Packed, kInterleaved };

// One matrix of a call: its input, its path and how its rows are cut into
// units.
struct Task {
  const WeightView* w = nullptr;
  float* y = nullptr;  // [num_tokens, w->rows]
  Path path = Path::kPanels;
  int64_t unit_rows = 0;
  int64_t num_units = 0;
  const float* x = nullptr;  // [num_tokens, w->cols]
  int64_t num_tokens = 0;
  int64_t x_row = 0;  // x's first row in the call's quantized activations
};

bool needs_acts(Path path) { return path == Path::kQ16 || path == Path::kQ16Packed || path == Path::kInterleaved; }

// Rows [row, ...) of quantized activations, as a view of their own.
QuantizedActs acts_from_row(const QuantizedActs& a, int64_t row) {
  if (a.qs == nullptr) return a;
  const int64_t nb = a.cols / kActBlock;
  return {a.qs + row * a.cols, a.d + row * nb, a.s32 + row * nb, a.s16 + 2 * row * nb, a.cols};
}

// The first path down this list that the weight type's row of the table
// (type_kernels.h) has a kernel for.
Path choose_path(const KernelTable& kt, const WeightView& w, int64_t num_tokens) {
  const TypeKernels& k = kt.of(w.type);
  if (w.interleaved != nullptr && k.gemm_interleaved != nullptr && num_tokens <= kt.interleaved_max_tokens) {
    return Path::kInterleaved;
  }
  if (k.q16_rows != nullptr && num_tokens <= k.q16_row_max_tokens) return Path::kQ16;
  if (k.q16_decode_row != nullptr && kt.gemm_q16_packed != nullptr) return Path::kQ16Packed;
  if (num_tokens <= kMaxFusedTokens && k.fused_rows != nullptr) return Path::kFused;
  if (num_tokens >= kPackedMinTokens && kt.gemm_packed != nullptr) return Path::kPacked;
  return Path::kPanels;
}

int64_t panel_stride(int64_t cols) { return round_up(cols, 16); }  // 64-byte aligned scratch rows

// Rows per panel: what fits the scratch budget, a multiple of the row tile,
// but small enough that every thread gets about four panels.
int64_t panel_rows_for(int64_t rows, int64_t cols, int num_threads) {
  const int64_t fit = kPanelBytes / (panel_stride(cols) * static_cast<int64_t>(sizeof(float)));
  const int64_t balanced = ceil_div(rows, 4 * static_cast<int64_t>(num_threads));
  return round_up(std::max<int64_t>(1, std::min(fit, balanced)), kRowQuad);
}

// Panels of kPackedPanelRows, or fewer so that each thread gets two.
int64_t packed_panel_rows(int64_t rows, int num_threads) {
  const int64_t balanced = ceil_div(rows, 2 * static_cast<int64_t>(num_threads));
  return round_up(std::max<int64_t>(1, std::min(kPackedPanelRows, balanced)), kPackRows);
}

int64_t decode_unit_rows(int64_t rows, int num_threads) {
  return round_up(std::max<int64_t>(1, ceil_div(rows, kUnitsPerThread * num_threads)), kRowQuad);
}

// Packs rows [r0, r0 + num_rows), dequantized kPackStep rows at a time, into
// a thread-local packed panel (gemm.h) and multiplies it with all of x.
void run_packed_panel(const KernelTable& kt, const WeightView& w, int64_t r0, int64_t num_rows, const float* x,
                      int64_t num_tokens, float* y) {
  const int64_t cols = w.cols;
  const int64_t padded = round_up(num_rows, kPackRows);
  float* packed = thread_scratch(1, packed_panel_floats(num_rows, cols));
  const bool direct = w.type == gguf::TensorType::F32;
  float* rows = direct ? nullptr : thread_scratch(0, kPackStep * cols);
  const int64_t bytes_per_row = gguf::row_bytes(w.type, cols);
  const auto* bytes = static_cast<const uint8_t*>(w.data);
  const TypeKernels::DequantizeRow dequantize_row = kt.of(w.type).dequantize_row;
  for (int64_t i = 0; i < padded; i += kPackStep) {
    const int64_t n = std::clamp<int64_t>(num_rows - i, 0, kPackStep);
    const float* src = direct ? static_cast<const float*>(w.data) + (r0 + i) * cols : rows;
    if (!direct) {
      for (int64_t j = 0; j < n; ++j) dequantize_row(bytes + (r0 + i + j) * bytes_per_row, rows + j * cols, cols);
    }
    kt.pack_rows(src, cols, n, cols, i, padded, packed);
  }
  kt.gemm_packed(packed, num_rows, cols, x, cols, num_tokens, y + r0, w.rows);
}

// Widens rows [r0, r0 + num_rows) to int16, kPackStep rows at a time, into a
// thread-local packed panel (gemm.h) and multiplies it with the quantized
// activations of every token.
void run_q16_packed_panel(const KernelTable& kt, const WeightView& w, int64_t r0, int64_t num_rows,
                          const QuantizedActs& acts, int64_t num_tokens, float* y) {
  const int64_t cols = w.cols, halves = w.cols / 16;
  const int64_t padded = round_up(num_rows, kPackRows);
  const int64_t q_bytes = round_up(padded * cols * 2, 64), f_bytes = round_up(padded * halves * 4, 64);
  auto* panel = static_cast<uint8_t*>(thread_scratch_bytes(1, q_bytes + 2 * f_bytes));
  auto* pq = reinterpret_cast<int16_t*>(panel);
  auto* ps = reinterpret_cast<float*>(panel + q_bytes);
  auto* pb = reinterpret_cast<float*>(panel + q_bytes + f_bytes);
  const int64_t tq_bytes = round_up(kPackStep * cols * 2, 64), tf_bytes = round_up(kPackStep * halves * 4, 64);
  auto* temp = static_cast<uint8_t*>(thread_scratch_bytes(0, tq_bytes + 2 * tf_bytes));
  auto* tq = reinterpret_cast<int16_t*>(temp);
  auto* ts = reinterpret_cast<float*>(temp + tq_bytes);
  auto* tb = reinterpret_cast<float*>(temp + tq_bytes + tf_bytes);
  const int64_t bytes_per_row = gguf::row_bytes(w.type, cols);
  const auto* bytes = static_cast<const uint8_t*>(w.data);
  const TypeKernels& k = kt.of(w.type);
  for (int64_t i = 0; i < padded; i += kPackStep) {
    const int64_t n = std::clamp<int64_t>(num_rows - i, 0, kPackStep);
    if (k.pack_q16_blocks != nullptr) {
      k.pack_q16_blocks(bytes + (r0 + i) * bytes_per_row, bytes_per_row, n, cols, i, padded, pq, ps, pb);
      continue;
    }
    for (int64_t j = 0; j < n; ++j) {
      k.q16_decode_row(bytes + (r0 + i + j) * bytes_per_row, cols, tq + j * cols, ts + j * halves, tb + j * halves);
    }
    kt.pack_q16_rows(tq, ts, tb, n, cols, i, padded, pq, ps, pb);
  }
  const Q16Layout layout = q16_layout(w.type);
  kt.gemm_q16_packed(pq, ps, pb, layout.halves, layout.bias, num_rows, cols, acts, num_tokens, y + r0, w.rows);
}

// Dequantizes rows [r0, r0 + num_rows) into a panel (unless F32, which is
// multiplied in place) and multiplies it with every token block of x.
void run_panel(const KernelTable& kt, const WeightView& w, int64_t r0, int64_t num_rows, const float* x,
               int64_t num_tokens, float* y) {
  const int64_t cols = w.cols;
  const float* panel = nullptr;
  int64_t stride = cols;
  if (w.type == gguf::TensorType::F32) {
    panel = static_cast<const float*>(w.data) + r0 * cols;
  } else {
    stride = panel_stride(cols);
    float* scratch = thread_scratch(0, num_rows * stride);
    const int64_t bytes_per_row = gguf::row_bytes(w.type, cols);
    const auto* bytes = static_cast<const uint8_t*>(w.data) + r0 * bytes_per_row;
    const TypeKernels::DequantizeRow dequantize_row = kt.of(w.type).dequantize_row;
    for (int64_t i = 0; i < num_rows; ++i) dequantize_row(bytes + i * bytes_per_row, scratch + i * stride, cols);
    panel = scratch;
  }
  // Token blocks a multiple of the token tile, so only the last block has a
  // narrower tile.
  const int64_t fit = kTokenBlockBytes / (cols * static_cast<int64_t>(sizeof(float)));
  const int64_t token_block = std::max<int64_t>(kTokenTriple, fit / kTokenTriple * kTokenTriple);
  for (int64_t t0 = 0; t0 < num_tokens; t0 += token_block) {
    kt.gemm_f32(panel, stride, num_rows, x + t0 * cols, cols, std::min(token_block, num_tokens - t0), cols,
                y + t0 * w.rows + r0, w.rows);
  }
}

void run_unit(const KernelTable& kt, const Task& task, int64_t unit, const QuantizedActs& call_acts) {
  const WeightView& w = *task.w;
  const float* x = task.x;
  const int64_t num_tokens = task.num_tokens;
  const QuantizedActs acts = needs_acts(task.path) ? acts_from_row(call_acts, task.x_row) : QuantizedActs{};
  const int64_t r0 = unit * task.unit_rows;
  const int64_t r1 = std::min(w.rows, r0 + task.unit_rows);
  switch (task.path) {
    case Path::kQ16: return kt.of(w.type).q16_rows(w, r0, r1, acts, num_tokens, task.y);
    case Path::kFused: return kt.of(w.type).fused_rows(w, r0, r1, x, num_tokens, task.y);
    case Path::kPanels: return run_panel(kt, w, r0, r1 - r0, x, num_tokens, task.y);
    case Path::kPacked: return run_packed_panel(kt, w, r0, r1 - r0, x, num_tokens, task.y);
    case Path::kQ16Packed: return run_q16_packed_panel(kt, w, r0, r1 - r0, acts, num_tokens, task.y);
    case Path::kInterleaved: return kt.of(w.type).gemm_interleaved(w, r0, r1, acts, num_tokens, task.y);
  }
}

// The calling thread's buffer for quantized activations (reused by every
// call; only read by the pool's threads while the call runs).
QuantizedActsBuffer& caller_acts() {
  thread_local QuantizedActsBuffer buffer;
  return buffer;
}

// Quantizes x [num_tokens, cols] into the calling thread's buffer; token
// ranges over the pool when there are many (prefill), else on this thread.
QuantizedActs quantize_for_call(const KernelTable& kt, const float* x, int64_t num_tokens, int64_t cols,
                                ThreadPool& pool) {
  QuantizedActsBuffer& buffer = caller_acts();
  buffer.resize(num_tokens, cols);
  const auto quantize = [&](int, int64_t t0, int64_t t1) {
    const int64_t nb = cols / kActBlock;
    kt.quantize_acts(
        x + t0 * cols, t1 - t0, cols,
        {buffer.qs() + t0 * cols, buffer.d() + t0 * nb, buffer.s32() + t0 * nb, buffer.s16() + 2 * t0 * nb});
  };
  if (num_tokens <= kMaxFusedTokens) {
    quantize(0, 0, num_tokens);
  } else {
    pool.parallel_for(num_tokens, quantize);
  }
  return buffer.view();
}

// Work sharing for one call: units [0, total) are cut into one contiguous
// share per thread. A thread takes units from the front of its own share, in
// order, so it streams its rows sequentially (what the hardware prefetchers
// like: one or two shares per thread decode faster than many interleaved
// units per thread); when its share is empty it takes units
// from the back of the others', so a thread that falls behind (descheduled
// on a busy machine) is relieved and the threads finish within one unit of
// each other. Each share is one atomic word, (end << 32) | begin.
class UnitQueue {
 public:
  UnitQueue(int64_t total, int num_shares) : num_shares_(num_shares) {
    for (int i = 0; i < num_shares; ++i) {
      const uint64_t begin = static_cast<uint64_t>(total * i / num_shares);
      const uint64_t end = static_cast<uint64_t>(total * (i + 1) / num_shares);
      shares_[i].range.store(end << 32 | begin, std::memory_order_relaxed);
    }
  }

  // The next unit for the thread owning share `self`, or -1 when none is left.
  int64_t next(int self) {
    int64_t u = take(shares_[self].range, /*front=*/true);
    for (int k = 1; u < 0 && k < num_shares_; ++k) u = take(shares_[(self + k) % num_shares_].range, false);
    return u;
  }

  static constexpr int kMaxShares = 16;

 private:
  static int64_t take(std::atomic<uint64_t>& range, bool front) {
    uint64_t v = range.load(std::memory_order_relaxed);
    for (;;) {
      const uint64_t begin = v & 0xffffffffu, end = v >> 32;
      if (begin >= end) return -1;
      const uint64_t next = front ? v + 1 : (end - 1) << 32 | begin;
      if (range.compare_exchange_weak(v, next, std::memory_order_relaxed))
        return static_cast<int64_t>(front ? begin : end - 1);
    }
  }

  struct alignas(64) Share {
    std::atomic<uint64_t> range;
  };
  Share shares_[kMaxShares];
  int num_shares_;
};

// Runs every task's units over the pool (UnitQueue). Every task reads rows
// [x_row, x_row + num_tokens) of x [x_rows, cols], which is quantized once
// when a task's path needs it.
void run_tasks(const KernelTable& kt, const Task* tasks, int num_tasks, const float* x, int64_t x_rows, int64_t cols,
               ThreadPool& pool) {
  QuantizedActs acts;
  for (int i = 0; i < num_tasks; ++i) {
    if (needs_acts(tasks[i].path)) {
      acts = quantize_for_call(kt, x, x_rows, cols, pool);
      break;
    }
  }
  // starts[i]: the first global unit of task i (binary-searched: a grouped
  // call may hold hundreds of tasks).
  std::vector<int64_t> starts(static_cast<size_t>(num_tasks) + 1, 0);
  for (int i = 0; i < num_tasks; ++i)
    starts[static_cast<size_t>(i) + 1] = starts[static_cast<size_t>(i)] + tasks[i].num_units;
  const int64_t total = starts.back();
  const int num_shares =
      static_cast<int>(std::min<int64_t>({pool.num_threads(), total, int64_t{UnitQueue::kMaxShares}}));
  UnitQueue queue(total, num_shares);
  // Each share's thread; with more pool threads than shares, some get none.
  pool.parallel_for(num_shares, [&](int, int64_t first, int64_t last) {
    for (int64_t share = first; share < last; ++share) {
      for (int64_t u = queue.next(static_cast<int>(share)); u >= 0; u = queue.next(static_cast<int>(share))) {
        const auto task = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), u) - starts.begin() - 1);
        run_unit(kt, tasks[task], u - starts[task], acts);
      }
    }
  });
}

void check_shapes(const WeightView& w, int64_t num_tokens) {
  TM_CHECK(w.rows >= 0 && w.cols >= 0 && num_tokens >= 0);
  TM_CHECK_MSG(w.cols % gguf::tensor_type_info(w.type).block_size == 0,
               "matmul: cols must be a multiple of the weight type's block size");
}

Task make_task(const KernelTable& kt, const WeightView& w, const float* x, int64_t x_row, int64_t num_tokens, float* y,
               int num_threads) {
  Task task;
  task.w = &w;
  task.y = y;
  task.x = x + x_row * w.cols;
  task.x_row = x_row;
  task.num_tokens = num_tokens;
  task.path = choose_path(kt, w, num_tokens);
  switch (task.path) {
    case Path::kPanels: task.unit_rows = panel_rows_for(w.rows, w.cols, num_threads); break;
    case Path::kPacked:
    case Path::kQ16Packed: task.unit_rows = packed_panel_rows(w.rows, num_threads); break;
    case Path::kInterleaved:
      task.unit_rows = num_tokens <= kMaxFusedTokens ? round_up(decode_unit_rows(w.rows, num_threads), kInterleaveRows)
                                                     : packed_panel_rows(w.rows, num_threads);
      break;
    default: task.unit_rows = decode_unit_rows(w.rows, num_threads);
  }
  task.num_units = ceil_div(w.rows, task.unit_rows);
  return task;
}

}  // namespace

void matmul_many_with(const KernelTable& kt, std::span<const WeightView> ws, const float* x, int64_t num_tokens,
                      std::span<float* const> ys, ThreadPool& pool) {
  TM_CHECK(ws.size() == ys.size() && ws.size() <= kMaxMatmulMany);
  for (const WeightView& w : ws) {
    check_shapes(w, num_tokens);
    TM_CHECK_MSG(w.cols == ws[0].cols, "matmul_many: every matrix must have the same number of columns");
  }
  if (ws.empty() || num_tokens == 0) return;
  const int64_t cols = ws[0].cols;
  Task tasks[kMaxMatmulMany];
  int num_tasks = 0;
  for (size_t i = 0; i < ws.size(); ++i) {
    const WeightView& w = ws[i];
    if (w.rows == 0) continue;
    if (cols == 0) {
      std::memset(ys[i], 0, static_cast<size_t>(num_tokens * w.rows) * sizeof(float));
      continue;
    }
    TM_CHECK(w.data != nullptr && x != nullptr && ys[i] != nullptr);
    tasks[num_tasks++] = make_task(kt, w, x, 0, num_tokens, ys[i], pool.num_threads());
  }
  if (num_tasks > 0) run_tasks(kt, tasks, num_tasks, x, num_tokens, cols, pool);
}

void matmul_grouped_with(const KernelTable& kt, std::span<const GroupedProduct> products, const float* x,
                         int64_t x_rows, ThreadPool& pool) {
  std::vector<Task> tasks;
  tasks.reserve(products.size());
  const int64_t cols = products.empty() ? 0 : products[0].w->cols;
  for (const GroupedProduct& p : products) {
    TM_CHECK(p.w != nullptr);
    const WeightView& w = *p.w;
    check_shapes(w, p.num_tokens);
    TM_CHECK_MSG(w.cols == cols, "matmul_grouped: every matrix must have the same number of columns");
    TM_CHECK_MSG(p.first_row >= 0 && p.first_row + p.num_tokens <= x_rows, "matmul_grouped: rows outside x");
    if (w.rows == 0 || p.num_tokens == 0) continue;
    TM_CHECK(w.data != nullptr && x != nullptr && p.y != nullptr);
    if (cols == 0) {
      std::memset(p.y, 0, static_cast<size_t>(p.num_tokens * w.rows) * sizeof(float));
      continue;
    }
    tasks.push_back(make_task(kt, w, x, p.first_row, p.num_tokens, p.y, pool.num_threads()));
  }
  if (!tasks.empty()) run_tasks(kt, tasks.data(), static_cast<int>(tasks.size()), x, x_rows, cols, pool);
}

void matmul_with(const KernelTable& kt, const WeightView& w, const float* x, int64_t num_tokens, float* y,
                 ThreadPool& pool) {
  matmul_many_with(kt, {&w, 1}, x, num_tokens, {&y, 1}, pool);
}

void matmul(const WeightView& w, const float* x, int64_t num_tokens, float* y, ThreadPool& pool) {
  matmul_with(active_kernels(), w, x, num_tokens, y, pool);
}

void matmul_many(std::span<const WeightView> ws, const float* x, int64_t num_tokens, std::span<float* const> ys,
                 ThreadPool& pool) {
  matmul_many_with(active_kernels(), ws, x, num_tokens, ys, pool);
}

void matmul_grouped(std::span<const GroupedProduct> products, const float* x, int64_t x_rows, ThreadPool& pool) {
  matmul_grouped_with(active_kernels(), products, x, x_rows, pool);
}

}  // namespace tokenmill::kernels
