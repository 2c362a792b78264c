//! Row/column reductions, softmax, layer norm and segment kernels on the CPU.

use ndarray::{Array2, Axis, Zip};

use crate::backend::SegmentReduce;
use crate::float::Float;

pub(crate) fn softmax<F: Float>(x: &Array2<F>, axis: Axis, log: bool) -> Array2<F> {
    let mut out = x.clone();
    for mut lane in out.lanes_mut(axis) {
        let m = lane.iter().fold(F::neg_infinity(), |a, &b| a.max(b));
        let m = if m.is_finite() { m } else { F::zero() };
        if log {
            let s: F = lane.iter().map(|&v| (v - m).exp()).sum();
            let lse = m + s.ln();
            lane.mapv_inplace(|v| v - lse);
        } else {
            lane.mapv_inplace(|v| (v - m).exp());
            let s: F = lane.iter().copied().sum();
            lane.mapv_inplace(|v| v / s);
        }
    }
    out
}

pub(crate) fn softmax_grad<F: Float>(
    y: &Array2<F>,
    dy: &Array2<F>,
    axis: Axis,
    log: bool,
) -> Array2<F> {
    let mut out = dy.clone();
    for (mut g, yl) in out.lanes_mut(axis).into_iter().zip(y.lanes(axis)) {
        if log {
            let s: F = g.iter().copied().sum();
            Zip::from(&mut g)
                .and(&yl)
                .for_each(|g, &y| *g -= y.exp() * s);
        } else {
            let s: F = g.iter().zip(yl.iter()).map(|(&g, &y)| g * y).sum();
            Zip::from(&mut g)
                .and(&yl)
                .for_each(|g, &y| *g = y * (*g - s));
        }
    }
    out
}

pub(crate) fn layer_norm<F: Float>(x: &Array2<F>, eps: f64) -> (Array2<F>, Array2<F>) {
    let cols = F::from_usize(x.ncols().max(1)).expect("usize");
    let eps = F::from_f64_lossy(eps);
    let mut xhat = x.clone();
    let mut rstd = Array2::zeros((x.nrows(), 1));
    for (mut row, r) in xhat.rows_mut().into_iter().zip(rstd.iter_mut()) {
        let mean = row.iter().copied().sum::<F>() / cols;
        let var = row.iter().map(|&v| (v - mean) * (v - mean)).sum::<F>() / cols;
        let rs = F::one() / (var + eps).sqrt();
        row.mapv_inplace(|v| (v - mean) * rs);
        *r = rs;
    }
    (xhat, rstd)
}

pub(crate) fn layer_norm_grad<F: Float>(
    xhat: &Array2<F>,
    rstd: &Array2<F>,
    dxhat: &Array2<F>,
) -> Array2<F> {
    let cols = F::from_usize(xhat.ncols().max(1)).expect("usize");
    let mut out = dxhat.clone();
    for ((mut g, xh), &rs) in out.rows_mut().into_iter().zip(xhat.rows()).zip(rstd.iter()) {
        let mean_g = g.iter().copied().sum::<F>() / cols;
        let mean_gx = g.iter().zip(xh.iter()).map(|(&g, &x)| g * x).sum::<F>() / cols;
        Zip::from(&mut g)
            .and(&xh)
            .for_each(|g, &x| *g = rs * (*g - mean_g - x * mean_gx));
    }
    out
}

pub(crate) fn segment_reduce<F: Float>(
    x: &Array2<F>,
    ptr: &[u32],
    op: SegmentReduce,
) -> (Array2<F>, Option<Vec<u32>>) {
    let g = ptr.len() - 1;
    let cols = x.ncols();
    let mut out = Array2::zeros((g, cols));
    let mut arg = if op == SegmentReduce::Max {
        Some(vec![u32::MAX; g * cols])
    } else {
        None
    };
    for s in 0..g {
        let (a, b) = (ptr[s] as usize, ptr[s + 1] as usize);
        if a == b {
            continue;
        }
        let mut o = out.row_mut(s);
        match op {
            SegmentReduce::Sum | SegmentReduce::Mean => {
                for i in a..b {
                    o += &x.row(i);
                }
                if op == SegmentReduce::Mean {
                    let n = F::from_usize(b - a).expect("usize");
                    o.mapv_inplace(|v| v / n);
                }
            }
            SegmentReduce::Max => {
                let arg = arg.as_mut().expect("max has argmax");
                for c in 0..cols {
                    let mut best = a;
                    for i in a + 1..b {
                        if x[[i, c]] > x[[best, c]] {
                            best = i;
                        }
                    }
                    o[c] = x[[best, c]];
                    arg[s * cols + c] = best as u32;
                }
            }
        }
    }
    (out, arg)
}

pub(crate) fn segment_reduce_grad<F: Float>(
    dy: &Array2<F>,
    ptr: &[u32],
    op: SegmentReduce,
    argmax: Option<&[u32]>,
    rows: usize,
) -> Array2<F> {
    let cols = dy.ncols();
    let mut out = Array2::zeros((rows, cols));
    for s in 0..ptr.len() - 1 {
        let (a, b) = (ptr[s] as usize, ptr[s + 1] as usize);
        if a == b {
            continue;
        }
        match op {
            SegmentReduce::Sum | SegmentReduce::Mean => {
                let scale = if op == SegmentReduce::Mean {
                    F::one() / F::from_usize(b - a).expect("usize")
                } else {
                    F::one()
                };
                for i in a..b {
                    let mut o = out.row_mut(i);
                    o.zip_mut_with(&dy.row(s), |o, &d| *o = d * scale);
                }
            }
            SegmentReduce::Max => {
                let arg = argmax.expect("max backward needs argmax");
                for c in 0..cols {
                    let i = arg[s * cols + c];
                    if i != u32::MAX {
                        out[[i as usize, c]] += dy[[s, c]];
                    }
                }
            }
        }
    }
    out
}

pub(crate) fn segment_softmax<F: Float>(x: &Array2<F>, ptr: &[u32]) -> Array2<F> {
    let mut out = x.clone();
    for s in 0..ptr.len() - 1 {
        let (a, b) = (ptr[s] as usize, ptr[s + 1] as usize);
        if a == b {
            continue;
        }
        let mut block = out.slice_mut(ndarray::s![a..b, ..]);
        for mut lane in block.lanes_mut(Axis(0)) {
            let m = lane.iter().fold(F::neg_infinity(), |a, &b| a.max(b));
            lane.mapv_inplace(|v| (v - m).exp());
            let sum: F = lane.iter().copied().sum();
            lane.mapv_inplace(|v| v / sum);
        }
    }
    out
}

pub(crate) fn segment_softmax_grad<F: Float>(
    y: &Array2<F>,
    dy: &Array2<F>,
    ptr: &[u32],
) -> Array2<F> {
    let mut out = dy.clone();
    for s in 0..ptr.len() - 1 {
        let (a, b) = (ptr[s] as usize, ptr[s + 1] as usize);
        if a == b {
            continue;
        }
        let yb = y.slice(ndarray::s![a..b, ..]);
        let mut gb = out.slice_mut(ndarray::s![a..b, ..]);
        for (mut g, yl) in gb.lanes_mut(Axis(0)).into_iter().zip(yb.lanes(Axis(0))) {
            let dot: F = g.iter().zip(yl.iter()).map(|(&g, &y)| g * y).sum();
            Zip::from(&mut g)
                .and(&yl)
                .for_each(|g, &y| *g = y * (*g - dot));
        }
    }
    out
}
