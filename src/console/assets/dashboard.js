// The Dashboard tab: GET /console/api/status every second. Counters become
// rates over the last few seconds and histograms become percentiles over
// the last minute by differencing two readings kept here (the server keeps
// nothing per viewer).

import { getJson } from "./api.js";
import { drawLines } from "./charts.js";
import { bytes, duration, el, ms, num, percent } from "./format.js";
import { histogramSince, quantile } from "./histogram.js";

const $ = (id) => document.getElementById(id);
const KEEP_S = 300; // seconds of readings kept (the charts' span)
const RATE_S = 5; // rates over this many seconds
const WINDOW_S = 60; // percentiles and hit rates over this many seconds

const readings = []; // {time, status}, oldest first
const points = { running: [], waiting: [], tokps: [], ttft50: [], ttft99: [], tpot50: [], tpot99: [], kv: [], hit: [] };
let onUpdate = () => {};

// The newest reading at least `seconds` older than the last one (else the
// oldest there is, so that a young page still shows something).
function readingBefore(seconds) {
  const last = readings[readings.length - 1];
  for (let i = readings.length - 2; i >= 0; i--) if (last.time - readings[i].time >= seconds) return readings[i];
  return readings.length > 1 ? readings[0] : null;
}

function rate(get, seconds) {
  const last = readings[readings.length - 1];
  const old = readingBefore(seconds);
  if (!old || !old.status.tokens || !last.status.tokens) return null;
  const dt = last.time - old.time;
  return dt > 0 ? (get(last.status) - get(old.status)) / dt : null;
}

function windowHistogram(name) {
  const last = readings[readings.length - 1];
  const old = readingBefore(WINDOW_S);
  if (!last.status.latency_ms) return null;
  return histogramSince(last.status.latency_ms[name], old?.status.latency_ms?.[name] ?? null);
}

function windowHitRate() {
  const last = readings[readings.length - 1].status.prefix_cache;
  const old = readingBefore(WINDOW_S)?.status.prefix_cache;
  if (!last) return null;
  const hit = last.hit_tokens - (old?.hit_tokens ?? 0);
  const miss = last.miss_tokens - (old?.miss_tokens ?? 0);
  return hit + miss > 0 ? hit / (hit + miss) : null;
}

function tile(key, label, value, raw) {
  return el(
    "div",
    {},
    el("dt", { text: label }),
    el("dd", { id: `m-${key}`, "data-value": raw === null || raw === undefined ? "" : String(raw), text: value }),
  );
}

function renderTiles(s) {
  const tiles = [tile("state", "state", s.state, s.state), tile("uptime", "uptime", duration(s.uptime_s), s.uptime_s)];
  if (s.requests) {
    const ttft = windowHistogram("ttft");
    const tpot = windowHistogram("tpot");
    const e2e = windowHistogram("e2e");
    const kv = s.kv;
    const tokps = rate((x) => x.tokens.generated, RATE_S);
    const reqps = rate((x) => x.requests.finished_total, RATE_S);
    const hit = windowHitRate();
    const q = (h, p) => quantile(h, p);
    tiles.push(
      tile("running", "running", num(s.requests.running), s.requests.running),
      tile("waiting", "waiting", num(s.requests.waiting), s.requests.waiting),
      tile("output-tok-s", "output tok/s", num(tokps), tokps),
      tile("requests-s", "requests/s", num(reqps), reqps),
      tile("ttft-p50", "TTFT p50 (60 s)", ms(q(ttft, 0.5)), q(ttft, 0.5)),
      tile("ttft-p95", "TTFT p95 (60 s)", ms(q(ttft, 0.95)), q(ttft, 0.95)),
      tile("ttft-p99", "TTFT p99 (60 s)", ms(q(ttft, 0.99)), q(ttft, 0.99)),
      tile("tpot-p50", "TPOT p50 (60 s)", ms(q(tpot, 0.5)), q(tpot, 0.5)),
      tile("tpot-p95", "TPOT p95 (60 s)", ms(q(tpot, 0.95)), q(tpot, 0.95)),
      tile("tpot-p99", "TPOT p99 (60 s)", ms(q(tpot, 0.99)), q(tpot, 0.99)),
      tile("e2e-p99", "end-to-end p99 (60 s)", ms(q(e2e, 0.99)), q(e2e, 0.99)),
      tile("kv-used", "KV blocks used", `${num(kv.blocks_used)} / ${num(kv.blocks_total)}`, kv.blocks_used),
      tile("kv-free", "KV blocks free", num(kv.blocks_free), kv.blocks_free),
      tile("kv-high-water", "KV high-water", num(kv.blocks_high_water), kv.blocks_high_water),
      tile("prefix-hit", "prefix-cache hits (60 s)", percent(hit), hit),
      tile("completed", "requests finished", num(s.requests.finished_total), s.requests.finished_total),
      tile("rejected", "requests rejected", num(s.requests.rejected_total), s.requests.rejected_total),
    );
  }
  tiles.push(
    tile("rss", "memory (RSS)", bytes(s.memory.resident_bytes), s.memory.resident_bytes),
    tile("rss-high-water", "memory high-water", bytes(s.memory.high_water_bytes), s.memory.high_water_bytes),
  );
  $("tiles").replaceChildren(...tiles);
}

