//! Finite-difference gradient checks (f64, central differences) for every op.

use hdgcn::autograd::gradcheck::check_inputs;
use hdgcn::autograd::{Index, Segments, SparseMatrix, Var};
use hdgcn::backend::{Axis, Backend, Cpu, SegmentReduce};
use ndarray::Array2;
use rand::{Rng, SeedableRng, rngs::StdRng};

mod common;
use common::{assert_ok, rand_mat_wide, weigh};

const H: f64 = 1e-6;

#[test]
fn gradcheck_matmul_all_transposes() {
    let mut rng = StdRng::seed_from_u64(1);
    for (ta, tb) in [(false, false), (false, true), (true, false), (true, true)] {
        let a = if ta {
            rand_mat_wide(&mut rng, 4, 3)
        } else {
            rand_mat_wide(&mut rng, 3, 4)
        };
        let b = if tb {
            rand_mat_wide(&mut rng, 5, 4)
        } else {
            rand_mat_wide(&mut rng, 4, 5)
        };
        let r = check_inputs(&[a, b], |_, v| weigh(&v[0].matmul_t(&v[1], ta, tb)?, 3), H).unwrap();
        assert_ok(&format!("matmul {ta} {tb}"), r);
    }
}

#[test]
fn gradcheck_spmm_and_transpose() {
    let mut rng = StdRng::seed_from_u64(2);
    let dense = Array2::from_shape_fn((5, 4), |_| {
        if rng.random_bool(0.4) {
            rng.random_range(-1.0..1.0)
        } else {
            0.0
        }
    });
    let m = sprs::CsMat::csr_from_dense(dense.view(), 0.0);
    let cpu = Cpu::<f64>::new();
    let s = SparseMatrix::from_csmat(&cpu, &m).unwrap();
    let x = rand_mat_wide(&mut rng, 4, 3);
    assert_ok(
        "spmm",
        check_inputs(
            std::slice::from_ref(&x),
            |_, v| weigh(&s.matmul(&v[0])?, 4),
            H,
        )
        .unwrap(),
    );
    let y = rand_mat_wide(&mut rng, 5, 3);
    assert_ok(
        "spmm^T",
        check_inputs(&[y], |_, v| weigh(&s.matmul_transposed(&v[0])?, 5), H).unwrap(),
    );
}

#[test]
fn gradcheck_binary_with_broadcasting() {
    let mut rng = StdRng::seed_from_u64(3);
    let shapes = [(3, 4), (1, 4), (3, 1), (1, 1)];
    for &sb in &shapes {
        let a = rand_mat_wide(&mut rng, 3, 4);
        let mut b = rand_mat_wide(&mut rng, sb.0, sb.1);
        b.mapv_inplace(|v| {
            if v.abs() < 0.3 {
                v.signum() * 0.5 + v
            } else {
                v
            }
        }); // keep away from 0 for div
        for name in ["add", "sub", "mul", "div"] {
            let f = |_: &_, v: &[Var<Cpu<f64>>]| {
                let out = match name {
                    "add" => v[0].add(&v[1]),
                    "sub" => v[0].sub(&v[1]),
                    "mul" => v[0].mul(&v[1]),
                    _ => v[0].div(&v[1]),
                }?;
                weigh(&out, 6)
            };
            assert_ok(
                &format!("{name} {sb:?}"),
                check_inputs(&[a.clone(), b.clone()], f, H).unwrap(),
            );
            // Broadcast side on the left.
            let g = |_: &_, v: &[Var<Cpu<f64>>]| {
                let out = match name {
                    "add" => v[1].add(&v[0]),
                    "sub" => v[1].sub(&v[0]),
                    "mul" => v[1].mul(&v[0]),
                    _ => v[1].div(&v[0]),
                }?;
                weigh(&out, 7)
            };
            let mut a2 = a.clone();
            a2.mapv_inplace(|v| {
                if v.abs() < 0.3 {
                    v + 0.5 * v.signum()
                } else {
                    v
                }
            });
            assert_ok(
                &format!("{name} left {sb:?}"),
                check_inputs(&[a2, b.clone()], g, H).unwrap(),
            );
        }
    }
}

