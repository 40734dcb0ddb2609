// The JSON types of docs/api.md, as the UI reads them.

export type FileStateName = "waiting" | "extracting" | "embedding" | "done" | "failed" | "no_text" | "skipped";

export const FILE_STATES: FileStateName[] = ["waiting", "extracting", "embedding", "done", "failed", "no_text", "skipped"];

export interface Probe {
  capacity_tokens: number;
  free_bytes: number;
  total_bytes: number;
  margin: number;
  /** The newer fields: absent from an older server. */
  budget_bytes?: number | null;
  bytes_per_token?: number;
  estimated_tokens?: number;
  largest_ok_tokens?: number;
  /** The largest bin memory allows; `capacity_tokens` is the throughput knee at or below it. */
  memory_capacity_tokens?: number;
  /** The knee's timings: [tokens, tokens per second], largest first. */
  rates?: [number, number][];
  trials?: number;
  seconds?: number;
}

/** One device of the engine, as it started. */
export interface DeviceStart {
  name: string;
  kind: string;
  bin_tokens: number;
  probe: Probe | null;
  memory_total_bytes: number | null;
}

export interface Device {
  name: string;
  kind: "cpu" | "cuda" | "metal" | string;
  bin_tokens: number;
  probe: Probe | null;
  memory_total_bytes: number | null;
  memory_used_bytes: number | null;
  /** Every device the engine runs on (several GPUs: more than one). */
  devices?: DeviceStart[];
  /** Which attention the model runs through (FlashAttention-2 varlen, or masked and why); absent from an older server. */
  attention?: string;
}

export interface FileState {
  path: string;
  state: FileStateName;
  error: string | null;
  chunks: number | null;
  pages: number | null;
  updated_ms: number;
}

export type Counts = Record<FileStateName, number>;

export interface BinView {
  id: number;
  at_ms: number;
  capacity: number;
  sequences: number[];
  aligned: number[];
  padding: number;
  free: number;
  fill: number;
}

export interface Sample {
  t_ms: number;
  tokens_per_s: number;
  computed_per_s: number;
  padded_equivalent_per_s: number;
  bins_per_s: number;
  queue_depth: number;
  memory_used_bytes: number | null;
}

export interface Summaries {
  /** What the summarizer is busy with before it can summarize (fetching or loading its model); null once ready. */
  status?: string | null;
  /** Documents waiting for their summary now, and the seconds until they are done at the pace so far. */
  pending?: number;
  eta_seconds?: number | null;
  model: string;
  file: string;
  device: string;
  auto: boolean;
  options: {
    sampling: { max_new_tokens: number; temperature: number; repetition_penalty: number; no_repeat_ngram: number };
    chunk_tokens: number;
    retry: { repetition_penalty: number; no_repeat_ngram: number } | null;
  };
}

/** One language of the index's passages, and how much the embedding model reads it (1: fully;
 * 0: searched by keyword alone). */
export interface IndexLanguage {
  code: string | null;
  name: string | null;
  chunks: number;
  model_weight: number;
}

export interface AppState {
  model: string;
  /** Absent from an older server. */
  languages?: IndexLanguage[];
  device: Device;
  folders: string[];
  queue: { counts: Counts; files: FileState[] };
  bins: BinView[];
  samples: Sample[];
  /** The chat model that writes summaries, where it runs and its settings; null: summaries off. */
  summaries?: Summaries | null;
  /** Why nothing more is written to the index (deleted or replaced while the app ran); null while indexing goes on. */
  writes_stopped?: string | null;
  /** Why indexing is paused for now (the disk is full; it resumes by itself); null while it goes on. */
  writes_paused?: string | null;
  /** The person paused indexing (nothing new starts until resumed); absent from an older server. */
  paused?: boolean;
  /** Optional extras a server may send: what the index holds. */
  documents?: number;
  chunks?: number;
}

export interface Hit {
  path: string;
  page: number | null;
  score: number;
  text: string;
  chunk?: string;
  /** The hit's page was read by OCR from its image (a scan). */
  ocr?: boolean;
  /** The chunk's words that matched the query, lower case, never stop words (the words to mark). */
  terms?: string[];
  [key: string]: unknown;
}

/** What a search may return: documents in a folder, of some file types, modified in a date range
 * (YYYY-MM-DD, UTC); `allFromDocument`: rank by score alone (by default a document takes at most
 * two of the first five places). */
export interface SearchFilter {
  folder?: string;
  /** Only passages in this language (ISO 639-3, as `AppState.languages` lists them). */
  language?: string;
  types?: string[];
  after?: string;
  before?: string;
  allFromDocument?: boolean;
}

export interface Chunk {
  ordinal: number;
  page_start: number | null;
  page_end: number | null;
  text: string;
}

