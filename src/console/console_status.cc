#include "console/console_status.h"

#include "sched/request_outcome.h"

namespace tokenmill::console {

using nlohmann::json;

json histogram_json(const engine::Histogram& h) {
  return {{"bounds", h.bounds}, {"counts", h.counts}, {"count", h.count}, {"sum", h.sum}};
}

namespace {

json requests_json(const engine::MetricsSnapshot& m, const server::HttpStatsSnapshot& http) {
  json finished = json::object();
  for (int i = 0; i < engine::kNumFinishReasons; ++i)
    if (m.requests_finished[i] > 0)
      finished[std::string(engine::finish_reason_name(static_cast<engine::FinishReason>(i)))] = m.requests_finished[i];
  json rejected = json::object();
  for (int i = 0; i < engine::kNumRejectReasons; ++i)
    if (m.requests_rejected[i] > 0)
      rejected[std::string(engine::reject_reason_name(static_cast<engine::RejectReason>(i)))] = m.requests_rejected[i];
  return {{"submitted", m.requests_submitted},
          {"running", m.running},
          {"waiting", m.waiting},
          {"paused", m.paused},
          {"in_flight_http", http.in_flight},
          {"finished", finished},
          {"finished_total", m.requests_finished_total()},
          {"rejected", rejected},
          {"rejected_total", m.requests_rejected_total()},
          {"preemptions", m.preemptions}};
}

json kv_json(const engine::MetricsSnapshot& m) {
  return {{"dtype", m.kv_dtype},
          {"bytes_per_token", m.kv_bytes_per_token},
          {"bytes_total", m.kv_bytes_total},
          {"blocks_total", m.kv_blocks_total},
          {"blocks_used", m.kv_blocks_used},
          {"blocks_free", m.kv_blocks_free},
          {"blocks_evictable", m.kv_blocks_evictable},
          {"blocks_high_water", m.kv_blocks_high_water},
          {"window_blocks_total", m.kv_window_blocks_total},
          {"window_blocks_used", m.kv_window_blocks_used}};
}

json http_json(const server::HttpStatsSnapshot& http) {
  json responses = json::array();
  for (const auto& [key, count] : http.responses)
    responses.push_back({{"endpoint", key.first}, {"status", key.second}, {"count", count}});
  return {{"responses", responses},
          {"client_disconnects", http.client_disconnects},
          {"auth_failures", http.auth_failures},
          {"stalled_clients", http.stalled_clients},
          {"connections_open", http.front.connections_open},
          {"connections_refused", http.front.connections_refused}};
}

}  // namespace

json status_json(const StatusInputs& in) {
  json out = {
      {"state", in.state},
      {"time", in.now_s},
      {"uptime_s", in.started_s > 0 ? in.now_s - in.started_s : 0.0},
      {"server", in.server},
      {"http", http_json(in.http)},
      {"memory", {{"resident_bytes", in.memory.resident}, {"high_water_bytes", in.memory.resident_high_water}}}};
  if (!in.engine) return out;
  const engine::MetricsSnapshot& m = *in.engine;
  out["requests"] = requests_json(m, in.http);
  out["tokens"] = {{"prompt", m.prompt_tokens},       {"cached_prompt", m.cached_prompt_tokens},
                   {"generated", m.generated_tokens}, {"prefill", m.prefill_tokens},
                   {"decode", m.decode_tokens},       {"steps", m.steps}};
  out["kv"] = kv_json(m);
  out["prefix_cache"] = {
      {"lookups", m.prefix_cache_lookups},         {"hit_tokens", m.prefix_cache_hit_tokens},
      {"miss_tokens", m.prefix_cache_miss_tokens}, {"evictions", m.prefix_cache_evictions},
      {"blocks", m.prefix_cache_blocks},           {"saved_prefill_seconds", m.prefix_cache_saved_prefill_seconds}};
  out["speculative"] = {{"draft_tokens", m.spec_draft_tokens}, {"accepted_tokens", m.spec_accepted_tokens}};
  out["latency_ms"] = {{"queue", histogram_json(m.queue_ms)}, {"ttft", histogram_json(m.ttft_ms)},
                       {"tpot", histogram_json(m.tpot_ms)},   {"itl", histogram_json(m.itl_ms)},
                       {"e2e", histogram_json(m.e2e_ms)},     {"step", histogram_json(m.step_ms)}};
  return out;
}

}  // namespace tokenmill::console