/// One operand a constant: the backward pass then builds only the other
/// operand's gradient (and may hand it `g` without a copy).
#[test]
fn gradcheck_binary_with_one_constant_operand() {
    let mut rng = StdRng::seed_from_u64(13);
    let shapes = [(3, 4), (1, 4), (3, 1), (1, 1)];
    for &sc in &shapes {
        for &sv in &shapes {
            if sc != (3, 4) && sv != (3, 4) && sc != sv {
                continue; // (1, 4) against (3, 1) does not broadcast to one side
            }
            let x = rand_mat_wide(&mut rng, sv.0, sv.1).mapv(|v| v.signum() * (v.abs() + 0.5));
            let c = rand_mat_wide(&mut rng, sc.0, sc.1).mapv(|v| v.signum() * (v.abs() + 0.5));
            for name in ["add", "sub", "mul", "div"] {
                for const_left in [false, true] {
                    let f = |_: &_, v: &[Var<Cpu<f64>>]| {
                        let k = v[0].tape().constant_array(&c);
                        let (l, r) = if const_left { (&k, &v[0]) } else { (&v[0], &k) };
                        let out = match name {
                            "add" => l.add(r),
                            "sub" => l.sub(r),
                            "mul" => l.mul(r),
                            _ => l.div(r),
                        }?;
                        weigh(&out, 8)
                    };
                    assert_ok(
                        &format!("{name} var {sv:?}, const {sc:?}, const left {const_left}"),
                        check_inputs(std::slice::from_ref(&x), f, H).unwrap(),
                    );
                }
            }
        }
    }
}

#[test]
fn gradcheck_unary_maps() {
    let mut rng = StdRng::seed_from_u64(4);
    // Keep entries away from the kinks of relu-like functions.
    let mut x = rand_mat_wide(&mut rng, 3, 5);
    x.mapv_inplace(|v| if v.abs() < 0.05 { 0.2 } else { v });
    let xpos = x.mapv(|v| v.abs() + 0.1);
    type F = fn(&Var<Cpu<f64>>) -> Var<Cpu<f64>>;
    let cases: Vec<(&str, F)> = vec![
        ("relu", |v| v.relu()),
        ("leaky_relu", |v| v.leaky_relu(0.2)),
        ("elu", |v| v.elu(1.3)),
        ("sigmoid", |v| v.sigmoid()),
        ("tanh", |v| v.tanh()),
        ("gelu", |v| v.gelu()),
        ("exp", |v| v.exp()),
        ("neg", |v| v.neg()),
        ("square", |v| v.square()),
        ("affine", |v| v.affine(-2.5, 0.7)),
    ];
    for (name, f) in cases {
        assert_ok(
            name,
            check_inputs(std::slice::from_ref(&x), |_, v| weigh(&f(&v[0]), 8), H).unwrap(),
        );
    }
    assert_ok(
        "log",
        check_inputs(&[xpos], |_, v| weigh(&v[0].log(), 8), H).unwrap(),
    );
}

