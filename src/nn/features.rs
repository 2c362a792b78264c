//! Node features that are either dense (a [`Var`]) or sparse constants.

use crate::autograd::{SparseMatrix, Tape, Var};
use crate::backend::Backend;
use crate::error::{Error, Result};

/// Input node features: dense, or a constant sparse matrix (bag-of-words /
/// TF-IDF inputs are ~1% dense and are never densified).
///
/// Layers consume features through [`Features::matmul`] (`X · W`), which
/// keeps sparse inputs sparse.
#[derive(Clone, Debug)]
pub enum Features<B: Backend> {
    /// Dense features (hidden states, embeddings).
    Dense(Var<B>),
    /// Sparse constant features.
    Sparse(SparseMatrix<B>),
}

impl<B: Backend> From<Var<B>> for Features<B> {
    fn from(v: Var<B>) -> Self {
        Features::Dense(v)
    }
}

impl<B: Backend> From<&Var<B>> for Features<B> {
    fn from(v: &Var<B>) -> Self {
        Features::Dense(v.clone())
    }
}

impl<B: Backend> From<SparseMatrix<B>> for Features<B> {
    fn from(s: SparseMatrix<B>) -> Self {
        Features::Sparse(s)
    }
}

impl<B: Backend> Features<B> {
    /// `(rows, cols)`.
    pub fn shape(&self) -> (usize, usize) {
        match self {
            Features::Dense(v) => v.shape(),
            Features::Sparse(s) => s.shape(),
        }
    }

    /// The same features usable on `tape`: dense features recorded on
    /// another tape (a task's inputs, built once) become a constant of
    /// `tape` with the same value; sparse features are tape-free already.
    ///
    /// ```
    /// use hdgcn::autograd::Tape;
    /// use hdgcn::backend::Cpu;
    /// use hdgcn::nn::Features;
    ///
    /// let cpu = Cpu::<f64>::new();
    /// let x = Features::Dense(Tape::new(&cpu).constant_array(&ndarray::arr2(&[[1.0, 2.0]])));
    /// let step = Tape::new(&cpu);
    /// let Features::Dense(v) = x.on_tape(&step) else { unreachable!() };
    /// assert!(v.is_on(&step));
    /// assert_eq!(v.to_array(), ndarray::arr2(&[[1.0, 2.0]]));
    /// ```
    pub fn on_tape(&self, tape: &Tape<B>) -> Features<B> {
        match self {
            Features::Dense(v) if !v.is_on(tape) => {
                // The value is shared, not copied: a task's features can be
                // most of a large graph's memory.
                Features::Dense(tape.constant_shared(v.value_rc().clone()))
            }
            other => other.clone(),
        }
    }

    /// `X · W` (sparse × dense for sparse inputs).
    pub fn matmul(&self, w: &Var<B>) -> Result<Var<B>> {
        match self {
            Features::Dense(v) => v.matmul(w),
            Features::Sparse(s) => {
                let (_, c) = s.shape();
                let (wr, wc) = w.shape();
                if c != wr {
                    return Err(Error::shape(
                        "features · weight",
                        format!("weight with {c} rows"),
                        format!("({wr}, {wc})"),
                    ));
                }
                s.matmul(w)
            }
        }
    }

    /// Dropout (on stored values for sparse inputs).
    pub fn dropout(&self, tape: &Tape<B>, p: f64) -> Result<Features<B>> {
        Ok(match self {
            Features::Dense(v) => Features::Dense(v.dropout(p)?),
            Features::Sparse(s) => Features::Sparse(s.dropout(tape, p)?),
        })
    }

    /// The dense value, or an error for sparse features.
    pub fn dense(&self) -> Result<&Var<B>> {
        match self {
            Features::Dense(v) => Ok(v),
            Features::Sparse(_) => Err(Error::InvalidConfig(
                "this layer needs dense input features".into(),
            )),
        }
    }
}
