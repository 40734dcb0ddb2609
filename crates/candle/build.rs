//! With the `cuda` feature, compiles warpfold's own kernels (src/kernels/fused.cu) to PTX with
//! nvcc, for the card named by CUDA_COMPUTE_CAP (as candle-kernels does; 90 for an H100/H200, 89 for
//! an RTX 40xx, 86 for an RTX 30xx). Without the feature nothing is built and nvcc is not needed.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=src/kernels/fused.cu");
    println!("cargo::rerun-if-env-changed=CUDA_COMPUTE_CAP");
    println!("cargo::rerun-if-env-changed=NVCC");
    if std::env::var_os("CARGO_FEATURE_CUDA").is_none() {
        return;
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR")).join("fused.ptx");
    let cap = std::env::var("CUDA_COMPUTE_CAP").unwrap_or_else(|_| "80".into());
    let cap: String = cap.chars().filter(char::is_ascii_digit).collect();
    let nvcc = std::env::var("NVCC").unwrap_or_else(|_| "nvcc".into());
    let status = Command::new(&nvcc)
        .args(["--ptx", "-O3", "-std=c++17", &format!("-arch=compute_{cap}"), "-o"])
        .arg(&out)
        .arg("src/kernels/fused.cu")
        .status()
        .unwrap_or_else(|e| panic!("running {nvcc} (needed by the `cuda` feature; set NVCC or put it on PATH): {e}"));
    assert!(status.success(), "{nvcc} failed to compile src/kernels/fused.cu");
}