#[test]
fn gradcheck_reductions_softmax_layernorm() {
    let mut rng = StdRng::seed_from_u64(5);
    let x = rand_mat_wide(&mut rng, 4, 6);
    for axis in [Axis::Rows, Axis::Cols] {
        assert_ok(
            "sum_axis",
            check_inputs(
                std::slice::from_ref(&x),
                |_, v| weigh(&v[0].sum_axis(axis), 9),
                H,
            )
            .unwrap(),
        );
        assert_ok(
            "softmax",
            check_inputs(
                std::slice::from_ref(&x),
                |_, v| weigh(&v[0].softmax(axis), 9),
                H,
            )
            .unwrap(),
        );
        assert_ok(
            "log_softmax",
            check_inputs(
                std::slice::from_ref(&x),
                |_, v| weigh(&v[0].log_softmax(axis), 9),
                H,
            )
            .unwrap(),
        );
    }
    assert_ok(
        "mean_all",
        check_inputs(
            std::slice::from_ref(&x),
            |_, v| Ok(v[0].square().mean_all()),
            H,
        )
        .unwrap(),
    );
    assert_ok(
        "layer_norm",
        check_inputs(
            std::slice::from_ref(&x),
            |_, v| weigh(&v[0].layer_norm(1e-5), 10),
            H,
        )
        .unwrap(),
    );
}

#[test]
fn gradcheck_dropout_concat_slice_gather() {
    let mut rng = StdRng::seed_from_u64(6);
    let x = rand_mat_wide(&mut rng, 5, 4);
    let y = rand_mat_wide(&mut rng, 5, 2);
    assert_ok(
        "dropout",
        check_inputs(
            std::slice::from_ref(&x),
            |_, v| weigh(&v[0].dropout(0.4)?, 11),
            H,
        )
        .unwrap(),
    );
    assert_ok(
        "concat cols",
        check_inputs(
            &[x.clone(), y.clone()],
            |_, v| weigh(&Var::concat(&[&v[0], &v[1]], Axis::Cols)?, 12),
            H,
        )
        .unwrap(),
    );
    let z = rand_mat_wide(&mut rng, 2, 4);
    assert_ok(
        "concat rows",
        check_inputs(
            &[x.clone(), z],
            |_, v| weigh(&Var::concat(&[&v[1], &v[0]], Axis::Rows)?, 13),
            H,
        )
        .unwrap(),
    );
    assert_ok(
        "slice rows",
        check_inputs(
            std::slice::from_ref(&x),
            |_, v| weigh(&v[0].slice(Axis::Rows, 1, 4)?, 14),
            H,
        )
        .unwrap(),
    );
    assert_ok(
        "slice cols",
        check_inputs(
            std::slice::from_ref(&x),
            |_, v| weigh(&v[0].slice(Axis::Cols, 0, 3)?, 14),
            H,
        )
        .unwrap(),
    );
    let cpu = Cpu::<f64>::new();
    // Repeated indices: gradients must accumulate.
    let idx = Index::new(&cpu, &[4, 0, 4, 2]).unwrap();
    assert_ok(
        "gather",
        check_inputs(
            std::slice::from_ref(&x),
            |_, v| weigh(&v[0].gather_rows(&idx)?, 15),
            H,
        )
        .unwrap(),
    );
}

#[test]
fn gradcheck_segment_ops_with_empty_and_single_segments() {
    let mut rng = StdRng::seed_from_u64(7);
    let cpu = Cpu::<f64>::new();
    // Segments: [0,3) three rows, [3,3) empty, [3,4) single, [4,7) three rows.
    let seg = Segments::new(&cpu, &[0, 3, 3, 4, 7]).unwrap();
    let x = rand_mat_wide(&mut rng, 7, 3);
    for op in [SegmentReduce::Sum, SegmentReduce::Mean, SegmentReduce::Max] {
        assert_ok(
            &format!("segment {op:?}"),
            check_inputs(
                std::slice::from_ref(&x),
                |_, v| weigh(&v[0].segment_reduce(&seg, op)?, 16),
                H,
            )
            .unwrap(),
        );
    }
    assert_ok(
        "segment_softmax",
        check_inputs(
            std::slice::from_ref(&x),
            |_, v| weigh(&v[0].segment_softmax(&seg)?, 17),
            H,
        )
        .unwrap(),
    );
    let g = rand_mat_wide(&mut rng, 4, 3);
    assert_ok(
        "segment_broadcast",
        check_inputs(&[g], |_, v| weigh(&v[0].segment_broadcast(&seg)?, 18), H).unwrap(),
    );
}

