//! How a bin's inputs reach the device and its results come back.
//!
//! Why: from ordinary (pageable) host memory a CUDA copy goes through a driver bounce buffer and
//! makes the host wait; a bin's inputs were several such copies (token ids, positions, slot
//! boundaries, the rows to score). Here every integer a bin needs is laid out in one of two
//! page-locked (pinned) host buffers, allocated once and grown only when a larger bin arrives, and
//! sent in one asynchronous copy on the device's stream; kernels queue behind it without the host
//! waiting. An event recorded after each copy says when its buffer may be written again, so the
//! host fills buffer B while buffer A's copy may still be in flight. Results (a few floats per
//! sequence) come back the same way through a pinned result buffer.
//!
//! The same stream carries timing events at the start of each bin's copy and after its results,
//! so [`DeviceTimeline`] measures, on the GPU's own clock, how long the device worked on bins and
//! how long it sat idle between one bin's results and the next bin's first copy.
//!
//! On the CPU the same calls build ordinary tensors; nothing is pinned.

use candle_core::{DType, Device, Result, Tensor};
#[cfg(feature = "cuda")]
use parking_lot::Mutex;
use warpfold_backend::DeviceTimeline;

/// Pinned buffers and timing events of one device (CUDA); nothing on the CPU.
#[derive(Default)]
pub struct Staging {
    #[cfg(feature = "cuda")]
    cuda: Mutex<Option<cuda::PinnedStaging>>,
    timeline: std::sync::Arc<DeviceTimeline>,
}

impl Staging {
    /// The device's busy and idle time between bins, as the GPU measured it (zero on the CPU).
    pub fn timeline(&self) -> std::sync::Arc<DeviceTimeline> {
        self.timeline.clone()
    }

    /// Sends `parts` to `device` in one copy and returns one 1-D u32 tensor per part, in order.
    /// On CUDA this starts a bin on the device's timeline; [`Self::fetch`] ends it.
    pub fn upload(&self, device: &Device, parts: &[&[u32]]) -> Result<Vec<Tensor>> {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let flat = match device {
            #[cfg(feature = "cuda")]
            Device::Cuda(dev) => {
                let mut guard = self.cuda.lock();
                let staging = match guard.as_mut() {
                    Some(s) => s,
                    None => guard.insert(cuda::PinnedStaging::new(dev, total)?),
                };
                if !staging.fits(total) {
                    staging.grow_inputs(total)?;
                }
                staging.upload(dev, parts, total)?
            }
            _ => {
                let mut all = Vec::with_capacity(total);
                for p in parts {
                    all.extend_from_slice(p);
                }
                Tensor::from_vec(all, total, device)?
            }
        };
        let mut out = Vec::with_capacity(parts.len());
        let mut at = 0;
        for p in parts {
            out.push(flat.narrow(0, at, p.len())?);
            at += p.len();
        }
        Ok(out)
    }

    /// `t` (any shape, any float dtype) as f32 values on the host, row-major; on CUDA through the
    /// pinned result buffer, ending the bin [`Self::upload`] started on the timeline.
    pub fn fetch(&self, t: &Tensor) -> Result<Vec<f32>> {
        let pending = self.fetch_start(t)?;
        self.fetch_wait(pending)
    }

    /// Queues the copy of `t` back to the host and returns at once (on CUDA; elsewhere the values
    /// are read now): the device can be given the next bin before this one's results are waited for.
    pub fn fetch_start(&self, t: &Tensor) -> Result<Fetch> {
        let t = t.to_dtype(DType::F32)?.flatten_all()?.contiguous()?;
        match t.device() {
            #[cfg(feature = "cuda")]
            Device::Cuda(_) => {
                let mut guard = self.cuda.lock();
                match guard.as_mut() {
                    Some(staging) => staging.fetch_start(&t).map(Fetch::Queued),
                    None => t.to_vec1::<f32>().map(Fetch::Ready),
                }
            }
            _ => t.to_vec1::<f32>().map(Fetch::Ready),
        }
    }

    /// The values of a [`Self::fetch_start`], waiting for the copy if it is still queued.
    pub fn fetch_wait(&self, fetch: Fetch) -> Result<Vec<f32>> {
        match fetch {
            Fetch::Ready(v) => Ok(v),
            #[cfg(feature = "cuda")]
            Fetch::Queued(q) => {
                let mut guard = self.cuda.lock();
                let staging = guard.as_mut().ok_or_else(|| candle_core::Error::Msg("pinned staging: no buffers".into()))?;
                staging.fetch_wait(q, &self.timeline)
            }
        }
    }
}

/// Results on their way back to the host (see [`Staging::fetch_start`]).
pub enum Fetch {
    Ready(Vec<f32>),
    #[cfg(feature = "cuda")]
    Queued(cuda::QueuedFetch),
}

#[cfg(feature = "cuda")]
mod cuda {
    use std::sync::Arc;
    use std::time::Duration;

