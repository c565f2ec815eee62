// The document view (a modal dialog): facts, whether search serves it, the stage timeline of the
// current run, warnings, the duplicate verdict, attempts and errors, the chunk preview from the
// snapshot (a cited chunk is always shown and outlined) and the extracted images.

import { download, runAction } from "./actions.js";
import { api, authedBlobUrl, errorText } from "./api.js";
import { h, say } from "./dom.js";
import { fmtSeconds, fmtTime, t } from "./i18n.js";
import { metadataSection } from "./metadata.js";
import { searchabilityLabel } from "./searchability.js";
import { $, on, state } from "./state.js";
import { isStable, statusLabel } from "./statuses.js";

export async function openDocument(id, refresh, focusChunk) {
  const dlg = $("doc-dialog");
  dlg.dataset.id = id;
  if (!refresh) {
    for (const u of state.blobUrls.splice(0)) URL.revokeObjectURL(u);
    $("doc-body").replaceChildren(h("p", { class: "muted", text: t("loading") }));
    if (!dlg.open) dlg.showModal();
  }
  let doc;
  try { doc = await api("GET", `/api/documents/${id}`); } catch (err) {
    $("doc-body").replaceChildren(h("p", { class: "error", text: errorText(err) }));
    return;
  }
  $("doc-title").textContent = doc.filename;
  const chunkBox = h("div", { class: "chunks" }, h("p", { class: "muted", text: t("loading") }));
  const assetBox = h("div", { class: "assets" });
  $("doc-body").replaceChildren(...documentBody(doc), ...metadataSection(doc, () => openDocument(id, true)),
    h("h3", { text: t("chunk_preview") }), chunkBox,
    h("h3", { text: t("images") }), assetBox,
    h("div", { class: "dialog-actions" },
      h("button", { type: "button", onclick: () => reparse(doc.id), text: t("reparse") }),
      h("button", { type: "button", class: "secondary", onclick: () => download(doc.id, doc.filename), text: t("download") })),
    h("p", { id: "doc-notice", class: "notice", role: "alert", hidden: true }));
  loadSnapshot(doc, chunkBox, assetBox, focusChunk);
}

