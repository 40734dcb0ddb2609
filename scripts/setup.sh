#!/usr/bin/env bash
# The main job from a fresh Debian machine with Rust: install system packages, build warpfold, fetch
# and verify the default model, generate the bundled sample documents (PDFs, Markdown, text),
# index them into a local search database, run an example search, summarize them with the default
# chat model (stored in the index), embed the sample texts and run a short packed-against-padded benchmark;
# then say how to open the app.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
# An NVIDIA GPU with a CUDA toolkit: the GPU build (FlashAttention-2 on compute capability 8.0+) in
# target/gpu, and the main job on the GPU; otherwise the CPU build (scripts/gpu/plan.sh says why).
build_app warpfold warpfold
wf=$app
if [ -n "$WARPFOLD_FEATURES" ]; then
  export WARPFOLD_DEVICE=${WARPFOLD_DEVICE:-auto}
fi
$wf models fetch
mkdir -p target/out
rm -rf target/out/samples
$wf make-samples target/out/samples
$wf index target/out/samples --db target/out/samples.db
$wf search "when should I pick tomatoes so they ripen indoors" --db target/out/samples.db -k 3
$wf search "what did the mooring rope cost" --db target/out/samples.db -k 1   # the scanned receipt, read by OCR
$wf summarize target/out/samples --db target/out/samples.db
$wf embed < tests/data/samples.jsonl > target/out/samples.embeddings.jsonl
echo "embeddings of $(wc -l < tests/data/samples.jsonl) sample texts: target/out/samples.embeddings.jsonl"
$wf bench --corpus stress --documents 16 --packer-sequences 1000000 --out target/out/bench-quick.json
echo
echo "warpfold is set up. Open the app:"
echo "  bash scripts/desktop.sh       # the desktop app"
echo "  $wf serve    # the same app in a browser: open the address it prints"
