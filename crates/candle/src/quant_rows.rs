//! One row of activations (a decode step of one sequence) times a quantized weight matrix on the
//! CPU, with each thread streaming one contiguous run of the weight's rows.
//!
//! Why: a decode step reads every weight of the model once and does little arithmetic per byte,
//! so its speed is how fast the cores stream the weights from memory. candle's quantized matmul
//! hands a thread many small runs of output columns from a shared cursor; on `epyc4` (2-core
//! AMD EPYC, Zen 4) its one-row products over the 28 layers of Qwen2.5-1.5B's Q4_K gate
//! projections ran at 27.9 GMAC/s, and the same dot products with one contiguous run per thread
//! at 45.1 (`examples/qmatmul_cpu.rs`, bench/results/2026-12-07-epyc4-decode-cpu). Two rows or more (a batch of decodes, a prefill) keep
//! candle's kernels, which reuse each weight block across rows (its AVX-512 VNNI tiles where the CPU
//! has them) and were faster there in the same runs.
//!
//! The dot products are candle's own (`GgmlType::vec_dot`, AVX2 where the CPU has it), on the
//! blocks as stored, so the results are the ones `QMatMul` gives, summed in the same order.

use std::sync::atomic::{AtomicUsize, Ordering};

use candle_core::quantized::k_quants::{BlockQ2K, BlockQ3K, BlockQ4K, BlockQ4_0, BlockQ5K, BlockQ6K, BlockQ8_0, GgmlType};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{DType, Result, Tensor};

/// Most activation rows this path takes; more rows go to candle's kernels, which reuse each
/// weight block across rows.
pub const MAX_ROWS: usize = 1;

/// `x` (m, k) times the transpose of `weight` (n, k): (m, n), or `None` when this path does not
/// apply (not the CPU, not f32, more than [`MAX_ROWS`] rows, a block type it does not take).
pub fn matmul_one_row(weight: &QTensor, x: &Tensor) -> Result<Option<Tensor>> {
    if !x.device().is_cpu() || x.dtype() != DType::F32 || x.rank() != 2 {
        return Ok(None);
    }
    let (m, k) = x.dims2()?;
    let (n, wk) = weight.shape().dims2()?;
    if m == 0 || m > MAX_ROWS || wk != k {
        return Ok(None);
    }
    match weight.dtype() {
        GgmlDType::Q4K => rows::<BlockQ4K>(weight, x, m, n, k),
        GgmlDType::Q6K => rows::<BlockQ6K>(weight, x, m, n, k),
        GgmlDType::Q5K => rows::<BlockQ5K>(weight, x, m, n, k),
        GgmlDType::Q3K => rows::<BlockQ3K>(weight, x, m, n, k),
        GgmlDType::Q2K => rows::<BlockQ2K>(weight, x, m, n, k),
        GgmlDType::Q8_0 => rows::<BlockQ8_0>(weight, x, m, n, k),
        GgmlDType::Q4_0 => rows::<BlockQ4_0>(weight, x, m, n, k),
        _ => Ok(None),
    }
}

fn rows<T: GgmlType>(weight: &QTensor, x: &Tensor, m: usize, n: usize, k: usize) -> Result<Option<Tensor>> {
    if !k.is_multiple_of(T::BLCK_SIZE) || T::VecDotType::BLCK_SIZE != T::BLCK_SIZE {
        return Ok(None);
    }
    let per_row = k / T::BLCK_SIZE;
    let bytes = weight.data()?;
    if bytes.len() != n * per_row * std::mem::size_of::<T>() || !(bytes.as_ptr() as usize).is_multiple_of(std::mem::align_of::<T>()) {
        return Ok(None);
    }
    // SAFETY: the storage is candle's Vec of `T` blocks for this dtype (length and alignment
    // checked above); the block types are plain `repr(C)` data.
    let blocks: &[T] = unsafe { std::slice::from_raw_parts(bytes.as_ptr() as *const T, n * per_row) };
    let xs: Vec<f32> = x.contiguous()?.flatten_all()?.to_vec1()?;
    let mut quantized = vec![T::VecDotType::zeros(); m * per_row];
    for (row, out) in xs.chunks_exact(k).zip(quantized.chunks_exact_mut(per_row)) {
        T::VecDotType::from_float(row, out);
    }
    let mut out = vec![0f32; m * n];
    let dst = out.as_mut_ptr() as usize;
    // One contiguous run of weight rows per thread; the cursor only guards against a pool of
    // another size than asked (every run is taken exactly once either way).
    let threads = threads();
    let run = n.div_ceil(threads);
    let cursor = AtomicUsize::new(0);
    candle_core::utils::barrier_pool().execute(|_| loop {
        let start = cursor.fetch_add(run, Ordering::Relaxed);
        if start >= n {
            break;
        }
        for col in start..(start + run).min(n) {
            let w = &blocks[col * per_row..(col + 1) * per_row];
            for (r, xq) in quantized.chunks_exact(per_row).enumerate() {
                let v = T::vec_dot(k, w, xq);
                // SAFETY: (r, col) is written by this iteration only; `out` outlives the pool call.
                unsafe { *(dst as *mut f32).add(r * n + col) = v };
            }
        }
    });
    Ok(Some(Tensor::from_vec(out, (m, n), x.device())?))
}

/// The threads of candle's pool, asked once: the count reads the process's CPU quota from the
/// file system, which cost more than a small projection.
fn threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(|| candle_core::utils::get_num_threads().max(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::quantized::QMatMul;
    use candle_core::{Device, Module};

    /// For every block type it takes, the product is candle's own,
    /// and more rows than that, or a bf16 input, are left to candle.
    #[test]
    fn one_row_gives_what_candle_gives() {
        let device = Device::Cpu;
        let (n, k) = (40, 512);
        let w = Tensor::randn(0f32, 1f32, (n, k), &device).unwrap();
        for dtype in [GgmlDType::Q4K, GgmlDType::Q6K, GgmlDType::Q5K, GgmlDType::Q3K, GgmlDType::Q2K, GgmlDType::Q8_0, GgmlDType::Q4_0] {
            let q = QTensor::quantize(&w, dtype).unwrap();
            for m in [1, MAX_ROWS] {
                let x = Tensor::randn(0f32, 1f32, (m, k), &device).unwrap();
                let ours = matmul_one_row(&q, &x).unwrap().expect("taken");
                let theirs = QMatMul::from_qtensor(QTensor::quantize(&w, dtype).unwrap()).unwrap().forward(&x).unwrap();
                assert_eq!(ours.dims(), [m, n]);
                let diff = (ours - &theirs).unwrap().abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
                let scale = theirs.abs().unwrap().max_all().unwrap().to_scalar::<f32>().unwrap();
                assert!(diff <= scale * 1e-5, "{dtype:?}, {m} rows: off by {diff} (largest {scale})");
            }
        }
        let q = QTensor::quantize(&w, GgmlDType::Q4K).unwrap();
        let many = Tensor::randn(0f32, 1f32, (MAX_ROWS + 1, k), &device).unwrap();
        assert!(matmul_one_row(&q, &many).unwrap().is_none());
        let half = Tensor::randn(0f32, 1f32, (1, k), &device).unwrap().to_dtype(DType::BF16).unwrap();
        assert!(matmul_one_row(&q, &half).unwrap().is_none());
    }
}
