//! Attention pooling (PyG's `AttentionalAggregation` / `GlobalAttention`).

use rand::Rng;

use super::{Readout, check_batch, check_width};
use crate::autograd::{Segments, Tape, Var};
use crate::backend::{Backend, SegmentReduce};
use crate::error::{Error, Result};
use crate::nn::{Activation, Features, Linear, Mlp, Module, ParamVisitor};

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
        let gate_first = first_layer(&gate_nn, "gate_nn")?;
        let gate_last = gate_nn.lins.last().unwrap_or(gate_first);
        if gate_last.out_features() != 1 {
            return Err(Error::InvalidConfig(format!(
                "AttentionPooling: gate_nn must output 1 column, got {}",
                gate_last.out_features()
            )));
        }
        if let Some(nn) = &nn {
            let (a, b) = (
                gate_first.in_features(),
                first_layer(nn, "nn")?.in_features(),
            );
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
        let width = first_layer(&self.gate_nn, "gate_nn")?.in_features();
        check_width("AttentionPooling", h, width)?;
        self.gate_nn
            .forward(tape, &Features::Dense(h.clone()))?
            .segment_softmax(seg)
    }
}

/// The first layer of `mlp`; an MLP without layers (emptied after
/// construction, say) is [`Error::InvalidConfig`] naming `which`.
fn first_layer<'a, B: Backend>(mlp: &'a Mlp<B>, which: &str) -> Result<&'a Linear<B>> {
    mlp.lins
        .first()
        .ok_or_else(|| Error::InvalidConfig(format!("AttentionPooling: {which} has no layers")))
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
