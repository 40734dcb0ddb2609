//! A device that fails every bin after its first N, as a broken GPU would: the engine's tests and
//! the multi-device benchmark see its bins move to the other devices.

use warpfold_backend::{Backend, BackendError, BackendInfo, Bin};

/// Runs the first `after_bins` bins on `inner`, then fails every bin as a broken device would.
pub struct FailAfter<B> {
    pub inner: B,
    pub after_bins: u64,
    ran: u64,
}

impl<B> FailAfter<B> {
    pub fn new(inner: B, after_bins: u64) -> Self {
        FailAfter { inner, after_bins, ran: 0 }
    }
}

impl<B: Backend> Backend for FailAfter<B> {
    fn info(&self) -> BackendInfo {
        self.inner.info()
    }
    fn embed(&mut self, bin: &Bin) -> Result<Vec<Vec<f32>>, BackendError> {
        if self.ran >= self.after_bins {
            return Err(BackendError::Inference(format!("injected device failure after {} bins", self.after_bins)));
        }
        self.ran += 1;
        self.inner.embed(bin)
    }
    fn activation_bytes_per_token(&self) -> u64 {
        self.inner.activation_bytes_per_token()
    }
    fn max_bin_tokens(&self) -> usize {
        self.inner.max_bin_tokens()
    }
}
