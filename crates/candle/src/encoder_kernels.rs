//! Launches the encoder's fused CUDA kernels (src/kernels/encoder.cu) on candle tensors.
//!
//! Why: a stage profile of all-MiniLM-L6-v2 on an H200 (`WARPFOLD_PROFILE=1`, BENCHMARKS.md) showed
//! a bin's time spent outside the matmuls and attention, in candle's separate element-wise kernels
//! (bias adds, q/k/v copies, residual adds, layer norms, GELU) and its mean pooling (a scatter-add
//! that loops over every row of the bin in one thread per column). Here each of those groups is one
//! kernel: the embeddings' gathers, adds and layer norm ([`embed_layer_norm`]),
//! [`bias_residual_layer_norm`], [`bias_act`], q's bias ([`bias_columns`]) and [`pool_normalize`];
//! FlashAttention-2 reads k and v in place from the q/k/v projection (`bert::InPlaceBiases` says why
//! their biases need no pass).
//! Only CUDA tensors are accepted; the model takes candle's ops elsewhere.

use candle_core::cuda::cudarc::driver::{LaunchConfig, PushKernelArg};
use candle_core::cuda_backend::{CudaDevice, CudaStorage};
use candle_core::{DType, Result, Tensor};

use crate::activation::Activation;
use crate::cuda_launch::{cuda, cuda_view, elementwise_grid as grid, kernel_error as err, warp_per_row_grid, wrap};

const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/encoder.ptx"));
const MODULE: &str = "warpfold_encoder";

fn same_dtype(dtype: DType, others: &[&Tensor], what: &str) -> Result<()> {
    if let Some(t) = others.iter().find(|t| t.dtype() != dtype) {
        candle_core::bail!("{what}: a {:?} operand among {dtype:?} ones", t.dtype());
    }
    Ok(())
}

/// `layer_norm(y + bias + residual)` over the rows of `y` (rows, width), with `gamma`, `beta`
/// (width,) and `eps`.
pub fn bias_residual_layer_norm(y: &Tensor, bias: &Tensor, residual: &Tensor, gamma: &Tensor, beta: &Tensor, eps: f64) -> Result<Tensor> {
    let (rows, width) = y.dims2()?;
    if residual.dims2()? != (rows, width) || bias.dims1()? != width || gamma.dims1()? != width || beta.dims1()? != width {
        candle_core::bail!("bias_residual_layer_norm: ({rows}, {width}) with operands of other shapes");
    }
    same_dtype(y.dtype(), &[bias, residual, gamma, beta], "bias_residual_layer_norm")?;
    let (s_y, r_y) = cuda_view!(y, "y");
    let (s_b, r_b) = cuda_view!(bias, "bias");
    let (s_r, r_r) = cuda_view!(residual, "residual");
    let (s_g, r_g) = cuda_view!(gamma, "gamma");
    let (s_be, r_be) = cuda_view!(beta, "beta");
    let dev: &CudaDevice = &cuda(&s_y).device;
    let n = rows * width;
    let cfg = warp_per_row_grid(rows);
    let (rows_arg, width_arg, eps_arg) = (rows as u64, width as u64, eps as f32);
    macro_rules! run {
        ($t:ty, $name:literal) => {{
            let y = cuda(&s_y).as_cuda_slice::<$t>()?.slice(r_y.0..r_y.1);
            let b = cuda(&s_b).as_cuda_slice::<$t>()?.slice(r_b.0..r_b.1);
            let r = cuda(&s_r).as_cuda_slice::<$t>()?.slice(r_r.0..r_r.1);
            let g = cuda(&s_g).as_cuda_slice::<$t>()?.slice(r_g.0..r_g.1);
            let be = cuda(&s_be).as_cuda_slice::<$t>()?.slice(r_be.0..r_be.1);
            // SAFETY: every row of the output is written by its warp before anything reads it.
            let out = unsafe { dev.alloc::<$t>(n.max(1)) }?;
            let func = dev.get_or_load_custom_func($name, MODULE, PTX)?;
            let mut l = func.builder();
            l.arg(&y).arg(&b).arg(&r).arg(&g).arg(&be).arg(&out).arg(&rows_arg).arg(&width_arg).arg(&eps_arg);
            // SAFETY: the arguments match bias_residual_layer_norm_* in kernels/encoder.cu; `y`,
            // `r` and `out` hold rows × width values, `b`, `g`, `be` width (checked above).
            unsafe { l.launch(cfg) }.map_err(err)?;
            CudaStorage::wrap_cuda_slice(out, dev.clone())
        }};
    }
    let out = match y.dtype() {
        DType::F16 => run!(half::f16, "bias_residual_layer_norm_f16"),
        DType::BF16 => run!(half::bf16, "bias_residual_layer_norm_bf16"),
        DType::F32 => run!(f32, "bias_residual_layer_norm_f32"),
        d => candle_core::bail!("bias_residual_layer_norm: dtype {d:?} is not supported"),
    };
    Ok(wrap(out, (rows, width)))
}

