// The Reports tab: a `bench serve` output (its directory, or report.json
// alone) shown as tables and charts; with two reports, the optimization
// ticket, decided by the server with the code of `tokenmill bench compare`
// (POST /console/api/ticket). Files are read in the browser; only the two
// report objects are sent, and only for the ticket.

import { postJson } from "./api.js";
import { drawLines } from "./charts.js";
import { change, el, num, percent, table } from "./format.js";

const $ = (id) => document.getElementById(id);
const slots = { a: null, b: null }; // {name, report, records, plots: [{name, url}]}
const LATENCIES = ["queue", "ttft", "tpot", "itl", "e2e", "prefill", "decode"];

function isReport(j) {
  return j && typeof j === "object" && j.overall && Array.isArray(j.cells) && j.traffic_shape;
}

async function readJson(file) {
  try {
    return JSON.parse(await file.text());
  } catch (e) {
    throw new Error(`${file.name} is not valid JSON: ${e.message}`);
  }
}

// A report directory as the browser lists it (webkitRelativePath
// "out/report.json", "out/plots/ttft_cdf.svg", ...).
async function fromDirectory(files) {
  const byPath = new Map([...files].map((f) => [f.webkitRelativePath.split("/").slice(1).join("/"), f]));
  const reportFile = byPath.get("report.json");
  if (!reportFile) throw new Error("this directory has no report.json: open what `tokenmill bench serve -o DIR` wrote");
  const out = { name: reportFile.webkitRelativePath, report: await readJson(reportFile), records: null, plots: [] };
  const records = byPath.get("records.jsonl");
  if (records) {
    out.records = (await records.text())
      .split("\n")
      .filter((line) => line.trim())
      .map((line) => JSON.parse(line));
  }
  for (const [path, f] of [...byPath.entries()].sort())
    if (path.startsWith("plots/") && path.endsWith(".svg")) out.plots.push({ name: path, url: URL.createObjectURL(f) });
  return out;
}

function latencyTable(cell) {
  const rows = LATENCIES.filter((k) => cell.latency_ms?.[k]?.count).map((k) => {
    const l = cell.latency_ms[k];
    return [k, l.p50, l.p90, l.p95, l.p99, l.max, l.count];
  });
  return table(["latency (ms)", "p50", "p90", "p95", "p99", "max", "count"], rows, "latency percentiles");
}

function summaryTable(cell) {
  const r = cell.requests;
  const t = cell.throughput;
  return table(
    ["", "value"],
    [
      ["requests ok / sent", `${r.ok} / ${r.sent}`],
      ["success rate", percent(cell.rates.success_rate)],
      ["rejected, timed out, OOM", `${r.rejected}, ${r.timeout}, ${r.oom}`],
      ["requests/s", t.req_per_s],
      ["input tok/s", t.input_tok_per_s],
      ["output tok/s", t.output_tok_per_s],
      ["total tok/s", t.total_tok_per_s],
      ["goodput (within SLO)", cell.goodput ? `${num(cell.goodput.req_per_s)} req/s (${percent(cell.goodput.fraction)})` : "—"],
      ["cost per success", cell.cost ? `${num(cell.cost.per_success_cents)} ¢` : "—"],
      ["bottleneck", cell.bottleneck || "—"],
      ["server memory high-water", cell.server?.memory_high_water_bytes ? `${num(cell.server.memory_high_water_bytes / 2 ** 20)} MiB` : "—"],
    ],
    "run summary",
  );
}

function cellsTable(report) {
  const rows = report.cells.map((c) => {
    const l = c.latency_ms;
    return [
      c.key,
      c.concurrency,
      c.cache_hit_rate,
      c.input_bucket === null || c.input_bucket === undefined || c.input_bucket < 0 ? "all" : String(c.input_bucket),
      `${c.requests.ok}/${c.requests.sent}`,
      l.ttft.p50,
      l.ttft.p99,
      l.tpot.p50,
      l.tpot.p99,
      l.e2e.p99,
      c.throughput.output_tok_per_s,
    ];
  });
  return table(
    ["cell", "concurrency", "cache hit", "bucket", "ok", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "E2E p99", "out tok/s"],
    rows,
    "cells",
  );
}

// TTFT of the ok requests in records.jsonl, as a CDF.
function ttftCdf(records) {
  const ttft = records
    .filter((r) => !r.error && r.http_status === 200 && r.first_token_ms !== null && r.send_ms !== null)
    .map((r) => r.first_token_ms - r.send_ms)
    .sort((x, y) => x - y);
  return ttft.map((v, i) => [v, ((i + 1) * 100) / ttft.length]);
}

