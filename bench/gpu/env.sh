# The set-up every GPU run script shares, sourced first (`. "$(dirname "$0")/env.sh"`; the scripts run
# from the repository root on the GPU machine), so that it is written once and the same in every run:
#   set -uo pipefail   a failed step is reported and the run goes on (the scripts check what matters);
#   OUT                where the results land (default /tmp/out, created): what the device tool brings back;
#   LD_LIBRARY_PATH    the system CUDA 13.0 toolkit's libraries, as run-on-gpu-machine.sh sets them;
#   WARPFOLD_MODELS_DIR=/tmp/wf-models (MiniLM unpacked, BERT-large made) and WARPFOLD_LOG=warn, exported
#                      whatever the caller set (WF_CALLER_LOG keeps the caller's WARPFOLD_LOG, for the
#                      scripts that pass it on);
#   PY                 the device's torch environment's python, else python3;
#   W=/tmp/warpfold    the carried binary once unpacked; ST=/tmp/st the unpacked stream (stream.sh);
#   Q, S               the two default chat models' GGUFs as the streams carry them (Qwen2.5-Coder-1.5B,
#                      SmolLM2-135M);
#   L                  BERT-large's architecture with random f16 weights (make-bert-large.sh);
# and, as functions, the steps the scripts repeat (unpacking what was carried, the reference checks).
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
WF_CALLER_LOG=${WARPFOLD_LOG:-}
export LD_LIBRARY_PATH=/usr/local/cuda-13.0/targets/x86_64-linux/lib WARPFOLD_MODELS_DIR=/tmp/wf-models WARPFOLD_LOG=warn
PY=/opt/torch/.venv/bin/python
[ -x "$PY" ] || PY=python3
W=/tmp/warpfold
ST=/tmp/st
Q=$ST/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
S=$ST/SmolLM2-135M-Instruct.Q4_1.gguf
L=/tmp/wf-models/bert-large-random

# Everything the script prints from here on goes to $OUT/NAME as well.
log_to() { exec > >(tee "$OUT/$1") 2>&1; }
# The app-core runs' start: the log $OUT/NAME, the binary, MiniLM, the card and the host.
app_start() { log_to "$1"; need_warpfold; need_minilm; host_info; }

# The carried binary unpacked to $W by run-on-gpu-machine.sh (which prints the GPU, the CUDA libraries
# it loads and `warpfold --version`), from DIR (.gpu by default; $ST for a stream).
unpack_warpfold() { bash "${1:-.gpu}/run-on-gpu-machine.sh" "${1:-.gpu}/warpfold.xz" --version; }
# The same only where $W is not there yet (/tmp stays while the machine is held).
need_warpfold() { [ -x $W ] || unpack_warpfold "$@"; }

# all-MiniLM-L6-v2 in f16 (the pack scripts' minilm-f16.tar.xz, at the path given) into /tmp/wf-models.
unpack_minilm() { mkdir -p /tmp/wf-models && xz -dc "$1" | tar -C /tmp/wf-models -xf -; }
# Ends the run when MiniLM is not unpacked (the models call of run-app-window.sh does it).
need_minilm() { [ -d /tmp/wf-models/all-MiniLM-L6-v2 ] || { echo "no model: run the models call first"; exit 1; }; }

# The stream of bench/gpu/pack-languages.sh, opened: the known-item sets into /tmp/sets,
# multilingual-e5-small (and MiniLM, when packed) into /tmp/wf-models.
open_sets() {
  mkdir -p /tmp/sets /tmp/wf-models/multilingual-e5-small
  xz -dc $ST/sets.tar.xz | tar -C /tmp/sets -xf -
  mv $ST/e5-small-q4.bin /tmp/wf-models/multilingual-e5-small/
  [ ! -f $ST/minilm-f16.tar.xz ] || unpack_minilm $ST/minilm-f16.tar.xz
}
# The models' metadata (.gpu/meta.tar.xz: tokenizers and configs, no weights) into /tmp/meta.
unpack_meta() { mkdir -p /tmp/meta && xz -dc .gpu/meta.tar.xz | tar -C /tmp/meta -xf -; }
# /tmp/corpus-model: MiniLM's tokenizer and config with an empty weights file, all `warpfold corpus`
# needs for the corpora's token ids.
corpus_model() {
  if [ ! -f /tmp/corpus-model/tokenizer.json ]; then
    mkdir -p /tmp/corpus-model && unpack_meta
    cp -r /tmp/meta/minilm-meta/. /tmp/corpus-model/ && : > /tmp/corpus-model/model.safetensors
  fi
}

