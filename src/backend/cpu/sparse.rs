//! CSR storage and row-parallel sparse x dense kernels for the CPU backend.

use std::sync::{Arc, OnceLock};

use rayon::prelude::*;
use sprs::CsMat;

use crate::float::Float;

/// Work (multiply-adds) below which kernels stay on one thread.
pub(crate) const PAR_THRESHOLD: usize = 1 << 15;

/// Transposed structure of a [`CpuCsr`]: for every stored entry of `Sᵀ`
/// (in CSR order), the position of the same entry in `S`'s storage.
#[derive(Debug)]
pub(crate) struct TransposeIndex {
    indptr: Vec<usize>,
    indices: Vec<u32>,
    perm: Vec<u32>,
}

/// A CSR matrix on the CPU. Structure (and its lazily built transpose) is
/// shared between copies with different values, such as dropout masks of
/// the same sparse input.
#[derive(Debug, Clone)]
pub struct CpuCsr<F> {
    rows: usize,
    cols: usize,
    indptr: Arc<Vec<usize>>,
    indices: Arc<Vec<u32>>,
    data: Arc<Vec<F>>,
    transpose: Arc<OnceLock<TransposeIndex>>,
}

impl<F: Float> CpuCsr<F> {
    /// Builds from a sprs matrix (CSC is converted to CSR).
    pub fn from_csmat(m: &CsMat<F>) -> Self {
        let csr;
        let m = if m.is_csr() {
            m
        } else {
            csr = m.to_csr();
            &csr
        };
        let (rows, cols) = m.shape();
        let indptr: Vec<usize> = m.indptr().to_proper().into_owned();
        let indices: Vec<u32> = m.indices().iter().map(|&j| j as u32).collect();
        CpuCsr {
            rows,
            cols,
            indptr: Arc::new(indptr),
            indices: Arc::new(indices),
            data: Arc::new(m.data().to_vec()),
            transpose: Arc::new(OnceLock::new()),
        }
    }

    /// `(rows, cols)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }

    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        self.data.len()
    }

    /// Stored values, in storage order.
    pub fn data(&self) -> &[F] {
        &self.data
    }

    /// Same structure, new values.
    pub fn with_data(&self, data: Vec<F>) -> Self {
        debug_assert_eq!(data.len(), self.data.len());
        CpuCsr {
            data: Arc::new(data),
            ..self.clone()
        }
    }

    fn transpose_index(&self) -> &TransposeIndex {
        self.transpose.get_or_init(|| {
            let nnz = self.indices.len();
            let mut counts = vec![0usize; self.cols + 1];
            for &j in self.indices.iter() {
                counts[j as usize + 1] += 1;
            }
            for c in 0..self.cols {
                counts[c + 1] += counts[c];
            }
            let indptr = counts.clone();
            let mut next = counts;
            let mut indices = vec![0u32; nnz];
            let mut perm = vec![0u32; nnz];
            for i in 0..self.rows {
                for p in self.indptr[i]..self.indptr[i + 1] {
                    let j = self.indices[p] as usize;
                    let q = next[j];
                    next[j] += 1;
                    indices[q] = i as u32;
                    perm[q] = p as u32;
                }
            }
            TransposeIndex {
                indptr,
                indices,
                perm,
            }
        })
    }

    /// `out = S · x` (or `Sᵀ · x`), `x` row-major with `width` columns.
    pub fn spmm(&self, x: &[F], width: usize, transpose: bool) -> Vec<F> {
        if transpose {
            let t = self.transpose_index();
            let data = &self.data;
            let mut out = vec![F::zero(); self.cols * width];
            let work = self.nnz() * width;
            let row = |(i, o): (usize, &mut [F])| {
                for q in t.indptr[i]..t.indptr[i + 1] {
                    let v = data[t.perm[q] as usize];
                    let src = &x[t.indices[q] as usize * width..][..width];
                    axpy(o, v, src);
                }
            };
            if work >= PAR_THRESHOLD && width > 0 {
                out.par_chunks_mut(width).enumerate().for_each(row);
            } else if width > 0 {
                out.chunks_mut(width).enumerate().for_each(row);
            }
            out
        } else {
            let mut out = vec![F::zero(); self.rows * width];
            let work = self.nnz() * width;
            let row = |(i, o): (usize, &mut [F])| {
                for p in self.indptr[i]..self.indptr[i + 1] {
                    let v = self.data[p];
                    let src = &x[self.indices[p] as usize * width..][..width];
                    axpy(o, v, src);
                }
            };
            if work >= PAR_THRESHOLD && width > 0 {
                out.par_chunks_mut(width).enumerate().for_each(row);
            } else if width > 0 {
                out.chunks_mut(width).enumerate().for_each(row);
            }
            out
        }
    }
}

/// `o += v * src` (vectorises for the widths GNNs use).
#[inline(always)]
fn axpy<F: Float>(o: &mut [F], v: F, src: &[F]) {
    for (o, &s) in o.iter_mut().zip(src) {
        *o += v * s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array2;

    #[test]
    fn spmm_and_transpose_match_dense() {
        // 3 x 4 matrix with an empty row and an empty column.
        let dense = ndarray::arr2(&[
            [1.0, 0.0, 2.0, 0.0],
            [0.0, 0.0, 0.0, 0.0],
            [0.0, -3.0, 4.0, 0.0],
        ]);
        let m = CsMat::csr_from_dense(dense.view(), 0.0);
        let s = CpuCsr::from_csmat(&m);
        let x4 = Array2::from_shape_fn((4, 2), |(i, j)| (i * 2 + j) as f64 + 0.5);
        let y = s.spmm(x4.as_slice().unwrap(), 2, false);
        assert_eq!(y, dense.dot(&x4).into_raw_vec_and_offset().0);
        let x3 = Array2::from_shape_fn((3, 2), |(i, j)| (i as f64) - (j as f64) * 0.25);
        let yt = s.spmm(x3.as_slice().unwrap(), 2, true);
        assert_eq!(yt, dense.t().dot(&x3).into_raw_vec_and_offset().0);
        // With new values, the shared transpose index still maps correctly.
        let s2 = s.with_data(vec![2.0, 4.0, -6.0, 8.0]);
        let yt2 = s2.spmm(x3.as_slice().unwrap(), 2, true);
        let expect: Vec<f64> = yt.iter().map(|v| 2.0 * v).collect();
        assert_eq!(yt2, expect);
    }
}
