# Sourced by scripts/setup.sh and scripts/desktop.sh (from the repository root): the build both do,
# written once so that the two choose and make it alike.

# Installs the system packages that are missing, builds the web UI, then builds PACKAGE with cargo:
# the GPU build in target/gpu where scripts/gpu/plan.sh finds an NVIDIA GPU and a CUDA toolkit
# (FlashAttention-2 on compute capability 8.0+, the masked-attention path below), else the CPU build
# with CPU_ARGS (plan.sh says which and why). Sets `app` to the path of BINARY in the build made, and
# leaves plan.sh's settings (WARPFOLD_FEATURES empty for the CPU build) to the caller.
build_app() { # package binary cpu-args...
  local package=$1 binary=$2
  shift 2
  bash scripts/install-deps.sh
  bash scripts/build-ui.sh
  eval "$(bash scripts/gpu/plan.sh)"
  if [ -n "$WARPFOLD_FEATURES" ]; then
    export CUDA_COMPUTE_CAP
    # FlashAttention-2's compiled kernels are kept here (plan.sh names one folder per card and list).
    [ -n "${CANDLE_FLASH_ATTN_BUILD_DIR:-}" ] && mkdir -p "$CANDLE_FLASH_ATTN_BUILD_DIR"
    CARGO_TARGET_DIR=target/gpu cargo build --release --locked -p "$package" --features "$WARPFOLD_FEATURES"
    app=./target/gpu/release/$binary
  else
    cargo build --release --locked "$@"
    app=./target/release/$binary
  fi
}
