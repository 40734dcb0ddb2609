// The one place that knows whether the UI runs inside the Tauri app or in a browser against
// `warpfold serve`. Everything else calls the `Transport` interface (docs/api.md).

import { Channel, invoke } from "@tauri-apps/api/core";
import { listen } from "@tauri-apps/api/event";
import { getCurrentWebview } from "@tauri-apps/api/webview";
import { ApiError, toDocumentDetail, type AppState, type AskEvent, type BinView, type DocumentDetail, type FileState, type Hit, type Sample, type SearchFilter, type Settings, type SettingsView, type Turn } from "./types";

/** "untrusted": the server now at this address could not prove it holds the token signed in with
 * (restarted with a new token, or another program on the port); nothing credentialed is sent to it. */
export type Connection = "connecting" | "live" | "reconnecting" | "unauthorized" | "untrusted";

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
  /** The person paused indexing (true) or resumed it (false). */
  paused(paused: boolean): void;
  /** What the summarizer is busy with before it can summarize (fetching, loading its model); null once ready. */
  summarizer_status(status: string | null): void;
  /** The live stream's health; after "live" following a gap the caller should reload the state. */
  connection(state: Connection): void;
}

export interface DropHandlers {
  hover(on: boolean): void;
  paths(paths: string[]): void;
}

/** What the library view asks for (GET /api/library, the app's `library`). */
export interface LibraryQuery {
  filter: { folder?: string; extensions: string[]; after?: string; before?: string };
  order: "name" | "modified" | "size" | "pages" | "indexed";
  descending: boolean;
  offset: number;
  limit: number;
}

/** One document as the library lists it. */
export interface LibraryEntry {
  path: string;
  status: string;
  error: string | null;
  pages: number;
  size: number;
  /** Unix seconds; 0 when not known. */
  modified: number;
  indexed_at: number;
}

