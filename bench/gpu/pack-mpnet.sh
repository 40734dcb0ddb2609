#!/usr/bin/env bash
# What bench/gpu/run-mpnet.sh needs beside the CUDA binary (scripts/gpu/build-cuda.sh): all-mpnet-base-v2's
# files without its weights, in .gpu/mpnet-meta.tar.xz. The model must be fetched
# (`warpfold models fetch all-mpnet-base-v2`).
set -euo pipefail
cd "$(dirname "$0")/../.."
src=models/all-mpnet-base-v2
[ -f $src/config.json ] || { echo "pack-mpnet: $src is missing (warpfold models fetch all-mpnet-base-v2)" >&2; exit 1; }
mkdir -p .gpu
tar -C models --exclude model.safetensors -cf - all-mpnet-base-v2 | xz -6 > .gpu/mpnet-meta.tar.xz
ls -la .gpu/mpnet-meta.tar.xz
