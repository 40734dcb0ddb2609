//! Steps of the decoder (and one of the encoder) done in one pass over memory on CUDA, where candle
//! would take several. On the CPU (and for dtypes the kernels do not cover) the same results come
//! from candle's ops.
//!
//! Why, from stage profiles of the Qwen2.5-7B architecture on an H200 (`WARPFOLD_PROFILE=1`, a
//! 12,240-token bin; BENCHMARKS.md):
//! - [`silu_mul`]: SwiGLU over narrow views of the fused gate-up output was 26% of the bin (strided
//!   kernels, three passes); here one read of the fused output and one write.
//! - [`target_log_probs`]: the per-token log-likelihood was 18% (an f32 copy of the logits, then
//!   max, subtract, exp, sum, log, subtract, gather over 152k columns); here an online log-sum-exp
//!   in one read of the bf16 logits.
//! - [`split_qkv`]: once those were fused, the q/k/v matmul stage ran at a third of the other
//!   matmuls' rate (46 ms where ~15 were due): its bias was a broadcast pass of its own over the
//!   (tokens, q+k+v) output; rotating q and k took narrow copies, two rope passes and a copy of v
//!   (5.4% more). Here bias, rotation and the split into three contiguous tensors are one pass; the
//!   encoder uses it without angles.
//! - [`residual_rms_norm`]: the residual add and the rms-norm that reads the sum (3.6% and 2.9%),
//!   one pass.
//! - [`scatter_rows`] is the key/value pool's write (src/generate.rs): candle's scatter runs one
//!   thread per column and loops over the rows, too narrow for a prefill's thousands of rows.
//!
//! The memory-bound ones ([`silu_mul`], [`split_qkv`], [`residual_rms_norm`], and the encoder's)
//! move 16-byte packs with 32-bit indices where pointers and widths allow (`Pack` in
//! kernels/common.cuh), element by element otherwise: per element they spent more on 64-bit index
//! division than on memory (the three above: 46.4 → 19.3 ms of a 12,288-token 7B bin).

use candle_core::{CpuStorage, DType, InplaceOp3, Layout, Result, Tensor, D};

use crate::llama::{apply_rope, RopeLayout};

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

/// Rotary angles for [`split_qkv`]: `cos` and `sin` (rows, hd/2) in the activations' dtype, and
/// which dimensions pair up.
#[derive(Clone, Copy)]
pub struct Rotary<'a> {
    pub cos: &'a Tensor,
    pub sin: &'a Tensor,
    pub layout: RopeLayout,
}

/// The attention's inputs from a fused projection's output `qkv` (rows, (heads + 2·kv_heads)·hd; q's
/// heads, then k's, then v's), with `bias` ((heads + 2·kv_heads)·hd) not yet added: q (rows, heads,
/// hd), k and v (rows, kv_heads, hd), q and k turned by each row's rotary angles when `rotary` is
/// given (the decoder; the encoder has none). One kernel on CUDA; candle's ops elsewhere.
pub fn split_qkv(
    qkv: &Tensor,
    bias: Option<&Tensor>,
    rotary: Option<Rotary>,
    [heads, kv_heads, hd]: [usize; 3],
) -> Result<(Tensor, Tensor, Tensor)> {
    #[cfg(feature = "cuda")]
    if qkv.device().is_cuda() {
        return cuda::split_qkv(qkv, bias, rotary, [heads, kv_heads, hd]);
    }
    let qkv = match bias {
        Some(b) => qkv.broadcast_add(b)?,
        None => qkv.clone(),
    };
    let t = qkv.dim(0)?;
    let q = qkv.narrow(1, 0, heads * hd)?.reshape((t, heads, hd))?;
    let k = qkv.narrow(1, heads * hd, kv_heads * hd)?.reshape((t, kv_heads, hd))?;
    let v = qkv.narrow(1, (heads + kv_heads) * hd, kv_heads * hd)?.reshape((t, kv_heads, hd))?;
    match rotary {
        Some(Rotary { cos, sin, layout }) => Ok((apply_rope(&q, cos, sin, layout)?, apply_rope(&k, cos, sin, layout)?, v)),
        None => Ok((q, k, v)),
    }
}