function renderOutcomes(s) {
  const rows = [];
  for (const [reason, n] of Object.entries(s.requests?.rejected ?? {})) rows.push([`rejected: ${reason}`, n]);
  for (const [reason, n] of Object.entries(s.requests?.finished ?? {}))
    if (!["stop", "length", "tool_calls", "rejected"].includes(reason)) rows.push([`finished: ${reason}`, n]);
  const byStatus = {};
  for (const r of s.http.responses) if (r.status >= 400) byStatus[r.status] = (byStatus[r.status] || 0) + r.count;
  for (const [status, n] of Object.entries(byStatus)) rows.push([`HTTP ${status}`, n]);
  rows.push(["clients that left a stream", s.http.client_disconnects]);
  rows.push(["refused API keys", s.http.auth_failures]);
  $("outcomes").tBodies[0].replaceChildren(
    ...rows.map(([what, n]) => el("tr", {}, el("th", { scope: "row", text: what }), el("td", { class: "num", text: num(n) }))),
  );
}

function configRows(c) {
  if (!c) return [["model", "loading…"]];
  const weights = (c.weights || []).map((w) => `${w.type} ${(w.share * 100).toFixed(0)} %`).join(", ");
  const slo = c.slo || {};
  const targets = [
    slo.ttft_ms ? `TTFT ${slo.ttft_ms} ms` : "",
    slo.tpot_ms ? `TPOT ${slo.tpot_ms} ms` : "",
    slo.e2e_p99_ms ? `E2E p99 ${slo.e2e_p99_ms} ms` : "",
  ].filter(Boolean);
  return [
    ["model", `${c.model} (${c.model_file})`],
    ["architecture", c.architecture],
    ["weights", weights],
    ["weights runtime", c.weights_runtime],
    ["kernels (ISA)", c.isa],
    ["threads", c.threads],
    ["KV cache", `${c.kv_dtype}, ${num(c.kv_blocks)} blocks of ${c.kv_block_size} tokens, ${bytes(c.kv_bytes)}`],
    ["KV policy", c.kv_policy ?? "full"],
    ["KV bytes per token", bytes(c.kv_bytes_per_token)],
    ["max model length", num(c.max_model_len)],
    ["max running sequences", num(c.max_seqs)],
    ["max batch tokens", num(c.max_batch_tokens)],
    ["max waiting", c.max_waiting ? num(c.max_waiting) : "unbounded"],
    ["prefix cache", c.prefix_cache ? "on" : "off"],
    ["speculative decoding", c.speculative],
    ["SLO targets", targets.length ? targets.join(", ") : "none"],
    ["request timeout", c.request_timeout_s ? `${c.request_timeout_s} s` : "none"],
    ["chat template", c.chat_template],
    ["base model", c.base_model ? "yes (replies do not follow instructions)" : "no"],
    ["API keys", c.api_keys ? "required" : "none"],
    ["parallel (tp × pp)", `${c.tp} × ${c.pp}`],
  ];
}

