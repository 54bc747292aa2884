// Kernel micro-benchmarks. GEMV (one token, decode) reports weight bytes
// streamed per second; GEMM (64 and 512 tokens, prefill) reports FLOP/s; the
// Gemma 3 270M benchmarks time the shapes of a real prefill. Run for example:
//   kernels_bench --benchmark_filter=Gemv
//   TOKENMILL_ISA=scalar kernels_bench --benchmark_filter=Gemm   (A/B)
// Matmul arguments: type, rows, cols, tokens, threads, path, copies (see
// BM_Matmul).
#include <benchmark/benchmark.h>

#include <time.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/dispatch.h"
#include "kernels/interleave.h"
#include "kernels/matmul.h"
#include "kernels/paged_attention.h"
#include "kernels/quant.h"
#include "util/thread_pool.h"

namespace tokenmill::kernels {
namespace {

using gguf::TensorType;

std::vector<float> gaussian(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

// A random weight matrix quantized with the reference quantizer (one random
// row repeated: quantizing 168M values for the output matrix would take
// longer than the benchmark; the kernels' speed does not depend on values).
// As a loaded model does, it carries an interleaved copy (interleave.h)
// when the active kernels multiply that layout.
struct Matrix {
  Matrix(TensorType type, int64_t rows, int64_t cols) {
    const int64_t rb = gguf::row_bytes(type, cols);
    bytes.resize(static_cast<size_t>(rows * rb));
    std::vector<uint8_t> row(static_cast<size_t>(rb));
    for (int64_t r = 0; r < std::min<int64_t>(rows, 64); ++r) {
      quantize_row_ref(type, gaussian(cols, static_cast<uint32_t>(r)).data(), bytes.data() + r * rb, cols);
    }
    for (int64_t r = 64; r < rows; ++r) std::copy_n(bytes.data() + (r % 64) * rb, rb, bytes.data() + r * rb);
    view = {type, bytes.data(), rows, cols};
    if (active_kernels().of(type).gemm_interleaved != nullptr) {
      interleaved.resize(static_cast<size_t>(interleaved_bytes(view)) + 64);
      auto* aligned = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(interleaved.data()) + 63) / 64 * 64);
      interleave_weights(view, aligned);
      view.interleaved = aligned;
    }
  }
  std::vector<uint8_t> bytes;
  std::vector<uint8_t> interleaved;
  WeightView view;
};

ThreadPool& pool_with(int threads) {
  static std::unique_ptr<ThreadPool> pools[9];
  if (!pools[threads]) pools[threads] = std::make_unique<ThreadPool>(threads);
  return *pools[threads];
}

double process_cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// The kernel table of the run, for A/B runs: the active one (path 0), the
// same without the integer decode path (1: float fused decode), without the
// FP32 packed prefill kernel (2: row-major FP32 panels below the int16
// threshold), without the int16 packed prefill kernel (3: FP32 prefill),
// with the int16 packed kernel for every token count (4: packed), with
// the row kernel up to its maximum (5: rows), to place q16_row_max_tokens
// (both read the file layout), or reading the file layout where weights have an interleaved copy (6:
// no-repack, what TOKENMILL_REPACK=0 gives).
const KernelTable& table_for_path(int64_t path) {
  static const KernelTable float_only = [] {
    KernelTable t = active_kernels();
    for (TypeKernels& k : t.types) {
      k.q16_rows = nullptr;
      k.q16_decode_row = nullptr;
      k.gemm_interleaved = nullptr;
    }
    return t;
  }();
  static const KernelTable unpacked = [] {
    KernelTable t = active_kernels();
    t.pack_rows = nullptr;
    t.gemm_packed = nullptr;
    return t;
  }();
  static const KernelTable float_prefill = [] {
    KernelTable t = active_kernels();
    t.gemm_q16_packed = nullptr;
    return t;
  }();
  static const KernelTable packed = [] {
    KernelTable t = active_kernels();
    for (TypeKernels& k : t.types) {
      k.q16_row_max_tokens = 0;
      k.gemm_interleaved = nullptr;
    }
    return t;
  }();
  static const KernelTable rows = [] {
    KernelTable t = active_kernels();
    for (TypeKernels& k : t.types) {
      k.q16_row_max_tokens = kMaxQ16RowTokens;
      k.gemm_interleaved = nullptr;
    }
    return t;
  }();
  static const KernelTable file_layout = [] {
    KernelTable t = active_kernels();
    for (TypeKernels& k : t.types) {
      k.gemm_interleaved = nullptr;
    }
    return t;
  }();
  switch (path) {
    case 1: return float_only;
    case 6: return file_layout;
    case 4: return packed;
    case 5: return rows;
    case 2: return unpacked;
    case 3: return float_prefill;
    default: return active_kernels();
  }
}

// Args: type id, rows, cols, tokens, threads, path (table_for_path), copies (weights cycled through per iteration;
// enough copies put the working set beyond the 32 MiB L3, so GEMV reads DRAM as decode does). Besides wall-clock rates
// it reports rates over process CPU time divided by the threads ("cpu" counters): on a machine shared with other jobs
// the wall clock also counts time the threads waited to be scheduled.
void BM_Matmul(benchmark::State& state) {
  const auto type = static_cast<TensorType>(state.range(0));
  const int64_t rows = state.range(1), cols = state.range(2), tokens = state.range(3);
  const int threads = static_cast<int>(state.range(4));
  ThreadPool& pool = pool_with(threads);
  const KernelTable& kt = table_for_path(state.range(5));
  const int64_t copies = state.range(6);
  std::vector<Matrix> ws;
  for (int64_t i = 0; i < copies; ++i) ws.emplace_back(type, rows, cols);
  const auto x = gaussian(tokens * cols, 1);
  std::vector<float> y(static_cast<size_t>(tokens * rows));
  int64_t i = 0;
  const double cpu0 = process_cpu_seconds();
  for (auto _ : state) {
    matmul_with(kt, ws[static_cast<size_t>(i++ % copies)].view, x.data(), tokens, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  const double cpu = (process_cpu_seconds() - cpu0) / threads;
  const double bytes = static_cast<double>(ws[0].bytes.size()) * static_cast<double>(state.iterations());
  const double flops = 2.0 * static_cast<double>(rows * cols * tokens) * static_cast<double>(state.iterations());
  const char* path_names[] = {"", " float", " unpacked", " f32-prefill", " packed", " rows", " no-repack"};
  state.SetLabel(std::string(gguf::tensor_type_name(type)) + path_names[state.range(5)]);
  state.SetBytesProcessed(static_cast<int64_t>(bytes));
  state.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsRate);
  state.counters["cpu_GB/s"] = bytes / cpu * 1e-9;
  state.counters["cpu_GFLOP/s"] = flops / cpu * 1e-9;
}

constexpr int64_t id(TensorType t) { return static_cast<int64_t>(t); }

// Decode GEMV, 2048 x 2048 (TinyLlama's attention projections), from DRAM.
void gemv_args(benchmark::internal::Benchmark* b) {
  for (TensorType t :
       {TensorType::Q4_0, TensorType::Q4_1, TensorType::Q5_0, TensorType::Q5_1, TensorType::Q8_0, TensorType::Q2_K,
        TensorType::Q3_K, TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K, TensorType::F16}) {
    const int64_t copies = std::max<int64_t>(2, (96 << 20) / gguf::row_bytes(t, 2048) / 2048);
    for (int threads : {1, 2}) {
      for (int64_t path : {0, 1}) b->Args({id(t), 2048, 2048, 1, threads, path, copies});
      if (active_kernels().of(t).gemm_interleaved != nullptr) b->Args({id(t), 2048, 2048, 1, threads, 6, copies});
    }
  }
}

void gemm_args(benchmark::internal::Benchmark* b) {
  for (TensorType t : {TensorType::Q8_0, TensorType::Q4_0, TensorType::Q4_K, TensorType::Q6_K, TensorType::Q5_0,
                       TensorType::F16, TensorType::F32}) {
    for (int threads : {1, 2}) b->Args({id(t), 2048, 2048, 64, threads, 0, 1});
  }
  // Token counts around the prefill path switches (gemm.h: kPackedMinTokens,
  // kQ16PackedMinTokens), on the FFN down shape (long rows) and a square one.
  for (int64_t tokens : {5, 8, 16, 32, 64, 96, 128, 256, 512}) {
    for (int64_t path : {0, 2, 3}) {
      b->Args({id(TensorType::Q4_0), 2048, 2048, tokens, 1, path, 8});
      b->Args({id(TensorType::Q4_0), 2048, 5632, tokens, 1, path, 4});
    }
  }
  // Where batched decode should switch from q16_rows to the packed kernel
  // (KernelTable::q16_row_max_tokens): both, on TinyLlama's FFN down shape
  // (run once per ISA, TOKENMILL_ISA=avx2 / avx512).
  for (TensorType t : {TensorType::Q4_0, TensorType::Q4_K, TensorType::Q5_0, TensorType::Q5_K}) {
    for (int64_t tokens : {2, 4, 6, 8, 12, 16}) {
      for (int64_t path : {4, 5}) b->Args({id(t), 2048, 5632, tokens, 1, path, 4});
    }
  }
  // Batched decode with and without the interleaved copy (path 6), from
  // DRAM, where the active table has one: Gemma 3 270M's FFN gate and up
  // shape (2048 x 640; Q5_0 in its Q4_K_M file, whose 640-column rows have
  // no K-quant), one thread.
  for (TensorType t : {TensorType::Q4_0, TensorType::Q5_0, TensorType::Q8_0}) {
    if (active_kernels().of(t).gemm_interleaved == nullptr) continue;
    for (int64_t tokens : {1, 2, 3, 4, 6, 8, 16}) {
      for (int64_t path : {0, 6}) b->Args({id(t), 2048, 640, tokens, 1, path, 64});
    }
  }
  // Prefill shapes of TinyLlama (512 tokens): attention output, FFN up, FFN down.
  for (TensorType t : {TensorType::Q4_0, TensorType::Q8_0, TensorType::Q4_K, TensorType::Q6_K, TensorType::F16}) {
    for (int threads : {1, 2}) {
      b->Args({id(t), 2048, 2048, 512, threads, 0, 1});
      b->Args({id(t), 5632, 2048, 512, threads, 0, 1});
      b->Args({id(t), 2048, 5632, 512, threads, 0, 1});
    }
  }
}

// Gemv and Gemm are registered in main(): their argument lists ask the
// kernel tables, which other files' static initializers fill in (calling
// them from this file's static initialization crashed).
void register_matmul_benchmarks() {
  benchmark::RegisterBenchmark("Gemv", BM_Matmul)->Apply(gemv_args)->Unit(benchmark::kMicrosecond)->UseRealTime();
  benchmark::RegisterBenchmark("Gemm", BM_Matmul)->Apply(gemm_args)->Unit(benchmark::kMillisecond)->UseRealTime();
}

// One Gemma 3 270M layer's projections for a 500-token prefill chunk (hidden
// 640, 4 query heads and 1 KV head of 256, FFN 2048), with the types of the
// Q4_K_M file. Times 18 for the model; plus the attention below.
void BM_Gemma3LayerProjections(benchmark::State& state) {
  ThreadPool& pool = pool_with(static_cast<int>(state.range(0)));
  const int64_t tokens = 500;
  struct Proj {
    TensorType type;
    int64_t rows, cols;
  };
  // K-quants need cols % 256 == 0, so the 640-column matrices fall back to
  // Q5_0 / Q8_0 in that file.
  const Proj projs[] = {{TensorType::Q5_0, 1024, 640}, {TensorType::Q5_0, 256, 640},  {TensorType::Q8_0, 256, 640},
                        {TensorType::Q4_K, 640, 1024}, {TensorType::Q5_0, 2048, 640}, {TensorType::Q5_0, 2048, 640},
                        {TensorType::Q6_K, 640, 2048}};
  std::vector<Matrix> ws;
  double flops = 0;
  for (const Proj& p : projs) ws.emplace_back(p.type, p.rows, p.cols), flops += 2.0 * p.rows * p.cols * tokens;
  const auto x = gaussian(tokens * 2048, 2);
  std::vector<float> y(static_cast<size_t>(tokens * 2048));
  for (auto _ : state) {
    for (const Matrix& w : ws) matmul(w.view, x.data(), tokens, y.data(), pool);
    benchmark::DoNotOptimize(y.data());
  }
  state.counters["FLOP/s"] = benchmark::Counter(flops * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Gemma3LayerProjections)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

// Causal attention of a 500-token prefill, 4 query heads sharing 1 KV head.
void BM_Gemma3Attention(benchmark::State& state) {
  ThreadPool& pool = pool_with(static_cast<int>(state.range(0)));
  const int64_t tokens = 500;
  const AttentionShape shape{4, 1, 256, 1.0f / 16.0f, state.range(1), 0.0f};
  const auto q = gaussian(tokens * 4 * 256, 3);
  const auto k = gaussian(tokens * 256, 4);
  const auto v = gaussian(tokens * 256, 5);
  std::vector<int64_t> pos(static_cast<size_t>(tokens));
  for (int64_t t = 0; t < tokens; ++t) pos[static_cast<size_t>(t)] = t;
  std::vector<float> out(q.size());
  for (auto _ : state) {
    attention(shape, q.data(), pos.data(), tokens, k.data(), v.data(), tokens, out.data(), pool);
    benchmark::DoNotOptimize(out.data());
  }
}
BENCHMARK(BM_Gemma3Attention)->Args({1, 0})->Args({2, 0})->Args({2, 512})->Unit(benchmark::kMillisecond)->UseRealTime();

// One decode token of a Gemma 3 global layer (4 query heads, 1 KV head of
// 256) over a paged F16 cache of `n_ctx` positions (blocks of 16), 2 threads,
// without and with the heavy-hitter policy's attention mass (kv_policy.h):
// the pair's ratio is the mass's cost in the attention kernel.
void BM_PagedDecodeAttentionMass(benchmark::State& state) {
  ThreadPool& pool = pool_with(2);
  const int64_t n_ctx = state.range(0);
  const bool mass = state.range(1) != 0;
  const AttentionShape shape{4, 1, 256, 1.0f / 16.0f, 0, 0.0f};
  const int64_t bs = 16, blocks = (n_ctx + bs - 1) / bs;
  std::vector<uint8_t> k(static_cast<size_t>(blocks * bs * 256 * 2)), v(k.size());
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  for (int64_t b = 0; b < blocks; ++b) table[static_cast<size_t>(b)] = static_cast<int32_t>(blocks - 1 - b);
  const PagedKv kv{k.data(), v.data(), kv::KvDtype::F16, bs, 256, blocks};
  const auto kf = gaussian(n_ctx * 256, 4), vf = gaussian(n_ctx * 256, 5);
  paged_kv_write(kv, table, 0, n_ctx, kf.data(), vf.data());
  const auto q = gaussian(4 * 256, 3);
  const int64_t pos = n_ctx - 1;
  std::vector<float> out(q.size()), key_mass(static_cast<size_t>(n_ctx), 0.0f);
  for (auto _ : state) {
    paged_attention(shape, q.data(), &pos, 1, kv, table, n_ctx, out.data(), pool, 0, mass ? key_mass.data() : nullptr);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetLabel(mass ? "with mass" : "plain");
}
BENCHMARK(BM_PagedDecodeAttentionMass)
    ->Args({4096, 0})
    ->Args({4096, 1})
    ->Args({1024, 0})
    ->Args({1024, 1})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace

void register_kernel_benchmarks() { register_matmul_benchmarks(); }

}  // namespace tokenmill::kernels

int main(int argc, char** argv) {
  tokenmill::kernels::register_kernel_benchmarks();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
