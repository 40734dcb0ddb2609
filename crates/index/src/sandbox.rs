//! The extraction worker's sandbox, as defence in depth under its process isolation and limits:
//! whatever a hostile document makes a parser, Poppler or Tesseract do, the worker cannot write a
//! file, open a network connection, or read outside the system's own folders (programs, libraries,
//! fonts, language data). The document itself comes on stdin, already open.
//!
//! Why Landlock: an unprivileged process restricts itself with it (no root, no namespaces), it is
//! in every Linux kernel since 5.13, and its restrictions hold for the programs the worker starts
//! (`pdftotext`, `pdftoppm`). `PR_SET_NO_NEW_PRIVS` comes with it, and is set alone where the
//! kernel has no Landlock. Best effort: on a kernel without Landlock the worker runs with its
//! other limits, and says so on stderr.

use std::path::Path;

/// Folders a worker may read and run programs from: the system's programs, libraries, fonts,
/// configuration and Tesseract's language data; the kernel's views of processes and devices.
pub const READABLE: &[&str] =
    &["/usr", "/lib", "/lib32", "/lib64", "/bin", "/sbin", "/etc", "/opt", "/proc", "/sys", "/dev", "/var/cache/fontconfig", "/nix/store"];

/// [`READABLE`], and Tesseract's language data where `TESSDATA_PREFIX` puts it elsewhere.
pub fn worker_readable() -> Vec<String> {
    let mut readable: Vec<String> = READABLE.iter().map(|p| p.to_string()).collect();
    readable.extend(crate::ocr::tessdata_prefix().filter(|p| p.is_absolute()).map(|p| p.display().to_string()));
    readable
}

/// What the sandbox managed to enforce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Enforced {
    /// Files: reads of [`READABLE`] only, no writes; network: no TCP bind or connect.
    Full,
    /// Some of it (an older kernel's Landlock): files, maybe not the network.
    Partial,
    /// No Landlock in this kernel: `PR_SET_NO_NEW_PRIVS` only.
    NoNewPrivsOnly,
}

/// Restricts the calling thread, and every thread and program it starts afterwards. Call it first
/// thing, before any thread exists.
#[cfg(target_os = "linux")]
pub fn restrict(readable: &[impl AsRef<str>]) -> Result<Enforced, String> {
    use landlock::{path_beneath_rules, Access, AccessFs, AccessNet, Ruleset, RulesetAttr, RulesetCreatedAttr, RulesetStatus, ABI};
    let abi = ABI::V5;
    let existing: Vec<&Path> = readable.iter().map(|p| Path::new(p.as_ref())).filter(|p| p.exists()).collect();
    let status = Ruleset::default()
        .handle_access(AccessFs::from_all(abi))
        .and_then(|r| r.handle_access(AccessNet::from_all(abi)))
        .and_then(|r| r.create())
        .and_then(|r| r.add_rules(path_beneath_rules(&existing, AccessFs::from_read(abi))))
        // /dev/null written too: a program's output thrown away (Stdio::null opens it for writing).
        .and_then(|r| r.add_rules(path_beneath_rules(["/dev/null"], AccessFs::from_file(abi))))
        .and_then(|r| r.restrict_self())
        .map_err(|e| format!("the sandbox could not be set up: {e}"))?;
    match status.ruleset {
        RulesetStatus::FullyEnforced => Ok(Enforced::Full),
        RulesetStatus::PartiallyEnforced => Ok(Enforced::Partial),
        _ => {
            // SAFETY: prctl on this process.
            if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
                return Err(format!("PR_SET_NO_NEW_PRIVS: {}", std::io::Error::last_os_error()));
            }
            Ok(Enforced::NoNewPrivsOnly)
        }
    }
}

#[cfg(not(target_os = "linux"))]
pub fn restrict(_readable: &[impl AsRef<str>]) -> Result<Enforced, String> {
    Ok(Enforced::NoNewPrivsOnly)
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// In a thread of its own (Landlock holds for the thread that asks and what it starts, so the
    /// other tests are untouched): reads of the system pass; reading or writing anywhere else, and
    /// connecting to a local port, are refused; a program started from inside is refused too.
    #[test]
    fn a_sandboxed_thread_reads_the_system_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let private = dir.path().join("private.txt");
        std::fs::write(&private, "the owner's secret").unwrap();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let outcome = std::thread::spawn(move || {
            let enforced = restrict(READABLE).unwrap();
            let system = std::fs::read_to_string("/etc/passwd").is_ok();
            let read = std::fs::read(&private).map_err(|e| e.kind());
            let write = std::fs::write(private.with_file_name("dropped.txt"), "x").map_err(|e| e.kind());
            let connect = std::net::TcpStream::connect(("127.0.0.1", port)).map(|_| ()).map_err(|e| e.kind());
            let child = std::process::Command::new("/bin/cat")
                .arg(&private)
                .stderr(std::process::Stdio::null())
                .output()
                .map(|o| o.status.success());
            (enforced, system, read.err(), write.err(), connect.err(), child.ok())
        })
        .join()
        .unwrap();
        let (enforced, system, read, write, connect, child) = outcome;
        if enforced == Enforced::NoNewPrivsOnly {
            eprintln!("skipped: this kernel has no Landlock");
            return;
        }
        assert!(system, "the system's files are readable");
        assert_eq!(read, Some(std::io::ErrorKind::PermissionDenied));
        assert_eq!(write, Some(std::io::ErrorKind::PermissionDenied));
        assert_eq!(child, Some(false), "a program started from the sandbox cannot read it either");
        if enforced == Enforced::Full {
            assert_eq!(connect, Some(std::io::ErrorKind::PermissionDenied));
        }
        assert!(std::fs::read(dir.path().join("private.txt")).is_ok(), "the rest of the process is not sandboxed");
    }
}