function renderReport(side) {
  const s = slots[side];
  const target = $(`report-${side}`);
  if (!s) {
    target.replaceChildren();
    return;
  }
  const r = s.report;
  const o = r.overall;
  const shape = r.traffic_shape;
  const parts = [
    el("h3", { text: `${side === "a" ? "A" : "B"}: ${r.benchmark} — ${s.name}` }),
    el("p", {
      class: "note",
      text: `${r.target?.model ?? ""} at ${r.target?.url ?? ""}, started ${r.started_at}; ${shape.arrival}, concurrency ${shape.concurrency.join("/")}, ${shape.requests_per_cell} requests per cell; traffic shape ${String(r.spec_hash).slice(0, 12)}`,
    }),
    el("h4", { text: "Whole run" }),
    summaryTable(o),
    latencyTable(o),
    el("h4", { text: "Cells" }),
    cellsTable(r),
  ];
  const whole = r.cells.filter((c) => String(c.key).endsWith("_all"));
  if (whole.length > 1) {
    const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    svg.setAttribute("class", "chart");
    parts.push(el("figure", {}, el("figcaption", { text: "p99 latency (ms) vs output tok/s, by concurrency" }), svg));
    requestAnimationFrame(() =>
      drawLines(
        svg,
        [
          { name: "TTFT p99", points: whole.map((c) => [c.throughput.output_tok_per_s, c.latency_ms.ttft.p99]) },
          { name: "E2E p99", points: whole.map((c) => [c.throughput.output_tok_per_s, c.latency_ms.e2e.p99]) },
        ],
        { label: "latency against throughput" },
      ),
    );
  }
  if (s.records?.length) {
    const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
    svg.setAttribute("class", "chart");
    svg.id = `ttft-cdf-${side}`;
    parts.push(el("figure", {}, el("figcaption", { text: "TTFT CDF of ok requests (ms → % of requests), from records.jsonl" }), svg));
    requestAnimationFrame(() => drawLines(svg, [{ name: "TTFT", points: ttftCdf(s.records) }], { label: "TTFT CDF" }));
  }
  for (const p of s.plots)
    parts.push(el("figure", {}, el("figcaption", { text: `${p.name} (bench serve's plot)` }), el("img", { src: p.url, alt: `${p.name}, drawn by bench serve` })));
  target.replaceChildren(...parts);
  target.dataset.loaded = "true";
}

function renderTicket(t) {
  const box = $("ticket");
  box.hidden = false;
  box.dataset.decision = t.decision;
  const metrics = Object.keys(t.before || {});
  const rows = metrics.map((m) => [m, t.before[m], t.after[m], change(t.before[m], t.after[m])]);
  const yamlUrl = URL.createObjectURL(new Blob([t.yaml], { type: "application/yaml" }));
  box.replaceChildren(
    el("h3", {}, "Optimization ticket: ", el("span", { class: "decision", id: "ticket-decision", text: t.decision })),
    el("p", { id: "ticket-reason", text: t.reason }),
    el("p", { class: "note", text: `Next: ${t.next}` }),
    table(["metric", "A (before)", "B (after)", "change"], rows, "before and after"),
    el("h4", { text: "Gates" }),
    table(["gate", "status", "detail"], t.gates.map((g) => [g.name, g.status, g.detail]), "gates"),
    el("p", {}, `Improved: ${t.improved.join(", ") || "nothing"}. Regressed: ${t.regressed.join(", ") || "nothing"}.`),
    el("details", {}, el("summary", { text: "Ticket as YAML (as tokenmill bench compare writes it)" }), el("pre", { text: t.yaml })),
    el("a", { href: yamlUrl, download: "ticket.yaml", text: "Download ticket.yaml" }),
  );
}

async function updateTicket() {
  const box = $("ticket");
  if (!slots.a || !slots.b) {
    box.hidden = true;
    return;
  }
  try {
    const response = await postJson("/console/api/ticket", {
      before: slots.a.report,
      after: slots.b.report,
      change: $("change").value,
      slice: $("slice").value,
    });
    renderTicket(await response.json());
  } catch (e) {
    box.hidden = false;
    box.dataset.decision = "error";
    box.replaceChildren(el("h3", { text: "No ticket" }), el("p", { class: "error", id: "ticket-error", text: e.message }));
  }
}

async function load(side, loader) {
  const target = $(`report-${side}`);
  try {
    const s = await loader();
    if (!isReport(s.report)) throw new Error(`${s.name} is not a bench serve report (no overall, cells and traffic_shape)`);
    slots[side] = s;
    renderReport(side);
  } catch (e) {
    slots[side] = null;
    target.replaceChildren(el("p", { class: "error", role: "alert", text: e.message }));
    target.dataset.loaded = "false";
  }
  await updateTicket();
}

export function initReports() {
  for (const side of ["a", "b"]) {
    $(`file-${side}`).addEventListener("change", (e) => {
      const file = e.target.files[0];
      if (file) load(side, async () => ({ name: file.name, report: await readJson(file), records: null, plots: [] }));
    });
    $(`dir-${side}`).addEventListener("change", (e) => {
      if (e.target.files.length) load(side, () => fromDirectory(e.target.files));
    });
  }
  $("change").addEventListener("change", updateTicket);
  $("slice").addEventListener("change", updateTicket);
}

