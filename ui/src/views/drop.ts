// Adding documents: the whole window takes a drop, and "Add files" opens a file picker.
// In the browser the bytes are uploaded; in the app the webview hands over paths.

import { $ } from "../dom";
import type { Transport } from "../transport";
import { showError, toast } from "./toast";

const UPLOADS_AT_ONCE = 3;

export function mountDrop(t: Transport): void {
  const overlay = $("drop-overlay");
  const fileInput = $("file-input") as HTMLInputElement;
  const hover = (on: boolean) => {
    overlay.hidden = !on;
    document.body.classList.toggle("dragging", on);
  };

  $("add-files").addEventListener("click", () => fileInput.click());
  fileInput.addEventListener("change", () => {
    const files = [...(fileInput.files ?? [])];
    fileInput.value = "";
    if (files.length) void upload(t, files);
  });

  if (t.onNativeDrop({ hover, paths: (paths) => void addPaths(t, paths) })) {
    // the app: the webview reports drops with their paths; keep the browser from opening the file
    window.addEventListener("dragover", (e) => e.preventDefault());
    window.addEventListener("drop", (e) => e.preventDefault());
    return;
  }

  let depth = 0;
  const carriesFiles = (e: DragEvent) => [...(e.dataTransfer?.types ?? [])].includes("Files");
  window.addEventListener("dragenter", (e) => {
    if (!carriesFiles(e)) return;
    e.preventDefault();
    depth++;
    hover(true);
  });
  window.addEventListener("dragover", (e) => {
    if (!carriesFiles(e)) return;
    e.preventDefault();
    if (e.dataTransfer) e.dataTransfer.dropEffect = "copy";
  });
  window.addEventListener("dragleave", (e) => {
    if (!carriesFiles(e)) return;
    depth = Math.max(0, depth - 1);
    if (depth === 0) hover(false);
  });
  window.addEventListener("drop", (e) => {
    e.preventDefault();
    depth = 0;
    hover(false);
    const dt = e.dataTransfer;
    if (!dt) return;
    void filesOf(dt).then((files) => {
      if (files.length) void upload(t, files);
      else toast("Nothing to add: the drop held no files.");
    });
  });
}

async function addPaths(t: Transport, paths: string[]) {
  try {
    const { queued } = await t.addPaths(paths);
    toast(queued ? `Queued ${queued} ${queued === 1 ? "file" : "files"}` : "Nothing new to index");
  } catch (e) {
    showError(e, "Add");
  }
}

async function upload(t: Transport, files: File[]) {
  let queued = 0;
  let failed = 0;
  let next = 0;
  if (files.length > 1) toast(`Uploading ${files.length} files…`);
  const worker = async () => {
    while (next < files.length) {
      const f = files[next++];
      try {
        queued += (await t.upload(f)).queued;
      } catch (e) {
        failed++;
        showError(e, f.name);
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(UPLOADS_AT_ONCE, files.length) }, worker));
  if (queued) toast(`Queued ${queued} ${queued === 1 ? "file" : "files"}${failed ? `, ${failed} could not be sent` : ""}`);
}

/** The files of a drop, folders walked (browsers that expose entries), hidden entries skipped. */
async function filesOf(dt: DataTransfer): Promise<File[]> {
  const entries = [...dt.items].map((i) => (i.kind === "file" ? i.webkitGetAsEntry?.() : null));
  if (!entries.length || entries.some((e) => !e)) return [...dt.files];
  const out: File[] = [];
  const walk = async (entry: FileSystemEntry): Promise<void> => {
    if (entry.name.startsWith(".")) return;
    if (entry.isFile) {
      out.push(await new Promise<File>((res, rej) => (entry as FileSystemFileEntry).file(res, rej)));
    } else if (entry.isDirectory) {
      const reader = (entry as FileSystemDirectoryEntry).createReader();
      for (;;) {
        const batch = await new Promise<FileSystemEntry[]>((res, rej) => reader.readEntries(res, rej));
        if (!batch.length) break;
        for (const e of batch) await walk(e);
      }
    }
  };
  for (const e of entries) await walk(e!);
  return out;
}
