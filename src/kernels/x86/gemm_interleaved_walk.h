// The walk of the products with weights interleaved at load (interleave.h),
// shared by their AVX2 and AVX-512 micro-kernels (gemm_interleaved_avx2.cc,
// gemm_interleaved_avx512.cc): in which order the 16-row groups, column
// chunks and token tiles are visited, and what each micro-kernel call
// prefetches. Included only by those files; internal linkage (see
// dispatch.h).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/gemm.h"
#include "kernels/interleave.h"

namespace tokenmill::kernels {
namespace {  // NOLINT(build/namespaces): internal linkage on purpose

// Where one micro-kernel call reads and writes.
struct InterleavedArgs {
  const uint8_t* w;  // the group's first unit (Q4_0/Q8_0: block, K-quants: super-block) of the chunk
  int64_t num_units;
  const int16_t* q;  // token t: q + t * q_stride, at the chunk's first column
  int64_t q_stride;
  const float* d;  // token t, 32-column block b of the chunk: d[t * act_blocks + b]
  const float* s32;
  int64_t act_blocks;
  float* y;  // token t: y + t * y_stride, at the group's first row
  int64_t y_stride;
  int64_t valid;     // rows of the group that exist (16 but for the last group)
  int64_t prefetch;  // bytes from a unit to the one whose lines it prefetches
  bool once;         // one token tile (decode): each weight line is read once
};

// Activations (int16) up to this size are walked group by group.
constexpr int64_t kGroupOrderActBytes = int64_t{256} << 10;

// Prompts longer than this run in blocks of it, each over every weight: a
// column chunk of the whole prompt's activations (tokens x 256 x 2 bytes)
// would not stay in L2 while the groups pass over it. Blocks of 128 and 256
// were about equally fast, both well ahead of no blocking at long prompts
// (docs/benchmarks.md, kernel tuning).
constexpr int64_t kInterleavedTokenBlock = 256;

// Prefetches the `bytes` at p into L1, a cache line at a time.
inline void prefetch_lines(const uint8_t* p, int64_t bytes) {
  for (int64_t line = 0; line < bytes; line += 64) _mm_prefetch(reinterpret_cast<const char*>(p + line), _MM_HINT_T0);
}

// Calls micro(args, tokens, first_chunk, partial_group) over every tile of
// rows [row_begin, row_end) x num_tokens tokens (at most 256 at a time),
// for units of kUnitCols columns and kUnitBytes bytes, tiles of up to
// kTokens tokens; one tile (decode) prefetches kDecodePrefetchBytes ahead
// along the row (at least one unit).
template <int64_t kTokens, int64_t kUnitCols, int64_t kUnitBytes, int64_t kDecodePrefetchBytes, class Micro>
inline void walk_interleaved_block(const uint8_t* packed, int64_t rows, int64_t cols, int64_t row_begin,
                                   int64_t row_end, const QuantizedActs& a, int64_t num_tokens, float* y,
                                   int64_t y_stride, const Micro& micro) {
  const int64_t units = cols / kUnitCols;
  const int64_t act_blocks = cols / 32;
  const int64_t group_bytes = units * kUnitBytes;
  const int64_t g0 = row_begin / kInterleaveRows;
  const int64_t g1 = (row_end + kInterleaveRows - 1) / kInterleaveRows;
  // Column chunks of 256 keep a group's weights in L1 while several token
  // tiles pass over them; one tile (decode) reads each group once, front to
  // back.
  const int64_t chunk = num_tokens <= kTokens ? units : kPackChunk / kUnitCols;
  // Few tokens (batched decode): the weights come from DRAM once per call
  // and the first tile over each chunk waits for them, so walk them in
  // memory order, group after group; the activations, read once per group,
  // stay in L2. Many tokens (prefill): chunk after chunk, so a chunk's
  // activations stay in L2 while every group passes over them.
  const bool group_walk = num_tokens * cols * static_cast<int64_t>(sizeof(int16_t)) <= kGroupOrderActBytes;
  // What the kernels prefetch, a unit at a time, is what comes next: one
  // tile (decode) a few units further along the row; several tiles walking
  // group by group the next chunk, a whole chunk's work ahead, so the first
  // tile over it finds it loaded; chunk by chunk the same unit of the next
  // group.
  constexpr int64_t kDecodePrefetchUnits =
      kDecodePrefetchBytes / kUnitBytes > 0 ? kDecodePrefetchBytes / kUnitBytes : 1;
  const int64_t prefetch = num_tokens <= kTokens ? kDecodePrefetchUnits * kUnitBytes
                           : group_walk          ? chunk * kUnitBytes
                                                 : group_bytes;
  const auto run = [&](int64_t g, int64_t c0) {
    const int64_t nu = units - c0 < chunk ? units - c0 : chunk;
    const int64_t col0 = c0 * kUnitCols;
    const int64_t r0 = g * kInterleaveRows;
    const int64_t valid = rows - r0 < kInterleaveRows ? rows - r0 : kInterleaveRows;
    for (int64_t t0 = 0; t0 < num_tokens; t0 += kTokens) {
      const int64_t nt = num_tokens - t0 < kTokens ? num_tokens - t0 : kTokens;
      const InterleavedArgs m{packed + g * group_bytes + c0 * kUnitBytes,
                              nu,
                              a.qs + t0 * cols + col0,
                              cols,
                              a.d + t0 * act_blocks + col0 / 32,
                              a.s32 + t0 * act_blocks + col0 / 32,
                              act_blocks,
                              y + t0 * y_stride + r0,
                              y_stride,
                              valid,
                              prefetch,
                              num_tokens <= kTokens};
      micro(m, nt, c0 == 0, valid < kInterleaveRows);
    }
  };
  if (group_walk) {
    for (int64_t g = g0; g < g1; ++g) {
      for (int64_t c0 = 0; c0 < units; c0 += chunk) run(g, c0);
    }
  } else {
    for (int64_t c0 = 0; c0 < units; c0 += chunk) {
      for (int64_t g = g0; g < g1; ++g) run(g, c0);
    }
  }
}

// walk_interleaved_block over the tokens in blocks of kInterleavedTokenBlock.
template <int64_t kTokens, int64_t kUnitCols, int64_t kUnitBytes, int64_t kDecodePrefetchBytes, class Micro>
inline void walk_interleaved(const uint8_t* packed, int64_t rows, int64_t cols, int64_t row_begin, int64_t row_end,
                             const QuantizedActs& a, int64_t num_tokens, float* y, int64_t y_stride,
                             const Micro& micro) {
  const int64_t blocks = cols / 32;
  for (int64_t t0 = 0; t0 < num_tokens; t0 += kInterleavedTokenBlock) {
    const int64_t nt = num_tokens - t0 < kInterleavedTokenBlock ? num_tokens - t0 : kInterleavedTokenBlock;
    const QuantizedActs part{a.qs + t0 * cols, a.d + t0 * blocks, a.s32 + t0 * blocks,
                             a.s16 == nullptr ? nullptr : a.s16 + t0 * 2 * blocks, a.cols};
    walk_interleaved_block<kTokens, kUnitCols, kUnitBytes, kDecodePrefetchBytes>(
        packed, rows, cols, row_begin, row_end, part, nt, y + t0 * y_stride, y_stride, micro);
  }
}

// The bytes of one unit of each interleaved layout, and its columns.
template <gguf::TensorType kType>
constexpr int64_t kInterleavedUnitBytes = kType == gguf::TensorType::Q4_0   ? kQ4_0x16BlockBytes
                                          : kType == gguf::TensorType::Q5_0 ? kQ5_0x16BlockBytes
                                          : kType == gguf::TensorType::Q8_0 ? kQ8_0x16BlockBytes
                                          : kType == gguf::TensorType::Q4_K ? kQ4_Kx16BlockBytes
                                                                            : kQ6_Kx16BlockBytes;
template <gguf::TensorType kType>
constexpr int64_t kInterleavedUnitCols =
    kType == gguf::TensorType::Q4_0 || kType == gguf::TensorType::Q5_0 || kType == gguf::TensorType::Q8_0 ? 32 : 256;

}  // namespace
}  // namespace tokenmill::kernels