#[test]
fn gradcheck_losses() {
    let mut rng = StdRng::seed_from_u64(8);
    let cpu = Cpu::<f64>::new();
    let logits = rand_mat_wide(&mut rng, 6, 4);
    let mask = Index::new(&cpu, &[0, 2, 5]).unwrap();
    let targets = Index::new(&cpu, &[3, 0, 1]).unwrap();
    assert_ok(
        "cross_entropy_masked",
        check_inputs(
            std::slice::from_ref(&logits),
            |_, v| v[0].cross_entropy_masked(&mask, &targets),
            H,
        )
        .unwrap(),
    );
    let all = Index::new(&cpu, &[3, 0, 1, 1, 2, 3]).unwrap();
    for eps in [0.0, 0.2, 1.0] {
        assert_ok(
            "nll_smoothed",
            check_inputs(
                std::slice::from_ref(&logits),
                |_, v| v[0].log_softmax(Axis::Cols).nll_smoothed(&all, eps),
                H,
            )
            .unwrap(),
        );
    }
    let other = rand_mat_wide(&mut rng, 6, 4);
    assert_ok(
        "symmetric_kl",
        check_inputs(
            &[logits.clone(), other],
            |_, v| {
                v[0].log_softmax(Axis::Cols)
                    .symmetric_kl(&v[1].log_softmax(Axis::Cols))
            },
            H,
        )
        .unwrap(),
    );
    let y = Array2::from_shape_fn((6, 4), |_| if rng.random_bool(0.5) { 1.0 } else { 0.0 });
    assert_ok(
        "bce",
        check_inputs(&[logits], |_, v| v[0].bce_with_logits(&y), H).unwrap(),
    );
}

#[test]
fn forward_values_match_hand_computation() {
    let cpu = Cpu::<f64>::new();
    let tape = hdgcn::autograd::Tape::new(&cpu);
    let x = tape.constant_array(&ndarray::arr2(&[[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]]));
    let sm = x.softmax(Axis::Cols).to_array();
    let e = [1f64.exp(), 2f64.exp(), 3f64.exp()];
    let s: f64 = e.iter().sum();
    for j in 0..3 {
        assert!((sm[[0, j]] - e[j] / s).abs() < 1e-15);
        assert!((sm[[1, j]] - 1.0 / 3.0).abs() < 1e-15);
    }
    let ln = x.layer_norm(0.0).to_array();
    let sd = (2.0f64 / 3.0).sqrt();
    assert!((ln[[0, 0]] + 1.0 / sd).abs() < 1e-12 && ln[[0, 1]].abs() < 1e-12);
    // Cross-entropy of uniform logits is ln(C).
    let z = tape.constant_array(&Array2::zeros((2, 4)));
    let t = Index::new(&cpu, &[1, 3]).unwrap();
    let all = Index::new(&cpu, &[0, 1]).unwrap();
    let ce = z.cross_entropy_masked(&all, &t).unwrap().scalar().unwrap();
    assert!((ce - 4f64.ln()).abs() < 1e-14);
    // BCE with logit 0 is ln 2 whatever the target.
    let bce = z
        .bce_with_logits(&Array2::from_elem((2, 4), 1.0))
        .unwrap()
        .scalar()
        .unwrap();
    assert!((bce - 2f64.ln()).abs() < 1e-14);
    let seg = Segments::new(&cpu, &[0, 1, 2]).unwrap();
    let mx = x
        .segment_reduce(&seg, SegmentReduce::Max)
        .unwrap()
        .to_array();
    assert_eq!(mx, ndarray::arr2(&[[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]]));
}

