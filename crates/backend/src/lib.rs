//! The seam between warpfold's scheduler and its models.
//!
//! Why a crate of its own: the scheduler (queue, packer, dispatcher) must never see a tensor and a
//! model must never see a request. Both sides meet here, on a [`Bin`] (one flat, packed tape of
//! sequences) and the synchronous [`Backend`] trait that executes one bin. Keeping this crate free of
//! candle means the scheduler's tests build in seconds and never link a math library.
//!
//! A bin is a list of *slots*. A slot holds one sequence: its real tokens first, then the pad tokens
//! that round the slot up to the alignment quantum (or, for the padded baseline, up to the longest
//! sequence of the batch). A model must mask the pad tokens out of attention and out of pooling, so a
//! sequence's output never depends on its slot size or on its neighbours.

pub mod model_dir;

use serde::{Deserialize, Serialize};

/// Identifies one sequence across the scheduler: the request it came from and its index there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SequenceTag {
    pub request: u64,
    pub index: u32,
}

/// How the slots of a bin were formed. The model runs the same kernels either way; the layout only
/// tells it whether all slots are known to be the same size (a dense `(batch, length)` block).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Layout {
    /// First-Fit-Decreasing packing: slots of varying size, each rounded up to the alignment quantum.
    Packed,
    /// The baseline: every slot padded to the longest sequence of the batch, as Hugging Face does.
    Padded,
}

/// One unit of work for a backend: a flat tape of token ids holding several sequences.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Bin {
    pub layout: Layout,
    /// All slots' tokens, back to back; `input_ids.len() == cu_seqlens.last()`.
    pub input_ids: Vec<u32>,
    /// Position of each token inside its own sequence: restarts at 0 in every slot; pad tokens are 0.
    pub position_ids: Vec<u32>,
    /// Slot boundaries, `slots + 1` entries starting at 0, strictly increasing.
    pub cu_seqlens: Vec<u32>,
    /// Real (unpadded) length of each slot's sequence; `seq_lens[i] <= slot length`.
    pub seq_lens: Vec<u32>,
    /// The longest slot, as the varlen attention kernels want it.
    pub max_seqlen: u32,
    /// The token capacity this bin was packed against.
    pub capacity: u32,
    /// Which request each slot belongs to.
    pub tags: Vec<SequenceTag>,
}

impl Bin {
    /// `seqs` as one packed bin of one request: slots rounded up to `align` tokens, the rest of a
    /// slot `pad` at position 0 (masked out by the sequence lengths), capacity the tokens laid out.
    /// The plain layout the engine's packer also writes, for a caller with its sequences at hand.
    pub fn packed(seqs: &[Vec<u32>], align: usize, pad: u32) -> Bin {
        let mut bin = Bin {
            layout: Layout::Packed,
            input_ids: vec![],
            position_ids: vec![],
            cu_seqlens: vec![0],
            seq_lens: vec![],
            max_seqlen: 0,
            capacity: 0,
            tags: vec![],
        };
        for (i, s) in seqs.iter().enumerate() {
            let slot = s.len().div_ceil(align.max(1)) * align.max(1);
            bin.input_ids.extend_from_slice(s);
            bin.input_ids.resize(bin.input_ids.len() + slot - s.len(), pad);
            bin.position_ids.extend(0..s.len() as u32);
            bin.position_ids.resize(bin.position_ids.len() + slot - s.len(), 0);
            bin.cu_seqlens.push(bin.input_ids.len() as u32);
            bin.seq_lens.push(s.len() as u32);
            bin.max_seqlen = bin.max_seqlen.max(slot as u32);
            bin.tags.push(SequenceTag { request: 1, index: i as u32 });
        }
        bin.capacity = bin.input_ids.len() as u32;
        bin
    }

    pub fn num_sequences(&self) -> usize {
        self.seq_lens.len()
    }
    /// Tokens the model computes: real, alignment and padding tokens together.
    pub fn computed_tokens(&self) -> usize {
        self.input_ids.len()
    }
    pub fn real_tokens(&self) -> usize {
        self.seq_lens.iter().map(|&l| l as usize).sum()
    }
    pub fn pad_tokens(&self) -> usize {
        self.computed_tokens() - self.real_tokens()
    }
    /// `(start, slot length, real length)` of slot `i`.
    pub fn slot(&self, i: usize) -> (usize, usize, usize) {
        let start = self.cu_seqlens[i] as usize;
        let end = self.cu_seqlens[i + 1] as usize;
        (start, end - start, self.seq_lens[i] as usize)
    }
}

