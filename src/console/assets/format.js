// Number and text formatting shared by the tabs.

const DASH = "—";

export function isNumber(v) {
  return typeof v === "number" && Number.isFinite(v);
}

// A value with a sensible number of digits: whole numbers as they are and
// anything from 100 up rounded (with thousands separators), 3 significant
// digits below.
export function num(v, unit = "") {
  if (!isNumber(v)) return DASH;
  const a = Math.abs(v);
  let s;
  if (a >= 100 || Number.isInteger(v)) s = Math.round(v).toLocaleString("en-US");
  else if (a >= 10) s = v.toFixed(1);
  else if (a >= 1) s = v.toFixed(2);
  else if (a === 0) s = "0";
  else s = v.toPrecision(2);
  return unit ? `${s} ${unit}` : s;
}

export function ms(v) {
  return num(v, "ms");
}

export function percent(fraction) {
  return isNumber(fraction) ? `${(fraction * 100).toFixed(1)} %` : DASH;
}

export function bytes(v) {
  if (!isNumber(v)) return DASH;
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (Math.abs(v) >= 1024 && i < units.length - 1) {
    v /= 1024;
    i += 1;
  }
  return `${i === 0 ? v : v.toFixed(1)} ${units[i]}`;
}

export function duration(seconds) {
  if (!isNumber(seconds)) return DASH;
  const s = Math.floor(seconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return h > 0 ? `${h} h ${m} min` : m > 0 ? `${m} min ${s % 60} s` : `${s} s`;
}

// A relative change "+12.3 %" (or "—" when the base is 0 or missing).
export function change(before, after) {
  if (!isNumber(before) || !isNumber(after) || before === 0) return DASH;
  const c = (after - before) / Math.abs(before);
  return `${c >= 0 ? "+" : ""}${(c * 100).toFixed(1)} %`;
}

// Creates an element with attributes and children (strings become text:
// nothing from a server or a file is ever parsed as HTML).
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("data-") || k.startsWith("aria-") || k === "role" || k === "scope" || k === "id")
      node.setAttribute(k, v);
    else node[k] = v;
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : String(c));
  }
  return node;
}

// A table: head is a list of column titles, rows lists of cells (a cell is
// a string, a number (right-aligned, formatted by num) or a Node).
export function table(head, rows, caption) {
  const cell = (tag, v, scope) => {
    const numeric = isNumber(v);
    return el(tag, { class: numeric ? "num" : undefined, scope }, numeric ? num(v) : v ?? DASH);
  };
  return el(
    "div",
    { class: "table-scroll" },
    el(
      "table",
      { class: "data" },
      caption ? el("caption", { class: "visually-hidden", text: caption }) : null,
      el("thead", {}, el("tr", {}, head.map((h) => cell("th", h, "col")))),
      el("tbody", {}, rows.map((r) => el("tr", {}, r.map((v, i) => (i === 0 ? cell("th", v, "row") : cell("td", v)))))),
    ),
  );
}
