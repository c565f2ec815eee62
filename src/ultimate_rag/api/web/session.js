// Signing in and out. The key lives in sessionStorage (this tab only); a `#key=` link is read from
// the fragment, which no request carries, and removed from the address bar (docs/workbench.md).

import { ApiError, errorText, whenUnauthorized } from "./api.js";
import { confirmDialog, say } from "./dom.js";
import { t } from "./i18n.js";
import { loadKbs } from "./kbs.js";
import { stopLive } from "./live.js";
import { $, KEY_STORE, state } from "./state.js";
import { loadStatuses } from "./statuses.js";

export function readKeyFromFragment() {  // the key of a `#key=` link, taken out of the address bar
  const key = new URLSearchParams(location.hash.slice(1)).get("key");
  if (key) history.replaceState(null, "", location.pathname + location.search);
  return key;
}

// A `#key=` link never signs in silently: a crafted link would otherwise sign the user in to
// someone else's knowledge bases (login CSRF) — in a fresh tab as much as in one that holds a key.
// The user is asked, with the start of the key shown; "Cancel" keeps what the tab had (or nothing).
export async function acceptLinkKey(offered) {
  const current = sessionStorage.getItem(KEY_STORE);
  if (!offered || offered === current) return false;
  const shown = offered.length > 12 ? `${offered.slice(0, 12)}…` : offered;
  const kind = current ? "switch_key" : "link_key";
  const ok = await confirmDialog(t(`${kind}_title`), t(`${kind}_text`, { key: shown }), t(`${kind}_ok`));
  if (!ok) return false;
  sessionStorage.setItem(KEY_STORE, offered);
  return true;
}

export function logout(message) {  // message: a text, a function of the language, or nothing
  sessionStorage.removeItem(KEY_STORE);
  state.key = null;
  stopLive();
  $("main").hidden = true;
  $("logout").hidden = true;
  $("login").hidden = false;
  say($("login-error"), message || "");
  $("login-key").focus();
}

whenUnauthorized(() => logout(() => t("key_rejected")));

export async function login(key) {
  state.key = key;
  try {
    await loadStatuses();  // any valid key may read the status vocabulary: it checks the key too
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

export function wireSession() {
  $("logout").addEventListener("click", () => logout(""));
  $("login-form").addEventListener("submit", (e) => { e.preventDefault(); login($("login-key").value.trim()); });
  window.addEventListener("hashchange", async () => {  // a `#key=` link followed while the page is open
    if (await acceptLinkKey(readKeyFromFragment())) await login(sessionStorage.getItem(KEY_STORE));
  });
}
