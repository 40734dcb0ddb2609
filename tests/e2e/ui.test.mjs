// End to end in a real browser: the web UI against `warpfold serve`, through Debian's chromium.
//
//   cd tests/e2e && npm ci && node --test ui.test.mjs
//
// WARPFOLD: the binary (default target/release/warpfold; it embeds ui/dist, so build the UI first).
// UI_DIST=1: serve the page's own files from ui/dist instead of the binary's embedded copy (to try a
//           rebuilt UI against the real server without rebuilding it).
// CHROMIUM: the browser (default /usr/bin/chromium). ARTIFACTS: where screenshots and the server's
//           log go (default tests/e2e/artifacts, git-ignored). E2E_SCREENSHOTS=1 (what
//           scripts/screenshots.sh sets) also writes them to docs/screenshots/browser-*.png, the
//           documentation's pictures; a test run leaves the tree as it was.

import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync, createWriteStream } from "node:fs";
import { createServer as createHttpServer } from "node:http";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { basename, join, resolve } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";
import { chromium } from "playwright-core";

const here = fileURLToPath(new URL(".", import.meta.url));
const repo = resolve(here, "../..");
const WARPFOLD = resolve(repo, process.env.WARPFOLD ?? "target/release/warpfold");
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";
const ARTIFACTS = resolve(process.env.ARTIFACTS ?? join(here, "artifacts"));
const SHOTS = join(repo, "docs/screenshots");
const TOKEN = "e2e-" + Math.random().toString(36).slice(2);
const CSP = "default-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; object-src 'none'; frame-ancestors 'none'";
const WAIT = Number(process.env.E2E_WAIT_MS ?? 180_000);

mkdirSync(ARTIFACTS, { recursive: true });
// the committed pictures show the real server, refreshed only when asked (scripts/screenshots.sh)
const WRITE_SHOTS = process.env.E2E_SCREENSHOTS === "1";
if (WRITE_SHOTS) mkdirSync(SHOTS, { recursive: true });

/** Checks the CPU encoder's products that the server's attention line names (`undefined` for f32)
 * against WARPFOLD_CPU_PRECISION: bf16 or bf16x3 when asked for, none for f32, and with auto (the
 * default) bf16x3 or none, bf16x3 only on a CPU with AMX's bf16 tiles (where MKL's products run there). */
function checkCpuPrecision(products) {
  const asked = (process.env.WARPFOLD_CPU_PRECISION ?? "").trim().toLowerCase();
  if (asked === "bf16" || asked === "bf16x3") return assert.equal(products, asked);
  if (asked === "f32") return assert.equal(products, undefined);
  const amx = existsSync("/proc/cpuinfo") && /\bamx_bf16\b/.test(readFileSync("/proc/cpuinfo", "utf8"));
  assert.ok(products === undefined || (products === "bf16x3" && amx), `auto ran ${products} (AMX: ${amx})`);
}

function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.on("error", rej);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => res(port));
    });
  });
}

/** Starts the server and resolves with its base URL once it prints `listening on http://ADDR`. */
function startServer(tmp, port) {
  const args = ["serve", "--db", join(tmp, "index.db"), "--addr", `127.0.0.1:${port}`, "--token", TOKEN, "--data-dir", tmp];
  const child = spawn(WARPFOLD, args, { cwd: repo, stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, WARPFOLD_LOG: process.env.WARPFOLD_LOG ?? "info" } });
  const log = createWriteStream(join(ARTIFACTS, "server.log"));
  child.stderr.pipe(log);
  const url = new Promise((res, rej) => {
    let out = "";
    const timer = setTimeout(() => rej(new Error(`the server printed no "listening on" line within ${WAIT} ms:\n${out}`)), WAIT);
    child.stdout.on("data", (d) => {
      log.write(d);
      out += d;
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        res(m[1].replace(/\/$/, ""));
      }
    });
    child.on("exit", (code, sig) => {
      clearTimeout(timer);
      rej(new Error(`the server exited (${code ?? sig}) before listening; see ${join(ARTIFACTS, "server.log")}\n${out}`));
    });
  });
  return { child, url };
}

async function shot(page, name, fullPage = false) {
  // transient messages would cover the picture
  await page.evaluate(() => {
    document.querySelectorAll("[data-testid=toast]").forEach((el) => el.remove());
    document.activeElement?.blur?.();
  });
  const file = `browser-${name}.png`;
  await page.screenshot({ path: join(ARTIFACTS, file), fullPage });
  if (WRITE_SHOTS) copyFileSync(join(ARTIFACTS, file), join(SHOTS, file));
}

const AXE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

/** axe-core's serious and critical violations on the page as it is (WCAG 2.x A and AA rules and
 * axe's best practices), each as "rule: what, where". axe is evaluated through the debugging
 * protocol, which the page's CSP (no inline scripts) does not govern. */
async function axeViolations(page) {
  if (!(await page.evaluate(() => typeof window.axe === "object"))) await page.evaluate(AXE);
  const { violations } = await page.evaluate(() => window.axe.run(document, { resultTypes: ["violations"] }));
  const all = violations.map((v) => `${v.impact} ${v.id}: ${v.nodes.length} (${v.nodes.slice(0, 3).map((n) => n.target.join(" ")).join(", ")})`);
  if (all.length) console.log(`axe, below serious: ${all.join("; ")}`);
  return violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => `${v.id}: ${v.help} — ${v.nodes.slice(0, 5).map((n) => `${n.target.join(" ")} ${n.any[0]?.message ?? ""}`).join(" | ")}`);
}

