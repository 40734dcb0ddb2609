//! Shards: one run indexes only the files whose path hash falls in shard I of N, so that N runs
//! (N Ray tasks, N pods of a Kubernetes Indexed Job, N machines) split a corpus without talking
//! to each other, and `warpfold merge` puts their indexes together (see `docs/scale-out.md`).
//!
//! What is hashed, and why: the path of the file *relative to the folder given on the command
//! line* (the outermost one holding it, after resolving that folder), as UTF-8 bytes with `/`
//! between components; a file named directly is hashed by its file name. Not the absolute path:
//! the same share is often mounted at different places on different machines (`/mnt/docs`,
//! `/data`), and a file must fall in the same shard wherever its shard runs, or a re-run would
//! index it into another shard and the first shard's copy would go stale. The hash is the first 8
//! bytes of SHA-256 read as a big-endian integer, modulo N: fixed across runs, machines, Rust
//! versions and languages (Rust's `HashMap` hasher is randomly keyed per process and cannot be
//! used; `scaleout/warpfold_ray.py` computes the same value with `hashlib`). The same file thus
//! lands in the same shard on every run, and a re-run of a shard is incremental.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use warpfold_engine::embed::Embedder;

use crate::files::Collected;
use crate::pipeline::{collect_files, index_collected, IndexError, IndexOptions, IndexReport, Progress};
use crate::store::{Store, StoreError};

/// Shard `index` of `count` (0 <= index < count).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

/// Why a shard spec was refused (clap prints it after "invalid value 'TEXT' for '--shard'").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShardError {
    #[error("expected I/N, e.g. 0/4 (shard I of N, counted from 0)")]
    Syntax,
    #[error("N must be at least 1")]
    NoShards,
    #[error("I must be below N (shards are numbered 0 to {last})")]
    OutOfRange { last: u32 },
}

impl std::str::FromStr for Shard {
    type Err = ShardError;

    fn from_str(text: &str) -> Result<Shard, ShardError> {
        let (index, count) = text.trim().split_once('/').ok_or(ShardError::Syntax)?;
        let index: u32 = index.trim().parse().map_err(|_| ShardError::Syntax)?;
        let count: u32 = count.trim().parse().map_err(|_| ShardError::Syntax)?;
        if count == 0 {
            return Err(ShardError::NoShards);
        }
        if index >= count {
            return Err(ShardError::OutOfRange { last: count - 1 });
        }
        Ok(Shard { index, count })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// The shard (of `count`) that a key falls in: SHA-256 of its bytes, first 8 bytes big-endian,
/// modulo `count`.
pub fn shard_of(key: &str, count: u32) -> u32 {
    let digest = Sha256::digest(key.as_bytes());
    let head = u64::from_be_bytes(digest[..8].try_into().expect("8 bytes"));
    (head % count.max(1) as u64) as u32
}

/// What is hashed for `file` (see the module docs): its path relative to the outermost of
/// `roots` (resolved folders given on the command line) that holds it, or its file name.
pub fn shard_key(file: &Path, roots: &[PathBuf]) -> String {
    let relative = roots.iter().filter(|root| file != root.as_path()).filter_map(|root| file.strip_prefix(root).ok()).max_by_key(|rel| {
        rel.components().count() // the outermost root leaves the longest relative path
    });
    match relative {
        Some(rel) => rel.components().map(|c| c.as_os_str().to_string_lossy()).collect::<Vec<_>>().join("/"),
        None => file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| file.to_string_lossy().into_owned()),
    }
}

/// The folders among `paths`, resolved as the walk resolves them (files named directly are
/// hashed by their name and need no root).
pub fn roots_of(paths: &[PathBuf]) -> Vec<PathBuf> {
    paths.iter().filter_map(|p| std::fs::canonicalize(p).ok()).filter(|p| p.is_dir()).collect()
}

impl Shard {
    pub fn contains(&self, key: &str) -> bool {
        shard_of(key, self.count) == self.index
    }

    /// The part of a walk's result that belongs to this shard: files, and the refusals too (a
    /// refused file is reported by the one shard it falls in, not by all of them).
    pub fn select(&self, collected: Collected, roots: &[PathBuf]) -> Collected {
        let Collected { files, refused } = collected;
        Collected {
            files: files.into_iter().filter(|f| self.contains(&shard_key(f, roots))).collect(),
            refused: refused.into_iter().filter(|r| self.contains(&shard_key(Path::new(&r.path), roots))).collect(),
        }
    }
}

/// The meta key under which a shard's index records which shard it is.
const SHARD_META: &str = "shard";

/// How many of the files a sharded run saw fell in its shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct ShardSelection {
    pub index: u32,
    pub count: u32,
    /// Files (and refused entries) in this shard.
    pub files: u64,
    /// Files (and refused entries) the walk found in all shards together.
    pub files_all: u64,
}

impl Store {
    /// The shard this index holds, if it was built by a sharded run.
    pub fn shard(&self) -> Result<Option<Shard>, StoreError> {
        Ok(self.meta(SHARD_META)?.and_then(|text| text.parse().ok()))
    }

