#!/usr/bin/env bash
# On the GPU machine (nvcc 13.0, 16 cores): compile candle-flash-attn 0.11.1's FlashAttention-2 files
# for the gaming cards, compute capability 8.6 (RTX 30xx) and 8.9 (RTX 40xx), exactly as a user's
# GPU build does through scripts/gpu/nvcc-fa-kernels: the default models' kernels for real, the rest
# as stubs. Both architectures at once, 8 jobs each (an 8-core desktop per architecture), every file
# timed; the real objects come back compressed, with their ELF architecture checked.
#
# Carry: .gpu-extra/fa-src.tar.xz (the crate's kernels/ and CUTLASS v3.5.0's headers, made on the
# build machine from cudaforge's checkout). Run: bash bench/gpu/compile-fa-consumer.sh
set -uo pipefail
repo=$(pwd)
out=${OUT:-/tmp/out}
mkdir -p "$out"
exec > >(tee "$out/compile-fa-consumer.log") 2>&1
nvcc=/usr/local/cuda/bin/nvcc
"$nvcc" --version | tail -2
nproc
work=/tmp/fa-consumer
rm -rf "$work" && mkdir -p "$work" && tar -C "$work" -xJf .gpu-extra/fa-src.tar.xz
kernels=$(sed -n 's/^pub const DEFAULT_KERNELS: &str = "\(.*\)";$/\1/p' crates/candle/src/flash.rs)
echo "kernels: $kernels"
cutlass=$work/cutlass
flags=(--default-stream per-thread -std=c++17 -O3 -U__CUDA_NO_HALF_OPERATORS__ -U__CUDA_NO_HALF_CONVERSIONS__
  -U__CUDA_NO_HALF2_OPERATORS__ -U__CUDA_NO_BFLOAT16_CONVERSIONS__ --expt-relaxed-constexpr --expt-extended-lambda
  --use_fast_math -DCANDLE_FLASH_ATTN_HEADER_HASH=0xe8c0b6f940f33eb9 -Xcompiler -fPIC -I"$cutlass" -I"$cutlass/include"
  -I"$cutlass/tools/util/include" -DUSE_CUTLASS)

# One file: compile through the wrapper, print "sm_CAP  stem  real|stub  seconds  max-RSS-KiB  rc".
one() {
  local cap=$1 s=$2 dir=$work/sm$1 rss=- start end rc kind
  start=$(date +%s.%N)
  if [ -x /usr/bin/time ]; then
    (cd "$work" && WARPFOLD_REAL_NVCC=$nvcc WARPFOLD_FA_KERNELS=$kernels /usr/bin/time -f %M -o "$dir/$s.rss" \
      bash "$repo/scripts/gpu/nvcc-fa-kernels" "-gencode=arch=compute_$cap,code=sm_$cap" -c -o "$dir/$s.o" "${flags[@]}" "kernels/$s.cu") > "$dir/$s.log" 2>&1
    rc=$?
    rss=$(tail -1 "$dir/$s.rss" 2>/dev/null || echo -)
  else
    (cd "$work" && WARPFOLD_REAL_NVCC=$nvcc WARPFOLD_FA_KERNELS=$kernels \
      bash "$repo/scripts/gpu/nvcc-fa-kernels" "-gencode=arch=compute_$cap,code=sm_$cap" -c -o "$dir/$s.o" "${flags[@]}" "kernels/$s.cu") > "$dir/$s.log" 2>&1
    rc=$?
  fi
  end=$(date +%s.%N)
  kind=real
  grep -q "a stub" "$dir/$s.log" && kind=stub
  printf 'sm_%s\t%s\t%s\t%s\t%s\t%s\n' "$cap" "$s" "$kind" "$(awk "BEGIN{printf \"%.1f\", $end - $start}")" "$rss" "$rc"
}
export -f one
export work repo nvcc kernels
export flags_joined="${flags[*]}"

compile_arch() {
  local cap=$1 dir=$work/sm$1 t0 t1 stems
  mkdir -p "$dir"
  # Real kernels first, so the long compiles start at once.
  stems=$( (cd "$work/kernels" && ls flash_*.cu) | sed 's/\.cu$//' | while read -r s; do
    n=${s#flash_fwd_}; n=${n%_sm80}
    if [ "$s" = flash_api ] || [[ ",$kernels," == *",$n,"* ]]; then echo "0 $s"; else echo "1 $s"; fi
  done | sort | cut -d' ' -f2)
  t0=$(date +%s.%N)
  printf '%s\n' $stems | xargs -P 8 -I{} bash -c 'flags=($flags_joined); one '"$cap"' {}' | tee "$out/fa-sm$cap.tsv"
  t1=$(date +%s.%N)
  echo "sm_$cap: all $(echo "$stems" | wc -w) files in $(awk "BEGIN{printf \"%.1f\", $t1 - $t0}") s of wall time (8 jobs)" | tee "$out/fa-sm$cap.wall"
}

compile_arch 86 &
a=$!
compile_arch 89 &
b=$!
wait $a $b
for cap in 86 89; do
  echo "== sm_$cap: real objects, their architecture and size"
  for o in $work/sm$cap/*.o; do
    s=$(basename "$o" .o)
    grep -q "a stub" "$work/sm$cap/$s.log" && continue
    echo "$s $(stat -c %s "$o") bytes: $(/usr/local/cuda/bin/cuobjdump --list-elf "$o" 2>/dev/null | grep -o 'sm_[0-9a-z]*' | sort -u | tr '\n' ' ')"
  done
  fails=$(awk -F'\t' '$6 != 0' "$out/fa-sm$cap.tsv" | wc -l)
  echo "failed compiles: $fails"
  awk -F'\t' '$6 != 0 {print $2}' "$out/fa-sm$cap.tsv" | while read -r s; do tail -5 "$work/sm$cap/$s.log"; done
  (cd "$work/sm$cap" && tar -cf - $(for o in *.o; do s=${o%.o}; grep -q "a stub" "$s.log" || echo "$o"; done) | xz -T8 -6 > "$out/fa-sm$cap-real-objects.tar.xz")
done
ls -la "$out"
