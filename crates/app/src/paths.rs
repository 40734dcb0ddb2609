//! Where the app keeps its data folder (the index, settings, uploads) when not told otherwise.
//!
//! Why one function for both shells: `warpfold serve` and the desktop app are two views of the same
//! documents. When each picked its own default, a file dropped on the window was not searchable in
//! the browser and the other way round; now both start on the same index unless told otherwise.

use std::ffi::OsString;
use std::path::PathBuf;

/// The data folder: `$WARPFOLD_DATA_DIR`, else `$XDG_DATA_HOME/warpfold`, else
/// `~/.local/share/warpfold` (the XDG default), else `./warpfold` when there is no home.
pub fn default_data_dir() -> PathBuf {
    data_dir_from(std::env::var_os("WARPFOLD_DATA_DIR"), std::env::var_os("XDG_DATA_HOME"), std::env::var_os("HOME"))
}

/// The person's locale as POSIX orders its variables (`LC_ALL`, then `LC_MESSAGES`, then `LANG`;
/// the first one set), e.g. `de_DE.UTF-8`: a new index's embedding model is chosen by its
/// language (`warpfold_runtime::embedding_model_for_locale`).
pub fn locale() -> Option<String> {
    ["LC_ALL", "LC_MESSAGES", "LANG"].iter().find_map(|k| std::env::var(k).ok().filter(|v| !v.is_empty()))
}

/// [`default_data_dir`] from the three variables' values. Empty values count as unset, and a
/// relative `XDG_DATA_HOME` is ignored, as the XDG Base Directory specification says.
fn data_dir_from(chosen: Option<OsString>, xdg_data_home: Option<OsString>, home: Option<OsString>) -> PathBuf {
    let set = |v: Option<OsString>| v.filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(dir) = set(chosen) {
        return dir;
    }
    set(xdg_data_home)
        .filter(|p| p.is_absolute())
        .or_else(|| set(home).map(|h| h.join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."))
        .join("warpfold")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(chosen: Option<&str>, xdg: Option<&str>, home: Option<&str>) -> PathBuf {
        data_dir_from(chosen.map(OsString::from), xdg.map(OsString::from), home.map(OsString::from))
    }

    #[test]
    fn warpfold_data_dir_wins_over_the_xdg_folders() {
        assert_eq!(dir(Some("/data/wf"), Some("/xdg"), Some("/home/u")), PathBuf::from("/data/wf"));
    }

    #[test]
    fn xdg_data_home_comes_next_then_the_home_folder() {
        assert_eq!(dir(None, Some("/xdg"), Some("/home/u")), PathBuf::from("/xdg/warpfold"));
        assert_eq!(dir(None, None, Some("/home/u")), PathBuf::from("/home/u/.local/share/warpfold"));
        assert_eq!(dir(None, None, None), PathBuf::from("./warpfold"));
    }

    #[test]
    fn empty_values_and_a_relative_xdg_data_home_are_ignored() {
        assert_eq!(dir(Some(""), Some(""), Some("/home/u")), PathBuf::from("/home/u/.local/share/warpfold"));
        assert_eq!(dir(None, Some("relative/dir"), Some("/home/u")), PathBuf::from("/home/u/.local/share/warpfold"));
    }
}
