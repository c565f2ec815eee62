// ultimate-rag workbench: plain modern JavaScript, no build step, no third-party code.
// Talks only to the /api routes with the API key kept in sessionStorage (docs/workbench.md).
"use strict";

const KEY_STORE = "ultimate-rag.key";
const LANG_STORE = "ultimate-rag.lang";
const LANGS = ["en", "zh", "ko"];
const STATUSES = ["UPLOADING", "FETCHING", "PENDING", "PARSING", "CHUNKING", "EMBEDDING", "INDEXING",
  "DELETING", "READY", "FAILED", "DELETED", "OUTDATED"];
const STABLE = new Set(["READY", "FAILED", "DELETED", "OUTDATED"]);
const RUNNING = new Set(["PARSING", "CHUNKING", "EMBEDDING", "INDEXING", "DELETING"]);
const PAGE_SIZE = 50;
const POLL_MS = 5000;

const state = {
  key: null,
  lang: "en",
  strings: {},
  fallback: {},
  kbs: [],
  kb: null,          // the selected knowledge base (with document_counts)
  rows: new Map(),   // document id -> document JSON on the current page
  selected: new Set(),
  cursors: [null],   // cursor of each page visited; the last one is the current page
  nextCursor: null,
  live: "off",       // "listen" | "poll" | "off"
  stream: null,      // AbortController of the event stream
  pollTimer: null,
  pending: new Set(),
  pendingTimer: null,
  countsTimer: null,
  blobUrls: [],
  lastSearch: null,
  pageSeq: 0,
  eventSeq: new Map(),
  messages: new Map(),  // element -> function that renders its message in the current language  // document id -> events seen, so an older fetch never overwrites newer news
};

const $ = (id) => document.getElementById(id);

// ---------- translation ----------

function t(key, vars) {
  let s = state.strings[key] ?? state.fallback[key] ?? key;
  if (vars) for (const [k, v] of Object.entries(vars)) s = s.split(`{${k}}`).join(String(v));
  return s;
}

async function loadLang(lang) {
  const get = async (l) => (await fetch(`/web/i18n/${l}.json`, { cache: "no-cache" })).json();
  if (!Object.keys(state.fallback).length) state.fallback = await get("en");
  state.strings = lang === "en" ? state.fallback : await get(lang);
  state.lang = lang;
  document.documentElement.lang = { en: "en", zh: "zh-CN", ko: "ko" }[lang];
  localStorage.setItem(LANG_STORE, lang);
  $("lang").value = lang;
  translatePage();
}

function pickLang() {
  const saved = localStorage.getItem(LANG_STORE);
  if (LANGS.includes(saved)) return saved;
  for (const l of navigator.languages || [navigator.language || "en"]) {
    const base = String(l).toLowerCase().split("-")[0];
    if (LANGS.includes(base)) return base;
  }
  return "en";
}

function translatePage() {
  for (const el of document.querySelectorAll("[data-i18n]")) el.textContent = t(el.dataset.i18n);
  for (const el of document.querySelectorAll("[data-i18n-placeholder]")) el.placeholder = t(el.dataset.i18nPlaceholder);
  for (const el of document.querySelectorAll("[data-i18n-aria-label]")) el.setAttribute("aria-label", t(el.dataset.i18nAriaLabel));
  for (const id of ["kb-chunk-size", "kb-chunk-overlap"]) $(id).placeholder = t("default");
  document.title = `ultimate-rag — ${t("workbench")}`;
  setLive(state.live);
  for (const [el, render] of state.messages) {
    if (el.isConnected) el.textContent = render(); else state.messages.delete(el);
  }
  if (state.key) {
    renderKbList();
    renderStatusFilter();
    if (state.kb) { renderKbHead(); renderRows(); renderPager(); renderSearch(); }
    if ($("doc-dialog").open) openDocument($("doc-dialog").dataset.id, true);
  }
}

const statusLabel = (s) => t(`status_${s}`);

function fmtTime(iso) {
  if (!iso) return "";
  return new Intl.DateTimeFormat(document.documentElement.lang, { dateStyle: "short", timeStyle: "medium" })
    .format(new Date(iso));
}

function fmtSeconds(s) {
  if (s === null || s === undefined) return t("running_now");
  return s < 1 ? `${Math.round(s * 1000)} ms` : `${s.toFixed(1)} s`;
}

