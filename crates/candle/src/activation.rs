//! The feed-forward activation of an encoder layer (`hidden_act` in a model's config).
//!
//! Why a module of its own: the candle layers ([`crate::bert`]), the fused CPU layers and the CUDA
//! encoder kernels ([`crate::encoder_kernels`], whose `bias_act` takes this enum's value as its
//! `act` argument) all name it; here none of them imports another for it.

use candle_core::{Result, Tensor};

/// The feed-forward activation: one value for the candle ops, the fused CPU layers and
/// encoder.cu's `bias_act`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Activation {
    /// "gelu": the exact, erf-based GELU.
    GeluErf = 0,
    /// "gelu_new" and the rest: the tanh approximation.
    GeluTanh = 1,
    Relu = 2,
}

impl Activation {
    /// The activation a config's `hidden_act` names ("gelu", "relu"; anything else is GELU's tanh
    /// approximation, as "gelu_new" and "gelu_pytorch_tanh" are).
    pub fn from_hidden_act(name: &str) -> Activation {
        match name {
            "gelu" => Activation::GeluErf,
            "relu" => Activation::Relu,
            _ => Activation::GeluTanh,
        }
    }

    /// The activation applied to every element of `x` with candle's ops.
    pub fn apply(self, x: &Tensor) -> Result<Tensor> {
        match self {
            Activation::GeluErf => x.gelu_erf(),
            Activation::GeluTanh => x.gelu(),
            Activation::Relu => x.relu(),
        }
    }
}
