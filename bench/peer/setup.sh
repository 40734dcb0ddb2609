#!/usr/bin/env bash
# Installs the peer for `warpfold bench --peer`: sentence-transformers on PyTorch (CPU use), in a
# throwaway virtual environment at bench/.venv-peer (git-ignored). PyPI's torch wheel is the only
# one reachable here; it carries CUDA libraries it does not use on a CPU-only machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
venv=bench/.venv-peer
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q --disable-pip-version-check -r bench/peer/requirements.txt
"$venv/bin/python" -c "import sentence_transformers, torch; print('peer ready: sentence-transformers', sentence_transformers.__version__, 'torch', torch.__version__)"
