// `bench comm-card`: two `bench serve` reports of the same traffic shape,
// taken before and after a change of parallel layout (e.g. 1 rank -> tp2),
// -> a `parallel_comm_budget` card (YAML): per-step compute and
// communication time, the communication share, synchronisations, bytes and
// link rate on both sides, the cap, and a decision.
//
// The decision rule:
//  0. Reports that are not bench reports, or ran different traffic shapes
//     (spec_hash), are refused with an Error: no card.
//  1. not_measured            — either side lacks the step-phase figures
//                               (server.parallel from tokenmill's /metrics)
//                               for the phase, or ran no step of it;
//  2. reject_more_parallelism — after's communication share > the cap;
//  3. accept_parallelism      — otherwise.
// The figures come from the report cell's server.parallel (step_phases.h):
// compute_ms, communication_ms and communication_share are of the chosen
// step kind; syncs_per_step, comm_bytes_per_step and link_gbps are over all
// steps, because the server's comm counters are not split by step kind.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace tokenmill::bench {

struct CommCardInput {
  nlohmann::json before;  // bench serve reports
  nlohmann::json after;
  std::string phase = "decode";     // decode, prefill or all
  std::string cell;                 // report cell key; "" = overall
  std::optional<double> max_share;  // nullopt: before's gates.max_communication_share if set, else 0.30
  std::string topology;             // "": named from after's layout
  std::string id;                   // "": pcb_<date>_<6 hex digits of the inputs' hash>
  std::string date;                 // YYYYMMDD for the default id
};

struct CommCard {
  std::string id, topology, phase, cell, spec_hash;
  nlohmann::json before, after;  // figures (kCardFields order in the YAML); null where missing
  double max_share = 0.30;
  std::string decision, reason, next;
};

// Throws Error for a bad phase or cap, non-reports, a missing cell or
// different traffic shapes.
CommCard make_comm_card(const CommCardInput& in);

// The card as YAML, `parallel_comm_budget: <id>` at the top.
std::string comm_card_yaml(const CommCard& card);

// One line for the terminal: phase, shares, cap and decision (and why when
// not measured).
std::string comm_card_summary(const CommCard& card);

}  // namespace tokenmill::bench
