#!/usr/bin/env bash
# all-MiniLM-L6-v2 with its real weights on the GPU machine, in a call that follows run-all.sh on the
# same (still warm) machine: the binary is already unpacked at /tmp/warpfold, and this call carries
# only .gpu-extra/minilm-f16.tar.xz (the weights do not fit the 64 MiB carry next to the binary).
# Correctness against sentence-transformers' vectors of the fixture texts, the VRAM probe, then
# `warpfold bench` packed vs padded vs sentence-transformers on the same GPU (model time and end to
# end, texts in).
. "$(dirname "$0")/env.sh"
log_to run-minilm.log
[ -x $W ] || { [ -f .gpu/warpfold.xz ] && unpack_warpfold; }
[ -x $W ] || { echo "no /tmp/warpfold: run run-all.sh first on this machine, or carry .gpu"; exit 1; }
unpack_minilm .gpu-extra/minilm-f16.tar.xz
py_versions sentence_transformers torch transformers
echo "=== MiniLM on the GPU vs sentence-transformers (fixture vectors)"
check_minilm
echo "=== VRAM probe"
echo '{"text": "probe"}' | WARPFOLD_LOG=info $W --device cuda embed 2>&1 >/dev/null | grep -i probe | tail -2
echo "=== MiniLM speed: packed vs padded vs sentence-transformers, same texts"
$W --device cuda --bin-tokens ${BIN:-16384} bench --documents 2048 --peer --peer-python "$PY" --out "$OUT/gpu-minilm.json"
echo "=== done"
