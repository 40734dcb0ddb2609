// Numbers a person can read at a glance: "12.3k tok/s", "1.4 GiB", "3 s ago".

export function compact(n: number): string {
  if (!Number.isFinite(n)) return "–";
  const a = Math.abs(n);
  if (a < 1000) return a >= 100 || Number.isInteger(n) ? Math.round(n).toString() : n.toFixed(1);
  const units = ["k", "M", "G", "T"];
  let v = n;
  let i = -1;
  while (Math.abs(v) >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  const digits = Math.abs(v) >= 100 ? 0 : 1;
  return `${v.toFixed(digits).replace(/\.0$/, "")}${units[i]}`;
}

export function rate(n: number, unit = "tok/s"): string {
  return `${compact(n)} ${unit}`;
}

export function grouped(n: number): string {
  return Math.round(n).toLocaleString("en-US");
}

export function bytes(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i === 0 ? v : v.toFixed(v >= 100 ? 0 : 1)} ${units[i]}`;
}

export function percent(x: number, digits = 0): string {
  if (!Number.isFinite(x)) return "–";
  return `${(x * 100).toFixed(digits)}%`;
}

export function ago(ms: number, now = Date.now()): string {
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 2) return "just now";
  if (s < 60) return `${s} s ago`;
  const m = Math.round(s / 60);
  if (m < 60) return `${m} min ago`;
  const h = Math.round(m / 60);
  if (h < 48) return `${h} h ago`;
  return new Date(ms).toLocaleDateString();
}

export function basename(path: string): string {
  const parts = path.split(/[\\/]/).filter(Boolean);
  return parts.length ? parts[parts.length - 1] : path;
}

export function dirname(path: string): string {
  const i = Math.max(path.lastIndexOf("/"), path.lastIndexOf("\\"));
  return i > 0 ? path.slice(0, i) : "";
}

/** Shortens a long folder path from the left: "…/papers/2024". */
export function shortDir(path: string, max = 48): string {
  if (path.length <= max) return path;
  return "…" + path.slice(path.length - max + 1);
}

export const STATE_LABEL: Record<string, string> = {
  waiting: "waiting",
  extracting: "extracting",
  embedding: "embedding",
  done: "done",
  failed: "failed",
  no_text: "no text",
  skipped: "skipped",
};

/** "2.4 documents/s", or "12 documents/min" when fewer than one a second. */
export function docsRate(perSecond: number): string {
  if (!Number.isFinite(perSecond) || perSecond <= 0) return "–";
  if (perSecond >= 1) return `${perSecond >= 10 ? Math.round(perSecond) : perSecond.toFixed(1)} documents/s`;
  const perMinute = perSecond * 60;
  if (perMinute >= 1) return `${perMinute >= 10 ? Math.round(perMinute) : perMinute.toFixed(1)} documents/min`;
  return `${(perMinute * 60).toFixed(perMinute * 60 >= 10 ? 0 : 1)} documents/h`;
}

/** "40 s", "3 min", "1 h 20 min": a span of time to wait, rounded as a person would say it. */
export function duration(seconds: number): string {
  if (!Number.isFinite(seconds)) return "–";
  const s = Math.max(1, Math.round(seconds));
  if (s < 60) return `${s < 10 ? s : Math.round(s / 5) * 5} s`;
  const m = Math.round(s / 60);
  if (m < 60) return `${m} min`;
  const h = Math.floor(m / 60);
  const rest = m % 60;
  return rest ? `${h} h ${rest} min` : `${h} h`;
}

/** A folder path as text with a line-break opportunity after each separator (/ or \\), so that a
 * long one wraps between its folders rather than inside a name. */
export function breakablePath(path: string): (string | HTMLElement)[] {
  return breakAfter(path, /[^\\/]*(?:[\\/]+|$)/g);
}

/** A file name as text with a line-break opportunity after each _ . - and space, so that a long
 * one wraps between its parts rather than inside a word. */
export function breakableName(name: string): (string | HTMLElement)[] {
  return breakAfter(name, /[^_.\s-]*(?:[_.\s-]+|$)/g);
}

function breakAfter(text: string, parts: RegExp): (string | HTMLElement)[] {
  const out: (string | HTMLElement)[] = [];
  for (const part of text.match(parts) ?? [text]) {
    if (!part) continue;
    if (out.length) out.push(document.createElement("wbr"));
    out.push(part);
  }
  return out;
}
