// A question in a modal dialog of the page's own (window.confirm is not there in every webview):
// resolves with the chosen answer's value, or null when the dialog is closed (Escape, Cancel).

import { h } from "../dom";

export interface Choice {
  label: string;
  value: string;
  primary?: boolean;
  danger?: boolean;
}

export function ask(title: string, text: string, choices: Choice[]): Promise<string | null> {
  return new Promise((resolve) => {
    const dialog = h("dialog", { class: "settings confirm", "data-testid": "confirm-dialog", "aria-labelledby": "confirm-title" });
    let answer: string | null = null;
    const buttons = choices.map((c) =>
      h(
        "button",
        {
          type: "button",
          class: `btn${c.primary ? " btn-primary" : ""}${c.danger ? " btn-danger" : ""}`,
          "data-testid": `confirm-${c.value}`,
          onclick: () => {
            answer = c.value;
            dialog.close();
          },
        },
        c.label,
      ),
    );
    dialog.append(
      h("h2", { id: "confirm-title" }, title),
      h("p", { class: "setting-help" }, text),
      h("div", { class: "settings-actions" }, h("button", { type: "button", class: "btn", "data-testid": "confirm-cancel", onclick: () => dialog.close() }, "Cancel"), ...buttons),
    );
    dialog.addEventListener("close", () => {
      dialog.remove();
      resolve(answer);
    });
    document.body.append(dialog);
    dialog.showModal();
    (buttons.find((_, i) => choices[i].primary) ?? buttons[0])?.focus();
  });
}
