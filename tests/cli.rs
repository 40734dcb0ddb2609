//! The `warpfold` binary as a user runs it.

use std::io::Write;
use std::process::Stdio;

use crate::common::{cosine, max_abs_diff, warpfold};

/// `cmd` run with `input` on its stdin, its output captured.
fn run_with_stdin(cmd: &mut std::process::Command, input: &[u8]) -> std::process::Output {
    let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

fn run_embed(stdin: &[u8], extra: &[&str]) -> (Vec<serde_json::Value>, String, i32) {
    let out = run_with_stdin(warpfold().arg("embed").args(extra), stdin);
    let lines = String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    (lines, String::from_utf8_lossy(&out.stderr).into_owned(), out.status.code().unwrap())
}

#[test]
fn embed_answers_every_line_in_order_and_bad_lines_get_specific_errors() {
    let long = "word ".repeat(400);
    let mut input = Vec::new();
    input.extend_from_slice(b"{\"text\": \"The first good line.\"}\n");
    input.extend_from_slice(b"{\"text\": \"\"}\n");
    input.extend_from_slice(b"{\"text\": \"bad \xff\xfe bytes\"}\n");
    input.extend_from_slice(format!("{{\"text\": \"{long}\"}}\n").as_bytes());
    input.extend_from_slice(b"this is not json\n");
    input.extend_from_slice(b"{\"body\": \"no text field\"}\n");
    input.extend_from_slice(b"{\"text\": \"The last good line.\"}\n");
    let (lines, stderr, code) = run_embed(&input, &[]);
    assert_eq!(lines.len(), 7, "one output line per input line; stderr: {stderr}");
    for i in [0, 6] {
        assert_eq!(lines[i]["embedding"].as_array().map(Vec::len), Some(384), "line {}", i + 1);
    }
    let error = |i: usize| lines[i]["error"].as_str().unwrap_or_default().to_string();
    assert_eq!(error(1), "the text is empty");
    assert!(error(2).contains("UTF-8"), "{}", error(2));
    assert!(error(3).contains("402 tokens long") && error(3).contains("at most 256"), "{}", error(3));
    assert!(error(4).contains("invalid JSON"), "{}", error(4));
    assert!(error(5).contains("no \"text\""), "{}", error(5));
    for (i, line) in lines.iter().enumerate().take(6).skip(1) {
        assert_eq!(line["line"], i + 1);
    }
    assert_eq!(code, 1, "some inputs failed");
    assert!(stderr.contains("2 of 7 texts embedded (5 failed)"), "{stderr}");
}

/// `warpfold embed --cpu-precision PRECISION` on `input` with `WARPFOLD_MKL` set to `mkl`: the
/// vectors, stderr and exit code.
fn embed_at(precision: &str, mkl: &std::ffi::OsStr, input: &str) -> (Vec<Vec<f32>>, String, i32) {
    let mut cmd = warpfold();
    // `info`: the log names the kernels the precision resolved to.
    cmd.args(["--cpu-precision", precision, "embed"]).env("WARPFOLD_MKL", mkl).env("WARPFOLD_LOG", "info");
    let out = run_with_stdin(&mut cmd, input.as_bytes());
    let vectors = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["embedding"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap() as f32)
                .collect()
        })
        .collect();
    (vectors, String::from_utf8_lossy(&out.stderr).into_owned(), out.status.code().unwrap())
}

