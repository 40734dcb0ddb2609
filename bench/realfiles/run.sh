#!/usr/bin/env bash
# Real files through `warpfold index`: the PDF manuals of Debian's texlive-latex-recommended-doc
# (155 typeset PDFs: pdfTeX, LuaTeX, XeTeX, dvips, Distiller) and the test resources of OCRmyPDF's
# source distribution (real scans in JBIG2, CCITT G4, JPEG 2000, odd and broken PDFs, a damaged
# .odt). For each set: how many documents were indexed, had no text or failed, each reason, which
# were read by Poppler's pdftotext instead of the built-in parser, and the word recall of the
# indexed text against pdftotext's (PDFs with a text layer).
#
#   bash bench/realfiles/run.sh            # fetches both (pinned, checksummed) into bench/out/realfiles
#   WARPFOLD=target/release/warpfold ...   # the binary (default target/release/warpfold)
set -euo pipefail
cd "$(dirname "$0")/../.."
WARPFOLD=${WARPFOLD:-target/release/warpfold}
OUT=bench/out/realfiles
mkdir -p "$OUT"
TEX_DEB=texlive-latex-recommended-doc_2022.20230122-3_all.deb
TEX_SHA=8bea1f81bf50354fa4f3046c2dbb82efba9b8520aca0b2ab12eed18554a66c11
OCR_SDIST=ocrmypdf-17.13.0.tar.gz
OCR_SHA=151c35d810eb628fbc5cb9bbe80b834ecf094737efa0e7a2e9e1fac3c730ed49
if [ ! -d "$OUT/manuals" ]; then
  [ -f "$OUT/$TEX_DEB" ] || (cd "$OUT" && apt-get download texlive-latex-recommended-doc=2022.20230122-3)
  echo "$TEX_SHA  $OUT/$TEX_DEB" | sha256sum -c --quiet
  rm -rf "$OUT/deb" && mkdir -p "$OUT/deb" "$OUT/manuals"
  dpkg-deb --fsys-tarfile "$OUT/$TEX_DEB" | tar -x -C "$OUT/deb"
  # one flat folder, named by their package folder (two manuals share a file name)
  find "$OUT/deb/usr/share/doc/texlive-doc" -name '*.pdf' | while read -r f; do
    rel=${f#"$OUT/deb/usr/share/doc/texlive-doc/"}
    cp "$f" "$OUT/manuals/${rel//\//__}"
  done
fi
if [ ! -d "$OUT/ocrmypdf" ]; then
  [ -f "$OUT/$OCR_SDIST" ] || python3 -m pip download --quiet --no-deps --no-binary :all: ocrmypdf==17.13.0 -d "$OUT"
  echo "$OCR_SHA  $OUT/$OCR_SDIST" | sha256sum -c --quiet
  mkdir -p "$OUT/ocrmypdf"
  tar -xzf "$OUT/$OCR_SDIST" -C "$OUT/ocrmypdf" --strip-components=3 ocrmypdf-17.13.0/tests/resources
fi
for set in manuals ocrmypdf; do
  rm -f "$OUT/$set.db"*
  start=$(date +%s.%N)
  OMP_THREAD_LIMIT=1 "$WARPFOLD" index "$OUT/$set" --db "$OUT/$set.db" --json > "$OUT/$set.json"
  end=$(date +%s.%N)
  python3 bench/realfiles/report.py "$OUT/$set" "$OUT/$set.db" "$OUT/$set.json" "$(echo "$end - $start" | bc)"
done
