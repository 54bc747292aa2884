// POST /console/api/ticket: two `bench serve` reports, as the console's
// Reports tab opened them, turned into the optimization ticket by the same
// code as `tokenmill bench compare` (bench/ticket.h), so the page and the
// command never disagree.
#pragma once

#include <nlohmann/json.hpp>

namespace tokenmill::console {

// body: {"before": report, "after": report, and optional strings "change"
// (what differs), "slice" (the traffic it is meant for), "cell" ("" =
// overall)}. Gates are the ones the before
// run's spec carried. Returns the ticket's fields and its YAML ("yaml").
// Throws server::ApiError (400) naming what is wrong with the body or why
// the reports cannot be compared.
nlohmann::json ticket_response(const nlohmann::json& body);

}  // namespace tokenmill::console
