//! Which files a run reads, and reading them: the boundary between what the user chose and the rest
//! of the disk.
//!
//! Why a module of its own: every path that reaches the indexer (named on the command line, dropped
//! on the window, reported by the folder watcher, found by walking a folder) passes through here,
//! so the rules hold in one place:
//! - a folder is walked without following symbolic links out of it: a link whose real path leaves
//!   the chosen root is not read, and is reported as skipped with the reason; links to folders are
//!   never followed (no cycles, no `/sys` behind a link);
//! - only regular files are read: a FIFO, socket or device named directly would block a reader
//!   forever, so it is refused with a specific error, and files are opened non-blocking;
//! - a file is read from the path that was checked: it is opened without following a final
//!   symbolic link, and on Linux the opened descriptor's real path is compared with the checked
//!   one, so a component swapped for a link between the walk and the read is caught;
//! - text is read under a size limit, so one huge file cannot take the machine's memory;
//! - one unreadable folder or entry is recorded as a failure and the walk goes on;
//! - paths are stored as text, so a name that is not valid UTF-8 is refused with its own error
//!   rather than stored through a lossy conversion (two such names would collide into one row).

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::extract::file_kind;

/// A file or folder that was not read, and why. `status` is `failed` (something to fix: an
/// unreadable folder, a FIFO, an undecodable name) or `skipped` (deliberately not followed: a
/// symbolic link out of the chosen folder).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Refusal {
    pub path: String,
    pub error: String,
    pub status: &'static str,
}

/// What a walk found: the files to read (real paths, sorted, no duplicates) and what it refused.
#[derive(Debug, Default, Clone)]
pub struct Collected {
    pub files: Vec<PathBuf>,
    pub refused: Vec<Refusal>,
}

/// A path as text for messages and reports, without losing what a lossy conversion would: bytes
/// that are not UTF-8 are shown escaped (`\xFF`).
pub fn display_lossless(path: &Path) -> String {
    match path.to_str() {
        Some(text) => text.to_string(),
        None => {
            let debug = format!("{:?}", path.as_os_str());
            debug.trim_matches('"').to_string()
        }
    }
}

/// Is `path` inside one of `roots` (all canonical)?
pub fn within(path: &Path, roots: &[PathBuf]) -> bool {
    roots.iter().any(|root| path.starts_with(root))
}

fn kind_of(file_type: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if file_type.is_socket() {
            return "a socket";
        }
        if file_type.is_block_device() || file_type.is_char_device() {
            return "a device";
        }
    }
    if file_type.is_dir() {
        return "a folder";
    }
    "not a regular file"
}

fn not_regular(path: &Path, file_type: &std::fs::FileType) -> Refusal {
    Refusal {
        path: display_lossless(path),
        error: format!("not a regular file: it is {} (only regular files are read)", kind_of(file_type)),
        status: "failed",
    }
}

fn not_utf8(path: &Path) -> Refusal {
    Refusal {
        path: display_lossless(path),
        error: "the path is not valid UTF-8; warpfold stores paths as text and cannot keep this one apart from \
                similar names: rename the file"
            .into(),
        status: "failed",
    }
}

/// Is an entry of this name hidden (a dot file or folder)? A walk skips it, and so does the watcher.
pub fn hidden(name: &std::ffi::OsStr) -> bool {
    name.as_encoded_bytes().first() == Some(&b'.')
}

/// Whether `path`, inside one of `roots`, has a hidden entry ([`hidden`]) on the way from that
/// root to it (the root's own name does not count: a user may choose a hidden folder to watch).
pub fn hidden_within(path: &Path, roots: &[PathBuf]) -> bool {
    roots
        .iter()
        .filter_map(|root| path.strip_prefix(root).ok())
        .min_by_key(|rest| rest.components().count())
        .is_some_and(|rest| rest.components().any(|c| hidden(c.as_os_str())))
}

