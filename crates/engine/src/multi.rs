//! Several devices behind one dispatcher: which device runs which bin, and what happens when one fails.
//!
//! Why per-device queues and predicted cost instead of one shared queue: bins differ in cost (a bin
//! of a few long sequences pays more attention than one of many short ones), devices differ in speed
//! and in capacity (each has its own probe result), and a GPU wants its next bin already built. So
//! every bin gets a predicted cost ([`CostModel`]: tokens plus an attention term), every device a
//! rate (seconds per unit of cost) measured from the bins it has run, and a bin goes to the device
//! that would finish it first, counting what that device is running and has queued. The dispatcher
//! builds a bin only when some device has room for one more (one bin ahead, as with one device), so
//! a single device behaves exactly as before. A device that runs dry steals the last queued bin of
//! the device that would finish last, when it would finish that bin sooner itself; a bin packed for
//! a bigger device is cut ([`crate::tape::select_slots`]) so a smaller one can take part of it.
//!
//! Failures: a bin whose backend call fails with anything but out-of-memory (or panics) is run again
//! on a device that has not failed it. If it then succeeds, the devices that failed it are taken out
//! and their queued bins placed elsewhere; if every device fails it, the bin was at fault and its
//! sequences get the error (so a bad input does not take down a healthy device, and a lone device
//! goes on after a failing bin as before). A bin is owned by exactly one place at any time (a queue,
//! a worker, or the reply channels), so no sequence is answered twice or lost; with every device
//! gone, what is queued and what arrives is answered with an error, never left waiting.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use parking_lot::{Condvar, Mutex, MutexGuard};
use warpfold_backend::{Backend, BackendError, Bin, Layout, Started};

use crate::cost::CostModel;
use crate::dispatcher::Work;
use crate::scheduler::{EngineError, Lane};
use crate::stats::EngineStats;
use crate::tape::{select_slots, split_bin};

/// Bins a device may have queued (beyond the one it runs) before the dispatcher waits for room.
const ROOM: usize = 1;
/// Bins the dispatcher may queue on one device when that device would still finish them first.
const MAX_QUEUED: usize = 4;
/// Weight of the newest measurement in a device's rate (exponential moving average).
const RATE_SMOOTHING: f64 = 0.3;

/// A bin on its way to a device, with what its failures so far have taught.
pub(crate) struct Job {
    work: Work,
    cost: f64,
    /// Devices (bit i: device i) on which this bin failed with something other than out-of-memory.
    failed_on: u64,
    /// The first such error: what its sequences get if no device is left to try.
    error: Option<BackendError>,
}

impl Job {
    fn widest_slot(&self) -> u32 {
        self.work.bin.cu_seqlens.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0)
    }

    /// The same sequences' slots `slots` as a job of their own.
    fn part(&self, slots: &[usize], cost: &CostModel) -> Job {
        let bin = select_slots(&self.work.bin, slots.iter().copied());
        let replies = slots.iter().map(|&i| self.work.replies[i].clone()).collect();
        Job {
            cost: cost.cost(&bin),
            work: Work { bin, replies, lane: self.work.lane, span: self.work.span.clone() },
            failed_on: self.failed_on,
            error: self.error.clone(),
        }
    }
}

fn bit(device: usize) -> u64 {
    1u64 << device
}

struct Running {
    cost: f64,
    started: Instant,
}

struct Slot {
    bin_tokens: u32,
    queue: VecDeque<Job>,
    running: Option<Running>,
    /// Seconds per unit of cost, measured.
    rate: Option<f64>,
    alive: bool,
    /// It failed a bin that has not been settled yet (run elsewhere: the device is at fault; failed
    /// everywhere: the bin is). Meanwhile it gets no new bins while a trusted device is left.
    suspect: bool,
}

struct State {
    slots: Vec<Slot>,
    /// The dispatcher has stopped: workers leave once nothing is queued or running anywhere.
    closed: bool,
}

/// The devices' queues and workers, shared by the dispatcher and one worker thread per device.
pub(crate) struct Devices {
    state: Mutex<State>,
    changed: Condvar,
    cost: CostModel,
    stats: Arc<EngineStats>,
    /// Told when a device runs out of work (called with no lock held).
    idle: std::sync::OnceLock<Box<dyn Fn() + Send + Sync>>,
}

impl Devices {
    pub(crate) fn new(capacities: &[u32], cost: CostModel, stats: Arc<EngineStats>) -> Arc<Devices> {
        assert!(!capacities.is_empty() && capacities.len() <= 64, "an engine drives 1 to 64 devices");
        let slots = capacities
            .iter()
            .map(|&bin_tokens| Slot { bin_tokens, queue: VecDeque::new(), running: None, rate: None, alive: true, suspect: false })
            .collect();
        Arc::new(Devices {
            state: Mutex::new(State { slots, closed: false }),
            changed: Condvar::new(),
            cost,
            stats,
            idle: std::sync::OnceLock::new(),
        })
    }

    /// Sets what is told when a device runs out of work (once).
    pub(crate) fn on_idle(&self, hook: Box<dyn Fn() + Send + Sync>) {
        let _ = self.idle.set(hook);
    }

    /// Would a usable device idle without a new bin now (nothing running, nothing queued)?
    pub(crate) fn starving(&self) -> bool {
        let st = self.lock();
        (0..st.slots.len()).any(|d| Self::usable(&st, d) && st.slots[d].queue.is_empty() && st.slots[d].running.is_none())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // parking_lot's locks do not poison: a panic while the lock was held (a bug) must not stop
        // the other devices from answering.
        self.state.lock()
    }

