#!/usr/bin/env bash
# Decides how to build warpfold on this machine and prints the decision as shell assignments
# (`eval "$(bash scripts/gpu/plan.sh)"`), with a human explanation on stderr:
#
#   an NVIDIA GPU (nvidia-smi) and a CUDA toolkit (nvcc) -> features flash-attn for compute
#       capability 8.0 and up (FlashAttention-2's varlen kernel), cuda below it (the masked
#       attention path: FA-2 needs Ampere or newer), CUDA_COMPUTE_CAP set to the card's
#   an NVIDIA GPU but no toolkit                        -> the CPU build, and exactly what to install
#   no NVIDIA GPU                                       -> the CPU build
#
# A flash-attn build compiles only the FlashAttention-2 kernels the default models call (about 6
# files instead of 53: minutes instead of hours), through scripts/gpu/nvcc-fa-kernels; set
# WARPFOLD_FA_KERNELS=all for every kernel (or a list of names, see crates/candle/src/flash.rs).
# Those settings are printed as `export` lines, with CANDLE_FLASH_ATTN_BUILD_DIR (where the compiled
# kernels are kept, one folder per card and list) for the caller to create.
#
# WARPFOLD_BUILD=cpu forces the CPU build; WARPFOLD_BUILD=cuda|flash-attn forces a GPU build (for a
# machine whose GPU is elsewhere, e.g. building here for the GPU machine). NVIDIA_SMI and NVCC name
# the programs to ask (the tests point them at stand-ins).
set -uo pipefail
smi=${NVIDIA_SMI:-nvidia-smi}
nvcc=${NVCC:-}
if [ -z "$nvcc" ]; then
  nvcc=$(command -v nvcc || true)
  [ -z "$nvcc" ] && [ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/nvcc" ] && nvcc="$CUDA_HOME/bin/nvcc"
  [ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
fi

repo=$(cd "$(dirname "$0")/../.." && pwd)
say() { echo "gpu plan: $*" >&2; }
emit() {
  echo "WARPFOLD_FEATURES='$1'"
  echo "CUDA_COMPUTE_CAP='$2'"
  echo "WARPFOLD_GPU_NAME='$3'"
  echo "WARPFOLD_ATTENTION='$4'"
  [ "$1" = flash-attn ] && kernels
  return 0
}
# The FlashAttention-2 kernels to compile, and nvcc-fa-kernels in front of the real nvcc.
kernels() {
  local list=${WARPFOLD_FA_KERNELS:-}
  if [ -z "$list" ]; then
    list=$(sed -n '/^pub const DEFAULT_KERNELS: &str =/,/;$/p' "$repo/crates/candle/src/flash.rs" | grep -o '"[^"]*"' | tr -d '"')
  fi
  local real=${WARPFOLD_REAL_NVCC:-$nvcc}
  [ "$(basename "$real")" = nvcc-fa-kernels ] && real=""
  [ -z "$real" ] && real=nvcc
  say "FlashAttention-2 kernels compiled: $list"
  echo "export WARPFOLD_FA_KERNELS='$list'"
  echo "export WARPFOLD_REAL_NVCC='$real'"
  echo "export NVCC='$repo/scripts/gpu/nvcc-fa-kernels'"
  echo "export CANDLE_FLASH_ATTN_BUILD_DIR='$repo/target/gpu/flash-attn-sm${2:-$cap}-$(echo "$list" | cksum | cut -d' ' -f1)'"
}

case "${WARPFOLD_BUILD:-}" in
  cpu) say "WARPFOLD_BUILD=cpu: the CPU build"; emit "" "" "" "cpu"; exit 0 ;;
  cuda|flash-attn)
    cap=${CUDA_COMPUTE_CAP:-90}
    say "WARPFOLD_BUILD=$WARPFOLD_BUILD: building for compute capability $cap without asking the GPU"
    emit "$WARPFOLD_BUILD" "$cap" "" "$([ "$WARPFOLD_BUILD" = flash-attn ] && echo flash-attention-2 || echo masked)"
    exit 0 ;;
  "") ;;
  *) say "WARPFOLD_BUILD must be cpu, cuda or flash-attn (got $WARPFOLD_BUILD)"; exit 2 ;;
esac

if ! gpu=$("$smi" --query-gpu=name,compute_cap,memory.total --format=csv,noheader 2>/dev/null) || [ -z "$gpu" ]; then
  say "no NVIDIA GPU found (nvidia-smi did not answer): the CPU build"
  emit "" "" "" "cpu"
  exit 0
fi
first=$(echo "$gpu" | head -n1)
name=$(echo "$first" | cut -d, -f1 | sed 's/^ *//; s/ *$//')
cc=$(echo "$first" | cut -d, -f2 | tr -d ' ')
memory=$(echo "$first" | cut -d, -f3 | sed 's/^ *//')
cap=$(echo "$cc" | tr -d '.')
count=$(echo "$gpu" | wc -l)
say "found $count NVIDIA GPU(s); the first: $name, compute capability $cc, $memory"
if ! [[ "$cap" =~ ^[0-9]+$ ]]; then
  say "could not read the compute capability ($cc): the CPU build"
  emit "" "" "$name" "cpu"
  exit 0
fi
if [ -z "$nvcc" ]; then
  say "no CUDA toolkit (nvcc) found: building for the CPU. For the GPU build, install the CUDA toolkit"
  say "  (12.x or 13.x; Debian: 'apt install nvidia-cuda-toolkit', or NVIDIA's cuda-toolkit packages,"
  say "  then put its bin/ on PATH or set CUDA_HOME) and run this script again."
  emit "" "" "$name" "cpu"
  exit 0
fi
say "CUDA toolkit: $("$nvcc" --version 2>/dev/null | grep -o 'release [0-9.]*' | head -n1)"
if [ "$cap" -ge 80 ]; then
  say "compute capability $cc >= 8.0: FlashAttention-2 varlen (features flash-attn, CUDA_COMPUTE_CAP=$cap)"
  emit "flash-attn" "$cap" "$name" "flash-attention-2"
else
  say "compute capability $cc < 8.0: FlashAttention-2 needs Ampere or newer; the CUDA build runs the masked attention path"
  emit "cuda" "$cap" "$name" "masked"
fi