#[test]
fn bf16_and_bf16x3_on_the_cpu_keep_real_texts_near_f32_or_say_what_they_need() {
    // Real prose: the README's longer lines.
    let readme = std::fs::read_to_string(crate::common::repo().join("README.md")).unwrap();
    let texts: Vec<&str> = readme.lines().filter(|l| l.len() > 80).take(48).collect();
    assert!(texts.len() >= 16, "the README has prose to embed");
    let input: String = texts.iter().map(|t| serde_json::json!({ "text": t }).to_string() + "\n").collect();
    // Without MKL (turned off), bf16 is refused with the reason and nothing is embedded.
    let (vectors, stderr, code) = embed_at("bf16", "off".as_ref(), &input);
    assert!(code != 0 && vectors.is_empty(), "code {code}, {} vectors", vectors.len());
    assert!(stderr.contains("bf16 on the CPU runs through Intel MKL, which is not loaded here"), "{stderr}");
    // With the MKL that `warpfold models fetch` installs (scripts/test.sh does), on any CPU.
    let mkl = crate::common::repo().join("models/mkl");
    assert!(mkl.is_dir(), "scripts/test.sh fetches MKL into {}", mkl.display());
    let (f32s, stderr, code) = embed_at("f32", mkl.as_os_str(), &input);
    assert_eq!((code, f32s.len()), (0, texts.len()), "{stderr}");
    let (bf16, stderr, code) = embed_at("bf16", mkl.as_os_str(), &input);
    assert_eq!((code, bf16.len()), (0, texts.len()), "{stderr}");
    for (a, b) in f32s.iter().zip(&bf16) {
        assert_ne!(a, b, "bf16 products give other vectors than f32 ones");
    }
    let worst = f32s.iter().zip(&bf16).map(|(a, b)| cosine(a, b)).fold(1f64, f64::min);
    assert!(worst >= 0.9999, "bf16 against f32: worst cosine {worst}");
    // bf16x3 (three bf16 products of split f32s): refused the same way without MKL, and with it
    // some hundred times closer to the f32 vectors than bf16.
    let (vectors, stderr, code) = embed_at("bf16x3", "off".as_ref(), &input);
    assert!(code != 0 && vectors.is_empty(), "code {code}, {} vectors", vectors.len());
    assert!(stderr.contains("bf16x3 on the CPU runs through Intel MKL, which is not loaded here"), "{stderr}");
    let (x3, stderr, code) = embed_at("bf16x3", mkl.as_os_str(), &input);
    assert_eq!((code, x3.len()), (0, texts.len()), "{stderr}");
    let (largest_bf16, largest_x3) = (largest_difference(&f32s, &bf16), largest_difference(&f32s, &x3));
    assert!(largest_x3 > 0.0, "bf16x3 products give other vectors than f32 ones");
    assert!(largest_x3 < largest_bf16 / 30.0, "largest difference to f32: bf16x3 {largest_x3}, bf16 {largest_bf16}");
    for (a, b) in f32s.iter().zip(&x3) {
        let cos = cosine(a, b);
        assert!(cos >= 0.999_999, "bf16x3 against f32: cosine {cos}");
    }
    // The default, auto: bf16x3 where MKL's bf16 products run on AMX, else f32 (MKL's sgemm here).
    // It says which in the log, never picks bf16x3 on a CPU without AMX, and gives that one's vectors
    // (within 1e-5: bins may group the texts differently from run to run).
    let (auto, stderr, code) = embed_at("auto", mkl.as_os_str(), &input);
    assert_eq!(code, 0, "{stderr}");
    let ran_x3 = stderr.contains("MKL bf16x3 products");
    assert!(ran_x3 || stderr.contains("MKL sgemm"), "the log names the kernels: {stderr}");
    let amx = std::fs::read_to_string("/proc/cpuinfo").is_ok_and(|info| info.split_whitespace().any(|flag| flag == "amx_bf16"));
    assert!(amx || !ran_x3, "auto ran bf16x3 on a CPU without AMX");
    let same = if ran_x3 { &x3 } else { &f32s };
    assert_eq!(auto.len(), same.len());
    let apart = largest_difference(&auto, same);
    assert!(apart < 1e-5, "auto against {}: {apart}", if ran_x3 { "bf16x3" } else { "f32" });
}

/// The largest element difference between two lists of vectors.
fn largest_difference(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    a.iter().zip(b).map(|(x, y)| max_abs_diff(x, y)).fold(0.0, f32::max)
}

