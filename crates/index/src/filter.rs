//! Which documents a search may return: a folder, file types, a span of modification times.
//!
//! Why the filter picks chunks before ranking rather than dropping hits after it: a search keeps
//! the best k hits of each ranking, and if most of them lie outside the filter, dropping them
//! afterwards leaves fewer than k hits while more matching chunks exist further down. So the
//! filter becomes the set of chunks each ranking may take (`admitted_chunks`), and the cosine
//! scan and the BM25 rankings both skip every other chunk before they cut at k.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use rusqlite::params;

use crate::store::{Store, StoreError};

/// Which documents a search may return; the default lets every document through.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Filter {
    /// Only documents inside this folder, at any depth, compared by whole path components
    /// (`/notes` holds `/notes/a.txt`, not `/notes-old/a.txt`). It is resolved to its real path
    /// when it exists here, as the indexed paths are.
    pub folder: Option<PathBuf>,
    /// Only documents with one of these extensions, in any case, with or without the dot
    /// (`pdf`, `.MD`); empty: every type.
    pub extensions: Vec<String>,
    /// Only documents last modified at or after this time (Unix seconds).
    pub modified_from: Option<i64>,
    /// Only documents last modified before this time (Unix seconds).
    pub modified_before: Option<i64>,
    /// Only chunks in this language: ISO 639-3 as [`crate::language::detect`] stores it (`deu`,
    /// `fra`, `jpn`, `cmn`), any case.
    pub language: Option<String>,
}

impl Filter {
    /// Whether the filter lets every document through.
    pub fn is_empty(&self) -> bool {
        self == &Filter::default()
    }

    /// The filter as documents are tested against it: the folder resolved, the extensions
    /// lowercased without their dots.
    fn resolved(&self) -> Resolved {
        Resolved {
            folder: self.folder.as_ref().map(|folder| std::fs::canonicalize(folder).unwrap_or_else(|_| folder.clone())),
            extensions: self.extensions.iter().map(|e| e.trim_start_matches('.').to_lowercase()).filter(|e| !e.is_empty()).collect(),
            modified_from: self.modified_from,
            modified_before: self.modified_before,
        }
    }

    fn language(&self) -> Option<String> {
        self.language.as_deref().map(str::trim).filter(|l| !l.is_empty()).map(str::to_lowercase)
    }
}

struct Resolved {
    folder: Option<PathBuf>,
    extensions: Vec<String>,
    modified_from: Option<i64>,
    modified_before: Option<i64>,
}

impl Resolved {
    /// Whether the document at `path`, last modified at `mtime` (Unix seconds; 0 when the file
    /// system did not say, which no time bound admits), passes.
    fn admits(&self, path: &str, mtime: i64) -> bool {
        let path = Path::new(path);
        let in_folder = self.folder.as_ref().is_none_or(|folder| path.starts_with(folder));
        let of_type = self.extensions.is_empty()
            || path.extension().and_then(|e| e.to_str()).is_some_and(|e| self.extensions.contains(&e.to_lowercase()));
        let dated = self.modified_from.is_none() && self.modified_before.is_none() || mtime > 0;
        let from = self.modified_from.is_none_or(|from| mtime >= from);
        let before = self.modified_before.is_none_or(|before| mtime < before);
        in_folder && of_type && dated && from && before
    }
}

/// The chunks of `store` that `filter` lets through, by id; `None` when it lets every chunk
/// through (no set to build or test against).
pub(crate) fn admitted_chunks(store: &Store, filter: &Filter) -> Result<Option<HashSet<i64>>, StoreError> {
    if filter.is_empty() {
        return Ok(None);
    }
    let resolved = filter.resolved();
    let conn = store.connection();
    let mut documents = Vec::new();
    let mut stmt = conn.prepare_cached("SELECT id, path, mtime FROM documents")?;
    for row in stmt.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?)))? {
        let (id, path, mtime) = row?;
        if resolved.admits(&path, mtime) {
            documents.push(id);
        }
    }
    let mut chunks = HashSet::new();
    // An index written before languages were stored (read here without upgrading it) has no
    // chunk in any language.
    let language = filter.language();
    let sql = if store.has_chunk_languages()? {
        "SELECT id FROM chunks WHERE document_id = ?1 AND (?2 IS NULL OR language = ?2)"
    } else {
        "SELECT id FROM chunks WHERE document_id = ?1 AND ?2 IS NULL"
    };
    let mut stmt = conn.prepare_cached(sql)?;
    for document in documents {
        for id in stmt.query_map(params![document, language], |r| r.get::<_, i64>(0))? {
            chunks.insert(id?);
        }
    }
    Ok(Some(chunks))
}

