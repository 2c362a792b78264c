//! `SpectralFilter`: an exact spectral filter `U g(Λ) Uᵀ` from a dense
//! eigendecomposition of the Laplacian (feature `lapack`).

use std::fmt;
use std::sync::Arc;

use ndarray::Array2;

use crate::autograd::{Tape, Var};
use crate::backend::Backend;
use crate::error::{Error, Result, check_non_negative, check_positive};
use crate::float::Float;
use crate::graph::spectral::{Eigen, chebyshev_filter_fn, laplacian_eigen, spectral_filter_matrix};
use crate::graph::{Graph, Normalization};

/// Largest graph (in nodes) a [`SpectralFilter`] accepts. The filter needs a
/// dense eigendecomposition (`O(N³)` time) and a dense `N x N` matrix
/// (`O(N²)` memory, 200 MB in `f64` at this size), so larger graphs are
/// rejected with [`Error::InvalidConfig`]; use [`ChebConv`](super::ChebConv)
/// (sparse, no eigendecomposition) for them.
pub const SPECTRAL_FILTER_MAX_NODES: usize = 5_000;

/// The frequency response `g(λ)` of a [`SpectralFilter`].
#[derive(Clone)]
pub enum SpectralResponse {
    /// `g(λ) = Σ_k θ_k T_k(2λ/λ_max - 1)`: the response of a ChebConv whose
    /// `k`-th weight is `θ_k` times a shared matrix (see
    /// [`chebyshev_filter_fn`]). An empty `theta` is the zero filter.
    Chebyshev {
        /// Chebyshev coefficients `θ_0, θ_1, ...`.
        theta: Vec<f64>,
        /// The λ_max that maps the spectrum to `[-1, 1]` (finite, `> 0`).
        lambda_max: f64,
    },
    /// The heat kernel `g(λ) = e^{-tλ}` (diffusion for time `t`).
    Heat {
        /// Diffusion time (finite, `>= 0`).
        t: f64,
    },
    /// Any response; it must be finite on the graph's eigenvalues.
    Custom(Arc<dyn Fn(f64) -> f64 + Send + Sync>),
}

impl fmt::Debug for SpectralResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpectralResponse::Chebyshev { theta, lambda_max } => f
                .debug_struct("Chebyshev")
                .field("theta", theta)
                .field("lambda_max", lambda_max)
                .finish(),
            SpectralResponse::Heat { t } => f.debug_struct("Heat").field("t", t).finish(),
            SpectralResponse::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

impl SpectralResponse {
    /// A custom response from a closure.
    pub fn custom(g: impl Fn(f64) -> f64 + Send + Sync + 'static) -> Self {
        SpectralResponse::Custom(Arc::new(g))
    }

    /// Checks the parameters.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a Chebyshev `lambda_max` that is not
    /// finite and `> 0` or a non-finite `θ_k`, or a heat time `t` that is not
    /// finite and `>= 0`.
    pub fn validate(&self) -> Result<()> {
        match self {
            SpectralResponse::Chebyshev { theta, lambda_max } => {
                check_positive("Chebyshev response: lambda_max", *lambda_max)?;
                if let Some((k, t)) = theta.iter().enumerate().find(|(_, t)| !t.is_finite()) {
                    return Err(Error::InvalidConfig(format!(
                        "Chebyshev response: theta[{k}] = {t} is not finite"
                    )));
                }
                Ok(())
            }
            SpectralResponse::Heat { t } => check_non_negative("heat response: t", *t),
            SpectralResponse::Custom(_) => Ok(()),
        }
    }

    /// `g(λ)`.
    pub fn eval(&self, lambda: f64) -> f64 {
        match self {
            SpectralResponse::Chebyshev { theta, lambda_max } => {
                chebyshev_filter_fn(theta, *lambda_max)(lambda)
            }
            SpectralResponse::Heat { t } => (-t * lambda).exp(),
            SpectralResponse::Custom(g) => g(lambda),
        }
    }
}

/// An exact spectral graph filter `F = U g(Λ) Uᵀ`, applied as `F · X`.
///
/// The Laplacian `L = U Λ Uᵀ` (`Sym` or `None` normalisation of a symmetric
/// graph) is diagonalised once with LAPACK; the dense `N x N` matrix `F` is
/// built once from the [`SpectralResponse`] and uploaded to the backend.
/// [`SpectralFilter::filter`] records `F · X` as a product with a constant,
/// so gradients flow to `X` (the filter itself has no parameters).
///
/// This is the reference that [`ChebConv`](super::ChebConv) approximates
/// without an eigendecomposition: with
/// `SpectralResponse::Chebyshev { theta, lambda_max }` the filter equals
/// `Σ_k θ_k T_k(2L/λ_max - I)`. Graphs above [`SPECTRAL_FILTER_MAX_NODES`]
/// nodes are rejected.
///
/// ```
/// use hdgcn::autograd::Tape;
/// use hdgcn::backend::Cpu;
/// use hdgcn::conv::{SpectralFilter, SpectralResponse};
/// use hdgcn::graph::{Graph, Normalization};
///
/// // A 4-cycle, heat kernel e^{-λ} on the symmetric normalised Laplacian.
/// let g = Graph::from_edges(4, &[(0, 1), (1, 0), (1, 2), (2, 1), (2, 3), (3, 2), (3, 0), (0, 3)])?;
/// let cpu = Cpu::<f64>::new();
/// let heat = SpectralFilter::new(&cpu, &g, Normalization::Sym, SpectralResponse::Heat { t: 1.0 })?;
///
/// let tape = Tape::new(&cpu);
/// let x = tape.input(ndarray::Array2::from_elem((4, 2), 1.0));
/// let y = heat.filter(&tape, &x)?;
/// // The constant signal is the eigenvector of λ = 0: it passes unchanged.
/// for v in y.to_array() {
///     assert!((v - 1.0).abs() < 1e-12);
/// }
/// // Gradients flow to the input.
/// let grads = y.sum_all().backward()?;
/// assert!(grads.wrt(&x).is_some());
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct SpectralFilter<B: Backend> {
    backend: B,
    eigen: Eigen,
    response: SpectralResponse,
    matrix: Array2<f64>,
    device: B::Tensor,
}

