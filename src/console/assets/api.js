// Talking to the server: the API key (asked once, kept in this tab's
// session storage), JSON requests, and OpenAI-style Server-Sent Events.

const KEY_STORAGE = "tokenmill.apiKey";

export class ApiError extends Error {
  constructor(status, message, code) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

// The key dialog: resolves with the key the user typed, or null when they
// cancelled. One dialog at a time, however many requests asked for it.
let pendingKey = null;
function askForKey(message) {
  if (pendingKey) return pendingKey;
  const dialog = document.getElementById("key-dialog");
  const form = document.getElementById("key-form");
  const input = document.getElementById("key-input");
  const error = document.getElementById("key-error");
  const cancel = document.getElementById("key-cancel");
  error.textContent = message || "";
  error.hidden = !message;
  input.value = "";
  pendingKey = new Promise((resolve) => {
    const done = (key) => {
      form.removeEventListener("submit", onSubmit);
      cancel.removeEventListener("click", onCancel);
      dialog.removeEventListener("cancel", onCancel);
      if (dialog.open) dialog.close();
      pendingKey = null;
      resolve(key);
    };
    const onSubmit = (e) => {
      e.preventDefault();
      done(input.value.trim() || null);
    };
    const onCancel = (e) => {
      e.preventDefault();
      done(null);
    };
    form.addEventListener("submit", onSubmit);
    cancel.addEventListener("click", onCancel);
    dialog.addEventListener("cancel", onCancel);
  });
  dialog.showModal();
  input.focus();
  return pendingKey;
}

export function storedKey() {
  return sessionStorage.getItem(KEY_STORAGE) || "";
}

// Forgets the key and asks for a new one (the header's "API key…" button).
export async function changeKey() {
  const key = await askForKey("");
  if (key) sessionStorage.setItem(KEY_STORAGE, key);
  return key;
}

async function errorFrom(response) {
  let message = `${response.status} ${response.statusText}`;
  let code = "";
  try {
    const body = await response.json();
    if (body && body.error) {
      message = body.error.message || message;
      code = body.error.code || "";
    }
  } catch (_) {
    // not JSON: the status line says it
  }
  return new ApiError(response.status, message, code);
}

// fetch() with the key. On 401 asks for a key (saying why when one was
// sent and refused) and retries with it; gives up when the user cancels.
export async function request(path, options = {}) {
  for (;;) {
    const headers = new Headers(options.headers || {});
    const key = storedKey();
    if (key) headers.set("Authorization", `Bearer ${key}`);
    const response = await fetch(path, { ...options, headers });
    if (response.status !== 401) {
      if (!response.ok) throw await errorFrom(response);
      return response;
    }
    const refused = await errorFrom(response);
    document.getElementById("key-button").hidden = false;
    const reason = key ? `The server refused this key: ${refused.message}` : "";
    const next = await askForKey(reason);
    if (!next) throw new ApiError(401, key ? `API key refused: ${refused.message}` : "This server needs an API key.", "invalid_api_key");
    sessionStorage.setItem(KEY_STORAGE, next);
  }
}

export async function getJson(path) {
  return (await request(path)).json();
}

export async function postJson(path, body, signal) {
  const response = await request(path, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
    signal,
  });
  return response;
}

// Reads an SSE body and calls onEvent with each `data:` payload parsed as
// JSON, until `data: [DONE]` or the end of the stream. Comment lines
// (keep-alives) are skipped.
export async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = event
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).replace(/^ /, ""))
        .join("\n");
      if (!data) continue;
      if (data === "[DONE]") return;
      const parsed = JSON.parse(data);
      if (parsed.error) throw new ApiError(0, parsed.error.message || "stream error", parsed.error.code || "");
      onEvent(parsed);
    }
  }
}
