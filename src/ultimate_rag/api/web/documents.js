// The documents of the open knowledge base: the status filter with counts, the file-name search,
// 50 rows a page with keyset pagination, each row's status, progress, searchability and actions,
// and the selection for bulk actions. It asks the views above it through events (state.js): a row's
// action ("action"), a document to open ("open"), counts that changed ("counts"), a row to fetch
// again ("stale").

import { api } from "./api.js";
import { debounce, h } from "./dom.js";
import { fmtTime, t } from "./i18n.js";
import { reportError } from "./notice.js";
import { searchabilityLabel } from "./searchability.js";
import { $, emit, on, PAGE_SIZE, state } from "./state.js";
import { allows, isStable, statusLabel, statusNames } from "./statuses.js";

export function renderStatusFilter() {
  const sel = $("status-filter");
  const current = sel.value;
  const counts = (state.kb && state.kb.document_counts) || {};
  const total = Object.values(counts).reduce((a, b) => a + b, 0);
  sel.replaceChildren(h("option", { value: "", text: `${t("all_statuses")} (${total})` }),
    ...statusNames().map((s) => h("option", { value: s, text: `${statusLabel(s)} (${counts[s] || 0})` })));
  sel.value = current;
}

function listUrl(cursor) {
  const p = new URLSearchParams({ limit: String(PAGE_SIZE) });
  if ($("status-filter").value) p.set("status", $("status-filter").value);
  const q = $("name-filter").value.trim();
  if (q) p.set("q", q);
  if (cursor) p.set("cursor", cursor);
  return `/api/knowledge-bases/${state.kb.id}/documents?${p}`;
}

export async function loadPage() {
  if (!state.kb) return;
  const kbId = state.kb.id;
  const seq = ++state.pageSeq;
  const cursor = state.cursors[state.cursors.length - 1];
  const since = state.eventClock;
  const page = await api("GET", listUrl(cursor));
  if (!state.kb || state.kb.id !== kbId || seq !== state.pageSeq) return;  // a newer load is on its way
  // a document that changed while the list was read keeps the newer row it has, and is fetched again:
  // the list's older picture of it (an earlier stage, FAILED's reason missing) never shows
  state.rows = new Map(page.items.map((d) => {
    if (!(state.eventSeq.get(d.id) > since)) return [d.id, d];
    emit("stale", d.id);
    return [d.id, state.rows.get(d.id) || d];
  }));
  state.nextCursor = page.next_cursor;
  state.kb.document_counts = page.counts;
  for (const id of [...state.selected]) if (!state.rows.has(id)) state.selected.delete(id);
  renderRows();
  renderPager();
  emit("counts");
  renderStatusFilter();
}

// "about 4 min": seconds left, in the reader's language and a unit that fits
function duration(seconds) {
  const [value, unit] = seconds < 90 ? [Math.max(1, Math.round(seconds)), "second"]
    : seconds < 5400 ? [Math.round(seconds / 60), "minute"] : [Math.round(seconds / 360) / 10, "hour"];
  return new Intl.NumberFormat(state.lang || "en", { style: "unit", unit, unitDisplay: "short" }).format(value);
}

function progressOf(doc) {
  const p = doc.progress || {};
  if (doc.status === "READY") return { value: 1, max: 1, text: t("chunks_count", { count: doc.chunk_count }) };
  if (p.total && !isStable(doc.status)) {
    const key = p.stage === "PARSING" ? (p.eta_seconds ? "progress_pages_eta" : "progress_pages")  // OCR: pages read
      : p.waiting === "embedder" ? "progress_waiting" : "progress_chunks";
    const eta = p.eta_seconds ? duration(p.eta_seconds) : "";
    return { value: p.done || 0, max: p.total, text: t(key, { done: p.done || 0, total: p.total, eta }) };
  }
  return null;
}

