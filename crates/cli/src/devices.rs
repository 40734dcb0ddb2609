//! `--device`: one device or several, and an engine over them.
//!
//! `cpu`, `cuda` (= `cuda:0`) and `auto` pick one device as before; a list (`cuda:0,cuda:1`) or
//! `cuda:all` gives one engine over several, each with its own model copy and its own VRAM probe
//! (see warpfold_engine::multi for how bins are spread). `cpu` may appear in a list too, which only
//! makes sense for trying the multi-device path on a machine without GPUs.
//!
//! `WARPFOLD_FAIL_DEVICE=I:after_bins=N` (test only, used by bench/gpu/run-multi.sh) makes the I-th
//! device of the list fail every bin after its first N, to check that its bins move to the others.

use std::path::Path;

use anyhow::{Context, Result};
use candle_core::Device;
use warpfold_backend::Backend;
use warpfold_candle::{cuda_device, cuda_device_count, select_device, DecoderBackend, DeviceChoice};
use warpfold_engine::multi::{parse_fail_spec, FailAfter};
use warpfold_engine::{Batching, CostModel, Engine, SchedulerConfig};

use crate::{setup, GlobalOptions};

/// One entry of a device list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OneDevice {
    Cpu,
    Cuda(usize),
}

/// Where the model runs, as `--device` says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceArg {
    Cpu,
    /// `cuda` or `cuda:0`.
    Cuda,
    Auto,
    /// Every CUDA device of the machine.
    CudaAll,
    /// `cuda:1`, `cuda:0,cuda:1`, `cuda:0,1`, ...
    List(Vec<OneDevice>),
}

impl DeviceArg {
    pub fn is_cuda(&self) -> bool {
        match self {
            DeviceArg::Cuda | DeviceArg::CudaAll => true,
            DeviceArg::List(list) => list.iter().any(|d| matches!(d, OneDevice::Cuda(_))),
            DeviceArg::Cpu | DeviceArg::Auto => false,
        }
    }
}

