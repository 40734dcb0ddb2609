//! Intel oneMKL's single-precision matrix product, loaded at run time for the CPU encoder.
//!
//! Why: on a 2-core Intel Xeon (Sapphire Rapids) MKL's `cblas_sgemm` runs the encoder's row blocks
//! (128-256 rows × 384 × 1536) at 115-145 GFLOP/s a core where the `gemm` crate's AVX-512 kernels,
//! called on the same blocks, reach about 70 (BENCHMARKS.md, issue 17); sentence-transformers gets
//! MKL through PyTorch. MKL ships in PyPI's `mkl` wheel, which `warpfold models fetch` installs like a
//! model (the manifest's `mkl` entry, checksums verified) next to the models. It is opened with
//! `dlopen`, never linked: a build needs no MKL, and a machine without it (or a non-Intel CPU, where
//! MKL's kernels are not the fast ones) runs the `gemm` crate.
//!
//! MKL runs single-threaded here (its sequential layer): the encoder splits rows across its own
//! threads, and the threading layers MKL would otherwise load (Intel OpenMP, TBB) are not unpacked.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::switches::MklChoice;

/// `cblas_sgemm(layout, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)`.
type Sgemm = unsafe extern "C" fn(i32, i32, i32, i32, i32, i32, f32, *const f32, i32, *const f32, i32, f32, *mut f32, i32);
/// `cblas_gemm_bf16bf16f32(layout, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)`:
/// bf16 operands (`MKL_BF16`, the upper half of an f32), f32 accumulation and result.
type GemmBf16 = unsafe extern "C" fn(i32, i32, i32, i32, i32, i32, f32, *const u16, i32, *const u16, i32, f32, *mut f32, i32);
/// `cblas_gemm_bf16bf16f32_pack_get_size(identifier, m, n, k)`: bytes of a packed operand.
type PackGetSize = unsafe extern "C" fn(i32, i32, i32, i32) -> usize;
/// `cblas_gemm_bf16bf16f32_pack(layout, identifier, trans, m, n, k, src, ld, dest)`.
type Pack = unsafe extern "C" fn(i32, i32, i32, i32, i32, i32, *const u16, i32, *mut u16);
/// `cblas_gemm_bf16bf16f32_compute(layout, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta, c,
/// ldc)`, with `transb` `CblasPacked` for a packed right-hand side.
type Compute = GemmBf16;
/// `MKL_Set_Threading_Layer(layer)`.
type SetThreadingLayer = unsafe extern "C" fn(i32) -> i32;

const ROW_MAJOR: i32 = 101;
const NO_TRANS: i32 = 111;
const TRANS: i32 = 112;
const THREADING_SEQUENTIAL: i32 = 1;
const B_MATRIX: i32 = 162;
const PACKED: i32 = 151;

/// The runtime library's file name in the installed folder.
pub const LIBRARY: &str = "libmkl_rt.so.3";

/// An opened MKL runtime.
pub struct Mkl {
    sgemm: Sgemm,
    gemm_bf16: Option<Bf16Products>,
    path: PathBuf,
    _library: libloading::Library,
}

