// Knowledge bases: the list with document counts per status, create, open, delete.

import { api, errorText } from "./api.js";
import { loadPage, renderStatusFilter } from "./documents.js";
import { confirmDialog, h, say } from "./dom.js";
import { t } from "./i18n.js";
import { startLive, stopLive } from "./live.js";
import { hideNotice, reportError, showNotice } from "./notice.js";
import { $, emit, on, state } from "./state.js";
import { isStable } from "./statuses.js";
import { showTab } from "./tabs.js";

export async function loadKbs() {
  const list = await api("GET", "/api/knowledge-bases");
  const details = await Promise.all(list.items.slice(0, 100).map(
    (kb) => api("GET", `/api/knowledge-bases/${kb.id}`).catch(() => kb)));
  state.kbs = details.concat(list.items.slice(100));
  renderKbList();
}

const total = (counts) => Object.values(counts || {}).reduce((a, b) => a + b, 0);

function countsSummary(counts) {
  counts = counts || {};
  const active = Object.entries(counts).filter(([s]) => !isStable(s)).reduce((a, [, n]) => a + n, 0);
  return t("counts_summary", { total: total(counts), ready: counts.READY || 0, failed: counts.FAILED || 0, active });
}

export function renderKbList() {
  const current = (kb) => state.kb && state.kb.id === kb.id;
  $("kb-list").replaceChildren(...state.kbs.map((kb) => h("li", {},
    h("button", {
      type: "button", class: `kb-item${current(kb) ? " current" : ""}`,
      "aria-current": current(kb) ? "true" : null, onclick: () => openKb(kb.id).catch(reportError),
    },
    h("span", { class: "kb-name", text: kb.name }),
    kb.deleting ? h("span", { class: "badge st-DELETING", text: t("being_deleted") }) : null,
    h("span", { class: "kb-counts muted", text: countsSummary(kb.document_counts) })))));
  $("kb-empty").hidden = state.kbs.length > 0;
}

async function createKb(ev) {
  ev.preventDefault();
  say($("kb-create-error"), "");
  const num = (id) => ($(id).value === "" ? undefined : Number($(id).value));
  const settings = {
    chunk_size_tokens: num("kb-chunk-size"), chunk_overlap_tokens: num("kb-chunk-overlap"),
    dedup_mode: $("kb-dedup").value, near_duplicate_threshold: num("kb-threshold"),
  };
  try {
    const kb = await api("POST", "/api/knowledge-bases",
      { name: $("kb-name").value, description: $("kb-description").value, settings });
    $("kb-create").reset();
    $("kb-create-box").open = false;
    await loadKbs();
    await openKb(kb.id);
  } catch (err) {  // a 403: only an admin key creates knowledge bases
    say($("kb-create-error"), () => errorText(err));
  }
}

export async function openKb(id) {
  stopLive();
  state.kb = await api("GET", `/api/knowledge-bases/${id}`);
  state.cursors = [null];
  state.selected.clear();
  $("status-filter").value = "";
  $("name-filter").value = "";
  $("welcome").hidden = true;
  $("kb-view").hidden = false;
  $("uploads").replaceChildren();
  hideNotice();
  renderKbHead();
  renderKbList();
  renderStatusFilter();
  showTab("documents");
  emit("kb", state.kb.id);
  await loadPage();
  startLive();
}

export function renderKbHead() {
  const kb = state.kb;
  $("kb-title").textContent = kb.name;
  $("kb-description-text").textContent = kb.description || "";
  $("kb-counts").textContent = countsSummary(kb.document_counts);
}

export async function refreshCounts() {
  if (!state.kb) return;
  try {
    const kb = await api("GET", `/api/knowledge-bases/${state.kb.id}`);
    if (!state.kb || kb.id !== state.kb.id) return;
    state.kb = kb;
    const i = state.kbs.findIndex((k) => k.id === kb.id);
    if (i >= 0) state.kbs[i] = kb;
    renderKbHead();
    renderKbList();
    renderStatusFilter();
  } catch { /* shown elsewhere */ }
}

async function deleteKb() {
  const kb = state.kb;
  const ok = await confirmDialog(t("delete_kb_title", { name: kb.name }),
    t("delete_kb_text", { name: kb.name, count: total(kb.document_counts) }), t("delete_knowledge_base"));
  if (!ok) return;
  try {
    await api("DELETE", `/api/knowledge-bases/${kb.id}`);
    stopLive();
    state.kb = null;
    $("kb-view").hidden = true;
    $("welcome").hidden = false;
    emit("kb", null);
    await loadKbs();
  } catch (err) {
    showNotice(() => errorText(err));
  }
}

export function wireKbs() {
  $("kb-create").addEventListener("submit", createKb);
  $("kb-dedup").addEventListener("change", () => { $("kb-threshold").disabled = $("kb-dedup").value !== "near"; });
  $("kb-threshold").disabled = $("kb-dedup").value !== "near";
  $("kb-delete").addEventListener("click", deleteKb);
  on("counts", renderKbHead);  // a page of the list brought the knowledge base's counts (documents.js)
  on("counts-due", refreshCounts);  // documents changed: read the counts again (live.js)
  on("language", () => {
    for (const id of ["kb-chunk-size", "kb-chunk-overlap"]) $(id).placeholder = t("default");
    if (!state.key) return;
    renderKbList();
    if (state.kb) renderKbHead();
  });
}