pub fn parse_device(text: &str) -> Result<DeviceArg, String> {
    let text = text.trim().to_ascii_lowercase();
    match text.as_str() {
        "cpu" => return Ok(DeviceArg::Cpu),
        "cuda" | "cuda:0" => return Ok(DeviceArg::Cuda),
        "auto" => return Ok(DeviceArg::Auto),
        "cuda:all" => return Ok(DeviceArg::CudaAll),
        _ => {}
    }
    let bad = || format!("expected cpu, cuda, auto, cuda:N, a list like cuda:0,cuda:1, or cuda:all; got {text:?}");
    let list = text
        .split(',')
        .map(|part| match part.trim() {
            "cpu" => Ok(OneDevice::Cpu),
            "cuda" => Ok(OneDevice::Cuda(0)),
            p => p.strip_prefix("cuda:").unwrap_or(p).parse().map(OneDevice::Cuda).map_err(|_| bad()),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(DeviceArg::List(list))
}

/// The candle devices `--device` names, in order.
pub fn candle_devices(arg: &DeviceArg) -> Result<Vec<Device>> {
    let one = |d: &OneDevice| match d {
        OneDevice::Cpu => Ok(Device::Cpu),
        OneDevice::Cuda(i) => cuda_device(*i),
    };
    Ok(match arg {
        DeviceArg::Cpu => vec![select_device(DeviceChoice::Cpu)?],
        DeviceArg::Cuda => vec![select_device(DeviceChoice::Cuda)?],
        DeviceArg::Auto => vec![select_device(DeviceChoice::Auto)?],
        DeviceArg::CudaAll => {
            let n = cuda_device_count()?;
            anyhow::ensure!(n > 0, "--device cuda:all: no CUDA device found");
            (0..n).map(cuda_device).collect::<Result<_, _>>()?
        }
        DeviceArg::List(list) => list.iter().map(one).collect::<Result<_, _>>()?,
    })
}

/// The prediction of a bin's cost for the model whose config.json is `config`: the attention term
/// weighs 1/(6·hidden_size) (see warpfold_engine::multi::CostModel).
pub fn cost_model(config: &Path) -> CostModel {
    let hidden = std::fs::read(config)
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v.get("hidden_size").and_then(|h| h.as_u64()));
    hidden.map_or_else(CostModel::default, |h| CostModel::for_hidden_size(h as usize))
}

/// Loads the model on every device in `devices` (`load`), finds each one's bin capacity
/// (`--bin-tokens`, or its own VRAM probe on a GPU; none for padded batches), and starts one engine
/// over them.
pub fn start_engine<B: Backend + 'static>(
    global: &GlobalOptions,
    devices: &[Device],
    mut load: impl FnMut(&Device) -> Result<B>,
    config: SchedulerConfig,
) -> Result<Engine> {
    let fail = match std::env::var("WARPFOLD_FAIL_DEVICE") {
        Ok(spec) => Some(parse_fail_spec(&spec).map_err(|e| anyhow::anyhow!("WARPFOLD_FAIL_DEVICE: {e}"))?),
        Err(_) => None,
    };
    let mut loaded: Vec<(Box<dyn Backend>, u32)> = Vec::with_capacity(devices.len());
    for (i, device) in devices.iter().enumerate() {
        let mut backend = load(device)?;
        let capacity = match config.batching {
            Batching::Packed => setup::bin_capacity(global, &mut backend, device.clone())
                .with_context(|| format!("finding the bin capacity of {}", backend.info().device))?,
            Batching::Padded { .. } => config.bin_tokens,
        };
        loaded.push(match fail {
            Some((which, after_bins)) if which == i => {
                eprintln!("warpfold: WARPFOLD_FAIL_DEVICE: {} fails every bin after its first {after_bins} (test only)", backend.info().device);
                (Box::new(FailAfter::new(backend, after_bins)), capacity)
            }
            _ => (Box::new(backend), capacity),
        });
    }
    if loaded.len() > 1 {
        let caps: Vec<String> = loaded.iter().map(|(b, c)| format!("{} {c} tokens", b.info().device)).collect();
        eprintln!("warpfold: {} devices, bin capacities: {}", loaded.len(), caps.join(", "));
    }
    tracing::info!(?config, devices = loaded.len(), "starting engine");
    Ok(Engine::start_devices(loaded, config))
}

/// The decoder in `dir` on `on` (one device or several), its capacity per device found.
pub fn decoder_engine(global: &GlobalOptions, dir: &Path, on: &[Device], mut config: SchedulerConfig) -> Result<Engine> {
    config.cost = cost_model(&dir.join("config.json"));
    let load = |device: &Device| -> Result<DecoderBackend> {
        let loading = std::time::Instant::now();
        let backend = DecoderBackend::load(dir, device)?;
        tracing::info!(seconds = loading.elapsed().as_secs_f64(), "decoder loaded");
        Ok(backend)
    };
    start_engine(global, on, load, config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_lists_parse() {
        assert_eq!(parse_device("cpu"), Ok(DeviceArg::Cpu));
        assert_eq!(parse_device("cuda:0"), Ok(DeviceArg::Cuda));
        assert_eq!(parse_device("cuda:all"), Ok(DeviceArg::CudaAll));
        assert_eq!(parse_device("cuda:0,cuda:1"), Ok(DeviceArg::List(vec![OneDevice::Cuda(0), OneDevice::Cuda(1)])));
        assert_eq!(parse_device("cuda:2"), Ok(DeviceArg::List(vec![OneDevice::Cuda(2)])));
        assert_eq!(parse_device("cuda:0,1"), Ok(DeviceArg::List(vec![OneDevice::Cuda(0), OneDevice::Cuda(1)])));
        assert_eq!(parse_device("cpu,cpu"), Ok(DeviceArg::List(vec![OneDevice::Cpu, OneDevice::Cpu])));
        assert!(parse_device("gpu").is_err());
        assert!(parse_device("cuda:x").is_err());
    }
}
