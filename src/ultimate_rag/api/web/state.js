// The page's one state object, shared by the views, and a small event bus between them: a view
// announces what changed and the others re-render on their own, so no module reaches into another's
// rendering, and a module never imports one above it (tests/unit/test_structure.py: no import circle).

export const KEY_STORE = "ultimate-rag.key";
export const LANG_STORE = "ultimate-rag.lang";
export const PAGE_SIZE = 50;
export const POLL_MS = 5000;

export const state = {
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
  eventClock: 0,        // document events received so far
  eventSeq: new Map(),  // document id -> eventClock at its latest event, so older news never overwrites newer
  messages: new Map(),  // element -> function that renders its message in the current language
};

export const $ = (id) => document.getElementById(id);

const listeners = new Map();

/** Run `fn(...args)` whenever `name` is emitted:
 *   "language"        the strings changed (i18n.js)
 *   "kb" (id|null)    another knowledge base, or none, is open (kbs.js)
 *   "tab" (name)      a tab was shown (tabs.js)
 *   "action" (id, a)  a row's action button was pressed (documents.js -> actions.js)
 *   "open" (id)       a row's file name was pressed (documents.js -> docview.js)
 *   "counts"          a page of the list brought the knowledge base's counts (documents.js -> kbs.js)
 *   "stale" (id)      a row is older than an event about it: fetch it again (documents.js -> live.js)
 *   "changed"         an action changed documents: the counts are stale (actions.js -> live.js)
 *   "counts-due"      read the knowledge base's counts again (live.js -> kbs.js) */
export function on(name, fn) {
  if (!listeners.has(name)) listeners.set(name, []);
  listeners.get(name).push(fn);
}

export function emit(name, ...args) {
  for (const fn of listeners.get(name) || []) fn(...args);
}
