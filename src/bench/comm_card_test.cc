#include "bench/comm_card.h"

#include <gtest/gtest.h>

#include <yaml-cpp/yaml.h>

#include "bench/step_phases.h"
#include "util/error.h"

namespace tokenmill::bench {
namespace {

using nlohmann::json;

// One side's decode steps: compute and communication ms per step on `ranks`
// ranks (tp = ranks); ranks 0: a server without the phase metric.
struct Side {
  int ranks;
  double compute_ms, communication_ms;
};

json report(const std::string& hash, const Side& side, double gate_cap = 0) {
  json server = {{"communication_share", nullptr}, {"parallel", nullptr}};
  if (side.ranks > 0) {
    StepPhaseCounters c;
    c.steps[1] = 100;
    c.seconds[1][2] = side.compute_ms / 10;  // 100 steps, ms -> s
    c.seconds[1][kCommunicationPhase] = side.communication_ms / 10;
    c.steps[0] = 4;
    c.seconds[0][2] = 0.4;
    c.comm_bytes = side.ranks > 1 ? 104 * 2e5 : 0;
    c.comm_syncs = side.ranks > 1 ? 104 * 48 : 0;
    const std::string n = std::to_string(side.ranks);
    c.layout = {{"tp", n}, {"pp", "1"}, {"ranks", n}};
    server["communication_share"] = communication_share(c);
    server["parallel"] = parallel_json(c);
  }
  return {{"format", "tokenmill-bench-report/1"},
          {"spec_hash", hash},
          {"traffic_shape", {{"rate", hash == "aaaa" ? 1.0 : 2.0}, {"concurrency", {8}}}},
          {"gates", {{"max_communication_share", gate_cap}}},
          {"overall", {{"key", "overall"}, {"server", server}}},
          {"cells", json::array({{{"key", "c8_h0_all"}, {"server", server}}})}};
}

CommCardInput input(const json& before, const json& after) {
  CommCardInput in;
  in.before = before;
  in.after = after;
  in.date = "20260820";
  return in;
}

TEST(CommCard, DecisionTable) {
  struct Case {
    const char* name;
    Side before, after;
    std::string phase;
    std::optional<double> cap;
    const char* decision;
  };
  const Case cases[] = {
      {"tp2 within the cap", {1, 24, 0}, {2, 13, 4}, "decode", 0.30, "accept_parallelism"},            // 23.5%
      {"the seed's card", {2, 18.4, 6.1}, {4, 15.2, 8.7}, "decode", 0.30, "reject_more_parallelism"},  // 36.4%
      {"at the cap passes", {1, 20, 0}, {2, 7.5, 2.5}, "decode", 0.25, "accept_parallelism"},
      {"a tighter cap", {1, 24, 0}, {2, 13, 4}, "decode", 0.20, "reject_more_parallelism"},
      {"all steps", {1, 24, 0}, {2, 13, 4}, "all", 0.30, "accept_parallelism"},
      {"before not tokenmill", {0, 0, 0}, {2, 13, 4}, "decode", 0.30, "not_measured"},
      {"after not tokenmill", {1, 24, 0}, {0, 0, 0}, "decode", 0.30, "not_measured"},
  };
  for (const Case& c : cases) {
    CommCardInput in = input(report("aaaa", c.before), report("aaaa", c.after));
    in.phase = c.phase;
    in.max_share = c.cap;
    const CommCard card = make_comm_card(in);
    EXPECT_EQ(card.decision, c.decision) << c.name << ": " << card.reason;
    EXPECT_FALSE(card.next.empty()) << c.name;
  }
}

TEST(CommCard, FiguresAndYamlHaveTheDesignShape) {
  CommCardInput in = input(report("aaaa", {2, 18.4, 6.1}), report("aaaa", {4, 15.2, 8.7}));
  in.max_share = 0.30;
  const CommCard card = make_comm_card(in);
  EXPECT_EQ(card.topology, "4ranks_tp4");
  EXPECT_EQ(card.id.substr(0, 13), "pcb_20260820_");
  EXPECT_EQ(card.id.size(), 19u);
  EXPECT_EQ(make_comm_card(in).id, card.id);  // the same inputs, the same id
  EXPECT_NE(card.next.find("2ranks_tp2 vs 4ranks_tp4"), std::string::npos) << card.next;
  const YAML::Node y = YAML::Load(comm_card_yaml(card));
  EXPECT_EQ(y["parallel_comm_budget"].as<std::string>(), card.id);
  EXPECT_EQ(y["phase"].as<std::string>(), "decode");
  EXPECT_NEAR(y["before"]["compute_ms"].as<double>(), 18.4, 1e-9);
  EXPECT_NEAR(y["before"]["communication_ms"].as<double>(), 6.1, 1e-9);
  EXPECT_NEAR(y["before"]["communication_share"].as<double>(), 0.249, 5e-4);
  EXPECT_NEAR(y["after"]["communication_share"].as<double>(), 0.364, 5e-4);
  EXPECT_NEAR(y["after"]["syncs_per_step"].as<double>(), 48, 1e-9);  // over all steps
  EXPECT_NEAR(y["after"]["comm_bytes_per_step"].as<double>(), 2e5, 1e-6);
  EXPECT_TRUE(y["after"]["link_gbps"].IsScalar());
  EXPECT_EQ(y["after"]["layout"]["tp"].as<int>(), 4);
  EXPECT_DOUBLE_EQ(y["gate"]["max_communication_share"].as<double>(), 0.30);
  EXPECT_EQ(y["decision"].as<std::string>(), "reject_more_parallelism");
  EXPECT_FALSE(y["next"].as<std::string>().empty());
  const std::string line = comm_card_summary(card);
  EXPECT_NE(line.find("24.9% -> 36.4% (cap 30.0%)"), std::string::npos) << line;
  in.id = "pcb_20260820_91";
  in.topology = "4xa100_nvlink";
  const CommCard named = make_comm_card(in);
  EXPECT_EQ(named.id, "pcb_20260820_91");
  EXPECT_EQ(named.topology, "4xa100_nvlink");
}

TEST(CommCard, NotMeasuredSaysWhy) {
  CommCardInput in = input(report("aaaa", {1, 24, 0}), report("aaaa", {0, 0, 0}));
  const CommCard card = make_comm_card(in);
  EXPECT_EQ(card.decision, "not_measured");
  EXPECT_NE(card.reason.find("after report has no step-phase figures"), std::string::npos) << card.reason;
  EXPECT_NE(comm_card_summary(card).find("not_measured"), std::string::npos);
  EXPECT_EQ(card.topology, "unknown");
  const YAML::Node y = YAML::Load(comm_card_yaml(card));
  EXPECT_TRUE(y["after"]["communication_share"].IsNull());
  // A phase the run never reached (no prefill steps) is not measured either.
  json no_prefill = report("aaaa", {2, 13, 4});
  no_prefill["overall"]["server"]["parallel"]["prefill"] = nullptr;
  in = input(report("aaaa", {1, 24, 0}), no_prefill);
  in.phase = "prefill";
  EXPECT_EQ(make_comm_card(in).decision, "not_measured");
  EXPECT_NE(make_comm_card(in).reason.find("ran no prefill steps"), std::string::npos);
}

TEST(CommCard, CapFromTheSpecGatesAndCellChoice) {
  CommCardInput in = input(report("aaaa", {1, 24, 0}, 0.2), report("aaaa", {2, 13, 4}));
  EXPECT_DOUBLE_EQ(make_comm_card(in).max_share, 0.2);  // the before spec's gate
  EXPECT_EQ(make_comm_card(in).decision, "reject_more_parallelism");
  in.before = report("aaaa", {1, 24, 0});
  EXPECT_DOUBLE_EQ(make_comm_card(in).max_share, 0.30);  // the default
  in.cell = "c8_h0_all";
  EXPECT_EQ(make_comm_card(in).cell, "c8_h0_all");
  in.cell = "c99_h0_all";
  EXPECT_THROW(make_comm_card(in), Error);
}

TEST(CommCard, RefusesDifferentTrafficAndBadInput) {
  try {
    make_comm_card(input(report("aaaa", {1, 24, 0}), report("bbbb", {2, 13, 4})));
    ADD_FAILURE() << "carded different traffic shapes";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("different traffic shapes"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("rate"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_comm_card(input(json{{"x", 1}}, report("aaaa", {2, 13, 4}))), Error);
  CommCardInput bad_phase = input(report("aaaa", {1, 24, 0}), report("aaaa", {2, 13, 4}));
  bad_phase.phase = "verify";
  EXPECT_THROW(make_comm_card(bad_phase), Error);
  CommCardInput bad_cap = input(report("aaaa", {1, 24, 0}), report("aaaa", {2, 13, 4}));
  bad_cap.max_share = 1.5;
  EXPECT_THROW(make_comm_card(bad_cap), Error);
}

}  // namespace
}  // namespace tokenmill::bench
