// Top bar (model, languages, summaries, device, connection; on a narrow window the facts fold away
// behind a button), the engine's facts (probe capacity, memory) and the watched-folder strip.

import { $, h, icon, replace } from "../dom";
import { bytes, grouped, percent, shortDir } from "../format";
import { store } from "../store";
import type { Connection, Transport } from "../transport";
import { ask } from "./confirm";
import { showError, toast } from "./toast";

export function mountHeader(t: Transport): void {
  const factsToggle = $("facts-toggle");
  factsToggle.addEventListener("click", () => {
    const open = factsToggle.getAttribute("aria-expanded") !== "true";
    factsToggle.setAttribute("aria-expanded", String(open));
    factsToggle.closest(".topbar")!.classList.toggle("facts-open", open);
  });
  // the height of the bars above the cards, so that search and the queue fill the rest of the window
  const bars = [document.querySelector<HTMLElement>(".topbar")!, document.querySelector<HTMLElement>(".sources")!];
  const measure = new ResizeObserver(() => {
    const px = bars.reduce((n, el) => n + el.offsetHeight, 0);
    document.documentElement.style.setProperty("--chrome", `${px}px`);
  });
  bars.forEach((el) => measure.observe(el));
  store.on("device", drawDevice);
  store.on("folders", drawFolders);
  store.on("languages", drawLanguages);
  // the index's languages change as documents are done: read them again, at most every few seconds
  let doneSeen = store.counts.done;
  let reading = false;
  store.on("queue", () => {
    if (reading || store.counts.done === doneSeen) return;
    doneSeen = store.counts.done;
    reading = true;
    window.setTimeout(() => {
      t.state()
        .then((s) => store.setLanguages(s.languages ?? []), () => undefined)
        .finally(() => (reading = false));
    }, 3000);
  });

  const form = $("folder-form") as HTMLFormElement;
  const input = $("folder-input") as HTMLInputElement;
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const path = input.value.trim();
    if (!path) return;
    const button = form.querySelector("button")!;
    button.disabled = true;
    try {
      store.setFolders(await t.addFolder(path));
      input.value = "";
      toast(`Watching ${shortDir(path, 60)}`);
    } catch (err) {
      showError(err);
    } finally {
      button.disabled = false;
    }
  });

  async function remove(path: string) {
    const choice = await ask(
      "Stop watching this folder?",
      `${path}: its documents can leave the index with it (their text, vectors and summaries, nothing of them kept), or stay searchable.`,
      [
        { label: "Keep its documents", value: "keep" },
        { label: "Remove its documents", value: "forget", primary: true, danger: true },
      ],
    );
    if (choice === null) return;
    try {
      store.setFolders(await t.removeFolder(path, choice === "forget"));
      toast(choice === "forget" ? `Stopped watching ${shortDir(path, 60)}; its documents were removed` : `Stopped watching ${shortDir(path, 60)}`);
    } catch (err) {
      showError(err);
    }
  }

  async function reindex(path: string) {
    try {
      const { queued } = await t.reindex(path);
      toast(queued ? `Re-indexing ${queued} ${queued === 1 ? "document" : "documents"} in ${shortDir(path, 48)}` : `Nothing to re-index in ${shortDir(path, 48)}`);
    } catch (err) {
      showError(err, "Re-index");
    }
  }

  function drawFolders() {
    const list = $("folders");
    if (!store.folders.length) {
      replace(list, h("li", { class: "folders-empty" }, "none yet"));
      return;
    }
    replace(
      list,
      store.folders.map((f) =>
        h(
          "li",
          { class: "folder", "data-testid": "folder", "data-path": f, title: f },
          icon(FOLDER, "folder-icon"),
          h("span", { class: "folder-path" }, shortDir(f, 42)),
          h(
            "button",
            { class: "folder-action", type: "button", "aria-label": `Re-index ${f}`, title: "Re-index: read every document in it again", "data-testid": "folder-reindex", onclick: () => reindex(f) },
            icon(REINDEX, "folder-action-icon"),
          ),
          h("button", { class: "folder-action folder-remove", type: "button", "aria-label": `Stop watching ${f}`, title: "Stop watching", "data-testid": "folder-remove", onclick: () => remove(f) }, "×"),
        ),
      ),
    );
  }
}

