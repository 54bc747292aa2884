#include "server/llamacpp/llamacpp_apply_template.h"

#include "server/api_error.h"
#include "server/chat_prompt.h"
#include "server/openai/openai_request.h"

namespace tokenmill::server {

void handle_apply_template(ServingContext& ctx, const HttpRequest& req, HttpResponse& res) {
  const ChatRequest r = parse_chat_request(req.body, ctx.parse_limits());
  ctx.check_model(r.common.model);
  if (!ctx.chat)
    bad_request("messages", "the model has no recognised chat template; start the server with --chat-template NAME");
  ChatRenderOptions render;
  render.add_generation_prompt = r.add_generation_prompt;
  render.continue_final_message = r.continue_final_message;
  const nlohmann::json body = {{"prompt", render_chat_text(*ctx.chat, r.conversation, render)}};
  res.set_content(dump_json(body), "application/json");
}

}  // namespace tokenmill::server
