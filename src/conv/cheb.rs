//! `ChebConv`: the true spectral Chebyshev filter with PyG's numerics.

use rand::Rng;

use super::{DeviceGraph, GraphConv, check_input};
use crate::autograd::{Param, Tape, Var};
use crate::backend::{Axis, Backend};
use crate::error::{Error, Result, check_positive};
use crate::graph::{LambdaMax, Normalization};
use crate::nn::{Features, Linear, Module, ParamVisitor, init};

/// Hyper-parameters of [`ChebConv`] (PyG's `ChebConv(in, out, K,
/// normalization, bias)` plus the λ_max rule).
#[derive(Debug, Clone, PartialEq)]
pub struct ChebConvConfig {
    /// Input width.
    pub in_channels: usize,
    /// Output width.
    pub out_channels: usize,
    /// Number of Chebyshev terms (polynomial degree `K - 1`), at least 1.
    pub k: usize,
    /// Laplacian normalisation.
    pub normalization: Normalization,
    /// How λ_max is obtained (default: fixed 2.0, as PyG).
    pub lambda_max: LambdaMax,
    /// Whether to add a bias.
    pub bias: bool,
}

impl ChebConvConfig {
    /// Defaults: `sym`, λ_max = 2.0, bias.
    pub fn new(in_channels: usize, out_channels: usize, k: usize) -> Self {
        ChebConvConfig {
            in_channels,
            out_channels,
            k,
            normalization: Normalization::Sym,
            lambda_max: LambdaMax::default(),
            bias: true,
        }
    }

    /// Checks the configuration.
    pub fn validate(&self) -> Result<()> {
        crate::nn::check_dims(self.in_channels, self.out_channels)?;
        if self.k == 0 {
            return Err(Error::InvalidConfig("ChebConv needs K >= 1 terms".into()));
        }
        if self.normalization == Normalization::None && self.lambda_max == LambdaMax::default() {
            return Err(Error::InvalidConfig(
                "ChebConv with normalization None needs lambda_max (the spectrum of D - A is not bounded by 2)".into(),
            ));
        }
        Ok(())
    }

    /// Number of parameters (`K · in · out` weights and `out` biases);
    /// `None` when it overflows.
    pub fn num_params(&self) -> Option<usize> {
        self.k
            .checked_mul(self.in_channels)?
            .checked_mul(self.out_channels)?
            .checked_add(if self.bias { self.out_channels } else { 0 })
    }

    /// Builds the layer (Glorot weights, zero bias), after checking its
    /// parameters against the memory budget ([`crate::limits`]).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for an invalid configuration or a size that
    /// overflows; [`Error::OverBudget`] for weights the budget cannot hold.
    pub fn build<B: Backend, R: Rng + ?Sized>(
        self,
        backend: &B,
        rng: &mut R,
    ) -> Result<ChebConv<B>> {
        self.validate()?;
        // All K weights at once: K small tensors can add up past the budget.
        crate::limits::check_elements::<B::Elem>(
            format_args!(
                "ChebConv weights (K = {} terms of {} x {})",
                self.k, self.in_channels, self.out_channels
            ),
            self.num_params(),
        )?;
        let mut lins = Vec::new();
        for _ in 0..self.k {
            lins.push(Linear::glorot(
                backend,
                self.in_channels,
                self.out_channels,
                false,
                rng,
            )?);
        }
        let bias = self
            .bias
            .then(|| init::constant(backend, 1, self.out_channels, 0.0))
            .transpose()?;
        Ok(ChebConv {
            config: self,
            lins,
            bias,
        })
    }
}

/// Chebyshev spectral graph convolution (Defferrard et al.), exactly PyG's
/// `ChebConv`:
///
/// `out = Σ_{k<K} T_k(L̃) X W_k + b`, `L̃ = 2L/λ_max - I`,
/// `T_0 = I, T_1 = L̃, T_k = 2 L̃ T_{k-1} - T_{k-2}`.
///
/// Since `T_k(L̃) = U T_k(Λ̃) Uᵀ`, this is the spectral filter
/// `U g_θ(Λ) Uᵀ X` of a degree `K-1` Chebyshev series, computed without an
/// eigendecomposition. It is evaluated on the narrow side: `Y_k = X W_k`
/// in one product, then Clenshaw's recurrence
/// `b_k = Y_k + 2 L̃ b_{k+1} - b_{k+2}`, `out = Y_0 + L̃ b_1 - b_2`, with
/// `K - 1` sparse products on `out`-wide matrices.
///
/// Parameters: `lins.{k}.weight` (`in x out` each) and `bias`.
#[derive(Debug, Clone)]
pub struct ChebConv<B: Backend> {
    config: ChebConvConfig,
    /// One projection per Chebyshev term.
    pub lins: Vec<Linear<B>>,
    /// The shared bias.
    pub bias: Option<Param<B>>,
}