/// How [`library`] orders documents.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LibraryOrder {
    /// By file name, then folder (case folded).
    #[default]
    Name,
    /// Last modified first when descending.
    Modified,
    Size,
    Pages,
    /// When warpfold last indexed it.
    Indexed,
}

/// One document as the library lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LibraryEntry {
    pub path: String,
    /// `indexed`, `no_text` or `failed`.
    pub status: String,
    pub error: Option<String>,
    pub pages: u32,
    pub size: u64,
    /// Last modified (Unix seconds; 0 when the file system did not say).
    pub modified: i64,
    /// When it was indexed (Unix seconds).
    pub indexed_at: i64,
}

/// A page of the documents `filter` lets through, in `order`: how many there are in all, and the
/// `limit` from `offset` on. The library view of the app (filters as search takes them).
pub fn library(
    store: &Store,
    filter: &Filter,
    order: LibraryOrder,
    descending: bool,
    offset: usize,
    limit: usize,
) -> Result<(usize, Vec<LibraryEntry>), StoreError> {
    let resolved = filter.resolved();
    let conn = store.connection();
    let language = filter.language();
    // A document is in a language when any of its chunks is.
    let in_language = if language.is_some() && store.has_chunk_languages()? {
        "EXISTS (SELECT 1 FROM chunks WHERE chunks.document_id = documents.id AND chunks.language = ?1)"
    } else if language.is_some() {
        "0"
    } else {
        "?1 IS NULL"
    };
    let sql = format!("SELECT path, status, error, page_count, size, mtime, indexed_at FROM documents WHERE {in_language}");
    let mut stmt = conn.prepare(&sql)?;
    let rows = stmt.query_map(params![language], |r| {
        Ok(LibraryEntry {
            path: r.get(0)?,
            status: r.get(1)?,
            error: r.get(2)?,
            pages: r.get(3)?,
            size: r.get::<_, i64>(4)? as u64,
            modified: r.get(5)?,
            indexed_at: r.get(6)?,
        })
    })?;
    let mut entries = Vec::new();
    for row in rows {
        let entry = row?;
        if resolved.admits(&entry.path, entry.modified) {
            entries.push(entry);
        }
    }
    let name = |e: &LibraryEntry| {
        let path = Path::new(&e.path);
        (path.file_name().map(|n| n.to_string_lossy().to_lowercase()).unwrap_or_default(), e.path.to_lowercase())
    };
    match order {
        LibraryOrder::Name => entries.sort_by_cached_key(name),
        LibraryOrder::Modified => entries.sort_by_key(|e| e.modified),
        LibraryOrder::Size => entries.sort_by_key(|e| e.size),
        LibraryOrder::Pages => entries.sort_by_key(|e| e.pages),
        LibraryOrder::Indexed => entries.sort_by_key(|e| e.indexed_at),
    }
    if descending {
        entries.reverse();
    }
    let total = entries.len();
    Ok((total, entries.into_iter().skip(offset).take(limit).collect()))
}

