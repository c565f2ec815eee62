// Upload: drop files on the drop zone or pick them, three in flight, each with its own progress bar
// (XMLHttpRequest upload progress) and its own result (413 / 415 and the server's reason).

import { ApiError, errorText } from "./api.js";
import { updateRow } from "./documents.js";
import { h, say } from "./dom.js";
import { t } from "./i18n.js";
import { scheduleCounts } from "./live.js";
import { logout } from "./session.js";
import { $, state } from "./state.js";

export function uploadFiles(files) {
  const items = [...files].map((file) => {
    const bar = h("progress", { max: 100, value: 0, "aria-label": t("upload_progress", { name: file.name }) });
    const msg = h("span", { class: "upload-msg" });
    say(msg, () => t("waiting"));
    const li = h("li", { class: "upload", dataset: { name: file.name } }, h("span", { class: "upload-name", text: file.name }), bar, msg);
    $("uploads").prepend(li);
    return { file, li, bar, msg };
  });
  let next = 0;
  const worker = async () => {
    while (next < items.length) await uploadOne(items[next++]);
  };
  return Promise.all([worker(), worker(), worker()]).then(scheduleCounts);
}

function uploadOne(item) {
  return new Promise((resolve) => {
    const xhr = new XMLHttpRequest();
    const form = new FormData();
    form.append("file", item.file, item.file.name);
    xhr.open("POST", `/api/knowledge-bases/${state.kb.id}/documents`);
    xhr.setRequestHeader("Authorization", `Bearer ${state.key}`);
    say(item.msg, () => t("uploading"));
    xhr.upload.onprogress = (e) => {
      if (e.lengthComputable) item.bar.value = Math.round((e.loaded / e.total) * 100);
    };
    xhr.onload = () => {
      if (xhr.status >= 200 && xhr.status < 300) {
        item.bar.value = 100;
        item.li.classList.add("ok");
        say(item.msg, () => t("uploaded"));
        try {
          const doc = JSON.parse(xhr.responseText);
          if (state.cursors.length === 1 && state.kb && doc.knowledge_base_id === state.kb.id) updateRow(doc);
        } catch { /* ignore */ }
      } else {
        let detail = xhr.statusText;
        try { detail = JSON.parse(xhr.responseText).detail; } catch { /* not JSON */ }
        item.li.classList.add("failed");
        const err = new ApiError(xhr.status, detail);
        say(item.msg, () => errorText(err));
        if (xhr.status === 401) logout(() => t("key_rejected"));
      }
      resolve();
    };
    xhr.onerror = () => {
      item.li.classList.add("failed");
      // a server refusing an over-size body may close the connection before the browser sees the 413
      say(item.msg, () => t("error_upload_network"));
      resolve();
    };
    xhr.send(form);
  });
}

export function wireUpload() {
  $("file-input").addEventListener("change", (e) => { uploadFiles(e.target.files); e.target.value = ""; });
  const dz = $("dropzone");
  dz.addEventListener("dragover", (e) => { e.preventDefault(); dz.classList.add("over"); });
  dz.addEventListener("dragleave", () => dz.classList.remove("over"));
  dz.addEventListener("drop", (e) => {
    e.preventDefault();
    dz.classList.remove("over");
    if (e.dataTransfer && e.dataTransfer.files.length) uploadFiles(e.dataTransfer.files);
  });
}
