//! Shards through the real binary: `index --shard I/N` runs merged by `warpfold merge` into the index
//! one run builds, `search` over the shards giving their merge's hits, and the refusals. (The Ray
//! driver and the Kubernetes manifests are tested by scaleout/test_scaleout.py, from scripts/test.sh.)

use std::path::Path;

use serde_json::Value;
use warpfold_bench::corpus::{words, Rng};
use warpfold_index::store::Store;

use crate::common::{assert_same_index, dump_index, warpfold};

fn run_json(args: &[&str]) -> Value {
    let out = warpfold().args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "warpfold {args:?} failed ({:?}): {stdout}\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(stdout.lines().last().unwrap_or("")).unwrap_or_else(|e| panic!("warpfold {args:?} printed {stdout:?}: {e}"))
}

fn run_error(args: &[&str]) -> String {
    let out = warpfold().args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "warpfold {args:?} should fail: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Text and Markdown files in nested folders, some sharing a paragraph (one vector for several
/// documents and shards), plus the bundled sample PDFs.
fn corpus(root: &Path) {
    let mut rng = Rng::new(23);
    let shared = words(&mut rng, 120);
    for i in 0..30 {
        let folder = root.join(format!("team-{}", i % 4)).join(if i % 3 == 0 { "archive" } else { "" });
        std::fs::create_dir_all(&folder).unwrap();
        let n = 80 + rng.range(0, 400);
        let mut text =
            format!("{}\n\nNote {i}: the heron counted {i} lanterns by the harbour.\n\n{}", words(&mut rng, n), words(&mut rng, 60));
        if i % 5 == 0 {
            text.push_str(&format!("\n\n{shared}"));
        }
        std::fs::write(folder.join(format!("doc-{i:02}.{}", if i % 2 == 0 { "txt" } else { "md" })), text).unwrap();
    }
    let out = warpfold().arg("make-samples").arg(root.join("samples")).output().unwrap();
    assert!(out.status.success());
}

fn documents(db: &Path) -> Vec<(String, String, String, u32)> {
    Store::open_read_only(db).unwrap().documents().unwrap().into_iter().map(|d| (d.path, d.content_hash, d.status, d.pages)).collect()
}

/// A hit without its row id (which differs from index to index); cosines to 1e-5 unless `exact`
/// (vectors embedded in other bins differ in their last bits).
fn hit_view(hits: &Value, exact: bool) -> Vec<String> {
    hits.as_array()
        .unwrap()
        .iter()
        .map(|h| {
            let cosine = h["cosine"].as_f64().map(|c| if exact { format!("{c}") } else { format!("{c:.5}") });
            format!(
                "{} p{} {} {} {:?} {:?} {:?} | {}",
                h["path"], h["page"], h["score"], h["ocr"], h["semantic_rank"], h["keyword_rank"], cosine, h["chunk"]
            )
        })
        .collect()
}

#[test]
fn sharded_runs_merge_into_the_index_one_run_builds_and_shards_search_as_their_merge() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("corpus");
    corpus(&root);
    let db = |name: &str| dir.path().join(name).display().to_string();
    let (root_s, single, merged) = (root.display().to_string(), db("single.db"), db("merged.db"));
    run_json(&["index", &root_s, "--db", &single, "--json"]);

    let mut files = 0;
    let mut shards = Vec::new();
    for i in 0..3 {
        let shard = db(&format!("shard-{i}.db"));
        let report = run_json(&["index", &root_s, "--db", &shard, "--shard", &format!("{i}/3"), "--json"]);
        assert_eq!((report["shard"]["index"].as_u64(), report["shard"]["count"].as_u64()), (Some(i), Some(3)));
        let in_shard = report["shard"]["files"].as_u64().unwrap();
        assert!(in_shard > 0, "{report}");
        assert_eq!(report["documents_total"].as_u64(), Some(in_shard), "only the shard's files are read");
        files += in_shard;
        shards.push(shard);
    }
    let all = documents(Path::new(&single)).len() as u64;
    assert_eq!(files, all, "the shards partition the corpus");
    // A shard run again reads its own files again, and finds them unchanged.
    let again = run_json(&["index", &root_s, "--db", &shards[1], "--shard", "1/3", "--json"]);
    assert_eq!(again["documents_skipped"], again["shard"]["files"], "{again}");

    let mut args = vec!["merge", merged.as_str()];
    args.extend(shards.iter().map(String::as_str));
    args.push("--json");
    let report = run_json(&args);
    assert_eq!(report["documents"].as_u64(), Some(all), "{report}");
    assert_eq!(report["duplicate_documents"].as_u64(), Some(0));

    assert_eq!(documents(Path::new(&merged)), documents(Path::new(&single)));
    assert_same_index(&dump_index(Path::new(&single)), &dump_index(Path::new(&merged)));
    let counts = |db: &str| Store::open_read_only(Path::new(db)).unwrap().counts().unwrap();
    assert_eq!(counts(&merged), counts(&single), "embeddings once per text in both");

    for query in ["which heron counted lanterns", "when should I pick tomatoes", "harbour", "note 17"] {
        let search = |dbs: &[&str]| {
            let mut args = vec!["search", query, "-k", "8", "--json"];
            for db in dbs {
                args.extend(["--db", db]);
            }
            run_json(&args)
        };
        let from_merge = search(&[&merged]);
        assert!(!from_merge.as_array().unwrap().is_empty(), "{query}");
        assert_eq!(hit_view(&search(&[&single]), false), hit_view(&from_merge, false), "one run against the merge: {query}");
        let from_shards = search(&shards.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(hit_view(&from_shards, true), hit_view(&from_merge, true), "the shards together against their merge: {query}");
    }
}

#[test]
fn shard_specs_and_merges_that_cannot_be_right_are_refused_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let docs = dir.path().join("docs");
    std::fs::create_dir(&docs).unwrap();
    for i in 0..6 {
        std::fs::write(docs.join(format!("n{i}.txt")), format!("note {i} about lighthouses")).unwrap();
    }
    let docs = docs.display().to_string();
    let db = |name: &str| dir.path().join(name).display().to_string();
    for (spec, says) in [("4/4", "I must be below N"), ("0/0", "N must be at least 1"), ("two/4", "expected I/N")] {
        let err = run_error(&["index", &docs, "--db", &db("x.db"), "--shard", spec]);
        assert!(err.contains(says), "{spec}: {err}");
    }
    let s0 = db("s0.db");
    run_json(&["index", &docs, "--db", &s0, "--shard", "0/2", "--json"]);
    let err = run_error(&["index", &docs, "--db", &s0, "--shard", "1/2"]);
    assert!(err.contains("holds shard 0/2, not 1/2"), "{err}");
    let err = run_error(&["index", &docs, "--db", &s0]);
    assert!(err.contains("is shard 0/2 of a sharded index"), "{err}");
    let err = run_error(&["merge", &db("m.db"), &s0]);
    assert!(err.contains("shard(s) 1 of 2 are missing"), "{err}");
    run_json(&["merge", &db("m.db"), &s0, "--partial", "--json"]);
    let err = run_error(&["merge", &db("m.db"), &s0, "--partial"]);
    assert!(err.contains("already exists"), "{err}");
    let plain = db("plain.db");
    run_json(&["index", &docs, "--db", &plain, "--json"]);
    let err = run_error(&["index", &docs, "--db", &plain, "--shard", "1/2"]);
    assert!(err.contains("already holds an index that is not a shard"), "{err}");
    let notes = db("notes.db");
    std::fs::write(&notes, "these are notes, not an index; long enough to look like a file").unwrap();
    let err = run_error(&["merge", &db("m2.db"), &s0, &notes, "--partial"]);
    assert!(err.contains(&notes), "{err}");
    let err = run_error(&["search", "lighthouses", "--db", &s0, "--db", &notes]);
    assert!(err.contains(&notes), "{err}");
}
