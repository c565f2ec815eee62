// The notice above the documents table: what an action, a page load or a failed request has to
// say, in the current language; and where an error goes when no knowledge base is open.

import { errorText } from "./api.js";
import { say } from "./dom.js";
import { $, state } from "./state.js";

export function showNotice(message) {
  const n = $("notice");
  say(n, message);
  n.hidden = false;
}

export function hideNotice() { $("notice").hidden = true; $("notice").textContent = ""; state.messages.delete($("notice")); }

export function reportError(err) {
  if (err && err.status === 401) return;  // already back at the login form
  if (state.kb) showNotice(() => errorText(err));
  else say($("login-error"), () => errorText(err));
}