# Streamed runs (run-app-summaries.sh): append the carried part of the stream (bench/gpu/stream.sh; a part out of order ends
# the run), and once it is complete open it into $ST, MiniLM into /tmp/wf-models and the binary into $W.
stream_setup() {
  bash bench/gpu/stream.sh put || exit 1
  [ -d $ST ] || bash bench/gpu/stream.sh open $ST || exit 1
  [ -d /tmp/wf-models/all-MiniLM-L6-v2 ] || unpack_minilm $ST/minilm-f16.tar.xz
  need_warpfold $ST | tail -1
}
# Staged runs (`bash bench/gpu/run-NAME.sh STAGE`): the log $OUT/TAG-STAGE.log, the caller's
# WARPFOLD_LOG passed on; then the carried part of the stream appended and, on the call that completes
# it, the stream opened into $ST, UNPACK run (the script's function for what else that run
# carries) and the binary unpacked. Stage `put` ends the call there.
stream_stage() { # tag stage unpack
  log_to $1-$2.log
  export WARPFOLD_LOG=${WF_CALLER_LOG:-warn}
  bash bench/gpu/stream.sh put || exit 1
  if [ ! -f $ST/.opened ] && [ "$(wc -l < /tmp/stream.parts)" = "$(cat .gpu-extra/stream/PARTS)" ]; then
    bash bench/gpu/stream.sh open $ST && touch $ST/.opened
    "$3"
    unpack_warpfold $ST
  fi
  [ "$2" != put ] || exit 0
}

# The card and the host, for the log: nvidia-smi in FORMAT (default csv), the cores, the date.
host_info() { nvidia-smi --query-gpu=name,memory.total,driver_version,compute_cap --format=${1:-csv}; nproc; date -u; }
# The versions of the python modules named, on one line (sentence_transformers as sentence-transformers).
py_versions() {
  $PY -c "import importlib, sys; print(*[x for m in sys.argv[1:] for x in (m.replace('_', '-'), importlib.import_module(m).__version__)])" "$@"
}

# MiniLM (the default model) on the GPU against sentence-transformers' vectors of the fixture texts:
# the vectors in $OUT/minilm-fixture.jsonl, the verdict appended to $OUT/checks.jsonl.
check_minilm() {
  $PY -c "import json; [print(json.dumps({'text': i['text']})) for i in json.load(open('tests/fixtures/minilm_reference.json'))['items']]" \
    | $W --device cuda embed > "$OUT/minilm-fixture.jsonl"
  $PY bench/gpu/check.py minilm tests/fixtures/minilm_reference.json "$OUT/minilm-fixture.jsonl" | tee -a "$OUT/checks.jsonl"
}
# A tiny transformers reference checkpoint (NAME: qwen2, llama3 in tests/fixtures/decoder_reference)
# scored on the GPU, under `timeout SECONDS` when given: $OUT/score-NAME.jsonl, the verdict appended
# to $OUT/checks.jsonl.
check_decoder() { # name [seconds]
  local ref=tests/fixtures/decoder_reference/$1
  $PY -c "import json; [print(json.dumps({'ids': s['input_ids']})) for s in json.load(open('$ref/expected.json'))['sequences']]" \
    | ${2:+timeout $2} $W --device cuda score --decoder $ref > "$OUT/score-$1.jsonl"
  $PY bench/gpu/check.py decoder "$ref/expected.json" "$OUT/score-$1.jsonl" | tee -a "$OUT/checks.jsonl"
}

# A build to compare with (.gpu-old/warpfold.xz) unpacked to PATH, beside the carried one in $W; MiniLM
# must be unpacked.
need_old_build() { # path
  need_warpfold | tail -1
  [ -x $1 ] || { xz -dc .gpu-old/warpfold.xz > $1 && chmod +x $1; }
  need_minilm
}
# `warpfold bench-index` of N generated PDFs in DIR, its report in FILE, with the global ARGS given
# (e.g. --model $L); what it prints, stderr too, for the caller to cut.
index_pdfs() { # n dir file [args...]
  $W --device cuda "${@:4}" bench-index --pdfs $1 --search-chunks 0 --work-dir $2 --out "$3" 2>&1
}
# The folder of the PDFs an index_pdfs run generated under DIR.
pdf_dir() { dirname "$(find $1 -name '*.pdf' | head -1)"; }

# /tmp/chunks.jsonl: the texts of the chunks in the index DB, one {"text": ...} a line, for a model's
# own rate (`own_rate`) on the very chunks an indexing run made.
dump_chunks() {
  python3 - "$1" <<'PY'
import json, sqlite3, sys
with open("/tmp/chunks.jsonl", "w") as f:
    for (text,) in sqlite3.connect(sys.argv[1]).execute("SELECT text FROM chunks"):
        f.write(json.dumps({"text": text}) + "\n")
PY
}
# `warpfold embed` of /tmp/chunks.jsonl with the global ARGS given (e.g. --model $L): its report line.
own_rate() { $W --device cuda "$@" embed --json < /tmp/chunks.jsonl 2>&1 >/dev/null | tail -1; }

# The summary runs: the peer's gguf wheel (transformers reads GGUF files through it), carried in the
# stream, installed into /tmp/pylib and put on PYTHONPATH; the peer's versions.
gguf_peer() {
  mkdir -p /tmp/pylib && $PY -m pip install --no-deps --no-index --target /tmp/pylib $ST/gguf-*.whl -q 2>&1 | tail -2
  export PYTHONPATH=/tmp/pylib
  py_versions transformers torch gguf
}
# The summary runs, through the script's own `summ LABEL DECODER FOLDER ARGS...`: the quality documents
# ($ST/kd) with both chat models at the test's chunk of 1,280 tokens; the 48 reports ($ST/kb) with the
# 1.5B model on the whole GPU and under an 8 GiB budget, then with SmolLM2.
summ_quality() { summ q-qwen $Q $ST/kd --chunk-tokens 1280; summ q-smol $S $ST/kd --chunk-tokens 1280; }
summ_reports() { summ b-qwen $Q $ST/kb; summ b-qwen-8gib $Q $ST/kb --vram-budget 8GiB; summ b-smol $S $ST/kb; }

