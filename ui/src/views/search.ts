// Search: a query box (answers as you type, after a pause) and the hits with the query's words marked.

import { $, h, icon, replace } from "../dom";
import { basename, breakableName, dirname, shortDir } from "../format";
import type { Transport } from "../transport";
import { store } from "../store";
import { ApiError, type Hit, type SearchFilter } from "../types";
import type { OpenDetail } from "./detail";
import { showError } from "./toast";

const K = 10;
const STOP = new Set(
  "a an and are as at be by can do does for from has have how i in is it its of on or should so that the their there they this to was what when where which who why will with you your".split(" "),
);

/** The query's words as stems to mark ("tomatoes" also marks "tomato"); stop words left out. */
export function queryStems(query: string): string[] {
  const words = query
    .toLowerCase()
    .split(/[^\p{L}\p{M}\p{N}]+/u)
    .filter((w) => w.length > 1 && !STOP.has(w));
  return [...new Set(words.map((w) => (w.length > 4 ? w.replace(/(es|s)$/, "") : w)))];
}

/** Chinese, Japanese and Korean letters: their words are parts of runs written without spaces. */
const UNSPACED = /[\p{Script=Han}\p{Script=Hiragana}\p{Script=Katakana}\p{Script=Hangul}]/u;

/**
 * The text with each word the search matched (`terms`, lower case) in <mark>: whole words, and in
 * text written without spaces the matched stretches inside a run (`総務部` of `総務部の山田`).
 */
