//! What every launch of warpfold's own CUDA kernels shares (the decoder's in fused.rs, the
//! encoder's in encoder_kernels.rs): the error a failed launch becomes, the element-wise grid, and
//! a kernel's output buffer made a candle tensor.

use candle_core::cuda::cudarc::driver::LaunchConfig;
use candle_core::cuda_backend::CudaStorage;
use candle_core::op::BackpropOp;
use candle_core::{Storage, Tensor};

/// A contiguous CUDA tensor's storage guard and its element range (read it with [`cuda`]).
macro_rules! cuda_view {
    ($t:expr, $what:literal) => {{
        let (storage, layout) = $t.storage_and_layout();
        let range = layout.contiguous_offsets().ok_or_else(|| $crate::cuda_launch::kernel_error(concat!($what, " is not contiguous")))?;
        if !matches!(&*storage, candle_core::Storage::Cuda(_)) {
            candle_core::bail!(concat!($what, " is not a CUDA tensor"));
        }
        (storage, range)
    }};
}
pub(crate) use cuda_view;

/// The CUDA storage behind a [`cuda_view!`] guard.
pub(crate) fn cuda(storage: &Storage) -> &CudaStorage {
    match storage {
        Storage::Cuda(c) => c,
        _ => unreachable!("checked by cuda_view!"),
    }
}

/// A launch or load failure as candle's error.
pub(crate) fn kernel_error(e: impl std::fmt::Display) -> candle_core::Error {
    candle_core::Error::Msg(format!("warpfold kernel: {e}"))
}

/// A kernel's output buffer as a contiguous tensor of `shape`.
pub(crate) fn wrap(storage: CudaStorage, shape: impl Into<candle_core::Shape>) -> Tensor {
    Tensor::from_storage(Storage::Cuda(storage), shape, BackpropOp::none(), false)
}

/// One warp per row, eight rows a block: the row kernels (residual + norm, bias + residual + layer
/// norm) keep a row's values in the warp's L1 between their passes.
pub(crate) fn warp_per_row_grid(rows: usize) -> LaunchConfig {
    LaunchConfig { grid_dim: (rows.div_ceil(8).max(1) as u32, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 }
}

/// A grid-stride launch over `n` elements: 256 threads a block, at most 64 blocks per
/// multiprocessor of an H200's 132 (the kernels loop over what the grid does not cover).
pub(crate) fn elementwise_grid(n: usize) -> LaunchConfig {
    let threads = 256u32;
    let blocks = n.div_ceil(threads as usize).clamp(1, 132 * 64) as u32;
    LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 }
}
