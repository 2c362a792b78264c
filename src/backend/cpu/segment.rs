//! Node–supernode kernels for cross-attention over a batch of graphs.
//!
//! Rows of the node tensors are grouped by graph (offsets `ptr`); the
//! supernode tensors are `(G·M) x c` with graph `g` owning rows
//! `g·M..(g+1)·M`. Every kernel costs `O(N·M·c)` and never forms `N x N`.
//!
//! All of them are one pass over the node rows ([`cross_pass`]) that
//! computes any of three products of node tensors `x` (`N x h`), `a`
//! (`N x M`) and a supernode tensor `u` (`(G·M) x h`):
//!
//! - scores `x[v] · u[g(v)·M + j]` (`N x M`),
//! - mixing `Σ_j a[v, j] u[g(v)·M + j]` (`N x h`),
//! - weighted sums `Σ_{v in g} a[v, j] x[v]` (`(G·M) x h`).
//!
//! The three are mutually adjoint, so the backward of each is the other two,
//! and both come out of a single pass: the node tensors of a large graph are
//! read once per gradient instead of once per product. `M` is small (the
//! number of supernodes), so a general matrix product, which packs its `N x h`
//! operand into a buffer before multiplying, spends most of its time packing;
//! these loops read each row where it lies, with the supernode block (`M x h`)
//! held in the core's cache.

use std::borrow::Cow;
use std::mem::MaybeUninit;
use std::ops::Range;

use super::reduce::map_blocks;
use super::sparse::{PAR_THRESHOLD, has_avx2_fma};
use crate::float::Float;
use ndarray::Array2;

/// Node rows per task of a pass: whole small graphs are grouped into tasks
/// of at most this many rows; a larger graph is split into parts.
const TASK_ROWS: usize = 512;

/// Most parts a graph is split into (each part's weighted sums are a
/// separate partial, summed afterwards in order, so the result does not
/// depend on the number of threads).
const MAX_PARTS: usize = 64;

/// Rows a task handles at a time: the products of one block run one after
/// the other while its rows (`BLOCK_ROWS · h` entries) are in the core's cache.
const BLOCK_ROWS: usize = 128;

/// The operands of a pass. Unused operands may be empty.
#[derive(Clone, Copy)]
struct Operands<'a, F> {
    /// Node tensor, `N x h`.
    x: &'a [F],
    /// Node tensor, `N x m`.
    a: &'a [F],
    /// Supernode tensor, `(G·m) x h`.
    u: &'a [F],
    /// `u` transposed per graph (see [`transpose_supernodes`]), for scores.
    ut: &'a [F],
    h: usize,
    m: usize,
    ptr: &'a [u32],
}

/// The outputs of a pass; each is optional.
///
/// `scores` and `mix` may start uninitialised (see [`overwritten`]): the
/// pass writes every entry of their rows `ptr[0]..ptr[G]` and reads an
/// entry only when accumulating into an initialised `mix`.
struct Outputs<'a, F> {
    /// `x[v] · u[g(v)·m + j]` (`N x m`), overwritten.
    scores: Option<&'a mut [MaybeUninit<F>]>,
    /// `Σ_j a[v, j] u[g(v)·m + j]` (`N x h`), added to the slice's values
    /// when `.1` is true (the slice is then initialised), else overwriting
    /// them.
    mix: Option<(&'a mut [MaybeUninit<F>], bool)>,
    /// `Σ_{v in g} a[v, j] x[v]` (`(G·m) x h`); must be zero on entry.
    wsum: Option<&'a mut [F]>,
}

/// A contiguous range of node rows: whole graphs `g0..g1`, or (when
/// `!whole`) a part of graph `g0` alone.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Task {
    rows: (usize, usize),
    graphs: (usize, usize),
    whole: bool,
}

/// Splits the rows into tasks (in order, covering every graph once): a graph
/// of more than [`TASK_ROWS`] rows into parts, whole smaller graphs grouped
/// into tasks of at most `group_rows` rows (which changes no value: a whole
/// graph is computed the same way in any task).
fn plan(ptr: &[u32], group_rows: usize) -> Vec<Task> {
    let mut tasks = Vec::new();
    let mut cur: Option<Task> = None;
    for (g, w) in ptr.windows(2).enumerate() {
        let (lo, hi) = (w[0] as usize, w[1] as usize);
        let rows = hi - lo;
        if rows > TASK_ROWS {
            tasks.extend(cur.take());
            let step = rows.div_ceil(rows.div_ceil(TASK_ROWS).min(MAX_PARTS));
            let mut s = lo;
            while s < hi {
                let e = (s + step).min(hi);
                tasks.push(Task {
                    rows: (s, e),
                    graphs: (g, g + 1),
                    whole: false,
                });
                s = e;
            }
            continue;
        }
        match &mut cur {
            Some(t) if t.rows.1 - t.rows.0 + rows <= group_rows => {
                t.rows.1 = hi;
                t.graphs.1 = g + 1;
            }
            _ => {
                tasks.extend(cur.take());
                cur = Some(Task {
                    rows: (lo, hi),
                    graphs: (g, g + 1),
                    whole: true,
                });
            }
        }
    }
    tasks.extend(cur);
    tasks
}

