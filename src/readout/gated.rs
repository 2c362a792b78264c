//! HDGCN's (and TextING's) gated readout.

use rand::Rng;

use super::basic::mean_plus_max;
use super::{Readout, check_batch, check_width};
use crate::autograd::{Segments, Tape, Var};
use crate::backend::Backend;
use crate::error::Result;
use crate::nn::{Features, Linear, Module, ParamVisitor};

/// The readout of HDGCN (Jiang et al., 2021) and TextING (Zhang et al., 2020):
///
/// `h'_v = sigmoid(f1(h_v)) ⊙ tanh(f2(h_v))` with `f1, f2` linear `F -> F`
/// (soft attention deciding how much each node contributes, and a
/// non-linear feature transform), then `h_g = mean_v h'_v + max_v h'_v`.
///
/// Parameters: `f1.weight`, `f1.bias`, `f2.weight`, `f2.bias`.
///
/// ```
/// use hdgcn::autograd::{Segments, Tape};
/// use hdgcn::backend::Cpu;
/// use hdgcn::nn::Module;
/// use hdgcn::readout::{GatedReadout, Readout};
/// use rand::SeedableRng;
///
/// let cpu = Cpu::<f32>::new();
/// let mut rng = rand::rngs::StdRng::seed_from_u64(0);
/// let readout = GatedReadout::new(&cpu, 4, &mut rng)?;
/// assert_eq!(readout.named_params()[0].0, "f1.weight");
/// let tape = Tape::inference(&cpu);
/// let h = tape.constant_array(&ndarray::Array2::ones((5, 4)));
/// let seg = Segments::new(&cpu, &[0, 2, 5])?;           // graphs of 2 and 3 nodes
/// assert_eq!(readout.forward(&tape, &h, &seg)?.shape(), (2, 4));
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct GatedReadout<B: Backend> {
    /// The gate's linear map (`F -> F`, through a sigmoid).
    pub f1: Linear<B>,
    /// The feature transform (`F -> F`, through a tanh).
    pub f2: Linear<B>,
}

impl<B: Backend> GatedReadout<B> {
    /// Two `torch.nn.Linear`-initialised layers of width `channels`.
    ///
    /// # Errors
    /// [`crate::Error::InvalidConfig`] if `channels == 0`.
    pub fn new<R: Rng + ?Sized>(backend: &B, channels: usize, rng: &mut R) -> Result<Self> {
        Ok(GatedReadout {
            f1: Linear::new(backend, channels, channels, true, rng)?,
            f2: Linear::new(backend, channels, channels, true, rng)?,
        })
    }

    /// Input (and output) width.
    pub fn channels(&self) -> usize {
        self.f1.in_features()
    }
}

impl<B: Backend> Module<B> for GatedReadout<B> {
    fn visit_params(&self, v: &mut ParamVisitor<'_, B>) {
        v.child("f1", &self.f1);
        v.child("f2", &self.f2);
    }
}

impl<B: Backend> Readout<B> for GatedReadout<B> {
    fn forward(&self, tape: &Tape<B>, h: &Var<B>, seg: &Segments<B>) -> Result<Var<B>> {
        check_batch("GatedReadout", h, seg)?;
        check_width("GatedReadout", h, self.channels())?;
        let x = Features::Dense(h.clone());
        let gate = self.f1.forward_on(tape, &x)?.sigmoid();
        let value = self.f2.forward_on(tape, &x)?.tanh();
        mean_plus_max(&gate.mul(&value)?, seg)
    }

    fn out_channels(&self, _in_channels: usize) -> usize {
        self.f2.out_features()
    }
}