/// The residual stream's add and the norm that reads it: `x + y` (the stream; (rows, width), one
/// dtype) and its RMS norm times `norm`'s weight. One kernel on CUDA (one read of each, one write of
/// each result); candle's add and rms-norm elsewhere.
pub fn residual_rms_norm(x: &Tensor, y: &Tensor, norm: &candle_nn::RmsNorm) -> Result<(Tensor, Tensor)> {
    #[cfg(feature = "cuda")]
    if x.device().is_cuda() && x.rank() == 2 {
        return cuda::residual_rms_norm(x, y, norm.weight(), norm.eps());
    }
    let sum = (x + y)?;
    let normed = candle_core::Module::forward(norm, &sum)?;
    Ok((sum, normed))
}

/// Copies row `i` of `src` (n, width) into row `rows[i]` of `dst` (dst_rows, width), in place.
/// `rows` is (n,) u32, every one below dst_rows; all three contiguous, `src` in `dst`'s dtype.
pub fn scatter_rows(dst: &Tensor, rows: &Tensor, src: &Tensor) -> Result<()> {
    let (dst_rows, width) = dst.dims2()?;
    let (n, src_width) = src.dims2()?;
    if src_width != width || rows.dims1()? != n || rows.dtype() != DType::U32 || src.dtype() != dst.dtype() {
        candle_core::bail!(
            "scatter_rows: {n} rows of {src_width} {:?} into ({dst_rows}, {width}) {:?} through {:?} {:?} indices",
            src.dtype(),
            dst.dtype(),
            rows.dims(),
            rows.dtype()
        );
    }
    if !(dst.is_contiguous() && rows.is_contiguous() && src.is_contiguous()) {
        candle_core::bail!("scatter_rows: every tensor must be contiguous");
    }
    dst.inplace_op3(rows, src, &ScatterRows)
}

struct ScatterRows;

impl InplaceOp3 for ScatterRows {
    fn name(&self) -> &'static str {
        "scatter-rows"
    }

    fn cpu_fwd(&self, dst: &mut CpuStorage, dl: &Layout, rows: &CpuStorage, rl: &Layout, src: &CpuStorage, sl: &Layout) -> Result<()> {
        let (dst_rows, width) = dl.shape().dims2()?;
        let n = rl.shape().dims1()?;
        let CpuStorage::U32(all_rows) = rows else { candle_core::bail!("scatter_rows: rows must be u32") };
        let rows = &all_rows[rl.start_offset()..rl.start_offset() + n];
        if let Some(&r) = rows.iter().find(|&&r| r as usize >= dst_rows) {
            candle_core::bail!("scatter_rows: row {r} is outside the {dst_rows} rows of the destination");
        }
        fn copy<T: Copy>(dst: &mut [T], src: &[T], rows: &[u32], width: usize) {
            for (i, &r) in rows.iter().enumerate() {
                let r = r as usize;
                dst[r * width..(r + 1) * width].copy_from_slice(&src[i * width..(i + 1) * width]);
            }
        }
        let (d0, s0) = (dl.start_offset(), sl.start_offset());
        match (dst, src) {
            (CpuStorage::F32(d), CpuStorage::F32(s)) => copy(&mut d[d0..], &s[s0..], rows, width),
            (CpuStorage::BF16(d), CpuStorage::BF16(s)) => copy(&mut d[d0..], &s[s0..], rows, width),
            (CpuStorage::F16(d), CpuStorage::F16(s)) => copy(&mut d[d0..], &s[s0..], rows, width),
            (d, s) => {
                use candle_core::backend::BackendStorage;
                candle_core::bail!("scatter_rows: {:?} rows into {:?}", s.dtype(), d.dtype())
            }
        }
        Ok(())
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        dst: &mut candle_core::cuda_backend::CudaStorage,
        dl: &Layout,
        rows: &candle_core::cuda_backend::CudaStorage,
        rl: &Layout,
        src: &candle_core::cuda_backend::CudaStorage,
        sl: &Layout,
    ) -> Result<()> {
        cuda::scatter_rows(dst, dl, rows, rl, src, sl)
    }
}

#[cfg(feature = "cuda")]
mod cuda {
    use candle_core::cuda::cudarc::driver::{LaunchConfig, PushKernelArg};
    use candle_core::cuda_backend::{CudaDevice, CudaStorage};
    use candle_core::{DType, Result, Storage, Tensor};

    use crate::cuda_launch::{cuda, cuda_view, elementwise_grid, kernel_error as err, warp_per_row_grid, wrap};
    use crate::llama::RopeLayout;

