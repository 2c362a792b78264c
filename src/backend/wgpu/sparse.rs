//! Sparse (CSR) kernels (`shaders/sparse.wgsl`).
//!
//! A [`WgpuSparse`] stores the CSR of the matrix and the CSR of its
//! transpose (built once on the host), so both `S · X` and `Sᵀ · X` are
//! row-parallel gathers without float atomics. `t_perm` maps the
//! transpose's entries to the matrix's, so new values (dropout) reach the
//! transpose through one permutation on the device.

use std::sync::Arc;

use sprs::CsMat;

use super::{Kernel, Wgpu, WgpuSparse, WgpuTensor, f, u};

const SRC: &str = include_str!("shaders/sparse.wgsl");

const fn k(entry: &'static str) -> Kernel {
    Kernel {
        module: "sparse",
        source: SRC,
        entry,
    }
}

/// Host CSR of the transpose of a `rows x cols` CSR matrix: `(indptr,
/// indices, perm)` with `perm[k]` the storage position in the matrix of the
/// transpose's `k`-th entry (entries of each transposed row in ascending
/// original row order).
fn transpose_csr(
    rows: usize,
    cols: usize,
    indptr: &[u32],
    indices: &[u32],
) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let nnz = indices.len();
    let mut t_indptr = vec![0u32; cols + 1];
    for &j in indices {
        t_indptr[j as usize + 1] += 1;
    }
    for c in 0..cols {
        t_indptr[c + 1] += t_indptr[c];
    }
    let mut next = t_indptr.clone();
    let mut t_indices = vec![0u32; nnz];
    let mut t_perm = vec![0u32; nnz];
    for i in 0..rows {
        for p in indptr[i]..indptr[i + 1] {
            let j = indices[p as usize] as usize;
            let q = next[j] as usize;
            next[j] += 1;
            t_indices[q] = u(i);
            t_perm[q] = p;
        }
    }
    (t_indptr, t_indices, t_perm)
}

/// Uploads a sprs matrix (CSC storage is converted to CSR first, so stored
/// entries are numbered in CSR order, as on the CPU backend) together with
/// the CSR of its transpose.
pub(super) fn from_csmat(b: &Wgpu, m: &CsMat<f32>) -> WgpuSparse {
    let csr;
    let m = if m.is_csr() {
        m
    } else {
        csr = m.to_csr();
        &csr
    };
    let (rows, cols) = m.shape();
    let nnz = m.nnz();
    // Indices and positions are u32 on the device (asserts they fit).
    u(nnz);
    u(rows.max(cols));
    let indptr: Vec<u32> = m.indptr().to_proper().iter().map(|&p| u(p)).collect();
    let indices: Vec<u32> = m.indices().iter().map(|&j| u(j)).collect();
    let values = m.data();
    let (t_indptr, t_indices, t_perm) = transpose_csr(rows, cols, &indptr, &indices);
    let t_values: Vec<f32> = t_perm.iter().map(|&p| values[p as usize]).collect();
    let upload_f32 = |v: &[f32]| Arc::new(b.ctx.upload_bytes(bytemuck::cast_slice(v)));
    let (indptr_buf, indices_buf, values_buf) = (
        b.upload_u32(&indptr),
        b.upload_u32(&indices),
        upload_f32(values),
    );
    // A symmetric matrix (undirected graph operators) is its own transpose:
    // share the buffers instead of storing the same CSR twice.
    let (t_indptr_buf, t_indices_buf, t_values_buf) =
        if t_indptr == indptr && t_indices == indices && same_bits(&t_values, values) {
            (indptr_buf.clone(), indices_buf.clone(), values_buf.clone())
        } else {
            (
                b.upload_u32(&t_indptr),
                b.upload_u32(&t_indices),
                upload_f32(&t_values),
            )
        };
    WgpuSparse {
        rows,
        cols,
        nnz,
        indptr: indptr_buf,
        indices: indices_buf,
        values: values_buf,
        t_indptr: t_indptr_buf,
        t_indices: t_indices_buf,
        t_values: t_values_buf,
        t_perm: b.upload_u32(&t_perm),
    }
}

/// Bitwise equality of two value arrays.
fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// `S · x` (`x`: `cols x w`), or `Sᵀ · x` (`x`: `rows x w`) through the
/// stored transpose. One invocation per output row and chunk of four columns.
pub(super) fn spmm(b: &Wgpu, s: &WgpuSparse, x: &WgpuTensor, transpose: bool) -> WgpuTensor {
    let (out_rows, in_rows) = if transpose {
        (s.cols, s.rows)
    } else {
        (s.rows, s.cols)
    };
    assert_eq!(
        x.rows, in_rows,
        "spmm: x has {} rows, the sparse operand needs {in_rows}",
        x.rows
    );
    let w = x.cols;
    let out = b.alloc(out_rows, w);
    let chunks = w.div_ceil(4);
    let threads = out_rows * chunks;
    let (indptr, indices, values) = if transpose {
        (&s.t_indptr, &s.t_indices, &s.t_values)
    } else {
        (&s.indptr, &s.indices, &s.values)
    };
    b.ctx.dispatch(
        &k("spmm"),
        &[u(threads), u(w), u(chunks)],
        &[&out.buf, &x.buf, indptr, indices, values],
        threads as u64,
    );
    out
}

/// Dropout on the stored values: the `i`-th value is kept (scaled by
/// `1 / (1 - p)`) when `rng::keep(seed, i, p)`, else zeroed. The structure
/// buffers are shared with `s`; the transpose's values are the new values
/// permuted by `t_perm`.
pub(super) fn dropout(b: &Wgpu, s: &WgpuSparse, p: f64, seed: u64) -> WgpuSparse {
    let n = s.nnz;
    let values = Arc::new(b.ctx.alloc(4 * n as u64));
    let t_values = Arc::new(b.ctx.alloc(4 * n as u64));
    let scale = 1.0 / (1.0 - p);
    b.ctx.dispatch(
        &k("dropout"),
        &[u(n), seed as u32, (seed >> 32) as u32, f(p), f(scale)],
        &[&values, &s.values],
        n as u64,
    );
    b.ctx.dispatch(
        &k("permute"),
        &[u(n)],
        &[&t_values, &values, &s.t_perm],
        n as u64,
    );
    WgpuSparse {
        values,
        t_values,
        ..s.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::transpose_csr;

    #[test]
    fn transpose_of_a_small_csr() {
        // [[1, 0, 2], [0, 0, 0], [3, 4, 0]] stored as positions 0..4.
        let (indptr, indices, perm) = transpose_csr(3, 3, &[0, 2, 2, 4], &[0, 2, 0, 1]);
        assert_eq!(indptr, vec![0, 2, 3, 4]);
        assert_eq!(indices, vec![0, 2, 2, 0]);
        assert_eq!(perm, vec![0, 2, 3, 1]);
    }
}
