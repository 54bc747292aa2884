// The messages the root rank broadcasts to the others (dist/mpi_runtime.h)
// as flat int64 arrays: each forward pass (block copies since the last
// one, chunks with their block tables, skipped layers), the KV pool sizes
// once at start, and the stop. Pure functions, so the format is tested
// without MPI.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/block_table.h"
#include "model/model.h"

namespace tokenmill::dist {

enum class MessageKind : int64_t { kStop = 0, kForward = 1, kPoolSizes = 2 };

std::vector<int64_t> encode_forward(std::span<const std::vector<kv::BlockCopy>> copies,
                                    std::span<const model::SequenceChunk> chunks, std::span<const uint8_t> skip_layers);
std::vector<int64_t> encode_pool_sizes(std::span<const int64_t> blocks);
std::vector<int64_t> encode_stop();

MessageKind message_kind(std::span<const int64_t> message);

// A decoded forward pass; `chunks` view the decoded tokens and tables, so
// it must not be copied (moves keep the views valid).
struct DecodedStep {
  std::vector<std::vector<kv::BlockCopy>> copies;  // per pool
  std::vector<std::vector<int32_t>> tokens;        // per chunk
  std::vector<std::vector<int32_t>> blocks;        // [chunk * pools + pool]
  std::vector<model::ChunkTable> tables;           // [chunk * pools + pool]
  std::vector<model::SequenceChunk> chunks;
  std::vector<uint8_t> skip_layers;

  DecodedStep() = default;
  DecodedStep(DecodedStep&&) = default;
  DecodedStep& operator=(DecodedStep&&) = default;
  DecodedStep(const DecodedStep&) = delete;
  DecodedStep& operator=(const DecodedStep&) = delete;
};

// Throws Error for a message that is not a well-formed forward pass.
DecodedStep decode_forward(std::span<const int64_t> message);
std::vector<int64_t> decode_pool_sizes(std::span<const int64_t> message);

}  // namespace tokenmill::dist
