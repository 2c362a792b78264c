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
    /// Dense features with an inverted dropout not applied yet: what
    /// [`Features::dropout`] returns for dense features. [`Features::matmul`]
    /// multiplies them with [`Var::dropout_matmul`], so the dropped-out copy
    /// of `x` (for the input layer of a large graph, the size of the
    /// features) is never made; [`Features::dense`] applies the dropout. The
    /// values are those of `x.dropout(p)` with the same mask.
    DenseDropout {
        /// The features the dropout applies to.
        x: Var<B>,
        /// The drop probability, `0 < p < 1`.
        p: f64,
        /// The mask's stream, drawn from the tape as [`Var::dropout`] draws it.
        seed: u64,
    },
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
            Features::Dense(v) | Features::DenseDropout { x: v, .. } => v.shape(),
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
            Features::DenseDropout { x, p, seed } if !x.is_on(tape) => Features::DenseDropout {
                x: tape.constant_shared(x.value_rc().clone()),
                p: *p,
                seed: *seed,
            },
            other => other.clone(),
        }
    }

    /// `X · W` (sparse × dense for sparse inputs).
    pub fn matmul(&self, w: &Var<B>) -> Result<Var<B>> {
        match self {
            Features::Dense(v) => v.matmul(w),
            Features::DenseDropout { x, p, seed } => {
                // The fields are public: a hand-built value is checked too.
                crate::autograd::check_dropout_p(*p)?;
                x.dropout_matmul_seeded(*p, *seed, w)
            }
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

    /// Dropout (on stored values for sparse inputs). Dense features come
    /// back as [`Features::DenseDropout`]: the mask is drawn now, applied
    /// when the features are used.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for `p` outside `[0, 1)`.
    pub fn dropout(&self, tape: &Tape<B>, p: f64) -> Result<Features<B>> {
        crate::autograd::check_dropout_p(p)?;
        Ok(match self {
            Features::Dense(v) if p == 0.0 => Features::Dense(v.clone()),
            Features::Dense(v) => Features::DenseDropout {
                x: v.clone(),
                p,
                seed: v.tape().next_seed(),
            },
            Features::DenseDropout { .. } => Features::Dense(self.dense()?).dropout(tape, p)?,
            Features::Sparse(s) => Features::Sparse(s.dropout(tape, p)?),
        })
    }

    /// The dense value (a [`Features::DenseDropout`] with its dropout
    /// applied), or an error for sparse features.
    pub fn dense(&self) -> Result<Var<B>> {
        match self {
            Features::Dense(v) => Ok(v.clone()),
            Features::DenseDropout { x, p, seed } => {
                crate::autograd::check_dropout_p(*p)?;
                Ok(x.dropout_seeded(*p, *seed))
            }
            Features::Sparse(_) => Err(Error::InvalidConfig(
                "this layer needs dense input features".into(),
            )),
        }
    }
}