impl Mkl {
    /// Opens `libmkl_rt` at `path` and switches it to its sequential layer.
    pub fn open(path: &Path) -> Result<Self, String> {
        // SAFETY: loading MKL runs its initialisers, which only set up MKL's own state.
        let library = unsafe { libloading::Library::new(path) }.map_err(|e| format!("{}: {e}", path.display()))?;
        // SAFETY: the symbols have these C signatures in every MKL 2021+ runtime (mkl_cblas.h,
        // mkl_service.h); the pointers stay valid while `_library` is held in the same struct.
        let (sgemm, gemm_bf16, set_layer) = unsafe {
            let sgemm: Sgemm = *library.get::<Sgemm>(b"cblas_sgemm\0").map_err(|e| format!("{}: {e}", path.display()))?;
            let set_layer: SetThreadingLayer =
                *library.get::<SetThreadingLayer>(b"MKL_Set_Threading_Layer\0").map_err(|e| format!("{}: {e}", path.display()))?;
            // Absent from runtimes before MKL 2020; the bf16 path then is not offered.
            let gemm_bf16 = (|| {
                Some(Bf16Products {
                    gemm: *library.get::<GemmBf16>(b"cblas_gemm_bf16bf16f32\0").ok()?,
                    pack_get_size: *library.get::<PackGetSize>(b"cblas_gemm_bf16bf16f32_pack_get_size\0").ok()?,
                    pack: *library.get::<Pack>(b"cblas_gemm_bf16bf16f32_pack\0").ok()?,
                    compute: *library.get::<Compute>(b"cblas_gemm_bf16bf16f32_compute\0").ok()?,
                })
            })();
            (sgemm, gemm_bf16, set_layer)
        };
        // Before any other call: otherwise the first product loads the Intel OpenMP layer, which is
        // not installed, and MKL ends the process.
        // SAFETY: a plain setter, called before any other MKL function.
        if unsafe { set_layer(THREADING_SEQUENTIAL) } < 0 {
            return Err(format!("{}: MKL refused its sequential threading layer", path.display()));
        }
        Ok(Self { sgemm, gemm_bf16, path: path.to_path_buf(), _library: library })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `c (m × n, row stride ldc) = a (m × k, row stride lda) · op(b) [+ c]`, where `op(b)` is `b`
    /// (k × n, row stride ldb) or, with `b_transposed`, `bᵀ` for `b` (n × k, row stride ldb).
    ///
    /// # Safety
    /// The three matrices must lie in live allocations as the sizes and strides describe; `c` must
    /// not overlap `a` or `b`, and no other thread may use the part of `c` written here.
    pub(crate) unsafe fn gemm(
        &self,
        (m, n, k): (usize, usize, usize),
        (a, lda): (*const f32, usize),
        (b, ldb, b_transposed): (*const f32, usize, bool),
        (c, ldc): (*mut f32, usize),
        accumulate: bool,
    ) {
        let transb = if b_transposed { TRANS } else { NO_TRANS };
        // SAFETY: forwarded from the caller's contract; the arguments follow cblas_sgemm's.
        unsafe {
            (self.sgemm)(ROW_MAJOR, NO_TRANS, transb, dim(m), dim(n), dim(k), 1.0, a, dim(lda), b, dim(ldb), beta(accumulate), c, dim(ldc))
        }
    }

    /// Whether this runtime has the bf16 product ([`Self::gemm_bf16`]).
    pub(crate) fn has_bf16(&self) -> bool {
        self.gemm_bf16.is_some()
    }

    /// Whether its bf16 products run on AMX here: the runtime has them, the CPU has AMX's bf16 tiles
    /// ([`amx_bf16`]), and neither `MKL_ENABLE_INSTRUCTIONS` nor `MKL_CBWR` is set (either can hold
    /// MKL to older instructions, where three bf16 products cost more than one f32 product). What
    /// [`crate::bert::CpuPrecision::Auto`] asks before it picks bf16x3.
    pub(crate) fn bf16_on_amx(&self) -> bool {
        self.has_bf16() && amx_bf16() && !crate::switches::get().mkl_constrained
    }

    /// [`Self::gemm`] with bf16 operands and f32 accumulation: on CPUs with AMX (Sapphire Rapids and
    /// later) MKL runs it on the tile units.
    ///
    /// # Safety
    /// As [`Self::gemm`]; the runtime must have the product ([`Self::has_bf16`]).
    pub(crate) unsafe fn gemm_bf16(
        &self,
        (m, n, k): (usize, usize, usize),
        (a, lda): (*const u16, usize),
        (b, ldb, b_transposed): (*const u16, usize, bool),
        (c, ldc): (*mut f32, usize),
        accumulate: bool,
    ) {
        let gemm = self.gemm_bf16.as_ref().expect("gemm_bf16 is called only where has_bf16").gemm;
        let transb = if b_transposed { TRANS } else { NO_TRANS };
        // SAFETY: forwarded from the caller's contract; the arguments follow cblas_gemm_bf16bf16f32's.
        unsafe { gemm(ROW_MAJOR, NO_TRANS, transb, dim(m), dim(n), dim(k), 1.0, a, dim(lda), b, dim(ldb), beta(accumulate), c, dim(ldc)) }
    }
}

/// MKL's bf16 products: plain, and against a right-hand side packed once.
struct Bf16Products {
    gemm: GemmBf16,
    pack_get_size: PackGetSize,
    pack: Pack,
    compute: Compute,
}

/// A weight (out × in, bf16) packed by MKL as the right-hand side `Wᵀ` of `x · Wᵀ`, once at load:
/// the products then skip MKL's per-call reformatting of the weight (11% of a bf16 run's cycles in
/// `perf` before). MKL forbids moving a packed buffer; the `Vec`'s heap block never moves.
///
/// MKL asks for 12-20 MB for each of MiniLM's weights whatever its size (4-14 times the bf16s), and
/// writes only part of it: the buffer is reserved, never zeroed, so the pages MKL does not write need
/// not be mapped (with mimalloc, the CLI's allocator: a bf16x3 encoder's peak RSS 400-430 MiB, against
/// 570-650 MiB zeroed). Its length stays 0: Rust never reads it, MKL reads only what it
/// wrote.
pub(crate) struct PackedBf16 {
    buffer: Vec<u64>,
    outputs: usize,
    inputs: usize,
}

impl PackedBf16 {
    /// The width of the rows it multiplies (its `k`).
    pub(crate) fn inputs(&self) -> usize {
        self.inputs
    }
}

impl Mkl {
    /// `weight` (outputs × inputs, row-major bf16) packed as `Wᵀ` ([`Self::has_bf16`] required).
    pub(crate) fn pack_bf16(&self, weight: &[u16], outputs: usize, inputs: usize) -> PackedBf16 {
        assert_eq!(weight.len(), outputs * inputs, "a whole weight");
        let f = self.gemm_bf16.as_ref().expect("pack_bf16 is called only where has_bf16");
        // SAFETY: plain queries and a pack into an allocation of the size MKL asked for (in u64s,
        // so 8-byte aligned; MKL writes it before it reads it); `weight` holds outputs × inputs
        // values with row stride `inputs`.
        unsafe {
            let bytes = (f.pack_get_size)(B_MATRIX, 1, dim(outputs), dim(inputs));
            let mut buffer = Vec::<u64>::with_capacity(bytes.div_ceil(8));
            (f.pack)(ROW_MAJOR, B_MATRIX, TRANS, 1, dim(outputs), dim(inputs), weight.as_ptr(), dim(inputs), buffer.as_mut_ptr().cast());
            PackedBf16 { buffer, outputs, inputs }
        }
    }