/// What a backend says about itself, for logs, the probe and the UI.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackendInfo {
    /// Model family and name, e.g. `bert (all-MiniLM-L6-v2)`.
    pub model: String,
    /// Where it runs, e.g. `cpu` or `cuda:0`.
    pub device: String,
    /// Longest sequence the model accepts (position embeddings, or the model card's limit).
    pub max_sequence_tokens: usize,
    /// Width of one output vector.
    pub output_dim: usize,
    /// Token id used for the pad tokens of a slot.
    pub pad_token_id: u32,
    /// Which attention its bins run through, in words (FlashAttention-2 varlen, or masked and why),
    /// for the device view.
    pub attention: String,
}

/// Why a backend could not execute a bin. `Clone`, so one failure can be handed to every request
/// that had a sequence in the bin.
#[derive(Debug, Clone, PartialEq, thiserror::Error, Serialize, Deserialize)]
pub enum BackendError {
    #[error("could not start the backend: {0}")]
    Start(String),
    #[error("model weights not found: {0}")]
    WeightsNotFound(String),
    #[error("inference failed: {0}")]
    Inference(String),
    #[error("the device ran out of memory on a bin of {tokens} tokens")]
    OutOfMemory { tokens: usize },
    #[error("the bin is malformed: {0}")]
    InvalidBin(String),
}

/// Executes bins. Synchronous on purpose: it runs on its own OS thread behind a channel, and the
/// dispatcher packs the next bin while this one runs.
pub trait Backend: Send {
    fn info(&self) -> BackendInfo;
    /// One vector per slot, in slot order: the pooled, normalised embedding of each sequence.
    fn embed(&mut self, bin: &Bin) -> Result<Vec<Vec<f32>>, BackendError>;
    /// Estimated device memory one token of a bin needs during a forward (activations of the
    /// widest layer and workspace): the VRAM probe's starting point, which real forwards correct.
    fn activation_bytes_per_token(&self) -> u64 {
        64 * 1024
    }
    /// The largest bin, in tokens, the model's kernels can take at all (whatever the memory): on
    /// CUDA, candle's kernels count a tensor's elements in 32-bit unsigned ints.
    fn max_bin_tokens(&self) -> usize {
        usize::MAX
    }
    /// The device's own measure of its busy and idle time between bins, where it keeps one (CUDA).
    fn timeline(&self) -> Option<std::sync::Arc<DeviceTimeline>> {
        None
    }
    /// Whether [`Self::start`] returns while the device still works on the bin. A pipelined
    /// backend gets its next bin started before the current one is finished, so the device finds
    /// work queued the moment it completes a bin instead of waiting for the host.
    fn pipelined(&self) -> bool {
        false
    }
    /// Starts a bin: on a pipelined backend, its inputs are copied and its work queued on the
    /// device, and [`Self::finish`] waits for the results. Others run it here.
    fn start(&mut self, bin: &Bin) -> Result<Started, BackendError> {
        self.embed(bin).map(Started::Done)
    }
    /// The results of a started bin, one vector per slot. Bins are finished in the order started.
    fn finish(&mut self, started: Started) -> Result<Vec<Vec<f32>>, BackendError> {
        match started {
            Started::Done(v) => Ok(v),
            Started::Pending(_) => Err(BackendError::Inference("this backend does not start bins ahead. This is a bug.".into())),
        }
    }
}

/// [`Backend::embed`] for a pipelined backend: its [`Backend::start`], then its [`Backend::finish`].
pub fn embed_started<B: Backend + ?Sized>(backend: &mut B, bin: &Bin) -> Result<Vec<Vec<f32>>, BackendError> {
    let started = backend.start(bin)?;
    backend.finish(started)
}

/// A bin a backend has started (see [`Backend::start`]).
pub enum Started {
    /// Already run: its results.
    Done(Vec<Vec<f32>>),
    /// Queued on the device: what the backend needs to finish it.
    Pending(Box<dyn std::any::Any + Send>),
}