/** WCAG contrast of two CSS colours as getComputedStyle gives them (rgb() or rgba() over none). */
function contrast(a, b) {
  const rgb = (c) => c.match(/[\d.]+/g).slice(0, 3).map(Number);
  const lum = (c) => {
    const [r, g, b2] = rgb(c).map((v) => {
      v /= 255;
      return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * r + 0.7152 * g + 0.0722 * b2;
  };
  const [x, y] = [lum(a), lum(b)].sort((p, q) => q - p);
  return (x + 0.05) / (y + 0.05);
}

/** Waits for the detail panel to be open and done sliding in. */
const slidIn = (page) =>
  page.waitForFunction(() => {
    const panel = document.querySelector("[data-testid=detail-panel]");
    return panel.open && panel.classList.contains("open") && panel.getAnimations().length === 0;
  });

const count = async (page, state) => Number((await page.getByTestId(`queue-${state}-count`).textContent()).replace(/[^\d]/g, ""));

test("web UI against warpfold serve", { timeout: 15 * 60_000 }, async (t) => {
  assert.ok(existsSync(WARPFOLD), `no warpfold binary at ${WARPFOLD} (set WARPFOLD)`);
  assert.ok(existsSync(CHROMIUM), `no browser at ${CHROMIUM} (apt-get install chromium)`);
  const tmp = mkdtempSync(join(tmpdir(), "warpfold-e2e-"));
  const samples = join(tmp, "samples");
  const made = spawnSync(WARPFOLD, ["make-samples", samples], { encoding: "utf8" });
  assert.equal(made.status, 0, `make-samples failed: ${made.stderr}`);
  // documents to upload: every sample PDF (two are scans: a receipt OCR reads, a blank page it cannot) and a broken one
  const pdfs = [];
  for (const dir of readdirSync(samples)) for (const f of readdirSync(join(samples, dir))) if (f.endsWith(".pdf")) pdfs.push(join(samples, dir, f));
  assert.ok(pdfs.some((p) => p.endsWith("tomatoes.pdf")) && pdfs.some((p) => p.includes("scan")), `unexpected samples: ${pdfs}`);
  const broken = join(tmp, "broken", "broken.pdf");
  mkdirSync(join(tmp, "broken"));
  writeFileSync(broken, "%PDF-1.4\n1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n% cut short here");
  // added later as a watched folder, never uploaded: the sample notes and a shelf of texts of
  // many lengths, so the bins fill with sequences of different sizes
  const notes = join(tmp, "library");
  mkdirSync(notes);
  for (const f of readdirSync(join(samples, "notes"))) copyFileSync(join(samples, "notes", f), join(notes, f));
  writeLibrary(notes, Number(process.env.E2E_LIBRARY ?? 24));
  // text outside English, typed as people type it: French with no-break spaces before : ; ? and a
  // narrow one inside numbers, Japanese with no spaces at all, and characters outside the BMP
  // (two UTF-16 units each in the page) before the words the UI must mark
  writeFileSync(
    join(notes, "lettre.txt"),
    "𝒳 Objet\u00a0: régularisation 👩\u200d👩\u200d👧\n\nMadame, Monsieur,\n\nLes charges locatives\u00a0: 312,40\u00a0€ par mois\u00a0; " +
      "elles sont révisées selon l'indice de référence des loyers (1\u202f250 points).\n",
  );
  writeFileSync(join(notes, "tokyo.txt"), "𝒳 人口の報告 👍🏽\n\n東京都の人口は、約千四百万人です。交通網は世界で最も発達しています。\n");
  const notesFiles = readdirSync(notes);

  const port = await freePort();
  const server = startServer(tmp, port);
  let browser;
  const pageErrors = [];
  try {
    const base = await server.url;
    t.diagnostic(`server at ${base}`);

    await t.test("the API refuses requests without the right token", async () => {
      assert.equal((await fetch(`${base}/api/state`)).status, 401);
      assert.equal((await fetch(`${base}/api/state`, { headers: { Authorization: "Bearer wrong" } })).status, 401);
      assert.equal((await fetch(`${base}/api/events`, { headers: { Authorization: "Bearer wrong" } })).status, 401);
      const ok = await fetch(`${base}/api/state`, { headers: { Authorization: `Bearer ${TOKEN}` } });
      assert.equal(ok.status, 200);
      const state = await ok.json();
      assert.ok(state.device && typeof state.device.bin_tokens === "number", "AppState.device.bin_tokens");
      assert.ok(Array.isArray(state.queue.files), "AppState.queue.files");
    });

    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      // playwright gives every launch a fresh --user-data-dir of its own (it refuses one in args)
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    });
    const newContext = async (options) => {
      const context = await browser.newContext(options);
      if (process.env.UI_DIST === "1") {
        const files = { "/": "index.html", "/index.html": "index.html", "/app.js": "app.js", "/app.css": "app.css" };
        await context.route(
          (url) => url.origin === base && url.pathname in files,
          (route) => {
            const name = files[new URL(route.request().url()).pathname];
            const type = { html: "text/html", js: "text/javascript", css: "text/css" }[name.split(".").pop()];
            route.fulfill({ path: join(repo, "ui/dist", name), contentType: type, headers: { "Content-Security-Policy": CSP } });
          },
        );
      }
      return context;
    };
    const newPage = async (colorScheme = "dark", viewport = { width: 1440, height: 960 }) => {
      const context = await newContext({ viewport, colorScheme, deviceScaleFactor: 1 });
      const page = await context.newPage();
      page.on("pageerror", (e) => pageErrors.push(String(e)));
      page.setDefaultTimeout(WAIT);
      return page;
    };

    await t.test("a page opened without the token shows the token screen", async () => {
      const page = await newPage();
      await page.goto(`${base}/`);
      await page.getByTestId("token-screen").waitFor({ state: "visible" });
      assert.match(await page.getByTestId("token-screen").textContent(), /token missing or wrong/i);
      assert.equal(await page.locator("#app").isVisible(), false);
      await shot(page, "token");
      // a wrong token too
      await page.goto(`${base}/?token=wrong`);
      await page.getByTestId("token-screen").waitFor({ state: "visible" });
      await page.context().close();
    });

    const page = await newPage();
    await t.test("opens with ?token=, trades it for a cookie and takes it out of the address bar", async () => {
      const TOKEN_FOR_PAGE = TOKEN;
      await page.goto(`${base}/?token=${TOKEN}`);
      await page.locator("#app").waitFor({ state: "visible" });
      assert.ok(!page.url().includes("token="), `token still in the URL: ${page.url()}`);
      await page.locator('[data-testid=connection][data-state="live"]').waitFor();
      assert.notEqual((await page.getByTestId("model-name").textContent()).trim(), "–");
      assert.match(await page.getByTestId("device-capacity").textContent(), /\d tokens/);
      // which attention the model runs through, and on the CPU why it is the masked path
      // (the CPU encoder's products when not f32: WARPFOLD_CPU_PRECISION=bf16 or bf16x3 in the
      // environment, or the default, auto, on a CPU with AMX; the line says so and a pill shows it)
      const title = await page.getByTestId("attention").getAttribute("title");
      const line = /^masked attention per slot \(CPU\)(?:, products in (bf16x3|bf16) \(MKL\))?$/.exec(title);
      assert.ok(line, `attention line: ${title}`);
      const products = line[1];
      checkCpuPrecision(products);
      assert.equal(await page.getByTestId("precision").count(), products ? 1 : 0, "a precision pill exactly when bf16 or bf16x3 runs");
      if (products) assert.equal((await page.getByTestId("precision").textContent()).trim(), products);
      await page.getByTestId("queue-progress-label").waitFor();
      await shot(page, "empty");
      // the token was traded for an HttpOnly cookie: no script and no storage holds it
      assert.ok(!(await page.evaluate(() => document.cookie)).includes("warpfold_session"), "the session cookie is HttpOnly");
      const stored = await page.evaluate(() => JSON.stringify({ ...sessionStorage }) + JSON.stringify({ ...localStorage }));
      assert.ok(!stored.includes(TOKEN_FOR_PAGE), `the token is kept in storage: ${stored}`);
      const cookies = await page.context().cookies();
      const session = cookies.find((c) => c.name.startsWith("warpfold_session_"));
      assert.ok(session && session.httpOnly && session.sameSite === "Strict", `cookie: ${JSON.stringify(cookies)}`);
      // the session survives a reload (the cookie, and the key to check the server with)
      await page.reload();
      await page.locator('[data-testid=connection][data-state="live"]').waitFor();
    });

    await t.test("uploads PDFs through the file input and the queue takes them to done", async () => {
      await page.getByTestId("file-input").setInputFiles([...pdfs, broken]);
      const row = (name) => page.locator(`[data-testid=file-row][data-path$="${name}"]`);
      for (const p of pdfs) await row(basename(p)).waitFor();
      for (const p of pdfs) {
        const want = p.includes("blank") ? "no_text" : "done";
        await page.locator(`[data-testid=file-row][data-path$="${basename(p)}"][data-state="${want}"]`).waitFor();
      }
      await page.locator('[data-testid=file-row][data-path$="broken.pdf"][data-state="failed"]').waitFor();
      const reason = (await row("broken.pdf").getByTestId("file-error").textContent()).trim();
      assert.ok(reason.length > 3, `a failed file shows its reason (got "${reason}")`);
      assert.ok((await count(page, "done")) >= pdfs.length - 1);
      assert.ok((await count(page, "no_text")) >= 1);
      assert.ok((await count(page, "failed")) >= 1);
    });

    await t.test("a file dropped on the window is uploaded and indexed", async () => {
      const dataTransfer = await page.evaluateHandle(() => {
        const dt = new DataTransfer();
        const text = "Dropped note. Sourdough starter wants feeding twice a day with equal weights of flour and water.";
        dt.items.add(new File([text], "dropped-note.txt", { type: "text/plain" }));
        return dt;
      });
      await page.dispatchEvent("body", "dragenter", { dataTransfer });
      await page.getByTestId("drop-overlay").waitFor({ state: "visible" });
      await page.dispatchEvent("body", "drop", { dataTransfer });
      await page.getByTestId("drop-overlay").waitFor({ state: "hidden" });
      await page.locator('[data-testid=file-row][data-path$="dropped-note.txt"][data-state="done"]').waitFor();
    });

    await t.test("bins and throughput show the work", async () => {
      await page.locator("[data-testid=bin-row]").first().waitFor();
      const rows = await page.locator("[data-testid=bin-row]").count();
      assert.ok(rows > 0, "bin rows");
      const fill = await page.locator("[data-testid=bin-row]").first().getByTestId("bin-fill").textContent();
      assert.match(fill, /\d+%/);
      await page.waitForFunction(() => Number(document.querySelector("[data-testid=throughput-chart]")?.getAttribute("data-points")) > 1);
      await page.locator("[data-testid=throughput-chart] canvas").waitFor();
      const state = await (await fetch(`${base}/api/state`, { headers: { Authorization: `Bearer ${TOKEN}` } })).json();
      assert.ok(state.bins.length > 0, "the server reports bins");
      assert.ok(
        state.samples.some((s) => s.tokens_per_s > 0),
        "some sample saw real tokens per second",
      );
    });

    await t.test("search finds the tomato document and marks the words", async () => {
      await page.getByTestId("search-input").fill("how deep to plant tomatoes");
      await page.getByTestId("search-input").press("Enter");
      const first = page.getByTestId("search-hit").first();
      await first.waitFor();
      assert.match(await first.getAttribute("data-path"), /tomatoes\.pdf$/);
      assert.ok((await first.locator("mark").count()) > 0, "query words highlighted");
      // stop words are never marked
      const marked = await page.getByTestId("search-hit").locator("mark").allTextContents();
      assert.ok(!marked.some((w) => ["how", "to"].includes(w.toLowerCase())), `marked: ${marked}`);
      await shot(page, "search");
      // a type filter searches again among those files only (the text file dropped above)
      await page.getByTestId("filter-type").selectOption("txt,text,md,markdown");
      await page.waitForFunction(() => {
        const hits = [...document.querySelectorAll("[data-testid=search-hit]")];
        return hits.length > 0 && hits.every((h) => /\.(txt|md)$/.test(h.dataset.path));
      });
      await page.getByTestId("filter-type").selectOption("");
      await page.waitForFunction(() => /tomatoes\.pdf$/.test(document.querySelector("[data-testid=search-hit]")?.dataset.path ?? ""));
    });

    await t.test("a hit opens the document's detail, and the file opens", async () => {
      await page.getByTestId("search-hit").first().click();
      const panel = page.getByTestId("detail-panel");
      await panel.waitFor({ state: "visible" });
      assert.equal((await panel.getByTestId("detail-name").textContent()).trim(), "tomatoes.pdf");
      await panel.getByTestId("detail-chunk").first().waitFor();
      assert.match(await panel.getByTestId("detail-state").textContent(), /done/);
      // this server runs without --summarize: the panel says summaries come when asked for
      assert.equal(await panel.getByTestId("summary-state").getAttribute("data-state"), "not_asked");
      assert.match(await panel.getByTestId("summary-state").textContent(), /made when asked for/);
      await page.waitForTimeout(300); // the panel's slide-in
      await shot(page, "detail");
      // opened by address with the cookie: sandboxed by the server, no handle back to this tab
      const [popup] = await Promise.all([page.context().waitForEvent("page"), panel.getByTestId("detail-open").click()]);
      // at the hit's page, where the browser's PDF viewer goes by its #page=
      const hitPage = await page.getByTestId("search-hit").first().evaluate((el) => el.textContent.match(/p\. (\d+)/)?.[1]);
      assert.ok(hitPage, "the hit names its page");
      await popup.waitForURL(new RegExp(`/api/file\\?path=.*tomatoes\\.pdf#page=${hitPage}$`), { timeout: 30_000 });
      await popup.setViewportSize({ width: 1000, height: 700 });
      await popup.waitForTimeout(1500); // the PDF viewer draws
      await shot(popup, "open-file");
      await popup.close();
      const bytes = await fetch(`${base}/api/file?path=${encodeURIComponent(await page.getByTestId("search-hit").first().getAttribute("data-path"))}`, {
        headers: { Authorization: `Bearer ${TOKEN}` },
      });
      assert.equal(bytes.status, 200);
      assert.equal(Buffer.from(await bytes.arrayBuffer()).subarray(0, 5).toString(), "%PDF-");
      await page.keyboard.press("Escape");
      await panel.waitFor({ state: "hidden" });
    });

    await t.test("a question is answered with the page it comes from, and the citation opens that page", async () => {
      await page.keyboard.press("Escape");
      await page.getByTestId("search-input").fill("When did Galileo find the four largest moons of Jupiter?");
      await page.getByTestId("ask-button").click();
      const answer = page.getByTestId("answer-panel");
      await answer.waitFor({ state: "visible" });
      // the chat model loads and reads five passages on the CPU: tens of seconds
      const text = answer.getByTestId("answer-text");
      await text.waitFor({ timeout: 5 * 60_000 });
      assert.equal(await text.getAttribute("data-answerable"), "true", await answer.textContent());
      assert.match(await text.textContent(), /1610/);
      const source = answer.getByTestId("answer-source").first();
      assert.match(await source.getAttribute("data-path"), /moons\.pdf$/);
      assert.equal(await source.getAttribute("data-page"), "1");
      assert.ok((await answer.getByTestId("answer-cite").count()) >= 1, "the answer's [n] marks are links");
      await shot(page, "ask");
      await source.click();
      const panel = page.getByTestId("detail-panel");
      await panel.waitFor({ state: "visible" });
      assert.equal((await panel.getByTestId("detail-name").textContent()).trim(), "moons.pdf");
      const shown = panel.locator(".chunk.match");
      await shown.waitFor();
      assert.match(await shown.textContent(), /p\. 1|pp\. 1/);
      await page.keyboard.press("Escape");
      await answer.getByTestId("answer-clear").click();
      assert.equal(await answer.isVisible(), false);
    });

    await t.test("a watched folder added by path queues its files", async () => {
      await page.getByTestId("search-input").fill("");
      await page.getByTestId("search-input").press("Enter");
      await page.getByTestId("folder-input").fill(notes);
      await page.getByTestId("folder-add").click();
      await page.locator(`[data-testid=folder][data-path="${notes}"]`).waitFor();
      for (const f of notesFiles) await page.locator(`[data-testid=file-row][data-path$="/library/${f}"]`).waitFor();
      // a picture while the engine works, if it is still working
      await page.locator("[data-testid=queue-progress].busy").waitFor({ timeout: 5000 }).catch(() => undefined);
      await page.waitForTimeout(2500);
      await shot(page, "working", true);
      for (const f of notesFiles) await page.locator(`[data-testid=file-row][data-path$="/library/${f}"][data-state="done"]`).waitFor();
      // a folder that does not exist is refused with a message
      await page.getByTestId("folder-input").fill(join(tmp, "no-such-folder"));
      await page.getByTestId("folder-add").click();
      await page.locator("[data-testid=toast][data-kind=error]").first().waitFor();
      await page.getByTestId("folder-input").fill("");
      await page.waitForTimeout(600);
      await shot(page, "overview", true);
    });

    await t.test("a French and a Japanese question find their letter and mark its words", async () => {
      const ask = async (question, file, words) => {
        // the list cleared first, so the hits read below are this question's, not the last one's
        await page.getByTestId("search-input").fill("");
        await page.getByTestId("search-input").press("Enter");
        await page.getByTestId("search-hit").first().waitFor({ state: "detached" });
        await page.getByTestId("search-input").fill(question);
        await page.getByTestId("search-input").press("Enter");
        const first = page.locator(`[data-testid=search-hit][data-path$="/library/${file}"]`).first();
        await first.waitFor();
        assert.match(await page.getByTestId("search-hit").first().getAttribute("data-path"), new RegExp(`/${file}$`));
        const marked = (await first.locator("mark").allTextContents()).map((m) => m.toLowerCase());
        for (const w of words) assert.ok(marked.includes(w), `${question}: "${w}" not marked in ${JSON.stringify(marked)}`);
        const text = await first.locator(".hit-text").textContent();
        for (const m of marked) assert.ok(text.toLowerCase().includes(m), `mark "${m}" is text of the snippet`);
      };
      await ask("Quel est le montant des charges locatives\u00a0?", "lettre.txt", ["charges", "locatives"]);
      // a Japanese word is a part of a run written without spaces: marked inside it, its
      // particles left out
      await ask("東京都の人口は？", "tokyo.txt", ["東京都の人口"]);
      await ask("交通網", "tokyo.txt", ["交通網"]);
      await shot(page, "search-unicode");
      await page.getByTestId("search-input").fill("");
      await page.getByTestId("search-input").press("Enter");
    });

    await t.test("settings are saved to settings.json from the dialog, and the next start takes them", async () => {
      await page.getByTestId("settings-button").click();
      const dialog = page.getByTestId("settings-dialog");
      await dialog.waitFor();
      assert.equal(await page.getByTestId("settings-data-dir").locator("code").textContent(), tmp);
      // the watched folders are listed, with where they are changed
      assert.match(await page.getByTestId("settings-folders").textContent(), /\/library.*Added and removed in the Watched folders bar/s);
      // each pinned model says its size and whether it is here or fetched on first use
      const minilm = await page.getByTestId("setting-model").locator("option[value='all-MiniLM-L6-v2']").textContent();
      assert.match(minilm, /all-MiniLM-L6-v2 .* — \d+(\.\d+)? MiB, installed$/);
      await page.getByTestId("setting-ocr_languages").fill("eng+fra");
      await page.getByTestId("setting-summarize").selectOption("false");
      await page.getByTestId("setting-device").selectOption("cpu");
      await page.getByTestId("settings-save").click();
      await page.getByTestId("settings-status").filter({ hasText: "apply when warpfold starts again" }).waitFor();
      await shot(page, "settings");
      const saved = JSON.parse(readFileSync(join(tmp, "settings.json"), "utf8"));
      assert.equal(saved.ocr_languages, "eng+fra");
      assert.equal(saved.summarize, false);
      assert.equal(saved.device, "cpu");
      assert.ok(Array.isArray(saved.folders) && saved.folders.some((f) => f.endsWith("/library")), `the watched folders stay: ${JSON.stringify(saved.folders)}`);
      // the next start on this data folder (serve's own flags aside) runs with them
      const next = spawnSync(WARPFOLD, ["settings", "--data-dir", tmp], { encoding: "utf8" });
      assert.equal(next.status, 0, next.stderr);
      for (const line of ["ocr_languages = eng+fra", "summarize = false", "device = cpu"]) assert.ok(next.stdout.includes(line), `${line} in:\n${next.stdout}`);
      // the window may not point the app at another folder
      const auth = { Authorization: `Bearer ${TOKEN}`, "Content-Type": "application/json" };
      const refused = await fetch(`${base}/api/settings`, { method: "PUT", headers: auth, body: JSON.stringify({ ...saved, folders: undefined, data_dir: "/etc" }) });
      assert.equal(refused.status, 403);
      assert.match((await refused.json()).error.message, /data_dir/);
      await page.getByTestId("settings-close").click();
      await dialog.waitFor({ state: "hidden" });
    });

    await t.test("the library lists the documents, filtered by type and sorted, and a row opens its detail; files are served by type", async () => {
      await page.getByTestId("library-button").click();
      const dialog = page.getByTestId("library-dialog");
      await dialog.waitFor();
      await page.getByTestId("library-summary").filter({ hasText: /of \d+ documents?/ }).waitFor();
      const all = await page.getByTestId("library-row").count();
      assert.ok(all >= 3, `rows: ${all}`);
      await page.getByTestId("library-type").selectOption("pdf");
      // the filtered rows, not the empty table between the question and its answer
      await page.waitForFunction(() => {
        const rows = [...document.querySelectorAll("[data-testid=library-row]")];
        return rows.length > 0 && rows.every((r) => r.dataset.path.toLowerCase().endsWith(".pdf"));
      });
      const pdfs = await page.getByTestId("library-row").evaluateAll((rows) => rows.map((r) => r.dataset.path));
      assert.ok(pdfs.length >= 1 && pdfs.length < all, `${pdfs.length} PDFs of ${all}`);
      await page.getByTestId("library-order").selectOption("size");
      await page.getByTestId("library-desc").check();
      await page.waitForFunction(() => document.querySelector("[data-testid=library-summary]").textContent.includes("of"));
      await shot(page, "library");
      const auth = { Authorization: `Bearer ${TOKEN}` };
      const sizes = (await (await fetch(`${base}/api/library?type=pdf&sort=size&desc=true`, { headers: auth })).json()).documents.map((d) => d.size);
      assert.deepEqual(sizes, [...sizes].sort((a, b) => b - a), "largest first");
      // the PDF is served as a PDF, shown inline, sandboxed and never sniffed
      const file = await fetch(`${base}/api/file?path=${encodeURIComponent(pdfs[0])}`, { headers: auth });
      assert.equal(file.headers.get("content-type"), "application/pdf");
      assert.equal(file.headers.get("x-content-type-options"), "nosniff");
      assert.match(file.headers.get("content-security-policy"), /^sandbox/);
      assert.match(file.headers.get("content-disposition"), /^inline/);
      await page.getByTestId("library-row").first().getByRole("button").click();
      await dialog.waitFor({ state: "hidden" });
      await page.getByTestId("detail-panel").waitFor();
      await page.keyboard.press("Escape");
      await page.getByTestId("detail-panel").waitFor({ state: "hidden" });
    });

    await t.test("light colour scheme", async () => {
      const light = await newPage("light");
      await light.goto(`${base}/?token=${TOKEN}`);
      await light.locator("[data-testid=bin-row]").first().waitFor();
      await light.getByTestId("search-input").fill("how deep to plant tomatoes");
      await light.getByTestId("search-input").press("Enter");
      await light.getByTestId("search-hit").first().waitFor();
      await light.waitForTimeout(400);
      await shot(light, "overview-light");
      await light.context().close();
    });

    // the page opened fresh in a scheme and a window size, the tomato question's results shown
    const withResults = async (scheme, viewport) => {
      const p = await newPage(scheme, viewport);
      await p.goto(`${base}/?token=${TOKEN}`);
      await p.locator('[data-testid=connection][data-state="live"]').waitFor();
      await p.getByTestId("search-input").fill("how deep to plant tomatoes");
      await p.getByTestId("search-input").press("Enter");
      await p.getByTestId("search-hit").first().waitFor();
      return p;
    };

    await t.test("accessibility: no serious or critical axe violations, results and the detail dialog, dark and light", async () => {
      for (const scheme of ["dark", "light"]) {
        const p = await withResults(scheme, { width: 1440, height: 900 });
        // the result count is announced
        await p.getByTestId("search-status").filter({ hasText: /^\d+ results? for “how deep to plant tomatoes”$/ }).waitFor({ state: "attached" });
        assert.equal(await p.getByTestId("search-status").getAttribute("aria-live"), "polite");
        // the chart says in words what it draws, the rate included
        const chartLabel = await p.getByTestId("throughput-chart").getAttribute("aria-label");
        assert.equal(await p.getByTestId("throughput-chart").getAttribute("role"), "img");
        assert.match(chartLabel, /^Throughput chart over the last .*tokens\/s now, peak /, chartLabel);
        assert.deepEqual(await axeViolations(p), [], `${scheme}, results shown`);

        // a keyboard reaches a hit: its ring is solid, 2 px or more, and 4.5:1 or more against the hit
        await p.getByTestId("search-input").focus();
        for (let i = 0; i < 12 && !(await p.evaluate(() => document.activeElement?.dataset.testid === "search-hit-file")); i++) await p.keyboard.press("Tab");
        const ring = await p.evaluate(() => {
          const hit = document.activeElement.closest("[data-testid=search-hit]");
          const st = getComputedStyle(hit);
          return { style: st.outlineStyle, width: parseFloat(st.outlineWidth), outline: st.outlineColor, background: st.backgroundColor, path: hit.dataset.path };
        });
        assert.equal(ring.style, "solid", JSON.stringify(ring));
        assert.ok(ring.width >= 2, JSON.stringify(ring));
        assert.ok(contrast(ring.outline, ring.background) >= 4.5, `focus ring ${ring.outline} on ${ring.background}: ${contrast(ring.outline, ring.background).toFixed(2)}:1`);
        await p.screenshot({ path: join(ARTIFACTS, `browser-focus-${scheme}.png`) });
        // and a queue row's ring, likewise
        await p.locator("[data-testid=file-row] [data-testid=file-open]").first().focus();
        await p.keyboard.press("Shift+Tab");
        await p.keyboard.press("Tab");
        const rowRing = await p.evaluate(() => {
          const st = getComputedStyle(document.activeElement.closest("[data-testid=file-row]"));
          return { style: st.outlineStyle, outline: st.outlineColor, background: st.backgroundColor };
        });
        assert.equal(rowRing.style, "solid", JSON.stringify(rowRing));
        assert.ok(contrast(rowRing.outline, rowRing.background) >= 4.5, JSON.stringify(rowRing));

        // Enter on the hit opens the detail: a modal dialog named by the document, the focus in it
        await p.locator(`[data-testid=search-hit][data-path="${ring.path}"] [data-testid=search-hit-file]`).focus();
        await p.keyboard.press("Enter");
        const panel = p.getByTestId("detail-panel");
        await panel.getByTestId("detail-chunk").first().waitFor();
        const dialog = await panel.evaluate((el) => ({
          tag: el.tagName,
          modal: el.matches(":modal"),
          role: el.getAttribute("role") ?? "dialog",
          name: document.getElementById(el.getAttribute("aria-labelledby"))?.textContent,
          focusInside: el.contains(document.activeElement),
        }));
        assert.deepEqual(dialog, { tag: "DIALOG", modal: true, role: "dialog", name: basename(ring.path), focusInside: true });
        await slidIn(p);
        assert.deepEqual(await axeViolations(p), [], `${scheme}, detail dialog open`);
        // Escape closes it and the focus goes back to the hit that opened it
        await p.keyboard.press("Escape");
        await panel.waitFor({ state: "hidden" });
        assert.equal(await p.evaluate(() => document.activeElement?.closest("[data-testid=search-hit]")?.dataset.path), ring.path);
        await p.context().close();
      }
    });

    await t.test("at 1024×700 search, the queue and the first hit share the window; the Engine panel folds and keeps the choice", async () => {
      for (const scheme of ["dark", "light"]) {
        const p = await withResults(scheme, { width: 1024, height: 700 });
        await p.locator("[data-testid=file-row]").first().waitFor();
        // the Engine panel starts folded on a window this size
        assert.equal(await p.getByTestId("engine-toggle").getAttribute("aria-expanded"), "false");
        assert.equal(await p.getByTestId("engine-body").isVisible(), false);
        await p.getByTestId("engine-brief").filter({ hasText: /tokens\/s now|idle/ }).waitFor();
        const inView = await p.evaluate(() => {
          const box = (sel) => document.querySelector(sel).getBoundingClientRect();
          const within = (r) => r.top >= 0 && r.left >= 0 && r.bottom <= innerHeight && r.right <= innerWidth && r.height > 0;
          return {
            search: within(box("[data-testid=search-input]")),
            queue: within(box("#queue-title")),
            queueRow: within(box("[data-testid=file-row] [data-testid=file-open]")),
            firstHit: within(box("[data-testid=search-hit] .hit-head")),
            engine: within(box("[data-testid=engine-toggle]")),
            overflow: document.documentElement.scrollWidth - innerWidth,
          };
        });
        assert.deepEqual(inView, { search: true, queue: true, queueRow: true, firstHit: true, engine: true, overflow: 0 });
        await shot(p, `1024x700${scheme === "light" ? "-light" : ""}`);
        if (scheme === "dark") {
          const toggle = p.getByTestId("engine-toggle");
          await toggle.click();
          assert.equal(await toggle.getAttribute("aria-expanded"), "true");
          await p.locator("[data-testid=bin-row]").first().waitFor();
          await p.locator("[data-testid=throughput-chart] canvas").waitFor();
          assert.equal(await p.evaluate(() => localStorage.getItem("warpfold.engine")), "open");
          await shot(p, "1024x700-engine", true);
          // the choice is kept
          await p.reload();
          await p.locator("[data-testid=bin-row]").first().waitFor();
          assert.equal(await toggle.getAttribute("aria-expanded"), "true");
          await toggle.click();
          assert.equal(await p.getByTestId("engine-body").isVisible(), false);
          await p.reload();
          await p.locator('[data-testid=connection][data-state="live"]').waitFor();
          assert.equal(await toggle.getAttribute("aria-expanded"), "false");
          assert.equal(await p.getByTestId("engine-body").isVisible(), false);
        }
        await p.context().close();
      }
    });

    await t.test("at 420 px nothing is wider than the window, the header is compact and names break between their parts", async () => {
      for (const scheme of ["dark", "light"]) {
        const p = await withResults(scheme, { width: 420, height: 860 });
        await p.locator("[data-testid=file-row]").first().waitFor();
        const measure = () =>
          p.evaluate(() => ({
            overflow: document.documentElement.scrollWidth - innerWidth,
            header: document.querySelector(".topbar").getBoundingClientRect().height,
            // a name that overflows its box is cut: none may be
            cut: [...document.querySelectorAll(".hit-file, .file-name, .fact-value")].filter((el) => el.offsetParent && el.scrollWidth > el.clientWidth + 1).map((el) => el.textContent),
          }));
        const folded = await measure();
        assert.equal(folded.overflow, 0, JSON.stringify(folded));
        assert.ok(folded.header <= 64, `the header is ${folded.header} px high`);
        assert.deepEqual(folded.cut, []);
        assert.equal(await p.getByTestId("topbar-facts").isVisible(), false);
        await shot(p, `420${scheme === "light" ? "-light" : ""}`);
        await shot(p, `420-full${scheme === "light" ? "-light" : ""}`, true);
        // the facts open under the bar, wrapped, cut nowhere
        await p.getByTestId("facts-toggle").click();
        assert.equal(await p.getByTestId("facts-toggle").getAttribute("aria-expanded"), "true");
        await p.getByTestId("model-name").waitFor();
        const open = await measure();
        assert.equal(open.overflow, 0, JSON.stringify(open));
        assert.deepEqual(open.cut, []);
        if (scheme === "dark") {
          await shot(p, "420-facts");
          await p.getByTestId("search-hit").first().click();
          const panel = p.getByTestId("detail-panel");
          await panel.getByTestId("detail-chunk").first().waitFor();
          await slidIn(p);
          const box = await panel.boundingBox();
          assert.ok(box.x >= 0 && box.x + box.width <= 420, JSON.stringify(box));
          assert.equal(await p.evaluate(() => document.documentElement.scrollWidth - innerWidth), 0);
          await shot(p, "420-detail");
          await p.keyboard.press("Escape");
        }
        await p.context().close();
      }
    });

    await t.test("indexing pauses and resumes from the queue; a document and a watched folder are re-indexed", async () => {
      const auth = { Authorization: `Bearer ${TOKEN}` };
      const paused = async () => (await (await fetch(`${base}/api/state`, { headers: auth })).json()).paused;
      const button = page.getByTestId("queue-pause");
      assert.equal((await button.textContent()).trim(), "Pause");
      await button.click();
      await page.locator("[data-testid=queue-pause]", { hasText: "Resume" }).waitFor();
      assert.equal(await page.getByTestId("queue-progress-label").getAttribute("data-state"), "paused-by-user");
      assert.equal(await paused(), true);
      await shot(page, "paused");
      await button.click();
      await page.locator("[data-testid=queue-pause]", { hasText: "Pause" }).waitFor();
      assert.equal(await paused(), false);
      // a document, from its detail panel: it goes through the queue again, to done
      const lettre = async () => (await (await fetch(`${base}/api/state`, { headers: auth })).json()).queue.files.find((f) => f.path.endsWith("/library/lettre.txt"));
      const before = await lettre();
      assert.equal(before.state, "done");
      await page.locator("[data-testid=file-row][data-path$='/library/lettre.txt'] [data-testid=file-open]").click();
      const panel = page.getByTestId("detail-panel");
      await panel.getByTestId("detail-chunk").first().waitFor();
      await panel.getByTestId("detail-reindex").click();
      await page.locator("[data-testid=toast]").filter({ hasText: "Re-indexing lettre.txt" }).waitFor();
      await page.keyboard.press("Escape");
      await panel.waitFor({ state: "hidden" });
      for (let now = await lettre(); !(now.state === "done" && now.updated_ms > before.updated_ms); now = await lettre()) await new Promise((r) => setTimeout(r, 200));
      // a watched folder: every document in it again, each read anew (the next test wants it quiet)
      const since = Date.now();
      await page.locator("[data-testid=folder][data-path$='/library'] [data-testid=folder-reindex]").click();
      const toast = page.locator("[data-testid=toast]").filter({ hasText: /^Re-indexing \d+ documents in .*library$/ });
      await toast.waitFor();
      const queued = Number(/Re-indexing (\d+)/.exec(await toast.textContent())[1]);
      assert.ok(queued >= notesFiles.length - 1, `${queued} of ${notesFiles.length} queued again`);
      const library = async () => (await (await fetch(`${base}/api/state`, { headers: auth })).json()).queue.files.filter((f) => f.path.includes("/library/"));
      const reread = (files) => files.filter((f) => f.updated_ms >= since && ["done", "no_text", "failed"].includes(f.state)).length;
      for (let files = await library(); reread(files) < queued; files = await library()) await new Promise((r) => setTimeout(r, 200));
      await page.waitForFunction(() => ["waiting", "extracting", "embedding"].every((s) => document.querySelector(`[data-testid=queue-${s}-count]`).textContent === "0"));
    });

    await t.test("a document and a watched folder's documents are removed from the index, leaving none of their text in it", async () => {
      const auth = { Authorization: `Bearer ${TOKEN}` };
      const indexFile = () => {
        const bytes = [readFileSync(join(tmp, "index.db"))];
        if (existsSync(join(tmp, "index.db-wal"))) bytes.push(readFileSync(join(tmp, "index.db-wal")));
        return Buffer.concat(bytes).toString("latin1").toLowerCase();
      };
      // one document, from its detail panel
      await page.getByTestId("search-input").fill("how deep to plant tomatoes");
      await page.getByTestId("search-input").press("Enter");
      const hit = page.locator("[data-testid=search-hit][data-path$='tomatoes.pdf']").first();
      await hit.waitFor();
      const tomatoes = await hit.getAttribute("data-path");
      await hit.click();
      await page.getByTestId("detail-forget").click();
      await page.getByTestId("confirm-forget").click();
      await page.getByTestId("detail-panel").waitFor({ state: "hidden" });
      await page.locator("[data-testid=search-hit][data-path$='tomatoes.pdf']").first().waitFor({ state: "detached" });
      const found = await (await fetch(`${base}/api/search?q=${encodeURIComponent("plant tomatoes")}&k=20`, { headers: auth })).json();
      assert.ok(!found.hits.some((h) => h.path === tomatoes), `${tomatoes} is still found`);
      // a watched folder, with its documents: the dialog asks, and the default answer removes them
      const before = await (await fetch(`${base}/api/state`, { headers: auth })).json();
      assert.ok(indexFile().includes("locatives"), "the French letter's words are in the index first");
      await page.locator("[data-testid=folder][data-path$='/library'] [data-testid=folder-remove]").click();
      await page.getByTestId("confirm-dialog").waitFor();
      await shot(page, "remove-folder");
      await page.getByTestId("confirm-forget").click();
      await page.locator("[data-testid=folder][data-path$='/library']").waitFor({ state: "detached" });
      // the list changes when watching stops; the documents are gone when the answer comes
      await page.locator("[data-testid=toast]").filter({ hasText: "its documents were removed" }).waitFor();
      const after = await (await fetch(`${base}/api/state`, { headers: auth })).json();
      assert.equal(after.documents, before.documents - notesFiles.length, `documents ${before.documents} -> ${after.documents}`);
      const left = indexFile();
      // words of the French letter in the removed folder ("gularisation": the ASCII end of "régularisation")
      for (const word of ["locatives", "gularisation"]) assert.ok(!left.includes(word), `"${word}" is still in the index file`);
    });

    await t.test("inside the app (a faked Tauri IPC) the same UI uses invoke, events and a Channel", async () => {
      const context = await newContext({ viewport: { width: 1280, height: 800 } });
      await context.addInitScript(fakeTauri);
      const app = await context.newPage();
      app.on("pageerror", (e) => pageErrors.push(String(e)));
      app.setDefaultTimeout(30_000);
      await app.goto(`${base}/`); // no token: the app needs none
      await app.locator("#app").waitFor({ state: "visible" });
      assert.equal(await app.getByTestId("token-screen").isVisible(), false);
      assert.equal((await app.getByTestId("model-name").textContent()).trim(), "fake-model");
      await app.locator('[data-testid=connection][data-state="live"]').waitFor();
      const calls = () => app.evaluate(() => window.__calls.map(([cmd]) => cmd));
      assert.ok((await calls()).includes("subscribe_samples"), "samples come on a Channel");
      // live: a queue event, a bin event and samples on the channel
      await app.evaluate(() => {
        window.__emit("queue", { path: "/docs/a.pdf", state: "embedding", error: null, chunks: null, pages: 3, updated_ms: Date.now() });
        window.__emit("bin", { id: 1, at_ms: Date.now(), capacity: 512, sequences: [200, 100], aligned: [208, 112], padding: 20, free: 192, fill: 0.625 });
        for (let i = 0; i < 3; i++) window.__sample({ t_ms: Date.now() + i * 500, tokens_per_s: 1000 + i, computed_per_s: 1100, padded_equivalent_per_s: 2000, bins_per_s: 2, queue_depth: 1, memory_used_bytes: null });
      });
      await app.locator('[data-testid=file-row][data-path="/docs/a.pdf"][data-state="embedding"]').waitFor();
      await app.locator("[data-testid=bin-row]").first().waitFor();
      await app.waitForFunction(() => Number(document.querySelector("[data-testid=throughput-chart]").dataset.points) >= 3);
      // a drop in the webview arrives as paths and goes to add_paths
      await app.evaluate(() => window.__emit("tauri://drag-drop", { paths: ["/docs/b.pdf"], position: { x: 1, y: 1 } }));
      await app.waitForFunction(() => window.__calls.some(([cmd, args]) => cmd === "add_paths" && args.paths[0] === "/docs/b.pdf"));
      // search goes through invoke
      await app.getByTestId("search-input").fill("tomatoes");
      await app.getByTestId("search-input").press("Enter");
      await app.getByTestId("search-hit").first().waitFor();
      // a summary with what its check against the document removed
      await app.getByTestId("search-hit").first().click();
      const panel = app.getByTestId("detail-panel");
      await panel.getByTestId("detail-summary").waitFor();
      const check = panel.getByTestId("summary-check");
      assert.equal(await check.getAttribute("data-check"), "removed");
      // the lines quoted from the document stand apart from what the model wrote
      assert.doesNotMatch(await panel.getByTestId("detail-summary").textContent(), /From the document|three months/);
      const quoted = panel.getByTestId("summary-key-lines").locator("li");
      assert.equal(await quoted.count(), 2);
      assert.equal(await quoted.first().textContent(), "Either party may end the tenancy by giving three months' notice.");
      await check.locator("summary").click();
      assert.match(await panel.getByTestId("summary-removed").first().textContent(), /2,900 euros per month.*not in the document: 2,900 euros per month/s);
      await app.waitForTimeout(300);
      await shot(app, "summary-check");
      await app.keyboard.press("Escape");
      // a summary the model wrote in English for a Russian document says so
      await app.getByTestId("search-input").fill("ls");
      await app.getByTestId("search-input").press("Enter");
      await app.locator('[data-testid=search-hit][data-path="/docs/ls.ru.txt"]').click();
      await panel.getByTestId("summary-language").waitFor();
      assert.match(await panel.getByTestId("summary-language").textContent(), /Written in English: the summarizing model did not write Russian/);
      assert.equal(await panel.getByTestId("summary-check").getAttribute("data-check"), "ok");
      await app.waitForTimeout(300);
      await shot(app, "summary-language");
      await app.keyboard.press("Escape");
      // asking goes through the ask command and its channel; a follow-up carries the turn before it
      await app.getByTestId("search-input").fill("How much is the deposit?");
      await app.getByTestId("ask-button").click();
      await app.getByTestId("answer-text").first().waitFor();
      assert.match(await app.getByTestId("answer-text").first().textContent(), /2,900 euros/);
      await app.getByTestId("search-input").fill("When is it due?");
      await app.getByTestId("search-input").press("Control+Enter");
      await app.getByTestId("answer-text").nth(1).waitFor();
      const asks = await app.evaluate(() => window.__calls.filter(([cmd]) => cmd === "ask").map(([, a]) => a.earlier));
      assert.deepEqual(asks, [[], [{ question: "How much is the deposit?", answer: "The deposit is 2,900 euros, paid once [1]." }]]);
      await app.getByTestId("answer-source").nth(1).click();
      await app.getByTestId("detail-panel").getByTestId("detail-name").waitFor();
      assert.equal((await app.getByTestId("detail-name").textContent()).trim(), "lease.pdf");
      await app.keyboard.press("Escape");
      // a rejected command shows its {kind, message}
      await app.getByTestId("folder-input").fill("/etc");
      await app.getByTestId("folder-add").click();
      const err = app.locator("[data-testid=toast][data-kind=error]").first();
      await err.waitFor();
      assert.match(await err.textContent(), /Path not allowed.*not chosen/s);
      await context.close();
    });

    await t.test("the queue shows documents/s and the time left from its events; padding saved only where there was some", async () => {
      const context = await newContext({ viewport: { width: 1280, height: 800 } });
      await context.addInitScript(fakeTauri);
      const app = await context.newPage();
      app.on("pageerror", (e) => pageErrors.push(String(e)));
      app.setDefaultTimeout(30_000);
      await app.goto(`${base}/`);
      await app.locator('[data-testid=connection][data-state="live"]').waitFor();
      // twelve documents queued 20 s ago, six finished since, one now embedding: 6 in 20 s
      await app.evaluate(() => {
        const t0 = Date.now() - 20_000;
        const file = (i, state, at) => ({ path: `/docs/pace-${i}.pdf`, state, error: null, chunks: null, pages: 1, updated_ms: at });
        for (let i = 0; i < 12; i++) window.__emit("queue", file(i, "waiting", t0));
        for (let i = 0; i < 6; i++) window.__emit("queue", file(i, "done", t0 + 2000 * (i + 1)));
        window.__emit("queue", file(6, "embedding", Date.now()));
      });
      const pace = app.getByTestId("queue-pace");
      await pace.getByTestId("queue-eta").waitFor();
      const rate = Number(await pace.getAttribute("data-rate"));
      assert.ok(rate > 0.2 && rate <= 0.31, `6 documents in about 20 s: ${rate}/s`);
      assert.match(await pace.getByTestId("queue-rate").textContent(), /^1\d documents\/min$/);
      const left = Number(await pace.getByTestId("queue-eta").getAttribute("data-seconds"));
      assert.ok(left >= 15 && left <= 35, `6 left at ${rate}/s: ${left} s`);
      assert.match(await pace.getByTestId("queue-eta").textContent(), /^about \d+ s left$/);
      // all done: no pace, no time left
      await app.evaluate(() => {
        for (let i = 6; i < 12; i++) window.__emit("queue", { path: `/docs/pace-${i}.pdf`, state: "done", error: null, chunks: 2, pages: 1, updated_ms: Date.now() });
      });
      await pace.waitFor({ state: "hidden" });
      // sequences that padded batching would not have cost more: no "padding saved"
      const sample = (i, real, padded) => ({ t_ms: Date.now() + i * 500, tokens_per_s: real, computed_per_s: real * 1.05, padded_equivalent_per_s: padded, bins_per_s: 1, queue_depth: 0, memory_used_bytes: null });
      await app.evaluate((xs) => xs.forEach((x) => window.__sample(x)), [0, 1, 2, 3].map((i) => sample(i, 1000, 1000)));
      await app.waitForFunction(() => Number(document.querySelector("[data-testid=throughput-chart]").dataset.points) >= 4);
      await app.getByTestId("stat-tokens").filter({ hasText: "1k" }).waitFor();
      assert.equal(await app.getByTestId("stat-saving").count(), 0);
      assert.match(await app.getByTestId("throughput-chart").getAttribute("aria-label"), /1k real tokens\/s now/);
      await app.evaluate((xs) => xs.forEach((x) => window.__sample(x)), [4, 5, 6, 7].map((i) => sample(i, 1000, 3000)));
      await app.getByTestId("stat-saving").filter({ hasText: "3.0×" }).waitFor();
      // pause, resume and re-index go through the app's commands; the paused event is followed
      await app.getByTestId("queue-pause").click();
      await app.locator("[data-testid=queue-pause]", { hasText: "Resume" }).waitFor();
      await app.evaluate(() => window.__emit("paused", false));
      await app.locator("[data-testid=queue-pause]", { hasText: "Pause" }).waitFor();
      await app.getByTestId("file-row").first().click();
      await app.getByTestId("detail-reindex").click();
      await app.waitForFunction(() => window.__calls.some(([cmd, args]) => cmd === "reindex" && args.path.startsWith("/docs/pace-")));
      assert.ok((await app.evaluate(() => window.__calls.map(([cmd]) => cmd))).includes("pause"));
      await context.close();
    });

    await t.test("after the server stops, a program that takes its port and cannot prove the token gets no credentials", async () => {
      server.child.kill("SIGTERM");
      await new Promise((r) => (server.child.exitCode !== null || server.child.signalCode !== null ? r() : server.child.once("exit", r)));
      const seen = [];
      const impostor = createHttpServer((req, res) => {
        seen.push({ url: req.url, cookie: req.headers.cookie ?? "", authorization: req.headers.authorization ?? "" });
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end(req.url.startsWith("/api/hello") ? JSON.stringify({ server: "warpfold", proof: "00".repeat(32) }) : "{}");
      });
      await new Promise((r) => impostor.listen(port, "127.0.0.1", r));
      try {
        await page.getByTestId("token-screen").waitFor({ state: "visible" });
        assert.match(await page.getByTestId("token-reason").textContent(), /could not prove it holds the token/);
        assert.ok(seen.some((r) => r.url.startsWith("/api/hello")), `the page asked for the proof: ${JSON.stringify(seen)}`);
        const leaked = seen.filter((r) => r.cookie.includes("warpfold_session") || r.authorization);
        assert.deepEqual(leaked, [], "nothing credentialed went to the impostor");
        await shot(page, "untrusted");
      } finally {
        await new Promise((r) => impostor.close(r));
      }
    });

    assert.deepEqual(pageErrors, [], "no script errors in the page");
  } finally {
    await browser?.close().catch(() => undefined);
    server.child.kill("SIGTERM");
    await new Promise((r) => (server.child.exitCode !== null || server.child.signalCode !== null ? r() : server.child.once("exit", r)));
    rmSync(tmp, { recursive: true, force: true });
  }
});