    /// `c (m × outputs, row stride ldc) = a (m × inputs, row stride lda) · Wᵀ [+ c]` against a
    /// weight packed by [`Self::pack_bf16`].
    ///
    /// # Safety
    /// As [`Self::gemm_bf16`], with `n` and `k` those of `packed`.
    pub(crate) unsafe fn gemm_bf16_packed(
        &self,
        m: usize,
        (a, lda): (*const u16, usize),
        packed: &PackedBf16,
        (c, ldc): (*mut f32, usize),
        accumulate: bool,
    ) {
        let f = self.gemm_bf16.as_ref().expect("packed products exist only where has_bf16");
        let (n, k) = (packed.outputs, packed.inputs);
        // SAFETY: forwarded from the caller's contract; `packed` was packed for n and k.
        unsafe {
            (f.compute)(
                ROW_MAJOR,
                NO_TRANS,
                PACKED,
                dim(m),
                dim(n),
                dim(k),
                1.0,
                a,
                dim(lda),
                packed.buffer.as_ptr().cast(),
                dim(k),
                beta(accumulate),
                c,
                dim(ldc),
            )
        }
    }
}

/// A matrix dimension or stride as MKL's 32-bit `MKL_INT`.
fn dim(v: usize) -> i32 {
    i32::try_from(v).expect("an encoder matrix dimension fits in 32 bits")
}

/// `beta` of `c = a·b + beta·c`: 1 to add to `c`, 0 to overwrite it.
fn beta(accumulate: bool) -> f32 {
    if accumulate {
        1.0
    } else {
        0.0
    }
}

/// Whether this CPU is one MKL's fast kernels are for (an Intel CPU).
fn intel_cpu() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        let id = std::arch::x86_64::__cpuid(0);
        let vendor: Vec<u8> = [id.ebx, id.edx, id.ecx].iter().flat_map(|r| r.to_le_bytes()).collect();
        vendor == b"GenuineIntel"
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// Whether this CPU has AMX's bf16 tiles and the OS keeps their state (XCR0 bits 17 and 18): where
/// MKL's bf16 products run at several times its f32 rate (Sapphire Rapids and later Xeons).
pub fn amx_bf16() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__cpuid, __cpuid_count};
        let osxsave = __cpuid(1).ecx & (1 << 27) != 0;
        let amx = __cpuid(0).eax >= 7 && __cpuid_count(7, 0).edx & (1 << 22) != 0;
        const TILE_STATE: u64 = 0b11 << 17;
        // SAFETY: XGETBV exists where the OS has set OSXSAVE (checked first).
        osxsave && amx && unsafe { xcr0() } & TILE_STATE == TILE_STATE
    }
    #[cfg(not(target_arch = "x86_64"))]
    false
}

