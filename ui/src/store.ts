// What the UI knows: the last AppState, kept current by live events. Views subscribe to the parts
// they draw and are redrawn at most once per frame.

import { throttled } from "./dom";
import { FILE_STATES, type AppState, type BinView, type Counts, type Device, type FileState, type IndexLanguage, type Sample, type Summaries } from "./types";

export const MAX_BINS = 64;
/** The documents/s is measured over at most this much of the latest work. */
export const RATE_WINDOW_MS = 120_000;
export const MAX_SAMPLES = 600;

type Topic = "device" | "folders" | "queue" | "bins" | "samples" | "summary" | "languages" | "removed";

const FINISHED = new Set<string>(["done", "failed", "no_text", "skipped"]);

function zeroCounts(): Counts {
  return { waiting: 0, extracting: 0, embedding: 0, done: 0, failed: 0, no_text: 0, skipped: 0 };
}

class Store {
  model = "";
  /** The index's languages, most passages first. */
  languages: IndexLanguage[] = [];
  summaries: Summaries | null = null;
  /** Why nothing more is written to the index; null while indexing goes on. */
  writesStopped: string | null = null;
  /** Why indexing is paused for now; null while it goes on. */
  writesPaused: string | null = null;
  /** The person paused indexing (POST /api/pause, the app's `pause`): nothing new starts. */
  paused = false;
  device: Device | null = null;
  folders: string[] = [];
  files = new Map<string, FileState>();
  counts: Counts = zeroCounts();
  bins: BinView[] = [];
  samples: Sample[] = [];
  /** When the queue last changed, to show that work is moving (or that it is not). */
  lastQueueChange = 0;
  /** When documents finished lately (the server's clock, ms), for the documents/s and the ETA. */
  finishedAt: number[] = [];
  /** When the work now in progress began (the server's clock): the start of the rate's window. */
  busySince = 0;
  /** The server's clock minus this page's, from the live events' timestamps. */
  private skew = 0;
  private listeners = new Map<Topic, Set<() => void>>();

  on(topic: Topic, fn: () => void): void {
    const run = throttled(fn);
    if (!this.listeners.has(topic)) this.listeners.set(topic, new Set());
    this.listeners.get(topic)!.add(run);
  }

  private emit(...topics: Topic[]): void {
    for (const t of topics) this.listeners.get(t)?.forEach((fn) => fn());
  }

  load(s: AppState): void {
    this.model = s.model;
    this.languages = s.languages ?? [];
    this.summaries = s.summaries ?? null;
    this.device = s.device;
    this.folders = s.folders ?? [];
    this.files = new Map((s.queue?.files ?? []).map((f) => [f.path, f]));
    this.counts = { ...zeroCounts(), ...(s.queue?.counts ?? {}) };
    // If the server sent every file, the counts follow from them; trust them either way.
    this.bins = (s.bins ?? []).slice(-MAX_BINS);
    this.samples = (s.samples ?? []).slice(-MAX_SAMPLES);
    this.writesStopped = s.writes_stopped ?? null;
    this.writesPaused = s.writes_paused ?? null;
    this.paused = s.paused === true;
    this.lastQueueChange = Math.max(0, ...[...this.files.values()].map((f) => f.updated_ms || 0));
    // the rate starts from the documents finished in the last minutes (read as the page's clock)
    const now = Date.now();
    const finished = [...this.files.values()].filter((f) => FINISHED.has(f.state) && f.updated_ms && now - f.updated_ms < RATE_WINDOW_MS);
    this.finishedAt = finished.map((f) => f.updated_ms).sort((a, b) => a - b);
    this.busySince = this.active() ? Math.min(now, ...[...this.files.values()].map((f) => f.updated_ms || now)) : 0;
    this.skew = 0;
    this.emit("device", "folders", "queue", "bins", "samples", "languages");
  }

  setLanguages(languages: IndexLanguage[]): void {
    this.languages = languages;
    this.emit("languages");
  }

  pauseWrites(reason: string | null): void {
    this.writesPaused = reason;
    this.emit("queue");
  }

  setPaused(paused: boolean): void {
    if (this.paused === paused) return;
    this.paused = paused;
    this.emit("queue");
  }