export interface Transport {
  readonly kind: "tauri" | "http";
  state(): Promise<AppState>;
  addFolder(path: string): Promise<string[]>;
  /** Stops watching a folder; with `forget`, its documents leave the index for good. */
  removeFolder(path: string, forget?: boolean): Promise<string[]>;
  /** Forgets documents (or folders of them) for good: no text of them stays in the index. */
  forget(paths: string[]): Promise<{ forgotten: string[] }>;
  addPaths(paths: string[]): Promise<{ queued: number }>;
  /** Reads a document, or every document under a folder, again, changed or not. */
  reindex(path: string): Promise<{ queued: number }>;
  /** The document library: what the filters let through, sorted, a page at a time. */
  library(query: LibraryQuery): Promise<{ total: number; documents: LibraryEntry[] }>;
  /** Pauses indexing (the files being read finish; nothing new starts) or resumes it. */
  pause(): Promise<{ paused: boolean }>;
  resume(): Promise<{ paused: boolean }>;
  /** Browser only: send a dropped or picked file's bytes. */
  upload(file: File): Promise<{ queued: number; path?: string }>;
  search(query: string, k: number, filter?: SearchFilter): Promise<{ hits: Hit[] }>;
  /** Asks a question of the documents; `onEvent` gets its passages, status and then its answer
   * (or error). Resolves once the answer or error has come; rejects when it cannot be asked. */
  ask(question: string, earlier: Turn[], onEvent: (e: AskEvent) => void, rerank?: number): Promise<void>;
  document(path: string): Promise<DocumentDetail>;
  /** Opens the file: a PDF at `page` where the viewer can (the browser's, by its `#page=`). */
  openFile(path: string, page?: number | null): Promise<void>;
  /** The settings view: settings.json, what runs now, the variables that override the file. */
  settings(): Promise<SettingsView>;
  /** Saves settings.json; they apply when warpfold starts again. */
  saveSettings(settings: Settings): Promise<SettingsView>;
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
  removeFolder(path: string, forget = false) {
    return call<string[]>("remove_folder", { path, forget });
  }
  forget(paths: string[]) {
    return call<{ forgotten: string[] }>("forget", { paths });
  }
  addPaths(paths: string[]) {
    return call<{ queued: number }>("add_paths", { paths });
  }
  reindex(path: string) {
    return call<{ queued: number }>("reindex", { path });
  }
  pause() {
    return call<{ paused: boolean }>("pause");
  }
  library(q: LibraryQuery) {
    const seconds = (day?: string) => (day ? Date.parse(`${day}T00:00:00Z`) / 1000 : null);
    const filter = { folder: q.filter.folder ?? null, extensions: q.filter.extensions, modified_from: seconds(q.filter.after), modified_before: seconds(q.filter.before) };
    return call<{ total: number; documents: LibraryEntry[] }>("library", { query: { filter, order: q.order, descending: q.descending, offset: q.offset, limit: q.limit } });
  }
  resume() {
    return call<{ paused: boolean }>("resume");
  }
  async upload(): Promise<{ queued: number }> {
    throw new ApiError("invalid_input", "uploading bytes is for the browser; in the app files are added by path");
  }
  search(query: string, k: number, filter: SearchFilter = {}) {
    const seconds = (day?: string) => (day ? Date.parse(`${day}T00:00:00Z`) / 1000 : null);
    const options = {
      per_document_in_top_five: filter.allFromDocument ? null : 2,
      filter: {
        folder: filter.folder ?? null,
        extensions: filter.types ?? [],
        modified_from: seconds(filter.after),
        modified_before: seconds(filter.before),
        language: filter.language ?? null,
      },
    };
    return call<{ hits: Hit[] }>("search", { query, k, options });
  }
  async ask(question: string, earlier: Turn[], onEvent: (e: AskEvent) => void, rerank?: number): Promise<void> {
    let ended: () => void = () => undefined;
    const done = new Promise<void>((resolve) => (ended = resolve));
    const channel = new Channel<AskEvent>((e) => {
      onEvent(e);
      if (e.event === "answer" || e.event === "error") ended();
    });
    await call<void>("ask", { question, earlier, rerank: rerank ?? null, channel });
    await done;
  }
  async document(path: string): Promise<DocumentDetail> {
    return toDocumentDetail(await call<unknown>("document", { path }));
  }
  async openFile(path: string) {
    await call<void>("open_file", { path });
  }
  settings() {
    return call<SettingsView>("settings");
  }
  saveSettings(settings: Settings) {
    return call<SettingsView>("save_settings", { settings });
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
      listen<boolean>("paused", (e) => h.paused(e.payload)),
      listen<string | null>("summarizer_status", (e) => h.summarizer_status(e.payload)),
      call<void>("subscribe_samples", { channel }),
    ])
      .then((done) => {
        // every listener's unlisten function (the last result is subscribe_samples', not one)
        unlisten.push(...(done.slice(0, -1) as Array<() => void>));
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

/** The key the server proves itself with (given when the token was traded for the cookie). */
const PROOF_KEY = "warpfold.proof";

/** Takes `?token=` from the address, once, and removes it from the address bar and history entry. */
export function takeToken(): string | null {
  const url = new URL(window.location.href);
  const fromUrl = url.searchParams.get("token");
  if (fromUrl !== null) {
    url.searchParams.delete("token");
    history.replaceState(history.state, "", url.pathname + url.search + url.hash);
  }
  return fromUrl;
}

/** Trades the token for the server's session cookie (HttpOnly: no script reads it) and keeps the
 * key the server proves itself with; the token itself is not kept anywhere. */
export async function signIn(token: string): Promise<void> {
  let res: Response;
  try {
    res = await fetch("/api/session", { method: "POST", headers: { Authorization: `Bearer ${token}` }, cache: "no-store" });
  } catch (e) {
    throw new ApiError("io", `cannot reach the warpfold server (${(e as Error).message})`);
  }
  if (!res.ok) throw await errorFrom(res);
  const body = (await res.json()) as { proof_key?: unknown };
  if (typeof body.proof_key !== "string") throw new ApiError("internal", "the server's answer holds no proof key");
  sessionStorage.setItem(PROOF_KEY, body.proof_key);
}

/** Forgets this tab's session (after the server refused it). */
export function forgetSession(): void {
  sessionStorage.removeItem(PROOF_KEY);
}

export function hasSession(): boolean {
  return !!sessionStorage.getItem(PROOF_KEY);
}

function hex(bytes: Uint8Array): string {
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Asks the server, without credentials, to prove it holds the token: an HMAC of a fresh challenge
 * under the proof key. "unreachable": nothing answered properly (try again later). */
async function checkServer(): Promise<"proven" | "unreachable" | "untrusted"> {
  const keyHex = sessionStorage.getItem(PROOF_KEY);
  if (!keyHex || !/^[0-9a-f]{64}$/.test(keyHex)) return "untrusted";
  const subtle = globalThis.crypto?.subtle;
  // Outside a secure context (plain http to a name other than localhost) there is no WebCrypto to
  // check with; docs/security.md says so.
  if (!subtle) return "proven";
  const challenge = crypto.getRandomValues(new Uint8Array(32));
  let res: Response;
  try {
    res = await fetch(`/api/hello?challenge=${hex(challenge)}`, { credentials: "omit", cache: "no-store" });
  } catch {
    return "unreachable";
  }
  if (res.status >= 500) return "unreachable";
  let proof: unknown;
  try {
    proof = res.ok ? ((await res.json()) as { proof?: unknown }).proof : undefined;
  } catch {
    proof = undefined;
  }
  const keyBytes = new Uint8Array(keyHex.match(/../g)!.map((b) => parseInt(b, 16)));
  const key = await subtle.importKey("raw", keyBytes, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const expected = hex(new Uint8Array(await subtle.sign("HMAC", key, challenge)));
  return proof === expected ? "proven" : "untrusted";
}

const UNTRUSTED =
  "the server now at this address did not prove it holds the token this page signed in with: it was restarted with a new token, or it is another program. Nothing was sent to it.";

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

/** Reads a server-sent-event stream to its end, giving each event's name and data to `dispatch`. */
async function readEvents(body: ReadableStream<BufferSource>, dispatch: (event: string, data: string) => void): Promise<void> {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
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
}

class HttpTransport implements Transport {
  readonly kind = "http" as const;
  /** Whether the server answering now has proven it holds the token (see `checkServer`); false
   * again after any dropped connection, since another program may have taken the port since. */
  private proven = false;

  private async ensureProven(): Promise<void> {
    if (this.proven) return;
    const verdict = await checkServer();
    if (verdict === "untrusted") throw new ApiError("unauthorized", UNTRUSTED, 401);
    if (verdict === "unreachable") throw new ApiError("io", "cannot reach the warpfold server");
    this.proven = true;
  }

  private async request(method: string, path: string, body?: BodyInit, type?: string): Promise<Response> {
    await this.ensureProven();
    let res: Response;
    try {
      res = await fetch(path, { method, headers: type ? { "Content-Type": type } : {}, body, credentials: "same-origin" });
    } catch (e) {
      this.proven = false;
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
  removeFolder(path: string, forget = false) {
    return this.json<string[]>("DELETE", "/api/folders", { path, forget });
  }
  forget(paths: string[]) {
    return this.json<{ forgotten: string[] }>("POST", "/api/forget", { paths });
  }
  settings() {
    return this.json<SettingsView>("GET", "/api/settings");
  }
  saveSettings(settings: Settings) {
    return this.json<SettingsView>("PUT", "/api/settings", settings);
  }
  addPaths(paths: string[]) {
    return this.json<{ queued: number }>("POST", "/api/paths", { paths });
  }
  reindex(path: string) {
    return this.json<{ queued: number }>("POST", "/api/reindex", { path });
  }
  pause() {
    return this.json<{ paused: boolean }>("POST", "/api/pause", {});
  }
  library(q: LibraryQuery) {
    const params = new URLSearchParams({ sort: q.order, desc: String(q.descending), offset: String(q.offset), limit: String(q.limit) });
    if (q.filter.folder) params.set("folder", q.filter.folder);
    if (q.filter.extensions.length) params.set("type", q.filter.extensions.join(","));
    if (q.filter.after) params.set("after", q.filter.after);
    if (q.filter.before) params.set("before", q.filter.before);
    return this.json<{ total: number; documents: LibraryEntry[] }>("GET", `/api/library?${params}`);
  }
  resume() {
    return this.json<{ paused: boolean }>("POST", "/api/resume", {});
  }
  async upload(file: File) {
    const res = await this.request("POST", `/api/upload?name=${encodeURIComponent(file.name)}`, file, "application/octet-stream");
    return (await res.json()) as { queued: number; path?: string };
  }
  search(query: string, k: number, filter: SearchFilter = {}) {
    const params = new URLSearchParams({ q: query, k: String(k) });
    if (filter.folder) params.set("folder", filter.folder);
    if (filter.types?.length) params.set("type", filter.types.join(","));
    if (filter.after) params.set("after", filter.after);
    if (filter.before) params.set("before", filter.before);
    if (filter.language) params.set("language", filter.language);
    if (filter.allFromDocument) params.set("all_from_document", "true");
    return this.json<{ hits: Hit[] }>("GET", `/api/search?${params}`);
  }
  async ask(question: string, earlier: Turn[], onEvent: (e: AskEvent) => void, rerank?: number): Promise<void> {
    const res = await this.request("POST", "/api/ask", JSON.stringify({ question, earlier, rerank }), "application/json");
    if (!res.body) throw new ApiError("io", "the server sent no answer");
    let ended = false;
    await readEvents(res.body, (_event, data) => {
      try {
        const e = JSON.parse(data) as AskEvent;
        ended ||= e.event === "answer" || e.event === "error";
        onEvent(e);
      } catch {
        // not JSON: not an event of ours
      }
    });
    if (!ended) throw new ApiError("io", "the answer's stream ended before the answer (the server stopped?)");
  }
  async document(path: string): Promise<DocumentDetail> {
    return toDocumentDetail(await this.json<unknown>("GET", `/api/document?path=${encodeURIComponent(path)}`));
  }
  async openFile(path: string, page?: number | null) {
    // Opened by address: the session cookie goes with it (same site), the server sends it sandboxed
    // (an origin of its own, no scripts), and the new tab gets no handle back to this one.
    if (!this.proven) throw new ApiError("io", "not connected to the warpfold server: try again once it is live");
    const at = page && path.toLowerCase().endsWith(".pdf") ? `#page=${page}` : "";
    window.open(`/api/file?path=${encodeURIComponent(path)}${at}`, "_blank", "noopener");
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
        case "paused":
          h.paused(payload === true);
          break;
        case "summarizer_status":
          h.summarizer_status(payload as string | null);
          break;
        case "resync":
          h.resync();
          break;
      }
    };

    const connect = async () => {
      controller = new AbortController();
      try {
        if (!this.proven) {
          const verdict = await checkServer();
          if (verdict === "untrusted") {
            h.connection("untrusted");
            return; // never send the cookie to it; signing in again is the user's choice
          }
          if (verdict === "unreachable") throw new Error("unreachable");
          this.proven = true;
        }
        const res = await fetch("/api/events", {
          headers: { Accept: "text/event-stream" },
          signal: controller.signal,
          cache: "no-store",
          credentials: "same-origin",
        });
        if (res.status === 401) {
          h.connection("unauthorized");
          return; // no point retrying with the same token
        }
        if (!res.ok || !res.body) throw new Error(`events: ${res.status}`);
        delay = 500;
        h.connection("live");
        await readEvents(res.body, dispatch);
      } catch {
        if (stopped) return;
      }
      if (stopped) return;
      this.proven = false;
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
  return new HttpTransport();
}