// ---------- DOM helper ----------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) if (c !== null && c !== undefined && c !== false) el.append(c);
  return el;
}

// ---------- API ----------

class ApiError extends Error {
  constructor(status, detail) { super(detail); this.status = status; this.detail = detail; }
}

async function api(method, path, body) {
  const headers = { Authorization: `Bearer ${state.key}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (res.status === 401) { logout(() => t("key_rejected")); throw new ApiError(401, t("key_rejected")); }
  if (!res.ok) {
    let detail = res.statusText;
    try { detail = (await res.json()).detail ?? detail; } catch { /* not JSON */ }
    if (typeof detail !== "string") detail = JSON.stringify(detail);
    throw new ApiError(res.status, detail);
  }
  const type = res.headers.get("content-type") || "";
  return type.includes("json") ? res.json() : res;
}

async function authedBlobUrl(url) {
  const res = await fetch(url, { headers: { Authorization: `Bearer ${state.key}` } });
  if (!res.ok) throw new ApiError(res.status, res.statusText);
  const u = URL.createObjectURL(await res.blob());
  state.blobUrls.push(u);
  return u;
}

function errorText(err) {
  if (err instanceof ApiError) {
    if (err.status === 413) return t("error_413");
    if (err.status === 415) return `${t("error_415")} (${err.detail})`;
    if (err.status === 403) return t("error_403");
    return `${err.status}: ${err.detail}`;
  }
  return `${t("error_network")} (${err.message})`;
}

// ---------- login ----------

function readKeyFromFragment() {  // the key of a `#key=` link, taken out of the address bar
  const key = new URLSearchParams(location.hash.slice(1)).get("key");
  if (key) history.replaceState(null, "", location.pathname + location.search);
  return key;
}

// A `#key=` link never replaces a different key silently: a crafted link would otherwise sign the
// user in to someone else's knowledge bases (login CSRF). With no key stored it logs straight in.
async function acceptLinkKey(offered) {
  const current = sessionStorage.getItem(KEY_STORE);
  if (!offered || offered === current) return false;
  if (current) {
    const shown = offered.length > 12 ? `${offered.slice(0, 12)}…` : offered;
    const ok = await confirmDialog(t("switch_key_title"), t("switch_key_text", { key: shown }), t("switch_key_ok"));
    if (!ok) return false;
  }
  sessionStorage.setItem(KEY_STORE, offered);
  return true;
}

function logout(message) {  // message: a translation key, or nothing
  sessionStorage.removeItem(KEY_STORE);
  state.key = null;
  stopLive();
  $("main").hidden = true;
  $("logout").hidden = true;
  $("login").hidden = false;
  say($("login-error"), message || "");
  $("login-key").focus();
}

async function login(key) {
  state.key = key;
  try {
    await api("GET", "/api/knowledge-bases");
  } catch (err) {
    if (!(err instanceof ApiError && err.status === 401)) say($("login-error"), () => errorText(err));
    return;
  }
  sessionStorage.setItem(KEY_STORE, key);
  $("login").hidden = true;
  $("main").hidden = false;
  $("logout").hidden = false;
  await loadKbs();
}

// ---------- knowledge bases ----------

async function loadKbs() {
  const list = await api("GET", "/api/knowledge-bases");
  const details = await Promise.all(list.items.slice(0, 100).map(
    (kb) => api("GET", `/api/knowledge-bases/${kb.id}`).catch(() => kb)));
  state.kbs = details.concat(list.items.slice(100));
  renderKbList();
}

function countsSummary(counts) {
  counts = counts || {};
  const total = Object.values(counts).reduce((a, b) => a + b, 0);
  const active = Object.entries(counts).filter(([s]) => !STABLE.has(s)).reduce((a, [, n]) => a + n, 0);
  return t("counts_summary", { total, ready: counts.READY || 0, failed: counts.FAILED || 0, active });
}

function renderKbList() {
  const ul = $("kb-list");
  ul.replaceChildren(...state.kbs.map((kb) => h("li", {},
    h("button", {
      type: "button", class: `kb-item${state.kb && state.kb.id === kb.id ? " current" : ""}`,
      "aria-current": state.kb && state.kb.id === kb.id ? "true" : null, onclick: () => openKb(kb.id).catch(reportError),
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

async function openKb(id) {
  stopLive();
  state.kb = await api("GET", `/api/knowledge-bases/${id}`);
  state.cursors = [null];
  state.selected.clear();
  $("status-filter").value = "";
  $("name-filter").value = "";
  $("welcome").hidden = true;
  $("kb-view").hidden = false;
  $("uploads").replaceChildren();
  $("search-results").replaceChildren();
  state.lastSearch = null;
  say($("search-status"), "");
  hideNotice();
  renderKbHead();
  renderKbList();
  renderStatusFilter();
  showTab("documents");
  await loadPage();
  startLive();
}

function renderKbHead() {
  const kb = state.kb;
  $("kb-title").textContent = kb.name;
  $("kb-description-text").textContent = kb.description || "";
  $("kb-counts").textContent = countsSummary(kb.document_counts);
}

async function refreshCounts() {
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
  const total = Object.values(kb.document_counts || {}).reduce((a, b) => a + b, 0);
  const ok = await confirmDialog(t("delete_kb_title", { name: kb.name }),
    t("delete_kb_text", { name: kb.name, count: total }), t("delete_knowledge_base"));
  if (!ok) return;
  try {
    await api("DELETE", `/api/knowledge-bases/${kb.id}`);
    stopLive();
    state.kb = null;
    $("kb-view").hidden = true;
    $("welcome").hidden = false;
    await loadKbs();
  } catch (err) {
    showNotice(() => errorText(err));
  }
}

// ---------- documents ----------

function renderStatusFilter() {
  const sel = $("status-filter");
  const current = sel.value;
  const counts = (state.kb && state.kb.document_counts) || {};
  const total = Object.values(counts).reduce((a, b) => a + b, 0);
  sel.replaceChildren(h("option", { value: "", text: `${t("all_statuses")} (${total})` }),
    ...STATUSES.map((s) => h("option", { value: s, text: `${statusLabel(s)} (${counts[s] || 0})` })));
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

async function loadPage() {
  if (!state.kb) return;
  const kbId = state.kb.id;
  const seq = ++state.pageSeq;
  const cursor = state.cursors[state.cursors.length - 1];
  const page = await api("GET", listUrl(cursor));
  if (!state.kb || state.kb.id !== kbId || seq !== state.pageSeq) return;  // a newer load is on its way
  state.rows = new Map(page.items.map((d) => [d.id, d]));
  state.nextCursor = page.next_cursor;
  state.kb.document_counts = page.counts;
  for (const id of [...state.selected]) if (!state.rows.has(id)) state.selected.delete(id);
  renderRows();
  renderPager();
  renderKbHead();
  renderStatusFilter();
}

function progressOf(doc) {
  const p = doc.progress || {};
  if (doc.status === "READY") return { value: 1, max: 1, text: t("chunks_count", { count: doc.chunk_count }) };
  if (p.total && !STABLE.has(doc.status)) {
    const key = p.stage === "PARSING" ? "progress_pages"  // OCR: pages read
      : p.waiting === "embedder" ? "progress_waiting" : "progress_chunks";
    return { value: p.done || 0, max: p.total, text: t(key, { done: p.done || 0, total: p.total }) };
  }
  return null;
}

function renderRow(doc) {
  const busy = !STABLE.has(doc.status);
  const prog = progressOf(doc);
  const check = h("input", {
    type: "checkbox", "aria-label": t("select_document", { name: doc.filename }),
    onchange: (e) => { if (e.target.checked) state.selected.add(doc.id); else state.selected.delete(doc.id); renderBulk(); },
  });
  check.checked = state.selected.has(doc.id);
  const act = (name, label, cls) => h("button", {
    type: "button", class: `small ${cls || ""}`, dataset: { action: name }, text: label,
    "aria-label": `${label}: ${doc.filename}`, onclick: () => docAction(doc.id, name),
  });
  return h("tr", { dataset: { id: doc.id, status: doc.status } },
    h("td", {}, check),
    h("td", { class: "filename" }, h("button", { type: "button", class: "link", text: doc.filename, onclick: () => openDocument(doc.id) })),
    h("td", {}, h("span", { class: `badge st-${doc.status}${busy ? " busy" : ""}`, text: statusLabel(doc.status) })),
    h("td", { class: "progress-cell" }, prog ? [h("progress", { value: prog.value, max: prog.max, "aria-label": prog.text }), h("span", { class: "muted small-text", text: prog.text })] : ""),
    h("td", { text: `${doc.attempts}/${doc.max_attempts}` }),
    h("td", { class: "error-cell", title: doc.error_message || null }, h("div", { class: "clamp", text: doc.error_message || "" })),
    h("td", { class: "nowrap", text: fmtTime(doc.updated_at) }),
    h("td", {}, h("div", { class: "actions" },
      act("reindex", t("reparse")),
      act("delete", t("delete"), "danger"),
      busy ? act("fail", t("fail")) : null,
      busy ? act("recover", t("recover")) : null,
      act("download", t("download")))));
}

function renderRows() {
  const rows = [...state.rows.values()];
  $("doc-rows").replaceChildren(...rows.map(renderRow));
  $("doc-empty").hidden = rows.length > 0;
  $("select-all").checked = rows.length > 0 && rows.every((d) => state.selected.has(d.id));
  renderBulk();
}

function updateRow(doc) {
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

function renderPager() {
  const n = state.cursors.length;
  $("page-label").textContent = t("page_n", { n });
  $("page-prev").disabled = n <= 1;
  $("page-first").disabled = n <= 1;
  $("page-next").disabled = !state.nextCursor;
}

function renderBulk() {
  const n = state.selected.size;
  $("bulk").hidden = n === 0;
  $("bulk-count").textContent = t("selected_n", { n });
}

// a message shown on the page: a function of the current language, re-run when the language changes
function say(el, message) {
  const render = typeof message === "function" ? message : () => message;
  state.messages.set(el, render);
  el.textContent = render();
}

function showNotice(message) {
  const n = $("notice");
  say(n, message);
  n.hidden = false;
}
function hideNotice() { $("notice").hidden = true; $("notice").textContent = ""; state.messages.delete($("notice")); }

async function busyMessage(id, fallbackStatus) {
  let status = fallbackStatus;
  try { status = (await api("GET", `/api/documents/${id}`)).status; } catch { /* keep the last known */ }
  return () => t("busy", { status: statusLabel(status) });
}

// one action on one document; returns "ok" | "busy" | "error" | "cancelled"
async function runAction(id, action, opts) {
  const doc = state.rows.get(id) || { id, status: "" };
  try {
    let result;
    if (action === "reindex") result = await api("POST", `/api/documents/${id}/reindex`);
    else if (action === "fail") result = await api("POST", `/api/documents/${id}/fail`);
    else if (action === "recover") result = await api("POST", `/api/documents/${id}/recover`);
    else if (action === "delete") result = await api("DELETE", `/api/documents/${id}?force=${opts.hard ? "true" : "false"}`);
    if (result && result.id && state.rows.has(result.id)) updateRow(result);
    return { outcome: "ok" };
  } catch (err) {
    if (err instanceof ApiError && err.status === 409) return { outcome: "busy", message: await busyMessage(id, doc.status) };
    return { outcome: "error", message: () => `${doc.filename || id}: ${errorText(err)}` };
  }
}

async function askDelete(names) {
  const extra = h("fieldset", { class: "delete-mode" },
    h("legend", { text: t("delete_mode") }),
    h("label", {}, h("input", { type: "radio", name: "delete-mode", value: "soft", checked: true }), " ", t("delete_soft")),
    h("label", {}, h("input", { type: "radio", name: "delete-mode", value: "hard" }), " ", t("delete_hard")));
  const ok = await confirmDialog(t("delete_docs_title", { n: names.length }),
    names.length === 1 ? t("delete_doc_text", { name: names[0] }) : t("delete_docs_text", { n: names.length }),
    t("delete"), extra);
  if (!ok) return null;
  return { hard: extra.querySelector("input[value=hard]").checked };
}

async function docAction(id, action) {
  hideNotice();
  const doc = state.rows.get(id);
  if (action === "download") return download(id, doc ? doc.filename : "download");
  let opts = {};
  if (action === "delete") {
    opts = await askDelete([doc ? doc.filename : id]);
    if (!opts) return;
  }
  const r = await runAction(id, action, opts);
  if (r.outcome !== "ok") showNotice(r.message);
  scheduleCounts();
}

async function bulkAction(action) {
  hideNotice();
  const ids = [...state.selected];
  if (!ids.length) return;
  let opts = {};
  if (action === "delete") {
    opts = await askDelete(ids.map((id) => (state.rows.get(id) || {}).filename || id));
    if (!opts) return;
  }
  let ok = 0, busy = 0;
  const errors = [];
  for (const id of ids) {
    const r = await runAction(id, action, opts);
    if (r.outcome === "ok") ok++;
    else if (r.outcome === "busy") busy++;
    else errors.push(r.message);
  }
  showNotice(() => [t("bulk_result", { ok, busy }), ...errors.slice(0, 3).map((m) => m())].join(" "));
  state.selected.clear();
  renderRows();
  scheduleCounts();
}

async function download(id, filename) {
  try {
    const res = await fetch(`/api/documents/${id}/source`, { headers: { Authorization: `Bearer ${state.key}` } });
    if (!res.ok) {
      let detail = res.statusText;
      try { detail = (await res.json()).detail; } catch { /* not JSON */ }
      throw new ApiError(res.status, detail);
    }
    const url = URL.createObjectURL(await res.blob());
    const a = h("a", { href: url, download: filename });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  } catch (err) {
    showNotice(() => `${filename}: ${errorText(err)}`);
  }
}

// ---------- upload ----------

function uploadFiles(files) {
  const queue = [...files];
  const items = queue.map((file) => {
    const bar = h("progress", { max: 100, value: 0, "aria-label": t("upload_progress", { name: file.name }) });
    const msg = h("span", { class: "upload-msg" });
    say(msg, () => t("waiting"));
    const li = h("li", { class: "upload", dataset: { name: file.name } }, h("span", { class: "upload-name", text: file.name }), bar, msg);
    $("uploads").prepend(li);
    return { file, li, bar, msg };
  });
  let next = 0;
  const worker = async () => {
    while (next < items.length) await uploadOne(items[next++]);
  };
  return Promise.all([worker(), worker(), worker()]).then(scheduleCounts);
}

function uploadOne(item) {
  return new Promise((resolve) => {
    const xhr = new XMLHttpRequest();
    const form = new FormData();
    form.append("file", item.file, item.file.name);
    xhr.open("POST", `/api/knowledge-bases/${state.kb.id}/documents`);
    xhr.setRequestHeader("Authorization", `Bearer ${state.key}`);
    say(item.msg, () => t("uploading"));
    xhr.upload.onprogress = (e) => {
      if (e.lengthComputable) item.bar.value = Math.round((e.loaded / e.total) * 100);
    };
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) {
        item.bar.value = 100;
        item.li.classList.add("ok");
        say(item.msg, () => t("uploaded"));
        try { const doc = JSON.parse(xhr.responseText); if (state.cursors.length === 1 && state.kb && doc.knowledge_base_id === state.kb.id) updateRow(doc); } catch { /* ignore */ }
      } else {
        let detail = xhr.statusText;
        try { detail = JSON.parse(xhr.responseText).detail; } catch { /* not JSON */ }
        item.li.classList.add("failed");
        const err = new ApiError(xhr.status, detail);
        say(item.msg, () => errorText(err));
        if (xhr.status === 401) logout(() => t("key_rejected"));
      }
      resolve();
    };
    xhr.onerror = () => {
      item.li.classList.add("failed");
      // a server refusing an over-size body may close the connection before the browser sees the 413
      say(item.msg, () => t("error_upload_network"));
      resolve();
    };
    xhr.send(form);
  });
}

// ---------- live updates ----------

function setLive(mode) {
  state.live = mode;
  const el = $("live");
  el.className = `live live-${mode}`;
  el.textContent = mode === "listen" ? t("live_on") : mode === "poll" ? t("live_polling") : "";
}

function stopLive() {
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

async function startLive() {
  const kbId = state.kb.id;
  const ctl = new AbortController();
  state.stream = ctl;
  let failures = 0;
  while (!ctl.signal.aborted && state.kb && state.kb.id === kbId) {
    let reconnect = true;
    try {
      // fetch() and not EventSource: EventSource cannot send the Authorization header
      const res = await fetch(`/api/knowledge-bases/${kbId}/events`, {
        headers: { Authorization: `Bearer ${state.key}`, Accept: "text/event-stream" }, signal: ctl.signal,
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
    } catch (err) {
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
    if (state.rows.delete(ev.id)) $("doc-rows").querySelector(`tr[data-id="${ev.id}"]`)?.remove();
    return;
  }
  state.eventSeq.set(ev.id, (state.eventSeq.get(ev.id) || 0) + 1);
  const known = state.rows.get(ev.id);
  // A running stage is painted at once (entering it clears any stale error); a stable or queued
  // status waits for the fetch below, so FAILED never shows without its reason.
  if (known && ev.status && known.status !== ev.status && RUNNING.has(ev.status)) {
    updateRow({ ...known, status: ev.status, error_message: null });
  }
  if (known || (ev.op === "I" && state.cursors.length === 1)) {
    state.pending.add(ev.id);
    if (!state.pendingTimer) state.pendingTimer = setTimeout(flushPending, 250);
  }
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
      if (err instanceof ApiError && err.status === 404) {
        state.rows.delete(id);
        $("doc-rows").querySelector(`tr[data-id="${id}"]`)?.remove();
      }
    }
  }));
  if ($("doc-dialog").open && ids.includes($("doc-dialog").dataset.id)) openDocument($("doc-dialog").dataset.id, true);
}

function scheduleCounts() {
  if (state.countsTimer) return;
  state.countsTimer = setTimeout(() => { state.countsTimer = null; refreshCounts(); }, 500);
}

// ---------- document view ----------

async function openDocument(id, refresh, focusChunk) {
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
  const body = [];
  body.push(h("dl", { class: "facts" },
    h("dt", { text: t("status") }), h("dd", {}, h("span", { class: `badge st-${doc.status}`, text: statusLabel(doc.status) })),
    h("dt", { text: t("attempts") }), h("dd", { text: `${doc.attempts}/${doc.max_attempts}` }),
    h("dt", { text: t("size") }), h("dd", { text: `${doc.size_bytes.toLocaleString()} B · ${doc.mime_type}` }),
    h("dt", { text: t("parser") }), h("dd", { text: doc.parser ? `${doc.parser.name} ${doc.parser.version || ""}` : "—" }),
    h("dt", { text: t("chunks") }), h("dd", { text: String(doc.chunk_count) }),
    h("dt", { text: t("created") }), h("dd", { text: fmtTime(doc.created_at) }),
    h("dt", { text: t("updated") }), h("dd", { text: fmtTime(doc.updated_at) })));
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
    h("span", { class: "muted", text: STABLE.has(s.stage) ? "" : fmtSeconds(s.seconds) })))) : h("p", { class: "muted", text: "—" }));
  body.push(h("h3", { text: t("error_history") }));
  const hist = doc.error_history || [];
  body.push(hist.length ? h("ol", { class: "history" }, ...hist.map((e) => h("li", {},
    h("span", { class: "muted", text: `${e.at ? fmtTime(e.at) : ""} ${e.attempt !== undefined ? `#${e.attempt}` : ""} ` }),
    h("span", { text: e.error || e.message || JSON.stringify(e) })))) : h("p", { class: "muted", text: t("no_errors") }));
  const chunkBox = h("div", { class: "chunks" }, h("p", { class: "muted", text: t("loading") }));
  const assetBox = h("div", { class: "assets" });
  body.push(h("h3", { text: t("chunk_preview") }), chunkBox, h("h3", { text: t("images") }), assetBox);
  body.push(h("div", { class: "dialog-actions" },
    h("button", { type: "button", onclick: async () => { const r = await runAction(doc.id, "reindex", {}); if (r.outcome !== "ok") showDialogNotice(r.message); else openDocument(doc.id, true); }, text: t("reparse") }),
    h("button", { type: "button", class: "secondary", onclick: () => download(doc.id, doc.filename), text: t("download") })));
  body.push(h("p", { id: "doc-notice", class: "notice", role: "alert", hidden: true }));
  $("doc-body").replaceChildren(...body);
  loadSnapshot(doc, chunkBox, assetBox, focusChunk);
}

function showDialogNotice(text) {
  const n = $("doc-notice");
  if (!n) return;
  say(n, text);
  n.hidden = false;
}

function locatorText(loc) {
  const parts = [];
  if (loc.page) parts.push(t("page_x", { page: loc.page }));
  if (loc.page_start) parts.push(t("pages_x", { from: loc.page_start, to: loc.page_end ?? loc.page_start }));
  if (loc.row_start) parts.push(t("rows_x", { from: loc.row_start, to: loc.row_end ?? loc.row_start }));
  if (loc.line_start) parts.push(t("lines_x", { from: loc.line_start, to: loc.line_end ?? loc.line_start }));
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

function showImages(assets, box, emptyText) {
  if (!assets.length) { if (emptyText) box.replaceChildren(h("p", { class: "muted", text: emptyText })); return; }
  box.replaceChildren(...assets.map((a) => {
    const img = h("img", { alt: a.description || t("image"), loading: "lazy" });
    authedBlobUrl(a.url).then((u) => { img.src = u; }).catch(() => { img.alt = `${t("image")} (${t("unavailable")})`; });
    return h("figure", {}, img, a.description ? h("figcaption", { text: a.description }) : null);
  }));
}

// ---------- search: search.js ----------

// ---------- dialogs, tabs ----------

function confirmDialog(title, text, okLabel, extra) {
  const dlg = $("confirm-dialog");
  $("confirm-title").textContent = title;
  $("confirm-text").textContent = text;
  $("confirm-ok").textContent = okLabel;
  $("confirm-extra").replaceChildren(...(extra ? [extra] : []));
  dlg.returnValue = "";
  dlg.showModal();
  return new Promise((resolve) => {
    dlg.addEventListener("close", () => resolve(dlg.returnValue === "ok"), { once: true });
  });
}

function showTab(name) {
  for (const n of ["documents", "search"]) {
    $(`tab-${n}`).setAttribute("aria-selected", String(n === name));
    $(`tab-${n}`).tabIndex = n === name ? 0 : -1;
    $(`panel-${n}`).hidden = n !== name;
  }
}

// ---------- wiring ----------

function debounce(fn, ms) {
  let timer;
  return (...args) => { clearTimeout(timer); timer = setTimeout(() => fn(...args), ms); };
}

function reportError(err) {
  if (err instanceof ApiError && err.status === 401) return;  // already back at the login form
  if (state.kb) showNotice(() => errorText(err));
  else say($("login-error"), () => errorText(err));
}

function resetAndLoad() {
  state.cursors = [null];
  loadPage().catch(reportError);
}

function wire() {
  $("lang").addEventListener("change", (e) => loadLang(e.target.value));
  $("logout").addEventListener("click", () => logout(""));
  $("login-form").addEventListener("submit", (e) => { e.preventDefault(); login($("login-key").value.trim()); });
  $("kb-create").addEventListener("submit", createKb);
  $("kb-dedup").addEventListener("change", () => { $("kb-threshold").disabled = $("kb-dedup").value !== "near"; });
  $("kb-delete").addEventListener("click", deleteKb);
  $("tab-documents").addEventListener("click", () => showTab("documents"));
  $("tab-search").addEventListener("click", () => { showTab("search"); $("search-query").focus(); });
  for (const tab of ["tab-documents", "tab-search"]) {
    $(tab).addEventListener("keydown", (e) => {
      if (e.key === "ArrowRight" || e.key === "ArrowLeft") {
        const other = tab === "tab-documents" ? "search" : "documents";
        showTab(other);
        $(`tab-${other}`).focus();
      }
    });
  }
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
  for (const b of document.querySelectorAll("[data-bulk]")) b.addEventListener("click", () => bulkAction(b.dataset.bulk));
  $("file-input").addEventListener("change", (e) => { uploadFiles(e.target.files); e.target.value = ""; });
  const dz = $("dropzone");
  dz.addEventListener("dragover", (e) => { e.preventDefault(); dz.classList.add("over"); });
  dz.addEventListener("dragleave", () => dz.classList.remove("over"));
  dz.addEventListener("drop", (e) => {
    e.preventDefault();
    dz.classList.remove("over");
    if (e.dataTransfer && e.dataTransfer.files.length) uploadFiles(e.dataTransfer.files);
  });
  $("doc-close").addEventListener("click", () => $("doc-dialog").close());
  $("doc-dialog").addEventListener("close", () => { for (const u of state.blobUrls.splice(0)) URL.revokeObjectURL(u); });
}

async function main() {
  wire();
  const offered = readKeyFromFragment();
  await loadLang(pickLang());
  await acceptLinkKey(offered);
  window.addEventListener("hashchange", async () => {  // a `#key=` link followed while the page is open
    if (await acceptLinkKey(readKeyFromFragment())) await login(sessionStorage.getItem(KEY_STORE));
  });
  $("kb-threshold").disabled = $("kb-dedup").value !== "near";
  const key = sessionStorage.getItem(KEY_STORE);
  if (key) await login(key);
  else logout("");
  document.body.dataset.ready = "true";
}

main();
