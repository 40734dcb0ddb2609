#!/usr/bin/env bash
# Issue 15 item 5: the end-to-end run on the GPU machine. 200 PDFs of 1-29 pages (1,580
# pages, 493,070 words, 555,890 tokens of text, ~570k prompt tokens; bench/gpu/pack-drop-pdfs.sh) dropped on the app core (`warpfold
# serve --summarize`, what the desktop runs) until every document is indexed and summarized, on the
# whole GPU and under `--vram-budget 8GiB`; the peer (bench/gpu/peer_e2e.py: pypdf, sentence-transformers
# at batch 256, transformers' batched generate) on the same PDFs and models, uncapped and capped at
# 8 GiB. nvidia-smi is sampled every 100 ms through each run. Key facts are scored on the build machine
# (bench/gpu/score-drop-pdfs.sh).
#
#   bash bench/gpu/run-drop-pdfs.sh put     # append the carried stream part (one per call, in order, on a warm
#                                    # machine); once the small files are in, unpack and check them
#                                    # (the binary on the GPU, MiniLM, pypdf); after the last part,
#                                    # check the sha256 and unpack everything into /tmp/st
#   bash bench/gpu/run-drop-pdfs.sh ours    # quality documents, then the app core whole GPU, then 8 GiB
#   bash bench/gpu/run-drop-pdfs.sh peer    # the peer, whole GPU (resumes if an earlier call stopped it)
#   bash bench/gpu/run-drop-pdfs.sh peer8   # the peer capped at 8 GiB (resumes likewise)
#
# Every stage first appends whatever part the call carries, so the last `put` can be the first `ours`.
# Outputs: $OUT/TAG-STAGE.log and $OUT/TAG-STAGE.tar.xz (everything the stage wrote; the peer's folder
# keeps its state in /tmp/drop-pdfs for a resumed call). Extra settings for `ours` pass through:
#   TAG=drop-pdfs-b WF_ARGS="..." SERVE_ARGS="..." RUNS="whole" QUALITY=0 WARPFOLD_X=... bash run-drop-pdfs.sh ours
# WF_ARGS are global options of every warpfold command (before the subcommand), SERVE_ARGS arguments
# of `serve` (e.g. "--max-tokens 160"), RUNS which app-core runs (whole, 8gib), QUALITY=0 skips the
# quality documents, DECODE=0 skips the `warpfold summarize` decode-rate run; the environment
# (WARPFOLD_* switches) reaches every warpfold process.
#
# Expected durations, from the GPU summary run of 2026-12-01 (48 reports, 147,878 prompt tokens; warpfold 18.4 s
# summarizing + ~6 s load; transformers 54.6 s + 65-69 s dequantizing the GGUF, 118.4 s capped at
# 8 GiB), scaled by prompt tokens (~570k here, 3.9x):
#   put:   ~15-25 s a call (the part's transfer, then seconds); the call that unpacks the small files
#          also runs the binary once on the GPU (~20 s: the driver compiles candle's PTX, cached after)
#   ours:  ~20 s quality documents; each app-core run ~90-120 s (server start with the VRAM probe
#          ~10 s, indexing 1,580 pages ~10-20 s overlapping the summaries, ~70 s summarizing); the
#          decode-rate run ~80 s if time is left  => ~300-350 s
#   peer:  ~65 s GGUF load + ~10 s saving the bf16 cache + ~12 s pypdf (12.0 s on the 2-core build
#          machine) + ~10 s embeddings + ~210 s summarizing => ~310-330 s
#   peer8: ~10 s load from the bf16 cache + ~10 s embeddings (the text and the extraction's seconds
#          come from the peer's run, /tmp/drop-pdfs/pdf-text.json: pypdf is CPU work, the cap changes
#          nothing there) + ~460 s summarizing => may pass its deadline (470 s into the call): it
#          stops before a batch it cannot finish and a second `peer8` call resumes (~60-120 s)
. "$(dirname "$0")/env.sh"
stage=${1:-put}
shift || true
TAG=${TAG:-drop-pdfs}
log_to $TAG-$stage.log
T0=$(date +%s)
REPO=$PWD
elapsed() { echo $(($(date +%s) - T0)); }
export WARPFOLD_LOG=${WF_CALLER_LOG:-warn}
M=/tmp/wf-models/all-MiniLM-L6-v2
R=/tmp/drop-pdfs   # results that must outlive a call (the peer's resumable state)
mkdir -p $R

