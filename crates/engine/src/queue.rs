//! The submission queue: two lanes of pending sequences, the tickets callers wait on, and
//! cancellation. A request's sequences enter together; each is answered through its request's
//! reply channel, in any order, and its ticket puts the answers back in submission order.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender};
use parking_lot::{Condvar, Mutex};
use warpfold_backend::SequenceTag;

use crate::error::EngineError;
use crate::stats::EngineStats;

pub(crate) type Reply = Sender<(u32, Result<Vec<f32>, EngineError>)>;

pub(crate) struct Pending {
    pub(crate) tag: SequenceTag,
    pub(crate) ids: Vec<u32>,
    pub(crate) reply: Reply,
    pub(crate) arrived: Instant,
    /// Set when its request is cancelled: the dispatcher leaves it out of the bin it was planned into.
    pub(crate) cancelled: Arc<AtomicBool>,
    /// The submitter's span (a document being indexed, a query): the bin that runs it follows from it.
    pub(crate) span: tracing::Span,
}

#[derive(Default)]
pub(crate) struct QueueState {
    pub(crate) interactive: VecDeque<Pending>,
    pub(crate) bulk: VecDeque<Pending>,
    /// When the oldest item now pending arrived.
    pub(crate) oldest: Option<Instant>,
    pub(crate) closed: bool,
}

pub(crate) struct Queue {
    pub(crate) state: Mutex<QueueState>,
    pub(crate) arrived: Condvar,
}

/// Answers for one submitted request, in submission order once collected. Dropping it before
/// every answer was collected cancels what has not started ([`Cancel`]).
pub struct Ticket {
    pub(crate) len: usize,
    pub(crate) results: Receiver<(u32, Result<Vec<f32>, EngineError>)>,
    pub(crate) cancel: Cancel,
    /// Signalled by [`Cancel::cancel`], so a waiter returns without waiting for the dispatcher.
    pub(crate) woken: Receiver<()>,
    /// Every answer was collected: nothing is left to cancel when the ticket goes.
    pub(crate) answered: bool,
}

impl Ticket {
    /// Blocks until every sequence of the request is answered, or the request is cancelled (then
    /// the sequences not answered yet get [`EngineError::Cancelled`]).
    pub fn wait(mut self) -> Vec<Result<Vec<f32>, EngineError>> {
        let mut out: Vec<Option<Result<Vec<f32>, EngineError>>> = vec![None; self.len];
        let mut missing = self.len;
        while missing > 0 {
            // None: cancelled, or every sender is gone (shut down, or cancelled sequences dropped).
            let answer = crossbeam_channel::select! {
                recv(self.results) -> answer => answer.ok(),
                recv(self.woken) -> _ => None,
            };
            let Some((i, r)) = answer else { break };
            out[i as usize] = Some(r);
            missing -= 1;
        }
        // Answers that arrived with the cancellation are still real answers.
        for (i, r) in self.results.try_iter() {
            if out[i as usize].is_none() {
                out[i as usize] = Some(r);
                missing -= 1;
            }
        }
        self.answered = missing == 0;
        let unanswered = if self.cancel.is_cancelled() { EngineError::Cancelled } else { EngineError::ShutDown };
        out.into_iter().map(|r| r.unwrap_or_else(|| Err(unanswered.clone()))).collect()
    }

    /// Every answer is in (or the request was cancelled): [`wait`](Self::wait) returns at once.
    pub fn is_answered(&self) -> bool {
        self.results.len() >= self.len || self.cancel.is_cancelled()
    }

    /// A handle that cancels this request from anywhere (another thread, a guard).
    pub fn canceller(&self) -> Cancel {
        self.cancel.clone()
    }

    /// Cancels this request's sequences that have not started (see [`Cancel::cancel`]).
    pub fn cancel(&self) {
        self.cancel.cancel();
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if !self.answered {
            self.cancel.cancel();
        }
    }
}

/// Cancels one request: cheap to clone, safe to call from any thread and more than once.
#[derive(Clone)]
pub struct Cancel {
    pub(crate) request: u64,
    pub(crate) flag: Arc<AtomicBool>,
    pub(crate) queue: Arc<Queue>,
    pub(crate) stats: Arc<EngineStats>,
    pub(crate) wake: Sender<()>,
}

impl Cancel {
    /// Takes the request's sequences out of the queue, marks those already planned into a bin so
    /// the dispatcher leaves them out, and wakes its waiter. Sequences in a bin already handed to a
    /// device still run (their answers go nowhere). Counted in `cancelled_sequences`.
    pub fn cancel(&self) {
        if self.flag.swap(true, Ordering::AcqRel) {
            return;
        }
        let removed = {
            let mut state = self.queue.state.lock();
            let before = state.interactive.len() + state.bulk.len();
            state.interactive.retain(|p| p.tag.request != self.request);
            state.bulk.retain(|p| p.tag.request != self.request);
            let after = state.interactive.len() + state.bulk.len();
            if after == 0 {
                state.oldest = None;
            }
            before - after
        };
        self.stats.cancelled_sequences.fetch_add(removed as u64, Ordering::Relaxed);
        self.stats.waiting_sequences.fetch_sub(removed as u64, Ordering::Relaxed);
        let _ = self.wake.send(());
    }

    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }
}