# The 7B runs: the Qwen2.5-7B architecture (MODEL: random bf16 weights, the same file for both)
# scoring /tmp/KIND.jsonl, warpfold packed in bins of 16,384 tokens against transformers as a careful
# user runs it (length-sorted batches of at most 16,384 padded tokens, sdpa): the reports in $OUT
# (wf-7b-KIND.*, hf-7b-KIND-careful.json), the per-document scores compared into $OUT/checks.jsonl.
score_7b_careful() { # model kind
  local m=$1 c=$2
  $W --device cuda --bin-tokens 16384 score --decoder $m --json < /tmp/$c.jsonl > "$OUT/wf-7b-$c.jsonl" 2> /tmp/wf-7b-$c.err
  tail -1 /tmp/wf-7b-$c.err | tee "$OUT/wf-7b-$c.report.json"
  $PY bench/gpu/hf_score.py --model $m --ids /tmp/$c.jsonl --attn sdpa --token-budget 16384 --out-dir /tmp | tee "$OUT/hf-7b-$c-careful.json"
  $PY - "$OUT/wf-7b-$c.jsonl" /tmp/hf-scores-sdpa-budget16384.jsonl "$OUT/wf-7b-$c.report.json" "$OUT/hf-7b-$c-careful.json" <<'PY' | tee -a "$OUT/checks.jsonl"
import json, sys
ours = [json.loads(l) for l in open(sys.argv[1])]
theirs = [json.loads(l) for l in open(sys.argv[2])]
d = [abs(a["mean_log_likelihood"] - b["mean_log_likelihood"]) for a, b in zip(ours, theirs)]
wf, hf = json.load(open(sys.argv[3])), json.load(open(sys.argv[4]))
rate = lambda r: r.get("tokens_per_second") or r.get("real_tokens_per_second")
print(json.dumps({"check": sys.argv[1].split("/")[-1], "documents": len(d), "max_abs_diff_mean_ll": max(d), "ok": len(d) == len(ours) and max(d) <= 0.05,
                  "warpfold_tokens_per_second": rate(wf), "careful_transformers_tokens_per_second": rate(hf), "ratio": rate(wf) / rate(hf)}))
PY
}

# run-7b-careful.sh and run-minilm-e2e.sh: the stream carries MiniLM and the CUDA test binary (put where
# run-gpu-tests.sh looks for it) besides the binary. `put` appends a part; every other stage needs
# the stream complete, and prints the card.
minilm_tests_stream() { # tag stage
  open_minilm_tests() { unpack_minilm $ST/minilm-f16.tar.xz; mkdir -p .gpu && cp $ST/candle-tests.xz .gpu/ 2>/dev/null; }
  stream_stage "$1" "$2" open_minilm_tests
  [ -x $W ] || { echo "no $W: the stream is not complete"; exit 1; }
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
}
# /tmp/KIND.jsonl: the corpus KIND's 256 documents as MiniLM's tokenizer ids.
corpus_ids() { [ -f /tmp/$1.jsonl ] || $W --model /tmp/wf-models/all-MiniLM-L6-v2 corpus --kind $1 --documents 256 > /tmp/$1.jsonl; }
# The Qwen2.5-7B configuration with random bf16 weights (made here once, the same file for warpfold and
# transformers) in $M7.
M7=/tmp/models/qwen2.5-7b
random_7b() { [ -f $M7/config.json ] || $PY bench/gpu/make_random_decoder.py qwen2.5-7b $M7; }
# The 7B ($M7) scoring the stress corpus with the bin the VRAM probe chooses: the probe's line and the
# run's report.
probe_7b_stress() {
  $W --device cuda score --decoder $M7 --json < /tmp/stress.jsonl > "$OUT/wf-7b-stress-probed.jsonl" 2> "$OUT/wf-7b-stress-probed.err"
  grep -E "VRAM probe" "$OUT/wf-7b-stress-probed.err"; tail -1 "$OUT/wf-7b-stress-probed.err"
}
# The 7B's stage profile (WARPFOLD_PROFILE=1) over the first N stress documents in bins of 16,384 tokens,
# in $OUT/profile-7b.err; its last lines shown (builds before 2026-12-02 print "profile:" lines, later
# ones tracing events of the target warpfold::profile).
profile_7b() { # n
  head -$1 /tmp/stress.jsonl > /tmp/stress-head.jsonl
  WARPFOLD_PROFILE=1 $W --device cuda --bin-tokens 16384 score --decoder $M7 --json < /tmp/stress-head.jsonl > /dev/null 2> "$OUT/profile-7b.err"
  grep -E "^profile|warpfold::profile" "$OUT/profile-7b.err" | tail -16
}
