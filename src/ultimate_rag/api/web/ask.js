// The "Ask" tab: a question box, the answer streamed as it is written, its citations as chips
// that open the document view at the cited chunk and page, and follow-up questions in the same
// thread (sent as `messages`). POST /api/knowledge-bases/{kb_id}/answer with stream: true
// (SPEC §10; docs/answers.md).

import { authHeaders, errorText } from "./api.js";
import { locatorText, openDocument, showImages } from "./docview.js";
import { h } from "./dom.js";
import { t } from "./i18n.js";
import { logout } from "./session.js";
import { $, on, state } from "./state.js";

const thread = { kb: null, turns: [], controller: null };
// a turn: { question, answer, citations, query, reason, grounded, invalid, unmatched, error, streaming }

// ---------- the thread ----------

function resetIfOtherKb() {
  const kb = state.kb ? state.kb.id : null;
  if (thread.kb !== kb) newThread(kb);
}

function newThread(kb) {
  if (thread.controller) thread.controller.abort();
  thread.kb = kb === undefined ? (state.kb ? state.kb.id : null) : kb;
  thread.turns = [];
  thread.controller = null;
  render();
}

function earlierTurns() {
  const messages = [];
  for (const turn of thread.turns) {
    if (turn.streaming || turn.error || !turn.answer) continue;
    messages.push({ role: "user", content: turn.question }, { role: "assistant", content: turn.answer });
  }
  return messages.slice(-12);
}

async function ask(ev) {
  ev.preventDefault();
  resetIfOtherKb();
  const question = $("ask-question").value.trim();
  if (!question || !state.kb) return;
  if (thread.controller) thread.controller.abort();
  const turn = { question, answer: "", citations: [], streaming: true };
  const messages = earlierTurns();
  thread.turns.push(turn);
  $("ask-question").value = "";
  const controller = new AbortController();
  thread.controller = controller;
  render();
  try {
    const res = await fetch(`/api/knowledge-bases/${state.kb.id}/answer`, {
      method: "POST", signal: controller.signal,
      headers: authHeaders({ "Content-Type": "application/json", Accept: "text/event-stream" }),
      body: JSON.stringify({ question, messages, top_k: 8, stream: true }),
    });
    if (res.status === 401) { logout(() => t("key_rejected")); return; }
    if (!res.ok) {
      let detail = res.statusText;
      try { detail = (await res.json()).detail ?? detail; } catch { /* not JSON */ }
      turn.error = String(detail);
    } else {
      await readEvents(res, (event, data) => onEvent(turn, event, data));
      if (turn.streaming && !turn.error) turn.error = t("ask_interrupted");
    }
  } catch (err) {
    if (err.name !== "AbortError") turn.error = errorText(err);
    else if (turn.streaming) turn.stopped = true;
  } finally {
    turn.streaming = false;
    if (thread.controller === controller) thread.controller = null;
    render();
  }
}

function onEvent(turn, event, data) {
  if (event === "citations") turn.citations = data;
  else if (event === "delta") turn.answer += data.text;
  else if (event === "done") {
    Object.assign(turn, { answer: data.answer, query: data.query, reason: data.reason, grounded: data.grounded,
      invalid: data.invalid_citations || [], unmatched: data.unmatched_identifiers || [], streaming: false });
  } else if (event === "error") { turn.error = data.detail; turn.streaming = false; }
  render();
}

async function readEvents(res, onFrame) {
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let event = "message", data = "";
      for (const line of frame.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data += line.slice(5).trim();
      }
      if (data) onFrame(event, JSON.parse(data));
    }
  }
}

// ---------- rendering ----------

function citationLabel(c) {
  return [c.source_path || c.filename, (c.heading_path || []).join(" › "), locatorText(c.locator || {})].filter(Boolean).join(" · ");
}

function chip(turn, n, short) {
  const c = turn.citations.find((x) => x.n === n);
  if (!c) return document.createTextNode("");
  return h("button", { type: "button", class: "cite-chip", dataset: { n: String(n) }, title: citationLabel(c),
    "aria-label": t("ask_open_citation", { n, source: citationLabel(c) }),
    onclick: () => openCitation(c), text: short ? String(n) : `[${n}] ${citationLabel(c)}` });
}

function answerBody(turn) {
  // the answer's text with each [n] as a chip; text is only ever set as text
  const parts = [];
  const re = /\[(\d+)\]/g;
  let last = 0, m;
  const text = turn.answer || "";
  while ((m = re.exec(text)) !== null) {
    parts.push(text.slice(last, m.index), chip(turn, Number(m[1]), true));
    last = m.index + m[0].length;
  }
  parts.push(text.slice(last));
  return h("p", { class: "ask-answer" }, ...parts.filter((p) => p !== ""));
}