/// The first `len` entries of `*rest`, leaving the others in it.
fn carve<'a, F>(rest: &mut &'a mut [F], len: usize) -> &'a mut [F] {
    let (head, tail) = std::mem::take(rest).split_at_mut(len);
    *rest = tail;
    head
}

/// One task with its share of the outputs.
struct Job<'a, F> {
    task: Task,
    scores: Option<&'a mut [MaybeUninit<F>]>,
    mix: Option<&'a mut [MaybeUninit<F>]>,
    /// The weighted sums of the task's graphs (whole tasks only).
    wsum: Option<&'a mut [F]>,
}

/// Runs one pass (see the module docs), parallel over tasks when the work
/// is large.
fn cross_pass<F: Float>(op: Operands<'_, F>, out: Outputs<'_, F>) {
    let Operands { h, m, ptr, .. } = op;
    if ptr.len() < 2 {
        return;
    }
    let n = ptr[ptr.len() - 1] as usize;
    // Whole graphs grouped into about four tasks per thread (a batch of
    // short documents is a few hundred rows per thread).
    let threads = rayon::current_num_threads().max(1);
    let tasks = plan(ptr, (n / (4 * threads)).clamp(64, TASK_ROWS));
    let ut = match out.scores {
        Some(_) => transpose_supernodes(op.u, ptr.len() - 1, m, h),
        None => Vec::new(),
    };
    let op = Operands { ut: &ut, ..op };
    let (mut scores, mut wsum) = (out.scores, out.wsum);
    let want_wsum = wsum.is_some();
    let (mut mix, accumulate) = match out.mix {
        Some((s, add)) => (Some(s), add),
        None => (None, false),
    };
    // Rows before the first segment (a `ptr` that does not start at 0, which
    // the autograd layer never passes) belong to no graph: their outputs
    // are left as they are.
    let first = ptr[0] as usize;
    if let Some(s) = scores.as_mut() {
        carve(s, first * m);
    }
    if let Some(s) = mix.as_mut() {
        carve(s, first * h);
    }
    // Split the outputs along the tasks; the weighted sums of a graph split
    // into parts are summed from the parts' partials afterwards.
    let mut jobs = Vec::with_capacity(tasks.len());
    let mut targets = Vec::new();
    for &task in &tasks {
        let rows = task.rows.1 - task.rows.0;
        let graphs = task.graphs.1 - task.graphs.0;
        let wsum = match wsum.as_mut() {
            Some(w) if task.whole => Some(carve(w, graphs * m * h)),
            Some(w) if task.rows.0 == op.ptr[task.graphs.0] as usize => {
                targets.push(carve(w, m * h));
                None
            }
            _ => None,
        };
        jobs.push(Job {
            task,
            scores: scores.as_mut().map(|s| carve(s, rows * m)),
            mix: mix.as_mut().map(|s| carve(s, rows * h)),
            wsum,
        });
    }
    let run = |job: Job<'_, F>| -> Option<Vec<F>> {
        if has_avx2_fma() {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the CPU has AVX2 and FMA (checked at run time).
            return unsafe { run_job_avx2(op, job, accumulate, want_wsum) };
        }
        run_job::<F, false>(op, job, accumulate, want_wsum)
    };
    let outputs = usize::from(want_wsum) + usize::from(mix.is_some() || accumulate);
    let partials: Vec<Option<Vec<F>>> = if n * m * h * outputs.max(1) >= PAR_THRESHOLD {
        // The calling thread takes part (see `parallel.rs`): a pass over
        // Cora-sized graphs lasts tens of microseconds.
        map_blocks(jobs, |_, job| run(job))
    } else {
        jobs.into_iter().map(run).collect()
    };
    // Partials come in task order; a split graph's first part starts at
    // the graph's first row, where its target (in `targets`) begins.
    let mut targets = targets.into_iter();
    let mut target: Option<&mut [F]> = None;
    for (t, p) in tasks.iter().zip(partials) {
        if t.whole {
            continue;
        }
        if t.rows.0 == ptr[t.graphs.0] as usize {
            target = targets.next();
        }
        if let (Some(w), Some(p)) = (target.as_deref_mut(), p) {
            w.iter_mut().zip(&p).for_each(|(o, &p)| *o += p);
        }
    }
}

/// `a · b + c`, fused (one rounding) when `FUSED`.
#[inline(always)]
fn madd<F: Float, const FUSED: bool>(a: F, b: F, c: F) -> F {
    if FUSED { a.mul_add(b, c) } else { c + a * b }
}

/// Supernodes per register block of the score kernel.
const SCORE_LANES: usize = 16;