/// BERT's embeddings: `layer_norm(word[ids[r]] + position[positions[r]] + token_type)` for each row
/// r, with `ids` and `positions` (rows,) u32 on the device, `word` (vocab, width), `position`
/// (max positions, width), `token_type`, `gamma`, `beta` (width,). The caller checks the ids and
/// positions against the tables (a row past them comes out as zeros, nothing is read outside).
#[allow(clippy::too_many_arguments)]
pub fn embed_layer_norm(
    ids: &Tensor,
    positions: &Tensor,
    word: &Tensor,
    position: &Tensor,
    token_type: &Tensor,
    gamma: &Tensor,
    beta: &Tensor,
    eps: f64,
) -> Result<Tensor> {
    let rows = ids.dims1()?;
    let (vocab, width) = word.dims2()?;
    let (max_positions, position_width) = position.dims2()?;
    if positions.dims1()? != rows
        || ids.dtype() != DType::U32
        || positions.dtype() != DType::U32
        || position_width != width
        || token_type.dims1()? != width
        || gamma.dims1()? != width
        || beta.dims1()? != width
    {
        candle_core::bail!("embed_layer_norm: {rows} u32 ids and positions over tables of width {width} with operands of other shapes");
    }
    same_dtype(word.dtype(), &[position, token_type, gamma, beta], "embed_layer_norm")?;
    let (s_i, r_i) = cuda_view!(ids, "ids");
    let (s_p, r_p) = cuda_view!(positions, "positions");
    let (s_w, r_w) = cuda_view!(word, "word");
    let (s_pe, r_pe) = cuda_view!(position, "position");
    let (s_t, r_t) = cuda_view!(token_type, "token_type");
    let (s_g, r_g) = cuda_view!(gamma, "gamma");
    let (s_be, r_be) = cuda_view!(beta, "beta");
    let dev: &CudaDevice = &cuda(&s_w).device;
    let cfg = warp_per_row_grid(rows);
    let (rows_arg, width_arg, vocab_arg, max_pos_arg, eps_arg) =
        (rows as u64, width as u64, vocab as u32, max_positions as u32, eps as f32);
    let i = cuda(&s_i).as_cuda_slice::<u32>()?.slice(r_i.0..r_i.1);
    let p = cuda(&s_p).as_cuda_slice::<u32>()?.slice(r_p.0..r_p.1);
    macro_rules! run {
        ($t:ty, $name:literal) => {{
            let w = cuda(&s_w).as_cuda_slice::<$t>()?.slice(r_w.0..r_w.1);
            let pe = cuda(&s_pe).as_cuda_slice::<$t>()?.slice(r_pe.0..r_pe.1);
            let t = cuda(&s_t).as_cuda_slice::<$t>()?.slice(r_t.0..r_t.1);
            let g = cuda(&s_g).as_cuda_slice::<$t>()?.slice(r_g.0..r_g.1);
            let be = cuda(&s_be).as_cuda_slice::<$t>()?.slice(r_be.0..r_be.1);
            // SAFETY: every row of the output is written by its warp before anything reads it.
            let out = unsafe { dev.alloc::<$t>((rows * width).max(1)) }?;
            let func = dev.get_or_load_custom_func($name, MODULE, PTX)?;
            let mut l = func.builder();
            l.arg(&i).arg(&p).arg(&w).arg(&pe).arg(&t).arg(&g).arg(&be).arg(&out);
            l.arg(&rows_arg).arg(&width_arg).arg(&vocab_arg).arg(&max_pos_arg).arg(&eps_arg);
            // SAFETY: the arguments match embed_layer_norm_* in kernels/encoder.cu; `i` and `p` hold
            // `rows` values, the tables vocab × width and max_positions × width, the vectors width,
            // `out` rows × width (checked above); the kernel reads no row past its table.
            unsafe { l.launch(cfg) }.map_err(err)?;
            CudaStorage::wrap_cuda_slice(out, dev.clone())
        }};
    }
    let out = match word.dtype() {
        DType::F16 => run!(half::f16, "embed_layer_norm_f16"),
        DType::BF16 => run!(half::bf16, "embed_layer_norm_bf16"),
        DType::F32 => run!(f32, "embed_layer_norm_f32"),
        d => candle_core::bail!("embed_layer_norm: dtype {d:?} is not supported"),
    };
    Ok(wrap(out, (rows, width)))
}

/// `act(y + bias)` over `y` (rows, width).
pub fn bias_act(y: &Tensor, bias: &Tensor, act: Activation) -> Result<Tensor> {
    launch_bias_act(y, y.dims2()?.1, bias, act as u32)
}

/// `y[:, ..columns] + bias` as a contiguous (rows, columns) tensor, `y` (rows, width) contiguous:
/// the first columns of a wider matrix (q out of the q/k/v projection) in one pass, no copy first.
pub fn bias_columns(y: &Tensor, columns: usize, bias: &Tensor) -> Result<Tensor> {
    launch_bias_act(y, columns, bias, NO_ACTIVATION)
}

/// encoder.cu's `activate` code for none (the [`Activation`] values are its others).
const NO_ACTIVATION: u32 = 3;