    use candle_core::cuda::cudarc::driver::sys::CUevent_flags;
    use candle_core::cuda::cudarc::driver::{result, CudaEvent, CudaStream, DevicePtr, DevicePtrMut, PinnedHostSlice};
    use candle_core::cuda_backend::{CudaDevice, CudaStorage};
    use candle_core::op::BackpropOp;
    use candle_core::{Result, Storage, Tensor};
    use warpfold_backend::DeviceTimeline;

    fn err(e: impl std::fmt::Display) -> candle_core::Error {
        candle_core::Error::Msg(format!("pinned staging: {e}"))
    }

    /// One pinned input buffer and the event recorded after the last copy out of it.
    struct InputBuffer {
        host: PinnedHostSlice<u32>,
        copied: CudaEvent,
    }

    pub(super) struct PinnedStaging {
        stream: Arc<CudaStream>,
        inputs: [InputBuffer; 2],
        /// The buffer the next bin fills.
        turn: usize,
        /// Result buffers, and whether a queued copy still owns each (two bins in flight use two).
        results: Vec<(PinnedHostSlice<f32>, bool)>,
        /// Timing events: the current bin's start, the previous bin's end.
        started: Option<CudaEvent>,
        previous_end: Option<CudaEvent>,
    }

    /// A copy of results queued on the stream: which result buffer, how many values, and the
    /// bin's start and end events.
    pub struct QueuedFetch {
        buffer: usize,
        len: usize,
        start: Option<CudaEvent>,
        end: CudaEvent,
    }

    impl PinnedStaging {
        /// Two input buffers of at least `need` values (the next power of two, so a few larger
        /// bins do not each reallocate), and a result buffer.
        pub(super) fn new(dev: &CudaDevice, need: usize) -> Result<Self> {
            let stream = dev.cuda_stream();
            let ctx = stream.context().clone();
            let len = need.next_power_of_two().max(1 << 16);
            let inputs = [input_buffer(&stream, len)?, input_buffer(&stream, len)?];
            keep_freed_memory(&stream)?;
            // Cached (not write-combined): the host reads results.
            // SAFETY: pinned host memory of `len` f32 for this context; it is written only by the
            // device-to-host copies below before the host reads it (fetch_wait waits on their event).
            let results = vec![(unsafe { ctx.alloc_pinned_with_flags::<f32>(len, 0) }.map_err(err)?, false)];
            tracing::debug!(values = len, "pinned staging buffers allocated");
            Ok(Self { stream, inputs, turn: 0, results, started: None, previous_end: None })
        }

        pub(super) fn fits(&self, need: usize) -> bool {
            need <= self.inputs[0].host.len()
        }

        /// Larger input buffers for a larger bin, once the copies out of the old ones are done
        /// (a copy may still be reading one while a bin is in flight).
        pub(super) fn grow_inputs(&mut self, need: usize) -> Result<()> {
            let len = need.next_power_of_two();
            for buf in &mut self.inputs {
                buf.copied.synchronize().map_err(err)?;
                *buf = input_buffer(&self.stream, len)?;
            }
            tracing::debug!(values = len, "pinned input buffers grown");
            Ok(())
        }

        pub(super) fn upload(&mut self, dev: &CudaDevice, parts: &[&[u32]], total: usize) -> Result<Tensor> {
            let stream = self.stream.clone();
            let start = stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(err)?;
            self.started = Some(start);
            let buf = &mut self.inputs[self.turn];
            self.turn = 1 - self.turn;
            // 1. The buffer's previous copy must have left it before it is overwritten.
            buf.copied.synchronize().map_err(err)?;
            let host = buf.host.as_mut_slice().map_err(err)?;
            let mut at = 0;
            for p in parts {
                host[at..at + p.len()].copy_from_slice(p);
                at += p.len();
            }
            // 2. One asynchronous copy into fresh device memory; the kernels that read it are
            //    queued on the same stream, after it.
            // SAFETY: uninitialised device memory, fully written by the copy queued next on the
            // same stream before any kernel (queued after it) reads it.
            let mut dst = unsafe { stream.alloc::<u32>(total.max(1)) }.map_err(err)?;
            {
                let (dst_ptr, _sync) = dst.device_ptr_mut(&stream);
                // SAFETY: `host` is pinned and holds `total` values; it is not written again until
                // `buf.copied` (recorded after this copy) has completed, step 1 above.
                unsafe { result::memcpy_htod_async(dst_ptr, &host[..total], stream.cu_stream()) }.map_err(err)?;
            }
            buf.copied.record(&stream).map_err(err)?;
            let storage = CudaStorage::wrap_cuda_slice(dst, dev.clone());
            Ok(Tensor::from_storage(Storage::Cuda(storage), total.max(1), BackpropOp::none(), false).narrow(0, 0, total)?)
        }

