// Ask: a question answered from the documents, above the hits. Each answer cites its passages as
// [n] with file and page (a click opens the document at that page); a question the passages do not
// answer says so. The questions of one conversation stack up, and a follow-up is sent with the
// turns before it, so "when is it due?" after "how much is the deposit?" is understood.

import { $, h, replace } from "../dom";
import { basename } from "../format";
import type { Transport } from "../transport";
import type { AnswerEvent, AskEvent, AskPassage, Turn } from "../types";
import type { OpenDetail } from "./detail";

/** The words the answerer says when no passage holds the answer (answer::NOT_FOUND). */
export const NOT_FOUND = "Not in your documents.";

/** The answer's text with each citation mark ([1], [1, 2]) as a button that opens its passage. */
export function withCitationLinks(answer: string, cite: (n: number) => HTMLElement | null): (string | HTMLElement)[] {
  const out: (string | HTMLElement)[] = [];
  let last = 0;
  for (const m of answer.matchAll(/\[(\d+(?:\s*,\s*\d+)*)\]/g)) {
    const at = m.index ?? 0;
    if (at > last) out.push(answer.slice(last, at));
    for (const n of m[1].split(",").map((x) => Number(x.trim()))) out.push(cite(n) ?? `[${n}]`);
    last = at + m[0].length;
  }
  if (last < answer.length) out.push(answer.slice(last));
  return out;
}

function seconds(s: number): string {
  return s < 10 ? `${s.toFixed(1)} s` : `${Math.round(s)} s`;
}

export function mountAsk(t: Transport, openDetail: OpenDetail): void {
  const input = $("search-input") as HTMLInputElement;
  const button = $("ask-button") as HTMLButtonElement;
  const panel = $("answer");
  // "": the app's choice (judged on a GPU); a number: that many candidates judged (0: none)
  const rerank = $("ask-rerank") as HTMLSelectElement;
  const turns: Turn[] = [];
  let busy = false;

  const clear = () => {
    turns.length = 0;
    replace(panel);
    panel.hidden = true;
  };

  async function ask() {
    const question = input.value.trim();
    if (!question || busy) return;
    busy = true;
    button.disabled = true;
    panel.hidden = false;
    const status = h("p", { class: "answer-status", "data-testid": "answer-status" }, "Finding passages…");
    const body = h("div", { class: "answer-body" });
    const turn = h(
      "article",
      { class: "answer-turn", "data-testid": "answer-turn", "aria-busy": "true" },
      h("p", { class: "answer-question" }, question),
      status,
      body,
    );
    panel.append(turn);
    if (!panel.querySelector(".answer-actions")) {
      panel.prepend(
        h(
          "div",
          { class: "answer-actions" },
          h("span", { class: "answer-title" }, "Answers from your documents"),
          h("button", { class: "btn btn-small", type: "button", "data-testid": "answer-clear", onclick: clear }, "New conversation"),
        ),
      );
    }
    let passages: AskPassage[] = [];
    const started = performance.now();
    const earlier = turns.slice(-4);
    try {
      const judged = rerank.value === "" ? undefined : Number(rerank.value);
      await t.ask(question, earlier, (e: AskEvent) => {
        switch (e.event) {
          case "passages":
            passages = e.passages;
            status.textContent = `Reading ${e.passages.length} passage${e.passages.length === 1 ? "" : "s"}…`;
            break;
          case "status":
            status.textContent = `${e.status[0].toUpperCase()}${e.status.slice(1)}…`;
            break;
          case "answer":
            status.remove();
            replace(body, answerView(e, question, passages, openDetail));
            if (e.answerable) turns.push({ question, answer: e.answer });
            break;
          case "error":
            status.remove();
            replace(body, h("p", { class: "callout callout-error", "data-testid": "answer-error" }, e.error.message));
            break;
        }
      }, judged);
    } catch (e) {
      status.remove();
      const message = e instanceof Error ? e.message : String(e);
      replace(body, h("p", { class: "callout callout-error", "data-testid": "answer-error" }, message));
    } finally {
      turn.removeAttribute("aria-busy");
      busy = false;
      button.disabled = false;
      if (performance.now() - started > 1000) turn.scrollIntoView({ block: "nearest" });
    }
  }

  button.addEventListener("click", () => void ask());
  input.addEventListener("keydown", (e) => {
    // Enter searches; Ctrl/⌘+Enter asks
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      void ask();
    }
  });
}

function answerView(e: AnswerEvent, question: string, passages: AskPassage[], openDetail: OpenDetail): HTMLElement[] {
  const byN = new Map(e.citations.map((c) => [c.n, c]));
  const cite = (n: number) => {
    const c = byN.get(n);
    if (!c) return null;
    return h(
      "button",
      {
        class: "cite",
        type: "button",
        "data-testid": "answer-cite",
        title: `${basename(c.path)}, page ${c.page}`,
        onclick: () => openDetail(c.path, question, c.page),
      },
      `[${n}]`,
    );
  };
  const out: HTMLElement[] = [];
  if (e.answerable) {
    out.push(h("p", { class: "answer-text", "data-testid": "answer-text", "data-answerable": "true" }, withCitationLinks(e.answer, cite)));
    out.push(
      h(
        "ol",
        { class: "answer-sources", "data-testid": "answer-sources" },
        e.citations.map((c) =>
          h(
            "li",
            null,
            h(
              "button",
              {
                class: "source",
                type: "button",
                "data-testid": "answer-source",
                "data-path": c.path,
                "data-page": c.page,
                onclick: () => openDetail(c.path, question, c.page),
              },
              h("span", { class: "source-n" }, `[${c.n}]`),
              h("span", { class: "source-file" }, basename(c.path)),
              h("span", { class: "hit-page" }, `p. ${c.page}`),
            ),
          ),
        ),
      ),
    );
  } else {
    out.push(
      h("p", { class: "answer-text", "data-testid": "answer-text", "data-answerable": "false" }, NOT_FOUND),
      h(
        "p",
        { class: "muted answer-note" },
        passages.length
          ? `None of the ${passages.length} best passages (${[...new Set(passages.map((p) => basename(p.path)))].slice(0, 3).join(", ")}${passages.length > 3 ? "…" : ""}) says; the hits below may still help.`
          : "No passage was found for it.",
      ),
    );
  }
  if (e.removed.length) {
    out.push(
      h(
        "details",
        { class: "check check-removed", "data-testid": "answer-removed" },
        h("summary", null, `${e.removed.length} sentence${e.removed.length === 1 ? "" : "s"} taken out for stating what the passage does not say`),
        h(
          "ul",
          null,
          e.removed.map((r) => h("li", null, h("s", null, r.sentence), h("span", { class: "check-items" }, ` not in the passage: ${r.items.join(", ")}`))),
        ),
      ),
    );
  }
  out.push(h("p", { class: "answer-meta", "data-testid": "answer-meta" }, `answered in ${seconds(e.seconds)} by ${e.model} · checked against its passage`));
  return out;
}
