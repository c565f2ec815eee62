// The three tabs of a knowledge base (documents, search, ask): one shown at a time, arrow keys move
// between them; "tab" is emitted with the name of the tab shown.

import { $, emit } from "./state.js";

export const TABS = ["documents", "search", "ask"];

export function showTab(name) {
  for (const n of TABS) {
    $(`tab-${n}`).setAttribute("aria-selected", String(n === name));
    $(`tab-${n}`).tabIndex = n === name ? 0 : -1;
    $(`panel-${n}`).hidden = n !== name;
  }
  emit("tab", name);
}

export function wireTabs() {
  for (const name of TABS) {
    const tab = $(`tab-${name}`);
    tab.addEventListener("click", () => showTab(name));
    tab.addEventListener("keydown", (e) => {
      if (e.key !== "ArrowRight" && e.key !== "ArrowLeft") return;
      e.preventDefault();
      const here = TABS.indexOf(name);
      const next = TABS[(here + (e.key === "ArrowRight" ? 1 : TABS.length - 1)) % TABS.length];
      showTab(next);
      $(`tab-${next}`).focus();
    });
  }
}