        pub(super) fn fetch_start(&mut self, t: &Tensor) -> Result<QueuedFetch> {
            let n = t.elem_count();
            // A free result buffer large enough, or a new one.
            let buffer = match self.results.iter().position(|(b, busy)| !busy && b.len() >= n) {
                Some(i) => i,
                None => {
                    // SAFETY: pinned host memory for results, read only after the copy into it
                    // has completed (fetch_wait).
                    let b = unsafe { self.stream.context().alloc_pinned_with_flags::<f32>(n.next_power_of_two().max(1 << 16), 0) }
                        .map_err(err)?;
                    match self.results.iter().position(|(_, busy)| !busy) {
                        Some(i) => {
                            self.results[i].0 = b;
                            i
                        }
                        None => {
                            self.results.push((b, false));
                            self.results.len() - 1
                        }
                    }
                }
            };
            let (storage, layout) = t.storage_and_layout();
            let Storage::Cuda(cuda) = &*storage else { return Err(err("the tensor is not on CUDA")) };
            let (o1, o2) = layout.contiguous_offsets().ok_or_else(|| err("result not contiguous"))?;
            let src = cuda.as_cuda_slice::<f32>()?.slice(o1..o2);
            let host = self.results[buffer].0.as_mut_slice().map_err(err)?;
            {
                let (src_ptr, _sync) = src.device_ptr(&self.stream);
                // SAFETY: `host` holds at least `n` values and is marked busy until fetch_wait has
                // synchronized on the event recorded after this copy; `src` is `n` contiguous f32
                // kept alive by the stream ordering (the tensor's memory returns to the pool only
                // after work queued before its release).
                unsafe { result::memcpy_dtoh_async(&mut host[..n], src_ptr, self.stream.cu_stream()) }.map_err(err)?;
            }
            drop(storage);
            self.results[buffer].1 = true;
            let end = self.stream.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(err)?;
            Ok(QueuedFetch { buffer, len: n, start: self.started.take(), end })
        }

        pub(super) fn fetch_wait(&mut self, q: QueuedFetch, timeline: &DeviceTimeline) -> Result<Vec<f32>> {
            q.end.synchronize().map_err(err)?;
            let out = {
                let host = self.results[q.buffer].0.as_mut_slice().map_err(err)?;
                host[..q.len].to_vec()
            };
            self.results[q.buffer].1 = false;
            // The GPU's own clock: the bin ran from its first copy to its results; it was idle
            // from the previous bin's results to this bin's first copy (the stream runs in order,
            // so a bin queued ahead starts the moment the one before it ends: no idle).
            if let Some(start) = q.start {
                let busy = start.elapsed_ms(&q.end).map_err(err)?;
                let idle = match &self.previous_end {
                    Some(prev) => Some(prev.elapsed_ms(&start).map_err(err)?),
                    None => None,
                };
                timeline.record(ms(busy), idle.map(ms));
            }
            self.previous_end = Some(q.end);
            Ok(out)
        }
    }

    /// A write-combined pinned buffer (the host only writes it; the device reads it faster) and its
    /// copy event, recorded once so that the first wait on it returns at once.
    fn input_buffer(stream: &Arc<CudaStream>, len: usize) -> Result<InputBuffer> {
        // SAFETY: pinned, write-combined host memory the host only writes and the device only reads
        // through the copies in `upload`, which wait for the previous copy out of it.
        let host = unsafe { stream.context().alloc_pinned::<u32>(len) }.map_err(err)?;
        let copied = stream.record_event(None).map_err(err)?;
        Ok(InputBuffer { host, copied })
    }

    /// Lets the device's memory pool keep what a bin freed for the next bin, as PyTorch's caching
    /// allocator does. By default the pool returns freed memory to the driver at every
    /// synchronization (each bin's results), and the next bin's activations, gigabytes for a 7B
    /// model, are mapped again.
    fn keep_freed_memory(stream: &CudaStream) -> Result<()> {
        use candle_core::cuda::cudarc::driver::sys;
        let ctx = stream.context();
        ctx.bind_to_thread().map_err(err)?;
        let check = |r: sys::CUresult, what: &str| match r {
            sys::CUresult::CUDA_SUCCESS => Ok(()),
            e => Err(err(format!("{what}: {e:?}"))),
        };
        let mut pool: sys::CUmemoryPool = std::ptr::null_mut();
        // SAFETY: the context is bound to this thread above; both calls write only the local
        // handle and read the local threshold, and their results are checked.
        check(unsafe { sys::cuDeviceGetDefaultMemPool(&mut pool, ctx.cu_device()) }, "default memory pool")?;
        let mut threshold = u64::MAX;
        check(
            unsafe {
                sys::cuMemPoolSetAttribute(
                    pool,
                    sys::CUmemPool_attribute::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                    (&mut threshold as *mut u64).cast(),
                )
            },
            "memory pool release threshold",
        )
    }

    fn ms(v: f32) -> Duration {
        Duration::from_secs_f64((v.max(0.0) as f64) / 1e3)
    }
}
