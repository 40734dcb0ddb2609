//! How fast the CPU multiplies activations by a GGUF's quantized weights, per number of rows (a
//! decode step of one sequence is 1 row, a batch of decodes a few, a prefill hundreds): candle's
//! `QMatMul`, its repacked AVX-512 VNNI kernel (`QTensor::gemv_fused_shared_lhs`) and warpfold's
//! one-row path (`quant_rows`), each over every layer's matrices of one kind in turn, so the
//! weights stream from memory as they do in a real step.
//!
//!     cargo run --release -p warpfold-candle --example qmatmul_cpu -- MODEL.gguf [rows,rows,...]

use std::sync::Arc;
use std::time::Instant;

use candle_core::quantized::{gguf_file, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};
use warpfold_candle::quant_rows::matmul_one_row;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args.first().ok_or("usage: qmatmul_cpu MODEL.gguf [rows,...]")?;
    let rows: Vec<usize> =
        args.get(1).map_or("1,4,8,64,512".into(), |s| s.clone()).split(',').map(|r| r.parse()).collect::<Result<_, _>>()?;
    let mut file = std::fs::File::open(path)?;
    let content = gguf_file::Content::read(&mut file)?;
    let device = Device::Cpu;
    for kind in ["attn_q", "attn_v", "attn_output", "ffn_gate", "ffn_down"] {
        let names: Vec<String> =
            (0..).map(|l| format!("blk.{l}.{kind}.weight")).take_while(|n| content.tensor_infos.contains_key(n)).collect();
        if names.is_empty() {
            continue;
        }
        let tensors: Vec<Arc<QTensor>> =
            names.iter().map(|n| content.tensor(&mut file, n, &device).map(Arc::new)).collect::<Result<_, _>>()?;
        let (n, k) = tensors[0].shape().dims2()?;
        let dtypes: std::collections::BTreeSet<String> = tensors.iter().map(|t| format!("{:?}", t.dtype())).collect();
        let mms: Vec<QMatMul> = tensors.iter().map(|t| QMatMul::QTensor(t.clone())).collect();
        for &m in &rows {
            let x = Tensor::randn(0f32, 1f32, (m, k), &device)?;
            let reps = (4_000_000_000 / (m * n * k * tensors.len())).clamp(1, 50);
            // Seconds for one pass over every layer's matrix, or None where the path does not apply.
            let time = |product: &dyn Fn(&QTensor, &QMatMul) -> candle_core::Result<bool>| -> candle_core::Result<Option<f64>> {
                let pass = || -> candle_core::Result<bool> {
                    for (t, mm) in tensors.iter().zip(&mms) {
                        if !product(t, mm)? {
                            return Ok(false);
                        }
                    }
                    Ok(true)
                };
                if !pass()? {
                    return Ok(None);
                }
                let start = Instant::now();
                for _ in 0..reps {
                    pass()?;
                }
                Ok(Some(start.elapsed().as_secs_f64() / reps as f64))
            };
            let rate = |s: Option<f64>| match s {
                Some(s) => format!("{:8.3} ms {:6.1} GMAC/s", s * 1e3, (m * n * k * tensors.len()) as f64 / s / 1e9),
                None => format!("{:>24}", "not taken"),
            };
            let plain = time(&|_, mm| mm.forward(&x).map(|_| true))?;
            let repacked = time(&|t, _| Ok(QTensor::gemv_fused_shared_lhs(&[t], &x)?.is_some()))?;
            let ours = time(&|t, _| Ok(matmul_one_row(t, &x)?.is_some()))?;
            println!(
                "{kind:12} {dtypes:?} n={n:5} k={k:5} x{} m={m:4}: QMatMul {} | repacked {} | warpfold {}",
                tensors.len(),
                rate(plain),
                rate(repacked),
                rate(ours)
            );
        }
    }
    Ok(())
}
