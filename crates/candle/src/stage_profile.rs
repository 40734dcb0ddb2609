//! Where a bin's time goes, stage by stage (`WARPFOLD_PROFILE=1`, for finding what to speed up):
//! the device is synchronized before and after every stage, so stages do not overlap and the run
//! is slower than without it. Each bin's stages are reported as `info` events of the target
//! `warpfold::profile`, inside the engine's span of that bin (device, tokens, sequences, and the
//! documents it follows from), so a subscriber shows which bin and which document they belong to;
//! the CLI turns that target on when `WARPFOLD_PROFILE=1`. Used by the encoder ([`crate::bert`]),
//! the decoder's scoring and prefill ([`crate::llama`]) and generation.

use std::cell::RefCell;

use std::time::{Duration, Instant};

use candle_core::{Device, Result};
use warpfold_backend::Bin;

/// The device synchronized around stages, and each stage's (name, total time, calls).
type Stages = (Option<Device>, Vec<(&'static str, Duration, u32)>);

thread_local! {
    static TIMES: RefCell<Stages> = const { RefCell::new((None, Vec::new())) };
}

/// The tracing target of the profile's events.
pub const TARGET: &str = "warpfold::profile";

pub fn enabled() -> bool {
    crate::switches::get().profile
}

/// Makes `device` the one synchronized around stages on this thread.
pub fn begin(device: &Device) {
    if enabled() {
        TIMES.with(|t| t.borrow_mut().0 = Some(device.clone()));
    }
}

fn sync() {
    TIMES.with(|t| {
        if let Some(d) = &t.borrow().0 {
            let _ = d.synchronize();
        }
    });
}

/// Runs `f`, adding its time (the device's, when synchronized) to the stage `name`.
pub fn time<T>(name: &'static str, f: impl FnOnce() -> Result<T>) -> Result<T> {
    if !enabled() {
        return f();
    }
    sync();
    let start = Instant::now();
    let out = f();
    sync();
    let took = start.elapsed();
    TIMES.with(|t| {
        let mut t = t.borrow_mut();
        match t.1.iter_mut().find(|(n, _, _)| *n == name) {
            Some(entry) => {
                entry.1 += took;
                entry.2 += 1;
            }
            None => t.1.push((name, took, 1)),
        }
    });
    out
}

/// Stage times so far: (name, total time, calls).
pub type Times = Vec<(&'static str, Duration, u32)>;

/// Takes the stage times recorded on this thread since the last take (or report).
pub fn take() -> Times {
    TIMES.with(|t| std::mem::take(&mut t.borrow_mut().1))
}

/// Adds `more` into `into`, stage by stage.
pub fn add(into: &mut Times, more: Times) {
    for (name, took, calls) in more {
        match into.iter_mut().find(|(n, _, _)| *n == name) {
            Some(entry) => {
                entry.1 += took;
                entry.2 += calls;
            }
            None => into.push((name, took, calls)),
        }
    }
}

/// Prints `times` of `steps` steps of `what` (a generation's prefills or decode steps): each
/// stage's total, its share, and its time per step.
pub fn print(what: &str, steps: usize, times: &Times) {
    let total: f64 = times.iter().map(|s| s.1.as_secs_f64()).sum();
    tracing::info!(target: TARGET, "{what}: {steps} steps, {:.1} ms in timed stages, {:.3} ms a step", total * 1e3, total * 1e3 / steps.max(1) as f64);
    for (name, took, calls) in times {
        let ms = took.as_secs_f64() * 1e3;
        tracing::info!(
            target: TARGET,
            "  {name:<24} {ms:>9.1} ms {:>5.1}% {:>8.3} ms a step ({calls} calls)",
            100.0 * took.as_secs_f64() / total.max(1e-12),
            ms / steps.max(1) as f64
        );
    }
}

/// Prints and clears the stage times of the bin just run.
pub fn report(bin: &Bin, device: &Device) {
    if !enabled() {
        return;
    }
    let _ = device.synchronize();
    let stages = TIMES.with(|t| std::mem::take(&mut t.borrow_mut().1));
    let total: f64 = stages.iter().map(|s| s.1.as_secs_f64()).sum();
    tracing::info!(
        target: TARGET,
        "bin of {} tokens ({} sequences), {:.1} ms in timed stages",
        bin.computed_tokens(),
        bin.num_sequences(),
        total * 1e3
    );
    for (name, took, calls) in stages {
        tracing::info!(
            target: TARGET,
            "  {name:<24} {:>9.1} ms {:>5.1}% ({calls} calls)",
            took.as_secs_f64() * 1e3,
            100.0 * took.as_secs_f64() / total.max(1e-12)
        );
    }
}
