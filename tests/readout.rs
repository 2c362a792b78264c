//! Readouts: values against dense per-graph references, batch == graphs one
//! at a time, empty graphs, finite-difference gradients (single-node graphs
//! included), and invariance to the node order within each graph.

use hdgcn::Error;
use hdgcn::autograd::gradcheck::{check_inputs, check_params};
use hdgcn::autograd::{Segments, Tape, Var};
use hdgcn::backend::Cpu;
use hdgcn::readout::{
    AttentionPooling, GatedReadout, MaxReadout, MeanMaxReadout, MeanReadout, Readout, SumReadout,
};
use ndarray::{Array1, Array2, Axis, s};
use rand::{SeedableRng, rngs::StdRng};

mod common;
use common::{ptr_of, rand_mat};

type C = Cpu<f64>;

/// Graph sizes of the test batch: a single-node graph in the middle and at the end.
const SIZES: [usize; 4] = [3, 1, 4, 1];

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

fn mean_max(h: &Array2<f64>) -> Array1<f64> {
    let mean = h.mean_axis(Axis(0)).unwrap();
    let max = h.fold_axis(Axis(0), f64::NEG_INFINITY, |a, &b| a.max(b));
    mean + max
}

fn linear(x: &Array2<f64>, lin: &hdgcn::nn::Linear<C>) -> Array2<f64> {
    let mut y = x.dot(&lin.weight.to_array());
    if let Some(b) = &lin.bias {
        y += &b.to_array();
    }
    y
}

/// Dense reference of one graph's readout, node states `h` (`n x F`).
fn reference(
    kind: &str,
    h: &Array2<f64>,
    gated: &GatedReadout<C>,
    att: &AttentionPooling<C>,
) -> Array1<f64> {
    match kind {
        "sum" => h.sum_axis(Axis(0)),
        "mean" => h.mean_axis(Axis(0)).unwrap(),
        "max" => h.fold_axis(Axis(0), f64::NEG_INFINITY, |a, &b| a.max(b)),
        "meanmax" => mean_max(h),
        "gated" => {
            let g = linear(h, &gated.f1).mapv(sigmoid);
            let v = linear(h, &gated.f2).mapv(f64::tanh);
            mean_max(&(g * v))
        }
        "attention" => {
            let score = linear(h, &att.gate_nn.lins[0]).column(0).to_owned();
            let m = score.fold(f64::NEG_INFINITY, |a, &b| a.max(b));
            let e = score.mapv(|v| (v - m).exp());
            let a = &e / e.sum();
            let x = linear(h, &att.nn.as_ref().unwrap().lins[0]);
            x.t().dot(&a)
        }
        _ => unreachable!(),
    }
}

struct Readouts {
    gated: GatedReadout<C>,
    att: AttentionPooling<C>,
}

const F: usize = 3;
const KINDS: [&str; 6] = ["sum", "mean", "max", "meanmax", "gated", "attention"];

fn readouts(rng: &mut StdRng) -> Readouts {
    let cpu = C::new();
    Readouts {
        gated: GatedReadout::new(&cpu, F, rng).unwrap(),
        att: AttentionPooling::linear(&cpu, F, Some(2), rng).unwrap(),
    }
}

fn get<'a>(r: &'a Readouts, kind: &str) -> &'a dyn Readout<C> {
    match kind {
        "sum" => &SumReadout,
        "mean" => &MeanReadout,
        "max" => &MaxReadout,
        "meanmax" => &MeanMaxReadout,
        "gated" => &r.gated,
        "attention" => &r.att,
        _ => unreachable!(),
    }
}

fn run(r: &dyn Readout<C>, h: &Array2<f64>, ptr: &[usize]) -> hdgcn::Result<Array2<f64>> {
    let cpu = C::new();
    let tape = Tape::new(&cpu);
    let seg = Segments::new(&cpu, ptr)?;
    Ok(r.forward(&tape, &tape.constant(h.clone()), &seg)?
        .to_array())
}

