// One document in a side panel, a modal dialog: status, error, summary, and its chunks with their
// pages. Focus moves into it when it opens and back to what opened it when it closes (Escape, the
// close button, a click beside it).

import { $, h, replace } from "../dom";
import { basename, breakableName, breakablePath, bytes, dirname, grouped, STATE_LABEL } from "../format";
import { store } from "../store";
import type { Transport } from "../transport";
import type { Chunk, DocumentDetail } from "../types";
import { highlighted, matches, queryStems } from "./search";
import { ask } from "./confirm";
import { showError, toast } from "./toast";

let current: string | null = null;

/** Opens a document's detail; with `page`, the first chunk on that page is the one shown open. */
export type OpenDetail = (path: string, query?: string, page?: number) => void;

export function mountDetail(t: Transport): OpenDetail {
  const panel = $("detail") as HTMLDialogElement;
  // a click on the backdrop reaches the dialog itself, beside its box
  panel.addEventListener("click", (e) => {
    if (e.target !== panel) return;
    const r = panel.getBoundingClientRect();
    const inside = e.clientX >= r.left && e.clientX <= r.right && e.clientY >= r.top && e.clientY <= r.bottom;
    if (!inside) close();
  });
  // Escape (the dialog's cancel) and close() both end here
  panel.addEventListener("close", closed);
  // a document still moving through the queue is shown again when its state changes
  let lastState = "";
  store.on("queue", () => {
    if (!current || !panel.open) return;
    const f = store.files.get(current);
    if (f && f.state !== lastState) {
      lastState = f.state;
      void open(current, currentQuery, currentPage, true);
    }
  });
  let currentQuery: string | undefined;
  let currentPage: number | undefined;
  /** What had the focus when the panel opened: it gets it back (or its row, drawn anew since). */
  let opener: { el: HTMLElement; row: string | null; path: string | null } | null = null;
  // its summary arrived while it is shown
  store.on("summary", () => {
    if (current && panel.open && store.lastSummary === current) void open(current, currentQuery, currentPage, true);
  });

  function close() {
    if (panel.open) panel.close();
  }

  function closed() {
    panel.classList.remove("open");
    current = null;
    const back = opener;
    opener = null;
    if (!back) return;
    let target: HTMLElement | null = back.el.isConnected ? back.el : null;
    if (!target && back.row && back.path !== null) {
      const row = [...document.querySelectorAll<HTMLElement>(`[data-testid="${back.row}"]`)].find((r) => r.dataset.path === back.path);
      target = row?.querySelector<HTMLElement>("button") ?? null;
    }
    (target ?? ($("search-input") as HTMLElement)).focus({ preventScroll: true });
  }

  /** Draws the panel's content anew, keeping the focus where it was inside it. */
  function show(...content: HTMLElement[]) {
    const active = document.activeElement as HTMLElement | null;
    const keep = active && panel.contains(active) ? active.dataset.testid : undefined;
    replace(panel, ...content);
    const again = keep ? panel.querySelector<HTMLElement>(`[data-testid="${keep}"]`) : null;
    (again ?? panel.querySelector<HTMLElement>("#detail-title"))?.focus({ preventScroll: true });
  }

  async function open(path: string, query?: string, page?: number, quiet = false) {
    current = path;
    currentQuery = query;
    currentPage = page;
    lastState = store.files.get(path)?.state ?? "";
    if (!panel.open) {
      const active = document.activeElement as HTMLElement | null;
      const row = active?.closest<HTMLElement>("[data-path]");
      opener = active && active !== document.body ? { el: active, row: row?.dataset.testid ?? null, path: row?.dataset.path ?? null } : null;
      replace(panel, head(path, null), h("div", { class: "drawer-body" }, h("div", { class: "loading" }, "Loading…")));
      panel.showModal();
      panel.querySelector<HTMLElement>("#detail-title")?.focus({ preventScroll: true });
      requestAnimationFrame(() => panel.classList.add("open"));
    } else if (!quiet) show(head(path, null), h("div", { class: "drawer-body" }, h("div", { class: "loading" }, "Loading…")));
    try {
      const doc = await t.document(path);
      if (current !== path) return;
      show(head(path, doc), body(doc, query, page));
    } catch (e) {
      if (current !== path) return;
      const f = store.files.get(path);
      show(
        head(path, null),
        h(
          "div",
          { class: "drawer-body", tabindex: 0, role: "region", "aria-label": "What is known of it" },
          f ? facts(f.state, f.pages, null, f.chunks) : null,
          f?.error ? h("div", { class: "callout callout-error", "data-testid": "detail-error" }, f.error) : null,
          h("div", { class: "callout" }, e instanceof Error ? e.message : String(e)),
        ),
      );
      if (!quiet && !f) showError(e, "Document");
    }
  }

  async function reindex(path: string) {
    try {
      const { queued } = await t.reindex(path);
      toast(queued ? `Re-indexing ${basename(path)}` : `${basename(path)} was not queued again`);
    } catch (e) {
      showError(e, "Re-index");
    }
  }

  async function forget(path: string) {
    const choice = await ask("Remove this document from the index?", `${path}: its text, vectors and summary leave the index, and nothing of them is kept in it. The file itself is not touched.`, [
      { label: "Remove", value: "forget", primary: true, danger: true },
    ]);
    if (choice !== "forget") return;
    try {
      const { forgotten } = await t.forget([path]);
      close();
      toast(`Removed ${basename(path)} from the index (${forgotten.length} document${forgotten.length === 1 ? "" : "s"})`);
    } catch (e) {
      showError(e, "Remove");
    }
  }

  function head(path: string, doc: DocumentDetail | null): HTMLElement {
    const unknown = doc === null && !store.files.has(path) ? true : null;
    return h(
      "div",
      { class: "drawer-head" },
      h(
        "div",
        { class: "drawer-title" },
        h("h2", { id: "detail-title", "data-testid": "detail-name", tabindex: -1 }, breakableName(basename(path))),
        h("div", { class: "drawer-path", title: path }, breakablePath(dirname(path))),
      ),
      h("button", { class: "btn btn-ghost drawer-close", type: "button", "aria-label": "Close", title: "Close (Esc)", "data-testid": "detail-close", onclick: close }, "×"),
      h(
        "div",
        { class: "drawer-actions" },
        h(
          "button",
          {
            class: "btn btn-primary",
            type: "button",
            "data-testid": "detail-open",
            onclick: () => t.openFile(path, currentPage).catch((e) => showError(e, "Open")),
            disabled: unknown,
          },
          "Open file",
        ),
        h(
          "button",
          {
            class: "btn",
            type: "button",
            "data-testid": "detail-reindex",
            title: "Read this document again (its passages whose text is unchanged keep their vectors)",
            onclick: () => void reindex(path),
            disabled: unknown,
          },
          "Re-index",
        ),
        h(
          "button",
          {
            class: "btn",
            type: "button",
            "data-testid": "detail-forget",
            title: "Remove this document from the index: its text, vectors and summary (the file stays where it is)",
            onclick: () => void forget(path),
            disabled: unknown,
          },
          "Remove from index",
        ),
      ),
    );
  }

  return (path, query, page) => void open(path, query, page);
}

