//! Where the app keeps its data folder (the index, settings, uploads) when not told otherwise.
//!
//! Why one function for both shells: `warpfold serve` and the desktop app are two views of the same
//! documents. When each picked its own default, a file dropped on the window was not searchable in
//! the browser and the other way round; now both start on the same index unless told otherwise.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The data folder from the three variables' values (`WARPFOLD_DATA_DIR`, `XDG_DATA_HOME`, `HOME`;
/// read by [`crate::settings::default_data_dir`]). Empty values count as unset, and a
/// relative `XDG_DATA_HOME` is ignored, as the XDG Base Directory specification says.
pub fn data_dir_from(chosen: Option<OsString>, xdg_data_home: Option<OsString>, home: Option<OsString>) -> PathBuf {
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

/// A path as a person types it into a box: `~` and `~/…` are their home folder (`home`, from
/// [`crate::settings::home_dir`]), as a shell would have made them. `~name` is refused with what
/// to give instead: the box is not a shell, and another person's folder is not guessed at.
pub fn expand_home(path: &str, home: Option<&Path>) -> Result<String, String> {
    let trimmed = path.trim();
    let rest = match trimmed.strip_prefix('~') {
        None => return Ok(path.to_string()),
        Some(rest) if rest.is_empty() || rest.starts_with('/') => rest.trim_start_matches('/'),
        Some(_) => return Err(format!("{trimmed}: only ~ (your home folder) is expanded; give the full path")),
    };
    let home = home.ok_or_else(|| format!("{trimmed}: the home folder is not known (HOME is not set); give the full path"))?;
    Ok(if rest.is_empty() { home.display().to_string() } else { home.join(rest).display().to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tilde_is_the_home_folder_and_another_persons_is_refused() {
        let home = Some(Path::new("/home/ana"));
        assert_eq!(expand_home("~", home).unwrap(), "/home/ana");
        assert_eq!(expand_home("~/Documents/letters", home).unwrap(), "/home/ana/Documents/letters");
        assert_eq!(expand_home(" ~/Documents ", home).unwrap(), "/home/ana/Documents");
        assert_eq!(expand_home("/srv/a~b", home).unwrap(), "/srv/a~b");
        assert!(expand_home("~bob/x", home).unwrap_err().contains("only ~ (your home folder) is expanded"));
        assert!(expand_home("~/x", None).unwrap_err().contains("HOME is not set"));
    }

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
