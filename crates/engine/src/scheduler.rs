//! The [`Engine`]: a submission queue ([`crate::queue`]), a dispatcher thread
//! ([`crate::dispatcher`]) and a backend thread per device ([`crate::multi`]), started together.
//!
//! Why this shape: the backend (a model on a CPU or a GPU) must never wait for the host. Callers push
//! token sequences into a queue with two lanes; a dispatcher thread waits until enough work is pending
//! (`min_sequences`) or the oldest item has waited `max_wait`, packs everything pending into bins, and
//! hands them one at a time to the backend threads, one per device ([`crate::multi`]). While a backend
//! runs bin k, its next bin is already built: the dispatcher builds a bin only when a device has room
//! for one, so on one device a late interactive request waits behind at most two bins and new
//! arrivals can still join the tail.
//!
//! Interactive requests (a search query) are packed before any bulk bin that is not yet handed over.
//! The last, partly filled bin of a packing round is re-opened when more bulk work has arrived by the
//! time it would be sent, so a trickle of arrivals does not produce a trail of half-empty bins.
//!
//! Nothing is silently dropped: a sequence that cannot fit a bin is answered with an error at once,
//! a backend failure is answered for every sequence of that bin, and shutting down drains the queue.
//!
//! The one exception is asked for: a request whose caller has gone (an HTTP client that hung up)
//! can be cancelled ([`Ticket::cancel`], or dropping its [`Ticket`]). Its sequences still in the
//! queue are taken out at once and those already planned into a bin are left out when that bin is
//! laid out, so nobody's abandoned work holds a lane; only bins already handed to a device (at most
//! one running and one waiting per device) still run. Its waiter returns at once.
//!
//! Every bin runs inside a tracing span of its own (`bin`: tokens, sequences, lane, device), made
//! when the bin is laid out and entered on the device's thread, which follows from the spans its
//! sequences were submitted in (the indexing pipeline submits each document's chunks inside that
//! document's span). The engine's threads report to the subscriber of the thread that started it.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use parking_lot::{Condvar, Mutex};
use warpfold_backend::{Backend, BackendInfo, SequenceTag};

pub use crate::config::{Batching, Lane, SchedulerConfig, Window};
use crate::dispatcher::Dispatcher;
pub use crate::error::EngineError;
use crate::multi::Devices;
use crate::packer::aligned_len;
pub use crate::queue::{Cancel, Ticket};
use crate::queue::{Pending, Queue, QueueState};
use crate::stats::{BinRecord, DeviceCounters, EngineStats, StatsSnapshot};

/// A running scheduler: the queue, the dispatcher thread and one backend thread per device.
pub struct Engine {
    queue: Arc<Queue>,
    stats: Arc<EngineStats>,
    info: BackendInfo,
    config: SchedulerConfig,
    next_request: AtomicU64,
    dispatcher: Option<JoinHandle<()>>,
    workers: Vec<JoinHandle<()>>,
}