function renderConfig(s) {
  $("config").tBodies[0].replaceChildren(
    ...configRows(s.server).map(([k, v]) =>
      el("tr", {}, el("th", { scope: "row", text: k }), el("td", { text: v === undefined ? "—" : String(v) })),
    ),
  );
}

function recordPoints(s) {
  const t = s.time;
  const push = (key, v) => {
    points[key].push([t, Number.isFinite(v) ? v : NaN]);
    while (points[key].length && t - points[key][0][0] > KEEP_S) points[key].shift();
  };
  if (!s.requests) return;
  push("running", s.requests.running);
  push("waiting", s.requests.waiting);
  push("tokps", rate((x) => x.tokens.generated, RATE_S));
  const ttft = windowHistogram("ttft");
  const tpot = windowHistogram("tpot");
  push("ttft50", quantile(ttft, 0.5));
  push("ttft99", quantile(ttft, 0.99));
  push("tpot50", quantile(tpot, 0.5));
  push("tpot99", quantile(tpot, 0.99));
  push("kv", s.kv.blocks_used);
  const hit = windowHitRate();
  push("hit", hit === null ? NaN : hit * 100);
}

function renderCharts(now) {
  const rel = (pts) => pts.map(([t, v]) => [t - now, v]);
  // The span readings cover (at least a minute, at most KEEP_S), so that a
  // page opened a moment ago does not squeeze its data into one edge.
  const span = Math.min(KEEP_S, Math.max(60, now - readings[0].time));
  const opts = (label) => ({ xMin: -span, xMax: 0, xFormat: (x) => `${Math.round(x)} s`, label });
  drawLines($("chart-requests"), [
    { name: "running", points: rel(points.running) },
    { name: "waiting", points: rel(points.waiting) },
  ], opts("requests"));
  drawLines($("chart-throughput"), [{ name: "output tok/s", points: rel(points.tokps) }], opts("output tokens per second"));
  drawLines($("chart-ttft"), [
    { name: "p50", points: rel(points.ttft50) },
    { name: "p99", points: rel(points.ttft99) },
  ], opts("TTFT ms"));
  drawLines($("chart-tpot"), [
    { name: "p50", points: rel(points.tpot50) },
    { name: "p99", points: rel(points.tpot99) },
  ], opts("TPOT ms"));
  drawLines($("chart-kv"), [{ name: "blocks used", points: rel(points.kv) }], opts("KV blocks"));
  drawLines($("chart-prefix"), [{ name: "hit %", points: rel(points.hit) }], opts("prefix-cache hit percent"));
}

async function tick() {
  const status = await getJson("/console/api/status");
  readings.push({ time: status.time, status });
  while (readings.length > 2 && status.time - readings[0].time > KEEP_S) readings.shift();
  recordPoints(status);
  onUpdate(status);
  if (!$("panel-dashboard").hidden) render(status); // else drawn when shown; the readings are kept anyway
}

function render(status) {
  renderTiles(status);
  renderOutcomes(status);
  renderConfig(status);
  renderCharts(status.time);
  $("updated").textContent = `updated ${new Date(status.time * 1000).toLocaleTimeString()}`;
}

// Polls every second until stopped (a 401 the user did not answer stops it;
// the caller restarts it with a key). `update` is called with each reading.
export function startDashboard(update) {
  onUpdate = update;
  let timer = null;
  let stopped = false;
  const loop = async () => {
    try {
      await tick();
    } catch (e) {
      onUpdate(null, e);
      if (e.status === 401) {
        stopped = true;
        return;
      }
    }
    if (!stopped) timer = setTimeout(loop, 1000);
  };
  loop();
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
    redraw() {
      if (readings.length) render(readings[readings.length - 1].status);
    },
  };
}
