#!/usr/bin/env bash
# The packages the transformers peer needs that the GPU machine lacks: `gguf` (transformers reads
# GGUF files through it) and `pypdf` (the end-to-end peer's PDF text, bench/gpu/peer_e2e.py), both
# pure Python with no dependencies on Python 3.12, downloaded here from PyPI and carried (the GPU
# machine has no network). Pinned and checked.
set -euo pipefail
dest=${1:-.gpu-extra/wheels}
mkdir -p "$dest"
pip download --no-deps --dest "$dest" gguf==0.19.0 pypdf==7.1.1 -q
echo "$(cat bench/gpu/peer-wheels.sha256)" | (cd "$dest" && sha256sum -c -)