/// `u` (`(G·m) x h`) transposed into panels: per graph, per block of
/// [`SCORE_LANES`] supernodes, an `h x SCORE_LANES` panel (zero-padded past
/// `m`), so that the scores of a node row against a block are a sum of its
/// entries times consecutive panel rows.
fn transpose_supernodes<F: Float>(u: &[F], graphs: usize, m: usize, h: usize) -> Vec<F> {
    const L: usize = SCORE_LANES;
    let mp = m.next_multiple_of(L);
    let mut ut = vec![F::zero(); graphs * h * mp];
    if h == 0 || m == 0 {
        return ut;
    }
    // Whole graphs per part; each panel written row by row (its `L` lanes
    // are consecutive), read from the graph's `m` rows of `u`.
    super::parallel::for_each_part(&mut ut, h * mp, |start, part| {
        for (k, tg) in part.chunks_exact_mut(h * mp).enumerate() {
            let g = start / (h * mp) + k;
            let ug = &u[g * m * h..(g + 1) * m * h];
            for (b, panel) in tg.chunks_exact_mut(h * L).enumerate() {
                let js = b * L..((b + 1) * L).min(m);
                for (c, lanes) in panel.chunks_exact_mut(L).enumerate() {
                    for (l, j) in lanes.iter_mut().zip(js.clone()) {
                        *l = ug[j * h + c];
                    }
                }
            }
        }
    });
    ut
}

/// Scores of one node row `xv` (`h`) against a graph's supernode panels
/// `ut` (see [`transpose_supernodes`]) into `s` (`m`): `SCORE_LANES`
/// supernodes at a time, in four sets of sums over alternating columns
/// (short dependency chains).
#[inline(always)]
#[allow(clippy::needless_range_loop)]
fn score_row<F: Float, const FUSED: bool>(s: &mut [MaybeUninit<F>], xv: &[F], ut: &[F], m: usize) {
    const L: usize = SCORE_LANES;
    let h = xv.len();
    if h == 0 {
        s[..m].fill(MaybeUninit::new(F::zero()));
        return;
    }
    for (jb, panel) in (0..m).step_by(L).zip(ut.chunks_exact(h * L)) {
        let mut acc = [[F::zero(); L]; 4];
        let (xs, us) = (xv.chunks_exact(4), panel.chunks_exact(4 * L));
        let (xr, ur) = (xs.remainder(), us.remainder());
        for (x, u) in xs.zip(us) {
            for l in 0..L {
                acc[0][l] = madd::<F, FUSED>(x[0], u[l], acc[0][l]);
                acc[1][l] = madd::<F, FUSED>(x[1], u[L + l], acc[1][l]);
                acc[2][l] = madd::<F, FUSED>(x[2], u[2 * L + l], acc[2][l]);
                acc[3][l] = madd::<F, FUSED>(x[3], u[3 * L + l], acc[3][l]);
            }
        }
        for (&x, u) in xr.iter().zip(ur.chunks_exact(L)) {
            for l in 0..L {
                acc[0][l] = madd::<F, FUSED>(x, u[l], acc[0][l]);
            }
        }
        let w = (m - jb).min(L);
        for l in 0..w {
            s[jb + l].write((acc[0][l] + acc[1][l]) + (acc[2][l] + acc[3][l]));
        }
    }
}

/// [`score_row`] for two rows `x0`, `x1` at once, sharing the panel loads;
/// each row's sums are split over even and odd columns.
#[inline(always)]
#[allow(clippy::needless_range_loop)]
fn score_row_pair<F: Float, const FUSED: bool>(
    s: &mut [MaybeUninit<F>],
    x0: &[F],
    x1: &[F],
    ut: &[F],
    m: usize,
) {
    const L: usize = SCORE_LANES;
    let h = x0.len();
    if h == 0 {
        s[..2 * m].fill(MaybeUninit::new(F::zero()));
        return;
    }
    for (jb, panel) in (0..m).step_by(L).zip(ut.chunks_exact(h * L)) {
        let (mut a0, mut a1, mut b0, mut b1) = (
            [F::zero(); L],
            [F::zero(); L],
            [F::zero(); L],
            [F::zero(); L],
        );
        let (p2, q0, q1) = (
            panel.chunks_exact(2 * L),
            x0.chunks_exact(2),
            x1.chunks_exact(2),
        );
        let (pr, r0, r1) = (p2.remainder(), q0.remainder(), q1.remainder());
        for ((u, y0), y1) in p2.zip(q0).zip(q1) {
            let (u0, u1) = u.split_at(L);
            let (u0, u1): (&[F; L], &[F; L]) =
                (u0.try_into().expect("L"), u1.try_into().expect("L"));
            for l in 0..L {
                a0[l] = madd::<F, FUSED>(y0[0], u0[l], a0[l]);
                a1[l] = madd::<F, FUSED>(y0[1], u1[l], a1[l]);
                b0[l] = madd::<F, FUSED>(y1[0], u0[l], b0[l]);
                b1[l] = madd::<F, FUSED>(y1[1], u1[l], b1[l]);
            }
        }
        if let (Some(&y0), Some(&y1)) = (r0.first(), r1.first()) {
            for l in 0..L {
                a0[l] = madd::<F, FUSED>(y0, pr[l], a0[l]);
                b0[l] = madd::<F, FUSED>(y1, pr[l], b0[l]);
            }
        }
        let w = (m - jb).min(L);
        for l in 0..w {
            s[jb + l].write(a0[l] + a1[l]);
            s[m + jb + l].write(b0[l] + b1[l]);
        }
    }
}