function renderTurn(turn) {
  const out = [h("p", { class: "ask-question" }, h("span", { class: "who", text: t("ask_you") }), turn.question)];
  if (turn.query && turn.query !== turn.question) out.push(h("p", { class: "muted ask-query", text: t("ask_query", { query: turn.query }) }));
  if (turn.unmatched && turn.unmatched.length) out.push(h("p", { class: "notice-inline ask-unmatched", text: t("unmatched_identifiers", { ids: turn.unmatched.join(", ") }) }));
  if (turn.answer) out.push(answerBody(turn));
  // the model was given passages and cited none: the answer does not rest on the documents
  if (turn.answer && turn.grounded === false && turn.citations.length) {
    out.push(h("p", { class: "notice-inline ask-ungrounded", role: "note", text: t("ask_ungrounded") }));
  }
  if (turn.answer === null && turn.reason) out.push(h("p", { class: "notice-inline", text: t("ask_no_model") }));
  if (turn.streaming) out.push(h("p", { class: "muted ask-working", role: "status", text: turn.citations.length || turn.answer ? t("ask_writing") : t("ask_searching") }));
  if (turn.stopped) out.push(h("p", { class: "muted", text: t("ask_stopped") }));
  if (turn.error) out.push(h("p", { class: "error", role: "alert", text: t("ask_error", { detail: turn.error }) }));
  if (turn.invalid && turn.invalid.length) out.push(h("p", { class: "muted", text: t("ask_invalid", { n: turn.invalid.length }) }));
  if (turn.citations.length) {
    out.push(h("div", { class: "ask-sources" }, h("span", { class: "muted", text: t("ask_sources") }),
      h("ul", { class: "chips" }, ...turn.citations.map((c) => h("li", {}, chip(turn, c.n, false))))));
  }
  return h("li", { class: "ask-turn" }, ...out);
}

function render() {
  const list = $("ask-thread");
  if (!list) return;
  list.replaceChildren(...thread.turns.map(renderTurn));
  $("ask-empty").hidden = thread.turns.length > 0;
  const busy = Boolean(thread.controller);
  $("ask-stop").hidden = !busy;
  $("ask-new").disabled = busy || !thread.turns.length;
  const last = list.lastElementChild;
  if (last && !$("panel-ask").hidden) last.scrollIntoView({ block: "nearest" });
}

// ---------- the document view at the cited chunk ----------

async function openCitation(c) {
  await openDocument(c.document_id);
  const body = $("doc-body");
  const box = h("section", { class: "cited-passage", id: "cited-passage", "aria-label": t("ask_cited_passage", { n: c.n }) },
    h("h3", { text: t("ask_cited_passage", { n: c.n }) }),
    h("p", { class: "cite" }, h("span", { class: "cite-heading", text: (c.heading_path || []).join(" › ") }), " ",
      h("span", { class: "cite-loc muted", text: locatorText(c.locator || {}) })),
    h("p", { class: "chunk-text", text: c.content }));
  const images = h("div", { class: "assets" });
  showImages(c.assets || [], images, null);
  box.append(images);
  body.prepend(box);
  box.scrollIntoView({ block: "start" });
  markChunk(body, c);
}

function markChunk(body, c) {
  // the chunk preview loads after the document: mark the cited chunk once it is there
  const head = c.content.slice(0, 120);
  const find = () => {
    for (const li of body.querySelectorAll(".chunk-list .chunk")) {
      const text = li.querySelector(".chunk-text");
      if (text && text.textContent.startsWith(head)) { li.classList.add("cited"); li.dataset.chunkId = c.chunk_id; return true; }
    }
    return Boolean(body.querySelector(".chunk-list"));
  };
  if (find()) return;
  const watch = new MutationObserver(() => { if (find()) watch.disconnect(); });
  watch.observe(body, { childList: true, subtree: true });
  setTimeout(() => watch.disconnect(), 10000);
}

// ---------- wiring ----------

export function wireAsk() {
  $("tab-ask").addEventListener("click", () => $("ask-question").focus());
  $("ask-form").addEventListener("submit", ask);
  $("ask-question").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); $("ask-form").requestSubmit(); }
  });
  $("ask-stop").addEventListener("click", () => { if (thread.controller) thread.controller.abort(); });
  $("ask-new").addEventListener("click", () => { newThread(); $("ask-question").focus(); });
  on("tab", (name) => { if (name === "ask") { resetIfOtherKb(); render(); } });
  on("language", render);
  on("kb", (kb) => { if (thread.kb !== kb) newThread(kb); });  // another knowledge base: a new thread
  render();
}
