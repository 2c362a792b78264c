//! Node–supernode ops (`segment_scores`, `segment_mix`,
//! `segment_weighted_sum`, `reshape`): values against plain loops, gradient
//! checks (f64 central differences) and input validation.

use hdgcn::Error;
use hdgcn::autograd::gradcheck::check_inputs;
use hdgcn::autograd::{Segments, Tape, Var};
use hdgcn::backend::{Axis, Cpu};
use ndarray::Array2;
use rand::{SeedableRng, rngs::StdRng};

mod common;
use common::{assert_ok, rand_mat_wide, weigh};

const H: f64 = 1e-6;

fn graph_of(ptr: &[usize], v: usize) -> usize {
    (0..ptr.len() - 1)
        .find(|&g| ptr[g] <= v && v < ptr[g + 1])
        .unwrap()
}

/// Offsets with an empty graph and a single-node graph.
const PTR: [usize; 5] = [0, 3, 3, 4, 8];
const M: usize = 3;

#[test]
fn values_match_plain_loops() {
    let cpu = Cpu::<f64>::new();
    let mut rng = StdRng::seed_from_u64(1);
    let (n, g, d, h) = (8, 4, 5, 4);
    let k = rand_mat_wide(&mut rng, n, d);
    let q = rand_mat_wide(&mut rng, g * M, d);
    let a = rand_mat_wide(&mut rng, n, M);
    let u = rand_mat_wide(&mut rng, g * M, h);
    let x = rand_mat_wide(&mut rng, n, h);
    let seg = Segments::new(&cpu, &PTR).unwrap();
    let tape = Tape::new(&cpu);
    let (kv, qv, av, uv, xv) = (
        tape.constant_array(&k),
        tape.constant_array(&q),
        tape.constant_array(&a),
        tape.constant_array(&u),
        tape.constant_array(&x),
    );
    let e = kv.segment_scores(&qv, &seg, M).unwrap().to_array();
    let mix = av.segment_mix(&uv, &seg).unwrap().to_array();
    let ws = av.segment_weighted_sum(&xv, &seg).unwrap().to_array();
    for v in 0..n {
        let gv = graph_of(&PTR, v);
        for j in 0..M {
            let want: f64 = (0..d).map(|c| k[[v, c]] * q[[gv * M + j, c]]).sum();
            assert!((e[[v, j]] - want).abs() < 1e-12);
        }
        for c in 0..h {
            let want: f64 = (0..M).map(|j| a[[v, j]] * u[[gv * M + j, c]]).sum();
            assert!((mix[[v, c]] - want).abs() < 1e-12);
        }
    }
    assert_eq!(ws.dim(), (g * M, h));
    for gi in 0..g {
        for j in 0..M {
            for c in 0..h {
                let want: f64 = (PTR[gi]..PTR[gi + 1]).map(|v| a[[v, j]] * x[[v, c]]).sum();
                assert!((ws[[gi * M + j, c]] - want).abs() < 1e-12);
            }
        }
    }
    // The empty graph (g = 1) gets zero supernode sums.
    assert!(
        ws.slice(ndarray::s![M..2 * M, ..])
            .iter()
            .all(|&v| v == 0.0)
    );
}

#[test]
fn large_inputs_take_the_parallel_paths_and_agree() {
    // Big enough to cross the parallel thresholds, small enough for a loop check.
    let cpu = Cpu::<f64>::new();
    let mut rng = StdRng::seed_from_u64(2);
    let ptr = [0, 6000, 6001, 9000];
    let (n, g, d) = (9000, 3, 16);
    let k = rand_mat_wide(&mut rng, n, d);
    let q = rand_mat_wide(&mut rng, g * M, d);
    let seg = Segments::new(&cpu, &ptr).unwrap();
    let tape = Tape::new(&cpu);
    let (kv, qv) = (tape.constant_array(&k), tape.constant_array(&q));
    let e = kv.segment_scores(&qv, &seg, M).unwrap();
    let ws = e.segment_weighted_sum(&kv, &seg).unwrap().to_array();
    let mix = e.segment_mix(&qv, &seg).unwrap().to_array();
    let ea = e.to_array();
    for gi in 0..g {
        for j in 0..M {
            for c in 0..d {
                let want: f64 = (ptr[gi]..ptr[gi + 1]).map(|v| ea[[v, j]] * k[[v, c]]).sum();
                let err = (ws[[gi * M + j, c]] - want).abs() / want.abs().max(1.0);
                assert!(err < 1e-12, "weighted sum {gi} {j} {c}: {err}");
            }
        }
    }
    for v in (0..n).step_by(97) {
        let gv = graph_of(&ptr, v);
        for c in 0..d {
            let want: f64 = (0..M).map(|j| ea[[v, j]] * q[[gv * M + j, c]]).sum();
            assert!((mix[[v, c]] - want).abs() < 1e-10);
        }
    }
}