/// `o (+)= Σ_j a[j] u[j]` for the `m x h` block `u`, in register blocks of
/// `L` columns. Writes every entry of `o`; reads them only when
/// `accumulate`, in which case `o` must be initialised.
#[inline(always)]
#[allow(clippy::needless_range_loop)]
fn mix_row<F: Float, const FUSED: bool>(
    o: &mut [MaybeUninit<F>],
    a: &[F],
    u: &[F],
    accumulate: bool,
) {
    const L: usize = 32;
    let h = o.len();
    let mut c = 0;
    while c + L <= h {
        let blk = o[c..c + L].as_mut_ptr().cast::<F>();
        let mut acc = [F::zero(); L];
        if accumulate {
            // SAFETY: `blk` points to `L` entries of `o`, initialised
            // because `accumulate` is only set for an initialised `o` (the
            // contract above, kept by every caller of `cross_pass`).
            unsafe { std::ptr::copy_nonoverlapping(blk, acc.as_mut_ptr(), L) };
        }
        for (j, &aj) in a.iter().enumerate() {
            let uj: &[F; L] = u[j * h + c..j * h + c + L]
                .try_into()
                .expect("block of L columns");
            for l in 0..L {
                acc[l] = madd::<F, FUSED>(aj, uj[l], acc[l]);
            }
        }
        // SAFETY: `blk` points to `L` writable entries of `o` (a write to
        // possibly uninitialised memory through a raw pointer).
        unsafe { std::ptr::copy_nonoverlapping(acc.as_ptr(), blk, L) };
        c += L;
    }
    for e in &mut o[c..] {
        let i = c;
        c += 1;
        // SAFETY: as above.
        let mut s = if accumulate {
            unsafe { e.assume_init() }
        } else {
            F::zero()
        };
        for (j, &aj) in a.iter().enumerate() {
            s = madd::<F, FUSED>(aj, u[j * h + i], s);
        }
        e.write(s);
    }
}

/// `w[j] += Σ_{v in rows} a[v, j] x[v]` (`w`: `m x h`), four rows at a time.
#[inline(always)]
fn wsum_rows<F: Float, const FUSED: bool>(
    w: &mut [F],
    a: &[F],
    x: &[F],
    rows: Range<usize>,
    m: usize,
    h: usize,
) {
    let row = |v: usize| &x[v * h..(v + 1) * h];
    let mut v = rows.start;
    while v + 4 <= rows.end {
        let (x0, x1, x2, x3) = (row(v), row(v + 1), row(v + 2), row(v + 3));
        for j in 0..m {
            let (a0, a1, a2, a3) = (
                a[v * m + j],
                a[(v + 1) * m + j],
                a[(v + 2) * m + j],
                a[(v + 3) * m + j],
            );
            let wj = &mut w[j * h..(j + 1) * h];
            for ((((o, &p0), &p1), &p2), &p3) in wj.iter_mut().zip(x0).zip(x1).zip(x2).zip(x3) {
                let s = madd::<F, FUSED>(a0, p0, *o);
                let s = madd::<F, FUSED>(a1, p1, s);
                let s = madd::<F, FUSED>(a2, p2, s);
                *o = madd::<F, FUSED>(a3, p3, s);
            }
        }
        v += 4;
    }
    for v in v..rows.end {
        let xv = row(v);
        for j in 0..m {
            let aj = a[v * m + j];
            for (o, &p) in w[j * h..(j + 1) * h].iter_mut().zip(xv) {
                *o = madd::<F, FUSED>(aj, p, *o);
            }
        }
    }
}

/// One task of [`cross_pass`]; returns the partial weighted sums of a part
/// of a split graph.
#[inline(always)]
fn run_job<F: Float, const FUSED: bool>(
    op: Operands<'_, F>,
    mut job: Job<'_, F>,
    accumulate: bool,
    want_wsum: bool,
) -> Option<Vec<F>> {
    let Operands {
        x,
        a,
        u,
        ut,
        h,
        m,
        ptr,
    } = op;
    let t = job.task;
    let mut partial = (want_wsum && !t.whole).then(|| vec![F::zero(); m * h]);
    for g in t.graphs.0..t.graphs.1 {
        let lo = (ptr[g] as usize).max(t.rows.0);
        let hi = (ptr[g + 1] as usize).min(t.rows.1);
        // Empty when the pass does not use `u`.
        let ug = u.get(g * m * h..(g + 1) * m * h).unwrap_or(&[]);
        let mut start = lo;
        while start < hi {
            let end = (start + BLOCK_ROWS).min(hi);
            if let Some(s) = job.scores.as_deref_mut() {
                let mp = m.next_multiple_of(SCORE_LANES);
                let utg = &ut[g * h * mp..(g + 1) * h * mp];
                let mut v = start;
                while v + 2 <= end {
                    let r = v - t.rows.0;
                    let (x0, x1) = (&x[v * h..(v + 1) * h], &x[(v + 1) * h..(v + 2) * h]);
                    score_row_pair::<F, FUSED>(&mut s[r * m..(r + 2) * m], x0, x1, utg, m);
                    v += 2;
                }
                if v < end {
                    let r = v - t.rows.0;
                    let xv = &x[v * h..(v + 1) * h];
                    score_row::<F, FUSED>(&mut s[r * m..(r + 1) * m], xv, utg, m);
                }
            }
            if let Some(o) = job.mix.as_deref_mut() {
                for v in start..end {
                    let r = v - t.rows.0;
                    let av = &a[v * m..(v + 1) * m];
                    mix_row::<F, FUSED>(&mut o[r * h..(r + 1) * h], av, ug, accumulate);
                }
            }
            if want_wsum {
                let w = match (partial.as_deref_mut(), job.wsum.as_deref_mut()) {
                    (Some(p), _) => p,
                    (None, Some(w)) => {
                        let k = g - t.graphs.0;
                        &mut w[k * m * h..(k + 1) * m * h]
                    }
                    (None, None) => unreachable!("whole tasks carry their weighted sums"),
                };
                wsum_rows::<F, FUSED>(w, a, x, start..end, m, h);
            }
            start = end;
        }
    }
    partial
}

