#!/usr/bin/env bash
# The MCP client test's Python environment (tests/mcp/requirements.txt: the official MCP SDK, every
# package pinned) in .venv-mcp, created only when missing or when the requirements changed since it
# was made. Its own environment, not Ray's: neither pin set has to move for the other.
# Needs python3 (3.10 or newer with venv; CI has 3.11) and PyPI. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv-mcp
REQ=tests/mcp/requirements.txt
STAMP="$VENV/.requirements.sha256"
want=$(sha256sum "$REQ" | cut -d' ' -f1)
if [ -x "$VENV/bin/python" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want" ] && "$VENV/bin/python" -c 'import mcp' 2>/dev/null; then
    exit 0
fi
if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
    echo "install-mcp-client: python3 with the venv module is needed (Debian: apt-get install python3-venv)" >&2
    exit 1
fi
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$REQ"
"$VENV/bin/python" -c 'import importlib.metadata as m; print("install-mcp-client: mcp", m.version("mcp"), "in '"$VENV"'")'
echo "$want" > "$STAMP"
