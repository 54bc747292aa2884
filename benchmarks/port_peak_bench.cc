// What one core can do at most, the yardstick for the kernels' GFLOP/s
// (kernels_bench Gemm/Gemv rows): independent chains of one instruction, or
// of two interleaved, in registers, one thread. Reports instructions per
// second and multiply-adds per second (GMAC/s: int16 madd 16 per
// instruction, float FMA 8, int8 maddubs 32 byte products, which still need
// a second instruction to reach int32).
//
// Why pairs: whether two instructions share an execution port decides
// which kernels can outrun which. On a Zen 2 core (EPYC, family 23 model 49)
// vpmaddwd runs one per cycle and vpmaddubsw shares its port (together: one of
// either per cycle), while FMAs run two per cycle and one of them beside
// each vpmaddwd (docs/benchmarks.md, "The multiply port").
//
//   kernels_bench --benchmark_filter=Peak
#include <benchmark/benchmark.h>

#if defined(__x86_64__)
#include <immintrin.h>

#include <cstdint>

namespace tokenmill::benchmarks {
namespace {

// Twelve independent chains: enough to cover the latencies (3-5 cycles) at
// two instructions per cycle, few enough for the 16 vector registers.
#define TM_CHAINS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
// Keep the chains in registers and live, so nothing is folded or spilled.
#define TM_KEEP6(v, f)                                                                                               \
  __asm__ volatile(""                                                                                                \
                   : "+x"(v##0), "+x"(f##1), "+x"(v##2), "+x"(f##3), "+x"(v##4), "+x"(f##5), "+x"(v##6), "+x"(f##7), \
                     "+x"(v##8), "+x"(f##9), "+x"(v##10), "+x"(f##11))
#define TM_KEEP(v)                                                                                                   \
  __asm__ volatile(""                                                                                                \
                   : "+x"(v##0), "+x"(v##1), "+x"(v##2), "+x"(v##3), "+x"(v##4), "+x"(v##5), "+x"(v##6), "+x"(v##7), \
                     "+x"(v##8), "+x"(v##9), "+x"(v##10), "+x"(v##11))

enum class Op { kMadd, kMaddubs, kFma, kMaddAndMaddubs, kMaddAndFma };

// Runs `loops` rounds of 12 instructions on 12 registers (int chains v, float
// chains f: six of each for the mixed ops); returns something that depends
// on every result.
template <Op kOp>
__attribute__((target("avx2,fma"), noinline)) int run_chains(int64_t loops) {
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256 mul = _mm256_set1_ps(0.999f), add = _mm256_set1_ps(0.001f);
#define TM_INIT(i) __m256i v##i = _mm256_set1_epi32(i + 1);
  TM_CHAINS(TM_INIT)
#define TM_INITF(i) __m256 f##i = _mm256_set1_ps(0.5f * i);
  TM_CHAINS(TM_INITF)
  // One step of a chain. Macros, not lambdas: a lambda would not inherit
  // the target attribute.
#define TM_STEP_MADD(v) v = _mm256_madd_epi16(v, ones)
#define TM_STEP_MADDUBS(v) v = _mm256_maddubs_epi16(v, ones)
#define TM_STEP_FMA(f) f = _mm256_fmadd_ps(f, mul, add)
  for (int64_t n = 0; n < loops; ++n) {
    if constexpr (kOp == Op::kMadd) {
#define TM_MADD(i) TM_STEP_MADD(v##i);
      TM_CHAINS(TM_MADD)
      TM_KEEP(v);
    } else if constexpr (kOp == Op::kMaddubs) {
#define TM_MADDUBS(i) TM_STEP_MADDUBS(v##i);
      TM_CHAINS(TM_MADDUBS)
      TM_KEEP(v);
    } else if constexpr (kOp == Op::kFma) {
#define TM_FMA(i) TM_STEP_FMA(f##i);
      TM_CHAINS(TM_FMA)
      TM_KEEP(f);
    } else if constexpr (kOp == Op::kMaddAndMaddubs) {
#define TM_MADD_AND_MADDUBS(i, j) TM_STEP_MADD(v##i), TM_STEP_MADDUBS(v##j)
      TM_MADD_AND_MADDUBS(0, 1);
      TM_MADD_AND_MADDUBS(2, 3);
      TM_MADD_AND_MADDUBS(4, 5);
      TM_MADD_AND_MADDUBS(6, 7);
      TM_MADD_AND_MADDUBS(8, 9);
      TM_MADD_AND_MADDUBS(10, 11);
      TM_KEEP(v);
    } else {
#define TM_MADD_AND_FMA(i, j) TM_STEP_MADD(v##i), TM_STEP_FMA(f##j)
      TM_MADD_AND_FMA(0, 1);
      TM_MADD_AND_FMA(2, 3);
      TM_MADD_AND_FMA(4, 5);
      TM_MADD_AND_FMA(6, 7);
      TM_MADD_AND_FMA(8, 9);
      TM_MADD_AND_FMA(10, 11);
      TM_KEEP6(v, f);
    }
  }
  int sink = 0;
#define TM_SINK(i) sink += _mm256_extract_epi32(v##i, 0) + static_cast<int>(_mm256_cvtss_f32(f##i));
  TM_CHAINS(TM_SINK)
  return sink;
}
#undef TM_STEP_MADD
#undef TM_STEP_MADDUBS
#undef TM_STEP_FMA

// Multiply-adds per instruction of each op, and the op's label.
struct OpInfo {
  int (*run)(int64_t loops);
  double macs_per_instruction;  // averaged over the instructions the op issues
  const char* label;
};
const OpInfo kOps[] = {
    {run_chains<Op::kMadd>, 16, "vpmaddwd (int16 madd)"},
    {run_chains<Op::kMaddubs>, 32, "vpmaddubsw (int8 maddubs)"},
    {run_chains<Op::kFma>, 8, "vfmadd (float FMA)"},
    {run_chains<Op::kMaddAndMaddubs>, 24, "vpmaddwd + vpmaddubsw"},
    {run_chains<Op::kMaddAndFma>, 12, "vpmaddwd + vfmadd"},
};

void BM_Peak(benchmark::State& state) {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    state.SkipWithError("needs AVX2 and FMA");
    return;
  }
  const OpInfo& info = kOps[state.range(0)];
  constexpr int64_t kLoops = 1 << 20;
  for (auto _ : state) benchmark::DoNotOptimize(info.run(kLoops));
  const double instructions = 12.0 * kLoops * static_cast<double>(state.iterations());
  state.SetLabel(info.label);
  state.counters["G_instr/s"] = benchmark::Counter(instructions * 1e-9, benchmark::Counter::kIsRate);
  state.counters["GMAC/s"] =
      benchmark::Counter(instructions * info.macs_per_instruction * 1e-9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Peak)->Name("Peak")->DenseRange(0, 4)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace tokenmill::benchmarks
#endif
