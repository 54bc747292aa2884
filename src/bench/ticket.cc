#include "bench/ticket.h"

#include <cmath>
#include <fstream>

#include <yaml-cpp/yaml.h>

#include "util/error.h"

namespace tokenmill::bench {
namespace {

using nlohmann::json;

double get_num(const json& j, const json::json_pointer& p) {
  return j.contains(p) && j[p].is_number() ? j[p].get<double>() : NAN;
}

// The headline card of one cell of a report.
json card(const json& cell) {
  auto v = [&](const char* path) {
    const double x = get_num(cell, json::json_pointer(path));
    return std::isfinite(x) ? json(x) : json(nullptr);
  };
  return {{"ttft_ms", v("/latency_ms/ttft/p50")},       {"tpot_ms", v("/latency_ms/tpot/p50")},
          {"p99_ms", v("/latency_ms/e2e/p99")},         {"success_rate", v("/rates/success_rate")},
          {"cost_cents", v("/cost/per_success_cents")}, {"output_tok_per_s", v("/throughput/output_tok_per_s")}};
}

GateResult quality_gate(const CompareInput& in) {
  GateResult g{"quality_regression", "", ""};
  if (!in.quality_before || !in.quality_after) {
    g.status = "not_measured";
    g.detail = "no --quality-before/--quality-after given";
    return g;
  }
  const Quality& b = *in.quality_before;
  const Quality& a = *in.quality_after;
  if (b.metric != a.metric) fail("quality files measure different things ({} vs {})", b.metric, a.metric);
  const double loss = b.higher_is_better ? b.value - a.value : a.value - b.value;
  const double drop = loss / std::max(std::fabs(b.value), 1e-12);
  g.status = drop > in.gates.quality_regression + 1e-12 ? "fail" : "pass";
  g.detail = fmt::format("{} {:g} -> {:g} ({:+.2f}% quality; allowed drop {:.2f}%)", b.metric, b.value, a.value,
                         -100 * drop, 100 * in.gates.quality_regression);
  return g;
}

// p99 budget over the headline cell and every slice with enough requests.
GateResult p99_gate(const CompareInput& in, const json& before_cell, const json& after_cell) {
  GateResult g{"p99_budget", "pass", ""};
  const Gates& gates = in.gates;
  std::vector<std::string> breaches;
  int checked = 0;
  auto check = [&](const std::string& key, const json& b, const json& a) {
    const double pb = get_num(b, json::json_pointer("/latency_ms/e2e/p99"));
    const double pa = get_num(a, json::json_pointer("/latency_ms/e2e/p99"));
    if (!std::isfinite(pa)) return;
    const double budget = gates.p99_budget_ms > 0 ? gates.p99_budget_ms : pb * (1 + gates.p99_tolerance);
    if (!std::isfinite(budget)) return;
    ++checked;
    if (pa > budget) breaches.push_back(fmt::format("{} {:.0f} ms > {:.0f} ms", key, pa, budget));
  };
  check(in.cell.empty() ? "overall" : in.cell, before_cell, after_cell);
  for (const json& a : in.after["cells"]) {
    for (const json& b : in.before["cells"]) {
      if (b["key"] != a["key"]) continue;
      if (b["requests"]["ok"].get<int64_t>() < gates.min_slice_requests ||
          a["requests"]["ok"].get<int64_t>() < gates.min_slice_requests)
        continue;
      check(a["key"].get<std::string>(), b, a);
    }
  }
  if (checked == 0) {
    g.status = "not_measured";
    g.detail = "no p99 on both sides";
  } else if (!breaches.empty()) {
    g.status = "fail";
    g.detail = fmt::format("breached: {}", fmt::join(breaches, "; "));
  } else {
    g.detail = gates.p99_budget_ms > 0
                   ? fmt::format("all within {:.0f} ms ({} checked)", gates.p99_budget_ms, checked)
                   : fmt::format("all within before's p99 + {:.0f}% ({} checked)", 100 * gates.p99_tolerance, checked);
  }
  return g;
}

// A gate on one share of the after cell (a fraction shown as a percentage):
// it fails above `cap` (a cap) or below it (a floor), and is not measured
// when the report lacks the figure.
struct ShareGate {
  const char* name;
  const char* pointer;  // into the cell
  const char* what;     // for "the after report has no ..."
  bool is_cap;
};

GateResult share_gate(const ShareGate& s, double limit, const json& after_cell) {
  GateResult g{s.name, "", ""};
  const double share = get_num(after_cell, json::json_pointer(s.pointer));
  if (!std::isfinite(share)) {
    g.status = "not_measured";
    g.detail = fmt::format("the after report has no {}", s.what);
    return g;
  }
  const bool breached = s.is_cap ? share > limit : share < limit;
  g.status = breached ? "fail" : "pass";
  g.detail = fmt::format("{:.1f}% ({} {:.1f}%)", 100 * share, s.is_cap ? "cap" : "floor", 100 * limit);
  return g;
}

constexpr ShareGate kCommunicationGate{"communication_share", "/server/communication_share", "communication share",
                                       true};
constexpr ShareGate kAcceptanceGate{"spec_acceptance_rate", "/speculative/acceptance_rate",
                                    "speculative acceptance rate", false};

// Relative change, signed so that > 0 is better.
double gain(double before, double after, bool lower_is_better) {
  if (!std::isfinite(before) || !std::isfinite(after) || before == 0) return NAN;
  return lower_is_better ? (before - after) / before : (after - before) / before;
}

void judge_metrics(const CompareInput& in, Ticket& t) {
  struct M {
    const char* key;
    bool lower_is_better;
  };
  for (const M m : {M{"ttft_ms", true}, M{"p99_ms", true}, M{"cost_cents", true}, M{"output_tok_per_s", false}}) {
    const json& b = t.before[m.key];
    const json& a = t.after[m.key];
    if (!b.is_number() || !a.is_number()) continue;
    const double g = gain(b.get<double>(), a.get<double>(), m.lower_is_better);
    if (!std::isfinite(g)) continue;
    const std::string text = fmt::format("{} {:g} -> {:g} ({:+.1f}%)", m.key, b.get<double>(), a.get<double>(),
                                         100 * (a.get<double>() - b.get<double>()) / b.get<double>());
    if (g >= in.gates.min_improvement) t.improved.push_back(text);
    if (g < -in.gates.max_regression) t.regressed.push_back(text);
  }
  const json& sb = t.before["success_rate"];
  const json& sa = t.after["success_rate"];
  if (sb.is_number() && sa.is_number()) {
    const double drop = sb.get<double>() - sa.get<double>();
    const std::string text =
        fmt::format("success_rate {:.3f} -> {:.3f} ({:+.1f} pp)", sb.get<double>(), sa.get<double>(), -100 * drop);
    if (drop > in.gates.max_success_rate_drop + 1e-12) t.regressed.push_back(text);
    if (-drop >= in.gates.max_success_rate_drop && -drop > 0) t.improved.push_back(text);
  }
}

json slice_deltas(const json& before, const json& after) {
  json out = json::object();
  auto add = [&](const std::string& key, const json& b, const json& a) {
    const json cb = card(b), ca = card(a);
    json s = json::object();
    for (const auto& [k, v] : cb.items()) {
      const json& w = ca[k];
      json d = {{"before", v}, {"after", w}, {"change", nullptr}};
      if (v.is_number() && w.is_number() && v.get<double>() != 0) {
        d["change"] = (w.get<double>() - v.get<double>()) / v.get<double>();
      }
      s[k] = d;
    }
    out[key] = s;
  };
  add("overall", before["overall"], after["overall"]);
  for (const json& a : after["cells"]) {
    for (const json& b : before["cells"]) {
      if (b["key"] == a["key"]) add(a["key"].get<std::string>(), b, a);
    }
  }
  return out;
}

void conclude(Ticket& t) {
  std::vector<std::string> failed, unmeasured;
  for (const GateResult& g : t.gates) {
    if (g.status == "fail") failed.push_back(g.name + ": " + g.detail);
    if (g.status == "not_measured") unmeasured.push_back(g.name + ": " + g.detail);
  }
  const std::string gains = t.improved.empty() ? "nothing" : fmt::format("{}", fmt::join(t.improved, ", "));
  if (!failed.empty()) {
    t.decision = "reject";
    t.reason = fmt::format("gate failed — {}", fmt::join(failed, "; "));
    t.next = "fix what breaks the gate (see the per-slice deltas) or drop the change, then compare again";
  } else if (!unmeasured.empty()) {
    t.decision = "hold";
    t.reason = fmt::format("gate not measured — {}; improved: {}", fmt::join(unmeasured, "; "), gains);
    t.next =
        "measure what is missing (e.g. run the quality eval on both builds and pass --quality-before/"
        "--quality-after), then compare again";
  } else if (!t.regressed.empty()) {
    t.decision = "hold";
    t.reason = fmt::format("trade-off — improved: {}; regressed: {}", gains, fmt::join(t.regressed, ", "));
    t.next = "find why the regressed metrics moved (error/timeout breakdown, per-slice deltas) before shipping";
  } else if (t.improved.empty()) {
    t.decision = "hold";
    t.reason = "no headline metric improved by the minimum gain; the change is not worth its risk yet";
    t.next = "drop the change, or benchmark it on the slice it is meant for";
  } else {
    t.decision = "ship";
    t.reason = fmt::format("gates pass; improved: {}; nothing regressed", gains);
    t.next = "ship behind a flag, watch p99 and the success rate in production, and keep this run as the baseline";
  }
}

}  // namespace

Quality parse_quality(const json& j, const std::string& origin) {
  if (!j.is_object()) fail("{}: a quality file is a JSON object such as {{\"score\": 0.71}}", origin);
  for (const char* k : {"score", "accuracy"}) {
    if (j.contains(k) && j[k].is_number()) return {k, j[k].get<double>(), true};
  }
  if (j.contains("perplexity") && j["perplexity"].is_number()) {
    return {"perplexity", j["perplexity"].get<double>(), false};
  }
  fail("{}: needs a numeric \"score\", \"accuracy\" (higher is better) or \"perplexity\" (lower is better)", origin);
}

Quality load_quality(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail("cannot open quality file '{}'", path);
  const json j = json::parse(in, nullptr, false);
  if (j.is_discarded()) fail("{}: not valid JSON", path);
  return parse_quality(j, path);
}

const json& report_cell(const json& report, const std::string& key, const char* side) {
  if (key.empty() || key == "overall") return report["overall"];
  for (const json& c : report["cells"]) {
    if (c["key"] == key) return c;
  }
  fail("{} report has no cell '{}'", side, key);
}

void check_bench_report(const json& r, const char* side) {
  if (!r.is_object() || r.value("format", "") != "tokenmill-bench-report/1" || !r.contains("overall") ||
      !r.contains("cells") || !r.contains("spec_hash")) {
    fail("the {} file is not a `tokenmill bench serve` report (format tokenmill-bench-report/1)", side);
  }
}

void check_same_traffic(const json& a, const json& b) {
  if (a["spec_hash"] == b["spec_hash"]) return;
  std::vector<std::string> diff;
  for (const auto& [k, v] : a["traffic_shape"].items()) {
    if (!b["traffic_shape"].contains(k) || b["traffic_shape"][k] != v) diff.push_back(k);
  }
  for (const auto& [k, v] : b["traffic_shape"].items()) {
    if (!a["traffic_shape"].contains(k)) diff.push_back(k);
  }
  fail(
      "refusing to compare different traffic shapes (spec hash {} vs {}; differing: {}): compare only under the "
      "same shape",
      a["spec_hash"].get<std::string>(), b["spec_hash"].get<std::string>(), fmt::join(diff, ", "));
}

Gates gates_from_report(const json& report) {
  Gates g;
  if (!report.contains("gates") || !report["gates"].is_object()) return g;
  const json& j = report["gates"];
  g.quality_regression = j.value("quality_regression", g.quality_regression);
  g.p99_budget_breach = j.value("p99_budget_breach", g.p99_budget_breach);
  g.p99_budget_ms = j.value("p99_budget_ms", g.p99_budget_ms);
  g.p99_tolerance = j.value("p99_tolerance", g.p99_tolerance);
  g.max_success_rate_drop = j.value("max_success_rate_drop", g.max_success_rate_drop);
  g.min_improvement = j.value("min_improvement", g.min_improvement);
  g.max_regression = j.value("max_regression", g.max_regression);
  g.max_communication_share = j.value("max_communication_share", g.max_communication_share);
  g.min_spec_acceptance_rate = j.value("min_spec_acceptance_rate", g.min_spec_acceptance_rate);
  g.min_slice_requests = j.value("min_slice_requests", g.min_slice_requests);
  return g;
}

Ticket decide(const CompareInput& in) {
  check_bench_report(in.before, "before");
  check_bench_report(in.after, "after");
  check_same_traffic(in.before, in.after);
  const json& b = report_cell(in.before, in.cell, "before");
  const json& a = report_cell(in.after, in.cell, "after");
  Ticket t;
  t.change = in.change;
  t.slice = in.slice;
  t.cell = in.cell.empty() ? "overall" : in.cell;
  t.spec_hash = in.before["spec_hash"].get<std::string>();
  t.before = card(b);
  t.after = card(a);
  if (in.gates.quality_regression >= 0) t.gates.push_back(quality_gate(in));
  if (!in.gates.p99_budget_breach) t.gates.push_back(p99_gate(in, b, a));
  if (in.gates.max_communication_share > 0)
    t.gates.push_back(share_gate(kCommunicationGate, in.gates.max_communication_share, a));
  if (in.gates.min_spec_acceptance_rate > 0)
    t.gates.push_back(share_gate(kAcceptanceGate, in.gates.min_spec_acceptance_rate, a));
  judge_metrics(in, t);
  t.slices = slice_deltas(in.before, in.after);
  conclude(t);
  return t;
}

namespace {

void emit_json_value(YAML::Emitter& e, const json& v) {
  if (v.is_number_integer())
    e << v.get<int64_t>();
  else if (v.is_number())
    e << v.get<double>();
  else if (v.is_string())
    e << v.get<std::string>();
  else if (v.is_boolean())
    e << v.get<bool>();
  else
    e << YAML::Null;
}

void emit_card(YAML::Emitter& e, const json& card) {
  e << YAML::Flow << YAML::BeginMap;
  for (const auto& [k, v] : card.items()) {
    e << YAML::Key << k << YAML::Value;
    emit_json_value(e, v);
  }
  e << YAML::EndMap;
}

}  // namespace

std::string ticket_yaml(const Ticket& t) {
  YAML::Emitter e;
  e.SetDoublePrecision(6);
  e << YAML::BeginMap << YAML::Key << "optimization_ticket" << YAML::Value << YAML::BeginMap;
  e << YAML::Key << "change" << YAML::Value << YAML::DoubleQuoted << t.change;
  e << YAML::Key << "slice" << YAML::Value << YAML::DoubleQuoted << t.slice;
  e << YAML::Key << "cell" << YAML::Value << t.cell;
  e << YAML::Key << "spec_hash" << YAML::Value << YAML::DoubleQuoted << t.spec_hash;
  e << YAML::Key << "before" << YAML::Value;
  emit_card(e, t.before);
  e << YAML::Key << "after" << YAML::Value;
  emit_card(e, t.after);
  e << YAML::Key << "decision" << YAML::Value << t.decision;
  e << YAML::Key << "reason" << YAML::Value << YAML::DoubleQuoted << t.reason;
  e << YAML::Key << "next" << YAML::Value << YAML::DoubleQuoted << t.next;
  e << YAML::Key << "gates" << YAML::Value << YAML::BeginSeq;
  for (const GateResult& g : t.gates) {
    e << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << g.name << YAML::Key << "status"
      << YAML::Value << g.status << YAML::Key << "detail" << YAML::Value << YAML::DoubleQuoted << g.detail
      << YAML::EndMap;
  }
  e << YAML::EndSeq;
  e << YAML::Key << "slices" << YAML::Value << YAML::BeginMap;
  for (const auto& [key, metrics] : t.slices.items()) {
    e << YAML::Key << key << YAML::Value << YAML::BeginMap;
    for (const auto& [m, d] : metrics.items()) {
      e << YAML::Key << m << YAML::Value;
      emit_card(e, d);
    }
    e << YAML::EndMap;
  }
  e << YAML::EndMap << YAML::EndMap << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

}  // namespace tokenmill::bench