    /// Moves `backend` onto a worker thread of its own for device `d`.
    pub(crate) fn spawn_worker<B: Backend + 'static>(self: &Arc<Self>, d: usize, backend: B) -> JoinHandle<()> {
        let devices = self.clone();
        // Reports to the tracing subscriber of the thread that started the engine.
        let dispatch = tracing::dispatcher::get_default(Clone::clone);
        std::thread::Builder::new()
            .name(format!("warpfold-device-{d}"))
            .spawn(move || tracing::dispatcher::with_default(&dispatch, || devices.run_worker(d, backend)))
            .expect("spawning a device thread")
    }

    /// The capacity to pack new bins against: the largest any live device can take now.
    pub(crate) fn pack_capacity(&self) -> Option<u32> {
        let st = self.lock();
        (0..st.slots.len()).filter(|&d| st.slots[d].alive).map(|d| self.effective(&st, d)).max()
    }

    /// Blocks until some usable device has room for one more bin (or none is left).
    pub(crate) fn wait_for_room(&self) {
        let mut st = self.lock();
        while st.slots.iter().any(|s| s.alive) && !(0..st.slots.len()).any(|d| Self::usable(&st, d) && st.slots[d].queue.len() < ROOM) {
            self.changed.wait(&mut st);
        }
    }

    /// Hands a built bin to the device predicted to finish it first.
    pub(crate) fn assign(&self, work: Work) {
        let job = Job { cost: self.cost.cost(&work.bin), work, failed_on: 0, error: None };
        let mut st = self.lock();
        self.place(&mut st, job);
        drop(st);
        self.changed.notify_all();
    }

    /// No more bins will come: workers finish what is queued and leave.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_all();
    }

    fn effective(&self, st: &State, d: usize) -> u32 {
        match self.stats.devices[d].capacity_limit.load(Ordering::Relaxed) {
            0 => st.slots[d].bin_tokens,
            learnt => learnt.min(st.slots[d].bin_tokens),
        }
    }

    fn rate(st: &State, d: usize) -> f64 {
        st.slots[d].rate.unwrap_or_else(|| {
            // Not measured yet: as fast as the average measured device (all alike before any).
            let known: Vec<f64> = st.slots.iter().filter_map(|s| s.rate).collect();
            if known.is_empty() {
                1.0
            } else {
                known.iter().sum::<f64>() / known.len() as f64
            }
        })
    }

    /// Predicted seconds until device `d` has run what it runs and holds now.
    fn backlog(st: &State, d: usize) -> f64 {
        let slot = &st.slots[d];
        let rate = Self::rate(st, d);
        let running = slot.running.as_ref().map_or(0.0, |r| (r.cost * rate - r.started.elapsed().as_secs_f64()).max(0.0));
        running + slot.queue.iter().map(|j| j.cost).sum::<f64>() * rate
    }

    /// Alive and not under suspicion, or suspect but no trusted device is left.
    fn usable(st: &State, d: usize) -> bool {
        let slot = &st.slots[d];
        slot.alive && (!slot.suspect || !st.slots.iter().any(|s| s.alive && !s.suspect))
    }

    /// Can device `d` take (part of) `job`: usable, not failed on it, and its widest slot fits.
    fn can_take(st: &State, d: usize, job: &Job) -> bool {
        Self::usable(st, d)
            && job.failed_on & bit(d) == 0
            && (job.work.bin.layout != Layout::Packed || job.widest_slot() <= st.slots[d].bin_tokens)
    }

    /// Slots of `job` (in order, first fit) that fill at most `capacity` tokens; at least one.
    fn fitting_slots(job: &Job, capacity: u32) -> Vec<usize> {
        let bin = &job.work.bin;
        let mut used = 0;
        let mut chosen = Vec::new();
        for i in 0..bin.num_sequences() {
            let (_, slot, _) = bin.slot(i);
            if used + slot <= capacity as usize || chosen.is_empty() {
                used += slot;
                chosen.push(i);
            }
        }
        chosen
    }

    /// Cuts `job` for device `d` when it was packed for a bigger one: (the part `d` takes, the rest).
    fn cut_for(&self, st: &State, d: usize, job: Job) -> (Job, Option<Job>) {
        let capacity = self.effective(st, d);
        if job.work.bin.layout != Layout::Packed || job.work.bin.computed_tokens() <= capacity as usize {
            return (job, None);
        }
        let taken = Self::fitting_slots(&job, capacity);
        if taken.len() == job.work.bin.num_sequences() {
            return (job, None);
        }
        let rest: Vec<usize> = (0..job.work.bin.num_sequences()).filter(|i| !taken.contains(i)).collect();
        let mut part = job.part(&taken, &self.cost);
        part.work.bin.capacity = capacity; // what this device's part was cut against
        (part, Some(job.part(&rest, &self.cost)))
    }

    /// Queues `job` on the device predicted to finish it first, cutting it for a smaller device;
    /// answers it with an error when no device can take it.
    fn place(&self, st: &mut State, mut job: Job) {
        loop {
            let finish = |d: usize| Self::backlog(st, d) + job.cost * Self::rate(st, d);
            let eligible: Vec<usize> = (0..st.slots.len()).filter(|&d| Self::can_take(st, d, &job)).collect();
            // Devices with fewer than MAX_QUEUED bins first: a retry or a dead device's queue still
            // has to go somewhere when all are full.
            let open: Vec<usize> = eligible.iter().copied().filter(|&d| st.slots[d].queue.len() < MAX_QUEUED).collect();
            let pool = if open.is_empty() { &eligible } else { &open };
            let Some(d) = pool.iter().copied().min_by(|&a, &b| finish(a).total_cmp(&finish(b))) else {
                return self.unplaceable(st, job);
            };
            let (taken, rest) = self.cut_for(st, d, job);
            // A query's bin goes ahead of the bulk bins already handed to the device: it waits for
            // the bins the device has started, no more.
            if taken.work.lane == Lane::Interactive {
                let behind_queries = st.slots[d].queue.iter().take_while(|j| j.work.lane == Lane::Interactive).count();
                st.slots[d].queue.insert(behind_queries, taken);
            } else {
                st.slots[d].queue.push_back(taken);
            }
            match rest {
                Some(rest) => job = rest,
                None => return,
            }
        }
    }

    /// No device can take `job`: its error, or the reason no device can.
    fn unplaceable(&self, st: &mut State, job: Job) {
        let alive: Vec<usize> = (0..st.slots.len()).filter(|&d| st.slots[d].alive).collect();
        let widest_alive = alive.iter().map(|&d| st.slots[d].bin_tokens).max();
        let bin = &job.work.bin;
        if job.error.is_none() && bin.layout == Layout::Packed {
            if let Some(capacity) = widest_alive {
                // The device that could hold its widest sequences is gone: those fail, the rest go on.
                let (fit, too_wide): (Vec<usize>, Vec<usize>) = (0..bin.num_sequences()).partition(|&i| bin.slot(i).1 <= capacity as usize);
                for &i in &too_wide {
                    let (_, slot, real) = bin.slot(i);
                    let error = EngineError::SequenceTooLong { tokens: real, aligned: slot, capacity: capacity as usize };
                    let _ = job.work.replies[i].send((bin.tags[i].index, Err(error)));
                }
                self.stats.failed_bins.fetch_add(1, Ordering::Relaxed);
                if !fit.is_empty() {
                    let rest = job.part(&fit, &self.cost);
                    self.place(st, rest);
                }
                return;
            }
        }
        // Failed on every device that could take it: the bin is at fault, not those devices.
        for f in (0..st.slots.len()).filter(|&f| job.failed_on & bit(f) != 0) {
            st.slots[f].suspect = false;
        }
        let error = job.error.unwrap_or_else(|| BackendError::Inference("every device has failed".into()));
        tracing::warn!(%error, sequences = bin.num_sequences(), "bin failed");
        self.stats.failed_bins.fetch_add(1, Ordering::Relaxed);
        for (tag, reply) in bin.tags.iter().zip(&job.work.replies) {
            let _ = reply.send((tag.index, Err(EngineError::Backend(error.clone()))));
        }
    }

    /// Takes device `d` out and places its queued bins elsewhere.
    fn retire(&self, st: &mut State, d: usize, why: &str) {
        if !st.slots[d].alive {
            return;
        }
        st.slots[d].alive = false;
        self.stats.devices[d].alive.store(false, Ordering::Relaxed);
        let queued: Vec<Job> = st.slots[d].queue.drain(..).collect();
        tracing::warn!(device = %self.stats.devices[d].device, requeued = queued.len(), why, "device taken out");
        for job in queued {
            self.place(st, job);
        }
    }

    /// The last queued bin of the device that would finish last, when `d` would finish it sooner.
    fn steal(&self, st: &mut State, d: usize) -> Option<Job> {
        let my_rate = Self::rate(st, d);
        let victim = (0..st.slots.len())
            .filter(|&v| v != d && st.slots[v].queue.back().is_some_and(|j| Self::can_take(st, d, j)))
            .max_by(|&a, &b| Self::backlog(st, a).total_cmp(&Self::backlog(st, b)))?;
        let job = st.slots[victim].queue.back().expect("checked non-empty");
        if job.cost * my_rate >= Self::backlog(st, victim) {
            return None;
        }
        let job = st.slots[victim].queue.pop_back().expect("checked non-empty");
        let (taken, rest) = self.cut_for(st, d, job);
        if let Some(rest) = rest {
            st.slots[victim].queue.push_back(rest);
        }
        self.stats.devices[d].stolen.fetch_add(1, Ordering::Relaxed);
        Some(taken)
    }

    /// The next bin for device `d`, or `None` when it should stop.
    fn next_job(&self, d: usize) -> Option<Job> {
        self.take_job(d, true)
    }

    /// The next bin for device `d` if one is ready now (a pipelined device asks before it waits for
    /// the bin it is running).
    fn ready_job(&self, d: usize) -> Option<Job> {
        self.take_job(d, false)
    }

    fn take_job(&self, d: usize, wait: bool) -> Option<Job> {
        let mut st = self.lock();
        // Set while this device waits for a bin although sequences are waiting to be packed.
        let mut starved_since: Option<Instant> = None;
        // The idle hook was called in this wait (once per wait: it wakes the dispatcher).
        let mut told = false;
        loop {
            if !st.slots[d].alive {
                return None;
            }
            let job = match st.slots[d].queue.pop_front() {
                Some(job) => Some(job),
                None => self.steal(&mut st, d),
            };
            if let Some(job) = job {
                st.slots[d].running = Some(Running { cost: job.cost, started: Instant::now() });
                drop(st);
                if let Some(since) = starved_since {
                    self.stats.starved_ns.fetch_add(since.elapsed().as_nanos() as u64, Ordering::Relaxed);
                }
                // The dispatcher may be waiting for room.
                self.changed.notify_all();
                return Some(job);
            }
            let idle = st.slots.iter().all(|s| s.queue.is_empty() && s.running.is_none());
            if !wait || (st.closed && idle) {
                return None;
            }
            if st.slots[d].running.is_none() && !told {
                told = true;
                if self.stats.waiting_sequences.load(Ordering::Relaxed) > 0 {
                    starved_since = Some(Instant::now());
                }
                drop(st);
                if let Some(hook) = self.idle.get() {
                    hook();
                }
                st = self.lock();
                continue;
            }
            self.changed.wait(&mut st);
        }
    }

    fn run_worker<B: Backend>(self: Arc<Self>, d: usize, backend: B) {
        if backend.pipelined() {
            return self.run_pipelined_worker(d, backend);
        }
        self.run_serial_worker(d, backend)
    }

    /// The oom callback of device `d`: counts the split and lowers the learnt capacity.
    fn on_oom(&self, d: usize, half: u32) {
        let counters = &self.stats.devices[d];
        for (splits, limit) in [(&self.stats.oom_splits, &self.stats.capacity_limit), (&counters.oom_splits, &counters.capacity_limit)] {
            splits.fetch_add(1, Ordering::Relaxed);
            let _ = limit.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| Some(if c == 0 { half } else { c.min(half) }));
        }
    }

    /// A pipelined device: bin k+1 is started (its inputs copied, its work queued on the device)
    /// before bin k's results are waited for, so the device goes from one bin to the next without
    /// waiting for the host. Bins finish in the order they started.
    fn run_pipelined_worker<B: Backend>(self: Arc<Self>, d: usize, mut backend: B) {
        // Holds the started jobs (at most two: the one finishing, the one just started), to be
        // placed elsewhere if this thread dies.
        let mut guard = WorkerGuard { devices: &self, device: d, jobs: Vec::new() };
        // The oldest started bin's start result and start time; its job is guard.jobs[0].
        let mut in_flight: Option<(Result<Started, BackendError>, Instant)> = None;
        // When the device last finished a bin: a bin's busy time starts at the later of its start
        // and this (the two overlap on the host's clock).
        let mut last_finish = Instant::now();
        loop {
            let next = if in_flight.is_some() { self.ready_job(d) } else { self.next_job(d) };
            let started = next.map(|job| {
                guard.jobs.push(job);
                let t0 = Instant::now();
                let work = &guard.jobs.last().expect("pushed above").work;
                work.span.record("device", d);
                (work.span.in_scope(|| call_start(&mut backend, &work.bin)), t0)
            });
            match in_flight.take() {
                Some((result, t0)) => {
                    let job = guard.jobs.remove(0);
                    let bin = &job.work.bin;
                    let results = job.work.span.in_scope(|| {
                        // Out of memory when started: split and retry, as the serial path does.
                        let result = result.and_then(|s| call_finish(&mut backend, bin, s));
                        answers_or_split(&mut backend, bin, result, &|half| self.on_oom(d, half))
                    });
                    let now = Instant::now();
                    let busy = now.duration_since(t0.max(last_finish));
                    last_finish = now;
                    self.finish(d, job, results, busy);
                    if let Some(job) = guard.jobs.first() {
                        // The next bin is still running here: keep the device marked busy.
                        self.lock().slots[d].running = Some(Running { cost: job.cost, started: Instant::now() });
                    }
                }
                None if started.is_none() => break,
                None => {}
            }
            in_flight = started;
        }
        // Leaving: the others may be waiting for this device to go idle.
        self.changed.notify_all();
    }

    fn run_serial_worker<B: Backend>(self: Arc<Self>, d: usize, mut backend: B) {
        let mut guard = WorkerGuard { devices: &self, device: d, jobs: Vec::new() };
        while let Some(job) = self.next_job(d) {
            guard.jobs.push(job);
            let started = Instant::now();
            let work = &guard.jobs[0].work;
            work.span.record("device", d);
            let results = work.span.in_scope(|| execute(&mut backend, &work.bin, &|half| self.on_oom(d, half)));
            let job = guard.jobs.pop().expect("held above");
            self.finish(d, job, results, started.elapsed());
        }
        // Leaving: the others may be waiting for this device to go idle.
        self.changed.notify_all();
    }

    /// Answers what device `d` ran, learns its rate, and sends what failed to another device.
    fn finish(&self, d: usize, job: Job, results: Vec<Result<Vec<f32>, BackendError>>, elapsed: std::time::Duration) {
        let stats = &self.stats;
        let counters = &stats.devices[d];
        let mut st = self.lock();
        st.slots[d].running = None;
        let ns = elapsed.as_nanos() as u64;
        stats.backend_busy_ns.fetch_add(ns, Ordering::Relaxed);
        counters.busy_ns.fetch_add(ns, Ordering::Relaxed);
        let bin = &job.work.bin;
        let any_ok = results.iter().any(Result::is_ok);
        if results.iter().all(Result::is_ok) {
            let measured = elapsed.as_secs_f64() / job.cost.max(1.0);
            let rate = st.slots[d].rate.map_or(measured, |r| r + RATE_SMOOTHING * (measured - r));
            st.slots[d].rate = Some(rate);
            counters.seconds_per_cost.store(rate.to_bits(), Ordering::Relaxed);
            counters.cost_done.fetch_add(job.cost as u64, Ordering::Relaxed);
        }
        let interactive = job.work.lane == Lane::Interactive;
        if any_ok {
            stats.bins.fetch_add(1, Ordering::Relaxed);
            if interactive {
                stats.interactive_bins.fetch_add(1, Ordering::Relaxed);
            }
            counters.bins.fetch_add(1, Ordering::Relaxed);
            stats.record_bin(bin);
        }
        let mut retry = Vec::new();
        let mut error = None;
        let mut final_error = false;
        for (i, result) in results.into_iter().enumerate() {
            let answer = match result {
                Ok(v) => {
                    let (_, slot, real) = bin.slot(i);
                    for (seqs, real_tokens, computed) in [
                        (&stats.sequences, &stats.real_tokens, &stats.computed_tokens),
                        (&counters.sequences, &counters.real_tokens, &counters.computed_tokens),
                    ] {
                        seqs.fetch_add(1, Ordering::Relaxed);
                        real_tokens.fetch_add(real as u64, Ordering::Relaxed);
                        computed.fetch_add(slot as u64, Ordering::Relaxed);
                    }
                    if interactive {
                        stats.interactive_computed_tokens.fetch_add(slot as u64, Ordering::Relaxed);
                    }
                    Ok(v)
                }
                // Too large for this device even alone: final, as on a single device.
                Err(e @ BackendError::OutOfMemory { .. }) => {
                    final_error = true;
                    Err(EngineError::Backend(e))
                }
                Err(e) => {
                    error.get_or_insert(e);
                    retry.push(i);
                    continue;
                }
            };
            let _ = job.work.replies[i].send((bin.tags[i].index, answer));
        }
        if final_error {
            tracing::warn!(device = %counters.device, sequences = bin.num_sequences(), "bin failed: out of memory");
            stats.failed_bins.fetch_add(1, Ordering::Relaxed);
        }
        if any_ok && job.failed_on != 0 {
            // It ran here: the devices that failed it are at fault, not the bin.
            for f in (0..st.slots.len()).filter(|&f| job.failed_on & bit(f) != 0) {
                self.retire(&mut st, f, "a bin it failed ran on another device");
            }
        }
        if let Some(error) = error {
            counters.failures.fetch_add(1, Ordering::Relaxed);
            st.slots[d].suspect = true;
            tracing::warn!(device = %counters.device, %error, sequences = retry.len(), "bin failed on this device; trying another");
            let mut again = job.part(&retry, &self.cost);
            again.failed_on |= bit(d);
            again.error.get_or_insert(error);
            self.place(&mut st, again);
        }
        drop(st);
        self.changed.notify_all();
    }
}