/// [`run_job`] compiled for AVX2 + FMA.
///
/// # Safety
/// The CPU supports AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn run_job_avx2<F: Float>(
    op: Operands<'_, F>,
    job: Job<'_, F>,
    accumulate: bool,
    want_wsum: bool,
) -> Option<Vec<F>> {
    run_job::<F, true>(op, job, accumulate, want_wsum)
}

fn slice_of<F: Float>(a: &Array2<F>) -> Cow<'_, [F]> {
    match a.as_slice() {
        Some(s) => Cow::Borrowed(s),
        None => Cow::Owned(a.iter().copied().collect()),
    }
}

/// A zero `rows x cols` array.
fn zeros<F: Float>(rows: usize, cols: usize) -> Array2<F> {
    Array2::zeros((rows, cols))
}

fn as_mut_slice<F: Float>(a: &mut Array2<F>) -> &mut [F] {
    a.as_slice_mut()
        .expect("the kernels' outputs are standard layout")
}

/// An initialised slice seen as an output of a pass (for accumulation).
fn as_uninit<F>(s: &mut [F]) -> &mut [MaybeUninit<F>] {
    // SAFETY: `MaybeUninit<F>` has the size, alignment and layout of `F`,
    // and the passes write only initialised values through the result, so
    // `s` stays initialised.
    unsafe { &mut *(s as *mut [F] as *mut [MaybeUninit<F>]) }
}

/// A `rows x cols` output of a pass that overwrites it, without first
/// filling it with zeros: `pass` gets the uninitialised entries, the rows
/// outside `ptr[0]..ptr[G]` (which belong to no graph) already zero, and
/// must write every entry of the others, as a pass over `ptr` does for its
/// `scores`, and for its `mix` when not accumulating. Returns the array and
/// what `pass` returned.
///
/// For a `ptr` that is not non-decreasing or runs past `rows` (which the
/// autograd layer never passes) every entry is zeroed first, so nothing
/// uninitialised can be read whatever the pass does with it.
fn overwritten<F: Float, R>(
    rows: usize,
    cols: usize,
    ptr: &[u32],
    pass: impl FnOnce(&mut [MaybeUninit<F>]) -> R,
) -> (Array2<F>, R) {
    let len = rows
        .checked_mul(cols)
        .expect("a pass's output: rows * cols overflows usize");
    let mut buf: Vec<F> = Vec::with_capacity(len);
    let out = &mut buf.spare_capacity_mut()[..len];
    let valid =
        ptr.windows(2).all(|w| w[0] <= w[1]) && ptr.last().is_none_or(|&e| e as usize <= rows);
    let (lo, hi) = match (ptr.first(), ptr.last()) {
        (Some(&lo), Some(&hi)) if valid && ptr.len() >= 2 => (lo as usize, hi as usize),
        _ if valid => (0, 0),
        _ => (0, rows),
    };
    let zero = MaybeUninit::new(F::zero());
    if valid {
        out[..lo * cols].fill(zero);
        out[hi * cols..].fill(zero);
    } else {
        out.fill(zero);
    }
    let r = pass(out);
    // SAFETY: the rows outside `lo..hi` (or all of them) were zeroed above;
    // for a non-decreasing `ptr` within `rows`, the pass's tasks cover each
    // row of `lo..hi` once (`plan`), and its score and non-accumulating mix
    // kernels write every entry of each row they are given. (Had the pass
    // panicked, `buf` would be dropped with length 0.)
    unsafe { buf.set_len(len) };
    let arr = Array2::from_shape_vec((rows, cols), buf).expect("rows * cols entries");
    (arr, r)
}

/// Runs a pass whose mixing output goes into a gradient slot: added to
/// its tensor, or (empty slot) filled with a new `n x h` one; without a
/// slot the pass computes only `scores` and `wsum`.
fn pass_into_slot<F: Float>(
    op: Operands<'_, F>,
    slot: Option<&mut Option<Array2<F>>>,
    n: usize,
    scores: Option<&mut [MaybeUninit<F>]>,
    wsum: Option<&mut [F]>,
) {
    let Some(slot) = slot else {
        cross_pass(
            op,
            Outputs {
                scores,
                mix: None,
                wsum,
            },
        );
        return;
    };
    let mut acc = match slot.take() {
        Some(acc) if acc.is_standard_layout() => acc,
        Some(acc) => acc.as_standard_layout().into_owned(),
        None => {
            let (fresh, ()) = overwritten(n, op.h, op.ptr, |mix| {
                let mix = Some((mix, false));
                cross_pass(op, Outputs { scores, mix, wsum });
            });
            *slot = Some(fresh);
            return;
        }
    };
    let mix = Some((as_uninit(as_mut_slice(&mut acc)), true));
    cross_pass(op, Outputs { scores, mix, wsum });
    *slot = Some(acc);
}

