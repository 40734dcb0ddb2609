// The one place that knows whether the UI runs inside the Tauri app or in a browser against
// `warpfold serve`. Everything else calls the `Transport` interface (docs/api.md).

import { Channel, invoke } from "@tauri-apps/api/core";
import { listen } from "@tauri-apps/api/event";
import { getCurrentWebview } from "@tauri-apps/api/webview";
import { ApiError, toDocumentDetail, type AppState, type BinView, type DocumentDetail, type FileState, type Hit, type Sample } from "./types";

export type Connection = "connecting" | "live" | "reconnecting" | "unauthorized";

export interface LiveHandlers {
  queue(file: FileState): void;
  bin(bin: BinView): void;
  sample(sample: Sample): void;
  folders(folders: string[]): void;
  /** The server dropped events for this client (it fell behind): the state must be loaded again. */
  resync(): void;
  /** A file left the queue and the index (deleted, or renamed: its new name arrives as a queue event). */
  removed(path: string): void;
  /** A document's summary is ready, or could not be made. */
  summary(event: { path: string; summary: string | null; error: string | null }): void;
  /** Nothing more is written to the index, and why. */
  writes_stopped(reason: string): void;
  /** Indexing paused (why) or resumed (null). */
  writes_paused(reason: string | null): void;
  /** The live stream's health; after "live" following a gap the caller should reload the state. */
  connection(state: Connection): void;
}

export interface DropHandlers {
  hover(on: boolean): void;
  paths(paths: string[]): void;
}

export interface Transport {
  readonly kind: "tauri" | "http";
  state(): Promise<AppState>;
  addFolder(path: string): Promise<string[]>;
  removeFolder(path: string): Promise<string[]>;
  addPaths(paths: string[]): Promise<{ queued: number }>;
  /** Browser only: send a dropped or picked file's bytes. */
  upload(file: File): Promise<{ queued: number; path?: string }>;
  search(query: string, k: number): Promise<{ hits: Hit[] }>;
  document(path: string): Promise<DocumentDetail>;
  openFile(path: string): Promise<void>;
  subscribe(handlers: LiveHandlers): () => void;
  /** Tauri only: drops arrive as paths through the webview. Returns false where not available. */
  onNativeDrop(handlers: DropHandlers): boolean;
}

// ---------------------------------------------------------------------------------------------
// Tauri

declare global {
  interface Window {
    __TAURI_INTERNALS__?: unknown;
  }
}

function tauriError(e: unknown): ApiError {
  if (e && typeof e === "object" && "message" in e) {
    const o = e as { kind?: string; message: string };
    return new ApiError(o.kind ?? "internal", String(o.message));
  }
  return new ApiError("internal", typeof e === "string" ? e : JSON.stringify(e));
}

async function call<T>(cmd: string, args?: Record<string, unknown>): Promise<T> {
  try {
    return await invoke<T>(cmd, args);
  } catch (e) {
    throw tauriError(e);
  }
}

