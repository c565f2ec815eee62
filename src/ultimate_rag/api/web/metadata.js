// Document metadata in the workbench (docs/metadata.md): shown compactly on search results, shown
// and edited in the document view (the user's fields as JSON; the reserved ones — doc,
// front_matter, s3, source — filled in by the product, read-only), and the search panel's
// metadata filter: `key=value` pairs separated by commas, or a JSON filter object.

import { api, errorText } from "./api.js";
import { h, say } from "./dom.js";
import { t } from "./i18n.js";

export const RESERVED = ["doc", "front_matter", "s3", "source"];

const split = (meta, reserved) => Object.fromEntries(Object.entries(meta || {})
  .filter(([k]) => RESERVED.includes(k) === reserved));

function shown(value) {
  if (Array.isArray(value)) return value.join(", ");
  if (value && typeof value === "object") return JSON.stringify(value);
  return String(value);
}

/** A value as the CLI reads it: a number, a boolean or a list as JSON, anything else as written. */
function typed(text) {
  try {
    const v = JSON.parse(text);
    if (typeof v === "number" || typeof v === "boolean" || Array.isArray(v)) return v;
  } catch { /* a plain string */ }
  return text;
}

/** The search panel's metadata filter: null when empty; throws a readable Error when malformed. */
export function parseMetadataFilter(text) {
  const raw = text.trim();
  if (!raw) return null;
  if (raw.startsWith("{")) {
    try { return JSON.parse(raw); } catch (err) { throw new Error(t("metadata_invalid_json", { error: err.message })); }
  }
  const filter = {};
  for (const part of raw.split(",").map((p) => p.trim()).filter(Boolean)) {
    const at = part.indexOf("=");
    if (at < 1) throw new Error(t("metadata_pair_expected", { part }));
    filter[part.slice(0, at).trim()] = typed(part.slice(at + 1).trim());
  }
  return filter;
}

/** A line of `key: value` for a search hit: the user's fields first, then the document title. */
export function metadataLine(meta) {
  const items = Object.entries(split(meta, false)).slice(0, 8).map(([k, v]) => `${k}: ${shown(v)}`);
  if (meta?.doc?.title) items.push(`${t("title")}: ${meta.doc.title}`);
  return items.length ? h("p", { class: "metadata-line muted", text: items.join(" · ") }) : null;
}

/** The JSON Merge Patch turning the user's fields `before` into `after` (a removed key: null). */
export function mergePatch(before, after) {
  const patch = { ...after };
  for (const k of Object.keys(before)) if (!(k in after)) patch[k] = null;
  return patch;
}

/** The document view's metadata section: the fields filled in (read-only) and the editor. */
export function metadataSection(doc, reopen) {
  const mine = split(doc.metadata, false);
  const filled = split(doc.metadata, true);
  const editor = h("textarea", { id: "doc-metadata", rows: 6, spellcheck: "false", "aria-describedby": "doc-metadata-help" });
  editor.value = JSON.stringify(mine, null, 2);
  const status = h("p", { id: "doc-metadata-status", class: "muted", role: "status" });
  async function save() {
    let after;
    try {
      after = JSON.parse(editor.value || "{}");
      if (!after || typeof after !== "object" || Array.isArray(after)) throw new Error(t("metadata_object_expected"));
    } catch (err) { say(status, () => t("metadata_invalid_json", { error: err.message })); return; }
    try {
      await api("PATCH", `/api/documents/${doc.id}`, { metadata: mergePatch(mine, after) });
    } catch (err) { say(status, () => errorText(err)); return; }
    await reopen();
    const again = document.getElementById("doc-metadata-status");
    if (again) say(again, () => t("metadata_saved"));
  }
  return [h("h3", { text: t("metadata") }),
    Object.keys(filled).length ? h("dl", { class: "facts metadata-filled" }, ...Object.entries(filled).flatMap(([k, v]) => [
      h("dt", { text: k }), h("dd", { text: shown(v) })])) : null,
    h("label", { for: "doc-metadata", text: t("metadata_yours") }), editor,
    h("p", { id: "doc-metadata-help", class: "muted", text: t("metadata_help") }),
    h("div", { class: "dialog-actions" }, h("button", { type: "button", id: "doc-metadata-save", onclick: save, text: t("metadata_save") })),
    status];
}