function documentBody(doc) {
  const body = [h("dl", { class: "facts" },
    h("dt", { text: t("status") }), h("dd", {}, h("span", { class: `badge st-${doc.status}`, text: statusLabel(doc.status) })),
    h("dt", { text: t("searchability") }), h("dd", {}, searchabilityLabel(doc, true)),
    h("dt", { text: t("attempts") }), h("dd", { text: `${doc.attempts}/${doc.max_attempts}` }),
    ...(doc.metadata?.source?.path ? [h("dt", { text: t("source_path") }), h("dd", { class: "source-path", text: doc.metadata.source.path })] : []),
    h("dt", { text: t("size") }), h("dd", { text: `${doc.size_bytes.toLocaleString()} B · ${doc.mime_type}` }),
    h("dt", { text: t("parser") }), h("dd", { text: doc.parser ? `${doc.parser.name} ${doc.parser.version || ""}` : "—" }),
    h("dt", { text: t("chunks") }), h("dd", { text: String(doc.chunk_count) }),
    h("dt", { text: t("created") }), h("dd", { text: fmtTime(doc.created_at) }),
    h("dt", { text: t("updated") }), h("dd", { text: fmtTime(doc.updated_at) }))];
  if (doc.error_message) body.push(h("p", { class: "error", role: "note", text: `${t("last_error")}: ${doc.error_message}` }));
  if (doc.warnings?.length) {
    body.push(h("h3", { text: t("warnings") }));
    body.push(h("ul", { class: "warnings" }, ...doc.warnings.map((w) => h("li", { text: w }))));
  }
  if (doc.duplicate_of || doc.status === "OUTDATED") {
    body.push(h("p", { class: "notice-inline" }, t("duplicate_verdict"), " ",
      doc.duplicate_of ? h("button", { type: "button", class: "link", text: doc.duplicate_of, onclick: () => openDocument(doc.duplicate_of) }) : ""));
  }
  body.push(h("h3", { text: t("timeline") }));
  body.push(doc.timings.length ? h("ol", { class: "timeline" }, ...doc.timings.map((s) => h("li", { class: `st-line st-${s.stage}` },
    h("span", { class: `badge st-${s.stage}`, text: statusLabel(s.stage) }),
    h("time", { datetime: s.started_at, text: fmtTime(s.started_at) }),
    h("span", { class: "muted", text: stageTime(s) })))) : h("p", { class: "muted", text: "—" }));
  body.push(h("h3", { text: t("error_history") }));
  const hist = doc.error_history || [];
  body.push(hist.length ? h("ol", { class: "history" }, ...hist.map((e) => h("li", {},
    h("span", { class: "muted", text: `${e.at ? fmtTime(e.at) : ""} ${e.attempt !== undefined ? `#${e.attempt}` : ""} ` }),
    h("span", { text: e.error || e.message || JSON.stringify(e) })))) : h("p", { class: "muted", text: t("no_errors") }));
  return body;
}

// how long a stage took; the last one (no end yet) is running, or for PENDING waiting for a worker.
// The API ends a timeline with the document's status, so a FAILED one never reads as running.
function stageTime(s) {
  if (isStable(s.stage)) return "";
  if (s.seconds === null || s.seconds === undefined) return s.stage === "PENDING" ? t("waiting_now") : t("running_now");
  return fmtSeconds(s.seconds);
}

async function reparse(id) {
  const r = await runAction(id, "reindex", {});
  if (r.outcome !== "ok") showDialogNotice(r.message); else openDocument(id, true);
}

function showDialogNotice(text) {
  const n = $("doc-notice");
  if (!n) return;
  say(n, text);
  n.hidden = false;
}

export function locatorText(loc) {
  const parts = [];
  if (loc.page) parts.push(t("page_x", { page: loc.page }));
  if (loc.page_start) parts.push(t("pages_x", { from: loc.page_start, to: loc.page_end ?? loc.page_start }));
  if (loc.table) parts.push(t("table_x", { table: loc.table }));
  if (loc.row_start) parts.push(t("rows_x", { from: loc.row_start, to: loc.row_end ?? loc.row_start }));
  if (loc.line_start) parts.push(t("lines_x", { from: loc.line_start, to: loc.line_end ?? loc.line_start }));
  if (loc.paragraph_start && !loc.line_start) {
    const to = loc.paragraph_end ?? loc.paragraph_start;
    parts.push(to === loc.paragraph_start ? t("paragraph_x", { n: to }) : t("paragraphs_x", { from: loc.paragraph_start, to }));
  }
  if (loc.anchor) parts.push(loc.anchor.includes("#") ? loc.anchor : `#${loc.anchor}`);
  return parts.join(" · ");
}

async function loadSnapshot(doc, chunkBox, assetBox, focusChunk) {
  let snap;
  try { snap = await api("GET", `/api/documents/${doc.id}/snapshot`); } catch (err) {
    chunkBox.replaceChildren(h("p", { class: "muted", text: err.status === 404 ? t("no_snapshot") : errorText(err) }));
    return;
  }
  const chunks = snap.chunks || [];
  const shown = chunks.slice(0, 50);
  const focus = focusChunk ? chunks.find((c) => c.id === focusChunk) : null;
  if (focus && !shown.includes(focus)) shown.push(focus);  // a cited chunk is always shown
  chunkBox.replaceChildren(
    h("p", { class: "muted", text: t("chunks_shown", { shown: shown.length, total: chunks.length }) }),
    h("ol", { class: "chunk-list" }, ...shown.map((c) => h("li", { class: c === focus ? "chunk focus" : "chunk", id: `chunk-${c.id}` },
      h("div", { class: "chunk-meta" },
        h("span", { class: "heading-path", text: (c.heading_path || []).join(" › ") || t("no_heading") }),
        h("span", { class: "muted", text: [locatorText(c.locator || {}), t("tokens_n", { n: c.token_count })].filter(Boolean).join(" · ") })),
      h("p", { class: "chunk-text", text: c.content.length > 600 ? `${c.content.slice(0, 600)}…` : c.content })))));
  const assets = new Map();
  for (const c of chunks) for (const a of (c.metadata && c.metadata.assets) || []) assets.set(a.id, a);
  showImages([...assets.values()].slice(0, 24), assetBox, t("no_images"));
  if (focus) document.getElementById(`chunk-${focus.id}`)?.scrollIntoView({ block: "center" });
}

export function showImages(assets, box, emptyText) {
  if (!assets.length) { if (emptyText) box.replaceChildren(h("p", { class: "muted", text: emptyText })); return; }
  box.replaceChildren(...assets.map((a) => {
    const img = h("img", { alt: a.description || t("image"), loading: "lazy" });
    authedBlobUrl(a.url).then((u) => { img.src = u; }).catch(() => { img.alt = `${t("image")} (${t("unavailable")})`; });
    return h("figure", {}, img, a.description ? h("figcaption", { text: a.description }) : null);
  }));
}

export function wireDocumentView() {
  on("open", openDocument);  // a row's file name (documents.js)
  $("doc-close").addEventListener("click", () => $("doc-dialog").close());
  $("doc-dialog").addEventListener("close", () => { for (const u of state.blobUrls.splice(0)) URL.revokeObjectURL(u); });
  on("language", () => { if (state.key && $("doc-dialog").open) openDocument($("doc-dialog").dataset.id, true); });
}
