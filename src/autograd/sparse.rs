//! Device-resident constants: sparse matrices, index vectors, segments.

use sprs::CsMat;

use super::{Tape, Var};
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::float::Float;

/// A constant sparse matrix on a backend (a graph operator or sparse node
/// features). Never densified.
#[derive(Clone, Debug)]
pub struct SparseMatrix<B: Backend> {
    raw: B::Sparse,
    shape: (usize, usize),
    nnz: usize,
}

impl<B: Backend> SparseMatrix<B> {
    /// Uploads a sprs matrix of any float type (values converted to the
    /// backend's element type). Non-finite values are an error.
    pub fn from_csmat<T: Float>(backend: &B, m: &CsMat<T>) -> Result<Self> {
        // Backends index rows and columns with u32.
        for (what, n) in [
            ("sparse matrix rows", m.rows()),
            ("sparse matrix columns", m.cols()),
        ] {
            if u32::try_from(n).is_err() {
                return Err(Error::IndexOutOfRange {
                    what,
                    index: n,
                    len: u32::MAX as usize,
                });
            }
        }
        let conv: CsMat<B::Elem> = m.map(|&v| B::Elem::from_f64_lossy(v.to_f64_exact()));
        // One pass after the conversion catches NaN and infinities as well
        // as finite values that overflow the backend's element type.
        if let Some((&v, _)) = m
            .data()
            .iter()
            .zip(conv.data())
            .find(|(_, c)| !c.to_f64_exact().is_finite())
        {
            let what = if v.is_finite() {
                format!("sparse matrix value (overflows {})", B::Elem::NAME)
            } else {
                "sparse matrix value".into()
            };
            return Err(Error::NonFinite {
                what,
                value: v.to_f64_exact(),
            });
        }
        let raw = backend.sparse_from_csmat(&conv);
        Ok(SparseMatrix {
            raw,
            shape: m.shape(),
            nnz: m.nnz(),
        })
    }

    /// Wraps a backend matrix.
    pub fn from_raw(backend: &B, raw: B::Sparse) -> Self {
        let shape = backend.sparse_shape(&raw);
        let nnz = backend.sparse_nnz(&raw);
        SparseMatrix { raw, shape, nnz }
    }

    /// The backend representation.
    pub fn raw(&self) -> &B::Sparse {
        &self.raw
    }

    /// `(rows, cols)`.
    pub fn shape(&self) -> (usize, usize) {
        self.shape
    }

    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        self.nnz
    }

    /// Dropout on the stored values (drop probability `p`, survivors scaled
    /// by `1 / (1 - p)`), mask seeded from the tape. The structure is shared.
    pub fn dropout(&self, tape: &Tape<B>, p: f64) -> Result<Self> {
        super::check_dropout_p(p)?;
        if p == 0.0 || self.nnz == 0 {
            return Ok(self.clone());
        }
        let b = tape.backend();
        Ok(SparseMatrix {
            raw: b.sparse_dropout(&self.raw, p, tape.next_seed()),
            ..self.clone()
        })
    }

    /// `self · x`, differentiable in `x`.
    pub fn matmul(&self, x: &Var<B>) -> Result<Var<B>> {
        Var::spmm(self, x, false)
    }

    /// `selfᵀ · x`, differentiable in `x`.
    pub fn matmul_transposed(&self, x: &Var<B>) -> Result<Var<B>> {
        Var::spmm(self, x, true)
    }
}

/// An index vector kept both on the host (for validation) and on the device.
#[derive(Clone, Debug)]
pub struct Index<B: Backend> {
    host: Vec<usize>,
    raw: B::Index,
}

impl<B: Backend> Index<B> {
    /// Uploads indices. Values must fit in `u32`.
    pub fn new(backend: &B, idx: &[usize]) -> Result<Self> {
        let mut v = Vec::with_capacity(idx.len());
        for &i in idx {
            v.push(u32::try_from(i).map_err(|_| Error::IndexOutOfRange {
                what: "index (must fit in u32)",
                index: i,
                len: u32::MAX as usize,
            })?);
        }
        Ok(Index {
            host: idx.to_vec(),
            raw: backend.index_from_slice(&v),
        })
    }