#[test]
fn values_match_dense_reference_and_batch_equals_one_at_a_time() {
    let mut rng = StdRng::seed_from_u64(3);
    let r = readouts(&mut rng);
    let ptr = ptr_of(&SIZES);
    let h = rand_mat(&mut rng, *ptr.last().unwrap(), F);
    for kind in KINDS {
        let ro = get(&r, kind);
        let out = run(ro, &h, &ptr).unwrap();
        assert_eq!(out.dim(), (SIZES.len(), ro.out_channels(F)), "{kind}");
        for g in 0..SIZES.len() {
            let block = h.slice(s![ptr[g]..ptr[g + 1], ..]).to_owned();
            let expect = reference(kind, &block, &r.gated, &r.att);
            let got = out.row(g);
            for (a, b) in got.iter().zip(expect.iter()) {
                assert!((a - b).abs() < 1e-12, "{kind} graph {g}: {got} vs {expect}");
            }
            let alone = run(ro, &block, &[0, block.nrows()]).unwrap();
            assert_eq!(
                alone.row(0),
                got,
                "{kind} graph {g}: batch differs from alone"
            );
        }
    }
}

#[test]
fn sum_mean_max_on_known_values() {
    let h = ndarray::arr2(&[[1.0, 4.0], [3.0, -2.0], [-5.0, 0.5]]);
    let ptr = [0, 2, 3];
    assert_eq!(
        run(&SumReadout, &h, &ptr).unwrap(),
        ndarray::arr2(&[[4.0, 2.0], [-5.0, 0.5]])
    );
    assert_eq!(
        run(&MeanReadout, &h, &ptr).unwrap(),
        ndarray::arr2(&[[2.0, 1.0], [-5.0, 0.5]])
    );
    assert_eq!(
        run(&MaxReadout, &h, &ptr).unwrap(),
        ndarray::arr2(&[[3.0, 4.0], [-5.0, 0.5]])
    );
    assert_eq!(
        run(&MeanMaxReadout, &h, &ptr).unwrap(),
        ndarray::arr2(&[[5.0, 5.0], [-10.0, 1.0]])
    );
}

#[test]
fn empty_graph_is_an_error_naming_the_graph() {
    let mut rng = StdRng::seed_from_u64(4);
    let r = readouts(&mut rng);
    let h = rand_mat(&mut rng, 5, F);
    for kind in KINDS {
        match run(get(&r, kind), &h, &[0, 2, 2, 5]) {
            Err(Error::Empty(msg)) => assert!(msg.contains("graph 1"), "{kind}: {msg}"),
            other => panic!("{kind}: expected Error::Empty, got {other:?}"),
        }
    }
}

#[test]
fn wrong_shapes_are_errors() {
    let mut rng = StdRng::seed_from_u64(5);
    let r = readouts(&mut rng);
    for kind in KINDS {
        // Rows do not match the segments.
        let h = rand_mat(&mut rng, 4, F);
        assert!(
            matches!(
                run(get(&r, kind), &h, &[0, 2, 5]),
                Err(Error::ShapeMismatch { .. })
            ),
            "{kind}"
        );
    }
    let h = rand_mat(&mut rng, 4, F + 1);
    for kind in ["gated", "attention"] {
        assert!(
            matches!(
                run(get(&r, kind), &h, &[0, 2, 4]),
                Err(Error::ShapeMismatch { .. })
            ),
            "{kind}"
        );
    }
}

/// A scalar that weighs every output entry differently.
fn loss(t: &Tape<C>, y: &Var<C>, w: &Array2<f64>) -> hdgcn::Result<Var<C>> {
    y.mul(&t.constant(w.clone()))?
        .sum_all()
        .add(&y.square().mean_all())
}

#[test]
fn gradients_match_finite_differences() {
    let mut rng = StdRng::seed_from_u64(6);
    let r = readouts(&mut rng);
    let ptr = ptr_of(&SIZES);
    let h = rand_mat(&mut rng, *ptr.last().unwrap(), F);
    let cpu = C::new();
    let seg = Segments::new(&cpu, &ptr).unwrap();
    for kind in KINDS {
        let ro = get(&r, kind);
        let w = rand_mat(&mut rng, SIZES.len(), ro.out_channels(F));
        let rep = check_inputs(
            std::slice::from_ref(&h),
            |t, v| loss(t, &ro.forward(t, &v[0], &seg)?, &w),
            1e-6,
        )
        .unwrap();
        assert!(rep.max_error < 1e-7, "{kind} inputs: {rep:?}");
        if kind == "gated" || kind == "attention" {
            let rep = check_params(
                &ro.named_params(),
                |t| loss(t, &ro.forward(t, &t.constant(h.clone()), &seg)?, &w),
                1e-6,
            )
            .unwrap();
            assert!(rep.max_error < 1e-7, "{kind} params: {rep:?}");
        }
    }
}

