//! The app's sampler thread: every interval, tokens/s, computed and padded-equivalent work and
//! bins/s from the engine's counters, and each new bin's shape, kept for the state and sent as
//! events.

use std::sync::atomic::Ordering;
use std::time::Instant;

use crate::events::{self, AppEvent, BinView, Sample};
use crate::{App, SAMPLES_KEPT};

impl App {
    pub(crate) fn run_sampler(&self) {
        let every = self.inner.config.sample_every;
        let engine = &self.inner.embedder.engine;
        let mut before = engine.stats();
        let mut last_bin = engine.recent_bins().last().map_or(0, |b| b.id);
        let mut at = Instant::now();
        while !self.inner.stop.load(Ordering::Relaxed) {
            std::thread::sleep(every);
            let after = engine.stats();
            let seconds = at.elapsed().as_secs_f64();
            at = Instant::now();
            let seen = last_bin;
            for bin in engine.recent_bins().iter().filter(|b| b.id > seen) {
                last_bin = bin.id;
                let _ = self.inner.events.send(AppEvent::Bin(BinView::from(bin)));
            }
            let memory = self.inner.config.memory.as_ref().and_then(|m| m()).map(|(used, _)| used);
            let sample = Sample::between(&before, &after, seconds, events::now_ms(), self.inner.board.depth(), memory);
            before = after;
            {
                let mut samples = self.inner.samples.lock();
                if samples.len() == SAMPLES_KEPT {
                    samples.pop_front();
                }
                samples.push_back(sample.clone());
            }
            let _ = self.inner.events.send(AppEvent::Sample(sample));
        }
    }
}