/// The first second of a day given as YYYY-MM-DD (UTC), in Unix seconds.
pub fn day_start(text: &str) -> Result<i64, String> {
    let wrong = || format!("{text:?} is not a date as YYYY-MM-DD");
    let parts: Vec<&str> = text.trim().split('-').collect();
    let [year, month, day] = parts.as_slice() else { return Err(wrong()) };
    let (year, month, day): (i64, usize, i64) =
        (year.parse().map_err(|_| wrong())?, month.parse().map_err(|_| wrong())?, day.parse().map_err(|_| wrong())?);
    let leap = |y: i64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let month_days = [31, if leap(year) { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    if !(1..=9999).contains(&year) || !(1..=12).contains(&month) || !(1..=month_days[month - 1]).contains(&day) {
        return Err(wrong());
    }
    let year_days = |y: i64| if leap(y) { 366 } else { 365 };
    let years: i64 = if year >= 1970 { (1970..year).map(year_days).sum() } else { -(year..1970).map(year_days).sum::<i64>() };
    let days = years + month_days[..month - 1].iter().sum::<i64>() + day - 1;
    Ok(days * 86_400)
}

#[cfg(test)]
mod tests {
    #[test]
    fn days_are_read_as_their_first_second_in_utc() {
        assert_eq!(day_start("1970-01-01"), Ok(0));
        assert_eq!(day_start("2024-03-01"), Ok(1_709_251_200), "after a leap day");
        assert_eq!(day_start("2000-12-31"), Ok(978_220_800));
        assert_eq!(day_start("1969-12-31"), Ok(-86_400));
        for wrong in ["2023-02-29", "2024-13-01", "2024-00-10", "2024-1", "yesterday", "2024-01-01T10:00"] {
            assert!(day_start(wrong).is_err(), "{wrong}");
        }
        assert_eq!(day_start("2024-02-29").map(|s| s % 86_400), Ok(0));
    }

    use super::*;

    fn admits(filter: &Filter, path: &str, mtime: i64) -> bool {
        filter.resolved().admits(path, mtime)
    }

    #[test]
    fn a_folder_holds_its_own_files_at_any_depth_and_not_a_sibling_sharing_its_name() {
        for folder in ["/home/ann/notes", "/home/ann/notes/", "/home/ann/./notes"] {
            let filter = Filter { folder: Some(folder.into()), ..Filter::default() };
            assert!(admits(&filter, "/home/ann/notes/a.txt", 0), "{folder}");
            assert!(admits(&filter, "/home/ann/notes/2024/b.pdf", 0), "{folder}");
            assert!(!admits(&filter, "/home/ann/notes-old/a.txt", 0), "{folder}");
            assert!(!admits(&filter, "/home/ann/notesa.txt", 0), "{folder}");
            assert!(!admits(&filter, "/home/ann/a.txt", 0), "{folder}");
        }
    }

    #[test]
    fn a_folder_given_through_a_link_finds_the_files_under_its_real_path() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap().join("real");
        std::fs::create_dir(&real).unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let filter = Filter { folder: Some(link), ..Filter::default() };
        assert!(admits(&filter, &real.join("a.txt").display().to_string(), 0));
    }

    #[test]
    fn file_types_match_in_any_case_with_or_without_the_dot() {
        let filter = Filter { extensions: vec![".PDF".into(), "md".into()], ..Filter::default() };
        assert!(admits(&filter, "/a/report.pdf", 0));
        assert!(admits(&filter, "/a/Report.PDF", 0));
        assert!(admits(&filter, "/a/readme.MD", 0));
        assert!(!admits(&filter, "/a/notes.txt", 0));
        assert!(!admits(&filter, "/a/pdf", 0), "a name without an extension is no type");
        assert!(!admits(&filter, "/a/x.pdf.txt", 0));
    }

    #[test]
    fn times_bound_from_inclusive_to_before_exclusive_and_an_unknown_time_passes_no_bound() {
        let filter = Filter { modified_from: Some(100), modified_before: Some(200), ..Filter::default() };
        assert!(admits(&filter, "/a", 100));
        assert!(admits(&filter, "/a", 199));
        assert!(!admits(&filter, "/a", 99));
        assert!(!admits(&filter, "/a", 200));
        assert!(!admits(&Filter { modified_before: Some(200), ..Filter::default() }, "/a", 0));
        assert!(admits(&Filter::default(), "/a", 0));
        assert!(Filter::default().is_empty() && !filter.is_empty());
    }
}
