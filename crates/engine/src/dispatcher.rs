//! The dispatcher thread: waits for a reason to pack (the window), plans what is queued into
//! bins (First-Fit-Decreasing, interactive work first), lays each out as a tape and hands it to
//! the devices ([`crate::multi`]) one bin ahead of them. See [`crate::scheduler`] for why.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use warpfold_backend::Bin;

use crate::config::{Batching, Lane, SchedulerConfig, Window};
use crate::multi::Devices;
use crate::packer::{aligned_len, pack};
use crate::queue::{Pending, Queue, Reply};
use crate::stats::EngineStats;
use crate::tape::{packed_bin, padded_bin, TokenSequence};

/// How often the adaptive window re-checks the devices when no wake-up came.
const ADAPTIVE_RECHECK: Duration = Duration::from_millis(2);

/// A bin and where its answers go.
pub(crate) struct Work {
    pub(crate) bin: Bin,
    pub(crate) replies: Vec<Reply>,
    /// The lane its sequences came through (a bin never mixes lanes).
    pub(crate) lane: Lane,
    /// The bin's span (`bin`, with its tokens, sequences and lane, and the device that ran it),
    /// following from the spans its sequences were submitted in.
    pub(crate) span: tracing::Span,
}

/// Sequences planned into one bin, not yet laid out.
pub(crate) struct PlannedBin {
    pub(crate) items: Vec<Pending>,
    pub(crate) tokens: u32,
    /// The capacity it was packed against: the configured one, or the smaller one learnt after an
    /// out-of-memory error. Stamped on the bin, so its fill reads against what it could hold.
    pub(crate) capacity: u32,
}

pub(crate) struct Dispatcher {
    pub(crate) queue: Arc<Queue>,
    pub(crate) config: SchedulerConfig,
    pub(crate) stats: Arc<EngineStats>,
    pub(crate) pad: u32,
    pub(crate) devices: Arc<Devices>,
    /// Interactive bins planned but not yet handed over: they go before any bulk bin.
    pub(crate) urgent: VecDeque<PlannedBin>,
    /// Bulk bins planned but not yet handed over, fullest first.
    pub(crate) ready: VecDeque<PlannedBin>,
}

pub(crate) enum Take {
    Interactive(Vec<Pending>),
    Bulk(Vec<Pending>),
    Urgent,
    Ready,
    Exit,
}

impl Dispatcher {
    /// The configured bin capacity, or less once the device has run out of memory.
    fn capacity(&self) -> u32 {
        self.devices.pack_capacity().unwrap_or(self.config.bin_tokens).min(self.config.bin_tokens)
    }

    pub(crate) fn run(mut self) {
        loop {
            // One bin ahead per device: build the next only when a device has room for it, so
            // bins (and interactive requests) are formed as late as possible.
            self.devices.wait_for_room();
            let (next, lane) = match self.take() {
                Take::Exit => return self.devices.close(),
                Take::Interactive(items) => {
                    let planned = self.plan(items);
                    self.urgent.extend(planned);
                    (self.urgent.pop_front(), Lane::Interactive)
                }
                Take::Urgent => (self.urgent.pop_front(), Lane::Interactive),
                Take::Bulk(items) => {
                    let mut planned = self.plan(items);
                    self.hold_back_partial_tail(&mut planned);
                    self.ready.extend(planned);
                    (self.ready.pop_front(), Lane::Bulk)
                }
                Take::Ready => (self.ready.pop_front(), Lane::Bulk),
            };
            let Some(next) = next.and_then(|planned| self.without_cancelled(planned)) else { continue };
            let work = self.lay_out(next, lane);
            // Built while the devices run earlier bins.
            self.stats.bins_built.fetch_add(1, Ordering::Relaxed);
            self.devices.assign(work);
        }
    }

    /// Waits for a reason to pack, then takes the work to pack.
    fn take(&mut self) -> Take {
        let mut state = self.queue.state.lock();
        loop {
            if !state.interactive.is_empty() {
                let items: Vec<Pending> = state.interactive.drain(..).collect();
                if state.bulk.is_empty() {
                    state.oldest = None;
                }
                return Take::Interactive(items);
            }
            if !self.urgent.is_empty() {
                return Take::Urgent;
            }
            if !self.ready.is_empty() {
                // Re-open the last, partly filled bin when new bulk work can share it, unless its
                // oldest sequence has already waited `max_wait`: under steady load it could
                // otherwise be re-planned into the tail again and again.
                let tail_has_room = self.ready.len() == 1
                    && self.ready[0].tokens < self.capacity()
                    && matches!(self.config.batching, Batching::Packed)
                    && self.ready[0].items.iter().map(|p| p.arrived).min().is_some_and(|t| t.elapsed() < self.config.max_wait);
                if tail_has_room && !state.bulk.is_empty() {
                    let tail = self.ready.pop_front().expect("checked non-empty");
                    let mut items = tail.items;
                    items.extend(state.bulk.drain(..));
                    state.oldest = None;
                    return Take::Bulk(items);
                }
                return Take::Ready;
            }
            let pending = state.bulk.len();
            let waited = state.oldest.map(|t| t.elapsed()).unwrap_or_default();
            let ship = pending > 0
                && (state.closed
                    || match (self.config.window, self.config.batching) {
                        (_, Batching::Padded { batch_size }) => pending >= batch_size.max(1) || waited >= self.config.max_wait,
                        (Window::Fixed, Batching::Packed) => pending >= self.config.min_sequences.max(1) || waited >= self.config.max_wait,
                        (Window::Adaptive, Batching::Packed) => self.bin_worth_queued(&state.bulk) || self.devices.starving(),
                    });
            if ship {
                state.oldest = None;
                return Take::Bulk(state.bulk.drain(..).collect());
            }
            if state.closed && pending == 0 {
                return Take::Exit;
            }
            match (pending > 0, self.config.window) {
                // Waiting for a full bin or an idle device; a device going idle wakes this (the
                // short timeout only covers a wake-up that raced the check above).
                (true, Window::Adaptive) if matches!(self.config.batching, Batching::Packed) => {
                    self.queue.arrived.wait_for(&mut state, ADAPTIVE_RECHECK);
                }
                (true, _) => {
                    let left = self.config.max_wait.saturating_sub(waited);
                    self.queue.arrived.wait_for(&mut state, left);
                }
                (false, _) => self.queue.arrived.wait(&mut state),
            }
        }
    }

