//! How `scripts/setup.sh` and `scripts/desktop.sh` choose the build (`scripts/gpu/plan.sh`), on
//! stand-ins for `nvidia-smi` and `nvcc`: every kind of machine a user may have.

use std::path::Path;
use std::process::Command;

use crate::common::repo;

fn stand_in(dir: &Path, name: &str, output: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\ncat <<'OUT'\n{output}\nOUT\n")).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    path.display().to_string()
}

/// (assignments printed, explanation printed) for a machine with `smi` and `nvcc`.
fn plan(smi: &str, nvcc: Option<&str>, env: &[(&str, &str)]) -> (String, String) {
    let mut cmd = Command::new("bash");
    cmd.arg(repo().join("scripts/gpu/plan.sh")).env("NVIDIA_SMI", smi).env_remove("WARPFOLD_BUILD").env_remove("CUDA_HOME");
    match nvcc {
        Some(n) => cmd.env("NVCC", n),
        // No nvcc anywhere: an empty PATH apart from what bash itself needs.
        None => cmd.env("PATH", "/usr/bin:/bin").env_remove("NVCC"),
    };
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    (String::from_utf8(out.stdout).unwrap(), String::from_utf8(out.stderr).unwrap())
}

#[test]
fn the_build_follows_the_machine_gpu_and_toolkit() {
    let dir = tempfile::tempdir().unwrap();
    let ada = stand_in(dir.path(), "smi-4070", "NVIDIA GeForce RTX 4070, 8.9, 12282 MiB");
    let turing = stand_in(dir.path(), "smi-2060", "NVIDIA GeForce RTX 2060, 7.5, 6144 MiB");
    let nvcc = stand_in(dir.path(), "nvcc", "Cuda compilation tools, release 12.4, V12.4.131");
    let missing = dir.path().join("no-nvidia-smi").display().to_string();
    assert!(
        !Path::new("/usr/bin/nvcc").exists() && !Path::new("/usr/local/cuda/bin/nvcc").exists(),
        "this test expects a machine without a CUDA toolkit"
    );

    let (out, why) = plan(&ada, Some(&nvcc), &[]);
    assert!(out.contains("WARPFOLD_FEATURES='flash-attn'") && out.contains("CUDA_COMPUTE_CAP='89'"), "{out}");
    assert!(why.contains("RTX 4070") && why.contains("FlashAttention-2") && why.contains("release 12.4"), "{why}");

    let (out, why) = plan(&turing, Some(&nvcc), &[]);
    assert!(out.contains("WARPFOLD_FEATURES='cuda'") && out.contains("CUDA_COMPUTE_CAP='75'") && out.contains("'masked'"), "{out}");
    assert!(why.contains("needs Ampere or newer"), "{why}");

    let (out, why) = plan(&ada, None, &[]);
    assert!(out.contains("WARPFOLD_FEATURES=''"), "a GPU without a toolkit builds for the CPU: {out}");
    assert!(why.contains("no CUDA toolkit") && why.contains("install the CUDA toolkit"), "it says what to install: {why}");

    let (out, why) = plan(&missing, Some(&nvcc), &[]);
    assert!(out.contains("WARPFOLD_FEATURES=''") && why.contains("no NVIDIA GPU"), "{out}{why}");

    let (out, _) = plan(&ada, Some(&nvcc), &[("WARPFOLD_BUILD", "cpu")]);
    assert!(out.contains("WARPFOLD_FEATURES=''"), "{out}");
    let (out, _) = plan(&missing, None, &[("WARPFOLD_BUILD", "flash-attn"), ("CUDA_COMPUTE_CAP", "86")]);
    assert!(out.contains("WARPFOLD_FEATURES='flash-attn'") && out.contains("CUDA_COMPUTE_CAP='86'"), "{out}");
}
