//! The inbox: the folder in the data folder where uploaded files (a browser's drag and drop) are
//! kept, one file per upload.
//!
//! Why this shape: uploads of the same name arrive at the same time (a page that retries, two tabs,
//! a script). Each upload is streamed into a temporary file of its own, so neither memory nor a
//! shared temporary name is ever shared, and then given its final name by an exclusive create
//! (`persist_noclobber`: a link or rename that fails instead of replacing). A name already taken
//! goes to "name (2).ext", "name (3).ext", ...; a taken name whose file holds exactly the same bytes
//! is that upload again and is reused. So every upload ends up in a file holding its own bytes, and
//! no two uploads are told the same path unless they sent the same bytes.
//!
//! Names are checked here, where they become paths: a plain file name (no folder, not hidden, not
//! `.` or `..`), at most 255 bytes (what Linux file systems take), with no control characters (NUL
//! included) and no Unicode direction overrides, which can make a name ending in
//! ".exe" display as one ending in ".txt" (U+202E before "txt.exe" shows "exe.txt").

use std::fs::File;
use std::io::{Read, Seek};
use std::path::{Path, PathBuf};

use tempfile::NamedTempFile;

use crate::AppError;

/// The longest file name (in bytes) most file systems take.
pub const MAX_NAME_BYTES: usize = 255;

/// How many numbered copies of one name are tried before giving up.
const MAX_COPIES: u32 = 10_000;

