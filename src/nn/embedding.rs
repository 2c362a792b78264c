//! Lookup-table embeddings.

use ndarray::Array2;
use rand::Rng;

use super::{Module, ParamVisitor, init};
use crate::autograd::{Index, Param, Tape, Var};
use crate::backend::Backend;
use crate::error::{Error, Result, check_positive};

/// `torch.nn.Embedding`: row `i` of `weight` (`num x dim`, initialised
/// N(0, 1) by [`Embedding::new`]) is the vector of token `i`.
#[derive(Debug, Clone)]
pub struct Embedding<B: Backend> {
    /// The table, `num x dim`.
    pub weight: Param<B>,
}

impl<B: Backend> Embedding<B> {
    /// A table initialised N(0, 1), as `torch.nn.Embedding`.
    pub fn new<R: Rng + ?Sized>(backend: &B, num: usize, dim: usize, rng: &mut R) -> Result<Self> {
        Self::with_std(backend, num, dim, 1.0, rng)
    }

    /// A table initialised N(0, `std`²).
    ///
    /// A small `std` (fastText draws uniformly from ±`1/dim`) keeps the vectors of
    /// rare words, which few steps ever update, from dominating those the
    /// model has learned.
    ///
    /// ```
    /// use hdgcn::backend::Cpu;
    /// use hdgcn::nn::Embedding;
    /// use rand::SeedableRng;
    /// let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    /// let emb = Embedding::with_std(&Cpu::<f64>::new(), 1000, 16, 0.1, &mut rng)?;
    /// let w = emb.weight.to_array();
    /// let rms = (w.iter().map(|v| v * v).sum::<f64>() / w.len() as f64).sqrt();
    /// assert!((rms - 0.1).abs() < 0.005);
    /// assert!(Embedding::with_std(&Cpu::<f64>::new(), 10, 4, -1.0, &mut rng).is_err());
    /// # Ok::<(), hdgcn::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a zero size, a `std` that is not
    /// finite and > 0, or a table whose size overflows;
    /// [`Error::OverBudget`] for a table over the memory budget
    /// ([`crate::limits`]).
    pub fn with_std<R: Rng + ?Sized>(
        backend: &B,
        num: usize,
        dim: usize,
        std: f64,
        rng: &mut R,
    ) -> Result<Self> {
        if num == 0 || dim == 0 {
            return Err(Error::InvalidConfig(format!(
                "embedding size must be positive, got {num} x {dim}"
            )));
        }
        // A zero table would give every token the same vector.
        check_positive("embedding init std", std)?;
        Ok(Embedding {
            weight: init::normal_named("embedding table", backend, num, dim, std, rng)?,
        })
    }

    /// A table initialised from given vectors (e.g. GloVe).
    pub fn from_array(backend: &B, table: &Array2<B::Elem>) -> Result<Self> {
        if table.is_empty() {
            return Err(Error::Empty("embedding table".into()));
        }
        if let Some(v) = table.iter().find(|v| !num_traits::Float::is_finite(**v)) {
            return Err(Error::NonFinite {
                what: "embedding table".into(),
                value: v.to_f64_exact(),
            });
        }
        Ok(Embedding {
            weight: Param::from_array(backend, table),
        })
    }

    /// Vectors of the tokens in `idx` (`len x dim`).
    pub fn forward(&self, tape: &Tape<B>, idx: &Index<B>) -> Result<Var<B>> {
        tape.param(&self.weight).gather_rows(idx)
    }
}

use crate::float::Float as _;

impl<B: Backend> Module<B> for Embedding<B> {
    fn visit_params(&self, v: &mut ParamVisitor<'_, B>) {
        v.param("weight", &self.weight);
    }
}