/// Every file under `paths` that warpfold reads: folders recursively (hidden entries skipped,
/// symbolic links followed only where their real path stays inside the folder being walked), plus
/// files named directly whatever their extension (a named link is followed: the user chose it).
/// Fails only for a path that does not exist.
pub fn collect(paths: &[PathBuf]) -> Result<Collected, std::io::Error> {
    collect_inside(paths, None)
}

/// Like [`collect`], but every file's real path must also lie inside one of `roots` (canonical):
/// what the folder watcher reports is only read if it is really in a watched folder.
pub fn collect_within(paths: &[PathBuf], roots: &[PathBuf]) -> Result<Collected, std::io::Error> {
    collect_inside(paths, Some(roots))
}

fn collect_inside(paths: &[PathBuf], roots: Option<&[PathBuf]>) -> Result<Collected, std::io::Error> {
    let mut out = Collected::default();
    for path in paths {
        std::fs::symlink_metadata(path)?;
        let real = match std::fs::canonicalize(path) {
            Ok(real) => real,
            Err(e) => {
                out.refused.push(Refusal {
                    path: display_lossless(path),
                    error: format!("cannot resolve the path: {e}"),
                    status: "failed",
                });
                continue;
            }
        };
        if let Some(roots) = roots {
            if !within(&real, roots) {
                out.refused.push(Refusal {
                    path: display_lossless(path),
                    error: format!("its real path {} is outside the watched folders: not followed", display_lossless(&real)),
                    status: "skipped",
                });
                continue;
            }
        }
        let meta = match std::fs::metadata(&real) {
            Ok(meta) => meta,
            Err(e) => {
                out.refused.push(Refusal { path: display_lossless(path), error: format!("cannot read it: {e}"), status: "failed" });
                continue;
            }
        };
        if meta.is_dir() {
            let boundary: Vec<PathBuf> = match roots {
                Some(roots) => roots.to_vec(),
                None => vec![real.clone()],
            };
            walk(&real, &boundary, &mut out);
        } else if !meta.is_file() {
            out.refused.push(not_regular(path, &meta.file_type()));
        } else if real.to_str().is_none() {
            out.refused.push(not_utf8(path));
        } else {
            out.files.push(real);
        }
    }
    out.files.sort();
    out.files.dedup();
    out.refused.sort_by(|a, b| a.path.cmp(&b.path));
    out.refused.dedup();
    Ok(out)
}

fn walk(dir: &Path, boundary: &[PathBuf], out: &mut Collected) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => {
            out.refused.push(Refusal { path: display_lossless(dir), error: format!("cannot read the folder: {e}"), status: "failed" });
            return;
        }
    };
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                out.refused.push(Refusal { path: display_lossless(dir), error: format!("cannot list the folder: {e}"), status: "failed" });
                return;
            }
        };
        if hidden(&entry.file_name()) {
            continue;
        }
        let path = entry.path();
        let file_type = match entry.file_type() {
            Ok(t) => t,
            Err(e) => {
                out.refused.push(Refusal { path: display_lossless(&path), error: format!("cannot read it: {e}"), status: "failed" });
                continue;
            }
        };
        if file_type.is_dir() {
            walk(&path, boundary, out);
            continue;
        }
        if file_kind(&path).is_none() {
            continue; // not a kind warpfold reads (by the name the user sees)
        }
        if file_type.is_symlink() {
            match std::fs::canonicalize(&path) {
                Err(e) => out.refused.push(Refusal {
                    path: display_lossless(&path),
                    error: format!("a symbolic link that cannot be resolved: {e}"),
                    status: "failed",
                }),
                Ok(real) if !within(&real, boundary) => out.refused.push(Refusal {
                    path: display_lossless(&path),
                    error: format!("a symbolic link to {}, outside the chosen folder: not followed", display_lossless(&real)),
                    status: "skipped",
                }),
                Ok(real) => match std::fs::metadata(&real) {
                    // A link to a file inside the folder: the file itself is read, once.
                    Ok(meta) if meta.is_file() && real.to_str().is_some() => out.files.push(real),
                    Ok(meta) if meta.is_file() => out.refused.push(not_utf8(&real)),
                    Ok(meta) if meta.is_dir() => {} // links to folders are never followed
                    Ok(meta) => out.refused.push(not_regular(&path, &meta.file_type())),
                    Err(e) => {
                        out.refused.push(Refusal { path: display_lossless(&path), error: format!("cannot read it: {e}"), status: "failed" })
                    }
                },
            }
        } else if !file_type.is_file() {
            out.refused.push(not_regular(&path, &file_type));
        } else if path.to_str().is_none() {
            out.refused.push(not_utf8(&path));
        } else {
            out.files.push(path);
        }
    }
}