function facts(state: string, pages: number | null, size: number | null, chunks: number | null, ocrPages: number[] = []): HTMLElement {
  const item = (label: string, value: string | HTMLElement) => h("div", { class: "fact" }, h("span", { class: "fact-label" }, label), h("span", { class: "fact-value" }, value));
  return h(
    "div",
    { class: "drawer-facts" },
    item("status", h("span", { class: `badge state-${state}`, "data-testid": "detail-state" }, STATE_LABEL[state] ?? state)),
    item("pages", pages === null || pages === undefined ? "–" : grouped(pages)),
    item("size", bytes(size)),
    item("chunks", chunks === null || chunks === undefined ? "–" : grouped(chunks)),
    ocrPages.length ? item("read by OCR", h("span", { "data-testid": "detail-ocr-pages" }, pageRuns(ocrPages))) : null,
  );
}

/** "p. 3", "pp. 1–4, 7". */
function pageRuns(pages: number[]): string {
  const runs: [number, number][] = [];
  for (const p of [...pages].sort((a, b) => a - b)) {
    const last = runs[runs.length - 1];
    if (last && last[1] + 1 === p) last[1] = p;
    else runs.push([p, p]);
  }
  const text = runs.map(([a, b]) => (a === b ? `${a}` : `${a}–${b}`)).join(", ");
  return `${pages.length === 1 ? "p." : "pp."} ${text}`;
}

