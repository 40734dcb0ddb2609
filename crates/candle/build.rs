//! With the `cuda` feature, compiles warpfold's own kernels (src/kernels/*.cu) to PTX with
//! nvcc, for the card named by CUDA_COMPUTE_CAP (as candle-kernels does; 90 for an H100/H200, 89 for
//! an RTX 40xx, 86 for an RTX 30xx). Without the feature nothing is built and nvcc is not needed.
//! It also records `WARPFOLD_FA_KERNELS` (which FlashAttention-2 kernels the build compiled) for
//! src/flash.rs.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=src/kernels/fused.cu");
    println!("cargo::rerun-if-changed=src/kernels/encoder.cu");
    println!("cargo::rerun-if-changed=src/kernels/common.cuh");
    println!("cargo::rerun-if-env-changed=CUDA_COMPUTE_CAP");
    println!("cargo::rerun-if-env-changed=NVCC");
    println!("cargo::rerun-if-env-changed=WARPFOLD_FA_KERNELS");
    // Which FlashAttention-2 kernels candle-flash-attn compiled for real (scripts/gpu/nvcc-fa-kernels
    // stubs the others): src/flash.rs sends every other shape down the masked path.
    let kernels = std::env::var("WARPFOLD_FA_KERNELS").unwrap_or_else(|_| "all".into());
    for name in kernels.split(',').map(str::trim).filter(|k| *k != "all") {
        // Paged-cache (split-KV) kernels are named like the others after a `splitkv_` prefix.
        let ok = name.strip_prefix("splitkv_").unwrap_or(name).strip_prefix("hdim").is_some_and(|rest| {
            let rest = rest.strip_suffix("_causal").unwrap_or(rest);
            rest.split_once('_').is_some_and(|(dim, ty)| dim.parse::<u32>().is_ok() && matches!(ty, "fp16" | "bf16"))
        });
        assert!(ok, "WARPFOLD_FA_KERNELS: {name:?} is not a kernel name like hdim64_bf16_causal (or `all`)");
    }
    println!("cargo::rustc-env=WARPFOLD_FA_KERNELS_BUILT={kernels}");
    if std::env::var_os("CARGO_FEATURE_CUDA").is_none() {
        return;
    }
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let cap = std::env::var("CUDA_COMPUTE_CAP").unwrap_or_else(|_| "80".into());
    let cap: String = cap.chars().filter(char::is_ascii_digit).collect();
    let nvcc = std::env::var("NVCC").unwrap_or_else(|_| "nvcc".into());
    for name in ["fused", "encoder"] {
        let source = format!("src/kernels/{name}.cu");
        let status = Command::new(&nvcc)
            .args(["--ptx", "-O3", "-std=c++17", &format!("-arch=compute_{cap}"), "-o"])
            .arg(out_dir.join(format!("{name}.ptx")))
            .arg(&source)
            .status()
            .unwrap_or_else(|e| panic!("running {nvcc} (needed by the `cuda` feature; set NVCC or put it on PATH): {e}"));
        assert!(status.success(), "{nvcc} failed to compile {source}");
    }
}