impl<B: Backend> SpectralFilter<B> {
    /// Diagonalises `graph`'s Laplacian with normalisation `norm` (see
    /// [`laplacian_eigen`]) and builds the filter for `response`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] if the graph has more than
    /// [`SPECTRAL_FILTER_MAX_NODES`] nodes, is not symmetric, `norm` is `Rw`,
    /// or the response's parameters are invalid; [`Error::NonFinite`] if
    /// `g(λ)` is not finite at an eigenvalue; otherwise as [`laplacian_eigen`]
    /// ([`Error::Empty`], [`Error::NegativeWeight`], [`Error::Numerical`]).
    pub fn new(
        backend: &B,
        graph: &Graph,
        norm: Normalization,
        response: SpectralResponse,
    ) -> Result<Self> {
        check_size(graph.num_nodes())?;
        response.validate()?;
        let eigen = laplacian_eigen(graph, norm)?;
        Self::from_eigen(backend, eigen, response)
    }

    /// Builds the filter from an existing eigendecomposition (for instance
    /// to apply several responses with one decomposition).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] above [`SPECTRAL_FILTER_MAX_NODES`] nodes or
    /// for invalid response parameters; [`Error::Empty`] for a decomposition
    /// of zero nodes; [`Error::ShapeMismatch`] unless `vectors` is `N x N`
    /// with `N = values.len()`; [`Error::NonFinite`] for a non-finite
    /// eigenvalue, eigenvector entry or `g(λ)`.
    pub fn from_eigen(backend: &B, eigen: Eigen, response: SpectralResponse) -> Result<Self> {
        let n = eigen.values.len();
        check_size(n)?;
        if n == 0 {
            return Err(Error::Empty(
                "spectral filter of a graph with 0 nodes".into(),
            ));
        }
        if eigen.vectors.dim() != (n, n) {
            return Err(Error::shape(
                "SpectralFilter eigenvectors",
                format!("({n}, {n})"),
                format!("{:?}", eigen.vectors.dim()),
            ));
        }
        response.validate()?;
        if let Some(&value) = eigen.values.iter().find(|v| !v.is_finite()) {
            return Err(Error::NonFinite {
                what: "eigenvalue".into(),
                value,
            });
        }
        if let Some(&value) = eigen.vectors.iter().find(|v| !v.is_finite()) {
            return Err(Error::NonFinite {
                what: "eigenvector entry".into(),
                value,
            });
        }
        for &lambda in &eigen.values {
            let value = response.eval(lambda);
            if !value.is_finite() {
                return Err(Error::NonFinite {
                    what: format!("filter response g({lambda})"),
                    value,
                });
            }
        }
        let matrix = spectral_filter_matrix(&eigen, |l| response.eval(l));
        let device = backend.upload(matrix.mapv(B::Elem::from_f64_lossy).view());
        Ok(SpectralFilter {
            backend: backend.clone(),
            eigen,
            response,
            matrix,
            device,
        })
    }

    /// Number of nodes `N`.
    pub fn num_nodes(&self) -> usize {
        self.eigen.values.len()
    }

    /// The eigendecomposition `L = U diag(λ) Uᵀ`.
    pub fn eigen(&self) -> &Eigen {
        &self.eigen
    }

    /// The response `g`.
    pub fn response(&self) -> &SpectralResponse {
        &self.response
    }

    /// The dense filter `U g(Λ) Uᵀ` in `f64` (symmetric, `N x N`).
    pub fn matrix(&self) -> &Array2<f64> {
        &self.matrix
    }

    /// The backend holding the filter.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// `F · x`, recorded on `tape` (gradients flow to `x`).
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] unless `x` has `N` rows.
    pub fn filter(&self, tape: &Tape<B>, x: &Var<B>) -> Result<Var<B>> {
        let n = self.num_nodes();
        let (r, c) = x.shape();
        if r != n {
            return Err(Error::shape(
                "SpectralFilter::filter",
                format!("({n}, _)"),
                format!("({r}, {c})"),
            ));
        }
        tape.constant(self.device.clone()).matmul(x)
    }
}

fn check_size(n: usize) -> Result<()> {
    if n > SPECTRAL_FILTER_MAX_NODES {
        Err(Error::InvalidConfig(format!(
            "SpectralFilter needs a dense eigendecomposition; {n} nodes exceed the limit of \
             {SPECTRAL_FILTER_MAX_NODES} (use ChebConv for large graphs)"
        )))
    } else {
        Ok(())
    }
}
