// Cutting one step's chunks into micro-batches for pipeline parallelism:
// consecutive runs of the flat token batch, near-equal in tokens, so that
// stage s can work on micro-batch m while stage s + 1 works on m - 1.
//
// A chunk cut in two stays correct: its first part is computed in every
// layer of a stage (and its K/V written) before the second part attends,
// because each stage runs the micro-batches in order. Logits rows keep
// their order: a kLast chunk's row moves to the part holding its last
// token (the other parts get kNone); a kAll chunk's parts keep kAll.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "model/model.h"

namespace tokenmill::model {

// At most `parts` micro-batches (fewer when the step has fewer tokens), none
// empty. The result's chunks view the same tokens and tables as `chunks`.
std::vector<std::vector<SequenceChunk>> split_microbatches(std::span<const SequenceChunk> chunks, int64_t parts);

}  // namespace tokenmill::model