    const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/fused.ptx"));
    const MODULE: &str = "warpfold_fused";

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
        let cfg = elementwise_grid(n);
        let (rows_arg, inter_arg) = (rows as u64, inter as u64);
        macro_rules! run {
            ($t:ty, $name:literal) => {{
                let src = cuda.as_cuda_slice::<$t>()?.slice(o1..o2);
                // SAFETY: every one of the `n` outputs is written by the kernel before it is read.
                let out = unsafe { dev.alloc::<$t>(n.max(1)) }?;
                let func = dev.get_or_load_custom_func($name, MODULE, PTX)?;
                let mut b = func.builder();
                b.arg(&src).arg(&out).arg(&rows_arg).arg(&inter_arg);
                // SAFETY: the arguments match silu_mul_* in kernels/fused.cu; `src` holds rows x
                // 2·inter contiguous values (checked above), `out` rows x inter.
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
        // SAFETY: the kernel writes one value per row, every row (one block each).
        let out = unsafe { dev.alloc::<f32>(rows) }?;
        let cfg = LaunchConfig { grid_dim: (rows as u32, 1, 1), block_dim: (512, 1, 1), shared_mem_bytes: 0 };
        let vocab_arg = vocab as u64;
        macro_rules! run {
            ($t:ty, $name:literal) => {{
                let src = cuda.as_cuda_slice::<$t>()?.slice(o1..o2);
                let func = dev.get_or_load_custom_func($name, MODULE, PTX)?;
                let mut b = func.builder();
                b.arg(&src).arg(&tg).arg(&out).arg(&vocab_arg);
                // SAFETY: the arguments match target_log_prob_* in kernels/fused.cu; `src` is rows x
                // vocab contiguous, `tg` rows u32 targets, `out` rows f32.
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

    pub(super) fn split_qkv(
        qkv: &Tensor,
        bias: Option<&Tensor>,
        rotary: Option<super::Rotary>,
        [heads, kv_heads, hd]: [usize; 3],
    ) -> Result<(Tensor, Tensor, Tensor)> {
        let (rows, width) = qkv.dims2()?;
        let dtype = qkv.dtype();
        if width != (heads + 2 * kv_heads) * hd || hd % 2 != 0 {
            candle_core::bail!("split_qkv: {width} columns for {heads} + 2 x {kv_heads} heads of {hd}");
        }
        if let Some(b) = bias {
            if b.dims1()? != width || b.dtype() != dtype {
                candle_core::bail!("split_qkv: bias {:?} {:?} for {width} columns of {dtype:?}", b.shape(), b.dtype());
            }
        }
        if let Some(r) = &rotary {
            for a in [r.cos, r.sin] {
                if a.dims2()? != (rows, hd / 2) || a.dtype() != dtype {
                    candle_core::bail!("split_qkv: angles {:?} {:?} for {rows} rows of head size {hd} in {dtype:?}", a.shape(), a.dtype());
                }
            }
        }
        let contiguous = |t: Option<&Tensor>| t.map(Tensor::contiguous).transpose();
        let (bias, cos, sin) = (contiguous(bias)?, contiguous(rotary.map(|r| r.cos))?, contiguous(rotary.map(|r| r.sin))?);
        let qkv = qkv.contiguous()?;
        let (s_qkv, r_qkv) = cuda_view!(qkv, "qkv");
        let mut optional = Vec::with_capacity(3);
        for t in [&bias, &cos, &sin] {
            optional.push(match t {
                Some(t) => Some(cuda_view!(t, "bias or angle")),
                None => None,
            });
        }
        let (v_bias, v_cos, v_sin) = (&optional[0], &optional[1], &optional[2]);
        let dev: &CudaDevice = &cuda(&s_qkv).device;
        let (nq, nkv) = (rows * heads * hd, rows * kv_heads * hd);
        let cfg = elementwise_grid(rows * (heads + 2 * kv_heads) * hd / 2);
        let dims = [rows as u64, heads as u64, kv_heads as u64, hd as u64];
        let interleaved: i32 = rotary.is_some_and(|r| r.layout == RopeLayout::Interleaved).into();
        let null = 0u64;
        macro_rules! run {
            ($t:ty, $name:literal) => {{
                let x = cuda(&s_qkv).as_cuda_slice::<$t>()?.slice(r_qkv.0..r_qkv.1);
                let mut views = Vec::with_capacity(3);
                for v in [v_bias, v_cos, v_sin] {
                    views.push(match v {
                        Some((guard, (from, to))) => Some(cuda(guard).as_cuda_slice::<$t>()?.slice(*from..*to)),
                        None => None,
                    });
                }
                let (b, c, s) = (&views[0], &views[1], &views[2]);
                // SAFETY: the kernel writes every element of q, k and v (one thread per pair of
                // elements of each row's heads) before anything reads them.
                let (q, k, v) = unsafe { (dev.alloc::<$t>(nq.max(1))?, dev.alloc::<$t>(nkv.max(1))?, dev.alloc::<$t>(nkv.max(1))?) };
                let func = dev.get_or_load_custom_func($name, MODULE, PTX)?;
                let mut builder = func.builder();
                builder.arg(&x);
                for p in [b, c, s] {
                    match p {
                        Some(p) => builder.arg(p),
                        None => builder.arg(&null),
                    };
                }
                builder.arg(&q).arg(&k).arg(&v);
                builder.arg(&dims[0]).arg(&dims[1]).arg(&dims[2]).arg(&dims[3]).arg(&interleaved);
                if rows > 0 {
                    // SAFETY: the arguments match split_qkv_* in kernels/fused.cu (a missing bias or
                    // angle is the 64-bit zero the kernel tests for); shapes and dtypes were checked
                    // above: `x` holds rows x width values, the bias width, the angles rows x hd/2,
                    // q rows x heads x hd, k and v rows x kv_heads x hd.
                    unsafe { builder.launch(cfg) }.map_err(err)?;
                }
                (
                    CudaStorage::wrap_cuda_slice(q, dev.clone()),
                    CudaStorage::wrap_cuda_slice(k, dev.clone()),
                    CudaStorage::wrap_cuda_slice(v, dev.clone()),
                )
            }};
        }
        let (q, k, v) = match dtype {
            DType::BF16 => run!(half::bf16, "split_qkv_bf16"),
            DType::F16 => run!(half::f16, "split_qkv_f16"),
            DType::F32 => run!(f32, "split_qkv_f32"),
            d => candle_core::bail!("split_qkv: dtype {d:?} is not supported"),
        };
        Ok((wrap(q, (rows, heads, hd)), wrap(k, (rows, kv_heads, hd)), wrap(v, (rows, kv_heads, hd))))
    }

    pub(super) fn residual_rms_norm(x: &Tensor, y: &Tensor, weight: &Tensor, eps: f64) -> Result<(Tensor, Tensor)> {
        let (rows, width) = x.dims2()?;
        let dtype = x.dtype();
        if y.dims2()? != (rows, width) || weight.dims1()? != width || y.dtype() != dtype || weight.dtype() != dtype {
            candle_core::bail!(
                "residual_rms_norm: ({rows}, {width}) {dtype:?} with {:?} {:?} and a weight of {:?} {:?}",
                y.shape(),
                y.dtype(),
                weight.shape(),
                weight.dtype()
            );
        }
        let (x, y, weight) = (x.contiguous()?, y.contiguous()?, weight.contiguous()?);
        let (s_x, r_x) = cuda_view!(x, "x");
        let (s_y, r_y) = cuda_view!(y, "y");
        let (s_w, r_w) = cuda_view!(weight, "weight");
        let dev: &CudaDevice = &cuda(&s_x).device;
        let n = rows * width;
        let cfg = warp_per_row_grid(rows);
        let (rows_arg, width_arg, eps_arg) = (rows as u64, width as u64, eps as f32);
        macro_rules! run {
            ($t:ty, $name:literal) => {{
                let xs = cuda(&s_x).as_cuda_slice::<$t>()?.slice(r_x.0..r_x.1);
                let ys = cuda(&s_y).as_cuda_slice::<$t>()?.slice(r_y.0..r_y.1);
                let ws = cuda(&s_w).as_cuda_slice::<$t>()?.slice(r_w.0..r_w.1);
                // SAFETY: the kernel writes every element of both outputs (each row's warp covers
                // the row) before anything reads them.
                let (sum, out) = unsafe { (dev.alloc::<$t>(n.max(1))?, dev.alloc::<$t>(n.max(1))?) };
                let func = dev.get_or_load_custom_func($name, MODULE, PTX)?;
                let mut b = func.builder();
                b.arg(&xs).arg(&ys).arg(&ws).arg(&sum).arg(&out).arg(&rows_arg).arg(&width_arg).arg(&eps_arg);
                if rows > 0 {
                    // SAFETY: the arguments match residual_rms_norm_* in kernels/fused.cu; `xs` and
                    // `ys` hold rows x width values, `ws` width (checked above), both outputs n.
                    unsafe { b.launch(cfg) }.map_err(err)?;
                }
                (CudaStorage::wrap_cuda_slice(sum, dev.clone()), CudaStorage::wrap_cuda_slice(out, dev.clone()))
            }};
        }
        let (sum, out) = match dtype {
            DType::BF16 => run!(half::bf16, "residual_rms_norm_bf16"),
            DType::F16 => run!(half::f16, "residual_rms_norm_f16"),
            DType::F32 => run!(f32, "residual_rms_norm_f32"),
            d => candle_core::bail!("residual_rms_norm: dtype {d:?} is not supported"),
        };
        Ok((wrap(sum, (rows, width)), wrap(out, (rows, width))))
    }

    pub(super) fn scatter_rows(
        dst: &mut CudaStorage,
        dl: &candle_core::Layout,
        rows: &CudaStorage,
        rl: &candle_core::Layout,
        src: &CudaStorage,
        sl: &candle_core::Layout,
    ) -> Result<()> {
        let (dst_rows, width) = dl.shape().dims2()?;
        let n = rl.shape().dims1()?;
        if n == 0 {
            return Ok(());
        }
        let dev: CudaDevice = dst.device.clone();
        let rows = rows.as_cuda_slice::<u32>()?.slice(rl.start_offset()..rl.start_offset() + n);
        let total = n * width;
        let cfg = elementwise_grid(total);
        let (n_arg, width_arg, rows_arg) = (n as u64, width as u64, dst_rows as u64);
        let (d0, s0) = (dl.start_offset(), sl.start_offset());
        use candle_core::backend::BackendStorage;
        let dtype = dst.dtype();
        macro_rules! run {
            ($t:ty, $name:literal) => {{
                let s = src.as_cuda_slice::<$t>()?.slice(s0..s0 + total);
                let d = dst.as_cuda_slice_mut::<$t>()?;
                let mut d = d.slice_mut(d0..d0 + dst_rows * width);
                // SAFETY: the kernel reads `total` elements of `s` and `n` of `rows`, and writes only
                // rows below `dst_rows` of `d`, which holds dst_rows * width elements; bf16/f16 and
                // f32 are copied as same-sized words (u16, u32), which the kernel never interprets.
                let func = dev.get_or_load_custom_func($name, MODULE, PTX)?;
                let mut b = func.builder();
                b.arg(&rows).arg(&s).arg(&mut d).arg(&n_arg).arg(&width_arg).arg(&rows_arg);
                unsafe { b.launch(cfg) }.map_err(err)?;
            }};
        }
        match dtype {
            DType::BF16 => run!(half::bf16, "scatter_rows_u16"),
            DType::F16 => run!(half::f16, "scatter_rows_u16"),
            DType::F32 => run!(f32, "scatter_rows_u32"),
            d => candle_core::bail!("scatter_rows: dtype {d:?} is not supported"),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use candle_core::{DType, Device, Tensor};

    #[test]
    fn scatter_rows_writes_each_row_where_it_is_told_and_nothing_else() {
        for dtype in [DType::F32, DType::BF16] {
            let dst = Tensor::zeros((6, 3), dtype, &Device::Cpu).unwrap();
            let src = Tensor::arange(1f32, 10.0, &Device::Cpu).unwrap().reshape((3, 3)).unwrap().to_dtype(dtype).unwrap();
            let rows = Tensor::new(&[4u32, 0, 2], &Device::Cpu).unwrap();
            super::scatter_rows(&dst, &rows, &src).unwrap();
            let got = dst.to_dtype(DType::F32).unwrap().to_vec2::<f32>().unwrap();
            let want = [[4., 5., 6.], [0., 0., 0.], [7., 8., 9.], [0., 0., 0.], [1., 2., 3.], [0., 0., 0.]];
            assert_eq!(got, want.map(|r| r.to_vec()).to_vec(), "{dtype:?}");
            // A row outside the destination is refused and nothing is written.
            let bad = Tensor::new(&[1u32, 6, 3], &Device::Cpu).unwrap();
            let err = super::scatter_rows(&dst, &bad, &src).unwrap_err().to_string();
            assert!(err.contains("row 6 is outside the 6 rows"), "{err}");
            assert_eq!(dst.to_dtype(DType::F32).unwrap().to_vec2::<f32>().unwrap(), got);
            // Shapes that do not fit are refused, not truncated.
            let wide = Tensor::zeros((3, 4), dtype, &Device::Cpu).unwrap();
            assert!(super::scatter_rows(&dst, &rows, &wide).is_err());
        }
    }
}
