// Live updates (docs/workbench.md): the knowledge base's event stream read with fetch() (it sends
// the Authorization header, which EventSource cannot), with polling as the fallback. A document
// event repaints its row; the details are fetched in batches.

import { ApiError, api, authHeaders } from "./api.js";
import { openDocument } from "./docview.js";
import { loadPage, removeRow, updateRow } from "./documents.js";
import { t } from "./i18n.js";
import { $, emit, on, POLL_MS, state } from "./state.js";
import { isWorking } from "./statuses.js";

function setLive(mode) {
  state.live = mode;
  const el = $("live");
  el.className = `live live-${mode}`;
  el.textContent = mode === "listen" ? t("live_on") : mode === "poll" ? t("live_polling") : "";
}

on("language", () => setLive(state.live));
on("stale", refreshSoon);  // a row the list read older than an event (documents.js)
on("changed", scheduleCounts);  // an action changed documents (actions.js)

export function stopLive() {
  if (state.stream) state.stream.abort();
  state.stream = null;
  clearInterval(state.pollTimer);
  state.pollTimer = null;
  setLive("off");
}

function startPolling() {
  if (state.pollTimer) return;
  setLive("poll");
  state.pollTimer = setInterval(() => { if (state.kb) loadPage().catch(() => {}); }, POLL_MS);
}

export async function startLive() {
  const kbId = state.kb.id;
  const ctl = new AbortController();
  state.stream = ctl;
  let failures = 0;
  while (!ctl.signal.aborted && state.kb && state.kb.id === kbId) {
    let reconnect = true;
    try {
      const res = await fetch(`/api/knowledge-bases/${kbId}/events`, {
        headers: authHeaders({ Accept: "text/event-stream" }), signal: ctl.signal,
      });
      if (!res.ok || !res.body) throw new Error(`HTTP ${res.status}`);
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value;
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const frame = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          const r = onFrame(frame);
          if (r === "ready") {
            failures = 0;
            clearInterval(state.pollTimer);
            state.pollTimer = null;
            setLive("listen");
          } else if (r === "fallback") reconnect = false;
        }
      }
    } catch {
      if (ctl.signal.aborted) return;
      failures++;
    }
    if (ctl.signal.aborted) return;
    if (!reconnect || failures >= 3) { startPolling(); if (!reconnect) return; }
    // the stream ended (normal every few seconds) or failed: catch up, then listen again
    loadPage().catch(() => {});
    await new Promise((r) => setTimeout(r, failures ? Math.min(30000, 1000 * 2 ** failures) : 100));
  }
}

function onFrame(frame) {
  let event = "message", data = "";
  for (const line of frame.split("\n")) {
    if (line.startsWith("event:")) event = line.slice(6).trim();
    else if (line.startsWith("data:")) data += line.slice(5).trim();
  }
  if (event === "ready") return "ready";
  if (event === "fallback") return "fallback";
  if (event === "resync") { loadPage().catch(() => {}); return "resync"; }
  if (event === "document") {
    try { onDocumentEvent(JSON.parse(data)); } catch { /* malformed */ }
  }
  return event;
}

function onDocumentEvent(ev) {
  scheduleCounts();
  if (ev.status === "REMOVED") {
    removeRow(ev.id);
    return;
  }
  state.eventSeq.set(ev.id, ++state.eventClock);
  const known = state.rows.get(ev.id);
  // A stage a worker is in is painted at once (entering it clears any stale error); a stable or
  // queued status waits for the fetch below, so FAILED never shows without its reason.
  if (known && ev.status && known.status !== ev.status && isWorking(ev.status)) {
    updateRow({ ...known, status: ev.status, error_message: null });
  }
  if (known || (ev.op === "I" && state.cursors.length === 1)) refreshSoon(ev.id);
}

/** Fetch the document again in the next batch (every 250 ms) and repaint its row. */
export function refreshSoon(id) {
  state.pending.add(id);
  if (!state.pendingTimer) state.pendingTimer = setTimeout(flushPending, 250);
}

async function flushPending() {
  state.pendingTimer = null;
  const ids = [...state.pending];
  state.pending.clear();
  if (ids.length > 20) return loadPage().catch(() => {});
  await Promise.all(ids.map(async (id) => {
    const seq = state.eventSeq.get(id);
    try {
      const doc = await api("GET", `/api/documents/${id}`);
      if (state.eventSeq.get(id) !== seq) return;  // a newer event came meanwhile: its own fetch follows
      if (state.kb && doc.knowledge_base_id === state.kb.id) updateRow(doc);
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) removeRow(id);
    }
  }));
  if ($("doc-dialog").open && ids.includes($("doc-dialog").dataset.id)) openDocument($("doc-dialog").dataset.id, true);
}

export function scheduleCounts() {
  if (state.countsTimer) return;
  state.countsTimer = setTimeout(() => { state.countsTimer = null; emit("counts-due"); }, 500);  // kbs.js
}
