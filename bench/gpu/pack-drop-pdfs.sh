#!/usr/bin/env bash
# Issue 15 item 5: what the end-to-end run on the GPU machine (bench/gpu/run-drop-pdfs.sh) needs,
# packed into one stream of parts (bench/gpu/stream.sh) to carry over consecutive calls, small files
# first so that the first parts set up and check everything but the chat model:
#   run-on-gpu-machine.sh, the peer's wheels (gguf, pypdf: bench/gpu/fetch-peer-wheels.sh), the three
#   documents of tests/summary_quality.rs as .txt (kd/), the 200 PDFs (pdfs/: examples/summary_settings
#   --pdf with the words of bench/gpu/e2e-words.txt), all-MiniLM-L6-v2 in f16 with its
#   sentence-transformers files (ours and the peer's embedder), the CUDA binary (.gpu/warpfold.xz from
#   scripts/gpu/build-cuda.sh: build it first), and last the 1.1 GB Qwen2.5-Coder-1.5B-Instruct GGUF
#   (`./target/release/warpfold models fetch Qwen2.5-Coder-1.5B-Instruct`).
#
# The 200 PDFs: document i has pages_i = 1 + floor(29 u_i^3) pages of about 290 words, u_i = frac((i+1)
# x 0.6180339887498949) (most documents short: median 4 pages, 64 of one page, up to 29), i.e.
# bench/gpu/e2e-words.txt = 290 x pages_i, made by
#   python3 -c "g=0.6180339887498949; print(','.join(str(290*(1+int(29*(((i+1)*g)%1.0)**3))) for i in range(200)))"
# Topics and key facts: tests/known_documents (document i is topic i mod 3, seed 100 + i).
set -euo pipefail
cd "$(dirname "$0")/../.."
Q=models/Qwen2.5-Coder-1.5B-Instruct/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
G=${GPU_DIR:-.gpu}   # where build-cuda.sh put the binary (another folder only to try this script out)
for f in $G/warpfold.xz $G/run-on-gpu-machine.sh "$Q" models/all-MiniLM-L6-v2/model.safetensors; do
  [ -f "$f" ] || { echo "pack-drop-pdfs: $f is missing (scripts/gpu/build-cuda.sh; ./target/release/warpfold models fetch [Qwen2.5-Coder-1.5B-Instruct])" >&2; exit 1; }
done
dir=.gpu-extra/drop-pdfs
rm -rf "$dir" && mkdir -p "$dir"
cp $G/warpfold.xz $G/run-on-gpu-machine.sh "$dir/"
ln "$Q" "$dir/" 2>/dev/null || cp "$Q" "$dir/"
# The other default chat model (the quality documents' loop check on the GPU for both), the gated GPU
# tests (scripts/gpu/build-cuda-tests.sh: the paged decode against a full forward, the row scatter),
# and, for the decode A/B in one run, the binary of the commit before the paged cache
# (OLD=path/to/warpfold.xz, built from 0b2f880 by scripts/gpu/build-cuda.sh in a worktree).
S=models/SmolLM2-135M-Instruct/SmolLM2-135M-Instruct.Q4_1.gguf
ln "$S" "$dir/" 2>/dev/null || cp "$S" "$dir/"
[ -f $G/candle-tests.xz ] && cp $G/candle-tests.xz "$dir/"
[ -n "${OLD:-}" ] && cp "$OLD" "$dir/warpfold-old.xz"
ex=target/release/examples/summary_settings
cargo build --release --locked -p warpfold-summarize --example summary_settings
$ex --seeds 7,101,9 --words 250,450,950 --write "$dir/kd"
$ex --words "$(cat bench/gpu/e2e-words.txt)" --write "$dir/pdfs" --pdf --model "$Q" | tail -1
bash bench/gpu/fetch-peer-wheels.sh "$dir/wheels"
stage=$(mktemp -d) && cp -r models/all-MiniLM-L6-v2 "$stage/" && rm "$stage/all-MiniLM-L6-v2/model.safetensors"
python3 bench/gpu/to_f16.py models/all-MiniLM-L6-v2/model.safetensors "$stage/all-MiniLM-L6-v2/model.safetensors"
tar -C "$stage" -cf - all-MiniLM-L6-v2 | xz -T2 -6 > "$dir/minilm-f16.tar.xz" && rm -rf "$stage"
du -sh "$dir"/* && echo "PDFs: $(ls "$dir/pdfs" | wc -l)"
# The order of the stream: everything but the GGUF fits the first part or two.
extra=() && for f in candle-tests.xz warpfold-old.xz; do [ -f "$dir/$f" ] && extra+=("$f"); done
bash bench/gpu/stream.sh pack "$dir" run-on-gpu-machine.sh wheels kd pdfs minilm-f16.tar.xz warpfold.xz "${extra[@]}" "$(basename "$S")" "$(basename "$Q")"
first=$(tar -tvf .gpu-extra/stream/part-00 2>/dev/null | awk '{print $3, $6}' | grep -v '/$' | head -400 || true)
echo "part-00 holds $(echo "$first" | grep -c .) entries, from $(echo "$first" | head -1 | cut -d' ' -f2) to $(echo "$first" | tail -1 | cut -d' ' -f2)"
ls -la .gpu-extra/stream