  stopWrites(reason: string): void {
    this.writesStopped = reason;
    this.emit("queue");
  }

  setFolders(folders: string[]): void {
    this.folders = folders;
    this.emit("folders");
  }

  file(f: FileState): void {
    const old = this.files.get(f.path);
    const at = f.updated_ms || this.serverNow();
    if (f.updated_ms) this.skew = f.updated_ms - Date.now();
    if (!this.active() && !FINISHED.has(f.state)) {
      // work starts (again): the rate is measured from here, not across the idle time before
      this.busySince = at;
      this.finishedAt = [];
    }
    if (FINISHED.has(f.state) && !(old && FINISHED.has(old.state))) {
      this.finishedAt.push(at);
      if (this.finishedAt.length > 500) this.finishedAt.splice(0, this.finishedAt.length - 500);
    }
    if (old && FILE_STATES.includes(old.state)) this.counts[old.state] = Math.max(0, this.counts[old.state] - 1);
    if (FILE_STATES.includes(f.state)) this.counts[f.state] += 1;
    this.files.set(f.path, f);
    this.lastQueueChange = Date.now();
    this.emit("queue");
  }

  /** Paths that left the index since the page loaded (the search list drops their hits). */
  removed = new Set<string>();

  removeFile(path: string): void {
    this.removed.add(path);
    this.emit("removed");
    const old = this.files.get(path);
    if (!old) return;
    if (FILE_STATES.includes(old.state)) this.counts[old.state] = Math.max(0, this.counts[old.state] - 1);
    this.files.delete(path);
    this.lastQueueChange = Date.now();
    this.emit("queue");
  }

  /** The last document whose summary arrived (the detail panel reloads if it shows it). */
  lastSummary: string | null = null;

  /** What the summarizer is busy with before it can summarize, or null once ready. */
  summarizerStatus(status: string | null): void {
    if (this.summaries) this.summaries.status = status;
    this.emit("device");
    this.emit("summary");
  }

  summaryReady(path: string): void {
    this.lastSummary = path;
    // one fewer waiting (the next state load brings the server's own count)
    if (this.summaries?.pending) this.summaries.pending -= 1;
    this.emit("summary");
    this.emit("device");
  }

  bin(b: BinView): void {
    const last = this.bins[this.bins.length - 1];
    if (last && b.id <= last.id) return; // already in the state that was loaded
    this.bins.push(b);
    if (this.bins.length > MAX_BINS) this.bins.splice(0, this.bins.length - MAX_BINS);
    this.emit("bins");
  }

  sample(s: Sample): void {
    const last = this.samples[this.samples.length - 1];
    if (last && s.t_ms <= last.t_ms) return;
    this.samples.push(s);
    if (this.samples.length > MAX_SAMPLES) this.samples.splice(0, this.samples.length - MAX_SAMPLES);
    if (this.device && s.memory_used_bytes !== null && s.memory_used_bytes !== undefined) {
      this.device = { ...this.device, memory_used_bytes: s.memory_used_bytes };
      this.emit("device");
    }
    this.emit("samples");
  }

  /** Now on the server's clock (as far as the live events tell). */
  serverNow(): number {
    return Date.now() + this.skew;
  }

  /** Documents finished per second over the last minutes of the work in progress, and the seconds
   * left for the documents still queued at that pace; null while there is too little to tell. */
  pace(now = this.serverNow()): { perSecond: number; secondsLeft: number | null } | null {
    if (!this.busySince && !this.finishedAt.length) return null;
    const from = Math.max(this.busySince || this.finishedAt[0], now - RATE_WINDOW_MS);
    const n = this.finishedAt.filter((t) => t >= from).length;
    const span = (now - from) / 1000;
    if (n < 2 || span < 2) return null;
    const perSecond = n / span;
    const left = this.active();
    return { perSecond, secondsLeft: left ? left / perSecond : null };
  }

  total(): number {
    return FILE_STATES.reduce((a, k) => a + this.counts[k], 0);
  }
  finished(): number {
    return this.counts.done + this.counts.failed + this.counts.no_text + this.counts.skipped;
  }
  active(): number {
    return this.counts.waiting + this.counts.extracting + this.counts.embedding;
  }
}

export const store = new Store();
