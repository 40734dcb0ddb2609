//! Where the model runs: one device or several, as a user writes it (`--device`,
//! `WARPFOLD_DEVICE`, the desktop's settings).
//!
//! `cpu`, `cuda` (= `cuda:0`) and `auto` pick one device; a list (`cuda:0,cuda:1`) or `cuda:all`
//! gives one engine over several, each with its own model copy and its own VRAM probe (see
//! `warpfold_engine::multi` for how bins are spread). `cpu` may appear in a list too, which only
//! makes sense for trying the multi-device path on a machine without GPUs.

use candle_core::Device;
use warpfold_candle::{cuda_device, cuda_device_count, select_device, DeviceChoice};

use crate::RuntimeError;

/// One entry of a device list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OneDevice {
    Cpu,
    Cuda(usize),
}

/// Where the model runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceSpec {
    Cpu,
    /// `cuda` or `cuda:0`.
    Cuda,
    /// CUDA when this build has it and a GPU answers, else the CPU.
    Auto,
    /// Every CUDA device of the machine.
    CudaAll,
    /// `cuda:1`, `cuda:0,cuda:1`, `cuda:0,1`, ...
    List(Vec<OneDevice>),
}

impl DeviceSpec {
    pub fn is_cuda(&self) -> bool {
        match self {
            DeviceSpec::Cuda | DeviceSpec::CudaAll => true,
            DeviceSpec::List(list) => list.iter().any(|d| matches!(d, OneDevice::Cuda(_))),
            DeviceSpec::Cpu | DeviceSpec::Auto => false,
        }
    }

    /// The candle devices named, in order.
    pub fn devices(&self) -> Result<Vec<Device>, RuntimeError> {
        let device_error = |e: warpfold_backend::BackendError| RuntimeError::Device(e.to_string());
        let one = |d: &OneDevice| match d {
            OneDevice::Cpu => Ok(Device::Cpu),
            OneDevice::Cuda(i) => cuda_device(*i).map_err(device_error),
        };
        Ok(match self {
            DeviceSpec::Cpu => vec![select_device(DeviceChoice::Cpu).map_err(device_error)?],
            DeviceSpec::Cuda => vec![select_device(DeviceChoice::Cuda).map_err(device_error)?],
            DeviceSpec::Auto => vec![select_device(DeviceChoice::Auto).map_err(device_error)?],
            DeviceSpec::CudaAll => {
                let n = cuda_device_count().map_err(device_error)?;
                if n == 0 {
                    return Err(RuntimeError::Device("cuda:all: no CUDA device found".into()));
                }
                (0..n).map(|i| cuda_device(i).map_err(device_error)).collect::<Result<_, _>>()?
            }
            DeviceSpec::List(list) => list.iter().map(one).collect::<Result<_, _>>()?,
        })
    }

    /// The first device named (where a one-device job, such as summarizing, runs).
    pub fn first(&self) -> Result<Device, RuntimeError> {
        Ok(self.devices()?.swap_remove(0))
    }
}

/// The text [`parse_device`] reads back: `cpu`, `cuda`, `auto`, `cuda:all`, `cuda:0,cuda:1`.
impl std::fmt::Display for DeviceSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeviceSpec::Cpu => f.write_str("cpu"),
            DeviceSpec::Cuda => f.write_str("cuda"),
            DeviceSpec::Auto => f.write_str("auto"),
            DeviceSpec::CudaAll => f.write_str("cuda:all"),
            DeviceSpec::List(list) => {
                let names: Vec<String> = list
                    .iter()
                    .map(|d| match d {
                        OneDevice::Cpu => "cpu".to_string(),
                        OneDevice::Cuda(i) => format!("cuda:{i}"),
                    })
                    .collect();
                f.write_str(&names.join(","))
            }
        }
    }
}

impl std::str::FromStr for DeviceSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        parse_device(text)
    }
}

pub fn parse_device(text: &str) -> Result<DeviceSpec, String> {
    let text = text.trim().to_ascii_lowercase();
    match text.as_str() {
        "cpu" => return Ok(DeviceSpec::Cpu),
        "cuda" | "cuda:0" => return Ok(DeviceSpec::Cuda),
        "auto" => return Ok(DeviceSpec::Auto),
        "cuda:all" => return Ok(DeviceSpec::CudaAll),
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
    Ok(DeviceSpec::List(list))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_names_read_back_as_written() {
        for text in ["cpu", "cuda", "auto", "cuda:all", "cuda:0,cuda:1", "cuda:1", "cpu,cuda:2"] {
            let spec = parse_device(text).unwrap();
            assert_eq!(parse_device(&spec.to_string()), Ok(spec), "{text}");
        }
        assert_eq!(parse_device("cuda:0,1").unwrap().to_string(), "cuda:0,cuda:1");
    }

    #[test]
    fn device_lists_parse() {
        assert_eq!(parse_device("cpu"), Ok(DeviceSpec::Cpu));
        assert_eq!(parse_device("cuda:0"), Ok(DeviceSpec::Cuda));
        assert_eq!(parse_device("cuda:all"), Ok(DeviceSpec::CudaAll));
        assert_eq!(parse_device("cuda:0,cuda:1"), Ok(DeviceSpec::List(vec![OneDevice::Cuda(0), OneDevice::Cuda(1)])));
        assert_eq!(parse_device("cuda:2"), Ok(DeviceSpec::List(vec![OneDevice::Cuda(2)])));
        assert_eq!(parse_device("cuda:0,1"), Ok(DeviceSpec::List(vec![OneDevice::Cuda(0), OneDevice::Cuda(1)])));
        assert_eq!(parse_device("cpu,cpu"), Ok(DeviceSpec::List(vec![OneDevice::Cpu, OneDevice::Cpu])));
        assert!(parse_device("gpu").is_err());
        assert!(parse_device("cuda:x").is_err());
    }
}