/// Unicode's explicit direction embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069).
fn is_direction_control(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// A name an upload may be stored under, or why not ([`AppError::InvalidInput`]).
pub fn check_name(name: &str) -> Result<(), AppError> {
    let refuse = |why: &str| Err(AppError::InvalidInput(format!("{name:?} {why}")));
    if name.is_empty() {
        return Err(AppError::InvalidInput("the upload needs a file name (?name=FILE.pdf)".into()));
    }
    if name.len() > MAX_NAME_BYTES {
        return refuse(&format!("is {} bytes long; a file name takes at most {MAX_NAME_BYTES}", name.len()));
    }
    if name.contains(['/', '\\']) {
        return refuse("is not a plain file name (it names a folder)");
    }
    if name.starts_with('.') {
        return refuse("is not a plain file name (hidden, `.` or `..`)");
    }
    if name.chars().any(char::is_control) {
        return refuse("contains a control character");
    }
    if name.chars().any(is_direction_control) {
        return refuse("contains a Unicode direction override, which disguises what a name ends with");
    }
    Ok(())
}

/// The error for a body over `max_bytes`, naming the limit.
pub fn too_large(max_bytes: u64) -> AppError {
    let limit = if max_bytes.is_multiple_of(1 << 20) { format!("{} MiB", max_bytes >> 20) } else { format!("{max_bytes} bytes") };
    AppError::TooLarge(format!("the upload is larger than the limit of {limit}"))
}

/// Streams `body` into a new temporary file of its own in `dir` (removed again if anything fails),
/// refusing more than `max_bytes`.
pub fn receive(dir: &Path, body: impl Read, max_bytes: u64) -> Result<NamedTempFile, AppError> {
    let mut file = tempfile::Builder::new().prefix(".upload-").suffix(".part").tempfile_in(dir)?;
    let written = std::io::copy(&mut body.take(max_bytes.saturating_add(1)), &mut file)?;
    if written > max_bytes {
        return Err(too_large(max_bytes));
    }
    // On disk before it is named and answered for: the inbox copy may be the only one.
    file.as_file().sync_all()?;
    Ok(file)
}

/// Gives the received file the name `name` in `dir`, or the first free numbered name after it,
/// never replacing a file; a file that already holds the same bytes is reused instead. Returns
/// the path the upload now has.
pub fn store(dir: &Path, name: &str, mut received: NamedTempFile) -> Result<PathBuf, AppError> {
    for n in 1..=MAX_COPIES {
        let candidate = dir.join(numbered(name, n));
        match received.persist_noclobber(&candidate) {
            Ok(_) => return Ok(candidate),
            Err(e) if e.error.kind() == std::io::ErrorKind::AlreadyExists => {
                received = e.file;
                if same_bytes(&candidate, received.as_file_mut())? {
                    return Ok(candidate); // the same file again; the copy goes with `received`
                }
            }
            Err(e) => return Err(e.error.into()),
        }
    }
    Err(AppError::InvalidInput(format!("{MAX_COPIES} different files named {name:?} are already in the inbox")))
}

/// `name` for the n-th upload of that name: "report.pdf", "report (2).pdf", ...; the stem is cut
/// (at a character boundary) when the number would make the name too long.
fn numbered(name: &str, n: u32) -> String {
    if n == 1 {
        return name.to_string();
    }
    let (stem, suffix) = match name.rsplit_once('.') {
        // An extension too long to keep beside a number is kept in the stem, which is cut.
        Some((stem, ext)) if ext.len() + 16 < MAX_NAME_BYTES => (stem, format!(" ({n}).{ext}")),
        _ => (name, format!(" ({n})")),
    };
    let mut keep = stem.len().min(MAX_NAME_BYTES.saturating_sub(suffix.len()));
    while !stem.is_char_boundary(keep) {
        keep -= 1;
    }
    format!("{}{suffix}", &stem[..keep])
}

/// Does the file at `existing` hold exactly the bytes of `received` (read from its start)?
fn same_bytes(existing: &Path, received: &mut File) -> Result<bool, AppError> {
    let mut existing = match File::open(existing) {
        Ok(file) => file,
        Err(_) => return Ok(false), // gone or unreadable: not ours to reuse
    };
    if existing.metadata()?.len() != received.metadata()?.len() {
        return Ok(false);
    }
    received.rewind()?;
    let (mut a, mut b) = (vec![0u8; 64 << 10], vec![0u8; 64 << 10]);
    loop {
        let n = read_full(&mut existing, &mut a)?;
        if n != read_full(received, &mut b)? || a[..n] != b[..n] {
            return Ok(false);
        }
        if n == 0 {
            return Ok(true);
        }
    }
}

/// Reads until `buf` is full or the end: how many bytes it holds.
fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upload(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
        store(dir, name, receive(dir, bytes, 1 << 20).unwrap()).unwrap()
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    #[test]
    fn plain_names_pass_and_names_that_are_paths_hidden_or_disguised_do_not() {
        for good in ["report.pdf", "report..final.txt", "notes (2).md", "Überblick – Juni.txt", "a.b.c.txt"] {
            assert_eq!(check_name(good), Ok(()), "{good}");
        }
        let long = format!("{}.txt", "a".repeat(252));
        assert_eq!(check_name(&long[1..]), Ok(()), "255 bytes is fine");
        for bad in [
            "",
            ".",
            "..",
            ".hidden.txt",
            "../escape.txt",
            "a/b.txt",
            "a\\b.txt",
            "nul\0.txt",
            "tab\t.txt",
            "line\n.txt",
            "del\u{7f}.txt",
            "c1\u{85}.txt",
            "evil\u{202E}txt.exe",
            "lre\u{202A}.txt",
            "iso\u{2066}.txt",
            "pdi\u{2069}.txt",
            &long,
        ] {
            let err = check_name(bad).unwrap_err();
            assert_eq!(err.kind(), "invalid_input", "{bad:?}: {err}");
        }
        assert!(check_name(&long).unwrap_err().to_string().contains("255"));
    }

    #[test]
    fn an_upload_over_the_limit_is_too_large_names_the_limit_and_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let err = receive(dir.path(), &[7u8; (1 << 20) + 1][..], 1 << 20).unwrap_err();
        assert_eq!(err, AppError::TooLarge("the upload is larger than the limit of 1 MiB".into()));
        assert!(entries(dir.path()).is_empty(), "the partial file is removed: {:?}", entries(dir.path()));
        assert!(receive(dir.path(), &[7u8; 1 << 20][..], 1 << 20).is_ok(), "exactly the limit is fine");
    }

    #[test]
    fn a_taken_name_gets_the_next_number_and_the_same_bytes_reuse_their_file() {
        let dir = tempfile::tempdir().unwrap();
        let first = upload(dir.path(), "big.txt", b"one");
        assert_eq!(first, dir.path().join("big.txt"));
        assert_eq!(upload(dir.path(), "big.txt", b"two"), dir.path().join("big (2).txt"));
        assert_eq!(upload(dir.path(), "big.txt", b"one"), first, "the same bytes again: the same file");
        assert_eq!(upload(dir.path(), "big.txt", b"three"), dir.path().join("big (3).txt"));
        assert_eq!(entries(dir.path()), ["big (2).txt", "big (3).txt", "big.txt"], "no temporary file is left");
        assert_eq!(std::fs::read(dir.path().join("big (2).txt")).unwrap(), b"two");
    }

    #[test]
    fn concurrent_uploads_of_one_name_each_keep_their_own_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let bodies: Vec<Vec<u8>> = (0..30u8).map(|i| vec![i; 100_000 + i as usize]).collect();
        let paths: Vec<PathBuf> = std::thread::scope(|s| {
            let handles: Vec<_> = bodies.iter().map(|b| s.spawn(|| upload(dir.path(), "big.txt", b))).collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let distinct: std::collections::HashSet<_> = paths.iter().collect();
        assert_eq!(distinct.len(), 30, "{paths:?}");
        for (path, body) in paths.iter().zip(&bodies) {
            assert_eq!(&std::fs::read(path).unwrap(), body, "{}", path.display());
        }
        assert_eq!(entries(dir.path()).len(), 30);
    }

    #[test]
    fn numbered_names_keep_the_extension_and_stay_within_the_limit() {
        assert_eq!(numbered("big.txt", 1), "big.txt");
        assert_eq!(numbered("report..final.txt", 12), "report..final (12).txt");
        let long = format!("{}.pdf", "é".repeat(125)); // 254 bytes
        let renamed = numbered(&long, 3);
        assert!(renamed.len() <= MAX_NAME_BYTES && renamed.ends_with("é (3).pdf"), "{renamed}");
        // An extension of 250 bytes: the number goes after it, and the name stays within the limit.
        let long_extension = format!("a.{}", "x".repeat(250));
        assert!(check_name(&long_extension).is_ok());
        let renamed = numbered(&long_extension, 2);
        assert!(renamed.len() <= MAX_NAME_BYTES && renamed.ends_with(" (2)"), "{} bytes", renamed.len());
    }

    proptest::proptest! {
        #![proptest_config(warpfold_testkit::cases(10_000))]

        /// Any name an upload may take keeps, numbered, within the file system's limit, at a
        /// character boundary, with its number, and its extension when it had a short one.
        #[test]
        fn a_numbered_name_in_any_script_stays_within_the_limit(
            stem in warpfold_testkit::text(90),
            extension in proptest::sample::select(&["", ".pdf", ".docx", ".日本語", ".tar.gz"][..]),
            n in 2u32..10_000,
        ) {
            let name = format!("{stem}{extension}");
            if check_name(&name).is_ok() {
                let renamed = numbered(&name, n);
                proptest::prop_assert!(renamed.len() <= MAX_NAME_BYTES, "{} bytes", renamed.len());
                let number = format!(" ({n})");
                proptest::prop_assert!(renamed.contains(&number));
                if let Some((_, ext)) = name.rsplit_once('.').filter(|(_, ext)| ext.len() + 16 < MAX_NAME_BYTES) {
                    let ending = format!("{number}.{ext}");
                    proptest::prop_assert!(renamed.ends_with(&ending), "{renamed:?}");
                }
                proptest::prop_assert!(check_name(&renamed).is_ok(), "{renamed:?}");
            }
        }
    }
}
