#!/usr/bin/env bash
# The real desktop window: start the Tauri app under Xvfb with a watched folder of sample
# documents, let it index them, take a screenshot of the screen, and fail if the window is blank
# (one flat colour: WebKit painted nothing) or shows no UI.
#   bash tests/desktop/screenshot.sh [OUT.png]     (default docs/screenshots/desktop.png)
# Then the folder box: a folder the user never chose is typed into it (as script in the webview
# could), and it is watched only after a yes in the desktop's native dialog (screenshot beside OUT).
# Needs: target/release/warpfold-desktop and target/release/warpfold (for the samples), Xvfb,
# ImageMagick's import/convert, xdotool, the default model in models/.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:-docs/screenshots/desktop.png}"
app=target/release/warpfold-desktop
[ -x "$app" ] || { echo "desktop screenshot: build it first: cargo build --release -p warpfold-desktop" >&2; exit 2; }
work="$(mktemp -d)"
cleanup() { kill "${app_pid:-}" "${xvfb_pid:-}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
[ -n "${KEEP:-}" ] && trap "kill \${app_pid:-} \${xvfb_pid:-} 2>/dev/null; echo kept $work" EXIT

./target/release/warpfold make-samples "$work/samples" >/dev/null
# Documents in other languages beside the English samples (tests/data/languages): the header lists
# the index's languages beside its model.
python3 - "$work/samples" <<'PY'
import json, pathlib, sys
for line in open("tests/data/languages/documents.jsonl", encoding="utf-8"):
    if line.strip():
        doc = json.loads(line)
        if doc["language"] in ("fr", "de", "ru", "ja"):
            (pathlib.Path(sys.argv[1]) / doc["file"]).write_text(doc["text"], encoding="utf-8")
PY
mkdir -p "$work/data"
printf '{"folders": ["%s"]}\n' "$(realpath "$work/samples")" > "$work/data/settings.json"

display=":$((90 + RANDOM % 9))"
Xvfb "$display" -screen 0 1400x950x24 -nolisten tcp >"$work/xvfb.log" 2>&1 &
xvfb_pid=$!
for _ in $(seq 50); do xdpyinfo -display "$display" >/dev/null 2>&1 && break; sleep 0.1; done

# Without compositing off, WebKitGTK under Xvfb paints a blank window.
DISPLAY="$display" WEBKIT_DISABLE_COMPOSITING_MODE=1 WARPFOLD_WEBVIEW_CONSOLE=1 WARPFOLD_DATA_DIR="$work/data" \
  WARPFOLD_MODELS_DIR="$PWD/models" WARPFOLD_DEVICE=cpu "$app" >"$work/app.log" 2>&1 &
app_pid=$!

# Wait for the samples to be indexed (the index and its documents appear), then for the UI to draw.
for _ in $(seq 120); do
  kill -0 "$app_pid" 2>/dev/null || { echo "the desktop app exited:"; cat "$work/app.log"; exit 1; }
  n=$(python3 - "$work/data/index.db" <<'PY' 2>/dev/null || echo 0
import sqlite3, sys
print(sqlite3.connect(sys.argv[1]).execute("select count(*) from documents").fetchone()[0])
PY
)
  [ "${n:-0}" -ge 8 ] && break
  sleep 1
done
echo "desktop screenshot: $n documents indexed"
sleep 4
mkdir -p "$(dirname "$out")"
# The window alone (Xvfb has no window manager: it sits at the top left at its configured size).
geometry=$(DISPLAY="$display" xwininfo -name warpfold 2>/dev/null | awk '/Width:/{w=$2} /Height:/{h=$2} END{if(w&&h) print w"x"h"+0+0"}')
DISPLAY="$display" import -window root ${geometry:+-crop "$geometry"} "$out"

# Blank check: a painted UI has many colours and real contrast.
colours=$(convert "$out" -format '%k' info:)
spread=$(convert "$out" -colorspace Gray -format '%[fx:standard_deviation]' info:)
echo "desktop screenshot: $out, $colours colours, grey standard deviation $spread"
if [ "$colours" -lt 64 ] || python3 -c "import sys; sys.exit(0 if float('$spread') < 0.03 else 1)"; then
  echo "desktop screenshot: the window is blank" >&2
  cat "$work/app.log" >&2
  exit 1
fi
[ "${n:-0}" -ge 8 ] || { echo "desktop screenshot: the watched folder was not indexed ($n documents)" >&2; cat "$work/app.log" >&2; exit 1; }

# The folder box. The webview names a folder outside what the user chose (with a `..` in it);
# the native dialog must ask, naming the real folder: Escape watches nothing, a yes watches it.
mkdir -p "$work/later"
echo "Sea otters float on their backs and crack shellfish on stones." > "$work/later/otters.txt"
dialog_out="${out%.png}-dialog.png"
# One xdotool step, then time for it to land: on a busy machine WebKit moved the focus only after the
# keys that followed had arrived, and they went to the wrong field.
step() { DISPLAY="$display" xdotool "$@"; sleep 0.7; }
ask() {
  # To the folder box by keyboard, wherever the header's facts wrap: a click on the brand leaves any
  # input, "/" focuses the search box, and the folder box is three fields before it (Add files,
  # Watch folder, the box). Each step is given time to land (step).
  step mousemove 60 30 click 1
  step key slash
  step key shift+Tab
  step key shift+Tab
  step key shift+Tab
  step key ctrl+a BackSpace
  step type --delay 40 "$work/samples/../later"
  DISPLAY="$display" xdotool key Return
  # Up to a minute: on a busy machine the webview takes its time to hand the folder over.
  for _ in $(seq 240); do
    # The dialog: a second top-level window of the app, larger than the 1x1 helpers, not the main one.
    DISPLAY="$display" xwininfo -root -tree | grep '"warpfold-desktop" "Warpfold-desktop"' | grep -v '"warpfold"' \
      | grep -qv ' 10x10+' && return 0
    sleep 0.25
  done
  echo "desktop dialog: no dialog appeared for a folder the user never chose (the window: ${out%.png}-no-dialog.png)" >&2
  DISPLAY="$display" import -window root ${geometry:+-crop "$geometry"} "${out%.png}-no-dialog.png"
  cat "$work/app.log" >&2
  exit 1
}
watched() { grep -q "$(realpath "$work/later")" "$work/data/settings.json"; }
ask
sleep 0.5
DISPLAY="$display" import -window root ${geometry:+-crop "$geometry"} "$dialog_out"
DISPLAY="$display" xdotool key Escape
sleep 2
if watched; then echo "desktop dialog: the folder was watched without a yes" >&2; exit 1; fi
ask
DISPLAY="$display" xdotool key alt+y
for _ in $(seq 120); do watched && break; sleep 0.25; done
watched || { echo "desktop dialog: a yes did not watch the folder" >&2; cat "$work/app.log" >&2; exit 1; }
echo "desktop dialog: $dialog_out; Escape watched nothing, yes watched $(realpath "$work/later")"

# The settings dialog, saved through the desktop's own commands: opened from the header (the second
# control after the brand: Library, Settings), the form's Save reached by keyboard (device, GPU
# memory, embedding model, chat model, summaries, OCR languages, Close, Save), and settings.json
# then holds the settings.
settings_out="${out%.png}-settings.png"
step mousemove 60 30 click 1
step key Tab
step key Tab
step key Return
sleep 1
DISPLAY="$display" import -window root ${geometry:+-crop "$geometry"} "$settings_out"
for _ in 1 2 3 4 5 6 7; do step key Tab; done
step key Return
for _ in $(seq 40); do grep -q '"ocr_languages"' "$work/data/settings.json" && break; sleep 0.25; done
grep -q '"ocr_languages"' "$work/data/settings.json" || { echo "desktop settings: Save wrote nothing to settings.json" >&2; cat "$work/app.log" >&2; exit 1; }
watched || { echo "desktop settings: saving the settings lost the watched folders" >&2; exit 1; }
DISPLAY="$display" xdotool key Escape
echo "desktop settings: $settings_out; saved to $work/data/settings.json"

# The answer panel, when asked for (ASK="a question"; not in the test suite: the chat model reads the
# passages on the CPU, which takes a minute or more): the question is typed into the search box and
# asked with Ctrl+Enter, and the window is captured once the answer has had ASK_WAIT seconds.
if [ -n "${ASK:-}" ]; then
  ask_out="${out%.png}-ask.png"
  step mousemove 60 30 click 1
  step key slash
  step type --delay 40 "$ASK"
  DISPLAY="$display" xdotool key ctrl+Return
  sleep "${ASK_WAIT:-150}"
  DISPLAY="$display" import -window root ${geometry:+-crop "$geometry"} "$ask_out"
  echo "desktop ask: $ask_out"
fi
