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
    // Only the default models' kernels, through nvcc-fa-kernels in front of the machine's nvcc.
    let defaults = "hdim32_fp16,hdim64_bf16,hdim64_bf16_causal,hdim128_bf16,hdim128_bf16_causal,splitkv_hdim64_bf16,splitkv_hdim128_bf16";
    assert!(out.contains(&format!("export WARPFOLD_FA_KERNELS='{defaults}'")), "{out}");
    assert!(out.contains(&format!("export WARPFOLD_REAL_NVCC='{nvcc}'")) && out.contains("scripts/gpu/nvcc-fa-kernels'"), "{out}");
    assert!(out.contains("export CANDLE_FLASH_ATTN_BUILD_DIR=") && out.contains("flash-attn-sm89-"), "{out}");
    let (all, _) = plan(&ada, Some(&nvcc), &[("WARPFOLD_FA_KERNELS", "all")]);
    assert!(all.contains("export WARPFOLD_FA_KERNELS='all'"), "{all}");

    let (out, why) = plan(&turing, Some(&nvcc), &[]);
    assert!(out.contains("WARPFOLD_FEATURES='cuda'") && out.contains("CUDA_COMPUTE_CAP='75'") && out.contains("'masked'"), "{out}");
    assert!(!out.contains("WARPFOLD_FA_KERNELS"), "no FlashAttention-2 kernels below compute capability 8.0: {out}");
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

/// Runs scripts/gpu/nvcc-fa-kernels on candle-flash-attn's kernel file `stem` with `kernels` as the
/// list, in front of a stand-in nvcc that records its arguments and the source it was given.
fn nvcc_fa(dir: &Path, stem: &str, kernels: &str) -> (String, String) {
    let sources = dir.join("kernels");
    std::fs::create_dir_all(&sources).unwrap();
    let source = sources.join(format!("{stem}.cu"));
    let (element, dim, causal) = if stem.contains("bf16") { ("cutlass::bfloat16_t", 64, true) } else { ("cutlass::half_t", 32, false) };
    std::fs::write(
        &source,
        format!(
            "#include \"flash_fwd_launch_template.h\"\n\ntemplate<>\nvoid run_mha_fwd_<{element}, {dim}, {causal}>(Flash_fwd_params &params, cudaStream_t stream) {{\n    run_mha_fwd_hdim{dim}<{element}, {causal}>(params, stream);\n}}\n"
        ),
    )
    .unwrap();
    let real = dir.join("real-nvcc");
    let log = dir.join("real-nvcc.log");
    std::fs::write(
        &real,
        format!("#!/bin/sh\necho \"$@\" > {log}\nfor a; do case $a in *.cu) cat \"$a\" >> {log};; esac; done\n", log = log.display()),
    )
    .unwrap();
    std::fs::set_permissions(&real, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = Command::new("bash")
        .arg(repo().join("scripts/gpu/nvcc-fa-kernels"))
        .args(["-gencode=arch=compute_89,code=sm_89", "-c", "-o", &format!("{stem}.o")])
        .arg(format!("kernels/{stem}.cu"))
        .current_dir(dir)
        .env("WARPFOLD_REAL_NVCC", &real)
        .env("WARPFOLD_FA_KERNELS", kernels)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    (std::fs::read_to_string(&log).unwrap(), String::from_utf8(out.stderr).unwrap())
}

#[test]
fn a_gpu_build_compiles_the_listed_flash_attention_kernels_and_stubs_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let list = "hdim32_fp16,hdim64_bf16_causal";
    // Listed: the real nvcc gets the file itself, arguments untouched.
    let (seen, _) = nvcc_fa(dir.path(), "flash_fwd_hdim64_bf16_causal_sm80", list);
    assert!(
        seen.starts_with(
            "-gencode=arch=compute_89,code=sm_89 -c -o flash_fwd_hdim64_bf16_causal_sm80.o kernels/flash_fwd_hdim64_bf16_causal_sm80.cu"
        ),
        "{seen}"
    );
    assert!(seen.contains("run_mha_fwd_hdim64<cutlass::bfloat16_t, true>(params, stream)"), "the kernel itself: {seen}");
    // Not listed (fp16 of the same size): a stub with the same specialization that names the kernel and aborts.
    let (seen, why) = nvcc_fa(dir.path(), "flash_fwd_hdim32_fp16_causal_sm80", list);
    assert!(why.contains("hdim32_fp16_causal is not in WARPFOLD_FA_KERNELS"), "{why}");
    assert!(!seen.contains("kernels/flash_fwd_hdim32_fp16_causal_sm80.cu "), "the original file is not compiled: {seen}");
    assert!(seen.contains("void run_mha_fwd_<cutlass::half_t, 32, false>(Flash_fwd_params &params, cudaStream_t stream) {"), "{seen}");
    assert!(seen.contains("kernel hdim32_fp16_causal is not compiled into this build") && seen.contains("abort();"), "{seen}");
    assert!(!seen.contains("flash_fwd_launch_template.h"), "a stub needs none of the kernel templates: {seen}");
    // `all`: everything is real.
    let (seen, _) = nvcc_fa(dir.path(), "flash_fwd_hdim32_fp16_causal_sm80", "all");
    assert!(seen.contains("run_mha_fwd_hdim32<cutlass::half_t, false>(params, stream)"), "{seen}");
}