impl Engine {
    /// Starts the dispatcher and moves `backend` onto its own thread.
    pub fn start<B: Backend + 'static>(backend: B, config: SchedulerConfig) -> Engine {
        let capacity = config.bin_tokens;
        Engine::start_devices(vec![(backend, capacity)], config)
    }

    /// Starts one dispatcher for several devices, each `(backend, its bin capacity)` on a thread of
    /// its own (see [`crate::multi`]). Bins are packed against the largest capacity and cut for
    /// smaller devices; `config.bin_tokens` becomes that largest capacity.
    pub fn start_devices<B: Backend + 'static>(devices: Vec<(B, u32)>, mut config: SchedulerConfig) -> Engine {
        assert!(!devices.is_empty(), "an engine needs a device. This is a bug.");
        let mut info = devices[0].0.info();
        let counters: Vec<DeviceCounters> =
            devices.iter().map(|(b, cap)| DeviceCounters::new(b.info().device, *cap).with_timeline(b.timeline())).collect();
        info.device = counters.iter().map(|c| c.device.as_str()).collect::<Vec<_>>().join(",");
        let capacities: Vec<u32> = devices.iter().map(|d| d.1).collect();
        config.bin_tokens = capacities.iter().copied().max().expect("checked non-empty");
        let queue = Arc::new(Queue { state: Mutex::new(QueueState::default()), arrived: Condvar::new() });
        let stats = Arc::new(EngineStats { devices: counters, ..EngineStats::default() });
        let set = Devices::new(&capacities, config.cost, stats.clone());
        {
            // A device going idle wakes the dispatcher (the adaptive window ships what is queued).
            // Under the queue's lock: the dispatcher holds it from its look at the devices until it
            // waits, so the wake-up cannot fall between the two and be lost (which would leave the
            // device idle until the next re-check).
            let queue = queue.clone();
            set.on_idle(Box::new(move || {
                let _state = queue.state.lock();
                queue.arrived.notify_all();
            }));
        }
        let workers = devices.into_iter().enumerate().map(|(d, (backend, _))| set.spawn_worker(d, backend)).collect();
        let dispatcher = {
            // The engine's threads report to the tracing subscriber of the thread that started it.
            let dispatch = tracing::dispatcher::get_default(Clone::clone);
            let queue = queue.clone();
            let stats = stats.clone();
            let config = config.clone();
            let pad = info.pad_token_id;
            std::thread::Builder::new()
                .name("warpfold-dispatch".into())
                .spawn(move || {
                    let dispatcher =
                        Dispatcher { queue, config, pad, stats, devices: set, urgent: VecDeque::new(), ready: VecDeque::new() };
                    tracing::dispatcher::with_default(&dispatch, || dispatcher.run())
                })
                .expect("spawning the dispatcher thread")
        };
        Engine { queue, stats, info, config, next_request: AtomicU64::new(0), dispatcher: Some(dispatcher), workers }
    }

    pub fn info(&self) -> &BackendInfo {
        &self.info
    }

    pub fn config(&self) -> &SchedulerConfig {
        &self.config
    }

    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

    /// The most recent bins run, oldest first (for live displays).
    pub fn recent_bins(&self) -> Vec<BinRecord> {
        self.stats.recent_bins()
    }

    /// Largest sequence (in tokens) a bin can take under the current settings.
    pub fn max_sequence_tokens(&self) -> usize {
        match self.config.batching {
            Batching::Packed => {
                let c = self.config.bin_tokens;
                let a = self.config.align.max(1);
                (c - c % a) as usize
            }
            Batching::Padded { .. } => usize::MAX,
        }
    }

    /// Queues the sequences of one request. Sequences that can never run are answered at once.
    pub fn submit(&self, lane: Lane, sequences: Vec<Vec<u32>>) -> Ticket {
        let request = self.next_request.fetch_add(1, Ordering::Relaxed);
        let (reply, results) = crossbeam_channel::unbounded();
        let len = sequences.len();
        let limit = self.max_sequence_tokens();
        let mut accepted = Vec::with_capacity(len);
        let arrived = Instant::now();
        let cancelled = Arc::new(AtomicBool::new(false));
        let span = tracing::Span::current();
        for (index, ids) in sequences.into_iter().enumerate() {
            let index = index as u32;
            if ids.is_empty() {
                let _ = reply.send((index, Err(EngineError::EmptySequence)));
            } else if ids.len() > limit {
                let aligned = aligned_len(ids.len() as u32, self.config.align) as usize;
                let capacity = self.config.bin_tokens as usize;
                let _ = reply.send((index, Err(EngineError::SequenceTooLong { tokens: ids.len(), aligned, capacity })));
            } else {
                accepted.push(Pending {
                    tag: SequenceTag { request, index },
                    ids,
                    reply: reply.clone(),
                    arrived,
                    cancelled: cancelled.clone(),
                    span: span.clone(),
                });
            }
        }
        if !accepted.is_empty() {
            let mut state = self.queue.state.lock();
            if state.closed {
                for p in accepted {
                    let _ = p.reply.send((p.tag.index, Err(EngineError::ShutDown)));
                }
            } else {
                state.oldest.get_or_insert_with(Instant::now);
                self.stats.waiting_sequences.fetch_add(accepted.len() as u64, Ordering::Relaxed);
                match lane {
                    Lane::Interactive => state.interactive.extend(accepted),
                    Lane::Bulk => state.bulk.extend(accepted),
                }
                drop(state);
                self.queue.arrived.notify_one();
            }
        }
        let (wake, woken) = crossbeam_channel::bounded(1);
        let cancel = Cancel { request, flag: cancelled, queue: self.queue.clone(), stats: self.stats.clone(), wake };
        Ticket { len, results, cancel, woken, answered: false }
    }

    /// Submits and waits: one result per sequence, in order.
    pub fn embed(&self, lane: Lane, sequences: Vec<Vec<u32>>) -> Vec<Result<Vec<f32>, EngineError>> {
        self.submit(lane, sequences).wait()
    }

    /// Drains everything queued, then stops both threads.
    pub fn shutdown(mut self) -> StatsSnapshot {
        self.stop();
        self.stats.snapshot()
    }

    fn stop(&mut self) {
        self.queue.state.lock().closed = true;
        self.queue.arrived.notify_all();
        if let Some(d) = self.dispatcher.take() {
            let _ = d.join();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use crossbeam_channel::Receiver;
    use warpfold_backend::{validate_bin, BackendError, Bin, Layout};

    use crate::packer::aligned_len;

    /// Token id that makes the fake backend fail the whole bin it is in.
    const POISON: u32 = 666;
    /// Token id that makes the fake backend panic.
    const PANIC: u32 = 999;
    const PAD: u32 = 0;

    /// A backend whose "embedding" of a sequence is `[sum of its ids, its length]`, so every answer
    /// can be checked against the input; it records the bins it saw and can be held at a gate.
    struct FakeBackend {
        seen: Arc<Mutex<Vec<Bin>>>,
        gate: Option<Receiver<()>>,
    }

    impl Backend for FakeBackend {
        fn info(&self) -> BackendInfo {
            BackendInfo {
                model: "fake".into(),
                device: "none".into(),
                max_sequence_tokens: 512,
                output_dim: 2,
                pad_token_id: PAD,
                attention: "none".into(),
            }
        }
        fn embed(&mut self, bin: &Bin) -> Result<Vec<Vec<f32>>, BackendError> {
            if let Some(gate) = &self.gate {
                gate.recv().map_err(|_| BackendError::Inference("gate closed".into()))?;
            }
            validate_bin(bin)?;
            self.seen.lock().push(bin.clone());
            let mut out = Vec::new();
            for i in 0..bin.num_sequences() {
                let (start, slot, real) = bin.slot(i);
                let ids = &bin.input_ids[start..start + real];
                assert!(bin.input_ids[start + real..start + slot].iter().all(|&t| t == PAD), "slot tail is padding");
                assert!(bin.position_ids[start..start + real].iter().copied().eq(0..real as u32), "positions restart");
                assert!(bin.position_ids[start + real..start + slot].iter().all(|&p| p == 0), "pad positions are 0");
                assert!(!ids.contains(&PANIC), "fake backend told to panic");
                if ids.contains(&POISON) {
                    return Err(BackendError::Inference("poisoned bin".into()));
                }
                out.push(vec![ids.iter().map(|&t| t as f32).sum(), real as f32]);
            }
            Ok(out)
        }
    }

    fn fake(gate: Option<Receiver<()>>) -> (FakeBackend, Arc<Mutex<Vec<Bin>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        (FakeBackend { seen: seen.clone(), gate }, seen)
    }

    fn expected(seq: &[u32]) -> Vec<f32> {
        vec![seq.iter().map(|&t| t as f32).sum(), seq.len() as f32]
    }

    fn sequences(n: usize, seed: u64) -> Vec<Vec<u32>> {
        let mut rng = warpfold_testkit::seeded::Rng::new(seed);
        (0..n).map(|_| (0..rng.range(1, 300)).map(|_| rng.range(1_000, 30_000) as u32).collect()).collect()
    }

    /// The tokens of each bin run when short sequences arrive one by one while the device is busy:
    /// the device is held on a first bin of one sequence until 80 more (1,280 tokens) have arrived
    /// and the dispatcher has built the bin after it, then everything is let through.
    fn bins_behind_a_busy_device(window: Window) -> Vec<u32> {
        let (permit, gate) = crossbeam_channel::unbounded();
        let (backend, seen) = fake(Some(gate));
        let engine = Engine::start(backend, SchedulerConfig { bin_tokens: 1024, window, ..Default::default() });
        let mut tickets = vec![engine.submit(Lane::Bulk, vec![vec![998; 16]])];
        until_built(&engine, 1);
        tickets.extend((0..80).map(|i| engine.submit(Lane::Bulk, vec![vec![1000 + i as u32; 16]])));
        until_built(&engine, 2);
        for _ in 0..100 {
            permit.send(()).unwrap();
        }
        for t in tickets {
            assert!(t.wait()[0].is_ok());
        }
        let bins = seen.lock().iter().map(|b| b.input_ids.len() as u32).collect();
        drop(engine);
        bins
    }

    #[test]
    fn the_adaptive_window_fills_bins_while_the_device_is_busy_and_never_leaves_it_waiting() {
        let adaptive = bins_behind_a_busy_device(Window::Adaptive);
        assert_eq!(adaptive.iter().sum::<u32>(), 81 * 16);
        assert_eq!(&adaptive[..2], [16, 1024], "the bin built while the device was busy is full: {adaptive:?}");
        // (The source project's trigger, Window::Fixed, would have shipped that bin as soon as 16
        // sequences were pending; how much that costs is measured in bench-index, not here: it
        // depends on which thread runs first.)

        // A trickle (each sequence waited for before the next): the idle device gets each at once.
        let (backend, seen) = fake(None);
        let engine = Engine::start(backend, SchedulerConfig { bin_tokens: 1024, ..Default::default() });
        for i in 0..5 {
            assert!(engine.embed(Lane::Bulk, vec![vec![7; 10 + i]])[0].is_ok());
        }
        assert_eq!(seen.lock().len(), 5, "nothing waits for company while the device idles");
        assert_eq!(engine.stats().devices.len(), 1);
    }

    #[test]
    fn every_sequence_is_answered_in_order_with_its_own_result() {
        let (backend, seen) = fake(None);
        let engine = Engine::start(backend, SchedulerConfig { bin_tokens: 1024, ..Default::default() });
        let seqs = sequences(500, 1);
        let results = engine.embed(Lane::Bulk, seqs.clone());
        for (seq, r) in seqs.iter().zip(&results) {
            assert_eq!(r.as_ref().unwrap(), &expected(seq));
        }
        let stats = engine.shutdown();
        assert_eq!(stats.sequences, 500);
        let bins = seen.lock();
        assert!(bins.iter().all(|b| b.layout == Layout::Packed && b.computed_tokens() <= 1024));
        assert!(bins.iter().all(|b| b.cu_seqlens.iter().all(|&c| c % 16 == 0)), "slots start aligned");
        let real: usize = seqs.iter().map(Vec::len).sum();
        assert_eq!(stats.real_tokens as usize, real);
        // FFD over everything pending: bins are nearly full, so few more than the lower bound.
        let aligned: u64 = seqs.iter().map(|s| u64::from(aligned_len(s.len() as u32, 16))).sum();
        assert!(stats.bins <= aligned.div_ceil(1024) + 2, "{} bins for {aligned} aligned tokens", stats.bins);
    }

    /// What a tracing subscriber saw: each `bin` span (its fields, the `doc` of every span it
    /// follows from) and, for each event, the bin span it was emitted in.
    #[derive(Default)]
    struct Traced {
        docs: std::collections::HashMap<u64, u64>,
        bins: Vec<(String, Vec<u64>)>,
        live_bins: std::collections::HashMap<u64, usize>,
        events_in_bins: Vec<Option<usize>>,
    }

    #[derive(Clone, Default)]
    struct TraceLog(Arc<Mutex<Traced>>);

    struct Fields<'a>(&'a mut String, Option<&'a mut u64>);

    impl tracing::field::Visit for Fields<'_> {
        fn record_u64(&mut self, field: &tracing::field::Field, value: u64) {
            if let (Some(doc), "doc") = (self.1.as_deref_mut(), field.name()) {
                *doc = value;
            }
            self.record_debug(field, &value);
        }
        fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
            self.0.push_str(&format!("{}={value:?} ", field.name()));
        }
    }

    impl<S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>> tracing_subscriber::Layer<S> for TraceLog {
        fn on_new_span(&self, attrs: &tracing::span::Attributes<'_>, id: &tracing::span::Id, _: tracing_subscriber::layer::Context<'_, S>) {
            let mut log = self.0.lock();
            let (mut text, mut doc) = (String::new(), u64::MAX);
            attrs.record(&mut Fields(&mut text, Some(&mut doc)));
            match attrs.metadata().name() {
                "document" => drop(log.docs.insert(id.into_u64(), doc)),
                "bin" => {
                    let index = log.bins.len();
                    log.bins.push((text, Vec::new()));
                    log.live_bins.insert(id.into_u64(), index);
                }
                _ => {}
            }
        }
        fn on_record(&self, id: &tracing::span::Id, values: &tracing::span::Record<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
            let mut log = self.0.lock();
            if let Some(&index) = log.live_bins.get(&id.into_u64()) {
                values.record(&mut Fields(&mut log.bins[index].0, None));
            }
        }
        fn on_follows_from(&self, span: &tracing::span::Id, follows: &tracing::span::Id, _: tracing_subscriber::layer::Context<'_, S>) {
            let mut log = self.0.lock();
            let doc = log.docs[&follows.into_u64()];
            let index = log.live_bins[&span.into_u64()];
            log.bins[index].1.push(doc);
        }
        fn on_event(&self, event: &tracing::Event<'_>, ctx: tracing_subscriber::layer::Context<'_, S>) {
            let mut log = self.0.lock();
            let bin = ctx.event_span(event).and_then(|span| log.live_bins.get(&span.id().into_u64()).copied());
            log.events_in_bins.push(bin);
        }
        fn on_close(&self, id: tracing::span::Id, _: tracing_subscriber::layer::Context<'_, S>) {
            self.0.lock().live_bins.remove(&id.into_u64());
        }
    }

    /// The fake backend, saying from inside each forward that it ran.
    struct TracingBackend(FakeBackend);

    impl Backend for TracingBackend {
        fn info(&self) -> BackendInfo {
            self.0.info()
        }
        fn embed(&mut self, bin: &Bin) -> Result<Vec<Vec<f32>>, BackendError> {
            tracing::info!(sequences = bin.num_sequences(), "forward");
            self.0.embed(bin)
        }
    }

    #[test]
    fn each_bin_runs_in_a_span_of_its_own_on_the_device_thread_following_the_documents_it_holds() {
        use tracing_subscriber::layer::SubscriberExt;
        let log = TraceLog::default();
        let subscriber = tracing_subscriber::registry().with(log.clone());
        tracing::subscriber::with_default(subscriber, || {
            let (permit, gate) = crossbeam_channel::unbounded();
            let (backend, _) = fake(Some(gate));
            let engine = Engine::start(TracingBackend(backend), SchedulerConfig { bin_tokens: 1024, ..Default::default() });
            let docs: Vec<tracing::Span> = (0..4u64).map(|doc| tracing::info_span!("document", doc)).collect();
            // Document 0's bin holds the device; documents 1 to 3 arrive meanwhile, more than a bin:
            // FFD puts 1's two sequences and 2's in the next bin (400 + 304 + 304 tokens), 3's after.
            let mut tickets = vec![docs[0].in_scope(|| engine.submit(Lane::Bulk, vec![vec![5; 40]]))];
            until_built(&engine, 1);
            tickets.push(docs[1].in_scope(|| engine.submit(Lane::Bulk, vec![vec![6; 400], vec![7; 300]])));
            tickets.push(docs[2].in_scope(|| engine.submit(Lane::Bulk, vec![vec![8; 300]])));
            tickets.push(docs[3].in_scope(|| engine.submit(Lane::Bulk, vec![vec![9; 100]])));
            until_built(&engine, 2);
            for _ in 0..3 {
                permit.send(()).unwrap();
            }
            for t in tickets {
                assert!(t.wait().iter().all(Result::is_ok));
            }
            engine.shutdown();
        });
        let log = log.0.lock();
        let bins: Vec<(&str, Vec<u64>)> = log.bins.iter().map(|(fields, docs)| (fields.as_str(), docs.clone())).collect();
        assert_eq!(bins.iter().map(|b| b.1.clone()).collect::<Vec<_>>(), [vec![0], vec![1, 2], vec![3]], "{bins:?}");
        for ((fields, _), sequences) in bins.iter().zip([1, 3, 1]) {
            assert!(fields.contains(&format!("sequences={sequences} ")) && fields.contains("device=0 "), "{fields}");
        }
        assert_eq!(log.events_in_bins, [Some(0), Some(1), Some(2)], "each forward ran inside its bin's span, on the device thread");
    }

    /// Runs like [`FakeBackend`] but reports out-of-memory for bins over `limit` computed tokens.
    struct SmallDevice {
        inner: FakeBackend,
        limit: usize,
        /// Computed tokens of every bin it was asked to run, failed or not.
        attempts: Arc<Mutex<Vec<usize>>>,
    }

    impl Backend for SmallDevice {
        fn info(&self) -> BackendInfo {
            self.inner.info()
        }
        fn embed(&mut self, bin: &Bin) -> Result<Vec<Vec<f32>>, BackendError> {
            self.attempts.lock().push(bin.computed_tokens());
            if bin.computed_tokens() > self.limit {
                return Err(BackendError::OutOfMemory { tokens: bin.computed_tokens() });
            }
            self.inner.embed(bin)
        }
    }

    #[test]
    fn out_of_memory_splits_the_bin_loses_nothing_and_lowers_the_capacity() {
        let (inner, _) = fake(None);
        let attempts = Arc::new(Mutex::new(Vec::new()));
        let device = SmallDevice { inner, limit: 600, attempts: attempts.clone() };
        let engine = Engine::start(device, SchedulerConfig { bin_tokens: 4096, ..Default::default() });
        let seqs = sequences(120, 9);
        let results = engine.embed(Lane::Bulk, seqs.clone());
        for (seq, r) in seqs.iter().zip(&results) {
            assert_eq!(r.as_ref().unwrap(), &expected(seq), "every sequence answered despite the out-of-memory bins");
        }
        let first = engine.stats();
        assert!(first.oom_splits > 0, "{first:?}");
        let limit = first.capacity_limit.expect("a capacity was learnt");
        assert!(limit < 4096, "{first:?}");
        assert!(attempts.lock().iter().any(|&t| t > 2048), "the first bins were packed against 4096");
        // The next batch is packed against the learnt capacity: no bin asked of the device is
        // larger than it (a single sequence of up to 304 aligned tokens always fits a bin).
        let before = attempts.lock().len();
        let again = engine.embed(Lane::Bulk, seqs.clone());
        assert!(again.iter().all(Result::is_ok));
        let largest = attempts.lock()[before..].iter().copied().max().unwrap();
        assert!(largest <= limit.max(304) as usize, "largest bin {largest} > learnt capacity {limit}");
        // Each of those bins says it was packed against the learnt capacity, not the configured
        // 4096: a live view's fill bars read against what the bin could hold.
        let ran_since = engine.stats().bins - first.bins;
        let recent = engine.recent_bins();
        let newest = &recent[recent.len().saturating_sub(ran_since as usize)..];
        assert!(!newest.is_empty());
        for bin in newest {
            let aligned: u32 = bin.aligned.iter().sum();
            assert!(
                bin.capacity <= limit.max(304) && bin.capacity >= aligned,
                "bin packed against {} after learning {limit}",
                bin.capacity
            );
        }
        // A sequence too large for the device even alone fails alone.
        let big = vec![3u32; 700];
        let small = vec![4u32; 10];
        let mixed = engine.embed(Lane::Bulk, vec![small.clone(), big, small.clone()]);
        assert_eq!(mixed[0], Ok(expected(&small)));
        assert!(matches!(mixed[1], Err(EngineError::Backend(BackendError::OutOfMemory { .. }))), "{:?}", mixed[1]);
        assert_eq!(mixed[2], Ok(expected(&small)));
    }

    #[test]
    fn too_long_and_empty_sequences_get_their_own_errors_and_the_rest_still_run() {
        let (backend, _) = fake(None);
        let engine = Engine::start(backend, SchedulerConfig { bin_tokens: 256, ..Default::default() });
        let ok = vec![5u32; 40];
        let results = engine.embed(Lane::Bulk, vec![ok.clone(), vec![7; 300], vec![], ok.clone()]);
        assert_eq!(results[0], Ok(expected(&ok)));
        assert_eq!(results[1], Err(EngineError::SequenceTooLong { tokens: 300, aligned: 304, capacity: 256 }));
        assert_eq!(results[2], Err(EngineError::EmptySequence));
        assert_eq!(results[3], Ok(expected(&ok)));
    }

    #[test]
    fn a_failing_bin_fails_only_its_own_sequences() {
        let (backend, _) = fake(None);
        // Bins of 64 tokens: each 40-token sequence gets a bin of its own.
        let engine = Engine::start(backend, SchedulerConfig { bin_tokens: 64, ..Default::default() });
        let good = vec![3u32; 40];
        let mut bad = vec![3u32; 40];
        bad[7] = POISON;
        let results = engine.embed(Lane::Bulk, vec![good.clone(), bad, good.clone()]);
        assert_eq!(results[0], Ok(expected(&good)));
        assert!(matches!(&results[1], Err(EngineError::Backend(BackendError::Inference(m))) if m.contains("poison")));
        assert_eq!(results[2], Ok(expected(&good)));
        assert_eq!(engine.shutdown().failed_bins, 1);
    }

    #[test]
    fn interactive_requests_overtake_queued_bulk_work() {
        let (gate_tx, gate_rx) = crossbeam_channel::unbounded();
        let (backend, seen) = fake(Some(gate_rx));
        let engine = Engine::start(backend, SchedulerConfig { bin_tokens: 256, ..Default::default() });
        // 40 bulk sequences of 200 tokens: 40 bins, queued behind a closed gate.
        let bulk = engine.submit(Lane::Bulk, vec![vec![1u32; 200]; 40]);
        // Let the dispatcher take the bulk work and block on the first hand-over.
        while !engine.queue.state.lock().bulk.is_empty() {
            std::thread::yield_now();
        }
        let query = engine.submit(Lane::Interactive, vec![vec![2u32; 10]]);
        for _ in 0..60 {
            gate_tx.send(()).unwrap();
        }
        assert_eq!(query.wait()[0], Ok(expected(&[2; 10])));
        assert!(bulk.wait().iter().all(Result::is_ok));
        let bins = seen.lock();
        let pos = bins.iter().position(|b| b.input_ids[0] == 2).unwrap();
        // At most the bin being run and the one already started go first.
        assert!(pos <= 2, "the interactive bin ran {pos}th of {}", bins.len());
    }

    #[test]
    fn bins_answering_queries_are_counted_apart_so_the_bulk_lanes_fill_is_its_own() {
        let (backend, _) = fake(None);
        let engine = Engine::start(backend, SchedulerConfig { bin_tokens: 256, ..Default::default() });
        // Four 200-token bulk sequences: four bins of 208 aligned tokens; one 10-token query: one bin of 16.
        assert!(engine.embed(Lane::Bulk, vec![vec![1u32; 200]; 4]).iter().all(Result::is_ok));
        assert!(engine.embed(Lane::Interactive, vec![vec![2u32; 10]]).iter().all(Result::is_ok));
        let stats = engine.stats();
        assert_eq!((stats.bins, stats.interactive_bins), (5, 1));
        assert_eq!((stats.computed_tokens, stats.interactive_computed_tokens), (4 * 208 + 16, 16));
        assert!((stats.bulk_fill(256) - 208.0 / 256.0).abs() < 1e-9, "bulk fill {}", stats.bulk_fill(256));
        // Counted from a later point, only what ran since.
        let before = engine.stats();
        assert!(engine.embed(Lane::Interactive, vec![vec![3u32; 40]]).iter().all(Result::is_ok));
        let since = engine.stats().since(&before);
        assert_eq!((since.bins, since.interactive_bins, since.interactive_computed_tokens), (1, 1, 48));
        assert_eq!(since.bulk_fill(256), 0.0, "no bulk bin ran since");
    }

    #[test]
    fn the_next_bin_is_built_while_the_backend_runs_the_current_one() {
        let (gate_tx, gate_rx) = crossbeam_channel::unbounded();
        let (backend, seen) = fake(Some(gate_rx));
        let engine = Engine::start(backend, SchedulerConfig { bin_tokens: 256, ..Default::default() });
        let pending = engine.submit(Lane::Bulk, vec![vec![1u32; 200]; 5]);
        // The backend holds bin 1 at its gate; the dispatcher must have bin 2 laid out and waiting.
        let deadline = Instant::now() + Duration::from_secs(60);
        while engine.stats.bins_built.load(Ordering::Relaxed) < 2 {
            assert!(Instant::now() < deadline, "the second bin was never built");
            std::thread::yield_now();
        }
        assert_eq!(seen.lock().len(), 0, "no bin has finished yet");
        assert_eq!(engine.stats.bins_built.load(Ordering::Relaxed), 2, "one bin ahead, no more (the hand-over is a rendezvous)");
        for _ in 0..5 {
            gate_tx.send(()).unwrap();
        }
        assert!(pending.wait().iter().all(Result::is_ok));
        assert_eq!(engine.shutdown().bins, 5);
    }

    /// Waits (at most a minute, a bug otherwise) until the dispatcher has built `n` bins.
    fn until_built(engine: &Engine, n: u64) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while engine.stats.bins_built.load(Ordering::Relaxed) < n {
            assert!(Instant::now() < deadline, "bin {n} was never built");
            std::thread::yield_now();
        }
    }

    #[test]
    fn a_cancelled_request_leaves_the_queue_never_runs_and_its_waiter_returns() {
        let (gate_tx, gate_rx) = crossbeam_channel::unbounded();
        let (backend, seen) = fake(Some(gate_rx));
        let engine = Engine::start(backend, SchedulerConfig { bin_tokens: 256, ..Default::default() });
        // Bulk work of 5 one-sequence bins: one runs (held at the gate), one waits on the device,
        // and the dispatcher waits for room, so what is submitted next stays in the queue.
        let bulk = engine.submit(Lane::Bulk, vec![vec![1u32; 200]; 5]);
        until_built(&engine, 2);
        let abandoned = engine.submit(Lane::Interactive, vec![vec![2u32; 100]; 7]);
        let cancel = abandoned.canceller();
        let waiter = std::thread::spawn(move || abandoned.wait());
        cancel.cancel();
        let answers = waiter.join().unwrap();
        assert_eq!(answers, vec![Err(EngineError::Cancelled); 7], "the waiter returns at once, every sequence cancelled");
        assert!(engine.queue.state.lock().interactive.is_empty(), "taken out of the queue");
        for _ in 0..5 {
            gate_tx.send(()).unwrap();
        }
        assert!(bulk.wait().iter().all(Result::is_ok));
        let stats = engine.shutdown();
        assert_eq!((stats.sequences, stats.cancelled_sequences), (5, 7));
        assert!(seen.lock().iter().all(|b| !b.input_ids.contains(&2)), "no cancelled sequence ran");
    }

    #[test]
    fn dropping_a_ticket_leaves_its_planned_sequences_out_of_their_bins() {
        let (gate_tx, gate_rx) = crossbeam_channel::unbounded();
        let (backend, seen) = fake(Some(gate_rx));
        let engine = Engine::start(backend, SchedulerConfig { bin_tokens: 256, ..Default::default() });
        let bulk = engine.submit(Lane::Bulk, vec![vec![1u32; 200]; 5]);
        until_built(&engine, 2);
        // Six interactive bins: once the device has room the dispatcher plans all six, hands the
        // first over, and holds five planned; then the caller goes away.
        let abandoned = engine.submit(Lane::Interactive, vec![vec![2u32; 200]; 6]);
        gate_tx.send(()).unwrap();
        until_built(&engine, 3);
        assert!(engine.queue.state.lock().interactive.is_empty(), "all six were planned");
        drop(abandoned);
        for _ in 0..10 {
            gate_tx.send(()).unwrap();
        }
        assert!(bulk.wait().iter().all(Result::is_ok));
        let stats = engine.shutdown();
        let ran = seen.lock().iter().filter(|b| b.input_ids.contains(&2)).count();
        assert_eq!(ran, 1, "only the bin already handed to the device ran");
        assert_eq!((stats.sequences, stats.cancelled_sequences), (5 + 1, 5));
    }

    #[test]
    fn a_ticket_waited_to_the_end_cancels_nothing() {
        let (backend, _) = fake(None);
        let engine = Engine::start(backend, SchedulerConfig::default());
        let ticket = engine.submit(Lane::Bulk, vec![vec![3u32; 10]; 4]);
        let cancel = ticket.canceller();
        assert!(ticket.wait().iter().all(Result::is_ok));
        assert!(!cancel.is_cancelled());
        assert_eq!(engine.shutdown().cancelled_sequences, 0);
    }

    /// A ticket says it is answered only once every sequence's answer is in, without taking them.
    #[test]
    fn a_ticket_is_answered_once_every_sequence_is() {
        let (gate_tx, gate_rx) = crossbeam_channel::unbounded();
        let (backend, _) = fake(Some(gate_rx));
        let engine = Engine::start(backend, SchedulerConfig { bin_tokens: 256, ..Default::default() });
        // Two bins of 200 tokens: the first lets one answer in, the second the other.
        let ticket = engine.submit(Lane::Bulk, vec![vec![4u32; 200]; 2]);
        assert!(!ticket.is_answered());
        gate_tx.send(()).unwrap();
        while engine.stats().sequences < 1 {
            std::thread::yield_now();
        }
        assert!(!ticket.is_answered(), "one of two answers is in");
        gate_tx.send(()).unwrap();
        while !ticket.is_answered() {
            std::thread::yield_now();
        }
        assert_eq!(ticket.wait(), vec![Ok(expected(&[4; 200])); 2]);
        drop(engine);
    }

    #[test]
    fn padded_batching_groups_in_arrival_order_and_pads_to_the_longest() {
        let (backend, seen) = fake(None);
        let cfg = SchedulerConfig { batching: Batching::Padded { batch_size: 4 }, ..Default::default() };
        let engine = Engine::start(backend, cfg);
        let seqs = sequences(10, 2);
        let results = engine.embed(Lane::Bulk, seqs.clone());
        for (seq, r) in seqs.iter().zip(&results) {
            assert_eq!(r.as_ref().unwrap(), &expected(seq));
        }
        drop(engine);
        let bins = seen.lock();
        assert_eq!(bins.iter().map(Bin::num_sequences).collect::<Vec<_>>(), vec![4, 4, 2]);
        for (b, group) in bins.iter().zip(seqs.chunks(4)) {
            let longest = group.iter().map(Vec::len).max().unwrap();
            assert!(b.cu_seqlens.windows(2).all(|w| (w[1] - w[0]) as usize == longest));
        }
    }

    #[test]
    fn a_lone_sequence_is_sent_after_the_wait_and_a_full_window_at_once() {
        let (backend, seen) = fake(None);
        // A long wait: only the count trigger can send a full window quickly; the lone sequence
        // waits for the timer. Both must arrive, each in a single bin.
        let cfg = SchedulerConfig { window: Window::Fixed, min_sequences: 4, max_wait: Duration::from_millis(200), ..Default::default() };
        let engine = Engine::start(backend, cfg);
        let four = engine.embed(Lane::Bulk, vec![vec![1; 10]; 4]);
        assert!(four.iter().all(Result::is_ok));
        let one = engine.embed(Lane::Bulk, vec![vec![1; 10]]);
        assert!(one[0].is_ok());
        drop(engine);
        let bins = seen.lock();
        assert_eq!(bins.iter().map(Bin::num_sequences).collect::<Vec<_>>(), vec![4, 1]);
    }

    #[test]
    fn shutting_down_answers_everything_already_queued() {
        let (backend, _) = fake(None);
        let cfg = SchedulerConfig { window: Window::Fixed, max_wait: Duration::from_secs(3600), min_sequences: 1000, ..Default::default() };
        let engine = Engine::start(backend, cfg);
        let ticket = engine.submit(Lane::Bulk, vec![vec![4; 20]; 3]);
        let stats = engine.shutdown();
        assert_eq!(stats.sequences, 3);
        assert!(ticket.wait().iter().all(Result::is_ok));
    }

    #[test]
    fn an_interactive_request_larger_than_one_bin_is_answered_whole() {
        let (backend, seen) = fake(None);
        let engine = Engine::start(backend, SchedulerConfig { bin_tokens: 64, ..Default::default() });
        let seqs = vec![vec![2000u32; 48]; 5];
        let results = engine.embed(Lane::Interactive, seqs.clone());
        assert_eq!(results, seqs.iter().map(|s| Ok(expected(s))).collect::<Vec<_>>());
        drop(engine);
        assert_eq!(seen.lock().len(), 5, "one 48-token sequence per 64-token bin");
    }

    #[test]
    fn a_panicking_backend_fails_its_bin_and_the_engine_goes_on() {
        let (backend, _) = fake(None);
        let engine = Engine::start(backend, SchedulerConfig { bin_tokens: 64, ..Default::default() });
        let mut bad = vec![3000u32; 40];
        bad[0] = PANIC;
        let results = engine.embed(Lane::Bulk, vec![bad]);
        assert!(matches!(&results[0], Err(EngineError::Backend(BackendError::Inference(m))) if m.contains("panicked")));
        let after = engine.embed(Lane::Bulk, vec![vec![3000u32; 40]]);
        assert_eq!(after[0], Ok(expected(&[3000; 40])));
    }
}