#[test]
fn parameter_names() {
    let mut rng = StdRng::seed_from_u64(7);
    let r = readouts(&mut rng);
    let names = |m: &dyn Readout<C>| {
        m.named_params()
            .into_iter()
            .map(|(n, _)| n)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        names(&r.gated),
        ["f1.weight", "f1.bias", "f2.weight", "f2.bias"]
    );
    assert_eq!(
        names(&r.att),
        [
            "gate_nn.lins.0.weight",
            "gate_nn.lins.0.bias",
            "nn.lins.0.weight",
            "nn.lins.0.bias"
        ]
    );
    assert!(names(&MeanMaxReadout).is_empty());
    // The attention weights of each graph sum to one.
    let ptr = ptr_of(&SIZES);
    let h = rand_mat(&mut rng, *ptr.last().unwrap(), F);
    let cpu = C::new();
    let t = Tape::inference(&cpu);
    let seg = Segments::new(&cpu, &ptr).unwrap();
    let a = r
        .att
        .attention(&t, &t.constant(h), &seg)
        .unwrap()
        .to_array();
    for g in 0..SIZES.len() {
        let s: f64 = a.slice(s![ptr[g]..ptr[g + 1], 0]).sum();
        assert!((s - 1.0).abs() < 1e-12);
    }
    // A gate that does not output one column is rejected.
    let gate = hdgcn::nn::Mlp::new(
        &cpu,
        &[F, 2],
        hdgcn::nn::Activation::Identity,
        0.0,
        &mut rng,
    )
    .unwrap();
    assert!(matches!(
        AttentionPooling::new(gate, None),
        Err(Error::InvalidConfig(_))
    ));
    // An `nn` whose layers were removed is rejected, not indexed.
    let mlp = |dims: &[usize], rng: &mut StdRng| {
        hdgcn::nn::Mlp::new(&cpu, dims, hdgcn::nn::Activation::Identity, 0.0, rng).unwrap()
    };
    let gate = mlp(&[F, 1], &mut rng);
    let mut nn = mlp(&[F, 3], &mut rng);
    nn.lins.clear();
    let err = AttentionPooling::new(gate, Some(nn)).unwrap_err();
    assert!(err.to_string().contains("nn has no layers"), "{err}");
    // So is a gate emptied after construction, at the forward pass.
    let mut pool = AttentionPooling::new(mlp(&[F, 1], &mut rng), None).unwrap();
    pool.gate_nn.lins.clear();
    let tape = Tape::inference(&cpu);
    let h = tape.constant_array(&Array2::<f64>::ones((3, F)));
    let seg = Segments::new(&cpu, &[0, 3]).unwrap();
    let err = pool.forward(&tape, &h, &seg).unwrap_err();
    assert!(err.to_string().contains("gate_nn has no layers"), "{err}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Every readout is invariant to the order of the nodes inside each
    /// graph: shuffling the rows within every segment of a random batch
    /// leaves each graph's embedding unchanged (up to the summation order).
    #[test]
    fn readouts_are_invariant_to_node_order_within_each_graph(
        seed in proptest::prelude::any::<u64>(),
        sizes in proptest::collection::vec(1usize..9, 1..6),
    ) {
        use rand::seq::SliceRandom;
        let mut rng = StdRng::seed_from_u64(seed);
        let r = readouts(&mut rng);
        let ptr = ptr_of(&sizes);
        let h = rand_mat(&mut rng, *ptr.last().unwrap(), F);
        // A permutation that moves rows only inside their own graph.
        let mut order: Vec<usize> = Vec::new();
        for g in 0..sizes.len() {
            let mut rows: Vec<usize> = (ptr[g]..ptr[g + 1]).collect();
            rows.shuffle(&mut rng);
            order.extend(rows);
        }
        let shuffled = h.select(Axis(0), &order);
        for kind in KINDS {
            let ro = get(&r, kind);
            let a = run(ro, &h, &ptr).unwrap();
            let b = run(ro, &shuffled, &ptr).unwrap();
            let err = a.iter().zip(b.iter()).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
            proptest::prop_assert!(err <= 1e-12, "{}: {:e}", kind, err);
        }
    }
}
