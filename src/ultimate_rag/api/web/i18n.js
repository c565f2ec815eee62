// Translation: English, 中文 and 한국어 from i18n/{lang}.json (English fills any gap). Switching
// re-translates the static page and every message already shown, then emits "language" so each
// view re-renders what it drew.

import { $, emit, LANG_STORE, state } from "./state.js";

export const LANGS = ["en", "zh", "ko"];

export function t(key, vars) {
  let s = state.strings[key] ?? state.fallback[key] ?? key;
  if (vars) for (const [k, v] of Object.entries(vars)) s = s.split(`{${k}}`).join(String(v));
  return s;
}

export async function loadLang(lang) {
  const get = async (l) => (await fetch(`/web/i18n/${l}.json`, { cache: "no-cache" })).json();
  if (!Object.keys(state.fallback).length) state.fallback = await get("en");
  state.strings = lang === "en" ? state.fallback : await get(lang);
  state.lang = lang;
  document.documentElement.lang = { en: "en", zh: "zh-CN", ko: "ko" }[lang];
  localStorage.setItem(LANG_STORE, lang);
  $("lang").value = lang;
  translatePage();
}

export function pickLang() {
  const saved = localStorage.getItem(LANG_STORE);
  if (LANGS.includes(saved)) return saved;
  for (const l of navigator.languages || [navigator.language || "en"]) {
    const base = String(l).toLowerCase().split("-")[0];
    if (LANGS.includes(base)) return base;
  }
  return "en";
}

function translatePage() {
  for (const el of document.querySelectorAll("[data-i18n]")) el.textContent = t(el.dataset.i18n);
  for (const el of document.querySelectorAll("[data-i18n-placeholder]")) el.placeholder = t(el.dataset.i18nPlaceholder);
  for (const el of document.querySelectorAll("[data-i18n-aria-label]")) el.setAttribute("aria-label", t(el.dataset.i18nAriaLabel));
  document.title = `ultimate-rag — ${t("workbench")}`;
  for (const [el, render] of state.messages) {
    if (el.isConnected) el.textContent = render(); else state.messages.delete(el);
  }
  emit("language");
}

export function fmtTime(iso) {
  if (!iso) return "";
  return new Intl.DateTimeFormat(document.documentElement.lang, { dateStyle: "short", timeStyle: "medium" })
    .format(new Date(iso));
}

export function fmtSeconds(s) {
  if (s === null || s === undefined) return t("running_now");
  return s < 1 ? `${Math.round(s * 1000)} ms` : `${s.toFixed(1)} s`;
}
