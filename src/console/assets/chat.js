// The Chat tab: a conversation through POST /v1/chat/completions, streamed,
// with the sampling settings, an output format (structured output) and the
// served adapters; Stop aborts the request, which makes the server cancel
// it and free its KV blocks.

import { getJson, postJson, readEvents } from "./api.js";
import { el, ms, num } from "./format.js";

const $ = (id) => document.getElementById(id);

const history = []; // {role, content} of the conversation so far
let controller = null; // the request being streamed, if any

function setBusy(busy) {
  $("send").disabled = busy;
  $("stop").disabled = !busy;
  $("prompt").setAttribute("aria-busy", String(busy));
}

function addMessage(role, text, state) {
  const content = el("div", { class: "content", text });
  const stats = el("div", { class: "stats" });
  const item = el(
    "li",
    { class: "message", "data-role": role, "data-state": state },
    el("div", { class: "who", text: role === "user" ? "You" : "Model" }),
    content,
    stats,
  );
  $("messages").append(item);
  item.scrollIntoView({ block: "end" });
  return { item, content, stats };
}

// The request body from the settings; throws Error with a message for a
// setting that cannot be sent (e.g. a schema that is not JSON).
function requestBody() {
  const messages = [];
  const system = $("system").value.trim();
  if (system) messages.push({ role: "system", content: system });
  messages.push(...history);
  const body = {
    model: $("model").value,
    messages,
    stream: true,
    stream_options: { include_usage: true },
    temperature: Number($("temperature").value),
    top_p: Number($("top-p").value),
    max_tokens: Number($("max-tokens").value),
  };
  if ($("seed").value !== "") body.seed = Number($("seed").value);
  const format = $("response-format").value;
  if (format === "json_object") body.response_format = { type: "json_object" };
  if (format === "json_schema") {
    let schema;
    try {
      schema = JSON.parse($("schema").value);
    } catch (e) {
      throw new Error(`The JSON schema is not valid JSON: ${e.message}`);
    }
    body.response_format = { type: "json_schema", json_schema: { name: "console", schema, strict: true } };
  }
  return body;
}

// One line under a reply: the server's own timings when it sent them (the
// last chunk), else what this page measured.
function showStats(view, r) {
  const t = r.timings || {};
  const u = r.usage || {};
  const completion = u.completion_tokens ?? t.completion_tokens ?? r.chunks;
  const prompt = u.prompt_tokens ?? t.prompt_tokens;
  const cached = u.prompt_tokens_details?.cached_tokens ?? t.cached_prompt_tokens;
  const ttft = t.ttft_ms ?? r.clientTtftMs;
  const tps = t.decode_tokens_per_s ?? r.clientTokPerS;
  const parts = [];
  if (prompt !== undefined) parts.push(`${prompt} prompt tokens${cached ? ` (${cached} cached)` : ""}`);
  parts.push(`${completion} tokens`);
  if (ttft !== undefined && ttft !== null) parts.push(`TTFT ${ms(ttft)}`);
  if (tps) parts.push(`${num(tps)} tok/s`);
  if (r.finish) parts.push(`finish: ${r.finish}`);
  view.stats.textContent = parts.join(" · ");
  const data = view.item.dataset;
  data.completionTokens = String(completion);
  if (prompt !== undefined) data.promptTokens = String(prompt);
  if (cached !== undefined) data.cachedTokens = String(cached);
  if (ttft !== undefined && ttft !== null) data.ttftMs = String(ttft);
  if (r.finish) data.finishReason = r.finish;
}

async function send() {
  const text = $("prompt").value.trim();
  if (!text || controller) return;
  let body;
  history.push({ role: "user", content: text });
  try {
    body = requestBody();
  } catch (e) {
    history.pop();
    addMessage("assistant", e.message, "error");
    return;
  }
  addMessage("user", text, "done");
  $("prompt").value = "";
  const view = addMessage("assistant", "", "streaming");
  controller = new AbortController();
  setBusy(true);
  const started = performance.now();
  const r = { chunks: 0, text: "", finish: null, timings: null, usage: null, clientTtftMs: null };
  try {
    const response = await postJson("/v1/chat/completions", body, controller.signal);
    await readEvents(response, (event) => {
      for (const choice of event.choices || []) {
        const piece = choice.delta?.content;
        if (piece) {
          if (r.clientTtftMs === null) r.clientTtftMs = performance.now() - started;
          r.text += piece;
          r.chunks += 1;
          view.content.textContent = r.text;
        }
        if (choice.finish_reason) r.finish = choice.finish_reason;
        if (choice.timings) r.timings = choice.timings;
      }
      if (event.usage) r.usage = event.usage;
      if (event.timings) r.timings = event.timings;
    });
    view.item.dataset.state = "done";
  } catch (e) {
    if (e.name === "AbortError") {
      view.item.dataset.state = "stopped";
      r.finish = "stopped";
    } else {
      view.item.dataset.state = "error";
      view.content.textContent = r.text ? `${r.text}\n\n${e.message}` : e.message;
    }
  } finally {
    if (r.clientTtftMs !== null && r.chunks > 1) {
      r.clientTokPerS = ((r.chunks - 1) * 1000) / (performance.now() - started - r.clientTtftMs);
    }
    showStats(view, r);
    if (r.text) history.push({ role: "assistant", content: r.text });
    else history.pop(); // nothing came back: the user's message can be sent again
    controller = null;
    setBusy(false);
    $("prompt").focus();
  }
}

// The model list: served names first, adapters (LoRA, with a parent) in
// their own group; a note when the model is a base model or has no chat
// template.
export async function loadModels() {
  const list = await getJson("/v1/models");
  const select = $("model");
  select.replaceChildren();
  const bases = list.data.filter((m) => !m.parent);
  const adapters = list.data.filter((m) => m.parent);
  for (const m of bases) select.append(el("option", { value: m.id, text: m.id }));
  if (adapters.length) {
    const group = el("optgroup", { label: "LoRA adapters" });
    for (const m of adapters) group.append(el("option", { value: m.id, text: `${m.id} (on ${m.parent})` }));
    select.append(group);
  }
  const first = bases[0] || {};
  const notes = [];
  if (first.base_model)
    notes.push(
      "This is a pretrained base model, not an instruction-tuned one: chat works, but replies continue the text rather than follow instructions.",
    );
  if (first.chat_template === null) notes.push("The model has no chat template: chat requests will be refused.");
  $("model-note").textContent = notes.join(" ");
  $("model-note").hidden = notes.length === 0;
  return list;
}

export async function initChat() {
  $("chat-form").addEventListener("submit", (e) => {
    e.preventDefault();
    send();
  });
  $("prompt").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      send();
    }
  });
  $("stop").addEventListener("click", () => controller?.abort());
  $("clear").addEventListener("click", () => {
    controller?.abort();
    history.length = 0;
    $("messages").replaceChildren();
  });
  $("response-format").addEventListener("change", () => {
    $("schema-field").hidden = $("response-format").value !== "json_schema";
  });
  return loadModels();
}
