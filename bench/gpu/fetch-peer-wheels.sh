#!/usr/bin/env bash
# The one package the transformers peer needs that the GPU machine lacks: `gguf` (transformers reads
# GGUF files through it), pure Python, downloaded here from PyPI and carried (the GPU machine has no
# network). Pinned and checked.
set -euo pipefail
dest=${1:-.gpu-extra/wheels}
mkdir -p "$dest"
pip download --no-deps --dest "$dest" gguf==0.19.0 -q
echo "$(cat bench/gpu/peer-wheels.sha256)" | (cd "$dest" && sha256sum -c -)