#[test]
fn embed_output_is_the_same_packed_and_padded_and_the_json_report_counts_padding() {
    let input: String = (1..=40).map(|i| format!("{{\"text\": \"{}\"}}\n", "token ".repeat(i * 5))).collect();
    let (packed, stderr, code) = run_embed(input.as_bytes(), &["--json"]);
    assert_eq!(code, 0, "{stderr}");
    let report: serde_json::Value = serde_json::from_str(stderr.lines().last().unwrap()).unwrap();
    assert_eq!(report["embedded"], 40);
    let (padded, stderr, code) = run_embed(input.as_bytes(), &["--json", "--batching", "padded", "--batch-size", "8"]);
    assert_eq!(code, 0);
    let padded_report: serde_json::Value = serde_json::from_str(stderr.lines().last().unwrap()).unwrap();
    assert!(padded_report["pad_tokens"].as_u64() > report["pad_tokens"].as_u64(), "{padded_report} vs {report}");
    for (a, b) in packed.iter().zip(&padded) {
        let a: Vec<f64> = a["embedding"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        let b: Vec<f64> = b["embedding"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        assert!(a.iter().zip(&b).all(|(x, y)| (x - y).abs() <= 1e-5));
    }
}

#[test]
fn asking_for_cuda_in_a_cpu_build_says_how_to_get_it() {
    let out = warpfold().args(["--device", "cuda", "embed"]).stdin(Stdio::null()).output().unwrap();
    if cfg!(feature = "cuda") {
        return;
    }
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("built without CUDA") && stderr.contains("--features cuda"), "{stderr}");
}

#[test]
fn a_model_folder_without_weights_is_a_clear_error() {
    let dir = std::env::temp_dir().join(format!("warpfold-empty-model-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.json"), "{}").unwrap();
    let out = warpfold().arg("--model").arg(&dir).arg("embed").stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("tokenizer.json is missing"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn score_matches_transformers_on_the_reference_decoders() {
    // Tiny random Qwen2 and Llama-3 checkpoints with transformers' own scores
    // (tests/fixtures/make_decoder_reference.py); `warpfold score` packs all sequences into one bin.
    for model in ["qwen2", "llama3"] {
        let dir = crate::common::repo().join("tests/fixtures/decoder_reference").join(model);
        let expected: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
        let sequences = expected["sequences"].as_array().unwrap();
        let mut input = String::new();
        for s in sequences {
            input.push_str(&serde_json::json!({"ids": s["input_ids"]}).to_string());
            input.push('\n');
        }
        input.push_str("{\"text\": \"no tokenizer in this folder\"}\n");
        let out = run_with_stdin(warpfold().args(["score", "--decoder"]).arg(&dir), input.as_bytes());
        assert_eq!(out.status.code(), Some(1), "one line could not be scored");
        let lines: Vec<serde_json::Value> =
            String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), sequences.len() + 1);
        for (got, want) in lines.iter().zip(sequences) {
            let diff = (got["mean_log_likelihood"].as_f64().unwrap() - want["mean_log_likelihood"].as_f64().unwrap()).abs();
            assert!(diff < 1e-4, "{model}: {got} vs {}", want["mean_log_likelihood"]);
            assert_eq!(got["tokens"], want["input_ids"].as_array().unwrap().len());
        }
        assert!(lines.last().unwrap()["error"].as_str().unwrap().contains("tokenizer.json"));
    }
}

#[test]
fn forget_takes_a_document_out_of_the_index_for_good_and_names_a_path_it_does_not_hold() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir_all(&docs).unwrap();
    std::fs::write(docs.join("secret.txt"), "Otterbarnacle 55123 is the code of the garden gate.").unwrap();
    std::fs::write(docs.join("tides.txt"), "Tide tables for the harbour, printed every spring.").unwrap();
    let db = dir.path().join("i.db");
    let out = warpfold().args(["index", "--db"]).arg(&db).arg(&docs).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let secret = std::fs::canonicalize(docs.join("secret.txt")).unwrap();
    let out = warpfold().args(["forget", "--db"]).arg(&db).arg(&secret).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("forgot {}", secret.display()));
    let found = warpfold().args(["search", "otterbarnacle", "--mode", "keyword", "--json", "--db"]).arg(&db).output().unwrap();
    assert_eq!(serde_json::from_slice::<serde_json::Value>(&found.stdout).unwrap(), serde_json::json!([]));
    let mut bytes = std::fs::read(&db).unwrap();
    bytes.extend(std::fs::read(dir.path().join("i.db-wal")).unwrap_or_default());
    assert!(!String::from_utf8_lossy(&bytes).to_lowercase().contains("otterbarnacle"), "its text is still in the index file");
    assert!(secret.exists(), "the file itself is not touched");

    // Again: it is no longer held, and the command says so.
    let out = warpfold().args(["forget", "--db"]).arg(&db).arg(&secret).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a document"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// `--help` leads with what people do, says `serve` is the web app and sets benchmarks apart;
/// an index given as a folder says so (before: "disk I/O error").
#[test]
fn help_leads_with_everyday_commands_and_a_folder_given_as_the_index_is_named() {
    let out = warpfold().arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    let commands: Vec<&str> = help
        .lines()
        .skip_while(|line| !line.starts_with("Commands:"))
        .skip(1)
        .take_while(|line| line.starts_with("  "))
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    assert_eq!(&commands[..6], ["index", "search", "ask", "summarize", "serve", "desktop"], "{help}");
    let bench = commands.iter().position(|c| *c == "bench").expect("bench is listed");
    assert!(commands[bench..].iter().all(|c| c.starts_with("bench") || ["corpus", "help"].contains(c)), "{help}");
    assert!(
        help.lines().any(|line| line.trim_start().starts_with("serve") && line.contains(" The web app: the UI in your browser")),
        "{help}"
    );

    let dir = tempfile::tempdir().unwrap();
    let out = warpfold().args(["search", "rent"]).arg("--db").arg(dir.path()).output().unwrap();
    let error = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(error.contains(&format!("{} is a folder; the index is a file: give one such as", dir.path().display())), "{error}");
    let samples = dir.path().join("samples");
    assert!(warpfold().arg("make-samples").arg(&samples).status().unwrap().success());
    let out = warpfold().arg("index").arg(&samples).arg("--db").arg(dir.path()).output().unwrap();
    let error = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && error.contains("is a folder; the index is a file"), "{error}");
}
