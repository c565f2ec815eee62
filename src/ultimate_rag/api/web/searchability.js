// Whether search serves a document (SPEC §4, the published revision): "searchable" when it is READY,
// "searchable: previous version" while its last READY revision is still served during a rebuild or
// after a failed one, "not searchable" otherwise. From the document JSON's `searchable` and
// `published_revision`; a server that sends neither is one where only READY documents are searched.

import { h } from "./dom.js";
import { t } from "./i18n.js";

/** "searchable" | "searchable_previous" | "not_searchable" for a document JSON. */
export function searchability(doc) {
  const searchable = typeof doc.searchable === "boolean" ? doc.searchable : doc.status === "READY";
  if (!searchable) return "not_searchable";
  return doc.status === "READY" ? "searchable" : "searchable_previous";
}

/** The words for it, with the served revision when the server says which one it is. */
export function searchabilityText(doc, withRevision) {
  const kind = searchability(doc);
  const rev = doc.published_revision;
  if (withRevision && kind !== "not_searchable" && Number.isInteger(rev)) {
    return `${t(kind)} (${t("revision_n", { n: rev })})`;
  }
  return t(kind);
}

/** A small label for the document list and the document view. */
export function searchabilityLabel(doc, withRevision = false) {
  const kind = searchability(doc);
  return h("span", { class: `searchability sb-${kind}`, dataset: { searchability: kind },
    text: searchabilityText(doc, withRevision) });
}
