//! Which attention a call takes: FlashAttention-2's varlen kernel, or the masked path.
//!
//! FA-2 compiles one kernel per head-dimension bucket, element type and causality (36 of them, plus
//! 16 for paged K/V): about 3 h of nvcc on a 2-core machine and most of an hour on a desktop. A
//! build for a user's card compiles only the kernels warpfold's models need
//! (`scripts/gpu/nvcc-fa-kernels`, listed in `WARPFOLD_FA_KERNELS` at build time); the others are
//! stubs that abort. So every call first asks [`flash_kernel_built`], and a model whose head size
//! has no compiled kernel takes the masked path instead of reaching a stub. Builds that compile
//! every kernel (the default, and the prebuilt set for Hopper) answer yes to every supported shape.

use candle_core::{DType, Device};

/// The kernels compiled into this build, as `WARPFOLD_FA_KERNELS` named them when it was built:
/// `all`, or names such as `hdim64_bf16_causal` (see [`kernel_name`]).
pub const BUILT_KERNELS: &str = match option_env!("WARPFOLD_FA_KERNELS_BUILT") {
    Some(list) => list,
    None => "all",
};

/// The kernels warpfold's default models call, and what a build for a user's card compiles unless
/// told otherwise: all-MiniLM-L6-v2 (head dim 32, f16), SmolLM2-135M (64, bf16: prefill causal,
/// decode through the paged cache) and the Qwen2.5 decoders (128, bf16, likewise).
pub const DEFAULT_KERNELS: &str =
    "hdim32_fp16,hdim64_bf16,hdim64_bf16_causal,hdim128_bf16,hdim128_bf16_causal,splitkv_hdim64_bf16,splitkv_hdim128_bf16";

/// FA-2's name for the kernel a call of this shape runs: head dims go up to the next bucket of 32
/// (up to 256), e.g. (64, BF16, causal) -> `hdim64_bf16_causal`. None: no FA-2 kernel takes it.
pub fn kernel_name(head_dim: usize, dtype: DType, causal: bool) -> Option<String> {
    if head_dim == 0 || !head_dim.is_multiple_of(8) || head_dim > 256 {
        return None;
    }
    let element = match dtype {
        DType::F16 => "fp16",
        DType::BF16 => "bf16",
        _ => return None,
    };
    let bucket = head_dim.div_ceil(32) * 32;
    Some(format!("hdim{bucket}_{element}{}", if causal { "_causal" } else { "" }))
}

/// FA-2's name for the paged-cache (split-KV) kernel a decode step of this head size runs, e.g.
/// (128, BF16) -> `splitkv_hdim128_bf16`. Only the head sizes with a kernel of their own (64, 128,
/// 256); None for the others, which read the cache gathered instead.
pub fn paged_kernel_name(head_dim: usize, dtype: DType) -> Option<String> {
    let element = match dtype {
        DType::F16 => "fp16",
        DType::BF16 => "bf16",
        _ => return None,
    };
    matches!(head_dim, 64 | 128 | 256).then(|| format!("splitkv_hdim{head_dim}_{element}"))
}

/// Whether a decode step on `device` reads its paged cache through FA-2's split-KV kernel.
pub fn uses_paged_flash(device: &Device, head_dim: usize, dtype: DType) -> bool {
    device.is_cuda() && cfg!(feature = "flash-attn") && paged_kernel_name(head_dim, dtype).is_some_and(|name| listed(BUILT_KERNELS, &name))
}

/// Whether this build holds the real kernel for that shape (not a stub, not missing).
pub fn flash_kernel_built(head_dim: usize, dtype: DType, causal: bool) -> bool {
    cfg!(feature = "flash-attn") && kernel_name(head_dim, dtype, causal).is_some_and(|name| listed(BUILT_KERNELS, &name))
}

fn listed(list: &str, name: &str) -> bool {
    list.trim() == "all" || list.split(',').any(|k| k.trim() == name)
}

/// Whether a call of this shape on `device` runs through FlashAttention-2.
pub fn uses_flash(device: &Device, head_dim: usize, dtype: DType, causal: bool) -> bool {
    device.is_cuda() && flash_kernel_built(head_dim, dtype, causal)
}

/// One line for the device view: which attention a model with these heads runs, and why not FA-2
/// when it does not.
pub fn describe(device: &Device, head_dim: usize, dtype: DType, causal: bool) -> String {
    if !device.is_cuda() {
        return "masked attention per slot (CPU)".into();
    }
    if !cfg!(feature = "flash-attn") {
        return "masked attention per slot: this CUDA build has no FlashAttention-2 (it needs compute capability 8.0 or newer)".into();
    }
    match kernel_name(head_dim, dtype, causal) {
        Some(name) if listed(BUILT_KERNELS, &name) => format!("FlashAttention-2 varlen ({name})"),
        Some(name) => format!("masked attention per slot: FlashAttention-2's {name} kernel is not compiled into this build"),
        None => format!("masked attention per slot: FlashAttention-2 has no kernel for head size {head_dim} in {dtype:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_names_follow_fa2s_head_dim_buckets() {
        assert_eq!(kernel_name(32, DType::F16, false).as_deref(), Some("hdim32_fp16"));
        assert_eq!(kernel_name(64, DType::BF16, true).as_deref(), Some("hdim64_bf16_causal"));
        assert_eq!(kernel_name(80, DType::BF16, false).as_deref(), Some("hdim96_bf16"), "80 runs in the 96 bucket");
        assert_eq!(kernel_name(128, DType::BF16, true).as_deref(), Some("hdim128_bf16_causal"));
        assert_eq!(kernel_name(256, DType::F16, false).as_deref(), Some("hdim256_fp16"));
        assert_eq!(kernel_name(12, DType::F16, false), None, "not a multiple of 8");
        assert_eq!(kernel_name(264, DType::F16, false), None, "above 256");
        assert_eq!(kernel_name(64, DType::F32, false), None, "FA-2 takes half precision only");
    }

    #[test]
    fn the_default_list_covers_the_default_models_and_a_partial_build_answers_for_its_list_only() {
        // MiniLM (384 / 12 heads, f16), SmolLM2-135M (576 / 9, bf16), Qwen2.5-1.5B (1536 / 12, bf16).
        for (hd, dtype, causal) in [(32, DType::F16, false), (64, DType::BF16, true), (64, DType::BF16, false), (128, DType::BF16, true)] {
            assert!(listed(DEFAULT_KERNELS, &kernel_name(hd, dtype, causal).unwrap()), "{hd} {dtype:?} {causal}");
        }
        assert!(!listed(DEFAULT_KERNELS, "hdim64_fp16"), "BERT-large in f16 is not a default model");
        // Decoding reads the paged cache of both default chat models.
        for hd in [64, 128] {
            assert!(listed(DEFAULT_KERNELS, &paged_kernel_name(hd, DType::BF16).unwrap()), "{hd}");
        }
        assert_eq!(paged_kernel_name(96, DType::BF16), None, "no split-KV kernel of its own");
        assert!(!uses_paged_flash(&Device::Cpu, 128, DType::BF16));
        assert!(listed("all", "hdim224_bf16_causal"));
        assert!(!listed("hdim64_bf16_causal", "hdim64_bf16"), "causality is part of the name");
    }

    #[test]
    fn the_device_view_says_why_attention_is_masked() {
        assert_eq!(describe(&Device::Cpu, 32, DType::F32, false), "masked attention per slot (CPU)");
    }
}