    /// Host copy.
    pub fn host(&self) -> &[usize] {
        &self.host
    }

    /// Device copy.
    pub fn raw(&self) -> &B::Index {
        &self.raw
    }

    /// Number of indices.
    pub fn len(&self) -> usize {
        self.host.len()
    }

    /// Whether there are no indices.
    pub fn is_empty(&self) -> bool {
        self.host.is_empty()
    }
}

/// Contiguous row segments (one per graph of a batch), given by offsets
/// `ptr` (`ptr[0] = 0`, non-decreasing, `ptr[G] = rows`).
#[derive(Clone, Debug)]
pub struct Segments<B: Backend> {
    ptr: Vec<usize>,
    raw: B::Index,
}

impl<B: Backend> Segments<B> {
    /// Validates and uploads segment offsets.
    pub fn new(backend: &B, ptr: &[usize]) -> Result<Self> {
        if ptr.len() < 2 {
            return Err(Error::Empty(
                "segments need at least one segment (ptr of length >= 2)".into(),
            ));
        }
        if ptr[0] != 0 {
            return Err(Error::InvalidConfig(format!(
                "segment offsets must start at 0, got {}",
                ptr[0]
            )));
        }
        if let Some(w) = ptr.windows(2).find(|w| w[1] < w[0]) {
            return Err(Error::InvalidConfig(format!(
                "segment offsets decrease: {} then {}",
                w[0], w[1]
            )));
        }
        let last = *ptr.last().expect("len >= 2");
        if u32::try_from(last).is_err() {
            return Err(Error::IndexOutOfRange {
                what: "segment offset",
                index: last,
                len: u32::MAX as usize,
            });
        }
        let v: Vec<u32> = ptr.iter().map(|&p| p as u32).collect();
        Ok(Segments {
            ptr: ptr.to_vec(),
            raw: backend.index_from_slice(&v),
        })
    }

    /// Segments from a sorted node-to-graph vector (as PyG's `batch`).
    ///
    /// Graphs without nodes (ids missing from `batch`) are allowed, but not
    /// more graphs than `batch` has nodes (at least one graph is always
    /// allowed): more is a sign of a wrong `num_graphs`.
    pub fn from_batch_vector(backend: &B, batch: &[usize], num_graphs: usize) -> Result<Self> {
        if num_graphs > batch.len().max(1) {
            return Err(Error::InvalidConfig(format!(
                "batch vector: {num_graphs} graphs for {} nodes",
                batch.len()
            )));
        }
        let mut ptr = vec![0usize; num_graphs + 1];
        let mut prev = 0;
        for &g in batch {
            if g >= num_graphs {
                return Err(Error::IndexOutOfRange {
                    what: "batch vector",
                    index: g,
                    len: num_graphs,
                });
            }
            if g < prev {
                return Err(Error::InvalidConfig("batch vector must be sorted".into()));
            }
            prev = g;
            ptr[g + 1] += 1;
        }
        for g in 0..num_graphs {
            ptr[g + 1] += ptr[g];
        }
        Self::new(backend, &ptr)
    }

    /// Host offsets.
    pub fn ptr(&self) -> &[usize] {
        &self.ptr
    }

    /// Device offsets.
    pub fn raw(&self) -> &B::Index {
        &self.raw
    }

    /// Number of segments.
    pub fn num_segments(&self) -> usize {
        self.ptr.len() - 1
    }

    /// Total rows covered.
    pub fn num_rows(&self) -> usize {
        *self.ptr.last().expect("len >= 2")
    }

    /// Whether any segment is empty.
    pub fn has_empty(&self) -> bool {
        self.ptr.windows(2).any(|w| w[0] == w[1])
    }
}