/// `out[v, j] = k[v] · q[g(v)·m + j]` (`N x m`).
pub(crate) fn segment_scores<F: Float>(
    k: &Array2<F>,
    q: &Array2<F>,
    ptr: &[u32],
    m: usize,
) -> Array2<F> {
    let (ks, qs) = (slice_of(k), slice_of(q));
    let (n, h) = k.dim();
    let op = Operands {
        x: &ks,
        a: &[],
        u: &qs,
        ut: &[],
        h,
        m,
        ptr,
    };
    let (out, ()) = overwritten(n, m, ptr, |scores| {
        let (scores, mix, wsum) = (Some(scores), None, None);
        cross_pass(op, Outputs { scores, mix, wsum });
    });
    out
}

/// `out[v] = Σ_j a[v, j] u[g(v)·M + j]` (`N x h`, `M = a.ncols()`).
pub(crate) fn segment_mix<F: Float>(a: &Array2<F>, u: &Array2<F>, ptr: &[u32]) -> Array2<F> {
    overwritten(a.nrows(), u.ncols(), ptr, |out| {
        mix_pass(out, a, u, ptr, false)
    })
    .0
}

/// `acc[v] += Σ_j a[v, j] u[g(v)·M + j]` in place (`acc` standard layout).
pub(crate) fn segment_mix_add<F: Float>(
    acc: &mut Array2<F>,
    a: &Array2<F>,
    u: &Array2<F>,
    ptr: &[u32],
) {
    mix_pass(as_uninit(as_mut_slice(acc)), a, u, ptr, true);
}

/// A mixing pass into `out`, initialised when `accumulate`.
fn mix_pass<F: Float>(
    out: &mut [MaybeUninit<F>],
    a: &Array2<F>,
    u: &Array2<F>,
    ptr: &[u32],
    accumulate: bool,
) {
    let (as_, us) = (slice_of(a), slice_of(u));
    let op = Operands {
        x: &[],
        a: &as_,
        u: &us,
        ut: &[],
        h: u.ncols(),
        m: a.ncols(),
        ptr,
    };
    cross_pass(
        op,
        Outputs {
            scores: None,
            mix: Some((out, accumulate)),
            wsum: None,
        },
    );
}

/// `out[g·M + j] = Σ_{v in g} a[v, j] x[v]` (`(G·M) x h`, `M = a.ncols()`).
pub(crate) fn segment_weighted_sum<F: Float>(
    a: &Array2<F>,
    x: &Array2<F>,
    ptr: &[u32],
) -> Array2<F> {
    let (as_, xs) = (slice_of(a), slice_of(x));
    let (m, h) = (a.ncols(), x.ncols());
    let mut out = zeros(ptr.len().saturating_sub(1) * m, h);
    let op = Operands {
        x: &xs,
        a: &as_,
        u: &[],
        ut: &[],
        h,
        m,
        ptr,
    };
    cross_pass(
        op,
        Outputs {
            scores: None,
            mix: None,
            wsum: Some(as_mut_slice(&mut out)),
        },
    );
    out
}

/// Backward of `out = segment_scores(k, q)` for `g = d out` (`N x m`) in
/// one pass: `dk += segment_mix(g, q)` (when `dk` is given; an empty slot
/// is filled) and `dq = segment_weighted_sum(g, k)` (when `want_dq`).
pub(crate) fn segment_scores_grad<F: Float>(
    g: &Array2<F>,
    k: &Array2<F>,
    q: &Array2<F>,
    ptr: &[u32],
    dk: Option<&mut Option<Array2<F>>>,
    want_dq: bool,
) -> Option<Array2<F>> {
    let (gs, ks, qs) = (slice_of(g), slice_of(k), slice_of(q));
    let (n, h) = k.dim();
    let m = g.ncols();
    let op = Operands {
        x: &ks,
        a: &gs,
        u: &qs,
        ut: &[],
        h,
        m,
        ptr,
    };
    let mut dq = want_dq.then(|| zeros(ptr.len().saturating_sub(1) * m, h));
    pass_into_slot(op, dk, n, None, dq.as_mut().map(as_mut_slice));
    dq
}

