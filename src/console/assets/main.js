// The console's entry point: tabs (keyboard as the WAI-ARIA tabs pattern:
// arrows, Home, End), the header badge, and the three tabs' start.

import { changeKey } from "./api.js";
import { initChat, loadModels } from "./chat.js";
import { startDashboard } from "./dashboard.js";
import { initReports } from "./reports.js";

const $ = (id) => document.getElementById(id);
let dashboard = null;

function showNotice(text) {
  $("notice").textContent = text;
  $("notice").hidden = !text;
}

function selectTab(tab) {
  for (const t of document.querySelectorAll("[role=tab]")) {
    const selected = t === tab;
    t.setAttribute("aria-selected", String(selected));
    t.tabIndex = selected ? 0 : -1;
    $(t.getAttribute("aria-controls")).hidden = !selected;
  }
  if (tab.id === "tab-dashboard") dashboard?.redraw();
  location.hash = tab.id.replace("tab-", "");
}

function initTabs() {
  const tabs = [...document.querySelectorAll("[role=tab]")];
  tabs.forEach((tab, i) => {
    tab.addEventListener("click", () => selectTab(tab));
    tab.addEventListener("keydown", (e) => {
      const next = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[e.key];
      if (next === undefined) return;
      e.preventDefault();
      const target = tabs[(next + tabs.length) % tabs.length];
      target.focus();
      selectTab(target);
    });
  });
  const wanted = tabs.find((t) => t.id === `tab-${location.hash.slice(1)}`);
  if (wanted) selectTab(wanted);
}

function badge(status, error) {
  if (error) {
    $("server-badge").textContent = `server: ${error.message}`;
    return;
  }
  const c = status.server;
  $("server-badge").textContent = c
    ? `${c.model} · ${status.state} · ${c.weights?.[0]?.type ?? ""} · ${c.isa} · ${c.threads} threads`
    : `${status.state}`;
  $("server-badge").dataset.state = status.state;
}

function start() {
  dashboard?.stop();
  dashboard = startDashboard(badge);
}

async function main() {
  initTabs();
  initReports();
  $("key-button").addEventListener("click", async () => {
    if (await changeKey()) {
      showNotice("");
      start();
      loadModels().catch((e) => showNotice(`Models could not be listed: ${e.message}`));
    }
  });
  start();
  try {
    await initChat();
  } catch (e) {
    showNotice(`Models could not be listed: ${e.message}`);
  }
}

main();
