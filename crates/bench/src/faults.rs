//! Fault injection for the multi-device benchmark and tests: a device that fails every bin after
//! its first N, as a broken GPU would, so that its bins can be seen moving to the others.
//!
//! Why here and not in the engine: it is a test switch, and production code should not carry it.
//! The command line turns `WARPFOLD_FAIL_DEVICE=I:after_bins=N` into [`FailDevice`] (see
//! [`FailDevice::from_var`]), and the runtime wraps the I-th device's backend with [`FailAfter`]
//! through its generic backend hook.

use warpfold_backend::Backend;
pub use warpfold_testkit::faults::FailAfter;

/// `WARPFOLD_FAIL_DEVICE=I:after_bins=N`: the I-th device of the list fails every bin after its
/// first N.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailDevice {
    pub device: usize,
    pub after_bins: u64,
}

impl FailDevice {
    /// Parses `DEVICE:after_bins=N`.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let bad = || format!("expected DEVICE:after_bins=N (e.g. 1:after_bins=20), got {spec:?}");
        let (device, rest) = spec.split_once(':').ok_or_else(bad)?;
        let bins = rest.strip_prefix("after_bins=").ok_or_else(bad)?;
        Ok(FailDevice { device: device.trim().parse().map_err(|_| bad())?, after_bins: bins.trim().parse().map_err(|_| bad())? })
    }

    /// What `WARPFOLD_FAIL_DEVICE` asks for, given its value as the front read it.
    pub fn from_var(value: Option<&str>) -> Result<Option<Self>, String> {
        value.map(|spec| FailDevice::parse(spec).map_err(|e| format!("WARPFOLD_FAIL_DEVICE: {e}"))).transpose()
    }

    /// Device `index`'s backend, made to fail when it is this device.
    pub fn wrap(self, index: usize, backend: Box<dyn Backend>) -> Box<dyn Backend> {
        if index == self.device {
            Box::new(FailAfter::new(backend, self.after_bins))
        } else {
            backend
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spec_names_a_device_and_a_bin_count() {
        assert_eq!(FailDevice::parse("1:after_bins=20"), Ok(FailDevice { device: 1, after_bins: 20 }));
        assert!(FailDevice::parse("1").is_err());
        assert!(FailDevice::parse("x:after_bins=2").is_err());
        assert!(FailDevice::parse("1:after=2").is_err());
    }
}