    /// With the adaptive window, the last bin of a round that is not full goes back to the front
    /// of the queue (its sequences keep their place) while the devices are busy: more work may
    /// fill it before a device needs it. With one bin planned, it goes anyway.
    fn hold_back_partial_tail(&self, planned: &mut Vec<PlannedBin>) {
        if self.config.window != Window::Adaptive || !matches!(self.config.batching, Batching::Packed) || planned.len() < 2 {
            return;
        }
        let partial = planned.last().is_some_and(|b| b.tokens < self.capacity());
        if !partial || self.devices.starving() {
            return;
        }
        let tail = planned.pop().expect("checked non-empty");
        let mut state = self.queue.state.lock();
        if state.closed {
            drop(state);
            planned.push(tail);
            return;
        }
        for item in tail.items.into_iter().rev() {
            state.bulk.push_front(item);
        }
        let oldest = state.bulk.iter().map(|p| p.arrived).min();
        state.oldest = oldest;
    }

    /// Is a full bin's worth of bulk work queued (aligned lengths against the capacity)?
    fn bin_worth_queued(&self, bulk: &VecDeque<Pending>) -> bool {
        let capacity = self.capacity() as u64;
        let mut tokens = 0u64;
        bulk.iter().any(|p| {
            tokens += aligned_len(p.ids.len() as u32, self.config.align) as u64;
            tokens >= capacity
        })
    }

    /// Groups items into bins: FFD for packed, arrival-order batches for padded.
    fn plan(&self, items: Vec<Pending>) -> Vec<PlannedBin> {
        match self.config.batching {
            Batching::Padded { batch_size } => {
                let mut out = Vec::new();
                let mut items = items.into_iter().peekable();
                while items.peek().is_some() {
                    let batch: Vec<Pending> = items.by_ref().take(batch_size.max(1)).collect();
                    let longest = batch.iter().map(|p| p.ids.len()).max().unwrap_or(0);
                    let tokens = (longest * batch.len()) as u32;
                    out.push(PlannedBin { tokens, capacity: tokens, items: batch });
                }
                out
            }
            Batching::Packed => {
                let align = self.config.align;
                let lengths: Vec<u32> = items.iter().map(|p| aligned_len(p.ids.len() as u32, align)).collect();
                // After an out-of-memory error, pack against the learnt capacity; a sequence longer
                // than it still gets a bin of its own (and its own error if it cannot run alone).
                let longest = lengths.iter().copied().max().unwrap_or(0);
                let capacity = self.capacity().max(longest);
                let plan = pack(&lengths, capacity).expect("submit() rejects sequences longer than a bin. This is a bug.");
                let mut slots: Vec<Option<Pending>> = items.into_iter().map(Some).collect();
                let mut out: Vec<PlannedBin> = plan
                    .bins
                    .iter()
                    .map(|bin| PlannedBin {
                        capacity,
                        tokens: bin.iter().map(|&i| lengths[i as usize]).sum(),
                        items: bin.iter().map(|&i| slots[i as usize].take().expect("placed once")).collect(),
                    })
                    .collect();
                // Fullest first: the partly filled bins go last, where new arrivals can still join them.
                out.sort_by_key(|b| std::cmp::Reverse(b.tokens));
                out
            }
        }
    }

    /// Leaves out the sequences whose request was cancelled after they were planned; None when
    /// nothing is left to run.
    fn without_cancelled(&self, mut planned: PlannedBin) -> Option<PlannedBin> {
        let before = planned.items.len();
        planned.items.retain(|p| !p.cancelled.load(Ordering::Acquire));
        let dropped = before - planned.items.len();
        self.stats.cancelled_sequences.fetch_add(dropped as u64, Ordering::Relaxed);
        self.stats.waiting_sequences.fetch_sub(dropped as u64, Ordering::Relaxed);
        (!planned.items.is_empty()).then_some(planned)
    }

    fn lay_out(&self, planned: PlannedBin, lane: Lane) -> Work {
        self.stats.waiting_sequences.fetch_sub(planned.items.len() as u64, Ordering::Relaxed);
        let seqs = planned.items.iter().map(|p| TokenSequence { tag: p.tag, ids: &p.ids });
        let bin = match self.config.batching {
            Batching::Packed => packed_bin(seqs, self.config.align, planned.capacity, self.pad),
            Batching::Padded { .. } => padded_bin(seqs, self.pad),
        };
        let span = tracing::info_span!(
            parent: None,
            "bin",
            tokens = bin.computed_tokens(),
            sequences = bin.num_sequences(),
            lane = ?lane,
            device = tracing::field::Empty
        );
        let mut followed = Vec::new();
        for id in planned.items.iter().filter_map(|p| p.span.id()) {
            if !followed.contains(&id) {
                span.follows_from(id.clone());
                followed.push(id);
            }
        }
        Work { bin, replies: planned.items.into_iter().map(|p| p.reply).collect(), lane, span }
    }
}
