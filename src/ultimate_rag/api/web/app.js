// ultimate-rag workbench: plain modern JavaScript in ES modules, no build step, no third-party code.
// It talks only to the /api routes with the API key kept in sessionStorage (docs/workbench.md).
// This entry module wires the views together and starts the page; each view is its own module:
//   state.js (the shared state, an event bus)   i18n.js (en / zh / ko)   api.js (the API client)
//   statuses.js (the status vocabulary served by GET /api/statuses)   session.js (log in and out)
//   kbs.js (knowledge bases)   documents.js (the list)   actions.js (re-parse, delete, fail, ...)
//   live.js (live updates)   upload.js   docview.js (the document view)   searchability.js
//   search.js (the search tab)   ask.js (the ask tab)   tabs.js   dom.js (elements, dialogs)
//   notice.js (the notice above the list). A module imports only those below it in
//   docs/workbench.md's table; views higher up are told through the event bus.

import { wireActions } from "./actions.js";
import { wireAsk } from "./ask.js";
import { wireDocumentView } from "./docview.js";
import { wireDocuments } from "./documents.js";
import { loadLang, pickLang } from "./i18n.js";
import { wireKbs } from "./kbs.js";
import { wireSearch } from "./search.js";
import { acceptLinkKey, login, logout, readKeyFromFragment, wireSession } from "./session.js";
import { $, KEY_STORE } from "./state.js";
import { wireTabs } from "./tabs.js";
import { wireUpload } from "./upload.js";

async function main() {
  $("lang").addEventListener("change", (e) => loadLang(e.target.value));
  wireTabs();  // first: a tab's own click handlers (focus its input) run once its panel is shown
  wireSession();
  wireKbs();
  wireDocuments();
  wireActions();
  wireUpload();
  wireDocumentView();
  wireSearch();
  wireAsk();
  const offered = readKeyFromFragment();
  await loadLang(pickLang());
  await acceptLinkKey(offered);
  const key = sessionStorage.getItem(KEY_STORE);
  if (key) await login(key);
  else logout("");
  document.body.dataset.ready = "true";
}

main();
