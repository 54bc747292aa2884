// The names of src/http the server's handlers use, brought into
// tokenmill::server: every room speaks HTTP through them, and none needs
// the front itself (http_server.h owns it).
#pragma once

#include "http/http_message.h"
#include "http/http_stats.h"
#include "http/http_status.h"
#include "http/json_body.h"
#include "http/sse.h"

namespace tokenmill::server {

using http::ConnectionView;
using http::dump_json;
using http::endpoint_label;
using http::find_header;
using http::HttpFrontStats;
using http::HttpRequest;
using http::HttpResponse;
using http::HttpStats;
using http::HttpStatsSnapshot;
using http::kSseDone;
using http::kSseKeepAlive;
using http::ResponseStream;
using http::sse_event;
using http::status_reason;

}  // namespace tokenmill::server
