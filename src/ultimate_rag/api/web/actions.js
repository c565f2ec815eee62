// Actions on documents, one or a selection: re-parse (reindex), delete (soft or hard, chosen in the
// confirmation), fail, recover, download. A 409 is the busy message with the document's status.

import { ApiError, api, authHeaders, detailOf, errorText } from "./api.js";
import { renderRows, updateRow } from "./documents.js";
import { confirmDialog, h } from "./dom.js";
import { t } from "./i18n.js";
import { hideNotice, showNotice } from "./notice.js";
import { $, emit, on, state } from "./state.js";
import { statusLabel } from "./statuses.js";

async function busyMessage(id, fallbackStatus) {
  let status = fallbackStatus;
  try { status = (await api("GET", `/api/documents/${id}`)).status; } catch { /* keep the last known */ }
  return () => t("busy", { status: statusLabel(status) });
}

const REQUESTS = {
  reindex: (id) => api("POST", `/api/documents/${id}/reindex`),
  fail: (id) => api("POST", `/api/documents/${id}/fail`),
  recover: (id) => api("POST", `/api/documents/${id}/recover`),
  delete: (id, opts) => api("DELETE", `/api/documents/${id}?force=${opts.hard ? "true" : "false"}`),
};

/** One action on one document: { outcome: "ok" | "busy" | "error", message }. */
export async function runAction(id, action, opts) {
  const doc = state.rows.get(id) || { id, status: "" };
  try {
    const result = await REQUESTS[action](id, opts || {});
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
  emit("changed");  // the counts are stale (live.js)
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
  emit("changed");  // the counts are stale (live.js)
}

export async function download(id, filename) {
  try {
    const res = await fetch(`/api/documents/${id}/source`, { headers: authHeaders() });
    if (!res.ok) throw new ApiError(res.status, await detailOf(res));
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

export function wireActions() {
  for (const b of document.querySelectorAll("[data-bulk]")) b.addEventListener("click", () => bulkAction(b.dataset.bulk));
  on("action", docAction);  // a row's button (documents.js)
}
