// The settings view: what settings.json holds, edited in a dialog and saved through the app core
// (PUT /api/settings, the desktop's `save_settings`). Saved settings apply when warpfold starts
// again; a variable set in the app's environment wins over the file, and the dialog says which.
// Folders and model files are not chosen here (the app refuses paths from the window): the data
// folder is shown, and models are picked by their pinned names.

import { $, h, replace } from "../dom";
import { bytes } from "../format";
import { store } from "../store";
import type { Transport } from "../transport";
import type { Settings, SettingsView } from "../types";
import { showError, toast } from "./toast";

type Control = HTMLInputElement | HTMLSelectElement;

/** The settings a person changes here, in the dialog's order, and how each is edited. */
const EDITED: { key: keyof Settings; label: string; choices?: [string, string][] }[] = [
  { key: "device", label: "Device", choices: [["auto", "auto (the GPU when there is one)"], ["cpu", "cpu"], ["cuda", "cuda"], ["cuda:all", "cuda:all (every GPU)"]] },
  { key: "vram_budget", label: "GPU memory budget" },
  {
    key: "model",
    label: "Embedding model (a change embeds every document again)",
    choices: [["", "by the system's language"], ["all-MiniLM-L6-v2", "all-MiniLM-L6-v2 (English, fast)"], ["multilingual-e5-small", "multilingual-e5-small (about 100 languages)"], ["all-mpnet-base-v2", "all-mpnet-base-v2 (English, stronger, slower)"]],
  },
  { key: "chat_model", label: "Chat model", choices: [["", "the device's default"], ["fast", "fast (SmolLM2-135M)"]] },
  { key: "summarize", label: "Summarize every document", choices: [["", "the app's default"], ["true", "on"], ["false", "off (only when asked)"]] },
  { key: "ocr_languages", label: "OCR languages" },
];

export function mountSettings(t: Transport): void {
  const dialog = $("settings") as HTMLDialogElement;
  const open = $("settings-button");
  open.addEventListener("click", async () => {
    try {
      draw(await t.settings());
      dialog.showModal();
    } catch (err) {
      showError(err);
    }
  });

  function draw(view: SettingsView): void {
    const controls = new Map<keyof Settings, Control>();
    // A pinned model's choice says its size and whether it is here or fetched on first use.
    const described = (name: string, label: string): string => {
      const m = view.models?.find((x) => x.name === name || (name === "fast" && x.name.startsWith("SmolLM2")));
      if (!m) return label;
      const size = m.size_bytes ? `${bytes(m.size_bytes)}, ` : "";
      return `${label} — ${size}${m.installed ? "installed" : "fetched on first use"}`;
    };
    const fieldOf = (key: string) => view.fields.find((f) => f.key === key);
    const rows = EDITED.map(({ key, label, choices }) => {
      const id = `setting-${key}`;
      const value = view.saved[key];
      const text = value === null || value === undefined ? "" : String(value);
      let control: Control;
      if (choices) {
        const known = choices.some(([v]) => v === text) ? choices : [...choices, [text, text] as [string, string]];
        const label = (v: string, name: string) => (key === "model" || key === "chat_model" ? described(v, name) : name);
        control = h("select", { id, "data-testid": id }, ...known.map(([v, name]) => h("option", { value: v, selected: v === text }, label(v, name))));
      } else {
        control = h("input", { id, "data-testid": id, type: "text", value: text, placeholder: fieldOf(key)?.default ?? "", spellcheck: "false" });
      }
      controls.set(key, control);
      const field = fieldOf(key);
      const overridden = view.overridden.includes(key);
      return h(
        "div",
        { class: "setting" },
        h("label", { for: id }, label),
        control,
        h("p", { class: "setting-help" }, field?.meaning ?? "", overridden ? h("strong", null, ` ${field?.env} is set and wins over this.`) : null),
      );
    });
    const status = h("p", { id: "settings-status", class: "settings-status", role: "status", "data-testid": "settings-status" }, view.restart_needed ? "Saved settings differ from what runs now: they apply when warpfold starts again." : "");
    const form = h(
      "form",
      { method: "dialog", class: "settings-form" },
      h("h2", { id: "settings-title" }, "Settings"),
      h("p", { class: "setting-help" }, "Kept in ", h("code", null, view.file), ". Every key is in docs/settings.md; variables set where warpfold starts win over the file."),
      h("p", { class: "setting-help", "data-testid": "settings-data-dir" }, "Data folder: ", h("code", null, view.data_folder)),
      h(
        "div",
        { class: "setting", "data-testid": "settings-folders" },
        h("span", { class: "setting-label" }, "Watched folders"),
        store.folders.length
          ? h("ul", { class: "settings-folders" }, ...store.folders.map((f) => h("li", null, h("code", null, f))))
          : h("p", { class: "setting-help" }, "None yet."),
        h("p", { class: "setting-help" }, "Added and removed in the Watched folders bar; removing one asks whether its documents leave the index too."),
      ),
      ...rows,
      status,
      h(
        "div",
        { class: "settings-actions" },
        h("button", { type: "button", class: "btn", "data-testid": "settings-close", onclick: () => dialog.close() }, "Close"),
        h("button", { type: "submit", class: "btn btn-primary", "data-testid": "settings-save" }, "Save"),
      ),
    );
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const wanted: Settings = { ...view.saved };
      for (const [key, control] of controls) {
        const v = control.value.trim();
        if (key === "summarize") wanted.summarize = v === "" ? null : v === "true";
        else if (key === "device" || key === "ocr_languages") (wanted[key] as string) = v || String(view.saved[key]);
        else (wanted[key] as string | null) = v === "" ? null : v;
      }
      try {
        const saved = await t.saveSettings(wanted);
        draw(saved);
        toast(saved.restart_needed ? "Settings saved: they apply when warpfold starts again" : "Settings saved");
      } catch (err) {
        showError(err);
      }
    });
    replace(dialog, form);
  }
}