/// Takes the device out if its worker thread dies, placing the bins it held elsewhere.
struct WorkerGuard<'a> {
    devices: &'a Devices,
    device: usize,
    jobs: Vec<Job>,
}

impl Drop for WorkerGuard<'_> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        let d = self.device;
        let mut st = self.devices.lock();
        st.slots[d].running = None;
        self.devices.retire(&mut st, d, "its worker thread panicked");
        for mut job in self.jobs.drain(..) {
            job.failed_on |= bit(d);
            job.error.get_or_insert(BackendError::Inference("the device's worker thread panicked".into()));
            self.devices.place(&mut st, job);
        }
        drop(st);
        self.devices.changed.notify_all();
    }
}

/// Runs `f`, a panic in the model becoming an error: a panicking model costs its own bin, not the
/// engine, and the thread lives on for the next one.
fn catching<T>(f: impl FnOnce() -> Result<T, BackendError>) -> Result<T, BackendError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into());
        Err(BackendError::Inference(format!("the backend panicked: {why}")))
    })
}

/// Starts one bin on a pipelined backend.
fn call_start<B: Backend>(backend: &mut B, bin: &Bin) -> Result<Started, BackendError> {
    catching(|| backend.start(bin))
}

/// Finishes a started bin: one vector per sequence.
fn call_finish<B: Backend>(backend: &mut B, bin: &Bin, started: Started) -> Result<Vec<Vec<f32>>, BackendError> {
    checked(bin, catching(|| backend.finish(started)))
}