/** Two arrows round: read again. */
export const REINDEX = "M15.5 8.5A5.5 5.5 0 0 0 5.3 6.2M4.5 11.5a5.5 5.5 0 0 0 10.2 2.3M5 3v3.5h3.5M15 17v-3.5h-3.5";

const FOLDER = "M2.5 5.5a1.5 1.5 0 0 1 1.5-1.5h3.6l1.8 2H16a1.5 1.5 0 0 1 1.5 1.5v7A1.5 1.5 0 0 1 16 16H4a1.5 1.5 0 0 1-1.5-1.5z";

/** The index's languages, and where its embedding model does not read them (search there is by
 * keyword alone, or the model only partly helps). */
function drawLanguages() {
  const el = $("index-languages");
  const known = store.languages.filter((l) => l.code);
  el.parentElement!.hidden = known.length === 0;
  const total = store.languages.reduce((n, l) => n + l.chunks, 0) || 1;
  const shown = known.slice(0, 3).map((l) => `${l.name ?? l.code} ${percent(l.chunks / total)}`);
  // passages in languages the model does not read are found by keyword alone: say so when they are many
  const told = known.reduce((n, l) => n + l.chunks, 0) || 1;
  const unread = known.filter((l) => l.model_weight === 0).reduce((n, l) => n + l.chunks, 0) / told;
  el.textContent =
    shown.join(" · ") + (known.length > 3 ? ` · +${known.length - 3}` : "") + (unread >= 0.3 ? ` · ${percent(unread)} by keyword only` : "");
  const reads = (l: (typeof known)[number]) =>
    l.model_weight >= 1 ? "read by the embedding model" : l.model_weight > 0 ? "partly read by the embedding model" : "searched by keyword: the embedding model does not read it";
  el.title = [
    `Passages by language (${store.model}):`,
    ...known.map((l) => `${l.name ?? l.code}: ${grouped(l.chunks)} passages, ${reads(l)}`),
    unread >= 0.3
      ? `${percent(unread)} of the passages are in languages ${store.model} does not read. multilingual-e5-small reads about 100 languages: build the index with --model multilingual-e5-small (or WARPFOLD_MODEL=multilingual-e5-small).`
      : "",
  ]
    .filter(Boolean)
    .join("\n");
}

