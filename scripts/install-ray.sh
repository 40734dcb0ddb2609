#!/usr/bin/env bash
# The Ray driver's Python environment (scaleout/requirements.txt, every package pinned) in
# .venv-ray, created only when missing or when the requirements changed since it was made.
# Needs python3 (3.9 or newer with venv; CI has 3.11) and PyPI. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-ray
REQ=scaleout/requirements.txt
STAMP="$VENV/.requirements.sha256"
want=$(sha256sum "$REQ" | cut -d' ' -f1)
if [ -x "$VENV/bin/python" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want" ] && "$VENV/bin/python" -c 'import ray, yaml' 2>/dev/null; then
    exit 0
fi
if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
    echo "install-ray: python3 with the venv module is needed (Debian: apt-get install python3-venv)" >&2
    exit 1
fi
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$REQ"
"$VENV/bin/python" -c 'import ray, yaml; print("install-ray: ray", ray.__version__, "in '"$VENV"'")'
echo "$want" > "$STAMP"
