// Which layers a self-speculative draft leaves out (`--spec-skip-layers`):
// the target model with those layers skipped drafts for itself, sharing its
// weights and KV pools (Model::forward's skip_layers).
//
// Spelling: a list of layer indices and inclusive ranges ("4-11",
// "2,5,7-9"), or a fraction in (0, 1) ("0.5"): that share of the layers,
// rounded, as one run centred on the middle of the stack. The first and
// last layers shape the embedding and logit spaces and are never skipped
// by a fraction; a list may name them (it is the user's measured choice).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace tokenmill::spec {

// Throws Error when `spelling` is neither form (empty, a bad number, a
// reversed range); layer bounds are checked by resolve_skip_layers.
void check_skip_layers(std::string_view spelling);

// One flag per layer of an n_layer model, 1 = skipped. Throws Error naming
// the problem: a layer outside [0, n_layer), every layer skipped, none
// skipped.
std::vector<uint8_t> resolve_skip_layers(std::string_view spelling, int64_t n_layer);

}  // namespace tokenmill::spec