/// Why a file could not be read by [`read_checked`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read the file: {0}")]
    Io(String),
    #[error("not a regular file: it is {0} (only regular files are read)")]
    NotRegular(&'static str),
    #[error("the file changed into a link or moved while it was being opened (now {0}); it was not read")]
    Moved(String),
    #[error("the file is {size_mib:.1} MiB; files over {limit_mib} MiB are not read as text (raise the limit: --max-text-mib)")]
    TooLarge { size_mib: f64, limit_mib: u64 },
}

/// A regular file opened for reading at exactly `path`: non-blocking (a FIFO swapped in cannot
/// block), not through a final symbolic link, and (on Linux) verified to be the file at `path`.
pub fn open_checked(path: &Path) -> Result<(File, std::fs::Metadata), ReadError> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW | libc::O_NOCTTY);
    }
    let file = options.open(path).map_err(|e| match e.raw_os_error() {
        #[cfg(unix)]
        Some(libc::ELOOP) => ReadError::Moved("a symbolic link".into()),
        _ => ReadError::Io(e.to_string()),
    })?;
    let meta = file.metadata().map_err(|e| ReadError::Io(e.to_string()))?;
    if !meta.is_file() {
        return Err(ReadError::NotRegular(kind_of(&meta.file_type())));
    }
    #[cfg(target_os = "linux")]
    {
        use std::os::fd::AsRawFd;
        if let Ok(opened) = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())) {
            if opened != path {
                return Err(ReadError::Moved(display_lossless(&opened)));
            }
        }
    }
    Ok((file, meta))
}

