// The Engine panel: throughput over time (uPlot): real tokens/s against the tokens the device
// computed and what padded batches of the same sequences would have cost; bins/s, queue depth and
// memory as numbers. The panel folds away (closed by default on a small window, the choice kept),
// with a one-line brief in its head; the chart carries a text alternative that follows the rate.

import uPlot from "uplot";
import { $, h, replace } from "../dom";
import { bytes, compact, grouped, rate } from "../format";
import { store } from "../store";
import type { Sample } from "../types";

let plot: uPlot | null = null;

const SERIES = [
  { key: "tokens_per_s", label: "real tokens/s", color: "--c-real" },
  { key: "computed_per_s", label: "computed/s", color: "--c-computed" },
  { key: "padded_equivalent_per_s", label: "padded-equivalent/s", color: "--c-padded" },
] as const;

function css(name: string): string {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || "#888";
}

/** Smoothed over the last few samples, so the numbers do not flicker every 500 ms. */
function recent(key: keyof Sample, n = 4): number {
  const xs = store.samples.slice(-n);
  if (!xs.length) return 0;
  return xs.reduce((a, s) => a + ((s[key] as number) || 0), 0) / xs.length;
}

function stat(label: string, value: string, unit: string, testid: string, color?: string, hint?: string): HTMLElement {
  const dot = color ? h("i", { class: "stat-dot" }) : null;
  if (dot && color) dot.style.background = css(color);
  return h(
    "div",
    { class: "stat", title: hint ?? "" },
    h("div", { class: "stat-value", "data-testid": testid }, value, unit ? h("span", { class: "stat-unit" }, unit) : null),
    h("div", { class: "stat-label" }, dot, label),
  );
}

const ENGINE_KEY = "warpfold.engine";

/** Whether the Engine panel starts open: as last chosen, else only on a window with room for it. */
function engineOpenAtStart(): boolean {
  let kept: string | null = null;
  try {
    kept = localStorage.getItem(ENGINE_KEY);
  } catch {
    // storage refused (a private window): decide by the window
  }
  if (kept === "open" || kept === "closed") return kept === "open";
  return window.innerWidth >= 1200 && window.innerHeight >= 760;
}

function mountEngineToggle(): void {
  const toggle = $("engine-toggle");
  const body = $("engine-body");
  const show = (open: boolean) => {
    toggle.setAttribute("aria-expanded", String(open));
    body.hidden = !open;
    toggle.closest(".engine-card")!.classList.toggle("open", open);
  };
  show(engineOpenAtStart());
  toggle.addEventListener("click", () => {
    const open = toggle.getAttribute("aria-expanded") !== "true";
    show(open);
    try {
      localStorage.setItem(ENGINE_KEY, open ? "open" : "closed");
    } catch {
      // not kept: it opens as the window decides next time
    }
    if (open) draw();
  });
}

export function mountThroughput(): void {
  mountEngineToggle();
  store.on("samples", draw);
  store.on("device", draw);
  const el = $("throughput-chart");
  new ResizeObserver(() => {
    if (plot) plot.setSize(size(el));
  }).observe(el);
  window.matchMedia("(prefers-color-scheme: light)").addEventListener("change", () => {
    plot?.destroy();
    plot = null;
    draw();
  });
}

function size(el: HTMLElement) {
  return { width: Math.max(200, el.clientWidth), height: Math.max(160, el.clientHeight) };
}

/** The chart in words, for those who do not see it: the span, the rates now and the peak. */
function describe(span: number, real: number, computed: number, padded: number): string {
  if (!store.samples.some((s) => s.tokens_per_s > 0 || s.computed_per_s > 0)) return "Throughput chart: no work yet.";
  const peak = Math.max(...store.samples.map((s) => s.tokens_per_s));
  const over = span >= 90 ? `${Math.round(span / 60)} minutes` : `${Math.max(1, Math.round(span))} seconds`;
  return `Throughput chart over the last ${over}: ${rate(real, "real tokens/s")} now, peak ${rate(peak, "real tokens/s")}; the device computed ${rate(computed, "tokens/s")}; padded batches would compute ${rate(padded, "tokens/s")}.`;
}