/// XCR0: the register state the operating system saves (AMX's tiles among them).
///
/// # Safety
/// The CPU must have XSAVE and the system must have enabled it (CPUID's OSXSAVE bit).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "xsave")]
unsafe fn xcr0() -> u64 {
    std::arch::x86_64::_xgetbv(0)
}

/// Whether this process would use MKL if it were installed: an Intel CPU, and MKL not switched
/// off ([`crate::switches::MklChoice::Off`]).
pub fn wanted() -> bool {
    crate::switches::get().mkl != MklChoice::Off && intel_cpu()
}

/// Where MKL is looked for: the library or folder named ([`MklChoice::At`]; none when
/// [`MklChoice::Off`]), else the `mkl` folder beside the model's folder (where `warpfold models
/// fetch` puts it).
fn location(model_dir: Option<&Path>) -> Option<PathBuf> {
    match &crate::switches::get().mkl {
        MklChoice::Off => None,
        MklChoice::At(p) => Some(if p.is_dir() { p.join(LIBRARY) } else { p.clone() }),
        MklChoice::BesideModel => model_dir.and_then(Path::parent).map(|models| models.join("mkl").join(LIBRARY)),
    }
}

/// MKL for the encoder of the model in `model_dir`, when it is installed and this is an Intel CPU
/// (`WARPFOLD_MKL` set to a path uses it on any CPU). Opened once per process; a library that is
/// there but does not open is reported once in the log and the `gemm` crate runs instead.
pub fn for_model(model_dir: Option<&Path>) -> Option<&'static Mkl> {
    static MKL: OnceLock<Option<Mkl>> = OnceLock::new();
    MKL.get_or_init(|| {
        let forced = crate::switches::get().mkl != MklChoice::BesideModel;
        let path = location(model_dir)?;
        if !path.is_file() || !(forced || intel_cpu()) {
            if forced {
                tracing::warn!(path = %path.display(), "WARPFOLD_MKL names no file; the gemm crate's kernels run");
            }
            return None;
        }
        match Mkl::open(&path) {
            Ok(mkl) => Some(mkl),
            Err(e) => {
                tracing::warn!("MKL did not open ({e}); the gemm crate's kernels run");
                None
            }
        }
    })
    .as_ref()
}
