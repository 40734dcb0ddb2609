// The queue: counts by state (click one to filter), a progress bar that shows motion while work is
// in flight, and the files, the ones in progress and the failures first.

import { $, h, icon, replace } from "../dom";
import { ago, basename, dirname, grouped, percent, shortDir, STATE_LABEL } from "../format";
import { store } from "../store";
import { FILE_STATES, type FileState, type FileStateName } from "../types";

const ORDER: Record<FileStateName, number> = { extracting: 0, embedding: 0, failed: 1, waiting: 2, no_text: 3, skipped: 3, done: 4 };
const MAX_ROWS = 300;

let filter: FileStateName | null = null;

export function mountQueue(openDetail: (path: string) => void): void {
  store.on("queue", draw);
  // the "last change" line ages even when nothing arrives
  setInterval(drawProgressLabel, 1000);

  function draw() {
    drawCounts();
    drawProgress();
    drawProgressLabel();
    drawFiles();
  }

  function drawCounts() {
    replace(
      $("queue-counts"),
      FILE_STATES.map((s) =>
        h(
          "button",
          {
            type: "button",
            class: `count count-${s}${filter === s ? " selected" : ""}${store.counts[s] ? "" : " zero"}`,
            "data-state": s,
            "aria-pressed": filter === s ? "true" : "false",
            title: filter === s ? "show all files" : `show only ${STATE_LABEL[s]}`,
            onclick: () => {
              filter = filter === s ? null : s;
              draw();
            },
          },
          h("span", { class: "count-value", "data-testid": `queue-${s}-count` }, grouped(store.counts[s])),
          h("span", { class: "count-label" }, h("i", { class: `dot-state state-${s}` }), STATE_LABEL[s]),
        ),
      ),
    );
  }

  function drawProgress() {
    const total = store.total();
    const el = $("queue-progress");
    const ok = store.counts.done + store.counts.no_text + store.counts.skipped;
    const failed = store.counts.failed;
    const [okBar, failBar] = el.children as unknown as HTMLElement[];
    okBar.style.width = total ? `${(ok / total) * 100}%` : "0";
    failBar.style.width = total ? `${(failed / total) * 100}%` : "0";
    const busy = store.active() > 0;
    el.classList.toggle("busy", busy);
    el.setAttribute("aria-valuenow", total ? String(Math.round((store.finished() / total) * 100)) : "0");
    $("queue-summary").textContent = total ? `${grouped(store.finished())} of ${grouped(total)} finished · ${percent(store.finished() / total)}` : "";
  }

  function drawProgressLabel() {
    const total = store.total();
    const el = $("queue-progress-label");
    if (store.writesStopped) {
      // nothing more is indexed: said where the progress is read, until a restart
      el.textContent = `Indexing stopped: ${store.writesStopped}`;
      el.dataset.state = "stopped";
      return;
    }
    if (store.writesPaused) {
      el.textContent = `Paused: ${store.writesPaused}`;
      el.dataset.state = "paused";
      return;
    }
    if (!total) {
      el.textContent = "Nothing queued yet.";
      el.dataset.state = "empty";
      return;
    }
    const inFlight = store.counts.extracting + store.counts.embedding;
    const last = store.lastQueueChange ? ago(store.lastQueueChange) : "";
    if (store.active() === 0) {
      el.textContent = `All ${grouped(total)} files processed${store.counts.failed ? `, ${grouped(store.counts.failed)} failed` : ""}.${last ? ` Last change ${last}.` : ""}`;
      el.dataset.state = "idle";
    } else {
      const parts = [];
      if (store.counts.extracting) parts.push(`${grouped(store.counts.extracting)} extracting`);
      if (store.counts.embedding) parts.push(`${grouped(store.counts.embedding)} embedding`);
      if (store.counts.waiting) parts.push(`${grouped(store.counts.waiting)} waiting`);
      const stale = store.lastQueueChange && Date.now() - store.lastQueueChange > 30_000;
      el.textContent = `${parts.join(", ")}${last ? ` · last change ${last}` : ""}${stale && inFlight ? " — a large file may take a while" : ""}`;
      el.dataset.state = "busy";
    }
  }

  function drawFiles() {
    const list = $("queue-files");
    let files = [...store.files.values()];
    if (filter) files = files.filter((f) => f.state === filter);
    files.sort((a, b) => ORDER[a.state] - ORDER[b.state] || b.updated_ms - a.updated_ms || a.path.localeCompare(b.path));
    if (!files.length) {
      if (filter) replace(list, h("li", { class: "empty" }, `No files ${STATE_LABEL[filter]}.`));
      else
        replace(
          list,
          h(
            "li",
            { class: "drop-hint", "data-testid": "queue-empty", onclick: () => $("file-input").click() },
            icon("M10 3v10M5.5 8.5 10 13l4.5-4.5M3.5 16.5h13", "drop-hint-icon"),
            h("div", { class: "drop-hint-title" }, "Drop documents anywhere on this window"),
            h("div", { class: "drop-hint-sub" }, "PDF, text and Markdown files — or click to choose files, or watch a folder above"),
          ),
        );
      return;
    }
    const rows = files.slice(0, MAX_ROWS).map((f) => row(f, openDetail));
    if (files.length > MAX_ROWS) rows.push(h("li", { class: "more" }, `and ${grouped(files.length - MAX_ROWS)} more`));
    replace(list, rows);
  }
}

function row(f: FileState, openDetail: (path: string) => void): HTMLElement {
  const meta: string[] = [];
  if (f.pages) meta.push(`${f.pages} ${f.pages === 1 ? "page" : "pages"}`);
  if (f.chunks) meta.push(`${f.chunks} ${f.chunks === 1 ? "chunk" : "chunks"}`);
  return h(
    "li",
    {
      class: `file file-${f.state}`,
      "data-testid": "file-row",
      "data-state": f.state,
      "data-path": f.path,
      tabindex: 0,
      role: "button",
      title: f.path,
      onclick: () => openDetail(f.path),
      onkeydown: (e: Event) => {
        if ((e as KeyboardEvent).key === "Enter") openDetail(f.path);
      },
    },
    h("span", { class: `badge state-${f.state}`, "data-testid": "file-state" }, STATE_LABEL[f.state] ?? f.state),
    h(
      "span",
      { class: "file-main" },
      h("span", { class: "file-name" }, basename(f.path)),
      h("span", { class: "file-dir" }, shortDir(dirname(f.path), 56)),
      f.error ? h("span", { class: "file-error", "data-testid": "file-error" }, f.error) : null,
    ),
    h("span", { class: "file-meta" }, meta.join(" · ")),
  );
}