# --- the stream: append this call's part; unpack what is complete.
if ls .gpu-extra/stream/part-* >/dev/null 2>&1; then bash bench/gpu/stream.sh put || exit 1; fi
want=$(cat .gpu-extra/stream/PARTS 2>/dev/null || echo 0)
have=$(wc -l < /tmp/stream.parts 2>/dev/null || echo 0)
echo "stream: $have of $want parts"
if [ ! -f /tmp/small.ok ] && [ "$have" -gt 0 ]; then
  # Everything but the GGUF that is complete so far (a member cut at the end of the stream fails its
  # own check below and is unpacked again by a later call; the PDFs precede MiniLM in the stream).
  mkdir -p $ST
  tar -C $ST -xf /tmp/stream.tar --exclude='*.gguf' 2>/dev/null
  if [ ! -x $W ] && xz -t $ST/warpfold.xz 2>/dev/null; then
    unpack_warpfold $ST | tail -3
  fi
  if [ ! -d $M ] && xz -t $ST/minilm-f16.tar.xz 2>/dev/null; then
    unpack_minilm $ST/minilm-f16.tar.xz && echo "MiniLM f16 in $M"
  fi
  if [ ! -f /tmp/pylib/.ok ] && [ -d $ST/wheels ] && (cd $ST/wheels && sha256sum --quiet -c "$REPO/bench/gpu/peer-wheels.sha256"); then
    $PY -m pip install -q --no-deps --no-index --upgrade --target /tmp/pylib $ST/wheels/*.whl 2>&1 | tail -2
    PYTHONPATH=/tmp/pylib $PY -c "import gguf, pypdf; print('gguf and pypdf', pypdf.__version__)" && touch /tmp/pylib/.ok
  fi
  if [ -x $W ] && [ -d $M ] && [ ! -f /tmp/gpu.ok ]; then
    # The binary on the GPU once (the first CUDA run compiles candle's PTX; later runs find it cached).
    echo '{"text": "a first sentence on the GPU"}' | timeout 120 $W --device cuda embed >/dev/null && touch /tmp/gpu.ok && echo "warpfold on the GPU: ok ($(elapsed) s)"
  fi
  if [ -f /tmp/gpu.ok ] && [ ! -f /tmp/tests.ok ] && xz -t $ST/candle-tests.xz 2>/dev/null; then
    # The gated GPU tests of the paged decode and warpfold's kernels, before anything is timed: if
    # the paged path failed here, WARPFOLD_DECODE_ATTENTION=gathered would take the runs around it.
    xz -dc $ST/candle-tests.xz > /tmp/candle-tests && chmod +x /tmp/candle-tests
    timeout 150 /tmp/candle-tests --ignored gpu_paged gpu_fused gpu_flash --test-threads 1 --nocapture 2>&1 | grep -v "^$" | tee $OUT/$TAG-gpu-tests.log | tail -25
    touch /tmp/tests.ok
  fi
  echo "PDFs: $(ls $ST/pdfs 2>/dev/null | wc -l); quality documents: $(ls $ST/kd 2>/dev/null | wc -l)"
  [ -f /tmp/gpu.ok ] && [ -f /tmp/pylib/.ok ] && touch /tmp/small.ok && echo "small files: unpacked and checked"
fi
if [ ! -f /tmp/st.ok ] && [ "$have" -gt 0 ] && [ "$have" = "$want" ]; then
  bash bench/gpu/stream.sh open $ST >/dev/null && sha256sum $Q && touch /tmp/st.ok && echo "stream: complete and checked"
fi
export PYTHONPATH=/tmp/pylib
ready() { [ -f /tmp/st.ok ] && [ -f /tmp/small.ok ] || { echo "not ready: $have of $want parts in; small files checked: $([ -f /tmp/small.ok ] && echo yes || echo no)"; exit 1; }; }
sample() { # label: nvidia-smi every 100 ms into $2/label.smi, with a line tying its clock to the epoch
  echo "epoch $(date +%s.%N) local $(date '+%Y/%m/%d %H:%M:%S.%N')" > "$2/$1.smi.anchor"
  nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used --format=csv,noheader,nounits -lms 100 > "$2/$1.smi" &
  echo $!
}
pack() { # the stage's outputs into one file
  tar -C "$1" -cf - . | xz -T0 -6 > "$OUT/$TAG-$stage.tar.xz" && ls -la "$OUT"
}

case "$stage" in
  put) ;;
  ours)
    ready
    O=$R/$TAG-ours && rm -rf $O && mkdir -p $O
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee $O/gpu.txt
    $W --version | tee -a $O/gpu.txt
    if [ "${QUALITY:-1}" = 1 ]; then
      echo "=== 1. the quality documents (tests/summary_quality.rs), chunks of 1,280 as the test ($(elapsed) s)"
      timeout 90 $W --device cuda ${WF_ARGS:-} summarize $ST/kd --decoder $Q --json --chunk-tokens 1280 > $O/q-qwen.jsonl 2> $O/q-qwen.err
      rc=$?
      tail -2 $O/q-qwen.err
      if [ $rc != 0 ]; then
        # The first decode through FA-2's paged kernel on this machine failed: the rest of the run
        # reads the cache gathered instead (and says so), rather than losing the call.
        echo "the paged decode failed (exit $rc): WARPFOLD_DECODE_ATTENTION=gathered from here on"
        export WARPFOLD_DECODE_ATTENTION=gathered
        timeout 90 $W --device cuda ${WF_ARGS:-} summarize $ST/kd --decoder $Q --json --chunk-tokens 1280 > $O/q-qwen.jsonl 2> $O/q-qwen.err
        tail -2 $O/q-qwen.err
      fi
      timeout 90 $W --device cuda ${WF_ARGS:-} summarize $ST/kd --decoder $S --json --chunk-tokens 1280 > $O/q-smol.jsonl 2> $O/q-smol.err
      tail -2 $O/q-smol.err
    fi
    runs=(${RUNS:-whole 8gib})
    for i in "${!runs[@]}"; do
      run=${runs[$i]}
      extra=${WF_ARGS:-}
      [ $run = 8gib ] && extra="$extra --vram-budget 8GiB"
      # Each run waits at most its share of what is left of the call (expected: ~100 s each).
      limit=$(( (530 - $(elapsed)) / (${#runs[@]} - i) ))
      echo "=== 2. the app core, $run ($(elapsed) s; gives up after $limit s)"
      s=$(sample e2e-ours-$run $O)
      serve_args=()
      for a in ${SERVE_ARGS:-}; do serve_args+=(--serve-arg "$a"); done
      timeout $((limit + 30)) python3 bench/gpu/app_core.py $W $ST/pdfs $O/e2e-ours-$run.json --summarize $Q \
        --summaries-out $O/e2e-ours-$run.jsonl --timeout $limit "${serve_args[@]}" ${extra:+--extra $extra} | grep -v '^  '
      kill $s
    done
    if [ "${DECODE:-1}" = 1 ] && [ "$(elapsed)" -lt 420 ]; then
      # Decode before and after the paged cache, in this run: `warpfold summarize` on the first 64
      # PDFs with this build (64 sequences at a time, then 16 as before) and with the build before it
      # (warpfold-old.xz, batches of 16), WARPFOLD_PROFILE=1 once for where a step's time goes.
      echo "=== 3. decode A/B on 64 PDFs ($(elapsed) s)"
      rm -rf /tmp/pdfs64 && mkdir -p /tmp/pdfs64 && for f in $(ls $ST/pdfs | sort -V | head -64); do cp $ST/pdfs/$f /tmp/pdfs64/$f; done
      [ -x /tmp/warpfold-old ] || { xz -dc $ST/warpfold-old.xz > /tmp/warpfold-old 2>/dev/null && chmod +x /tmp/warpfold-old; }
      ab() { # label binary extra...
        local label=$1 bin=$2; shift 2
        [ "$(elapsed)" -lt 520 ] || { echo "$label: no time left"; return; }
        timeout $((570 - $(elapsed))) $bin --device cuda summarize /tmp/pdfs64 --decoder $Q --json "$@" > $O/ab-$label.jsonl 2> $O/ab-$label.err
        echo "$label: $(grep -E 'decode|documents' $O/ab-$label.err | tail -2 | tr '\n' ' ')"
      }
      ab new $W
      [ "${AB16:-0}" = 1 ] && ab new-b16 $W --max-batch 16
      [ -x /tmp/warpfold-old ] && ab old /tmp/warpfold-old
      WARPFOLD_PROFILE=1 ab new-profile $W
      grep "profile: generation decode" -A14 $O/ab-new-profile.err | head -16
    fi
    pack $O ;;
  peer|peer8)
    ready
    O=$R/$TAG-$stage && mkdir -p $O
    cap=() && [ $stage = peer8 ] && cap=(--memory-gib 8)
    resume=() && [ -f $O/e2e-$stage.jsonl.state.json ] && resume=(--resume)
    if [ ${#resume[@]} -gt 0 ] && grep -q '"all_done": true' $O/e2e-$stage.jsonl.state.json; then
      echo "$stage: all done in an earlier call"
    else
      $PY -c "import transformers, sentence_transformers, torch, gguf, pypdf; print('transformers', transformers.__version__, 'sentence-transformers', sentence_transformers.__version__, 'torch', torch.__version__, 'pypdf', pypdf.__version__)"
      n=$(ls $O/*.smi 2>/dev/null | wc -l)
      echo "=== the peer, $stage${resume:+ (resumed)} ($(elapsed) s)"
      s=$(sample e2e-$stage-call$((n + 1)) $O)
      PYTHONUNBUFFERED=1 timeout $((570 - $(elapsed))) $PY bench/gpu/peer_e2e.py $Q $ST/pdfs $M $O/e2e-$stage.jsonl --cache /tmp/qwen-bf16 --text-cache $R/pdf-text.json \
        --deadline $((470 - $(elapsed))) "${cap[@]}" "${resume[@]}" "$@" > $O/e2e-$stage-call$((n + 1)).out 2> $O/e2e-$stage-call$((n + 1)).err
      echo "exit $?"
      kill $s
      grep -v '^{' $O/e2e-$stage-call$((n + 1)).out | tail -40
      tail -1 $O/e2e-$stage-call$((n + 1)).out | $PY -m json.tool 2>/dev/null | grep -v '^        ' | head -70
      grep -q '"all_done": true' $O/e2e-$stage.jsonl.state.json && echo "$stage: all done" || echo "$stage: NOT all done: call run-drop-pdfs.sh $stage again to resume"
      grep -iE "error|Traceback" $O/e2e-$stage-call$((n + 1)).err | tail -5
    fi
    pack $O ;;
  *) echo "usage: run-drop-pdfs.sh put|ours|peer|peer8" >&2; exit 2 ;;
esac
echo "=== done ($(elapsed) s)"