/// Backward of `out = segment_mix(a, u)` for `g = d out` (`N x h`) in one
/// pass: `(da, du) = (segment_scores(g, u), segment_weighted_sum(a, g))`,
/// each when wanted.
pub(crate) fn segment_mix_grad<F: Float>(
    g: &Array2<F>,
    a: &Array2<F>,
    u: &Array2<F>,
    ptr: &[u32],
    want_da: bool,
    want_du: bool,
) -> (Option<Array2<F>>, Option<Array2<F>>) {
    let (gs, as_, us) = (slice_of(g), slice_of(a), slice_of(u));
    let (n, h) = g.dim();
    let m = a.ncols();
    let mut du = want_du.then(|| zeros(ptr.len().saturating_sub(1) * m, h));
    let op = Operands {
        x: &gs,
        a: &as_,
        u: &us,
        ut: &[],
        h,
        m,
        ptr,
    };
    let wsum = du.as_mut().map(as_mut_slice);
    let da = if want_da {
        let (da, ()) = overwritten(n, m, ptr, |scores| {
            let (scores, mix) = (Some(scores), None);
            cross_pass(op, Outputs { scores, mix, wsum });
        });
        Some(da)
    } else {
        let (scores, mix) = (None, None);
        cross_pass(op, Outputs { scores, mix, wsum });
        None
    };
    (da, du)
}