class TauriTransport implements Transport {
  readonly kind = "tauri" as const;
  state() {
    return call<AppState>("state");
  }
  addFolder(path: string) {
    return call<string[]>("add_folder", { path });
  }
  removeFolder(path: string) {
    return call<string[]>("remove_folder", { path });
  }
  addPaths(paths: string[]) {
    return call<{ queued: number }>("add_paths", { paths });
  }
  async upload(): Promise<{ queued: number }> {
    throw new ApiError("invalid_input", "uploading bytes is for the browser; in the app files are added by path");
  }
  search(query: string, k: number) {
    return call<{ hits: Hit[] }>("search", { query, k });
  }
  async document(path: string): Promise<DocumentDetail> {
    return toDocumentDetail(await call<unknown>("document", { path }));
  }
  async openFile(path: string) {
    await call<void>("open_file", { path });
  }
  subscribe(h: LiveHandlers): () => void {
    let closed = false;
    const unlisten: Array<() => void> = [];
    const channel = new Channel<Sample>((s) => {
      if (!closed) h.sample(s);
    });
    h.connection("connecting");
    Promise.all([
      listen<FileState>("queue", (e) => h.queue(e.payload)),
      listen<BinView>("bin", (e) => h.bin(e.payload)),
      listen<string[]>("folders", (e) => h.folders(e.payload)),
      listen<string>("removed", (e) => h.removed(e.payload)),
      listen<unknown>("resync", () => h.resync()),
      listen<{ path: string; summary: string | null; error: string | null }>("summary", (e) => h.summary(e.payload)),
      listen<string>("writes_stopped", (e) => h.writes_stopped(e.payload)),
      listen<string | null>("writes_paused", (e) => h.writes_paused(e.payload)),
      call<void>("subscribe_samples", { channel }),
    ])
      .then(([a, b, c, d, e, f]) => {
        unlisten.push(a, b, c, d, e, f);
        if (closed) unlisten.forEach((u) => u());
        else h.connection("live");
      })
      .catch(() => h.connection("reconnecting"));
    return () => {
      closed = true;
      unlisten.forEach((u) => u());
    };
  }
  onNativeDrop(h: DropHandlers): boolean {
    getCurrentWebview()
      .onDragDropEvent((event) => {
        const p = event.payload;
        if (p.type === "enter" || p.type === "over") h.hover(true);
        else if (p.type === "leave") h.hover(false);
        else if (p.type === "drop") {
          h.hover(false);
          if (p.paths.length) h.paths(p.paths);
        }
      })
      .catch(() => undefined);
    return true;
  }
}

// ---------------------------------------------------------------------------------------------
// HTTP (`warpfold serve`)

const TOKEN_KEY = "warpfold.token";