export function renderRow(doc) {
  const busy = !isStable(doc.status);
  const prog = progressOf(doc);
  const check = h("input", {
    type: "checkbox", "aria-label": t("select_document", { name: doc.filename }),
    onchange: (e) => { if (e.target.checked) state.selected.add(doc.id); else state.selected.delete(doc.id); renderBulk(); },
  });
  check.checked = state.selected.has(doc.id);
  const act = (name, label, cls) => h("button", {
    type: "button", class: `small ${cls || ""}`, dataset: { action: name }, text: label,
    "aria-label": `${label}: ${doc.filename}`, onclick: () => emit("action", doc.id, name),
  });
  // re-parse and delete are always offered (a 409 explains a busy document); fail and recover
  // only where the status allows them
  return h("tr", { dataset: { id: doc.id, status: doc.status } },
    h("td", {}, check),
    // the path in the folder it was uploaded from tells apart files of the same name
    h("td", { class: "filename" }, h("button", { type: "button", class: "link", text: doc.metadata?.source?.path || doc.filename,
      title: doc.filename, onclick: () => emit("open", doc.id) })),
    h("td", { class: "status-cell" },
      h("span", { class: `badge st-${doc.status}${busy ? " busy" : ""}`, text: statusLabel(doc.status) }),
      doc.status === "PENDING" && doc.operation === "delete"
        ? h("span", { class: "muted small-text", text: ` ${t("queued_for_deletion")}` }) : null,
      searchabilityLabel(doc)),
    h("td", { class: "progress-cell" }, prog ? [h("progress", { value: prog.value, max: prog.max, "aria-label": prog.text }), h("span", { class: "muted small-text", text: prog.text })] : ""),
    h("td", { text: `${doc.attempts}/${doc.max_attempts}` }),
    h("td", { class: "error-cell", title: doc.error_message || null }, h("div", { class: "clamp", text: doc.error_message || "" })),
    h("td", { class: "nowrap", text: fmtTime(doc.updated_at) }),
    h("td", {}, h("div", { class: "actions" },
      act("reindex", t("reparse")),
      act("delete", t("delete"), "danger"),
      allows(doc.status, "fail") ? act("fail", t("fail")) : null,
      allows(doc.status, "recover") ? act("recover", t("recover")) : null,
      act("download", t("download")))));
}

export function renderRows() {
  const rows = [...state.rows.values()];
  $("doc-rows").replaceChildren(...rows.map(renderRow));
  $("doc-empty").hidden = rows.length > 0;
  $("select-all").checked = rows.length > 0 && rows.every((d) => state.selected.has(d.id));
  renderBulk();
}

export function updateRow(doc) {
  state.rows.set(doc.id, doc);
  const old = $("doc-rows").querySelector(`tr[data-id="${doc.id}"]`);
  const row = renderRow(doc);
  if (old) {
    const focusedAction = document.activeElement && old.contains(document.activeElement)
      ? document.activeElement.dataset.action : null;
    old.replaceWith(row);
    if (focusedAction) row.querySelector(`[data-action="${focusedAction}"]`)?.focus();
  } else {
    $("doc-rows").prepend(row);
    $("doc-empty").hidden = true;
  }
}

export function removeRow(id) {
  if (state.rows.delete(id)) $("doc-rows").querySelector(`tr[data-id="${id}"]`)?.remove();
}

function renderPager() {
  const n = state.cursors.length;
  $("page-label").textContent = t("page_n", { n });
  $("page-prev").disabled = n <= 1;
  $("page-first").disabled = n <= 1;
  $("page-next").disabled = !state.nextCursor;
}

export function renderBulk() {
  const n = state.selected.size;
  $("bulk").hidden = n === 0;
  $("bulk-count").textContent = t("selected_n", { n });
}

function resetAndLoad() {
  state.cursors = [null];
  loadPage().catch(reportError);
}

export function wireDocuments() {
  $("status-filter").addEventListener("change", resetAndLoad);
  $("name-filter").addEventListener("input", debounce(resetAndLoad, 300));
  $("page-next").addEventListener("click", () => {
    if (state.nextCursor) { state.cursors.push(state.nextCursor); loadPage().catch(reportError); }
  });
  $("page-prev").addEventListener("click", () => {
    if (state.cursors.length > 1) { state.cursors.pop(); loadPage().catch(reportError); }
  });
  $("page-first").addEventListener("click", resetAndLoad);
  $("select-all").addEventListener("change", (e) => {
    for (const id of state.rows.keys()) { if (e.target.checked) state.selected.add(id); else state.selected.delete(id); }
    renderRows();
  });
  on("language", () => {
    if (!state.key) return;
    renderStatusFilter();
    if (state.kb) { renderRows(); renderPager(); }
  });
}
