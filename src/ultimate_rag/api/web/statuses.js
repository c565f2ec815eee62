// The status vocabulary, read from the API (GET /api/statuses) at login instead of copied from the
// Python code: the status names in list order, which are stable (no work left) or worked on by a
// worker, and the operations each allows (the rest answer 409).

import { api } from "./api.js";
import { t } from "./i18n.js";

let vocabulary = { document_statuses: [], job_statuses: [], pipeline: [], operations: [] };
let byName = new Map();

export async function loadStatuses() {
  vocabulary = await api("GET", "/api/statuses");
  byName = new Map(vocabulary.document_statuses.map((s) => [s.name, s]));
  return vocabulary;
}

/** Every document status, in the order the filter lists them. */
export const statusNames = () => vocabulary.document_statuses.map((s) => s.name);

/** READY, FAILED, DELETED, OUTDATED: nothing is being done to the document. */
export const isStable = (status) => Boolean(byName.get(status)?.stable);

/** A worker is on the document (a running stage, or DELETING). */
export const isWorking = (status) => Boolean(byName.get(status)?.working);

/** Whether a document in `status` accepts `operation` (reindex, upload, delete, hard_delete, fail, recover). */
export const allows = (status, operation) => Boolean(byName.get(status)?.operations.includes(operation));

/** The translated name of a status; a status this page has no words for is shown as the API spells it. */
export function statusLabel(status) {
  const label = t(`status_${status}`);
  return label === `status_${status}` ? status : label;
}