/// How long a device worked on bins and how long it sat idle between them, measured on the
/// device's own clock (CUDA events around each bin), not the host's: the host sees a call return,
/// not when the GPU finished or started. The engine reports it; the benchmarks quote it.
#[derive(Debug, Default)]
pub struct DeviceTimeline {
    busy_ns: std::sync::atomic::AtomicU64,
    idle_ns: std::sync::atomic::AtomicU64,
}

impl DeviceTimeline {
    /// One bin: how long it ran, and how long the device was idle since the previous bin's end
    /// (`None` for the first).
    pub fn record(&self, busy: std::time::Duration, idle_before: Option<std::time::Duration>) {
        use std::sync::atomic::Ordering::Relaxed;
        self.busy_ns.fetch_add(busy.as_nanos() as u64, Relaxed);
        if let Some(idle) = idle_before {
            self.idle_ns.fetch_add(idle.as_nanos() as u64, Relaxed);
        }
    }

    /// (busy seconds, idle seconds between bins).
    pub fn totals(&self) -> (f64, f64) {
        use std::sync::atomic::Ordering::Relaxed;
        (self.busy_ns.load(Relaxed) as f64 * 1e-9, self.idle_ns.load(Relaxed) as f64 * 1e-9)
    }
}

impl<B: Backend + ?Sized> Backend for Box<B> {
    fn info(&self) -> BackendInfo {
        (**self).info()
    }
    fn embed(&mut self, bin: &Bin) -> Result<Vec<Vec<f32>>, BackendError> {
        (**self).embed(bin)
    }
    fn activation_bytes_per_token(&self) -> u64 {
        (**self).activation_bytes_per_token()
    }
    fn timeline(&self) -> Option<std::sync::Arc<DeviceTimeline>> {
        (**self).timeline()
    }
    fn pipelined(&self) -> bool {
        (**self).pipelined()
    }
    fn start(&mut self, bin: &Bin) -> Result<Started, BackendError> {
        (**self).start(bin)
    }
    fn finish(&mut self, started: Started) -> Result<Vec<Vec<f32>>, BackendError> {
        (**self).finish(started)
    }
    fn max_bin_tokens(&self) -> usize {
        (**self).max_bin_tokens()
    }
}

/// Checks the invariants every backend relies on; backends call it before touching a bin.
pub fn validate_bin(bin: &Bin) -> Result<(), BackendError> {
    let bad = |why: String| Err(BackendError::InvalidBin(why));
    let n = bin.seq_lens.len();
    if bin.cu_seqlens.len() != n + 1 || bin.tags.len() != n {
        return bad(format!("{} sequences but {} boundaries and {} tags", n, bin.cu_seqlens.len(), bin.tags.len()));
    }
    if bin.cu_seqlens.first() != Some(&0) {
        return bad("cu_seqlens must start at 0".into());
    }
    let total = *bin.cu_seqlens.last().unwrap() as usize;
    if bin.input_ids.len() != total || bin.position_ids.len() != total {
        return bad(format!("tape has {} ids and {} positions, boundaries say {total}", bin.input_ids.len(), bin.position_ids.len()));
    }
    for i in 0..n {
        let (_, slot, real) = bin.slot(i);
        if slot == 0 || real == 0 || real > slot {
            return bad(format!("slot {i}: length {slot}, real length {real}"));
        }
        if slot > bin.max_seqlen as usize {
            return bad(format!("slot {i} is longer than max_seqlen {}", bin.max_seqlen));
        }
    }
    Ok(())
}

/// What a model's tables take, for a bin [`validate_bin`] passed: no sequence longer than its
/// `max_positions`, no id past its `vocab` ([`check_vocabulary`]); the reason otherwise.
pub fn check_tables(bin: &Bin, max_positions: usize, vocab: usize) -> Result<(), String> {
    let longest = bin.seq_lens.iter().copied().max().unwrap_or(0) as usize;
    if longest > max_positions {
        return Err(format!("a sequence of {longest} tokens exceeds the model's {max_positions} positions"));
    }
    check_vocabulary(&bin.input_ids, vocab)
}

/// The first id past a vocabulary of `vocab`, as the reason to refuse it: a model's gathers read
/// the table row an id names, so one past the table stops here, not as a read outside it on the
/// device.
pub fn check_vocabulary(ids: &[u32], vocab: usize) -> Result<(), String> {
    match ids.iter().find(|&&id| id as usize >= vocab) {
        Some(id) => Err(format!("token id {id} is outside the vocabulary of {vocab}")),
        None => Ok(()),
    }
}
