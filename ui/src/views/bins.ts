// The recent bins, newest on top: each a bar of its capacity, split into its sequences (alternating
// colours), each sequence's alignment padding (hatched) and the free space left at the end.

import { $, h, replace } from "../dom";
import { grouped, percent } from "../format";
import { store } from "../store";
import type { BinView } from "../types";

const SHOWN = 64;

export function mountBins(): void {
  store.on("bins", draw);
}

function draw() {
  const bins = store.bins.slice(-SHOWN).reverse();
  const list = $("bins");
  if (!bins.length) {
    replace(list, h("li", { class: "empty" }, "No bins yet. Each batch the engine runs appears here as a bar, packed first-fit-decreasing."));
    $("bins-sub").textContent = "";
    return;
  }
  let real = 0;
  let pad = 0;
  let cap = 0;
  let seqs = 0;
  for (const b of store.bins) {
    real += sum(b.sequences);
    pad += b.padding;
    cap += b.capacity;
    seqs += b.sequences.length;
  }
  const caps = new Set(store.bins.map((b) => b.capacity));
  const capText = caps.size === 1 ? `capacity ${grouped(bins[0].capacity)} tokens` : `capacity ${[...caps].map(grouped).join(" / ")} tokens`;
  $("bins-sub").textContent = `${capText} · avg fill ${percent((real + pad) / cap)} · padding ${percent(pad / Math.max(1, real + pad), 1)} · ${(seqs / store.bins.length).toFixed(1)} seq/bin`;
  replace(list, bins.map(row));
}

function sum(xs: number[]): number {
  return xs.reduce((a, b) => a + b, 0);
}

function seg(cls: string, tokens: number, capacity: number, title: string): HTMLElement {
  const el = h("span", { class: `seg ${cls}`, title });
  el.style.width = `${(tokens / capacity) * 100}%`;
  return el;
}

function row(b: BinView): HTMLElement {
  const bar = h("span", { class: "bin-bar" });
  b.sequences.forEach((len, i) => {
    const aligned = b.aligned?.[i] ?? len;
    bar.appendChild(seg(i % 2 ? "seq-b" : "seq-a", len, b.capacity, `sequence ${i + 1}: ${grouped(len)} tokens`));
    if (aligned > len) bar.appendChild(seg("pad", aligned - len, b.capacity, `alignment padding: ${grouped(aligned - len)} tokens`));
  });
  if (b.free > 0) bar.appendChild(seg("free", b.free, b.capacity, `free: ${grouped(b.free)} tokens`));
  const real = sum(b.sequences);
  return h(
    "li",
    {
      class: "bin",
      "data-testid": "bin-row",
      "data-id": b.id,
      title: `bin ${b.id}: ${grouped(real)} real tokens, ${grouped(b.padding)} padding, ${grouped(b.free)} free of ${grouped(b.capacity)}`,
    },
    h("span", { class: "bin-id" }, `#${b.id}`),
    bar,
    h("span", { class: "bin-fill", "data-testid": "bin-fill" }, percent(b.fill)),
    h("span", { class: "bin-seqs" }, `${b.sequences.length} seq`),
  );
}