function body(doc: DocumentDetail, query?: string, page?: number): HTMLElement {
  const stems = query ? queryStems(query) : [];
  const chunks = [...doc.chunks].sort((a, b) => a.ordinal - b.ordinal);
  // a citation's page: the chunks on it, the one with the question's words first
  const onPage = page === undefined ? [] : chunks.filter((c) => (c.page_start ?? 1) <= page && page <= (c.page_end ?? c.page_start ?? 1));
  const firstHit = onPage.find((c) => matches(c.text, stems)) ?? onPage[0] ?? chunks.find((c) => matches(c.text, stems));
  const el = h(
    "div",
    // it scrolls: a keyboard reaches it to scroll it
    { class: "drawer-body", tabindex: 0, role: "region", "aria-label": "Summary and passages" },
    facts(String(doc.state), doc.pages, doc.size, doc.chunks.length, doc.ocrPages),
    // an indexed document's "error" holds its notes (pages read by OCR, the encoding a text was read in,
    // pages that could not be read): said plainly, not in red; a failure's reason stays an error
    doc.error
      ? doc.state === "done"
        ? h("div", { class: "callout", "data-testid": "detail-notes" }, doc.error)
        : h("div", { class: "callout callout-error", "data-testid": "detail-error" }, doc.error)
      : null,
    h("h3", null, "Summary"),
    summary(doc),
    h("h3", null, `Chunks`, h("span", { class: "h-sub" }, doc.chunks.length ? ` ${grouped(doc.chunks.length)}` : "")),
    chunks.length
      ? h(
          "ol",
          { class: "chunks", "data-testid": "detail-chunks" },
          chunks.map((c) => chunk(c, stems, c === firstHit, doc.ocrPages)),
        )
      : h("p", { class: "muted" }, doc.state === "no_text" ? "No text could be read from this file (see the reason above), so there is nothing to index." : "No chunks."),
  );
  if (firstHit) requestAnimationFrame(() => el.querySelector(".chunk.match")?.scrollIntoView({ block: "center" }));
  return el;
}

/** The heading under which the summarizer quotes the document's own lines (grounding::KEY_LINES_HEADING). */
const KEY_LINES_HEADING = "From the document:";

/** A summary's text: what the model wrote, and the lines quoted from the document under it. */
export function splitKeyLines(summary: string): { written: string; quoted: string[] } {
  const at = summary.startsWith(`${KEY_LINES_HEADING}\n`) ? 0 : summary.lastIndexOf(`\n${KEY_LINES_HEADING}\n`);
  if (at < 0) return { written: summary, quoted: [] };
  const tail = summary.slice(at).trimStart().slice(KEY_LINES_HEADING.length);
  const quoted = tail
    .split("\n")
    .map((l) => l.replace(/^- /, "").trim())
    .filter((l) => l);
  return { written: summary.slice(0, at).trimEnd(), quoted };
}