#[test]
fn label_smoothing_is_the_cross_entropy_against_the_smoothed_targets() {
    let mut rng = StdRng::seed_from_u64(21);
    let cpu = Cpu::<f64>::new();
    let tape = hdgcn::autograd::Tape::new(&cpu);
    let (rows, classes) = (5, 3);
    let z = rand_mat_wide(&mut rng, rows, classes);
    let y = [2usize, 0, 1, 1, 2];
    let targets = Index::new(&cpu, &y).unwrap();
    let logp = tape.constant_array(&z).log_softmax(Axis::Cols);
    for eps in [0.0, 0.1, 0.35, 1.0] {
        // Independent: q = (1 - ε)·onehot + ε/C, loss = mean_r Σ_c -q_rc log softmax(z_r)_c.
        let mut want = 0.0;
        for r in 0..rows {
            let lse = z.row(r).iter().map(|v| v.exp()).sum::<f64>().ln();
            for c in 0..classes {
                let q = eps / classes as f64 + if c == y[r] { 1.0 - eps } else { 0.0 };
                want -= q * (z[[r, c]] - lse);
            }
        }
        want /= rows as f64;
        let got = logp.nll_smoothed(&targets, eps).unwrap().scalar().unwrap();
        assert!((got - want).abs() < 1e-14, "ε = {eps}: {got} vs {want}");
    }
    let plain = logp.nll(&targets).unwrap().scalar().unwrap();
    assert_eq!(
        logp.nll_smoothed(&targets, 0.0).unwrap().scalar().unwrap(),
        plain
    );
    for eps in [-1e-9, 1.0 + 1e-9, f64::NAN, f64::INFINITY] {
        let err = logp.nll_smoothed(&targets, eps).unwrap_err();
        assert!(
            matches!(&err, hdgcn::Error::InvalidConfig(m) if m.contains("label_smoothing")),
            "{eps}: {err:?}"
        );
    }
}

#[test]
fn symmetric_kl_is_the_mean_of_both_divergences() {
    let mut rng = StdRng::seed_from_u64(22);
    let cpu = Cpu::<f64>::new();
    let tape = hdgcn::autograd::Tape::new(&cpu);
    let (rows, classes) = (4, 5);
    let (a, b) = (
        rand_mat_wide(&mut rng, rows, classes),
        rand_mat_wide(&mut rng, rows, classes),
    );
    // Independent: softmax by hand, then KL(p‖q) = Σ p ln(p/q) both ways.
    let softmax = |z: &Array2<f64>, r: usize| -> Vec<f64> {
        let e: Vec<f64> = z.row(r).iter().map(|v| v.exp()).collect();
        let s: f64 = e.iter().sum();
        e.iter().map(|v| v / s).collect()
    };
    let mut want = 0.0;
    for r in 0..rows {
        let (p, q) = (softmax(&a, r), softmax(&b, r));
        for c in 0..classes {
            want += 0.5 * (p[c] * (p[c] / q[c]).ln() + q[c] * (q[c] / p[c]).ln());
        }
    }
    want /= rows as f64;
    let lp = tape.constant_array(&a).log_softmax(Axis::Cols);
    let lq = tape.constant_array(&b).log_softmax(Axis::Cols);
    let got = lp.symmetric_kl(&lq).unwrap().scalar().unwrap();
    assert!((got - want).abs() < 1e-14, "{got} vs {want}");
    assert!(got > 0.0);
    assert_eq!(lq.symmetric_kl(&lp).unwrap().scalar().unwrap(), got);
    assert_eq!(lp.symmetric_kl(&lp).unwrap().scalar().unwrap(), 0.0);
    let short = tape
        .constant_array(&rand_mat_wide(&mut rng, rows - 1, classes))
        .log_softmax(Axis::Cols);
    assert!(matches!(
        lp.symmetric_kl(&short),
        Err(hdgcn::Error::ShapeMismatch { .. })
    ));
    let empty = tape.constant_array(&Array2::zeros((0, classes)));
    assert!(matches!(
        empty.symmetric_kl(&empty),
        Err(hdgcn::Error::Empty(_))
    ));
}

