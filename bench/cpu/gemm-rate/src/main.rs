//! What one core of this CPU can do in f32, against what the fused CPU encoder asks of it
//! (BENCHMARKS.md, "CPU embedding throughput": the f32 ceiling on AMD): the FMA units' peak (12 independent chains of fused
//! multiply-adds, 256-bit on AVX2+FMA, 512-bit with AVX-512F) and the `gemm` crate's `sgemm` rate on
//! the block shapes of `crates/candle/src/bert_cpu.rs` (blocks of 256 rows; MiniLM's widths), each on
//! one thread, then on every core at once (each thread its own matrices, as the row phase's tasks).

use std::time::Instant;

/// GFLOP/s of `iters` rounds of 12 FMA chains on one thread.
fn fma_peak(iters: u64) -> f64 {
    let start = Instant::now();
    let lanes = chains(iters);
    iters as f64 * 12.0 * 2.0 * lanes / start.elapsed().as_secs_f64() / 1e9
}

/// Runs the chains with the widest FMA the CPU has; returns the f32 lanes per instruction.
fn chains(iters: u64) -> f64 {
    #[cfg(target_arch = "x86_64")]
    {
        if is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F (checked above).
            unsafe { std::hint::black_box(x86::chains512(iters)) };
            return 16.0;
        }
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            // SAFETY: the CPU has AVX2 and FMA (checked above).
            unsafe { std::hint::black_box(x86::chains256(iters)) };
            return 8.0;
        }
    }
    panic!("no AVX2+FMA or AVX-512F: this measurement is for x86-64 CPUs that have them");
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn chains256(iters: u64) -> f32 {
        let (a, b) = (_mm256_set1_ps(1.000_000_1), _mm256_set1_ps(0.999_999));
        let mut acc = [_mm256_setzero_ps(); 12];
        for _ in 0..iters {
            for r in acc.iter_mut() {
                *r = _mm256_fmadd_ps(a, b, *r);
            }
        }
        let mut out = [0f32; 8];
        _mm256_storeu_ps(out.as_mut_ptr(), acc.iter().fold(_mm256_setzero_ps(), |s, &r| _mm256_add_ps(s, r)));
        out.iter().sum()
    }

    #[target_feature(enable = "avx512f")]
    pub unsafe fn chains512(iters: u64) -> f32 {
        let (a, b) = (_mm512_set1_ps(1.000_000_1), _mm512_set1_ps(0.999_999));
        let mut acc = [_mm512_setzero_ps(); 12];
        for _ in 0..iters {
            for r in acc.iter_mut() {
                *r = _mm512_fmadd_ps(a, b, *r);
            }
        }
        _mm512_reduce_add_ps(acc.iter().fold(_mm512_setzero_ps(), |s, &r| _mm512_add_ps(s, r)))
    }
}

/// GFLOP/s of `c (m × n) += a (m × k) · wᵀ (w: n × k, row-major)` on one thread, as the fused
/// layers call it, repeated for about `flop` floating-point operations.
fn sgemm_rate((m, n, k): (usize, usize, usize), flop: f64) -> f64 {
    let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 * 0.1).collect();
    let w: Vec<f32> = (0..n * k).map(|i| (i % 5) as f32 * 0.1).collect();
    let mut c = vec![0f32; m * n];
    let reps = (flop / (2.0 * (m * n * k) as f64)).ceil() as usize;
    let start = Instant::now();
    for _ in 0..reps {
        // SAFETY: a is m × k, w is n × k and c is m × n, all row-major and live; c is exclusive.
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                c.as_mut_ptr(),
                1,
                n as isize,
                true,
                a.as_ptr(),
                1,
                k as isize,
                w.as_ptr(),
                k as isize,
                1,
                1.0,
                1.0,
                false,
                false,
                false,
                gemm::Parallelism::None,
            )
        }
    }
    std::hint::black_box(&c);
    2.0 * (m * n * k * reps) as f64 / start.elapsed().as_secs_f64() / 1e9
}

/// `f` on `threads` threads at once: each thread's result.
fn on_threads(threads: usize, f: impl Fn() -> f64 + Sync) -> Vec<f64> {
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads).map(|_| s.spawn(&f)).collect();
        handles.into_iter().map(|h| h.join().expect("a measuring thread panicked")).collect()
    })
}

fn show(label: &str, rates: &[f64]) {
    let each: Vec<String> = rates.iter().map(|r| format!("{r:.1}")).collect();
    println!("{label:<34} {:>7.1} GFLOP/s in all (each thread: {})", rates.iter().sum::<f64>(), each.join(", "));
}

fn main() {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("{cores} cores; GFLOP/s counts a fused multiply-add as 2");
    for threads in [1, cores] {
        show(&format!("FMA peak, {threads} thread(s)"), &on_threads(threads, || fma_peak(300_000_000)));
    }
    // (rows, outputs, inputs) of the row phase's products for a block of 256 rows of MiniLM.
    let shapes = [("q/k/v", (256, 1152, 384)), ("attention output", (256, 384, 384)), ("feed-forward in", (256, 1536, 384)), ("feed-forward out", (256, 384, 1536))];
    for threads in [1, cores] {
        for (name, shape) in shapes {
            show(&format!("sgemm {name} {shape:?}, {threads} thread(s)"), &on_threads(threads, || sgemm_rate(shape, 20e9)));
        }
    }
}
