// Builds dist/: index.html, app.js (src/main.ts bundled with uPlot and @tauri-apps/api) and app.css
// (style.css with uPlot's CSS). The Rust side embeds exactly these three files.
import { build, context } from "esbuild";
import { copyFileSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const dist = join(root, "dist");
const watch = process.argv.includes("--watch");

rmSync(dist, { recursive: true, force: true });
mkdirSync(dist, { recursive: true });
copyFileSync(join(root, "index.html"), join(dist, "index.html"));

const options = {
  absWorkingDir: root,
  entryPoints: { app: "src/main.ts" },
  outdir: "dist",
  bundle: true,
  format: "iife",
  target: ["es2021", "chrome105", "safari15"],
  minify: !watch,
  sourcemap: false,
  legalComments: "none",
  logLevel: "info",
};

if (watch) {
  const ctx = await context(options);
  await ctx.watch();
} else {
  await build(options);
  const files = readdirSync(dist).sort();
  const want = ["app.css", "app.js", "index.html"];
  if (JSON.stringify(files) !== JSON.stringify(want)) {
    console.error(`dist/ holds ${files.join(", ")}; expected exactly ${want.join(", ")}`);
    process.exit(1);
  }
}