/** Takes `?token=` from the address once, keeps it for the tab, and removes it from the address bar. */
export function takeToken(): string | null {
  const url = new URL(window.location.href);
  const fromUrl = url.searchParams.get("token");
  if (fromUrl !== null) {
    sessionStorage.setItem(TOKEN_KEY, fromUrl);
    url.searchParams.delete("token");
    history.replaceState(history.state, "", url.pathname + url.search + url.hash);
  }
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(token: string): void {
  sessionStorage.setItem(TOKEN_KEY, token);
}

async function errorFrom(res: Response): Promise<ApiError> {
  let kind = res.status === 401 ? "unauthorized" : res.status === 404 ? "not_found" : "internal";
  let message = res.status === 401 ? "token missing or wrong" : `${res.status} ${res.statusText}`;
  try {
    const body = await res.json();
    const e = body?.error;
    if (e && typeof e === "object") {
      if (typeof e.kind === "string" && res.status !== 401) kind = e.kind;
      if (typeof e.message === "string") message = e.message;
    }
  } catch {
    // not JSON: keep the status line
  }
  return new ApiError(kind, message, res.status);
}

class HttpTransport implements Transport {
  readonly kind = "http" as const;
  constructor(private token: string | null) {}

  private headers(extra?: Record<string, string>): Record<string, string> {
    const h: Record<string, string> = { ...extra };
    if (this.token) h.Authorization = `Bearer ${this.token}`;
    return h;
  }

  private async request(method: string, path: string, body?: BodyInit, type?: string): Promise<Response> {
    let res: Response;
    try {
      res = await fetch(path, {
        method,
        headers: this.headers(type ? { "Content-Type": type } : undefined),
        body,
      });
    } catch (e) {
      throw new ApiError("io", `cannot reach the warpfold server (${(e as Error).message})`);
    }
    if (!res.ok) throw await errorFrom(res);
    return res;
  }

  private async json<T>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await this.request(method, path, body === undefined ? undefined : JSON.stringify(body), body === undefined ? undefined : "application/json");
    return (await res.json()) as T;
  }

  state() {
    return this.json<AppState>("GET", "/api/state");
  }
  addFolder(path: string) {
    return this.json<string[]>("POST", "/api/folders", { path });
  }
  removeFolder(path: string) {
    return this.json<string[]>("DELETE", "/api/folders", { path });
  }
  addPaths(paths: string[]) {
    return this.json<{ queued: number }>("POST", "/api/paths", { paths });
  }
  async upload(file: File) {
    const res = await this.request("POST", `/api/upload?name=${encodeURIComponent(file.name)}`, file, "application/octet-stream");
    return (await res.json()) as { queued: number; path?: string };
  }
  search(query: string, k: number) {
    return this.json<{ hits: Hit[] }>("GET", `/api/search?q=${encodeURIComponent(query)}&k=${k}`);
  }
  async document(path: string): Promise<DocumentDetail> {
    return toDocumentDetail(await this.json<unknown>("GET", `/api/document?path=${encodeURIComponent(path)}`));
  }
  async openFile(path: string) {
    // A window opened now, inside the click, is not blocked as a pop-up; it is pointed at the bytes
    // once they are here (the token goes in a header, so a plain link cannot fetch them).
    const win = window.open("", "_blank");
    // The document's window gets no handle back to this one (which holds the token).
    if (win) win.opener = null;
    try {
      const res = await this.request("GET", `/api/file?path=${encodeURIComponent(path)}`);
      const blob = await res.blob();
      const url = URL.createObjectURL(blob);
      if (win) win.location.href = url;
      else {
        const a = document.createElement("a");
        a.href = url;
        a.download = path.split(/[\\/]/).pop() || "file";
        a.click();
      }
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
    } catch (e) {
      win?.close();
      throw e;
    }
  }

  subscribe(h: LiveHandlers): () => void {
    let stopped = false;
    let controller: AbortController | null = null;
    let delay = 500;
    let timer: number | undefined;

    const dispatch = (event: string, data: string) => {
      let payload: unknown;
      try {
        payload = JSON.parse(data);
      } catch {
        return;
      }
      switch (event) {
        case "queue":
          h.queue(payload as FileState);
          break;
        case "bin":
          h.bin(payload as BinView);
          break;
        case "sample":
          h.sample(payload as Sample);
          break;
        case "folders":
          h.folders(payload as string[]);
          break;
        case "removed":
          h.removed(payload as string);
          break;
        case "summary":
          h.summary(payload as { path: string; summary: string | null; error: string | null });
          break;
        case "writes_stopped":
          h.writes_stopped(payload as string);
          break;
        case "writes_paused":
          h.writes_paused(payload as string | null);
          break;
        case "resync":
          h.resync();
          break;
      }
    };

    const connect = async () => {
      controller = new AbortController();
      try {
        const res = await fetch("/api/events", {
          headers: this.headers({ Accept: "text/event-stream" }),
          signal: controller.signal,
          cache: "no-store",
        });
        if (res.status === 401) {
          h.connection("unauthorized");
          return; // no point retrying with the same token
        }
        if (!res.ok || !res.body) throw new Error(`events: ${res.status}`);
        delay = 500;
        h.connection("live");
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        let buffer = "";
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buffer += value;
          // Events end with a blank line; lines end with \n, \r\n or \r.
          let m: RegExpExecArray | null;
          const sep = /\r\n\r\n|\n\n|\r\r/;
          while ((m = sep.exec(buffer))) {
            const block = buffer.slice(0, m.index);
            buffer = buffer.slice(m.index + m[0].length);
            let event = "message";
            const data: string[] = [];
            for (const line of block.split(/\r\n|\n|\r/)) {
              if (!line || line.startsWith(":")) continue;
              const i = line.indexOf(":");
              const field = i < 0 ? line : line.slice(0, i);
              let val = i < 0 ? "" : line.slice(i + 1);
              if (val.startsWith(" ")) val = val.slice(1);
              if (field === "event") event = val;
              else if (field === "data") data.push(val);
            }
            if (data.length) dispatch(event, data.join("\n"));
          }
        }
      } catch (e) {
        if (stopped) return;
      }
      if (stopped) return;
      h.connection("reconnecting");
      timer = window.setTimeout(connect, delay);
      delay = Math.min(delay * 2, 10_000);
    };

    h.connection("connecting");
    void connect();
    return () => {
      stopped = true;
      clearTimeout(timer);
      controller?.abort();
    };
  }

  onNativeDrop(): boolean {
    return false;
  }
}

/** Picks the transport once, at start. */
export function createTransport(): Transport {
  if (typeof window !== "undefined" && window.__TAURI_INTERNALS__) return new TauriTransport();
  return new HttpTransport(takeToken());
}

export function hasToken(): boolean {
  return !!sessionStorage.getItem(TOKEN_KEY);
}
