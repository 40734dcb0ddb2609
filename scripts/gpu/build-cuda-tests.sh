#!/usr/bin/env bash
# Builds warpfold-candle's tests with CUDA and FlashAttention-2 (the GPU tests are #[ignore]d and
# compiled only with the `flash-attn` feature) and packs the test binary into .gpu/candle-tests.xz.
# On the GPU machine: bash .gpu/run-on-gpu-machine.sh .gpu/candle-tests.xz --ignored gpu_
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck disable=SC1091
source "${WARPFOLD_CUDA_PREFIX:-/opt/warpfold-cuda}/env.sh"
export CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-90}
bin=$(CARGO_TARGET_DIR=target/cuda cargo test --profile release-gpu --locked --features flash-attn -p warpfold-candle --no-run \
  --message-format=json 2>/dev/null | python3 -c "import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get('reason') == 'compiler-artifact' and m.get('executable') and m['target']['name'] == 'warpfold_candle':
        print(m['executable'])" | tail -1)
[ -n "$bin" ] || { echo "build-cuda-tests: no test binary built" >&2; exit 1; }
mkdir -p .gpu
xz -T2 -9 -c "$bin" > .gpu/candle-tests.xz
ls -la .gpu/candle-tests.xz