/// `act(y[:, ..columns] + bias)` into a new (rows, columns) tensor, `y` (rows, width) contiguous.
fn launch_bias_act(y: &Tensor, columns: usize, bias: &Tensor, act: u32) -> Result<Tensor> {
    let (rows, width) = y.dims2()?;
    if bias.dims1()? != columns || columns > width {
        candle_core::bail!("bias_act: {columns} columns of ({rows}, {width}) with a bias of {:?}", bias.dims());
    }
    same_dtype(y.dtype(), &[bias], "bias_act")?;
    let (s_y, r_y) = cuda_view!(y, "y");
    let (s_b, r_b) = cuda_view!(bias, "bias");
    let dev: &CudaDevice = &cuda(&s_y).device;
    let n = rows * columns;
    let cfg = grid(n);
    let (rows_arg, columns_arg, stride_arg) = (rows as u64, columns as u64, width as u64);
    macro_rules! run {
        ($t:ty, $name:literal) => {{
            let y = cuda(&s_y).as_cuda_slice::<$t>()?.slice(r_y.0..r_y.1);
            let b = cuda(&s_b).as_cuda_slice::<$t>()?.slice(r_b.0..r_b.1);
            // SAFETY: the kernel writes all `n` outputs before anything reads them.
            let out = unsafe { dev.alloc::<$t>(n.max(1)) }?;
            let func = dev.get_or_load_custom_func($name, MODULE, PTX)?;
            let mut l = func.builder();
            l.arg(&y).arg(&b).arg(&out).arg(&rows_arg).arg(&columns_arg).arg(&stride_arg).arg(&act);
            // SAFETY: the arguments match bias_act_* in kernels/encoder.cu; `y` holds rows × width
            // values and the kernel reads the first `columns` of each row, `b` holds `columns`, `out`
            // rows × columns (checked above).
            unsafe { l.launch(cfg) }.map_err(err)?;
            CudaStorage::wrap_cuda_slice(out, dev.clone())
        }};
    }
    let out = match y.dtype() {
        DType::F16 => run!(half::f16, "bias_act_f16"),
        DType::BF16 => run!(half::bf16, "bias_act_bf16"),
        DType::F32 => run!(f32, "bias_act_f32"),
        d => candle_core::bail!("bias_act: dtype {d:?} is not supported"),
    };
    Ok(wrap(out, (rows, columns)))
}

/// Widest row [`pool_normalize`] takes (4 columns a thread, 256 threads).
pub const POOL_MAX_WIDTH: usize = 1024;

/// One L2-normalised f32 row per sequence: the mean of rows `starts[s] .. starts[s] + lens[s]` of
/// `x` (rows, width), with `starts` and `lens` (sequences,) u32 on the device (lens of 1 and the
/// slot starts give CLS pooling).
pub fn pool_normalize(x: &Tensor, starts: &Tensor, lens: &Tensor) -> Result<Tensor> {
    let (rows, width) = x.dims2()?;
    let n = starts.dims1()?;
    if lens.dims1()? != n || starts.dtype() != DType::U32 || lens.dtype() != DType::U32 || width > POOL_MAX_WIDTH {
        candle_core::bail!("pool_normalize: {n} u32 starts and lens over ({rows}, {width}) rows of at most {POOL_MAX_WIDTH}");
    }
    if n == 0 {
        return Tensor::zeros((0, width), DType::F32, x.device());
    }
    let (s_x, r_x) = cuda_view!(x, "x");
    let (s_s, r_s) = cuda_view!(starts, "starts");
    let (s_l, r_l) = cuda_view!(lens, "lens");
    let dev: &CudaDevice = &cuda(&s_x).device;
    let threads = if width > 512 { 256 } else { 128 };
    let cfg = LaunchConfig { grid_dim: (n as u32, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 };
    let width_arg = width as u64;
    let st = cuda(&s_s).as_cuda_slice::<u32>()?.slice(r_s.0..r_s.1);
    let ln = cuda(&s_l).as_cuda_slice::<u32>()?.slice(r_l.0..r_l.1);
    // SAFETY: every block writes all `width` values of its row.
    let out = unsafe { dev.alloc::<f32>(n * width) }?;
    macro_rules! run {
        ($t:ty, $name:literal) => {{
            let x = cuda(&s_x).as_cuda_slice::<$t>()?.slice(r_x.0..r_x.1);
            let func = dev.get_or_load_custom_func($name, MODULE, PTX)?;
            let mut l = func.builder();
            l.arg(&x).arg(&st).arg(&ln).arg(&out).arg(&width_arg);
            // SAFETY: the arguments match pool_normalize_* in kernels/encoder.cu; the caller's
            // starts and lens address rows of `x` (the bin's own slots), `out` holds n × width f32.
            unsafe { l.launch(cfg) }.map_err(err)?;
        }};
    }
    match x.dtype() {
        DType::F16 => run!(half::f16, "pool_normalize_f16"),
        DType::BF16 => run!(half::bf16, "pool_normalize_bf16"),
        DType::F32 => run!(f32, "pool_normalize_f32"),
        d => candle_core::bail!("pool_normalize: dtype {d:?} is not supported"),
    }
    Ok(wrap(CudaStorage::wrap_cuda_slice(out, dev.clone()), (n, width)))
}