/// Graphs of more than 512 nodes are split into parts whose weighted sums
/// are added up afterwards; small graphs are grouped into tasks. Both
/// plans, forward and backward (whose kernels fill a gradient slot or add
/// into it), against the same products written with dense `matmul`s per
/// graph.
#[test]
fn large_and_many_small_graphs_match_dense_products_with_gradients() {
    let cpu = Cpu::<f64>::new();
    let d = 24;
    let many_small: Vec<usize> = (0..=60).map(|i| i * 50).collect();
    // The last graph is split into 40 parts, spread over the threads.
    for ptr in [
        vec![0, 1000],
        vec![0, 700, 700, 1300],
        many_small,
        vec![0, 20_000],
    ] {
        let (n, g) = (*ptr.last().unwrap(), ptr.len() - 1);
        let mut rng = StdRng::seed_from_u64(n as u64 + g as u64);
        let (k, q, u) = (
            rand_mat_wide(&mut rng, n, d),
            rand_mat_wide(&mut rng, g * M, d),
            rand_mat_wide(&mut rng, g * M, d),
        );
        let seg = Segments::new(&cpu, &ptr).unwrap();
        // Segment ops: scores E, then E U and Eᵀ K per graph.
        let tape = Tape::new(&cpu);
        let (kv, qv, uv) = (
            tape.input(k.clone()),
            tape.input(q.clone()),
            tape.input(u.clone()),
        );
        let e = kv.segment_scores(&qv, &seg, M).unwrap();
        let mix = e.segment_mix(&uv, &seg).unwrap();
        let ws = e.segment_weighted_sum(&kv, &seg).unwrap();
        let loss = weigh(&mix, 1)
            .unwrap()
            .add(&weigh(&ws, 2).unwrap())
            .unwrap();
        let grads = loss.backward().unwrap();
        let got = [grads.wrt(&kv), grads.wrt(&qv), grads.wrt(&uv)].map(|t| t.unwrap().clone());
        let (mix, ws) = (mix.to_array(), ws.to_array());
        // The same with dense products, graph by graph.
        let tape = Tape::new(&cpu);
        let (kd, qd, ud) = (
            tape.input(k.clone()),
            tape.input(q.clone()),
            tape.input(u.clone()),
        );
        let (mut mix_parts, mut ws_parts) = (Vec::new(), Vec::new());
        for gi in 0..g {
            let (lo, hi) = (ptr[gi], ptr[gi + 1]);
            let qg = qd.slice(Axis::Rows, gi * M, (gi + 1) * M).unwrap();
            let ug = ud.slice(Axis::Rows, gi * M, (gi + 1) * M).unwrap();
            if hi == lo {
                ws_parts.push(qg.scale(0.0));
                continue;
            }
            let kg = kd.slice(Axis::Rows, lo, hi).unwrap();
            let eg = kg.matmul_t(&qg, false, true).unwrap();
            mix_parts.push(eg.matmul(&ug).unwrap());
            ws_parts.push(eg.matmul_t(&kg, true, false).unwrap());
        }
        let mix_d = Var::concat(&mix_parts.iter().collect::<Vec<_>>(), Axis::Rows).unwrap();
        let ws_d = Var::concat(&ws_parts.iter().collect::<Vec<_>>(), Axis::Rows).unwrap();
        let loss_d = weigh(&mix_d, 1)
            .unwrap()
            .add(&weigh(&ws_d, 2).unwrap())
            .unwrap();
        let grads_d = loss_d.backward().unwrap();
        let want =
            [grads_d.wrt(&kd), grads_d.wrt(&qd), grads_d.wrt(&ud)].map(|t| t.unwrap().clone());
        let close = |a: &Array2<f64>, b: &Array2<f64>| {
            a.dim() == b.dim()
                && a.iter()
                    .zip(b)
                    .all(|(x, y)| (x - y).abs() <= 1e-9 * (1.0 + y.abs()))
        };
        assert!(close(&mix, &mix_d.to_array()), "{ptr:?}: segment_mix");
        assert!(
            close(&ws, &ws_d.to_array()),
            "{ptr:?}: segment_weighted_sum"
        );
        for (name, (a, b)) in ["k", "q", "u"].iter().zip(got.iter().zip(&want)) {
            assert!(close(a, b), "{ptr:?}: gradient of {name}");
        }
    }
}