/// Backward of `out = segment_weighted_sum(a, x)` for `g = d out`
/// (`(G·M) x h`) in one pass: `da = segment_scores(x, g)` (when `want_da`)
/// and `dx += segment_mix(a, g)` (when `dx` is given; an empty slot is
/// filled).
pub(crate) fn segment_weighted_sum_grad<F: Float>(
    g: &Array2<F>,
    a: &Array2<F>,
    x: &Array2<F>,
    ptr: &[u32],
    want_da: bool,
    dx: Option<&mut Option<Array2<F>>>,
) -> Option<Array2<F>> {
    let (gs, as_, xs) = (slice_of(g), slice_of(a), slice_of(x));
    let (n, h) = x.dim();
    let m = a.ncols();
    let op = Operands {
        x: &xs,
        a: &as_,
        u: &gs,
        ut: &[],
        h,
        m,
        ptr,
    };
    if !want_da {
        pass_into_slot(op, dx, n, None, None);
        return None;
    }
    let (da, ()) = overwritten(n, m, ptr, |scores| {
        pass_into_slot(op, dx, n, Some(scores), None);
    });
    Some(da)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_covers_every_graph_and_row_once() {
        // Small graphs grouped, a large one split, empty ones included.
        let ptr = [0u32, 3, 3, 200, 1500, 1600, 1600];
        let tasks = plan(&ptr, TASK_ROWS);
        let mut row = 0;
        let mut graph = 0;
        for t in &tasks {
            assert_eq!(t.rows.0, row, "{tasks:?}");
            assert!(t.rows.1 - t.rows.0 <= TASK_ROWS, "{tasks:?}");
            if t.whole {
                assert_eq!(t.graphs.0, graph, "{tasks:?}");
                graph = t.graphs.1;
            } else {
                assert_eq!(t.graphs.1, t.graphs.0 + 1);
                if t.rows.1 == ptr[t.graphs.1] as usize {
                    graph = t.graphs.1;
                }
            }
            row = t.rows.1;
        }
        assert_eq!((row, graph), (1600, 6));
        // Graph 3 (1300 rows) is split into three parts.
        assert_eq!(tasks.iter().filter(|t| !t.whole).count(), 3);
    }

    #[test]
    fn rows_outside_the_segments_are_left_alone() {
        // Rows 0..2 and 9..12 belong to no segment.
        let (ptr, m, h, rows) = ([2u32, 5, 5, 9], 2, 3, 12);
        let x = Array2::from_shape_vec((rows, h), values(rows * h, 4)).unwrap();
        let a = Array2::from_shape_vec((rows, m), values(rows * m, 5)).unwrap();
        let u = Array2::from_shape_vec((3 * m, h), values(3 * m * h, 6)).unwrap();
        let graph = |v: usize| {
            ptr.windows(2)
                .position(|w| (w[0] as usize..w[1] as usize).contains(&v))
        };
        let scores = segment_scores(&x, &u, &ptr, m);
        let mut mix = Array2::from_elem((rows, h), 0.5);
        segment_mix_add(&mut mix, &a, &u, &ptr);
        for v in 0..rows {
            for j in 0..m {
                let want =
                    graph(v).map_or(0.0, |g| (0..h).map(|c| x[[v, c]] * u[[g * m + j, c]]).sum());
                assert!((scores[[v, j]] - want).abs() < 1e-12, "score ({v}, {j})");
            }
            for c in 0..h {
                let want = 0.5
                    + graph(v).map_or(0.0, |g| (0..m).map(|j| a[[v, j]] * u[[g * m + j, c]]).sum());
                assert!((mix[[v, c]] - want).abs() < 1e-12, "mix ({v}, {c})");
            }
        }
        let ws = segment_weighted_sum(&a, &x, &ptr);
        for g in 0..3 {
            for j in 0..m {
                for c in 0..h {
                    let rows = ptr[g] as usize..ptr[g + 1] as usize;
                    let want: f64 = rows.map(|v| a[[v, j]] * x[[v, c]]).sum();
                    assert!((ws[[g * m + j, c]] - want).abs() < 1e-12, "weighted sum");
                }
            }
        }
    }

    #[test]
    fn overwritten_outputs_zero_what_the_pass_does_not_own() {
        // Rows 2..9 belong to the graphs; the pass writes them, the others
        // are zero.
        let (out, ()) = overwritten::<f64, _>(12, 3, &[2, 5, 9], |o| {
            o[2 * 3..9 * 3].fill(MaybeUninit::new(1.0));
        });
        for ((v, _), &x) in out.indexed_iter() {
            assert_eq!(x, if (2..9).contains(&v) { 1.0 } else { 0.0 }, "row {v}");
        }
        // No graphs, a decreasing `ptr`, or one past the rows: the pass
        // writes nothing and every entry is zero.
        for ptr in [&[][..], &[0], &[4], &[0, 5, 3], &[0, 20]] {
            let (out, ()) = overwritten::<f64, _>(12, 3, ptr, |_| {});
            assert!(out.iter().all(|&x| x == 0.0), "{ptr:?}");
        }
    }

    #[test]
    fn zero_width_node_rows_score_zero() {
        // h = 0: every score is an empty sum.
        let (k, q) = (Array2::<f64>::zeros((5, 0)), Array2::<f64>::zeros((2, 0)));
        let scores = segment_scores(&k, &q, &[0, 2, 5], 1);
        assert_eq!(scores, Array2::<f64>::zeros((5, 1)));
        let g = Array2::<f64>::zeros((5, 0));
        let a = Array2::from_elem((5, 1), 0.5);
        let (da, du) = segment_mix_grad(&g, &a, &q, &[0, 2, 5], true, true);
        assert_eq!(da, Some(Array2::<f64>::zeros((5, 1))));
        assert_eq!(du, Some(Array2::<f64>::zeros((2, 0))));
    }

    #[test]
    fn a_huge_graph_is_split_into_at_most_max_parts() {
        let ptr = [0u32, 1_000_000];
        let tasks = plan(&ptr, TASK_ROWS);
        assert_eq!(tasks.len(), MAX_PARTS);
        assert_eq!(tasks.last().map(|t| t.rows.1), Some(1_000_000));
    }

    /// Pseudo-random values in `[-1, 1)` (a fixed LCG; no dependencies).
    fn values(n: usize, seed: u64) -> Vec<f64> {
        let mut state = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (0..n)
            .map(|_| {
                state = state
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
            })
            .collect()
    }

    /// The row kernels in both instantiations (plain multiply-adds, the
    /// fallback without AVX2/FMA, and fused ones) against plain loops, with
    /// widths that leave partial register blocks (`h = 37`, `m = 19`).
    fn row_kernels_match_plain_loops<const FUSED: bool>() {
        let (m, h, rows) = (19, 37, 7);
        let (x, a, u) = (values(rows * h, 1), values(rows * m, 2), values(m * h, 3));
        let ut = transpose_supernodes(&u, 1, m, h);
        let close = |got: f64, want: f64| (got - want).abs() <= 1e-12 * (1.0 + want.abs());
        // Outputs start as NaN: an entry the kernels leave unwritten, or
        // read when they should only write, shows up as NaN.
        for v in 0..rows {
            let mut s = vec![f64::NAN; m];
            score_row::<f64, FUSED>(as_uninit(&mut s), &x[v * h..(v + 1) * h], &ut, m);
            for j in 0..m {
                let want: f64 = (0..h).map(|c| x[v * h + c] * u[j * h + c]).sum();
                assert!(close(s[j], want), "score ({v}, {j}): {} vs {want}", s[j]);
            }
            if v + 1 < rows {
                let mut s2 = vec![f64::NAN; 2 * m];
                let (x0, x1) = (&x[v * h..(v + 1) * h], &x[(v + 1) * h..(v + 2) * h]);
                score_row_pair::<f64, FUSED>(as_uninit(&mut s2), x0, x1, &ut, m);
                for r in 0..2 {
                    for j in 0..m {
                        let want: f64 = (0..h).map(|c| x[(v + r) * h + c] * u[j * h + c]).sum();
                        let got = s2[r * m + j];
                        assert!(
                            close(got, want),
                            "score pair ({}, {j}): {got} vs {want}",
                            v + r
                        );
                    }
                }
            }
            for accumulate in [false, true] {
                let mut o = vec![if accumulate { 0.5 } else { f64::NAN }; h];
                let av = &a[v * m..(v + 1) * m];
                mix_row::<f64, FUSED>(as_uninit(&mut o), av, &u, accumulate);
                for c in 0..h {
                    let sum: f64 = (0..m).map(|j| a[v * m + j] * u[j * h + c]).sum();
                    let want = if accumulate { 0.5 + sum } else { sum };
                    assert!(close(o[c], want), "mix ({v}, {c}): {} vs {want}", o[c]);
                }
            }
        }
        let mut w = vec![0.25; m * h];
        wsum_rows::<f64, FUSED>(&mut w, &a, &x, 0..rows, m, h);
        for j in 0..m {
            for c in 0..h {
                let want = 0.25 + (0..rows).map(|v| a[v * m + j] * x[v * h + c]).sum::<f64>();
                assert!(close(w[j * h + c], want), "weighted sum ({j}, {c})");
            }
        }
    }

    #[test]
    fn row_kernels_match_plain_loops_unfused() {
        row_kernels_match_plain_loops::<false>();
    }

    #[test]
    fn row_kernels_match_plain_loops_fused() {
        row_kernels_match_plain_loops::<true>();
    }
}