/// The tree speaks of what the project does, not of when or in which sitting it was done: no
/// tracked text numbers its sessions (the word followed by a number) and no file is named by a
/// run number (`run-s` and digits, `.sh`). The word in its technical sense (a login session, the session
/// cookie) is not followed by a number, so it passes.
#[test]
fn no_tracked_file_speaks_of_sessions_or_is_named_by_one() {
    let repo = crate::common::repo();
    let listed =
        std::process::Command::new("git").arg("-C").arg(&repo).args(["ls-files", "-z"]).output().expect("git lists the tracked files");
    assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
    let files: Vec<String> =
        listed.stdout.split(|b| *b == 0).filter(|p| !p.is_empty()).map(|p| String::from_utf8_lossy(p).into_owned()).collect();
    assert!(files.len() > 100, "the tracked files: {}", files.len());
    let run_numbered = |part: &str| {
        part.split(['-', '_', '.']).any(|piece| {
            let mut chars = piece.chars();
            chars.next() == Some('s') && {
                let rest: String = chars.collect();
                let digits = rest.trim_end_matches(|c: char| c.is_ascii_lowercase());
                !digits.is_empty() && digits.chars().all(|c| c.is_ascii_digit()) && rest.len() - digits.len() <= 1
            }
        })
    };
    let mut found = Vec::new();
    for file in &files {
        if file.split('/').any(run_numbered) {
            found.push(format!("{file}: named by a run number"));
        }
        let Ok(text) = std::fs::read_to_string(repo.join(file)) else { continue };
        for (n, line) in text.lines().enumerate() {
            let lower = line.to_lowercase();
            let numbered = lower.match_indices("session").any(|(at, _)| {
                let after = lower[at + "session".len()..].trim_start_matches('s');
                let after = after.strip_prefix([' ', '-']).unwrap_or("");
                after.starts_with(|c: char| c.is_ascii_digit())
            });
            if numbered {
                found.push(format!("{file}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join("\n"));
}

/// Every repository path a tracked Markdown file names exists: a link's target (`](docs/api.md)`,
/// relative to the file) and a path in backquotes that starts at one of the repository's top
/// folders (`crates/app/src/settings.rs`, `bench/retrieval/build.py`). It must be a tracked file or
/// folder (what a fresh clone has); git-ignored paths, which warpfold or a script makes (models/NAME/,
/// target/), and patterns (`*`, `<date>`, `N`) pass.
#[test]
fn every_repository_path_the_markdown_names_exists() {
    let repo = crate::common::repo();
    let listed = std::process::Command::new("git").arg("-C").arg(&repo).args(["ls-files", "-z", "*.md"]).output().expect("git lists them");
    assert!(listed.status.success(), "{}", String::from_utf8_lossy(&listed.stderr));
    let files: Vec<String> =
        listed.stdout.split(|b| *b == 0).filter(|p| !p.is_empty()).map(|p| String::from_utf8_lossy(p).into_owned()).collect();
    assert!(files.len() > 5, "the Markdown files: {files:?}");
    // What a fresh clone has: the tracked files and their folders (a git-ignored folder that a
    // script makes, such as bench/llamacpp/bin/, is not a path a reader finds).
    let all = std::process::Command::new("git").arg("-C").arg(&repo).args(["ls-files", "-z"]).output().expect("git lists them");
    let mut tracked = std::collections::HashSet::new();
    for file in all.stdout.split(|b| *b == 0).filter(|p| !p.is_empty()) {
        let mut path = std::path::PathBuf::from(String::from_utf8_lossy(file).into_owned());
        tracked.insert(path.clone());
        while path.pop() && !path.as_os_str().is_empty() {
            tracked.insert(path.clone());
        }
    }
    // `a/b/../c/` as `a/c`.
    let normalized = |path: &std::path::Path| {
        let mut out = std::path::PathBuf::new();
        for part in path.components() {
            match part {
                std::path::Component::ParentDir => {
                    out.pop();
                }
                std::path::Component::CurDir => {}
                other => out.push(other),
            }
        }
        out
    };
    const TOP: &[&str] = &["crates/", "docs/", "bench/", "scripts/", "tests/", "ui/", "src-tauri/", "models/", "icons/", ".ci/"];
    let pattern = |p: &str| p.contains(['*', '<', '>', '{', '$', ' ']) || p.contains("/N/") || p.contains("...") || p.contains('…');
    let mut missing = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(repo.join(file)).unwrap();
        let dir = std::path::Path::new(file).parent().unwrap_or(std::path::Path::new(""));
        let mut named: Vec<(String, std::path::PathBuf)> = Vec::new();
        // Link targets: ](path) without a scheme or an anchor of this page.
        for (at, _) in text.match_indices("](") {
            let target: String = text[at + 2..].chars().take_while(|c| *c != ')' && *c != ' ').collect();
            let target = target.split('#').next().unwrap_or_default().to_string();
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") || pattern(&target) {
                continue;
            }
            named.push((target.clone(), dir.join(&target)));
        }
        // Paths in backquotes from a top folder.
        for piece in text.split('`').skip(1).step_by(2) {
            let path = piece.split([':', ' ', '\n']).next().unwrap_or_default().trim_end_matches(['.', ',', ')']);
            if TOP.iter().any(|top| path.starts_with(top)) && !pattern(path) && !path.contains("target/") {
                named.push((path.to_string(), std::path::PathBuf::from(path)));
            }
        }
        for (shown, path) in named {
            let path = normalized(&path);
            // A git-ignored path is one warpfold or a script makes (models/NAME/, bench/llamacpp/bin/).
            let ignored = || {
                std::process::Command::new("git")
                    .arg("-C")
                    .arg(&repo)
                    .args(["check-ignore", "-q", "--no-index"])
                    // A folder named with its slash: a `dir/` pattern matches only a folder, and a
                    // folder a script makes is not there in a fresh clone to be told one.
                    .arg(if shown.ends_with('/') { format!("{}/", path.display()) } else { path.display().to_string() })
                    .status()
                    .is_ok_and(|s| s.success())
            };
            if !tracked.contains(&path) && !ignored() {
                missing.push(format!("{file}: {shown}"));
            }
        }
    }
    missing.sort();
    missing.dedup();
    assert!(missing.is_empty(), "paths named in Markdown that do not exist:\n{}", missing.join("\n"));
}

/// Every `unsafe fn` in the crates says, under `# Safety`, what its caller must uphold (clippy's
/// `missing_safety_doc`, which the workspace denies, reads public functions only).
#[test]
fn every_unsafe_function_documents_its_safety_contract() {
    let repo = crate::common::repo();
    let mut undocumented = Vec::new();
    let mut stack = vec![repo.join("crates"), repo.join("src-tauri/src")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                if path.file_name().is_some_and(|n| n != "target") {
                    stack.push(path);
                }
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            for (i, line) in lines.iter().enumerate() {
                let code = line.trim_start();
                if code.starts_with("//") || !code.contains("unsafe fn ") {
                    continue;
                }
                // The doc comments and attributes right above it.
                let above = lines[..i].iter().rev().take_while(|l| {
                    let l = l.trim_start();
                    l.starts_with("///") || l.starts_with("#[") || l.starts_with("//")
                });
                if !above.into_iter().any(|l| l.contains("# Safety")) {
                    undocumented.push(format!("{}:{}: {}", path.strip_prefix(&repo).unwrap_or(&path).display(), i + 1, code));
                }
            }
        }
    }
    assert!(undocumented.is_empty(), "unsafe functions without a `# Safety` section:\n{}", undocumented.join("\n"));
}
