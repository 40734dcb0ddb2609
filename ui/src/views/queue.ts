// The queue: counts by state (click one to filter), a progress bar that shows motion while work is
// in flight, the pace (documents/s) and the time left at it, and the files, the ones in progress
// and the failures first.

import { $, h, icon, replace } from "../dom";
import { ago, basename, breakableName, dirname, docsRate, duration, grouped, percent, STATE_LABEL } from "../format";
import { store } from "../store";
import type { Transport } from "../transport";
import { FILE_STATES, type FileState, type FileStateName } from "../types";
import { showError, toast } from "./toast";

const ORDER: Record<FileStateName, number> = { extracting: 0, embedding: 0, failed: 1, waiting: 2, no_text: 3, skipped: 3, done: 4 };
const MAX_ROWS = 300;
const RARE = new Set<FileStateName>(["failed", "no_text", "skipped"]);

let filter: FileStateName | null = null;

export function mountQueue(openDetail: (path: string) => void, t: Transport): void {
  store.on("queue", draw);
  // pause and resume: the files being read finish; nothing new starts until resumed
  const pause = $("queue-pause") as HTMLButtonElement;
  pause.addEventListener("click", async () => {
    const wanted = !store.paused;
    pause.disabled = true;
    try {
      const { paused } = await (wanted ? t.pause() : t.resume());
      store.setPaused(paused);
      toast(paused ? "Indexing paused: the files being read finish, nothing new starts" : "Indexing resumed");
    } catch (e) {
      showError(e, wanted ? "Pause" : "Resume");
    } finally {
      pause.disabled = false;
    }
  });
  // the "last change" line ages, and the pace falls, even when nothing arrives
  setInterval(() => {
    drawProgressLabel();
    drawPace();
  }, 1000);

  function draw() {
    drawPause();
    drawCounts();
    drawProgress();
    drawProgressLabel();
    drawPace();
    drawFiles();
  }

  function drawPause() {
    pause.textContent = store.paused ? "Resume" : "Pause";
    pause.title = store.paused ? "Resume indexing" : "Pause indexing: the files being read finish, nothing new starts";
    pause.closest(".queue-card")!.classList.toggle("paused", store.paused);
  }

  /** Documents/s over the latest work, and the time left for what is queued at that pace. */
  function drawPace() {
    const el = $("queue-pace");
    const busy = store.active() > 0 && !store.writesStopped && !store.writesPaused && !store.paused;
    const pace = busy ? store.pace() : null;
    el.hidden = !busy;
    if (!busy) {
      el.textContent = "";
      delete el.dataset.rate;
      return;
    }
    if (!pace) {
      el.dataset.rate = "";
      replace(el, h("span", { class: "pace-rate", "data-testid": "queue-rate" }, "measuring the pace…"));
      return;
    }
    el.dataset.rate = pace.perSecond.toFixed(3);
    replace(
      el,
      h("span", { class: "pace-rate", "data-testid": "queue-rate" }, docsRate(pace.perSecond)),
      pace.secondsLeft !== null
        ? h("span", { class: "pace-eta", "data-testid": "queue-eta", "data-seconds": Math.round(pace.secondsLeft) }, `about ${duration(pace.secondsLeft)} left`)
        : null,
    );
  }

  function drawCounts() {
    const box = $("queue-counts");
    // drawn anew on every change: the chip a keyboard was on keeps the focus
    const focused = box.contains(document.activeElement) ? (document.activeElement as HTMLElement).dataset.state : undefined;
    replace(
      box,
      FILE_STATES.map((s) =>
        h(
          "button",
          {
            type: "button",
            // the rarer states (failed, no text, skipped) take room only when some file is in them
            class: `count count-${s}${filter === s ? " selected" : ""}${store.counts[s] ? "" : " zero"}${RARE.has(s) ? " rare" : ""}`,
            "data-state": s,
            "aria-pressed": filter === s ? "true" : "false",
            title: filter === s ? "show all files" : `show only the files ${STATE_LABEL[s]}`,
            onclick: () => {
              filter = filter === s ? null : s;
              draw();
            },
          },
          h("i", { class: `dot-state state-${s}`, "aria-hidden": "true" }),
          h("span", { class: "count-label" }, STATE_LABEL[s]),
          h("span", { class: "count-value", "data-testid": `queue-${s}-count` }, grouped(store.counts[s])),
        ),
      ),
    );
    if (focused) box.querySelector<HTMLElement>(`[data-state="${focused}"]`)?.focus({ preventScroll: true });
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
    if (store.paused) {
      const left = store.active();
      el.textContent = `Paused by you${left ? `: ${grouped(left)} ${left === 1 ? "file waits" : "files wait"}` : ""}. The files being read finish; nothing new starts until you resume.`;
      el.dataset.state = "paused-by-user";
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
            { class: "drop-hint-item" },
            h(
              "button",
              { type: "button", class: "drop-hint", "data-testid": "queue-empty", onclick: () => $("file-input").click() },
              icon("M10 3v10M5.5 8.5 10 13l4.5-4.5M3.5 16.5h13", "drop-hint-icon"),
              h("span", { class: "drop-hint-title" }, "Drop documents anywhere on this window"),
              h("span", { class: "drop-hint-sub" }, `${FORMATS} — or click to choose files, or watch a folder above`),
            ),
          ),
        );
      return;
    }
    const rows = files.slice(0, MAX_ROWS).map((f) => row(f, openDetail));
    if (files.length > MAX_ROWS) rows.push(h("li", { class: "more" }, `and ${grouped(files.length - MAX_ROWS)} more`));
    // the list is drawn anew on every change: the row a keyboard was on keeps the focus
    const focused = (document.activeElement as HTMLElement | null)?.closest<HTMLElement>("[data-testid=file-row]");
    const path = focused && list.contains(focused) ? focused.dataset.path : undefined;
    replace(list, rows);
    if (path) rows.find((r) => r.dataset.path === path)?.querySelector<HTMLElement>("button")?.focus({ preventScroll: true });
  }
}

function row(f: FileState, openDetail: (path: string) => void): HTMLElement {
  const meta: string[] = [];
  if (f.pages) meta.push(`${f.pages} ${f.pages === 1 ? "page" : "pages"}`);
  if (f.chunks) meta.push(`${f.chunks} ${f.chunks === 1 ? "chunk" : "chunks"}`);
  // the row opens the document on a click anywhere; its name is the button a keyboard reaches
  return h(
    "li",
    {
      class: `file file-${f.state}`,
      "data-testid": "file-row",
      "data-state": f.state,
      "data-path": f.path,
      onclick: () => openDetail(f.path),
    },
    h("span", { class: `badge state-${f.state}`, "data-testid": "file-state" }, STATE_LABEL[f.state] ?? f.state),
    h(
      "span",
      { class: "file-main" },
      h("button", { type: "button", class: "file-name", title: f.path, "data-testid": "file-open", "aria-label": `${basename(f.path)}, ${STATE_LABEL[f.state] ?? f.state}: show details` }, breakableName(basename(f.path))),
      h("span", { class: "file-dir path-tail" }, h("bdi", null, dirname(f.path))),
      f.error ? h("span", { class: "file-error", "data-testid": "file-error" }, f.error) : null,
    ),
    meta.length ? h("span", { class: "file-meta" }, meta.join(" · ")) : null,
  );
}

/** The formats the indexer reads (crates/index/src/extract.rs `file_kind`), for the drop texts. */
export const FORMATS = "PDF, Word (DOCX), OpenDocument (ODT), RTF, HTML, EPUB, text, Markdown, CSV, TSV and JSON, and images (PNG, JPEG, TIFF, WebP) by OCR";
