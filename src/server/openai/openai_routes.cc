#include "server/openai/openai_routes.h"

#include "server/admin/lora_endpoints.h"
#include "server/openai/embeddings.h"

namespace tokenmill::server {

using nlohmann::json;

namespace {

// A route handler that reads the serving context.
RouteTable::Handler with_ctx(ServingContext& ctx, void (*fn)(ServingContext&, const HttpRequest&, HttpResponse&)) {
  return [&ctx, fn](HttpRequest& req, HttpResponse& res) { fn(ctx, req, res); };
}

json model_card(const ServingContext& ctx, const std::string& name) {
  const engine::Engine* e = ctx.engine.load();
  json m = {{"id", name}, {"object", "model"}, {"created", ctx.created}, {"owned_by", "tokenmill"}};
  if (!e) return m;
  m["max_model_len"] = e->limits().max_model_len();
  // tokenmill extensions (docs/api.md, "Model notices"): a client can tell
  // a base model, whose chat replies do not follow instructions.
  const ModelProfile& p = ctx.model_profile;
  m["base_model"] = p.base_model;
  m["chat_template"] = p.chat_template.empty() ? json(nullptr) : json(p.chat_template);
  m["chat_template_source"] = p.chat_template_source.empty() ? json(nullptr) : json(p.chat_template_source);
  return m;
}

}  // namespace

void handle_models(ServingContext& ctx, const HttpRequest& req, HttpResponse& res) {
  // An adapter's card is its base's, with vLLM's parent and root.
  auto adapter_card = [&](const LoraEntry& a) {
    return lora_model_card(model_card(ctx, a.name), a, ctx.model_names[0]);
  };
  const std::vector<LoraEntry> adapters = ctx.loras->list();
  if (req.matches.size() > 1) {
    const std::string wanted = req.matches[1];
    for (const LoraEntry& a : adapters)
      if (a.name == wanted) {
        res.set_content(dump_json(adapter_card(a)), "application/json");
        return;
      }
    ctx.check_model(wanted);
    res.set_content(dump_json(model_card(ctx, wanted)), "application/json");
    return;
  }
  json data = json::array();
  for (const std::string& name : ctx.model_names) data.push_back(model_card(ctx, name));
  for (const LoraEntry& a : adapters) data.push_back(adapter_card(a));
  res.set_content(dump_json({{"object", "list"}, {"data", data}}), "application/json");
}

void add_openai_routes(RouteTable& routes, ServingContext& ctx) {
  for (const char* prefix : {"/v1", ""}) {  // llama-server serves them without /v1 too
    const std::string p = prefix;
    routes.add("GET", (p + "/models").c_str(), true, with_ctx(ctx, &handle_models));
    routes.add("GET", (p + "/models/(.+)").c_str(), true, with_ctx(ctx, &handle_models));
    routes.add("POST", (p + "/completions").c_str(), true, with_ctx(ctx, &handle_completions));
    routes.add("POST", (p + "/chat/completions").c_str(), true, with_ctx(ctx, &handle_chat_completions));
    routes.add("POST", (p + "/embeddings").c_str(), true, with_ctx(ctx, &handle_embeddings));
  }
}

}  // namespace tokenmill::server
