//! Two steps of the decoder done in one pass over memory on CUDA, where candle would take several.
//!
//! Why: profiling the Qwen2.5-7B architecture on an H200 (`WARPFOLD_PROFILE=1`, a 12,240-token bin)
//! put 26% of a bin's time in SwiGLU (`silu(gate) * up` over narrow views of the fused gate-up
//! output: strided kernels, three passes) and 18% in the per-token log-likelihood (an f32 copy of
//! the logits, then max, subtract, exp, sum, log, subtract, gather over 152k columns), against
//! 43% for every matmul together. Here SwiGLU reads the fused output once and writes its result
//! once, and the log-likelihood of each row's target is an online log-sum-exp in one read of the
//! bf16 logits (src/kernels/fused.cu).
//!
//! On the CPU (and for dtypes the kernels do not cover) the same results come from candle's ops.

use candle_core::{DType, Result, Tensor, D};

/// `gate_up` (rows, 2·inter), gate first: silu(gate) · up, (rows, inter).
pub fn silu_mul(gate_up: &Tensor, inter: usize) -> Result<Tensor> {
    #[cfg(feature = "cuda")]
    if gate_up.device().is_cuda() && gate_up.rank() == 2 {
        return cuda::silu_mul(&gate_up.contiguous()?, inter);
    }
    gate_up.narrow(D::Minus1, 0, inter)?.silu()? * gate_up.narrow(D::Minus1, inter, inter)?
}

/// `logits` (rows, vocab), `targets` (rows,) u32: log p(target) of each row, (rows,) f32.
pub fn target_log_probs(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
    #[cfg(feature = "cuda")]
    if logits.device().is_cuda() {
        return cuda::target_log_probs(&logits.contiguous()?, &targets.contiguous()?);
    }
    let rows = targets.dim(0)?;
    candle_nn::ops::log_softmax(&logits.to_dtype(DType::F32)?, D::Minus1)?.gather(&targets.reshape((rows, 1))?.contiguous()?, 1)?.squeeze(1)
}

#[cfg(feature = "cuda")]
mod cuda {
    use candle_core::cuda::cudarc::driver::{LaunchConfig, PushKernelArg};
    use candle_core::cuda_backend::{CudaDevice, CudaStorage};
    use candle_core::op::BackpropOp;
    use candle_core::{DType, Result, Storage, Tensor};

    const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/fused.ptx"));
    const MODULE: &str = "warpfold_fused";

    fn err(e: impl std::fmt::Display) -> candle_core::Error {
        candle_core::Error::Msg(format!("warpfold kernel: {e}"))
    }

    fn wrap(storage: CudaStorage, shape: impl Into<candle_core::Shape>) -> Tensor {
        Tensor::from_storage(Storage::Cuda(storage), shape, BackpropOp::none(), false)
    }

    pub(super) fn silu_mul(gate_up: &Tensor, inter: usize) -> Result<Tensor> {
        let (rows, width) = gate_up.dims2()?;
        if width != 2 * inter {
            candle_core::bail!("silu_mul: {width} columns is not twice the intermediate size {inter}");
        }
        let (storage, layout) = gate_up.storage_and_layout();
        let Storage::Cuda(cuda) = &*storage else { candle_core::bail!("silu_mul: not a CUDA tensor") };
        let (o1, o2) = layout.contiguous_offsets().ok_or_else(|| err("silu_mul: input not contiguous"))?;
        let dev: &CudaDevice = &cuda.device;
        let n = rows * inter;
        let threads = 256u32;
        let blocks = (n.div_ceil(threads as usize)).clamp(1, 132 * 64) as u32;
        let cfg = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 };
        let (rows_arg, inter_arg) = (rows as u64, inter as u64);
        macro_rules! run {
            ($t:ty, $name:literal) => {{
                let src = cuda.as_cuda_slice::<$t>()?.slice(o1..o2);
                let out = unsafe { dev.alloc::<$t>(n.max(1)) }?;
                let func = dev.get_or_load_custom_func($name, MODULE, PTX)?;
                let mut b = func.builder();
                b.arg(&src).arg(&out).arg(&rows_arg).arg(&inter_arg);
                unsafe { b.launch(cfg) }.map_err(err)?;
                CudaStorage::wrap_cuda_slice(out, dev.clone())
            }};
        }
        let out = match gate_up.dtype() {
            DType::BF16 => run!(half::bf16, "silu_mul_bf16"),
            DType::F16 => run!(half::f16, "silu_mul_f16"),
            DType::F32 => run!(f32, "silu_mul_f32"),
            d => candle_core::bail!("silu_mul: dtype {d:?} is not supported"),
        };
        drop(storage);
        Ok(wrap(out, (rows, inter)))
    }

    pub(super) fn target_log_probs(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
        let (rows, vocab) = logits.dims2()?;
        if targets.dims1()? != rows || targets.dtype() != DType::U32 {
            candle_core::bail!("target_log_probs: targets must be {rows} u32 values");
        }
        if rows == 0 {
            return Tensor::zeros(0, DType::F32, logits.device());
        }
        let (storage, layout) = logits.storage_and_layout();
        let (t_storage, t_layout) = targets.storage_and_layout();
        let (Storage::Cuda(cuda), Storage::Cuda(t_cuda)) = (&*storage, &*t_storage) else {
            candle_core::bail!("target_log_probs: not CUDA tensors")
        };
        let (o1, o2) = layout.contiguous_offsets().ok_or_else(|| err("logits not contiguous"))?;
        let (t1, t2) = t_layout.contiguous_offsets().ok_or_else(|| err("targets not contiguous"))?;
        let dev: &CudaDevice = &cuda.device;
        let tg = t_cuda.as_cuda_slice::<u32>()?.slice(t1..t2);
        let out = unsafe { dev.alloc::<f32>(rows) }?;
        let cfg = LaunchConfig { grid_dim: (rows as u32, 1, 1), block_dim: (512, 1, 1), shared_mem_bytes: 0 };
        let vocab_arg = vocab as u64;
        macro_rules! run {
            ($t:ty, $name:literal) => {{
                let src = cuda.as_cuda_slice::<$t>()?.slice(o1..o2);
                let func = dev.get_or_load_custom_func($name, MODULE, PTX)?;
                let mut b = func.builder();
                b.arg(&src).arg(&tg).arg(&out).arg(&vocab_arg);
                unsafe { b.launch(cfg) }.map_err(err)?;
            }};
        }
        match logits.dtype() {
            DType::BF16 => run!(half::bf16, "target_log_prob_bf16"),
            DType::F16 => run!(half::f16, "target_log_prob_f16"),
            DType::F32 => run!(f32, "target_log_prob_f32"),
            d => candle_core::bail!("target_log_probs: dtype {d:?} is not supported"),
        }
        let out = CudaStorage::wrap_cuda_slice(out, dev.clone());
        drop((storage, t_storage));
        Ok(wrap(out, rows))
    }
}