#[test]
fn sparse_values_must_fit_the_backend_element_type() {
    let m = |v: f64| sprs::CsMat::new((1, 2), vec![0, 1], vec![1], vec![v]);
    let f32s = Cpu::<f32>::new();
    let err = SparseMatrix::from_csmat(&f32s, &m(1e300)).unwrap_err();
    assert!(
        matches!(err, hdgcn::Error::NonFinite { value, .. } if value == 1e300),
        "{err:?}"
    );
    assert!(err.to_string().contains("overflows f32"), "{err}");
    assert!(SparseMatrix::from_csmat(&f32s, &m(3e38)).is_ok());
    assert!(SparseMatrix::from_csmat(&Cpu::<f64>::new(), &m(1e300)).is_ok());
    let err = SparseMatrix::from_csmat(&f32s, &m(f64::NAN)).unwrap_err();
    assert!(matches!(err, hdgcn::Error::NonFinite { .. }), "{err:?}");
}

#[test]
fn batch_vector_segments_check_the_graph_count() {
    let cpu = Cpu::<f64>::new();
    let seg = Segments::from_batch_vector(&cpu, &[0, 0, 2], 3).unwrap();
    assert_eq!(seg.ptr(), &[0, 2, 2, 3], "graph 1 is empty");
    assert!(Segments::from_batch_vector(&cpu, &[], 1).is_ok());
    for (batch, n) in [
        (&[0usize, 1][..], usize::MAX),
        (&[0, 0][..], 3),
        (&[][..], 2),
    ] {
        let err = Segments::from_batch_vector(&cpu, batch, n).unwrap_err();
        assert!(matches!(err, hdgcn::Error::InvalidConfig(_)), "{err:?}");
    }
    let err = Segments::from_batch_vector(&cpu, &[1, 0], 2).unwrap_err();
    assert!(err.to_string().contains("sorted"), "{err}");
}

#[test]
fn shape_errors_are_reported_not_panics() {
    let cpu = Cpu::<f64>::new();
    let tape = hdgcn::autograd::Tape::new(&cpu);
    let a = tape.constant_array(&Array2::zeros((2, 3)));
    let b = tape.constant_array(&Array2::zeros((2, 3)));
    assert!(matches!(
        a.matmul(&b),
        Err(hdgcn::Error::ShapeMismatch { .. })
    ));
    let c = tape.constant_array(&Array2::zeros((3, 2)));
    assert!(matches!(a.add(&c), Err(hdgcn::Error::ShapeMismatch { .. })));
    let idx = Index::new(&cpu, &[5]).unwrap();
    assert!(matches!(
        a.gather_rows(&idx),
        Err(hdgcn::Error::IndexOutOfRange { .. })
    ));
    let t = Index::new(&cpu, &[0, 7]).unwrap();
    assert!(matches!(
        a.nll(&t),
        Err(hdgcn::Error::IndexOutOfRange { .. })
    ));
    assert!(matches!(
        a.dropout(1.0),
        Err(hdgcn::Error::InvalidConfig(_))
    ));
    assert!(matches!(
        a.dropout(f64::NAN),
        Err(hdgcn::Error::InvalidConfig(_))
    ));
    assert!(Segments::<Cpu<f64>>::new(&cpu, &[0, 3, 2]).is_err());
    let seg = Segments::new(&cpu, &[0, 1]).unwrap();
    assert!(matches!(
        a.segment_reduce(&seg, SegmentReduce::Sum),
        Err(hdgcn::Error::ShapeMismatch { .. })
    ));
    assert!(a.sum_all().backward().is_err()); // depends on no parameter
    let inf = hdgcn::autograd::Tape::inference(&cpu);
    let x = inf.input(cpu.upload(Array2::<f64>::zeros((1, 1)).view()));
    assert!(x.backward().is_err());
    assert_eq!(inf.len(), 0, "inference tapes record nothing");
}
