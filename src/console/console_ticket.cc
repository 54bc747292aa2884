#include "console/console_ticket.h"

#include "bench/ticket.h"
#include "server/api_error.h"
#include "util/error.h"

namespace tokenmill::console {

using nlohmann::json;

namespace {

std::string optional_string(const json& body, const char* field) {
  if (!body.contains(field) || body[field].is_null()) return "";
  if (!body[field].is_string()) server::bad_request(field, "'{}' must be a string", field);
  return body[field].get<std::string>();
}

}  // namespace

json ticket_response(const json& body) {
  if (!body.is_object()) server::bad_request("", "the body must be a JSON object with 'before' and 'after' reports");
  for (const char* side : {"before", "after"})
    if (!body.contains(side) || !body[side].is_object())
      server::bad_request(side, "'{}' must be a bench serve report (the object in report.json)", side);
  bench::CompareInput in;
  in.before = body["before"];
  in.after = body["after"];
  in.change = optional_string(body, "change");
  in.slice = optional_string(body, "slice");
  in.cell = optional_string(body, "cell");
  bench::Ticket t;
  try {
    bench::check_bench_report(in.before, "before");
    bench::check_bench_report(in.after, "after");
    in.gates = bench::gates_from_report(in.before);
    t = bench::decide(in);
  } catch (const Error& e) {
    throw server::ApiError(400, e.what(), "invalid_request_error", std::nullopt, "reports_not_comparable");
  }
  json gates = json::array();
  for (const bench::GateResult& g : t.gates)
    gates.push_back({{"name", g.name}, {"status", g.status}, {"detail", g.detail}});
  return {{"decision", t.decision},   {"reason", t.reason},
          {"next", t.next},           {"change", t.change},
          {"slice", t.slice},         {"cell", t.cell},
          {"spec_hash", t.spec_hash}, {"before", t.before},
          {"after", t.after},         {"gates", gates},
          {"slices", t.slices},       {"improved", t.improved},
          {"regressed", t.regressed}, {"yaml", bench::ticket_yaml(t)}};
}

}  // namespace tokenmill::console
