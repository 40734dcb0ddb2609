#!/usr/bin/env bash
# Large files to the GPU machine in parts: one call carries at most 64 MiB, and the machine keeps
# /tmp while it stays warm (about 30 s after a call). So the files are packed into one tar stream
# on the build machine and cut into parts of 60,000,000 bytes (PART_BYTES: smaller, when the working
# tree that travels with each call grows past 64 MiB less a part, ~6.8 MiB); each call carries one part and
# appends it here; the last one checks the whole stream's sha256 and unpacks it.
#
#   build machine:  bash bench/gpu/stream.sh pack DIR      # DIR's files -> .gpu-extra/stream/part-NN + SHA256
#                   bash bench/gpu/stream.sh pack DIR NAME... # only those of DIR's entries, in that order
#                                                            # (small files first: the early parts hold them)
#   GPU machine:    bash bench/gpu/stream.sh put           # appends the carried part(s) to /tmp/stream.tar
#                   bash bench/gpu/stream.sh open DEST     # checks the sha256, unpacks into DEST
set -euo pipefail
case "${1:-}" in
  pack)
    src=$2
    shift 2
    rm -rf .gpu-extra/stream && mkdir -p .gpu-extra/stream
    if [ $# -gt 0 ]; then tar -C "$src" -cf - "$@"; else tar -C "$src" -cf - .; fi | split -b "${PART_BYTES:-60000000}" -d -a 2 - .gpu-extra/stream/part-
    cat .gpu-extra/stream/part-* | sha256sum | cut -d' ' -f1 > .gpu-extra/stream/SHA256
    ls .gpu-extra/stream | grep -c part- | tee .gpu-extra/stream/PARTS ;;
  put)
    touch /tmp/stream.parts
    for p in .gpu-extra/stream/part-*; do
      n=$(basename "$p")
      if grep -qx "$n" /tmp/stream.parts; then echo "$n: already in"; continue; fi
      # Parts must come in order: a gap means a call was lost (or the machine went cold).
      want=$(printf 'part-%02d' "$(wc -l < /tmp/stream.parts)")
      [ "$n" = "$want" ] || { echo "stream: got $n, expected $want (have $(wc -l < /tmp/stream.parts) parts)"; exit 1; }
      cat "$p" >> /tmp/stream.tar && echo "$n" >> /tmp/stream.parts
    done
    echo "stream: $(wc -l < /tmp/stream.parts) parts, $(stat -c %s /tmp/stream.tar) bytes" ;;
  open)
    dest=$2
    have=$(sha256sum /tmp/stream.tar | cut -d' ' -f1)
    want=$(cat .gpu-extra/stream/SHA256)
    [ "$have" = "$want" ] || { echo "stream: sha256 $have, expected $want"; exit 1; }
    mkdir -p "$dest" && tar -C "$dest" -xf /tmp/stream.tar && echo "stream: unpacked into $dest" && ls -la "$dest" ;;
  *) echo "usage: stream.sh pack DIR | put | open DEST" >&2; exit 2 ;;
esac