export function markedTerms(text: string, terms: string[]): (string | HTMLElement)[] {
  const wanted = new Set(terms.map((t) => t.toLowerCase()));
  const parts = terms.filter((t) => UNSPACED.test(t)).sort((a, b) => b.length - a.length);
  const out: (string | HTMLElement)[] = [];
  let last = 0;
  const mark = (at: number, word: string) => {
    if (at > last) out.push(text.slice(last, at));
    out.push(h("mark", null, word));
    last = at + word.length;
  };
  for (const m of text.matchAll(/[\p{L}\p{M}\p{N}]+/gu)) {
    const at = m.index ?? 0;
    if (wanted.has(m[0].toLowerCase())) {
      mark(at, m[0]);
      continue;
    }
    if (!parts.length || !UNSPACED.test(m[0])) continue;
    for (let i = 0; i < m[0].length; ) {
      const part = parts.find((p) => m[0].startsWith(p, i));
      if (part) {
        mark(at + i, part);
        i += part.length;
      } else i++;
    }
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

export function matches(text: string, stems: string[]): boolean {
  if (!stems.length) return false;
  for (const m of text.toLowerCase().matchAll(/[\p{L}\p{M}\p{N}]+/gu)) if (stems.some((s) => m[0].startsWith(s))) return true;
  return false;
}

/** The text with every word that starts with one of the stems in <mark>. */
export function highlighted(text: string, stems: string[]): (string | HTMLElement)[] {
  if (!stems.length) return [text];
  const out: (string | HTMLElement)[] = [];
  let last = 0;
  for (const m of text.matchAll(/[\p{L}\p{M}\p{N}]+/gu)) {
    const word = m[0].toLowerCase();
    if (!stems.some((s) => word.startsWith(s))) continue;
    const i = m.index ?? 0;
    if (i > last) out.push(text.slice(last, i));
    out.push(h("mark", null, m[0]));
    last = i + m[0].length;
  }
  if (last < text.length) out.push(text.slice(last));
  return out;
}

export function mountSearch(t: Transport, openDetail: OpenDetail): void {
  const form = $("search-form") as HTMLFormElement;
  const input = $("search-input") as HTMLInputElement;
  const list = $("search-hits");
  const meta = $("search-meta");
  // what a screen reader hears when the results change (the visible line carries timings too)
  const status = $("search-status");
  const announce = (text: string) => {
    if (status.textContent !== text) status.textContent = text;
  };
  const folder = $("filter-folder") as HTMLSelectElement;
  const type = $("filter-type") as HTMLSelectElement;
  const after = $("filter-after") as HTMLInputElement;
  const language = $("filter-language") as HTMLSelectElement;
  const filter = (): SearchFilter => ({
    folder: folder.value || undefined,
    types: type.value ? type.value.split(",") : undefined,
    after: after.value || undefined,
    language: language.value || undefined,
  });
  // the language choices are the index's own languages; read again when the list is opened, as
  // documents in a new language may have arrived since
  const languages = () => {
    const chosen = language.value;
    const known = store.languages.filter((l) => l.code);
    replace(language, h("option", { value: "" }, "any"), known.map((l) => h("option", { value: l.code! }, l.name ?? l.code!)));
    language.value = known.some((l) => l.code === chosen) ? chosen : "";
  };
  store.on("languages", languages);
  languages();
  language.addEventListener("focus", () => {
    t.state().then((s) => store.setLanguages(s.languages ?? []), () => undefined);
  });
  // the folder choices follow the watched folders
  const folders = () => {
    const chosen = folder.value;
    replace(folder, h("option", { value: "" }, "every folder"), store.folders.map((f) => h("option", { value: f, title: f }, shortDir(f, 40))));
    folder.value = store.folders.includes(chosen) ? chosen : "";
  };
  store.on("folders", folders);
  folders();
  for (const el of [folder, type, after, language])
    el.addEventListener("change", () => {
      lastQuery = "\u0000"; // the same words, other filters: search again
      void run();
    });
  let timer: number | undefined;
  let seq = 0;
  let lastQuery = "";

  const run = async () => {
    const q = input.value.trim();
    if (q === lastQuery) return;
    lastQuery = q;
    const mine = ++seq;
    if (!q) {
      replace(list, hint());
      meta.textContent = "";
      announce("");
      list.parentElement!.classList.remove("has-hits");
      return;
    }
    meta.textContent = "searching…";
    const started = performance.now();
    try {
      const { hits } = await t.search(q, K, filter());
      if (mine !== seq) return;
      const ms = performance.now() - started;
      meta.textContent = `${hits.length} ${hits.length === 1 ? "hit" : "hits"} · ${ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(1)} s`}`;
      draw(hits, q);
      announce(hits.length ? `${hits.length} ${hits.length === 1 ? "result" : "results"} for “${q}”` : `No results for “${q}”`);
    } catch (e) {
      if (mine !== seq) return;
      meta.textContent = "";
      if (e instanceof ApiError && e.kind === "not_found" && !e.unauthorized) {
        announce(e.message || "Nothing indexed yet.");
        replace(list, h("li", { class: "empty" }, e.message || "Nothing indexed yet."));
        list.parentElement!.classList.add("has-hits");
      } else showError(e, "Search");
    }
  };

  // what the empty list says before anything is asked
  const hint = () =>
    h(
      "li",
      { class: "search-hint", "data-testid": "search-hint" },
      h("p", null, "Type to search every indexed document, by meaning and by keyword; the hits come as you type."),
      h("p", null, h("kbd", null, "/"), " jumps here · ", h("kbd", null, "Enter"), " searches again · ", h("kbd", null, "Ctrl"), "+", h("kbd", null, "Enter"), " asks the question and answers it with its sources"),
    );
  replace(list, hint());

  // a document that left the index (deleted, or removed from it) leaves the hits shown
  store.on("removed", () => {
    for (const li of Array.from(list.querySelectorAll<HTMLElement>("[data-testid=search-hit]"))) {
      if (li.dataset.path && store.removed.has(li.dataset.path)) li.remove();
    }
  });

  function draw(hits: Hit[], q: string) {
    list.parentElement!.classList.add("has-hits");
    if (!hits.length) {
      replace(list, h("li", { class: "empty", "data-testid": "search-empty" }, `Nothing matches “${q}” yet.`));
      return;
    }
    const stems = queryStems(q);
    const top = Math.max(...hits.map((x) => x.score || 0)) || 1;
    replace(
      list,
      hits.map((hit) => {
        const relevance = h("span", { class: "hit-score-bar" });
        relevance.style.width = `${Math.max(6, ((hit.score || 0) / top) * 100)}%`;
        return h(
          "li",
          {
            class: "hit",
            "data-testid": "search-hit",
            "data-path": hit.path,
            // a click anywhere on the hit opens it; its name is the button a keyboard reaches
            onclick: () => openDetail(hit.path, q, hit.page ?? undefined),
          },
          h(
            "div",
            { class: "hit-head" },
            icon(DOC, "hit-icon"),
            h(
              "button",
              {
                type: "button",
                class: "hit-file",
                "data-testid": "search-hit-file",
                title: hit.path,
                "aria-label": `${basename(hit.path)}${hit.page !== null && hit.page !== undefined ? `, page ${hit.page}` : ""}: show details`,
              },
              breakableName(basename(hit.path)),
            ),
            hit.page !== null && hit.page !== undefined ? h("span", { class: "hit-page" }, `p. ${hit.page}`) : null,
            hit.ocr ? h("span", { class: "badge-ocr", "data-testid": "search-hit-ocr", title: "This page was read by OCR from its image: words may be misread" }, "OCR") : null,
            h("span", { class: "hit-dir path-tail", title: dirname(hit.path) }, h("bdi", null, dirname(hit.path))),
            h("span", { class: "hit-score", title: `score ${(hit.score ?? 0).toFixed(4)}`, "aria-hidden": "true" }, relevance),
            h(
              "button",
              {
                class: "btn btn-small",
                type: "button",
                "data-testid": "search-hit-open",
                "aria-label": `Open ${basename(hit.path)}`,
                onclick: (e: Event) => {
                  e.stopPropagation();
                  t.openFile(hit.path, hit.page).catch((err) => showError(err, "Open"));
                },
              },
              "Open",
            ),
          ),
          // the words the server matched (its stop-word lists in every language), else the query's stems
          h("p", { class: "hit-text" }, hit.terms?.length ? markedTerms(hit.text ?? "", hit.terms) : highlighted(hit.text ?? "", stems)),
        );
      }),
    );
  }

  input.addEventListener("input", () => {
    clearTimeout(timer);
    timer = window.setTimeout(run, 300);
  });
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    clearTimeout(timer);
    lastQuery = "\u0000"; // Enter always searches again (the index may have grown)
    void run();
  });
  window.addEventListener("keydown", (e) => {
    if (e.key === "/" && document.activeElement?.tagName !== "INPUT") {
      e.preventDefault();
      input.focus();
    }
  });
}

const DOC = "M5 2.5h6.5L15 6v11.5H5zM11.5 2.5V6H15";
