// Every API the server speaks, each a room (folder) of its own that turns
// its request shape into the generation pipeline's job (generation_job.h)
// and the engine's events into its response shape. Adding an API is one
// folder and one line in api_rooms.cc (docs/architecture.md, "Adding an
// API").
#pragma once

#include "server/route_table.h"
#include "server/serving_context.h"

namespace tokenmill::server {

// Adds the routes of every API room. Rooms that read the model (its FIM
// tokens, its chat template) register a hook in ctx.on_attach.
void add_api_routes(RouteTable& routes, ServingContext& ctx);

}  // namespace tokenmill::server