/// Runs one bin, a panic in the model becoming that bin's error.
fn call_backend<B: Backend>(backend: &mut B, bin: &Bin) -> Result<Vec<Vec<f32>>, BackendError> {
    checked(bin, catching(|| backend.embed(bin)))
}

/// A backend's answer, refused if it is not one vector per sequence.
fn checked(bin: &Bin, result: Result<Vec<Vec<f32>>, BackendError>) -> Result<Vec<Vec<f32>>, BackendError> {
    match result {
        Ok(v) if v.len() != bin.num_sequences() => {
            Err(BackendError::Inference(format!("backend returned {} vectors for {} sequences", v.len(), bin.num_sequences())))
        }
        other => other,
    }
}

/// Runs a bin; when the device runs out of memory, reports half the bin as the capacity to learn
/// (`on_oom`) and runs the bin again in halves, recursively. One result per sequence: no sequence
/// is lost, and only a sequence that does not fit even alone gets the out-of-memory error.
fn execute<B: Backend>(backend: &mut B, bin: &Bin, on_oom: &dyn Fn(u32)) -> Vec<Result<Vec<f32>, BackendError>> {
    let result = call_backend(backend, bin);
    answers_or_split(backend, bin, result, on_oom)
}

/// One answer per sequence from what the backend returned for `bin`; out of memory splits the bin
/// in halves and runs them (see [`execute`]).
fn answers_or_split<B: Backend>(
    backend: &mut B,
    bin: &Bin,
    result: Result<Vec<Vec<f32>>, BackendError>,
    on_oom: &dyn Fn(u32),
) -> Vec<Result<Vec<f32>, BackendError>> {
    match result {
        Ok(vectors) => vectors.into_iter().map(Ok).collect(),
        Err(BackendError::OutOfMemory { tokens }) if bin.num_sequences() > 1 => {
            let half = (bin.computed_tokens() / 2).max(1) as u32;
            on_oom(half);
            tracing::warn!(tokens, sequences = bin.num_sequences(), capacity = half, "out of memory: splitting the bin");
            let (mut first, mut second) = split_bin(bin, bin.num_sequences() / 2);
            (first.capacity, second.capacity) = (half.max(first.computed_tokens() as u32), half.max(second.computed_tokens() as u32));
            let mut out = execute(backend, &first, on_oom);
            out.extend(execute(backend, &second, on_oom));
            out
        }
        Err(e) => vec![Err(e); bin.num_sequences()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduler::{Engine, SchedulerConfig};
    use crate::stats::DeviceCounters;
    use crate::tape::{packed_bin, TokenSequence};
    use std::time::Duration;
    use warpfold_backend::{validate_bin, BackendInfo, SequenceTag};
    use warpfold_testkit::faults::FailAfter;

    /// Every bin a fake device ran to the end: (device, computed tokens, its sequences).
    type Log = Arc<Mutex<Vec<(usize, usize, Vec<SequenceTag>)>>>;

    /// A device whose "embedding" of a sequence is `[sum of its ids, its length]`. It sleeps in
    /// proportion to the bin's tokens (its speed), runs out of memory above `capacity`, and can be
    /// told to panic after some bins.
    struct FakeDevice {
        id: usize,
        micros_per_token: u64,
        capacity: usize,
        panic_after: Option<u64>,
        ran: u64,
        log: Log,
    }

    impl Backend for FakeDevice {
        fn info(&self) -> BackendInfo {
            BackendInfo {
                model: "fake".into(),
                device: format!("fake:{}", self.id),
                max_sequence_tokens: 512,
                output_dim: 2,
                pad_token_id: 0,
                attention: "none".into(),
            }
        }
        fn embed(&mut self, bin: &Bin) -> Result<Vec<Vec<f32>>, BackendError> {
            validate_bin(bin)?;
            if bin.computed_tokens() > self.capacity {
                return Err(BackendError::OutOfMemory { tokens: bin.computed_tokens() });
            }
            if self.panic_after.is_some_and(|n| self.ran >= n) {
                panic!("fake device {} broke", self.id);
            }
            std::thread::sleep(Duration::from_micros(self.micros_per_token * bin.computed_tokens() as u64));
            self.ran += 1;
            self.log.lock().push((self.id, bin.computed_tokens(), bin.tags.clone()));
            Ok((0..bin.num_sequences())
                .map(|i| {
                    let (start, _, real) = bin.slot(i);
                    let ids = &bin.input_ids[start..start + real];
                    vec![ids.iter().map(|&t| t as f32).sum(), real as f32]
                })
                .collect())
        }
    }

    fn device(id: usize, micros_per_token: u64, capacity: usize, log: &Log) -> FakeDevice {
        FakeDevice { id, micros_per_token, capacity, panic_after: None, ran: 0, log: log.clone() }
    }

    /// Two fake devices, each (microseconds per token, capacity).
    fn two_devices(log: &Log, a: (u64, usize), b: (u64, usize)) -> Vec<(Box<dyn Backend>, u32)> {
        vec![(Box::new(device(0, a.0, a.1, log)), a.1 as u32), (Box::new(device(1, b.0, b.1, log)), b.1 as u32)]
    }

    fn expected(seq: &[u32]) -> Vec<f32> {
        vec![seq.iter().map(|&t| t as f32).sum(), seq.len() as f32]
    }

    fn sequences(n: usize, seed: u64, longest: usize) -> Vec<Vec<u32>> {
        let mut rng = warpfold_testkit::seeded::Rng::new(seed);
        (0..n).map(|_| (0..rng.range(1, longest)).map(|_| rng.range(1_000, 30_000) as u32).collect()).collect()
    }

    type Answers = Vec<Result<Vec<f32>, EngineError>>;

    /// Submits `seqs` and waits, failing the test instead of hanging if answers never come.
    fn answer(engine: &Engine, seqs: &[Vec<u32>]) -> Answers {
        let ticket = engine.submit(Lane::Bulk, seqs.to_vec());
        let (tx, rx) = crossbeam_channel::bounded(1);
        std::thread::spawn(move || tx.send(ticket.wait()));
        rx.recv_timeout(Duration::from_secs(120)).expect("every sequence is answered (no hang)")
    }

    fn run(devices: Vec<(Box<dyn Backend>, u32)>, seqs: &[Vec<u32>]) -> (Answers, crate::StatsSnapshot) {
        let engine = Engine::start_devices(devices, SchedulerConfig::default());
        let results = answer(&engine, seqs);
        (results, engine.shutdown())
    }

    /// Runs `seqs` on `devices` and checks that every sequence got its own answer and ran to the end
    /// exactly once, on some device.
    fn run_checked(devices: Vec<(Box<dyn Backend>, u32)>, seqs: &[Vec<u32>], log: &Log) -> crate::StatsSnapshot {
        let (results, stats) = run(devices, seqs);
        for (seq, r) in seqs.iter().zip(&results) {
            assert_eq!(r.as_ref().unwrap(), &expected(seq));
        }
        let mut seen: Vec<u32> = log.lock().iter().flat_map(|(_, _, tags)| tags.iter().map(|t| t.index)).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..seqs.len() as u32).collect::<Vec<_>>(), "every sequence run once, none twice");
        stats
    }

    /// A pipelined device: `start` runs the fake device's bin (or fails as it would) and holds the
    /// answer back; `finish` hands it over. Every call is logged, in order.
    struct PipelinedDevice {
        inner: FakeDevice,
        calls: Arc<Mutex<Vec<&'static str>>>,
    }

    impl Backend for PipelinedDevice {
        fn info(&self) -> BackendInfo {
            self.inner.info()
        }
        fn embed(&mut self, bin: &Bin) -> Result<Vec<Vec<f32>>, BackendError> {
            self.calls.lock().push("embed");
            self.inner.embed(bin)
        }
        fn pipelined(&self) -> bool {
            true
        }
        fn start(&mut self, bin: &Bin) -> Result<Started, BackendError> {
            self.calls.lock().push("start");
            Ok(Started::Pending(Box::new(self.inner.embed(bin)?)))
        }
        fn finish(&mut self, started: Started) -> Result<Vec<Vec<f32>>, BackendError> {
            self.calls.lock().push("finish");
            match started {
                Started::Pending(answer) => Ok(*answer.downcast::<Vec<Vec<f32>>>().expect("what start returned")),
                Started::Done(v) => Ok(v),
            }
        }
    }

    #[test]
    fn a_pipelined_device_starts_the_next_bin_before_finishing_the_current_one_and_loses_nothing() {
        let log = Log::default();
        let calls = Arc::new(Mutex::new(Vec::new()));
        // Out of memory above 600 tokens while bins are packed to 1,024: some starts fail and are
        // split and retried; the rest run two at a time.
        let dev = PipelinedDevice { inner: device(0, 2, 600, &log), calls: calls.clone() };
        let config = SchedulerConfig { bin_tokens: 1024, ..SchedulerConfig::default() };
        let engine = Engine::start_devices(vec![(Box::new(dev) as Box<dyn Backend>, 1024)], config);
        let seqs = sequences(400, 9, 120);
        let results = answer(&engine, &seqs);
        let stats = engine.shutdown();
        for (i, (seq, r)) in seqs.iter().zip(&results).enumerate() {
            assert_eq!(r.as_ref().unwrap(), &expected(seq), "sequence {i}");
        }
        let mut seen: Vec<u32> = log.lock().iter().flat_map(|(_, _, tags)| tags.iter().map(|t| t.index)).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..seqs.len() as u32).collect::<Vec<_>>(), "every sequence run once, none twice");
        let calls = calls.lock();
        let ahead = calls.windows(2).filter(|w| w == &["start", "start"]).count();
        assert!(ahead > 0, "a bin was started while the one before it was still unfinished: {calls:?}");
        let (starts, finishes) = (calls.iter().filter(|c| **c == "start").count(), calls.iter().filter(|c| **c == "finish").count());
        assert!(
            finishes <= starts && finishes + stats.oom_splits as usize >= starts,
            "every bin that started was finished, except those that ran out of memory: {starts} started, {finishes} finished"
        );
        assert!(stats.oom_splits > 0 && calls.contains(&"embed"), "the out-of-memory path ran: {stats:?}");
        assert!(stats.capacity_limit.is_some_and(|c| c <= 600), "{stats:?}");
    }

    #[test]
    fn a_faster_device_does_proportionally_more_of_the_work() {
        let log: Log = Default::default();
        // Device 1 is four times as fast: ideally it does 80% of the tokens.
        let stats = run_checked(two_devices(&log, (8, 1024), (2, 1024)), &sequences(600, 3, 300), &log);
        let [slow, fast] = [&stats.devices[0], &stats.devices[1]];
        assert_eq!(slow.sequences + fast.sequences, 600);
        let share = fast.computed_tokens as f64 / (fast.computed_tokens + slow.computed_tokens) as f64;
        assert!(share > 0.6 && slow.bins > 0, "the 4x faster device did {:.0}% of the tokens: {stats:?}", share * 100.0);
        assert!(fast.cost_per_second.unwrap() > slow.cost_per_second.unwrap(), "measured rates follow the speeds");
    }

    /// Devices with fixed measured rates and nothing running, for deterministic placement.
    fn idle_devices(capacities: &[u32], rates: &[Option<f64>]) -> Arc<Devices> {
        let counters = capacities.iter().map(|&c| DeviceCounters::new("fake".into(), c)).collect();
        let stats = Arc::new(EngineStats { devices: counters, ..EngineStats::default() });
        let devices = Devices::new(capacities, CostModel::default(), stats);
        for (slot, &rate) in devices.lock().slots.iter_mut().zip(rates) {
            slot.rate = rate;
        }
        devices
    }

    fn work(request: u64, lengths: &[usize]) -> Work {
        let (tx, _) = crossbeam_channel::unbounded();
        let seqs: Vec<Vec<u32>> = lengths.iter().map(|&n| vec![7; n]).collect();
        let tagged = seqs.iter().enumerate().map(|(i, ids)| TokenSequence { tag: SequenceTag { request, index: i as u32 }, ids });
        Work { bin: packed_bin(tagged, 16, 4096, 0), replies: vec![tx; lengths.len()], lane: Lane::Bulk, span: tracing::Span::none() }
    }

    fn queued(devices: &Devices) -> Vec<Vec<usize>> {
        devices.lock().slots.iter().map(|s| s.queue.iter().map(|j| j.work.bin.computed_tokens()).collect()).collect()
    }

    #[test]
    fn bins_go_where_they_finish_first_by_measured_rate_and_an_idle_device_steals() {
        // Device 1 measured twice as fast: of six equal bins it gets four, device 0 two (the
        // predicted finish times are then equal), ties going to the first device.
        let devices = idle_devices(&[4096, 4096], &[Some(2.0), Some(1.0)]);
        for _ in 0..6 {
            devices.assign(work(0, &[512, 512]));
        }
        assert_eq!(queued(&devices).iter().map(Vec::len).collect::<Vec<_>>(), vec![2, 4]);
        // Device 0 runs dry: the last bin of device 1 finishes sooner on it (2 units against 4).
        let mut st = devices.lock();
        st.slots[0].queue.clear();
        let stolen = devices.steal(&mut st, 0).expect("an idle device steals");
        assert_eq!(stolen.work.bin.computed_tokens(), 1024);
        assert_eq!(st.slots[1].queue.len(), 3);
        // With one bin left there, stealing would not finish it sooner (2 units against 1).
        st.slots[1].queue.truncate(1);
        assert!(devices.steal(&mut st, 0).is_none());
    }

    #[test]
    fn a_querys_bin_goes_ahead_of_the_bulk_bins_waiting_for_its_device_in_arrival_order() {
        let devices = idle_devices(&[4096], &[Some(1.0)]);
        for n in [512, 528, 544] {
            devices.assign(work(0, &[n]));
        }
        let query = |n: usize| Work { lane: Lane::Interactive, ..work(1, &[n]) };
        devices.assign(query(16));
        devices.assign(query(32));
        // The two queries first, in the order they came, then the bulk bins as they were.
        assert_eq!(queued(&devices), vec![vec![16, 32, 512, 528, 544]]);
    }

    #[test]
    fn a_bin_packed_for_a_bigger_device_is_cut_for_a_smaller_one() {
        let devices = idle_devices(&[1024, 256], &[None, None]);
        devices.assign(work(0, &[256, 256, 256, 256]));
        // Device 0 is busy with that bin; the next one goes, at least in part, to device 1, cut
        // into pieces it can hold; no sequence is dropped or duplicated.
        devices.assign(work(1, &[128, 128, 96, 96, 64, 64, 48, 48]));
        let q = queued(&devices);
        assert!(!q[1].is_empty() && q[1].iter().all(|&t| t <= 256), "{q:?}");
        let st = devices.lock();
        let jobs = st.slots.iter().flat_map(|s| s.queue.iter());
        let mut tags: Vec<u32> = jobs.flat_map(|j| j.work.bin.tags.iter()).filter(|t| t.request == 1).map(|t| t.index).collect();
        tags.sort_unstable();
        assert_eq!(tags, (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn each_device_gets_bins_within_its_own_capacity() {
        let log: Log = Default::default();
        // The fake runs out of memory above its capacity: no split may happen.
        let stats = run_checked(two_devices(&log, (2, 1024), (2, 256)), &sequences(400, 5, 240), &log);
        assert!(stats.devices.iter().all(|d| d.oom_splits == 0), "{stats:?}");
        let log = log.lock();
        assert!(log.iter().all(|&(d, tokens, _)| tokens <= [1024, 256][d]));
        assert!(log.iter().any(|&(d, _, _)| d == 1), "the small device ran cut bins");
        assert!(log.iter().any(|&(d, tokens, _)| d == 0 && tokens > 256), "the big device ran full bins");
    }

    /// Device 1 breaks after three bins (`broken`); device 0 stays healthy.
    fn no_bin_lost_or_run_twice_when_a_device_fails(broken: impl FnOnce(FakeDevice) -> Box<dyn Backend>) {
        let seqs = sequences(500, 7, 300);
        let single_log: Log = Default::default();
        // The one-device run and the run below both answer every sequence with its expected
        // result, so their answers are equal.
        run_checked(vec![(Box::new(device(0, 0, 1024, &single_log)), 1024)], &seqs, &single_log);
        let log: Log = Default::default();
        let devices: Vec<(Box<dyn Backend>, u32)> =
            vec![(Box::new(device(0, 2, 1024, &log)), 1024), (broken(device(1, 2, 1024, &log)), 1024)];
        let stats = run_checked(devices, &seqs, &log);
        assert_eq!(stats.sequences, 500);
        assert_eq!(stats.devices.iter().map(|d| d.sequences).sum::<u64>(), 500);
        assert_eq!(stats.failed_bins, 0, "{stats:?}");
        let [good, bad] = [&stats.devices[0], &stats.devices[1]];
        assert!(good.alive && !bad.alive, "{stats:?}");
        assert!(bad.failures >= 1 && bad.bins == 3, "{stats:?}");
        // Once it failed a bin it gets no new ones: only what it had queued fails too.
        assert!(bad.failures as usize <= 1 + MAX_QUEUED, "{stats:?}");
    }

    #[test]
    fn a_device_returning_errors_mid_run_loses_no_bin_and_runs_none_twice() {
        no_bin_lost_or_run_twice_when_a_device_fails(|d| Box::new(FailAfter::new(d, 3)));
    }

    #[test]
    fn a_device_panicking_mid_run_loses_no_bin_and_runs_none_twice() {
        no_bin_lost_or_run_twice_when_a_device_fails(|mut d| {
            d.panic_after = Some(3);
            Box::new(d)
        });
    }

    #[test]
    fn when_every_device_fails_every_sequence_gets_an_error_and_nothing_hangs() {
        let log: Log = Default::default();
        let devices: Vec<(Box<dyn Backend>, u32)> = vec![
            (Box::new(FailAfter::new(device(0, 1, 1024, &log), 4)), 1024),
            (Box::new(FailAfter::new(device(1, 1, 1024, &log), 1)), 1024),
        ];
        let engine = Engine::start_devices(devices, SchedulerConfig::default());
        let seqs = sequences(300, 11, 300);
        let first = answer(&engine, &seqs);
        let failed = |r: &Result<Vec<f32>, EngineError>| matches!(r, Err(EngineError::Backend(BackendError::Inference(m))) if m.contains("injected"));
        for (seq, r) in seqs.iter().zip(&first) {
            assert!(r.as_ref().is_ok_and(|v| v == &expected(seq)) || failed(r), "{r:?}");
        }
        assert!(first.iter().any(failed));
        let ok = first.iter().filter(|r| r.is_ok()).count();
        let ran: usize = log.lock().iter().map(|(_, _, tags)| tags.len()).sum();
        assert_eq!(ok, ran, "answered as embedded exactly the sequences that ran");
        // Once both are broken, everything gets the error, at once.
        let again = answer(&engine, &seqs);
        assert!(again.iter().all(failed), "{:?}", again.iter().find(|r| !failed(r)));
        assert!(engine.shutdown().failed_bins > 0);
    }
}