/** The summary with what its check against the document found, or why there is none. */
function summary(doc: DocumentDetail): HTMLElement {
  const check = doc.summaryCheck;
  if (doc.summary !== null && doc.summaryState !== "pending") {
    const removed = check?.removed ?? [];
    const corrected = removed.filter((r) => r.kept).length;
    const status = !check
      ? h("p", { class: "check check-none", "data-testid": "summary-check", "data-check": "unchecked" }, "Not checked against the document (made by an older version).")
      : removed.length
        ? h(
            "details",
            { class: "check check-removed", "data-testid": "summary-check", "data-check": "removed" },
            h(
              "summary",
              null,
              `Checked against the document: ${removed.length} sentence${removed.length === 1 ? "" : "s"} stated what it does not say` +
                (corrected === removed.length ? ", kept without the currency it never gives" : corrected ? ` (${corrected} kept without the currency it never gives)` : ": removed"),
            ),
            h(
              "ul",
              null,
              removed.map((r) =>
                h(
                  "li",
                  { "data-testid": "summary-removed" },
                  h("s", null, r.sentence),
                  h("span", { class: "check-items" }, ` not in the document: ${r.items.join(", ")}`),
                  r.kept ? h("span", { class: "check-kept", "data-testid": "summary-kept" }, ` — shown as: ${r.kept}`) : null,
                ),
              ),
            ),
          )
        : h(
            "p",
            { class: "check check-ok", "data-testid": "summary-check", "data-check": "ok" },
            `✓ Every figure, date and name in it is in the document${check.rewritten ? " (written a second time to get there)" : ""}.`,
          );
    const { written, quoted } = splitKeyLines(doc.summary);
    const text = written.trim()
      ? h("p", { class: "summary", "data-testid": "detail-summary" }, written)
      : h("p", { class: "muted", "data-testid": "detail-summary-empty" }, "Every sentence the model wrote stated something the document does not, so none is shown.");
    const quotes = quoted.length
      ? h(
          "div",
          { class: "key-lines", "data-testid": "summary-key-lines" },
          h("p", { class: "key-lines-head" }, "From the document, word for word:"),
          h("ul", null, quoted.map((line) => h("li", null, h("q", null, line)))),
        )
      : null;
    const language = check?.english_instead_of
      ? h(
          "p",
          { class: "check check-language", "data-testid": "summary-language" },
          `Written in English: the summarizing model did not write ${check.english_instead_of}, though asked to.`,
        )
      : null;
    return h("div", { class: "summary-block" }, text, quotes, status, language);
  }
  const sm = store.summaries;
  switch (doc.summaryState) {
    case "pending": {
      const waiting = sm?.pending ?? 0;
      const eta = sm?.eta_seconds;
      const left = eta ? `, about ${eta < 90 ? `${Math.max(1, Math.round(eta))} s` : `${Math.round(eta / 60)} min`} left` : "";
      if (sm?.status) return h("p", { class: "muted summary-state", "data-testid": "summary-state", "data-state": "pending" }, `Waiting for the chat model: ${sm.status}.`);
      return h("p", { class: "muted summary-state", "data-testid": "summary-state", "data-state": "pending" }, `Summarizing… ${waiting > 1 ? `${grouped(waiting)} documents waiting${left}` : `the model is on it${left}`}.`);
    }
    case "off":
      return h(
        "p",
        { class: "muted summary-state", "data-testid": "summary-state", "data-state": "off" },
        "Summaries are off: this server runs without a chat model.",
      );
    case "not_asked":
      return h("p", { class: "muted summary-state", "data-testid": "summary-state", "data-state": "not_asked" }, "Not summarized: summaries are made when asked for.");
    default:
      return h("p", { class: "muted", "data-testid": "summary-state" }, doc.state === "done" ? "No summary yet." : "A summary comes once the document is indexed.");
  }
}

function chunk(c: Chunk, stems: string[], match: boolean, ocrPages: number[]): HTMLElement {
  const pages = c.page_start === null || c.page_start === undefined ? "" : c.page_end && c.page_end !== c.page_start ? `pp. ${c.page_start}–${c.page_end}` : `p. ${c.page_start}`;
  // a PDF's line breaks are layout, not meaning: keep paragraphs, join the lines inside them
  const flowing = c.text.replace(/([^\n])\n(?!\n)/g, "$1 ");
  // the chunk that matched the search is shown whole; the others open on a click
  const text = h("p", { class: `chunk-text${match ? " expanded" : ""}` }, highlighted(flowing, stems));
  return h(
    "li",
    { class: `chunk${match ? " match" : ""}`, "data-testid": "detail-chunk", onclick: () => text.classList.toggle("expanded") },
    h(
      "div",
      { class: "chunk-head" },
      h("span", null, `#${c.ordinal}`),
      h("span", null, pages),
      ocrPages.some((p) => p >= (c.page_start ?? 0) && p <= (c.page_end ?? c.page_start ?? 0))
        ? h("span", { class: "badge-ocr", title: "Read by OCR from the page's image: words may be misread" }, "OCR")
        : null,
    ),
    text,
  );
}