function drawDevice() {
  $("model-name").textContent = store.model || "–";
  const sm = store.summaries;
  const summary = $("summary-model");
  summary.parentElement!.hidden = !sm;
  if (sm) {
    summary.textContent = `${sm.model} on ${sm.device}${sm.status ? ` · ${sm.status.replace(/^fetching the chat model \S+/, "fetching")}` : sm.pending ? ` · ${grouped(sm.pending)} waiting` : ""}`;
    const o = sm.options;
    summary.title = [
      sm.status ?? "",
      sm.file,
      `up to ${o.sampling.max_new_tokens} tokens per summary, ${o.sampling.temperature ? `temperature ${o.sampling.temperature}` : "greedy"}`,
      `repetition penalty ${o.sampling.repetition_penalty}${o.sampling.no_repeat_ngram ? `, no repeated ${o.sampling.no_repeat_ngram}-grams` : ""}`,
      o.retry ? `a summary that loops is written again (penalty ${o.retry.repetition_penalty}, no repeated ${o.retry.no_repeat_ngram}-grams)` : "loops are not retried",
      sm.auto ? "every indexed document is summarized" : "",
      "every summary is checked against its document: a sentence stating a figure, date or name it does not hold is removed",
    ].filter(Boolean).join("\n");
  }
  const d = store.device;
  if (!d) return;
  const kind = (d.kind || "").toUpperCase();
  const name = d.name || kind || "–";
  const flash = (d.attention ?? "").startsWith("FlashAttention-2");
  // The CPU encoder's bf16 or bf16x3 products (WARPFOLD_CPU_PRECISION) say so in the attention line.
  const products = /products in (bf16x3|bf16) \(MKL\)/.exec(d.attention ?? "")?.[1];
  const productsTitle =
    products === "bf16x3"
      ? "matrix products as three bf16 products of split f32s, f32 sums (Intel MKL): about 16 of f32's 24 bits"
      : "matrix products in bf16 with f32 sums (Intel MKL)";
  const attention = d.attention
    ? [
        " ",
        h("span", { class: flash ? "pill pill-accent" : "pill", title: d.attention, "data-testid": "attention" }, flash ? "FA-2" : "masked attention"),
        products ? [" ", h("span", { class: "pill", title: productsTitle, "data-testid": "precision" }, products)] : [],
      ]
    : [];
  replace($("device-name"), name, kind && name.toUpperCase() !== kind ? [" ", h("span", { class: "pill" }, kind)] : [], attention);
  const cap = $("device-capacity");
  cap.textContent = `${grouped(d.bin_tokens)} tokens`;
  const p = d.probe;
  const details = p
    ? [
        `found by the VRAM probe: ${grouped(p.capacity_tokens)} tokens with ${bytes(p.free_bytes)} free of ${bytes(p.total_bytes)}`,
        p.budget_bytes ? `under a ${bytes(p.budget_bytes)} budget` : "",
        p.bytes_per_token ? `${grouped(p.bytes_per_token)} B/token estimated` : "",
        p.largest_ok_tokens ? `largest bin that ran ${grouped(p.largest_ok_tokens)} tokens` : "",
        p.memory_capacity_tokens && p.memory_capacity_tokens !== p.capacity_tokens
          ? `memory allows ${grouped(p.memory_capacity_tokens)}; smaller bins ran as fast`
          : "",
        p.rates?.length ? `timed: ${p.rates.map(([t, r]) => `${grouped(t)} at ${grouped(Math.round(r))} tok/s`).join(", ")}` : "",
        `margin ${percent(p.margin)}`,
        p.trials ? `${p.trials} trial forwards` : "",
      ].filter(Boolean).join(", ")
    : "fixed bin capacity (no probe on this device)";
  const others = (d.devices ?? []).slice(1).map((x) => `${x.name}: ${grouped(x.bin_tokens)} tokens`);
  cap.title = others.length ? `${details}\nalso: ${others.join("; ")}` : details;
  if (p) cap.append(" ", h("span", { class: "pill pill-accent" }, "probed"));
  if (others.length) cap.append(" ", h("span", { class: "pill" }, `×${others.length + 1} devices`));
  const used = d.memory_used_bytes;
  const total = d.memory_total_bytes;
  // memory is known on a GPU (and wherever the server can tell); without it the fact is left out
  $("device-memory").parentElement!.hidden = !total && (used === null || used === undefined);
  $("device-memory").textContent = total ? `${bytes(used)} / ${bytes(total)}` : bytes(used);
  const bar = $("device-memory-bar");
  const frac = total && used !== null ? Math.min(1, used / total) : 0;
  bar.style.width = `${(frac * 100).toFixed(1)}%`;
  bar.parentElement!.hidden = !total;
}

export function showConnection(c: Connection): void {
  const el = $("connection");
  el.dataset.state = c;
  const labels: Record<Connection, string> = { live: "live", reconnecting: "reconnecting…", unauthorized: "no access", untrusted: "not verified", connecting: "connecting…" };
  el.querySelector(".connection-label")!.textContent = labels[c];
  el.title = c === "live" ? "receiving live updates" : c === "reconnecting" ? "the live stream dropped; retrying" : "";
}
