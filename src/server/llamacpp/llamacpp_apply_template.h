// llama.cpp's POST /apply-template: a chat request's messages (and tools,
// chat_template_kwargs, add_generation_prompt, continue_final_message)
// rendered with the served model's chat template, answered as
// {"prompt": TEXT} without generating; for users checking what prompt a
// conversation becomes. The messages go through the chat endpoint's parser
// (tool-call arguments as objects, a null content as ""), so this is the
// prompt /v1/chat/completions builds for the same body.
#pragma once

#include "server/serving_context.h"

namespace tokenmill::server {

void handle_apply_template(ServingContext& ctx, const HttpRequest& req, HttpResponse& res);

}  // namespace tokenmill::server
