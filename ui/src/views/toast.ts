// Short messages in a corner; errors carry the API's kind and message and stay longer.

import { $, h } from "../dom";
import { ApiError } from "../types";

let onUnauthorized: ((reason: string) => void) | null = null;

export function whenUnauthorized(fn: (reason: string) => void): void {
  onUnauthorized = fn;
}

export function toast(message: string, kind: "info" | "error" = "info", title?: string): void {
  const el = h(
    "div",
    { class: `toast toast-${kind}`, "data-testid": "toast", "data-kind": kind, role: kind === "error" ? "alert" : "status" },
    title ? h("div", { class: "toast-title" }, title) : null,
    h("div", { class: "toast-body" }, message),
  );
  const close = () => {
    el.classList.add("toast-out");
    setTimeout(() => el.remove(), 250);
  };
  el.addEventListener("click", close);
  where().appendChild(el);
  setTimeout(close, kind === "error" ? 9000 : 3500);
}

/** The toasts' corner: the page's own, or, while a modal dialog is open (the rest of the page is
 * inert and behind it then), one inside that dialog, so the message is seen and read out. */
function where(): HTMLElement {
  const dialogs = [...document.querySelectorAll<HTMLDialogElement>("dialog[open]")].filter((d) => {
    try {
      return d.matches(":modal");
    } catch {
      return false;
    }
  });
  const top = dialogs[dialogs.length - 1];
  if (!top) return $("toasts");
  let corner = top.querySelector<HTMLElement>(":scope > .toasts");
  if (!corner) {
    corner = h("div", { class: "toasts", "aria-live": "polite" });
    top.appendChild(corner);
  }
  return corner;
}

const KIND_TITLE: Record<string, string> = {
  not_found: "Not found",
  invalid_input: "Invalid input",
  path_not_allowed: "Path not allowed",
  index: "Index error",
  engine: "Engine error",
  io: "I/O error",
  internal: "Internal error",
};

export function showError(e: unknown, context?: string): void {
  if (e instanceof ApiError) {
    if (e.unauthorized) {
      onUnauthorized?.(e.message);
      return;
    }
    toast(e.message, "error", (context ? `${context}: ` : "") + (KIND_TITLE[e.kind] ?? e.kind));
  } else {
    toast(e instanceof Error ? e.message : String(e), "error", context ?? "Error");
  }
}