export interface DocumentDetail {
  path: string;
  state: FileStateName | string;
  error: string | null;
  pages: number | null;
  size: number | null;
  chunks: Chunk[];
  /** Pages (1-based) whose text OCR read from their image. */
  ocrPages: number[];
  summary: string | null;
  /** What checking the summary against the document found (null: no summary, or an older server). */
  summaryCheck: SummaryCheck | null;
  /** Where the summary stands: off in this app, not asked for, being written, or ready. */
  summaryState: "off" | "not_asked" | "pending" | "ready" | null;
}

export interface SummaryCheck {
  /** Every figure, date and name of the summary shown was found in the document. */
  checked: boolean;
  /** The first summary stated something the document does not and was written again. */
  rewritten: boolean;
  /**
   * Sentences taken out, with what in them the document does not hold; `kept`: the sentence shown
   * in its place, with only a currency sign the document never writes taken off.
   */
  removed: { sentence: string; items: string[]; kept?: string }[];
  /** The document's language when the model wrote the summary in English instead. */
  english_instead_of?: string;
}

/**
 * The answer of `document`, as docs/api.md has it. A server that answers `{path, state: FileState,
 * detail: {status, error, pages, size, chunks: [..]}, summary}` instead is read the same way.
 */
export function toDocumentDetail(raw: any): DocumentDetail {
  const file = raw?.state && typeof raw.state === "object" ? raw.state : null;
  const d = raw?.detail && typeof raw.detail === "object" ? raw.detail : raw ?? {};
  const status = typeof d.status === "string" ? (d.status === "indexed" ? "done" : d.status) : undefined;
  return {
    path: String(raw?.path ?? d.path ?? ""),
    state: file?.state ?? (typeof raw?.state === "string" ? raw.state : status) ?? "unknown",
    error: file?.error ?? d.error ?? null,
    pages: d.pages ?? file?.pages ?? null,
    size: d.size ?? null,
    chunks: Array.isArray(d.chunks) ? d.chunks : [],
    ocrPages: Array.isArray(d.ocr_pages) ? d.ocr_pages.filter((p: unknown) => typeof p === "number") : [],
    summary: raw?.summary ?? null,
    summaryCheck: raw?.summary_check && typeof raw.summary_check === "object" ? (raw.summary_check as SummaryCheck) : null,
    summaryState: ["off", "not_asked", "pending", "ready"].includes(raw?.summary_state) ? raw.summary_state : null,
  };
}

/** An error as the API reports it (`{error: {kind, message}}`), or one the transport makes. */
export class ApiError extends Error {
  constructor(
    public kind: string,
    message: string,
    public status?: number,
  ) {
    super(message);
    this.name = "ApiError";
  }
  get unauthorized(): boolean {
    return this.status === 401 || this.kind === "unauthorized";
  }
}

/** A passage an answer is read from: `[n]`, its file and page, the words around the question's. */
export interface AskPassage {
  n: number;
  path: string;
  page: number;
  snippet: string;
}

/** A passage an answer cites (the whole passage). */
export interface Citation {
  n: number;
  path: string;
  page: number;
  text: string;
}

/** An earlier question of the conversation and its answer, sent with a follow-up. */
export interface Turn {
  question: string;
  answer: string;
}

/** The checked answer to a question. */
export interface AnswerEvent {
  event: "answer";
  /** With its citation marks ([1]), or "Not in your documents." */
  answer: string;
  citations: Citation[];
  answerable: boolean;
  /** Sentences taken out for stating a figure, date or name their passage does not hold. */
  removed: { sentence: string; items: string[] }[];
  model: string;
  first_token_seconds: number | null;
  seconds: number;
}

/** What happens to a question, in order: passages, status…, then answer or error. */
export type AskEvent =
  | { event: "passages"; passages: AskPassage[] }
  | { event: "status"; status: string }
  | AnswerEvent
  | { event: "error"; error: { kind: string; message: string } };

/** One setting's documentation (docs/settings.md). */
export interface SettingField {
  key: string;
  env: string;
  flag: string;
  default: string;
  meaning: string;
}

/** What settings.json holds (crates/app/src/settings.rs, `Settings`). */
export interface Settings {
  data_dir: string | null;
  db: string | null;
  models_dir: string | null;
  model: string | null;
  chat_model: string | null;
  summarize: boolean | null;
  device: string;
  vram_budget: string | null;
  bin_tokens: number | null;
  align: number;
  cpu_precision: string;
  ocr_languages: string;
  ocr_max_pages: number;
  ocr_budget_secs: number;
}

/** GET /api/settings, the desktop's `settings` command. */
export interface SettingsView {
  file: string;
  data_folder: string;
  saved: Settings;
  running: Settings | null;
  overridden: string[];
  fields: SettingField[];
  restart_needed: boolean;
  /** The pinned models: role, size, whether installed (else fetched on first use). */
  models?: ModelChoice[];
}

export interface ModelChoice {
  name: string;
  role: string;
  size_bytes: number | null;
  installed: boolean;
  on_demand: boolean;
}
