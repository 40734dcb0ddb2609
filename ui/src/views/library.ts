// The library: every document the index holds, in a dialog, filtered by folder, file type and date,
// sorted by name, date, size or pages, a page at a time (GET /api/library, the desktop's `library`).
// A row opens the document's detail, where it can be read again or removed.

import { $, h, replace } from "../dom";
import { basename, bytes, dirname, grouped, STATE_LABEL } from "../format";
import { store } from "../store";
import type { LibraryEntry, LibraryQuery, Transport } from "../transport";
import type { OpenDetail } from "./detail";
import { showError } from "./toast";

const PAGE = 50;
const TYPES = ["pdf", "txt", "md", "csv", "tsv", "json", "docx", "odt", "html", "epub", "rtf", "png", "jpg", "tif", "webp"];
const ORDERS: [LibraryQuery["order"], string][] = [
  ["name", "Name"],
  ["modified", "Last modified"],
  ["size", "Size"],
  ["pages", "Pages"],
  ["indexed", "Indexed"],
];

const STATUS_LABEL: Record<string, string> = { indexed: STATE_LABEL.done ?? "done", no_text: STATE_LABEL.no_text ?? "no text", failed: STATE_LABEL.failed ?? "failed" };

export function mountLibrary(t: Transport, openDetail: OpenDetail): void {
  const dialog = $("library") as HTMLDialogElement;
  $("library-button").addEventListener("click", () => {
    draw();
    dialog.showModal();
  });

  function draw(): void {
    const folder = h(
      "select",
      { id: "library-folder", "data-testid": "library-folder" },
      h("option", { value: "" }, "Every folder"),
      ...store.folders.map((f) => h("option", { value: f }, f)),
    );
    const type = h("select", { id: "library-type", "data-testid": "library-type" }, h("option", { value: "" }, "Every type"), ...TYPES.map((x) => h("option", { value: x }, `.${x}`)));
    const after = h("input", { id: "library-after", "data-testid": "library-after", type: "date" });
    const before = h("input", { id: "library-before", "data-testid": "library-before", type: "date" });
    const order = h("select", { id: "library-order", "data-testid": "library-order" }, ...ORDERS.map(([v, name]) => h("option", { value: v }, name)));
    const descending = h("input", { id: "library-desc", "data-testid": "library-desc", type: "checkbox" });
    const summary = h("p", { class: "library-summary", role: "status", "aria-live": "polite", "data-testid": "library-summary" }, "");
    const body = h("tbody", { "data-testid": "library-rows" });
    const more = h("button", { type: "button", class: "btn", "data-testid": "library-more", hidden: true }, "Show more");
    let shown = 0;
    // Filters changed quickly: only the answer to the latest question is shown.
    let asked = 0;

    const query = (offset: number): LibraryQuery => ({
      filter: {
        folder: folder.value || undefined,
        extensions: type.value ? [type.value] : [],
        after: after.value || undefined,
        before: before.value || undefined,
      },
      order: order.value as LibraryQuery["order"],
      descending: descending.checked,
      offset,
      limit: PAGE,
    });

    async function load(reset: boolean): Promise<void> {
      if (reset) {
        shown = 0;
        body.replaceChildren();
      }
      const mine = ++asked;
      try {
        const page = await t.library(query(shown));
        if (mine !== asked) return;
        body.append(...page.documents.map(row));
        shown += page.documents.length;
        summary.textContent =
          page.total === 0 ? "No document matches these filters." : `${grouped(shown)} of ${grouped(page.total)} document${page.total === 1 ? "" : "s"}`;
        more.hidden = shown >= page.total;
      } catch (err) {
        showError(err);
      }
    }

    function row(doc: LibraryEntry): HTMLTableRowElement {
      const open = () => {
        dialog.close();
        openDetail(doc.path);
      };
      return h(
        "tr",
        { "data-testid": "library-row", "data-path": doc.path },
        h("td", null, h("button", { type: "button", class: "link", title: doc.path, onclick: open }, basename(doc.path)), h("div", { class: "library-folder" }, dirname(doc.path))),
        h("td", null, STATUS_LABEL[doc.status] ?? doc.status),
        h("td", { class: "num" }, doc.pages ? grouped(doc.pages) : "–"),
        h("td", { class: "num" }, bytes(doc.size)),
        h("td", null, doc.modified > 0 ? new Date(doc.modified * 1000).toLocaleDateString() : "–"),
      );
    }

    for (const control of [folder, type, after, before, order, descending]) control.addEventListener("change", () => void load(true));
    more.addEventListener("click", () => void load(false));
    const label = (id: string, text: string, control: HTMLElement) => h("label", { class: "library-filter", for: id }, text, control);
    replace(
      dialog,
      h(
        "div",
        { class: "library" },
        h(
          "div",
          { class: "library-head" },
          h("h2", { id: "library-title" }, "Library"),
          h("button", { type: "button", class: "btn", "data-testid": "library-close", onclick: () => dialog.close() }, "Close"),
        ),
        h(
          "div",
          { class: "library-filters" },
          label("library-folder", "Folder", folder),
          label("library-type", "Type", type),
          label("library-after", "Modified from", after),
          label("library-before", "before", before),
          label("library-order", "Sort by", order),
          label("library-desc", "Reverse", descending),
        ),
        summary,
        h(
          "div",
          { class: "library-table" },
          h(
            "table",
            null,
            h("caption", { class: "sr-only" }, "The documents in the index"),
            h("thead", null, h("tr", null, h("th", { scope: "col" }, "Document"), h("th", { scope: "col" }, "Status"), h("th", { scope: "col" }, "Pages"), h("th", { scope: "col" }, "Size"), h("th", { scope: "col" }, "Modified"))),
            body,
          ),
        ),
        more,
      ),
    );
    void load(true);
  }
}