#[test]
fn gradcheck_segment_scores() {
    let cpu = Cpu::<f64>::new();
    let seg = Segments::new(&cpu, &PTR).unwrap();
    let mut rng = StdRng::seed_from_u64(3);
    let k = rand_mat_wide(&mut rng, 8, 5);
    let q = rand_mat_wide(&mut rng, 4 * M, 5);
    let r = check_inputs(
        &[k, q],
        |_, v| weigh(&v[0].segment_scores(&v[1], &seg, M)?, 4),
        H,
    )
    .unwrap();
    assert_ok("segment_scores", r);
}

#[test]
fn gradcheck_segment_mix() {
    let cpu = Cpu::<f64>::new();
    let seg = Segments::new(&cpu, &PTR).unwrap();
    let mut rng = StdRng::seed_from_u64(5);
    let a = rand_mat_wide(&mut rng, 8, M);
    let u = rand_mat_wide(&mut rng, 4 * M, 4);
    let r = check_inputs(&[a, u], |_, v| weigh(&v[0].segment_mix(&v[1], &seg)?, 6), H).unwrap();
    assert_ok("segment_mix", r);
}

#[test]
fn gradcheck_segment_weighted_sum() {
    let cpu = Cpu::<f64>::new();
    let seg = Segments::new(&cpu, &PTR).unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    let a = rand_mat_wide(&mut rng, 8, M);
    let x = rand_mat_wide(&mut rng, 8, 4);
    let r = check_inputs(
        &[a, x],
        |_, v| weigh(&v[0].segment_weighted_sum(&v[1], &seg)?, 8),
        H,
    )
    .unwrap();
    assert_ok("segment_weighted_sum", r);
}

#[test]
fn gradcheck_reshape_and_chained_ops() {
    let cpu = Cpu::<f64>::new();
    let seg = Segments::new(&cpu, &PTR).unwrap();
    let mut rng = StdRng::seed_from_u64(9);
    let x = rand_mat_wide(&mut rng, 4, 2 * M); // G x (M·2) -> (G·M) x 2
    let k = rand_mat_wide(&mut rng, 8, 2);
    let r = check_inputs(
        &[x, k],
        |_, v| {
            let q = v[0].reshape(4 * M, 2)?;
            let e = v[1].segment_scores(&q, &seg, M)?;
            let s = e.segment_weighted_sum(&v[1], &seg)?;
            weigh(&e.segment_mix(&s, &seg)?, 10)
        },
        H,
    )
    .unwrap();
    assert_ok("reshape + chain", r);
}

#[test]
fn reshape_is_row_major() {
    let cpu = Cpu::<f64>::new();
    let tape = Tape::new(&cpu);
    let x = tape.constant_array(&ndarray::arr2(&[[1.0, 2.0, 3.0, 4.0]]));
    let y = x.reshape(2, 2).unwrap().to_array();
    assert_eq!(y, ndarray::arr2(&[[1.0, 2.0], [3.0, 4.0]]));
    assert!(matches!(x.reshape(3, 1), Err(Error::ShapeMismatch { .. })));
}

#[test]
fn shape_mismatches_are_errors() {
    let cpu = Cpu::<f64>::new();
    let seg = Segments::new(&cpu, &PTR).unwrap();
    let tape = Tape::new(&cpu);
    let k = tape.constant_array(&Array2::zeros((8, 5)));
    let q_bad_rows = tape.constant_array(&Array2::zeros((4 * M - 1, 5)));
    let q_bad_cols = tape.constant_array(&Array2::zeros((4 * M, 4)));
    let k_bad = tape.constant_array(&Array2::zeros((7, 5)));
    let q = tape.constant_array(&Array2::zeros((4 * M, 5)));
    for r in [
        k.segment_scores(&q_bad_rows, &seg, M),
        k.segment_scores(&q_bad_cols, &seg, M),
        k_bad.segment_scores(&q, &seg, M),
    ] {
        assert!(matches!(r, Err(Error::ShapeMismatch { .. })), "{r:?}");
    }
    assert!(matches!(
        k.segment_scores(&q, &seg, 0),
        Err(Error::InvalidConfig(_))
    ));
    let a = tape.constant_array(&Array2::zeros((8, M)));
    let u_bad = tape.constant_array(&Array2::zeros((4 * M + 1, 2)));
    assert!(matches!(
        a.segment_mix(&u_bad, &seg),
        Err(Error::ShapeMismatch { .. })
    ));
    let x_bad = tape.constant_array(&Array2::zeros((9, 2)));
    assert!(matches!(
        a.segment_weighted_sum(&x_bad, &seg),
        Err(Error::ShapeMismatch { .. })
    ));
    let other = Tape::new(&cpu);
    let q_other = other.constant_array(&Array2::zeros((4 * M, 5)));
    assert!(matches!(
        k.segment_scores(&q_other, &seg, M),
        Err(Error::Autograd(_))
    ));
}