/** Stands in for Tauri's `window.__TAURI_INTERNALS__` (runs in the page before the UI's script). */
function fakeTauri() {
  const callbacks = new Map();
  const listeners = new Map(); // event name -> [handler ids]
  let next = 1;
  let channel = null;
  let sampleIndex = 0;
  window.__calls = [];
  window.__emit = (event, payload) => {
    for (const id of listeners.get(event) ?? []) callbacks.get(id)?.({ event, id, payload });
  };
  window.__sample = (s) => callbacks.get(channel)?.({ index: sampleIndex++, message: s });
  const state = {
    model: "fake-model",
    device: { name: "Fake GPU", kind: "cuda", bin_tokens: 512, probe: null, memory_total_bytes: 8 << 30, memory_used_bytes: 1 << 30 },
    folders: [],
    queue: { counts: { waiting: 0, extracting: 0, embedding: 0, done: 0, failed: 0, no_text: 0, skipped: 0 }, files: [] },
    bins: [],
    samples: [],
  };
  window.__TAURI_INTERNALS__ = {
    metadata: { currentWindow: { label: "main" }, currentWebview: { windowLabel: "main", label: "main" } },
    transformCallback(cb) {
      const id = next++;
      callbacks.set(id, cb);
      return id;
    },
    unregisterCallback(id) {
      callbacks.delete(id);
    },
    async invoke(cmd, args) {
      window.__calls.push([cmd, args]);
      switch (cmd) {
        case "plugin:event|listen":
          listeners.set(args.event, [...(listeners.get(args.event) ?? []), args.handler]);
          return args.handler;
        case "plugin:event|unlisten":
          return null;
        case "state":
          return state;
        case "subscribe_samples":
          channel = args.channel.id;
          return null;
        case "add_paths":
          return { queued: args.paths.length };
        case "pause":
          return { paused: true };
        case "resume":
          return { paused: false };
        case "reindex":
          return { queued: 1 };
        case "document":
          // a Russian page the model summarized in English, though asked for Russian
          if (args.path.endsWith("/ls.ru.txt"))
            return {
              path: args.path,
              state: null,
              detail: { path: args.path, status: "indexed", error: null, pages: 1, size: 10063, chunks: [{ ordinal: 0, page: 1, text: "Выводит информацию о ФАЙЛАХ (текущий каталог по умолчанию)." }] },
              summary: "The ls command lists the files of a directory, the current one by default, sorted by name.",
              summary_check: { checked: true, rewritten: false, removed: [], english_instead_of: "Russian" },
              summary_state: "ready",
            };
          return {
            path: args.path,
            state: null,
            detail: { path: args.path, status: "indexed", error: null, pages: 2, size: 48213, chunks: [{ ordinal: 0, page: 1, text: "The tenant pays a one-time security deposit of 2,900 euros. The monthly rent is 1,450 euros." }] },
            summary: "A lease of a flat in Lyon from 1 April 2026. The tenant pays 1,450 euros a month and a one-time deposit of 2,900 euros.\n\nFrom the document:\n- Either party may end the tenancy by giving three months' notice.\n- Minor repairs costing less than 150 euros are the responsibility of the Tenant.",
            summary_check: { checked: true, rewritten: true, removed: [{ sentence: "The landlord must pay a security deposit of 2,900 euros per month.", items: ["2,900 euros per month"] }] },
            summary_state: "ready",
          };
        case "search":
          if (args.query === "ls") return { hits: [{ path: "/docs/ls.ru.txt", page: 1, score: 0.03, text: "Выводит информацию о ФАЙЛАХ", chunk: "" }] };
          return { hits: [{ path: "/docs/tomatoes.pdf", page: 1, score: 0.03, text: `about ${args.query}`, chunk: "" }] };
        case "ask": {
          // the passages at once, then the answer, on the command's channel
          let index = 0;
          const send = (message) => callbacks.get(args.channel.id)?.({ index: index++, message });
          const passage = { n: 1, path: "/docs/lease.pdf", page: 2, snippet: "a one-time security deposit of 2,900 euros" };
          setTimeout(() => send({ event: "passages", passages: [passage] }), 50);
          setTimeout(() => send({ event: "status", status: "reading 1 passages with fake-chat" }), 100);
          const answer = args.earlier.length ? "It is due on 15 March 2026 [1]." : "The deposit is 2,900 euros, paid once [1].";
          const citation = { n: 1, path: passage.path, page: 2, text: "The tenant pays a one-time security deposit of 2,900 euros." };
          setTimeout(() => send({ event: "answer", answer, citations: [citation], answerable: true, removed: [], model: "fake-chat", first_token_seconds: 0.1, seconds: 0.2 }), 400);
          return null;
        }
        case "add_folder":
          throw { kind: "path_not_allowed", message: `${args.path} was not chosen` };
        default:
          throw { kind: "not_found", message: `no command ${cmd}` };
      }
    },
  };
}

