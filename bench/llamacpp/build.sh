#!/usr/bin/env bash
# Builds llama.cpp's own CPU tools (llama-server, llama-bench, llama-cli) from the llama.cpp source
# vendored in the PyPI sdist of llama-cpp-python, and copies them to bench/llamacpp/bin/.
#
#   bench/llamacpp/build.sh            # defaults below
#   JOBS=8 WORK=/var/tmp/llamacpp bench/llamacpp/build.sh
#
# Environment: VERSION (llama-cpp-python sdist, 0.3.36: llama.cpp ggml-org/llama.cpp@0c1e57098),
# WORK (download, unpack and build folder, /tmp), JOBS (parallel compile jobs, 2), TARGETS,
# LLAMACPP_CC/LLAMACPP_CXX (clang-16/clang++-16), CMAKE_EXTRA (more cmake arguments, word-split).
#
# Why clang: on a CPU with AMX, -march=native turns on ggml's AMX kernels, and GCC 12 (Debian 12's)
# miscompiles them: it drops the stores that fill the tile configuration before `ldtilecfg`, so the
# first `tilezero` dies with SIGILL (seen here in llama-bench and llama-server on Q4_1 weights; the
# open upstream fix is ggml-org/llama.cpp#26954). clang 16 keeps the stores. A GCC build would need
# AMX left out (GGML_NATIVE=OFF and ggml's GGML_AVX512* options), which is not llama.cpp at its best.
set -euo pipefail

VERSION="${VERSION:-0.3.36}"
WORK="${WORK:-/tmp}"
JOBS="${JOBS:-2}"
TARGETS="${TARGETS:-llama-server llama-bench llama-cli}"
# The llama.cpp commit the sdist vendors (its CHANGELOG.md); the sdist has no .git, so the tools
# would report "unknown" without it.
COMMIT="${COMMIT:-0c1e57098}"
CC="${LLAMACPP_CC:-clang-16}"
CXX="${LLAMACPP_CXX:-clang++-16}"
CMAKE_EXTRA="${CMAKE_EXTRA:-}"

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
DL="$WORK/llamacpp-src"
SRC="$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp"
BUILD="$WORK/llamacpp-build-$VERSION-$(basename "$CC")"

# 1. Tools: cmake, make, and clang 16 with its OpenMP runtime (Debian packages).
need=()
command -v cmake >/dev/null || need+=(cmake)
command -v make >/dev/null || need+=(build-essential)
if [ "$CC" = clang-16 ]; then
    command -v clang-16 >/dev/null || need+=(clang-16)
    [ -e /usr/lib/llvm-16/lib/libomp.so ] || need+=(libomp-16-dev)
fi
if [ ${#need[@]} -gt 0 ]; then
    apt-get update
    apt-get install -y "${need[@]}"
fi

# 2. The sdist, from PyPI. Only llama-cpp-python itself from source: with `--no-binary :all:` pip
#    would also build its build requirements (cmake, ninja) from source just to read the metadata.
SDIST="$DL/llama_cpp_python-$VERSION.tar.gz"
if [ ! -f "$SDIST" ]; then
    python3 -m pip download --no-deps --no-binary llama-cpp-python "llama-cpp-python==$VERSION" -d "$DL"
fi
sha256sum "$SDIST"

# 3. Unpack (fresh).
rm -rf "$WORK/llama_cpp_python-$VERSION"
tar xzf "$SDIST" -C "$WORK"
test -f "$SRC/CMakeLists.txt"

# 4. Configure: Release, CPU only, -march=native, OpenMP (ggml's default, when the compiler has it),
#    static libraries so the binaries stand alone, no curl/OpenSSL (no downloads), no web UI (it
#    would be fetched from Hugging Face or built with npm; the benchmark only uses the HTTP API).
# shellcheck disable=SC2086
cmake -S "$SRC" -B "$BUILD" \
    -DCMAKE_C_COMPILER="$CC" \
    -DCMAKE_CXX_COMPILER="$CXX" \
    -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=ON \
    -DGGML_OPENMP=ON \
    -DLLAMA_CURL=OFF \
    -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_BUILD_TESTS=OFF \
    -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_COMMIT="$COMMIT" \
    $CMAKE_EXTRA

# 5. Build only the tools the benchmark needs.
start=$(date +%s)
# shellcheck disable=SC2086
cmake --build "$BUILD" --config Release -j"$JOBS" --target $TARGETS
echo "build: $(( $(date +%s) - start )) s with -j$JOBS"

# 6. Copy them next to this script (bin/ is git-ignored).
mkdir -p "$HERE/bin"
for t in $TARGETS; do
    cp "$BUILD/bin/$t" "$HERE/bin/"
done
grep -E "^(GGML_OPENMP|GGML_NATIVE|CMAKE_BUILD_TYPE|CMAKE_CXX_COMPILER|OpenMP_CXX_FLAGS)[:=]" "$BUILD/CMakeCache.txt" | grep -v "^//" > "$HERE/bin/build-config.txt"
"$HERE/bin/llama-server" --version 2>&1 | tee -a "$HERE/bin/build-config.txt"
ls -la "$HERE/bin"
