// The search panel (SPEC §10): ranked chunks with their citation (file, heading path, page / lines,
// score), the text with what matched highlighted (an identifier the query names, however the text
// writes it), linked images; the identifiers found nowhere; mode, grouping and filters. The file
// name or the citation opens the document view at that chunk.

import { api, errorText } from "./api.js";
import { locatorText, openDocument, showImages } from "./docview.js";
import { h, say } from "./dom.js";
import { t } from "./i18n.js";
import { metadataLine, parseMetadataFilter } from "./metadata.js";
import { $, on, state } from "./state.js";

function searchFilters() {
  const filters = {};
  const name = $("search-filename").value.trim();
  if (name) filters.filename = name;
  const mimes = $("search-mime").value.split(",").map((m) => m.trim()).filter(Boolean);
  if (mimes.length) filters.mime_types = mimes;
  const heading = $("search-heading").value.trim();
  if (heading) filters.heading = heading;
  const metadata = parseMetadataFilter($("search-metadata").value);
  if (metadata) filters.metadata = metadata;
  return filters;
}

async function runSearch(ev) {
  ev.preventDefault();
  const status = $("search-status");
  say(status, () => t("searching"));
  $("search-results").replaceChildren();
  $("search-unmatched").hidden = true;
  state.lastSearch = null;
  const body = { query: $("search-query").value, top_k: Number($("search-k").value) || 10, mode: $("search-mode").value,
    group_by_document: $("search-group").checked };
  let filters;
  try { filters = searchFilters(); } catch (err) { say(status, () => err.message); return; }
  if (Object.keys(filters).length) body.filters = filters;
  try {
    const res = await api("POST", `/api/knowledge-bases/${state.kb.id}/search`, body);
    say(status, () => (res.results.length ? t("results_n", { n: res.results.length }) : t("no_results")));
    state.lastSearch = res;
    renderSearch();
  } catch (err) {
    say(status, () => errorText(err));
  }
}

// The content with each [start, end) highlight in a <mark>; cut after `limit` characters.
function highlighted(content, spans, limit) {
  const parts = [];
  let at = 0;
  for (const [start, end] of spans || []) {
    if (start >= limit) break;
    if (start > at) parts.push(content.slice(at, start));
    parts.push(h("mark", { text: content.slice(Math.max(start, at), Math.min(end, limit)) }));
    at = Math.min(end, limit);
  }
  if (at < Math.min(content.length, limit)) parts.push(content.slice(at, limit));
  if (content.length > limit) parts.push("…");
  return parts;
}

// Identifiers the query names that no passage holds: said above the (usual) results.
function renderUnmatched(res) {
  const box = $("search-unmatched");
  const ids = res.unmatched_identifiers || [];
  box.hidden = !ids.length;
  box.textContent = ids.length ? t("unmatched_identifiers", { ids: ids.join(", ") }) : "";
}

function renderSearch() {
  const res = state.lastSearch;
  if (!res) return;
  renderUnmatched(res);
  $("search-results").replaceChildren(...res.results.map((r, i) => {
    const imgs = h("div", { class: "assets" });
    showImages(r.assets || [], imgs, null);
    const where = locatorText(r.locator || {});
    return h("li", { class: "result" },
      h("div", { class: "cite" },
        h("span", { class: "rank", text: `#${i + 1}` }),
        h("button", { type: "button", class: "link cite-file", text: r.source_path || r.filename, onclick: () => openDocument(r.document_id, false, r.chunk_id) }),
        h("span", { class: "cite-heading", text: (r.heading_path || []).join(" › ") }),
        where ? h("button", { type: "button", class: "link cite-loc", text: where, title: t("open_at_chunk"),
          onclick: () => openDocument(r.document_id, false, r.chunk_id) }) : null,
        h("span", { class: "score muted", text: `${t("score")} ${r.score.toFixed(3)}` })),
      h("p", { class: "chunk-text" }, ...highlighted(r.content, r.highlights, 800)),
      metadataLine(r.metadata),
      imgs);
  }));
}

export function wireSearch() {
  $("search-form").addEventListener("submit", runSearch);
  $("tab-search").addEventListener("click", () => $("search-query").focus());
  on("language", () => { if (state.key && state.kb) renderSearch(); });
  on("kb", () => {  // another knowledge base: its search starts empty
    $("search-results").replaceChildren();
    $("search-unmatched").hidden = true;
    state.lastSearch = null;
    say($("search-status"), "");
  });
}