    /// Records that this index holds `shard`, or fails if it holds another one or an unsharded
    /// index: a shard index must hold only its own files, since `warpfold merge` counts on it to
    /// say which shards are missing.
    pub fn claim_shard(&self, shard: Shard) -> Result<(), IndexError> {
        match self.shard()? {
            Some(found) if found == shard => Ok(()),
            Some(found) => Err(IndexError::Shard(format!(
                "{} holds shard {found}, not {shard}: give each shard its own --db (or the same --shard as before)",
                self.path()
            ))),
            None if self.counts()?.documents > 0 => {
                Err(IndexError::Shard(format!("{} already holds an index that is not a shard; give shard {shard} a new --db", self.path())))
            }
            None => {
                self.connection()
                    .execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?1, ?2)", rusqlite::params![SHARD_META, shard.to_string()])
                    .map_err(StoreError::from)?;
                Ok(())
            }
        }
    }
}

/// Refuses an unsharded run on a shard's index (it would add other shards' files to it).
pub fn refuse_unsharded_run(store: &Store) -> Result<(), IndexError> {
    match store.shard()? {
        Some(found) => Err(IndexError::Shard(format!(
            "{} is shard {found} of a sharded index: run it with --shard {found}, or merge the shards with `warpfold merge`",
            store.path()
        ))),
        None => Ok(()),
    }
}

/// Indexes the files under `paths` that fall in `shard` into `db` (which records the shard):
/// [`index_collected`] on the shard's part of the walk.
pub fn index_shard(
    paths: &[PathBuf],
    shard: Shard,
    db: &Path,
    embedder: &Embedder,
    model: &str,
    options: &IndexOptions,
    progress: &Progress,
) -> Result<(IndexReport, ShardSelection), IndexError> {
    let collected = collect_files(paths)?;
    let files_all = (collected.files.len() + collected.refused.len()) as u64;
    let selected = shard.select(collected, &roots_of(paths));
    let files = (selected.files.len() + selected.refused.len()) as u64;
    Store::open(db, model, embedder.engine.info().output_dim)?.claim_shard(shard)?;
    let report = index_collected(selected, db, embedder, model, options, progress)?;
    Ok((report, ShardSelection { index: shard.index, count: shard.count, files, files_all }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_specs_are_validated_with_a_clear_error() {
        assert_eq!("0/1".parse::<Shard>().unwrap(), Shard { index: 0, count: 1 });
        assert_eq!(" 3 / 4 ".parse::<Shard>().unwrap(), Shard { index: 3, count: 4 });
        assert_eq!("3/4".parse::<Shard>().unwrap().to_string(), "3/4");
        let err = |t: &str| t.parse::<Shard>().unwrap_err().to_string();
        assert!(err("4/4").contains("I must be below N (shards are numbered 0 to 3)"), "{}", err("4/4"));
        assert!(err("0/0").contains("N must be at least 1"));
        for bad in ["", "1", "1/", "/4", "-1/4", "a/b", "1/2/3", "1.5/4"] {
            assert!(err(bad).contains("expected I/N"), "{bad:?}: {}", err(bad));
        }
    }

    /// The values the Python driver and any other implementation must reproduce (hashlib's
    /// sha256, first 8 bytes big-endian, modulo N): a change here would move files between
    /// shards of an existing deployment.
    #[test]
    fn the_shard_hash_is_fixed() {
        // Pinned values, as `python3 -c 'import hashlib; k=b"a.txt";
        // print(int.from_bytes(hashlib.sha256(k).digest()[:8], "big") % 1000)'` computes them.
        assert_eq!(shard_of("a.txt", 1000), 629);
        assert_eq!(shard_of("reports/2024/q1.pdf", 7), 2);
        assert_eq!(shard_of("sub/f3.txt", 4), 2);
        assert_eq!(shard_of("anything", 1), 0);
    }

    #[test]
    fn keys_are_relative_to_the_outermost_root_so_mount_points_do_not_matter() {
        let roots = [PathBuf::from("/mnt/share/docs"), PathBuf::from("/mnt/share/docs/sub")];
        assert_eq!(shard_key(Path::new("/mnt/share/docs/sub/x.pdf"), &roots), "sub/x.pdf");
        assert_eq!(shard_key(Path::new("/elsewhere/named.txt"), &roots), "named.txt");
        // The same tree mounted elsewhere hashes the same.
        let there = [PathBuf::from("/data")];
        assert_eq!(shard_key(Path::new("/data/sub/x.pdf"), &there), "sub/x.pdf");
    }

    #[test]
    fn every_file_falls_in_exactly_one_shard_and_always_the_same() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        for i in 0..40 {
            std::fs::write(root.join(if i % 3 == 0 { format!("sub/f{i}.txt") } else { format!("f{i}.md") }), "x").unwrap();
        }
        let paths = vec![root.clone()];
        let roots = roots_of(&paths);
        let all = crate::files::collect(&paths).unwrap();
        assert_eq!(all.files.len(), 40);
        let mut seen: Vec<PathBuf> = Vec::new();
        let mut sizes = Vec::new();
        for index in 0..4 {
            let shard = Shard { index, count: 4 };
            let picked = shard.select(crate::files::collect(&paths).unwrap(), &roots).files;
            assert_eq!(picked, shard.select(crate::files::collect(&paths).unwrap(), &roots).files, "stable");
            sizes.push(picked.len());
            seen.extend(picked);
        }
        seen.sort();
        assert_eq!(seen, all.files, "the shards partition the files: {sizes:?}");
        assert!(sizes.iter().all(|&n| n > 0), "40 files spread over 4 shards: {sizes:?}");
    }
}
