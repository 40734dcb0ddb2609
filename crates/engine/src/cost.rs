//! What a bin costs a device, predicted before it runs: the unit in which the multi-device
//! dispatcher ([`crate::multi`]) measures each device's rate and places each bin.
//!
//! Why a module of its own: the engine's configuration ([`crate::config`]) carries it, and the
//! dispatcher reads it; here neither has to import the other.

use warpfold_backend::Bin;

/// Predicted cost of a bin, in token-equivalents: its computed tokens plus `attention_weight` times
/// the sum of its squared slot lengths. Per layer a token costs about 24·d² FLOPs in the matmuls and
/// a sequence of L tokens about 4·d·L² in attention, so the weight is about 1/(6·d) for hidden size d.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct CostModel {
    pub attention_weight: f64,
}

impl Default for CostModel {
    fn default() -> Self {
        // d = 768, a middle-sized model; the CLI sets it from the model's own hidden size.
        Self::for_hidden_size(768)
    }
}

impl CostModel {
    pub fn for_hidden_size(hidden: usize) -> Self {
        CostModel { attention_weight: 1.0 / (6.0 * hidden.max(1) as f64) }
    }

    pub fn cost(&self, bin: &Bin) -> f64 {
        let squares: f64 = bin.cu_seqlens.windows(2).map(|w| f64::from(w[1] - w[0]).powi(2)).sum();
        bin.computed_tokens() as f64 + self.attention_weight * squares
    }
}
