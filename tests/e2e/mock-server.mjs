#!/usr/bin/env node
// A stand-in for `warpfold serve` that implements docs/api.md with fake work, so the UI can be built
// and its browser test shaken out without the engine. Same command line as the real server:
//
//   node tests/e2e/mock-server.mjs serve --addr 127.0.0.1:0 --token T --data-dir DIR [--db FILE]
//
// It prints `listening on http://ADDR`, serves ui/dist without the token and /api/* with it.
// Text comes out of the sample PDFs for real (inflate + the strings of Tj/TJ), so search answers
// sensibly; "embedding" and the bins are simulated.

import { createServer } from "node:http";
import { createReadStream, existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { basename, extname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { inflateSync } from "node:zlib";

const here = fileURLToPath(new URL(".", import.meta.url));
const dist = resolve(here, "../../ui/dist");

const args = process.argv.slice(2);
if (args[0] === "serve") args.shift();
const opt = (name, dflt) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : dflt;
};
const token = opt("token", process.env.WARPFOLD_TOKEN ?? "mock");
const [host, port] = opt("addr", "127.0.0.1:8787").split(/:(?=\d+$)/);
const dataDir = resolve(opt("data-dir", "/tmp/warpfold-mock"));
mkdirSync(join(dataDir, "uploads"), { recursive: true });

// ------------------------------------------------------------------------------------------------
// state

const CAPACITY = 4096;
const ALIGN = 16;
const device = {
  name: "Mock H200 (fake)",
  kind: "cuda",
  bin_tokens: CAPACITY,
  probe: { capacity_tokens: CAPACITY, free_bytes: 140e9, total_bytes: 150e9, margin: 0.1 },
  memory_total_bytes: 150_000_000_000,
  memory_used_bytes: 12_400_000_000,
  attention: "FlashAttention-2 varlen (hdim32_fp16)",
};
const folders = [];
const files = new Map(); // path -> FileState
const docs = new Map(); // path -> {chunks, pages, size, text}
const bins = [];
const samples = [];
let binId = 0;
let window_ = { tokens: 0, computed: 0, padded: 0, bins: 0 };
const clients = new Set();

function send(event, data) {
  const msg = `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
  for (const res of clients) res.write(msg);
}

function setState(path, state, extra = {}) {
  const f = { ...(files.get(path) ?? { path, error: null, chunks: null, pages: null }), state, ...extra, updated_ms: Date.now() };
  files.set(path, f);
  send("queue", f);
}

function counts() {
  const c = { waiting: 0, extracting: 0, embedding: 0, done: 0, failed: 0, no_text: 0, skipped: 0 };
  for (const f of files.values()) c[f.state]++;
  return c;
}

const SUPPORTED = new Set([".pdf", ".txt", ".md", ".markdown"]);

function queue(path) {
  const f = files.get(path);
  if (f && !["done", "failed", "no_text", "skipped"].includes(f.state)) return 0;
  setState(path, "waiting", { error: null, chunks: null, pages: null });
  return 1;
}

function walk(dir, out = []) {
  for (const name of readdirSync(dir)) {
    if (name.startsWith(".")) continue;
    const p = join(dir, name);
    const st = statSync(p);
    if (st.isDirectory()) walk(p, out);
    else if (SUPPORTED.has(extname(name).toLowerCase())) out.push(p);
  }
  return out;
}

// ------------------------------------------------------------------------------------------------
// "extraction": the strings a PDF draws, or the text of a text file

function pdfPages(buf) {
  const s = buf.toString("latin1");
  if (!s.startsWith("%PDF-")) throw new Error("not a PDF (no %PDF- header)");
  if (!s.includes("%%EOF")) throw new Error("truncated: the file ends before its %%EOF marker");
  const pages = [];
  const re = /(?<!end)stream\r?\n/g;
  let m;
  while ((m = re.exec(s))) {
    const start = m.index + m[0].length;
    const end = s.indexOf("endstream", start);
    if (end < 0) break;
    let body = Buffer.from(s.slice(start, end), "latin1");
    try {
      body = inflateSync(body);
    } catch {
      // not compressed
    }
    const text = body.toString("latin1");
    const parts = [];
    // literal (strings) and <hex> strings; bytes 1..26 are a..z (the samples' custom encoding)
    for (const t of text.matchAll(/\((?:\\.|[^\\)])*\)|<([0-9A-Fa-f\s]*)>/g)) {
      const raw = t[1] !== undefined ? Buffer.from(t[1].replace(/\s/g, ""), "hex").toString("latin1") : t[0].slice(1, -1).replace(/\\([()\\])/g, "$1").replace(/\\n/g, " ");
      parts.push(raw.replace(/[\x01-\x1a]/g, (c) => String.fromCharCode(96 + c.charCodeAt(0))));
    }
    if (/\b(Tj|TJ)\b/.test(text)) pages.push(parts.join(" ").replace(/\s+/g, " ").trim());
  }
  return pages;
}

function extract(path) {
  const buf = readFileSync(path);
  if (!buf.length) throw new Error("empty file");
  if (extname(path).toLowerCase() === ".pdf") return pdfPages(buf);
  return [buf.toString("utf8")];
}

function chunk(pages) {
  const chunks = [];
  pages.forEach((text, i) => {
    const words = text.split(/\s+/).filter(Boolean);
    for (let j = 0; j < words.length; j += 48) {
      chunks.push({ ordinal: chunks.length, page_start: i + 1, page_end: i + 1, text: words.slice(Math.max(0, j - 6), j + 48).join(" ") });
    }
  });
  return chunks;
}

// ------------------------------------------------------------------------------------------------
// the fake pipeline: one file at a time moves waiting -> extracting -> embedding -> done

let busy = false;
async function pump() {
  if (busy) return;
  const next = [...files.values()].find((f) => f.state === "waiting");
  if (!next) return;
  busy = true;
  const path = next.path;
  try {
    setState(path, "extracting");
    await sleep(350);
    let pages;
    try {
      pages = extract(path);
    } catch (e) {
      setState(path, "failed", { error: e.message });
      return;
    }
    const size = statSync(path).size;
    if (!pages.some((p) => p.trim())) {
      docs.set(path, { chunks: [], pages: pages.length, size });
      setState(path, "no_text", { pages: pages.length, chunks: 0 });
      return;
    }
    const chunks = chunk(pages);
    setState(path, "embedding", { pages: pages.length });
    // each chunk is a sequence; pack them with the other "users'" traffic into bins
    const seqs = chunks.map((c) => Math.min(256, Math.round(c.text.split(/\s+/).length * 1.35) + 2));
    for (let r = 0; r < 3; r++) {
      const extra = Array.from({ length: 8 + Math.floor(Math.random() * 20) }, () => 20 + Math.floor(Math.random() * 236));
      makeBin(r === 0 ? [...seqs, ...extra] : extra);
      await sleep(220);
    }
    docs.set(path, { chunks, pages: pages.length, size });
    setState(path, "done", { chunks: chunks.length, pages: pages.length });
  } finally {
    busy = false;
    setTimeout(pump, 60);
  }
}
setInterval(pump, 200);

function makeBin(seqs) {
  seqs.sort((a, b) => b - a);
  const sequences = [];
  const aligned = [];
  let used = 0;
  for (const s of seqs) {
    const a = Math.ceil(s / ALIGN) * ALIGN;
    if (used + a > CAPACITY) continue;
    sequences.push(s);
    aligned.push(a);
    used += a;
  }
  const real = sequences.reduce((a, b) => a + b, 0);
  const bin = { id: ++binId, at_ms: Date.now(), capacity: CAPACITY, sequences, aligned, padding: used - real, free: CAPACITY - used, fill: used / CAPACITY };
  bins.push(bin);
  if (bins.length > 64) bins.shift();
  window_.tokens += real;
  window_.computed += used;
  window_.padded += Math.max(...sequences) * sequences.length;
  window_.bins += 1;
  send("bin", bin);
}

setInterval(() => {
  const c = counts();
  const s = {
    t_ms: Date.now(),
    tokens_per_s: window_.tokens * 2,
    computed_per_s: window_.computed * 2,
    padded_equivalent_per_s: window_.padded * 2,
    bins_per_s: window_.bins * 2,
    queue_depth: c.waiting + c.extracting + c.embedding,
    memory_used_bytes: device.memory_used_bytes + (window_.bins ? 2_000_000_000 + Math.random() * 5e8 : 0),
  };
  window_ = { tokens: 0, computed: 0, padded: 0, bins: 0 };
  samples.push(s);
  if (samples.length > 600) samples.shift();
  send("sample", s);
}, 500);

// ------------------------------------------------------------------------------------------------
// search: words of the query against the chunks, best first

const STOP = new Set("a an and are as at be by can do does for from how in is it of on or should the to what when where which why with".split(" "));
function search(q, k) {
  const stems = q
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((w) => w.length > 1 && !STOP.has(w))
    .map((w) => (w.length > 4 ? w.replace(/(es|s)$/, "") : w));
  const hits = [];
  for (const [path, d] of docs) {
    for (const c of d.chunks) {
      const words = c.text.toLowerCase().split(/[^a-z0-9]+/);
      const score = stems.reduce((a, s) => a + (words.some((w) => w.startsWith(s)) ? 1 : 0), 0) + (basename(path).toLowerCase().includes(stems[stems.length - 1] ?? "\0") ? 0.5 : 0);
      if (score > 0) hits.push({ path, page: c.page_start, score: score / 60, text: c.text.slice(0, 240), chunk: c.text });
    }
  }
  hits.sort((a, b) => b.score - a.score);
  return hits.slice(0, k);
}

// ------------------------------------------------------------------------------------------------
// HTTP

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function json(res, status, body) {
  res.writeHead(status, { "Content-Type": "application/json" });
  res.end(JSON.stringify(body));
}
function fail(res, status, kind, message) {
  json(res, status, { error: { kind, message } });
}
async function body(req) {
  const parts = [];
  for await (const c of req) parts.push(c);
  return Buffer.concat(parts);
}
async function jsonBody(req) {
  try {
    return JSON.parse((await body(req)).toString("utf8") || "{}");
  } catch {
    return null;
  }
}

const STATIC = { "/": ["index.html", "text/html; charset=utf-8"], "/index.html": ["index.html", "text/html; charset=utf-8"], "/app.js": ["app.js", "text/javascript"], "/app.css": ["app.css", "text/css"] };

const server = createServer(async (req, res) => {
  const url = new URL(req.url, "http://x");
  const path = url.pathname;
  if (req.method === "GET" && STATIC[path]) {
    const [file, type] = STATIC[path];
    // the real server's policy: the UI must work under it
    res.writeHead(200, {
      "Content-Type": type,
      "Cache-Control": "no-cache",
      "Content-Security-Policy": "default-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; frame-ancestors 'none'",
    });
    return res.end(readFileSync(join(dist, file)));
  }
  const auth = req.headers.authorization ?? "";
  if (auth !== `Bearer ${token}`) return fail(res, 401, "unauthorized", "token missing or wrong");

  try {
    if (req.method === "GET" && path === "/api/state") {
      return json(res, 200, { model: "all-MiniLM-L6-v2", device, folders, queue: { counts: counts(), files: [...files.values()] }, bins, samples });
    }
    if (req.method === "GET" && path === "/api/events") {
      res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-store", Connection: "keep-alive" });
      res.write(": hello\n\n");
      clients.add(res);
      const ping = setInterval(() => res.write(": ping\n\n"), 15000);
      req.on("close", () => {
        clearInterval(ping);
        clients.delete(res);
      });
      return;
    }
    if (path === "/api/folders" && (req.method === "POST" || req.method === "DELETE")) {
      const b = await jsonBody(req);
      if (!b || typeof b.path !== "string" || !b.path) return fail(res, 400, "invalid_input", "expected {\"path\": \"...\"}");
      const p = resolve(b.path);
      if (req.method === "POST") {
        if (!existsSync(p)) return fail(res, 404, "not_found", `no such folder: ${p}`);
        if (!statSync(p).isDirectory()) return fail(res, 400, "invalid_input", `not a folder: ${p}`);
        if (!folders.includes(p)) folders.push(p);
        walk(p).forEach(queue);
      } else {
        const i = folders.indexOf(p);
        if (i < 0) return fail(res, 404, "not_found", `not watched: ${p}`);
        folders.splice(i, 1);
      }
      send("folders", folders);
      return json(res, 200, folders);
    }
    if (req.method === "POST" && path === "/api/paths") {
      const b = await jsonBody(req);
      if (!b || !Array.isArray(b.paths)) return fail(res, 400, "invalid_input", "expected {\"paths\": [...]}");
      let n = 0;
      for (const p of b.paths.map((x) => resolve(x))) {
        if (!existsSync(p)) return fail(res, 404, "not_found", `no such file: ${p}`);
        for (const f of statSync(p).isDirectory() ? walk(p) : [p]) n += queue(f);
      }
      return json(res, 200, { queued: n });
    }
    if (req.method === "POST" && path === "/api/upload") {
      const name = basename(url.searchParams.get("name") ?? "");
      if (!name || name.startsWith(".")) return fail(res, 400, "invalid_input", "name= is required");
      const dest = join(dataDir, "uploads", name);
      writeFileSync(dest, await body(req));
      return json(res, 200, { queued: queue(dest), path: dest });
    }
    if (req.method === "GET" && path === "/api/search") {
      const q = url.searchParams.get("q") ?? "";
      if (!q.trim()) return fail(res, 400, "invalid_input", "q= is empty");
      return json(res, 200, { hits: search(q, Number(url.searchParams.get("k") ?? 10)) });
    }
    if (req.method === "GET" && path === "/api/document") {
      const p = url.searchParams.get("path") ?? "";
      const f = files.get(p);
      if (!f) return fail(res, 404, "not_found", `not in the index: ${p}`);
      const d = docs.get(p);
      return json(res, 200, { path: p, state: f.state, error: f.error, pages: d?.pages ?? f.pages, size: d?.size ?? null, chunks: d?.chunks ?? [], summary: null });
    }
    if (req.method === "GET" && path === "/api/file") {
      const p = url.searchParams.get("path") ?? "";
      if (!files.has(p)) return fail(res, 403, "path_not_allowed", "only indexed files can be opened");
      res.writeHead(200, { "Content-Type": extname(p) === ".pdf" ? "application/pdf" : "text/plain; charset=utf-8" });
      return createReadStream(p).pipe(res);
    }
    return fail(res, 404, "not_found", `no route ${req.method} ${path}`);
  } catch (e) {
    return fail(res, 500, "internal", String(e?.message ?? e));
  }
});

server.listen(Number(port), host, () => {
  const a = server.address();
  console.log(`listening on http://${a.address}:${a.port}`);
});
process.on("SIGTERM", () => process.exit(0));
process.on("SIGINT", () => process.exit(0));
