//! Attention pooling (PyG's `AttentionalAggregation` / `GlobalAttention`).

use rand::Rng;

use super::{Readout, check_batch, check_width};
use crate::autograd::{Segments, Tape, Var};
use crate::backend::{Backend, SegmentReduce};
use crate::error::{Error, Result};
use crate::nn::{Activation, Features, Mlp, Module, ParamVisitor};

/// Soft-attention pooling (Li et al., 2016; PyG `AttentionalAggregation`):
///
/// `a = softmax_g(gate_nn(h))` (`N x 1`, normalised over each graph's nodes),
/// `h_g = Σ_v a_v · nn(h_v)` (`nn` the identity when absent).
///
/// Parameters: `gate_nn.lins.{i}.weight`/`bias` and `nn.lins.{i}.weight`/`bias`.
///
/// ```
/// use hdgcn::autograd::{Segments, Tape};
/// use hdgcn::backend::Cpu;
/// use hdgcn::readout::{AttentionPooling, Readout};
/// use rand::SeedableRng;
///
/// let cpu = Cpu::<f64>::new();
/// let mut rng = rand::rngs::StdRng::seed_from_u64(0);
/// let pool = AttentionPooling::linear(&cpu, 3, Some(8), &mut rng)?; // gate 3 -> 1, nn 3 -> 8
/// let tape = Tape::inference(&cpu);
/// let h = tape.constant_array(&ndarray::Array2::ones((4, 3)));
/// let out = pool.forward(&tape, &h, &Segments::new(&cpu, &[0, 1, 4])?)?;
/// assert_eq!(out.shape(), (2, pool.out_channels(3)));
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct AttentionPooling<B: Backend> {
    /// Scores each node (`F -> 1`).
    pub gate_nn: Mlp<B>,
    /// Transforms each node before the weighted sum (`None`: identity).
    pub nn: Option<Mlp<B>>,
}

impl<B: Backend> AttentionPooling<B> {
    /// Pooling from given networks.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] if `gate_nn` does not output one column or
    /// the two networks take different input widths.
    pub fn new(gate_nn: Mlp<B>, nn: Option<Mlp<B>>) -> Result<Self> {
        let (Some(gate_first), Some(gate_last)) = (gate_nn.lins.first(), gate_nn.lins.last())
        else {
            return Err(Error::InvalidConfig(
                "AttentionPooling: gate_nn has no layers".into(),
            ));
        };
        if gate_last.out_features() != 1 {
            return Err(Error::InvalidConfig(format!(
                "AttentionPooling: gate_nn must output 1 column, got {}",
                gate_last.out_features()
            )));
        }
        if let Some(nn) = &nn {
            let Some(nn_first) = nn.lins.first() else {
                return Err(Error::InvalidConfig(
                    "AttentionPooling: nn has no layers".into(),
                ));
            };
            let (a, b) = (gate_first.in_features(), nn_first.in_features());
            if a != b {
                return Err(Error::InvalidConfig(format!(
                    "AttentionPooling: gate_nn takes {a} channels but nn takes {b}"
                )));
            }
        }
        Ok(AttentionPooling { gate_nn, nn })
    }

    /// A linear gate `in -> 1` and, with `out = Some(d)`, a linear `nn: in -> d`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a zero width.
    pub fn linear<R: Rng + ?Sized>(
        backend: &B,
        in_channels: usize,
        out: Option<usize>,
        rng: &mut R,
    ) -> Result<Self> {
        let gate = Mlp::new(backend, &[in_channels, 1], Activation::Identity, 0.0, rng)?;
        let nn = out
            .map(|d| Mlp::new(backend, &[in_channels, d], Activation::Identity, 0.0, rng))
            .transpose()?;
        Self::new(gate, nn)
    }

    /// Input width (0 if `gate_nn`'s layers were removed after construction).
    pub fn in_channels(&self) -> usize {
        self.gate_nn.lins.first().map_or(0, |l| l.in_features())
    }

    /// Per-node attention weights `N x 1` (each graph's weights sum to 1).
    ///
    /// # Errors
    /// As [`Readout::forward`].
    pub fn attention(&self, tape: &Tape<B>, h: &Var<B>, seg: &Segments<B>) -> Result<Var<B>> {
        check_batch("AttentionPooling", h, seg)?;
        if self.gate_nn.lins.is_empty() {
            return Err(Error::InvalidConfig(
                "AttentionPooling: gate_nn has no layers".into(),
            ));
        }
        check_width("AttentionPooling", h, self.in_channels())?;
        self.gate_nn
            .forward(tape, &Features::Dense(h.clone()))?
            .segment_softmax(seg)
    }
}

impl<B: Backend> Module<B> for AttentionPooling<B> {
    fn visit_params(&self, v: &mut ParamVisitor<'_, B>) {
        v.child("gate_nn", &self.gate_nn);
        if let Some(nn) = &self.nn {
            v.child("nn", nn);
        }
    }

    fn set_training(&mut self, training: bool) {
        self.gate_nn.set_training(training);
        if let Some(nn) = &mut self.nn {
            nn.set_training(training);
        }
    }
}

impl<B: Backend> Readout<B> for AttentionPooling<B> {
    fn forward(&self, tape: &Tape<B>, h: &Var<B>, seg: &Segments<B>) -> Result<Var<B>> {
        let a = self.attention(tape, h, seg)?;
        let x = match &self.nn {
            Some(nn) => nn.forward(tape, &Features::Dense(h.clone()))?,
            None => h.clone(),
        };
        x.mul(&a)?.segment_reduce(seg, SegmentReduce::Sum)
    }

    fn out_channels(&self, in_channels: usize) -> usize {
        match &self.nn {
            Some(nn) => nn.lins.last().map_or(in_channels, |l| l.out_features()),
            None => in_channels,
        }
    }
}
