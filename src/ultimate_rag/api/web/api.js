// The API client: every request to /api carries the key in the Authorization header (never in a
// URL). A 401 hands over to the session (back to the login form) through `whenUnauthorized`.

import { t } from "./i18n.js";
import { state } from "./state.js";

export class ApiError extends Error {
  constructor(status, detail) { super(detail); this.status = status; this.detail = detail; }
}

let unauthorized = () => {};

/** What to do when the server rejects the key (set once by the session module). */
export function whenUnauthorized(fn) { unauthorized = fn; }

export const authHeaders = (extra) => ({ Authorization: `Bearer ${state.key}`, ...extra });

export async function api(method, path, body) {
  const headers = authHeaders();
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  if (res.status === 401) { unauthorized(); throw new ApiError(401, t("key_rejected")); }
  if (!res.ok) throw new ApiError(res.status, await detailOf(res));
  const type = res.headers.get("content-type") || "";
  return type.includes("json") ? res.json() : res;
}

/** The server's `detail` of an error response, as text. */
export async function detailOf(res) {
  let detail = res.statusText;
  try { detail = (await res.json()).detail ?? detail; } catch { /* not JSON */ }
  return typeof detail === "string" ? detail : JSON.stringify(detail);
}

export async function authedBlobUrl(url) {
  const res = await fetch(url, { headers: authHeaders() });
  if (!res.ok) throw new ApiError(res.status, res.statusText);
  const u = URL.createObjectURL(await res.blob());
  state.blobUrls.push(u);
  return u;
}

export function errorText(err) {
  if (err instanceof ApiError) {
    if (err.status === 413) return t("error_413");
    if (err.status === 415) return `${t("error_415")} (${err.detail})`;
    if (err.status === 403) return t("error_403");
    return `${err.status}: ${err.detail}`;
  }
  return `${t("error_network")} (${err.message})`;
}