impl<B: Backend> ChebConv<B> {
    /// A layer with `K` terms, `sym` normalisation and λ_max = 2.
    pub fn new<R: Rng + ?Sized>(
        backend: &B,
        d_in: usize,
        d_out: usize,
        k: usize,
        rng: &mut R,
    ) -> Result<Self> {
        ChebConvConfig::new(d_in, d_out, k).build(backend, rng)
    }

    /// The configuration.
    pub fn config(&self) -> &ChebConvConfig {
        &self.config
    }

    /// Number of terms `K`.
    pub fn k(&self) -> usize {
        self.config.k
    }

    /// Forward with explicit λ_max values (one, or one per graph of a batch),
    /// as PyG's `forward(x, edge_index, lambda_max=...)`.
    pub fn forward_with_lambda(
        &self,
        tape: &Tape<B>,
        graph: &DeviceGraph<B>,
        x: &Features<B>,
        lambda_max: &[f64],
    ) -> Result<Var<B>> {
        for &l in lambda_max {
            check_positive("lambda_max", l)?;
        }
        let lap = graph.scaled_laplacian_with(self.config.normalization, lambda_max)?;
        self.propagate(tape, graph, x, &lap)
    }

    fn propagate(
        &self,
        tape: &Tape<B>,
        graph: &DeviceGraph<B>,
        x: &Features<B>,
        lap: &crate::autograd::SparseMatrix<B>,
    ) -> Result<Var<B>> {
        check_input("ChebConv", graph, x, self.config.in_channels)?;
        self.check_weights()?;
        let k = self.config.k;
        let h = self.config.out_channels;
        let ws: Vec<Var<B>> = self.lins.iter().map(|l| tape.param(&l.weight)).collect();
        let out = if k == 1 {
            x.matmul(&ws[0])?
        } else {
            let w_refs: Vec<&Var<B>> = ws.iter().collect();
            let y = x.matmul(&Var::concat(&w_refs, Axis::Cols)?)?;
            let ys: Vec<Var<B>> = (0..k)
                .map(|i| y.slice(Axis::Cols, i * h, (i + 1) * h))
                .collect::<Result<_>>()?;
            // Clenshaw: b_{K-1} = Y_{K-1}; b_k = Y_k + 2 L̃ b_{k+1} - b_{k+2}.
            let mut b1 = ys[k - 1].clone(); // b_{k+1}
            let mut b2: Option<Var<B>> = None; // b_{k+2}
            for yk in ys[1..k - 1].iter().rev() {
                let mut bk = yk.add(&lap.matmul(&b1)?.scale(2.0))?;
                if let Some(b2v) = &b2 {
                    bk = bk.sub(b2v)?;
                }
                b2 = Some(b1);
                b1 = bk;
            }
            let mut out = ys[0].add(&lap.matmul(&b1)?)?;
            if let Some(b2v) = &b2 {
                out = out.sub(b2v)?;
            }
            out
        };
        match &self.bias {
            Some(b) => out.add(&tape.param(b)),
            None => Ok(out),
        }
    }
}

impl<B: Backend> GraphConv<B> for ChebConv<B> {
    fn in_channels(&self) -> usize {
        self.config.in_channels
    }

    fn out_channels(&self) -> usize {
        self.config.out_channels
    }

    fn forward(&self, tape: &Tape<B>, graph: &DeviceGraph<B>, x: &Features<B>) -> Result<Var<B>> {
        let lap = if self.config.k > 1 {
            graph.scaled_laplacian(self.config.normalization, &self.config.lambda_max)?
        } else {
            // K = 1 never touches the Laplacian.
            return self.propagate_linear(tape, graph, x);
        };
        self.propagate(tape, graph, x, &lap)
    }
}

impl<B: Backend> ChebConv<B> {
    /// One weight matrix per term (the fields are public, so they may have
    /// been changed since [`ChebConvConfig::build`]).
    fn check_weights(&self) -> Result<()> {
        if self.lins.len() != self.config.k || self.config.k == 0 {
            return Err(Error::InvalidConfig(format!(
                "ChebConv has {} weight matrices for K = {}",
                self.lins.len(),
                self.config.k
            )));
        }
        Ok(())
    }

    fn propagate_linear(
        &self,
        tape: &Tape<B>,
        graph: &DeviceGraph<B>,
        x: &Features<B>,
    ) -> Result<Var<B>> {
        check_input("ChebConv", graph, x, self.config.in_channels)?;
        self.check_weights()?;
        let out = x.matmul(&tape.param(&self.lins[0].weight))?;
        match &self.bias {
            Some(b) => out.add(&tape.param(b)),
            None => Ok(out),
        }
    }
}

impl<B: Backend> Module<B> for ChebConv<B> {
    fn visit_params(&self, v: &mut ParamVisitor<'_, B>) {
        for (i, l) in self.lins.iter().enumerate() {
            v.child(&format!("lins.{i}"), l);
        }
        if let Some(b) = &self.bias {
            v.param("bias", b);
        }
    }
}