/// The whole of a regular file at `path`, refused beyond `limit` bytes (0: no limit) without
/// reading it; the file's metadata comes along.
pub fn read_checked(path: &Path, limit: u64) -> Result<(Vec<u8>, std::fs::Metadata), ReadError> {
    let (file, meta) = open_checked(path)?;
    if limit > 0 && meta.len() > limit {
        return Err(too_large(meta.len(), limit));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // A file still growing is read up to the limit (plus one byte, to know it went over).
    let cap = if limit > 0 { limit + 1 } else { u64::MAX };
    file.take(cap).read_to_end(&mut bytes).map_err(|e| ReadError::Io(e.to_string()))?;
    if limit > 0 && bytes.len() as u64 > limit {
        return Err(too_large(bytes.len() as u64, limit));
    }
    Ok((bytes, meta))
}

fn too_large(size: u64, limit: u64) -> ReadError {
    ReadError::TooLarge { size_mib: size as f64 / (1u64 << 20) as f64, limit_mib: limit.div_ceil(1 << 20) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mkfifo(path: &Path) {
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo {}", path.display());
    }

    #[test]
    fn links_out_of_the_folder_are_skipped_with_the_reason_and_links_inside_are_read_once() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap().join("watched");
        let outside = std::fs::canonicalize(dir.path()).unwrap().join("outside");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret.md"), "secret").unwrap();
        std::fs::write(root.join("a.txt"), "a").unwrap();
        std::os::unix::fs::symlink(outside.join("secret.md"), root.join("x.md")).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.join("sub/host.txt")).unwrap();
        std::os::unix::fs::symlink(root.join("a.txt"), root.join("sub/again.txt")).unwrap();
        std::os::unix::fs::symlink(&outside, root.join("out-dir")).unwrap();
        std::os::unix::fs::symlink("/sys", root.join("sys")).unwrap();
        let found = collect(std::slice::from_ref(&root)).unwrap();
        assert_eq!(found.files, vec![root.join("a.txt")]);
        let skipped: Vec<&str> = found.refused.iter().map(|r| r.path.as_str()).collect();
        let (x, host) = (root.join("x.md"), root.join("sub/host.txt"));
        assert_eq!(skipped, [host.to_str().unwrap(), x.to_str().unwrap()]);
        assert!(
            found.refused.iter().all(|r| r.status == "skipped" && r.error.contains("outside the chosen folder")),
            "{:?}",
            found.refused
        );

        // The watcher's paths: a link (or a path through a link) out of the watched folder is not read.
        let via_watcher = collect_within(&[root.join("x.md"), root.join("out-dir")], std::slice::from_ref(&root)).unwrap();
        assert!(via_watcher.files.is_empty(), "{:?}", via_watcher.files);
        assert_eq!(via_watcher.refused.len(), 2);
        // Named directly by the user, a link is followed: they chose it.
        assert_eq!(collect(&[root.join("x.md")]).unwrap().files, vec![outside.join("secret.md")]);
    }

    #[test]
    fn fifos_are_refused_not_read_and_an_unreadable_folder_costs_only_itself() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        mkfifo(&root.join("pipe.txt"));
        std::fs::write(root.join("ok.txt"), "fine").unwrap();
        let found = collect(std::slice::from_ref(&root)).unwrap();
        assert_eq!(found.files, vec![root.join("ok.txt")]);
        assert_eq!(found.refused.len(), 1);
        assert!(found.refused[0].error.contains("FIFO"), "{:?}", found.refused);
        // Named directly: refused too, never opened for a blocking read.
        let named = collect(&[root.join("pipe.txt")]).unwrap();
        assert!(named.files.is_empty() && named.refused[0].error.contains("FIFO"));
        assert_eq!(read_checked(&root.join("pipe.txt"), 0).unwrap_err(), ReadError::NotRegular("a FIFO (named pipe)"));
    }

    #[test]
    fn reads_are_bounded_and_do_not_follow_a_swapped_in_link() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::write(root.join("big.txt"), vec![b'a'; 3 << 20]).unwrap();
        assert!(matches!(read_checked(&root.join("big.txt"), 1 << 20), Err(ReadError::TooLarge { limit_mib: 1, .. })));
        assert_eq!(read_checked(&root.join("big.txt"), 4 << 20).unwrap().0.len(), 3 << 20);
        std::os::unix::fs::symlink("/etc/passwd", root.join("link.txt")).unwrap();
        assert!(matches!(read_checked(&root.join("link.txt"), 0), Err(ReadError::Moved(_))));
    }

    #[test]
    fn names_that_are_not_utf8_are_refused_by_name_not_merged() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let (a, b) = (root.join(std::ffi::OsStr::from_bytes(b"caf\xe9.txt")), root.join(std::ffi::OsStr::from_bytes(b"caf\xe8.txt")));
        std::fs::write(&a, "one").unwrap();
        std::fs::write(&b, "two").unwrap();
        let found = collect(std::slice::from_ref(&root)).unwrap();
        assert!(found.files.is_empty());
        let names: Vec<&str> = found.refused.iter().map(|r| r.path.as_str()).collect();
        assert_eq!(names.len(), 2, "two files, two distinct refusals: {names:?}");
        assert_ne!(names[0], names[1]);
        assert!(names.iter().all(|n| n.contains("\\x")), "{names:?}");
        assert!(found.refused.iter().all(|r| r.error.contains("not valid UTF-8")));
    }
}