/** Writes `n` plain-text documents of 60 to ~1,500 words (a fixed seed: the same files every run). */
function writeLibrary(dir, n) {
  let seed = 7;
  const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  const topics = {
    orchard: ["Apple trees want a sunny slope and deep, well-drained soil.", "Prune in late winter while the buds are still closed.", "Thin the fruitlets in June so the remaining apples size up.", "A grease band on the trunk stops winter moths climbing up to lay eggs.", "Pears ripen best off the tree, picked when the stalk parts with a gentle lift."],
    tides: ["Tides follow the moon, two highs and two lows a little over a day apart.", "Spring tides come with the full and new moon, when sun and moon pull together.", "Neap tides are the gentle ones, at the quarter moons.", "A harbour's tide table is worked out from decades of measured heights.", "Wind and air pressure can push the sea a hand's width above the prediction."],
    bread: ["A sourdough starter is flour and water kept alive by wild yeast.", "Feed it twice a day and it doubles within hours.", "Long, cool proofing deepens the flavour of the crumb.", "Steam in the first minutes of baking lets the loaf spring before the crust sets.", "Let the bread cool fully before slicing, or the crumb turns gummy."],
    bicycles: ["Check tyre pressure every week; a soft tyre wears fast and rolls slowly.", "A chain wants a drop of oil on each roller, then the excess wiped away.", "Brake pads wear to their grooves; replace them before metal touches the rim.", "Index gears by turning the barrel adjuster a quarter turn at a time.", "A true wheel spins without wobble past the brake pads."],
    weather: ["Cumulus clouds on a summer morning often build into afternoon showers.", "A falling barometer warns of wind and rain within a day.", "Dew forms on clear, still nights when the ground cools below the dew point.", "Sea breezes start as the land warms faster than the water.", "A halo round the moon comes from ice crystals high in thin cloud."],
    rivers: ["Rivers carve their valleys over thousands of years of floods.", "Meanders grow as the outer bank erodes and the inner bank gathers gravel.", "Oxbow lakes are old bends the river has cut off.", "A delta forms where a river slows and drops its silt into the sea.", "Salmon return up the river they hatched in, guided by its smell."],
  };
  const names = Object.keys(topics);
  for (let i = 0; i < n; i++) {
    const topic = names[i % names.length];
    const words = 60 + Math.floor(rand() ** 2 * 1400);
    const out = [`${topic[0].toUpperCase()}${topic.slice(1)} notes, part ${Math.floor(i / names.length) + 1}.`];
    let count = 0;
    while (count < words) {
      const pool = rand() < 0.8 ? topics[topic] : topics[names[Math.floor(rand() * names.length)]];
      const sentence = pool[Math.floor(rand() * pool.length)];
      out.push(rand() < 0.15 ? "\n\n" + sentence : sentence);
      count += sentence.split(" ").length;
    }
    writeFileSync(join(dir, `${topic}-${String(i + 1).padStart(2, "0")}.txt`), out.join(" ") + "\n");
  }
}
