#!/usr/bin/env bash
# The CPU encoder on an Intel Xeon when the build machine is an AMD (issue 17): the GPU
# machine's host CPU (the device tool's H200 hosts are Intel Xeons), the GPU unused. The CPU build of
# warpfold and all-MiniLM-L6-v2 in f32 travel in two parts (a call carries at most 64 MiB), then
# `warpfold bench --peer` runs there as on the build machine, pinned to two physical cores (as the
# 2-core Intel build machines of 2026-12-01 and 12-02), once with each attention kernel, against
# sentence-transformers from the machine's own torch environment.
#   here:  bash bench/cpu/device-host.sh pack                 -> .gpu-extra/intel/{part-1.tar,part-2}
#   there: bash bench/cpu/device-host.sh put1                 (call 1: carry .gpu-extra/intel/part-1.tar)
#          bash bench/cpu/device-host.sh put2 && bash bench/cpu/device-host.sh run tiled
#                                                             (call 2: carry .gpu-extra/intel/part-2)
#          bash bench/cpu/device-host.sh run products         (call 3; `run` alone runs both)
#          bash bench/cpu/device-host.sh run probe            (bench/cpu/amx_probe.py: f32 against bf16
#                                                             in PyTorch, products and sentence-transformers)
#          bash bench/cpu/device-host.sh test                 (the CPU kernels' unit tests, AVX-512 included)
#          bash bench/cpu/device-host.sh run avx512 gemm ...  (the weights' products: AVX-512
#                                                             panels, the gemm crate, AVX2 panels; `profile-V`
#                                                             for WARPFOLD_PROFILE's stage times of variant V)
# Intel MKL (f32 `sgemm` and the bf16 path, which need it) travels in more parts:
#   here:  bash bench/cpu/device-host.sh pack-mkl             -> .gpu-extra/intel/mkl.part-*
#   there: bash bench/cpu/device-host.sh put-mkl              (one call per part, each carrying one part,
#                                                             in order; the last one unpacks)
#          bash bench/cpu/device-host.sh run mkl bf16         (MKL f32; bf16 against the peer in f32 and bf16)
#          bash bench/cpu/device-host.sh run auto auto-tiled  (the default, bf16x3 on AMX with attention on
#                                                             the tiles since 2026-12-04; and with attention
#                                                             in f32 AVX-512 tiles)
set -euo pipefail
cd "$(dirname "$0")/../.."
P=.gpu-extra/intel
D=/tmp/intel
M=all-MiniLM-L6-v2
case ${1:?usage: device-host.sh pack|put1|put2|test|run [VARIANT...]} in
  pack)
    rm -rf "$P" && mkdir -p "$P/stage/models/$M"
    xz -T2 -3 -c target/release/warpfold > "$P/stage/warpfold.xz"
    # The candle crate's unit tests, to run the kernels this CPU lacks (AVX-512) on that one.
    tests=$(cargo test --release --locked -p warpfold-candle --lib --no-run --message-format=json 2>/dev/null |
      python3 -c 'import json,sys; print([j["executable"] for j in map(json.loads, sys.stdin) if j.get("profile", {}).get("test")][-1])')
    xz -T2 -3 -c "$tests" > "$P/stage/candle-tests.xz"
    tar -C "models/$M" --exclude=./model.safetensors -cf - . | tar -C "$P/stage/models/$M" -xf -
    # Where the weights are cut: each part and the tree (~8.6 MB on 2026-12-04) under 64 MiB.
    cut=40000000
    head -c $cut "models/$M/model.safetensors" > "$P/stage/weights-1"
    tail -c +$((cut + 1)) "models/$M/model.safetensors" > "$P/part-2"
    (cd "models/$M" && sha256sum model.safetensors) > "$P/stage/SHA256"
    tar -C "$P/stage" -cf "$P/part-1.tar" . && rm -rf "$P/stage"
    ls -l "$P" ;;
  pack-mkl)
    # The libraries MKL opens on an AVX-512 Xeon (runtime, core, sequential layer, LP64 interface,
    # the AVX-512 and AVX10 kernels), compressed and cut under a call's 64 MiB with the tree.
    rm -f "$P"/mkl.part-*
    tar -C models/mkl -cf - libmkl_rt.so.3 libmkl_core.so.3 libmkl_sequential.so.3 libmkl_intel_lp64.so.3 \
      libmkl_avx512.so.3 libmkl_avx10.so.3 | xz -T2 -6 | split -b 50M - "$P/mkl.part-"
    ls -l "$P"/mkl.part-* ;;
  put-mkl)
    mkdir -p $D/mkl-parts && cp $P/mkl.part-* $D/mkl-parts/
    if [ -n "${LAST:-}" ]; then
      mkdir -p $D/models/mkl && cat $D/mkl-parts/mkl.part-* | xz -dc | tar -C $D/models/mkl -xf - && ls -l $D/models/mkl
    fi ;;
  put1)
    rm -rf $D && mkdir -p $D && tar -C $D -xf $P/part-1.tar && ls $D ;;
  put2)
    cat $D/weights-1 $P/part-2 > $D/models/$M/model.safetensors && rm $D/weights-1
    (cd $D/models/$M && sha256sum -c ../../SHA256)
    xz -dc $D/warpfold.xz > $D/warpfold && chmod +x $D/warpfold
    xz -dc $D/candle-tests.xz > $D/candle-tests && chmod +x $D/candle-tests ;;
  test)
    OUT=${OUT:-/tmp/out}
    mkdir -p "$OUT"
    grep -o -w -E 'avx512f|avx2|fma|amx_tile' /proc/cpuinfo | sort -u | paste -sd' '
    for t in panels fused_cpu_layers tiled_head row_kernels exp_and_erf; do
      (cd crates/candle && $D/candle-tests --test-threads 2 "$t") 2>&1 | grep -E "^test |test result"
    done | tee "$OUT/candle-tests.txt" ;;
  run)
    OUT=${OUT:-/tmp/out}
    mkdir -p "$OUT"
    lscpu > "$OUT/cpu.txt"
    # Two CPUs on different physical cores (the first two core ids lscpu lists).
    cpus=$(lscpu -p=CPU,CORE | grep -v '^#' | sort -t, -k2,2n -u | head -2 | cut -d, -f1 | paste -sd,)
    echo "pinned to CPUs $cpus" | tee "$OUT/pinning.txt"
    export WARPFOLD_MODELS_DIR=$D/models WARPFOLD_LOG=warn
    run() {
      local name=$1
      shift
      taskset -c "$cpus" $D/warpfold bench --peer --peer-python /opt/torch/.venv/bin/python --rounds "${ROUNDS:-3}" \
        --documents 64 --packer-sequences 100000 --out "$OUT/$name.json" "$@" > "$OUT/$name.log" 2>&1
      grep -E "kernels|sentence-transformers|end to end|median|ratio|x$" "$OUT/$name.log" | head -24
    }
    shift
    [ $# -gt 0 ] || set -- tiled products
    for variant in "$@"; do
      case $variant in
        probe) /opt/torch/.venv/bin/python bench/cpu/amx_probe.py $D/models/$M --cpus "$cpus" | tee "$OUT/amx-probe.txt" ;;
        tiled|avx512) WARPFOLD_MKL=off run "$variant" ;;
        products) WARPFOLD_MKL=off WARPFOLD_CPU_ATTENTION=products run products ;;
        gemm) WARPFOLD_MKL=off WARPFOLD_CPU_PANELS=off run gemm ;;
        mkl) [ -f $D/models/mkl/libmkl_rt.so.3 ] || { echo "MKL is not there: put-mkl first" >&2; exit 2; }; WARPFOLD_CPU_PRECISION=f32 run mkl ;;
        bf16) WARPFOLD_CPU_PRECISION=bf16 run bf16 --peer-precision f32,bf16 ;;
        bf16x3) WARPFOLD_CPU_PRECISION=bf16x3 run bf16x3 ;;
        auto) run auto ;;
        auto-tiled) WARPFOLD_CPU_ATTENTION=tiled run auto-tiled ;;
        avx2) WARPFOLD_MKL=off WARPFOLD_CPU_PANELS=avx2 run avx2 ;;
        profile-*)
          v=${variant#profile-}
          panels=$([ "$v" = gemm ] && echo off || echo "$v")
          WARPFOLD_MKL=off WARPFOLD_PROFILE=1 WARPFOLD_CPU_PANELS=$panels taskset -c "$cpus" $D/warpfold bench --corpus stress --documents 16 \
            > "$OUT/$variant.out" 2> "$OUT/$variant.err"
          # Totals over the run's bins: tokens, timed ms, and the row phase's and attention's ms.
          sed 's/\x1b\[[0-9;]*m//g' "$OUT/$variant.err" | awk -v v="$variant" '
            / in timed stages/ { for (i = 1; i < NF; i++) if ($(i+1) ~ /^tokens/) t += $i; ms += $(NF-4) }
            /projections, feed-forward, norms/ { for (i = 1; i < NF; i++) if ($(i+1) == "ms") rows += $i }
            /  attention  / { for (i = 1; i < NF; i++) if ($(i+1) == "ms") att += $i }
            END { printf "%s: %d tokens in bins, %.0f ms timed, row phase %.0f ms, attention %.0f ms\n", v, t, ms, rows, att }' ;;
        *) echo "unknown variant $variant" >&2; exit 2 ;;
      esac
    done ;;
esac
