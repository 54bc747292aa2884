#include "bench/comm_card.h"

#include <cmath>

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include "bench/step_phases.h"
#include "bench/ticket.h"
#include "bench/traffic_spec.h"
#include "util/error.h"

namespace tokenmill::bench {
namespace {

using nlohmann::json;

constexpr double kDefaultMaxShare = 0.30;

// The per-side figures in the order the card lists them.
constexpr const char* kCardFields[] = {
    "steps",          "compute_ms",          "communication_ms", "step_ms", "communication_share",
    "syncs_per_step", "comm_bytes_per_step", "link_gbps"};

json number_at(const json& obj, const char* key) {
  return obj.is_object() && obj.contains(key) && obj[key].is_number() ? obj[key] : json(nullptr);
}

// One side's figures for `phase`, and why they are missing ("" when they
// are all there).
json side_figures(const json& cell, const std::string& phase, const char* side, std::string& missing) {
  json out = json::object();
  for (const char* k : kCardFields) out[k] = nullptr;
  out["layout"] = nullptr;
  const json& server = cell.contains("server") ? cell["server"] : json();
  const json& parallel = server.is_object() && server.contains("parallel") ? server["parallel"] : json();
  if (!parallel.is_object()) {
    missing = fmt::format(
        "the {} report has no step-phase figures (server.parallel): its server does not export "
        "tokenmill_step_phase_seconds",
        side);
    return out;
  }
  out["layout"] = parallel.value("layout", json());
  const json& kind = parallel.value(phase, json());
  const json& all = parallel.value("all", json());
  if (!kind.is_object()) {
    missing = fmt::format("the {} report ran no {} steps", side, phase);
    return out;
  }
  for (const char* k : {"steps", "compute_ms", "communication_ms", "step_ms", "communication_share"}) {
    out[k] = number_at(kind, k);
  }
  for (const char* k : {"syncs_per_step", "comm_bytes_per_step", "link_gbps"}) out[k] = number_at(all, k);
  if (!out["communication_share"].is_number()) {
    missing = fmt::format("the {} report recorded no {} step time", side, phase);
  }
  return out;
}

double resolve_cap(const CommCardInput& in) {
  double cap = kDefaultMaxShare;
  if (in.max_share) {
    cap = *in.max_share;
  } else if (const double g = gates_from_report(in.before).max_communication_share; g > 0) {
    cap = g;
  }
  if (!(cap > 0 && cap <= 1)) fail("--max-share must be in (0, 1], got {}", cap);
  return cap;
}

std::string default_id(const CommCardInput& in) {
  const uint64_t h = fnv1a64(in.before.dump() + "\n" + in.after.dump() + "\n" + in.phase + "\n" + in.cell);
  return fmt::format("pcb_{}_{:06x}", in.date, h >> 40);
}

std::string layout_name(const json& figures, const char* fallback) {
  const std::string name = topology_name(figures["layout"]);
  return name.empty() ? fallback : name;
}

void decide(CommCard& c, const std::string& missing) {
  const std::string before_topo = layout_name(c.before, "the before layout");
  // An explicit --topology names the after side better than its layout labels.
  const std::string after_topo = c.topology != "unknown" ? c.topology : "the after layout";
  if (!missing.empty()) {
    c.decision = "not_measured";
    c.reason = missing;
    c.next =
        "run both layouts against a tokenmill server (it exports tokenmill_step_phase_seconds) under the same "
        "traffic, then build the card again";
    return;
  }
  const double b = c.before["communication_share"].get<double>();
  const double a = c.after["communication_share"].get<double>();
  const std::string shares = fmt::format("{} communication share {:.1f}% -> {:.1f}% (cap {:.1f}%)", c.phase, 100 * b,
                                         100 * a, 100 * c.max_share);
  if (a > c.max_share) {
    c.decision = "reject_more_parallelism";
    c.reason = shares + ": communication already exceeds the budget";
    c.next = fmt::format(
        "reduce synchronisations per step or batch more before adding ranks; compare {} vs {} under the same "
        "traffic",
        before_topo, after_topo);
  } else {
    c.decision = "accept_parallelism";
    c.reason = shares + ": within the budget";
    c.next = fmt::format(
        "keep {}; check the share again when traffic or batch size changes, and card the next layout under the "
        "same traffic before adding ranks",
        after_topo);
  }
}

void emit_figures(YAML::Emitter& e, const json& figures) {
  e << YAML::BeginMap;
  for (const char* k : kCardFields) {
    e << YAML::Key << k << YAML::Value;
    const json& v = figures[k];
    if (v.is_number())
      e << v.get<double>();
    else
      e << YAML::Null;
  }
  e << YAML::Key << "layout" << YAML::Value;
  const json& layout = figures["layout"];
  if (!layout.is_object()) {
    e << YAML::Null;
  } else {
    e << YAML::Flow << YAML::BeginMap;
    for (const auto& [k, v] : layout.items()) {
      e << YAML::Key << k << YAML::Value;
      if (v.is_number_integer())
        e << v.get<int64_t>();
      else
        e << (v.is_string() ? v.get<std::string>() : v.dump());
    }
    e << YAML::EndMap;
  }
  e << YAML::EndMap;
}

}  // namespace

CommCard make_comm_card(const CommCardInput& in) {
  if (in.phase != "decode" && in.phase != "prefill" && in.phase != "all") {
    fail("--phase must be decode, prefill or all, got '{}'", in.phase);
  }
  check_bench_report(in.before, "before");
  check_bench_report(in.after, "after");
  check_same_traffic(in.before, in.after);
  CommCard c;
  c.phase = in.phase;
  c.cell = in.cell.empty() ? "overall" : in.cell;
  c.spec_hash = in.before["spec_hash"].get<std::string>();
  c.max_share = resolve_cap(in);
  std::string missing_before, missing_after;
  c.before = side_figures(report_cell(in.before, in.cell, "before"), in.phase, "before", missing_before);
  c.after = side_figures(report_cell(in.after, in.cell, "after"), in.phase, "after", missing_after);
  c.id = in.id.empty() ? default_id(in) : in.id;
  c.topology = in.topology.empty() ? layout_name(c.after, "unknown") : in.topology;
  decide(c, missing_after.empty() ? missing_before : missing_after);
  return c;
}

std::string comm_card_yaml(const CommCard& c) {
  YAML::Emitter e;
  e.SetDoublePrecision(6);
  e << YAML::BeginMap;
  e << YAML::Key << "parallel_comm_budget" << YAML::Value << c.id;
  e << YAML::Key << "topology" << YAML::Value << c.topology;
  e << YAML::Key << "phase" << YAML::Value << c.phase;
  e << YAML::Key << "cell" << YAML::Value << c.cell;
  e << YAML::Key << "spec_hash" << YAML::Value << YAML::DoubleQuoted << c.spec_hash;
  e << YAML::Key << "before" << YAML::Value;
  emit_figures(e, c.before);
  e << YAML::Key << "after" << YAML::Value;
  emit_figures(e, c.after);
  e << YAML::Key << "gate" << YAML::Value << YAML::BeginMap << YAML::Key << "max_communication_share" << YAML::Value
    << c.max_share << YAML::EndMap;
  e << YAML::Key << "decision" << YAML::Value << c.decision;
  e << YAML::Key << "reason" << YAML::Value << YAML::DoubleQuoted << c.reason;
  e << YAML::Key << "next" << YAML::Value << YAML::DoubleQuoted << c.next;
  e << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

std::string comm_card_summary(const CommCard& c) {
  return fmt::format("{} ({}, {}): {} — {}", c.id, c.topology, c.cell, c.decision, c.reason);
}

}  // namespace tokenmill::bench