function draw() {
  const samples = store.samples;
  const real = recent("tokens_per_s");
  const computed = recent("computed_per_s");
  const padded = recent("padded_equivalent_per_s");
  const last = samples[samples.length - 1];
  // what padded batches would have cost more: a tile only when there was something to save
  const saved = real > 0 && padded > 0 ? padded / real : 0;
  replace(
    $("throughput-stats"),
    stat("real tokens", compact(real), "tok/s", "stat-tokens", "--c-real", "real tokens embedded per second"),
    stat("computed", compact(computed), "tok/s", "stat-computed", "--c-computed", "tokens the device computed, alignment padding included"),
    stat("if padded", compact(padded), "tok/s", "stat-padded", "--c-padded", "what padded batches of the same sequences would have computed"),
    stat("bins", compact(recent("bins_per_s")), "/s", "stat-bins", undefined, "bins run per second"),
    stat("queue depth", last ? compact(last.queue_depth) : "0", "", "stat-queue", undefined, "sequences waiting for the engine"),
    saved >= 1.05
      ? stat("padding saved", `${saved.toFixed(saved >= 10 ? 0 : 1)}×`, "", "stat-saving", undefined, "padded-equivalent ÷ real tokens: how much more a padded batcher would compute for the same sequences")
      : null,
  );
  const d = store.device;
  const span = samples.length > 1 ? (samples[samples.length - 1].t_ms - samples[0].t_ms) / 1000 : 0;
  const parts = [];
  if (span >= 1) parts.push(`last ${span >= 90 ? `${Math.round(span / 60)} min` : `${Math.round(span)} s`}`);
  if (d?.memory_total_bytes) parts.push(`${bytes(d.memory_used_bytes)} of ${bytes(d.memory_total_bytes)} device memory in use`);
  else if (d?.memory_used_bytes) parts.push(`${bytes(d.memory_used_bytes)} device memory in use`);
  $("throughput-sub").textContent = parts.join(" · ");

  // the head of the panel says in a line what the engine does, read while it is folded away too
  const brief = [real > 0 ? `${rate(real, "tokens/s")} now` : "idle"];
  if (d) brief.push(`${grouped(d.bin_tokens)}-token bins on ${d.name || (d.kind || "").toUpperCase() || "the device"}`);
  if (d?.memory_total_bytes) brief.push(`${bytes(d.memory_used_bytes)} of ${bytes(d.memory_total_bytes)} memory`);
  $("engine-brief").textContent = brief.join(" · ");

  const el = $("throughput-chart");
  el.dataset.points = String(samples.length);
  const empty = el.querySelector(".chart-empty") as HTMLElement | null;
  const anyWork = samples.some((s) => s.tokens_per_s > 0 || s.computed_per_s > 0);
  if (empty) empty.hidden = anyWork;
  el.classList.toggle("has-data", samples.length > 0);
  el.setAttribute("aria-label", describe(span, real, computed, padded));

  const data: uPlot.AlignedData = [
    samples.map((s) => s.t_ms / 1000),
    samples.map((s) => s.tokens_per_s),
    samples.map((s) => s.computed_per_s),
    samples.map((s) => s.padded_equivalent_per_s),
  ];
  if (!samples.length) return;
  if (!plot) {
    const grid = css("--grid");
    const text = css("--muted");
    const axis: uPlot.Axis = {
      stroke: text,
      grid: { stroke: grid, width: 1 },
      ticks: { stroke: grid, width: 1 },
      font: "11px system-ui, sans-serif",
    };
    plot = new uPlot(
      {
        ...size(el),
        cursor: { drag: { x: false, y: false }, points: { size: 6 } },
        legend: { show: false }, // the stat tiles above carry the colours and the values
        scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, Math.max(10, max * 1.1)] } },
        axes: [
          {
            ...axis,
            space: 84,
            incrs: [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600],
            values: (_u, splits) => splits.map((v) => new Date(v * 1000).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" })),
          },
          { ...axis, size: 56, values: (_u, vals) => vals.map((v) => compact(v)) },
        ],
        series: [
          { value: (_u, v) => (v === null ? "–" : new Date(v * 1000).toLocaleTimeString()) },
          ...SERIES.map((s, i) => ({
            label: s.label,
            stroke: css(s.color),
            width: i === 0 ? 2.25 : 1.5,
            dash: i === 2 ? [6, 4] : undefined,
            fill: i === 0 ? css("--c-real-fill") : undefined,
            points: { show: false },
            value: (_u: uPlot, v: number | null) => (v === null ? "–" : rate(v)),
          })),
        ],
      },
      data,
      el,
    );
  } else {
    plot.setData(data);
  }
}
