#include "server/admin/lora_endpoints.h"

#include <fmt/format.h>

#include "server/api_error.h"
#include "server/json_fields.h"
#include "server/openai/openai_response.h"
#include "server/request_log.h"

namespace tokenmill::server {

namespace {

using nlohmann::json;

std::string required_string(const JsonFields& f, std::string_view name) {
  std::optional<std::string> value = f.string(name);
  if (!value) bad_request(std::string(name), "'{}' is required", name);
  return *value;
}

void check_load_inplace(const JsonFields& f) {
  if (f.boolean("load_inplace").value_or(false))
    bad_request("load_inplace",
                "'load_inplace' is not supported: unload the adapter, then load the new file under its name");
}

// Loading by path reads files on the server's machine: only an operator
// who opted in lets clients do it.
void require_runtime_lora(const ServingContext& ctx) {
  if (!ctx.allow_runtime_lora)
    throw ApiError(403,
                   "loading and unloading LoRA adapters at run time is disabled; start the server with "
                   "--allow-runtime-lora to enable it",
                   "permission_error", std::nullopt, "runtime_lora_disabled");
}

}  // namespace

LoraLoadRequest parse_load_lora_request(std::string_view body, const util::JsonLimits& limits) {
  const RequestJson j = parse_json_object(body, limits);
  const JsonFields f(j);
  f.reject_unknown({"lora_name", "lora_path", "load_inplace"});
  check_load_inplace(f);
  LoraLoadRequest r;
  r.name = required_string(f, "lora_name");
  r.path = required_string(f, "lora_path");
  return r;
}

std::string parse_unload_lora_request(std::string_view body, const util::JsonLimits& limits) {
  const RequestJson j = parse_json_object(body, limits);
  const JsonFields f(j);
  // vLLM's clients may send the id it once used as well; it names nothing here.
  f.reject_unknown({"lora_name", "lora_int_id"});
  return required_string(f, "lora_name");
}

void handle_load_lora_adapter(ServingContext& ctx, const HttpRequest& req, HttpResponse& res) {
  require_runtime_lora(ctx);
  ctx.require_engine();  // the base model the adapter binds to
  const LoraLoadRequest r = parse_load_lora_request(req.body, ctx.parse_limits().json);
  current_record().model = r.name;
  ctx.loras->load(r.name, r.path);
  res.set_content(fmt::format("Success: LoRA adapter '{}' added successfully.", r.name), "text/plain; charset=utf-8");
}

void handle_unload_lora_adapter(ServingContext& ctx, const HttpRequest& req, HttpResponse& res) {
  require_runtime_lora(ctx);
  ctx.require_engine();
  const std::string name = parse_unload_lora_request(req.body, ctx.parse_limits().json);
  current_record().model = name;
  ctx.loras->unload(name);
  res.set_content(fmt::format("Success: LoRA adapter '{}' removed successfully.", name), "text/plain; charset=utf-8");
}

void handle_llama_lora_adapters(ServingContext& ctx, const HttpRequest&, HttpResponse& res) {
  json list = json::array();
  int64_t id = 0;
  for (const LoraEntry& e : ctx.loras->list())
    list.push_back({{"id", id++}, {"path", e.path}, {"scale", e.adapter->user_scale()}, {"name", e.name}});
  res.set_content(dump_json(list), "application/json");
}

json lora_model_card(json base_card, const LoraEntry& adapter, const std::string& parent) {
  base_card["parent"] = parent;
  base_card["root"] = adapter.path;
  base_card["lora_rank"] = adapter.adapter->max_rank();
  return base_card;
}

void add_lora_routes(RouteTable& routes, ServingContext& ctx) {
  routes.add("POST", "/v1/load_lora_adapter", true,
             [&ctx](HttpRequest& req, HttpResponse& res) { handle_load_lora_adapter(ctx, req, res); });
  routes.add("POST", "/v1/unload_lora_adapter", true,
             [&ctx](HttpRequest& req, HttpResponse& res) { handle_unload_lora_adapter(ctx, req, res); });
}

}  // namespace tokenmill::server
