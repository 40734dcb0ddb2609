//! What every benchmark report carries besides its numbers: the machine and the date it ran on,
//! peak memory, and how two systems' vectors compare. Reports are pretty JSON, optionally saved.

use std::path::Path;

use serde::Serialize;

/// Where and when a benchmark ran and the command that ran it: the head of every report (its
/// fields sit at the top level of the report's JSON).
#[derive(Serialize, Debug, Clone)]
pub struct RunHeader {
    pub date: String,
    pub machine: String,
    pub command: String,
}

impl RunHeader {
    /// This run: today, this machine, this process's command line.
    pub fn now() -> RunHeader {
        RunHeader { date: today(), machine: machine(), command: std::env::args().collect::<Vec<_>>().join(" ") }
    }
}

/// Percent `part` of `whole` (0 when `whole` is 0).
pub fn pct(part: u64, whole: u64) -> f64 {
    100.0 * part as f64 / whole.max(1) as f64
}

/// (largest absolute difference, smallest cosine) between two sets of vectors, pair by pair.
pub fn compare(a: &[Vec<f32>], b: &[Vec<f32>]) -> (f64, f64) {
    let mut max_diff = 0f64;
    let mut min_cos = 1f64;
    for (x, y) in a.iter().zip(b) {
        let (mut dot, mut nx, mut ny) = (0f64, 0f64, 0f64);
        for (&p, &q) in x.iter().zip(y) {
            max_diff = max_diff.max((p - q).abs() as f64);
            dot += p as f64 * q as f64;
            nx += p as f64 * p as f64;
            ny += q as f64 * q as f64;
        }
        min_cos = min_cos.min(dot / (nx.sqrt() * ny.sqrt()).max(1e-30));
    }
    (max_diff, min_cos)
}

/// Resets the kernel's peak-RSS counter for this process (Linux; elsewhere a no-op).
pub fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// This process's peak resident memory since start or the last [`reset_peak_rss`], in MiB (Linux).
pub fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

/// The report as pretty JSON, also written to `out` when given.
pub fn save_report(report: &impl Serialize, out: Option<&Path>) -> std::io::Result<String> {
    let json = serde_json::to_string_pretty(report)?;
    if let Some(path) = out {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, &json).map_err(|e| std::io::Error::new(e.kind(), format!("writing {}: {e}", path.display())))?;
    }
    Ok(json)
}

/// The CPU's model name and the cores this process may use.
pub fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string()))
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    format!("{cpu}, {cores} cores")
}

/// Today's date (UTC) as YYYY-MM-DD, from the system clock.
pub fn today() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    civil_date((secs / 86_400) as i64)
}

/// Days since 1970-01-01 as YYYY-MM-DD (Howard Hinnant's civil-from-days).
fn civil_date(days: i64) -> String {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_comparisons_are_what_they_say() {
        assert_eq!(civil_date(0), "1970-01-01");
        assert_eq!(civil_date(11_016), "2000-02-29");
        assert_eq!(civil_date(20_789), "2026-12-02");
        let a = vec![vec![1.0f32, 0.0], vec![0.0, 2.0]];
        let b = vec![vec![1.0f32, 0.5], vec![0.0, 2.0]];
        let (diff, cos) = compare(&a, &b);
        assert_eq!(diff, 0.5);
        assert!((cos - 1.0 / 1.25f64.sqrt()).abs() < 1e-12, "{cos}");
        assert_eq!(pct(1, 4), 25.0);
        assert_eq!(pct(3, 0), 300.0);
    }
}
