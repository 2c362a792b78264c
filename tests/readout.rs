//! Readouts: values against dense per-graph references, batch == graphs one
//! at a time, empty graphs, finite-difference gradients (single-node graphs
//! included), and invariance to the node order within each graph; the same
//! over a per-graph node set (`NodeSet`, the aspect-mean readout of ABSA).

use hdgcn::Error;
use hdgcn::autograd::gradcheck::{check_inputs, check_params};
use hdgcn::autograd::{Segments, Tape, Var};
use hdgcn::backend::Cpu;
use hdgcn::readout::{
    AttentionPooling, GatedReadout, MaxReadout, MeanMaxReadout, MeanReadout, NodeSet, Readout,
    SumReadout,
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

// ---------------------------------------------------------------------------
// Readouts over a node set (the aspect-mean readout)
// ---------------------------------------------------------------------------

/// Selected nodes (local indices) of each graph of `SIZES`, in an order
/// that is not sorted, and a single-node graph included.
fn selected() -> Vec<Vec<usize>> {
    vec![vec![2, 0], vec![0], vec![3, 1, 2], vec![0]]
}

fn run_nodes(
    r: &dyn Readout<C>,
    h: &Array2<f64>,
    ptr: &[usize],
    nodes: &[Vec<usize>],
) -> hdgcn::Result<Array2<f64>> {
    let cpu = C::new();
    let tape = Tape::new(&cpu);
    let seg = Segments::new(&cpu, ptr)?;
    let set = NodeSet::new(&cpu, ptr, nodes)?;
    Ok(
        r.forward_nodes(&tape, &tape.constant(h.clone()), &seg, &set)?
            .to_array(),
    )
}

/// The aspect mean written out: `Σ_{v ∈ S_g} h_v / |S_g|` by loops over
/// the dense states, one graph at a time.
fn aspect_mean_reference(h: &Array2<f64>, ptr: &[usize], nodes: &[Vec<usize>]) -> Array2<f64> {
    let mut out = Array2::zeros((nodes.len(), h.ncols()));
    for (g, list) in nodes.iter().enumerate() {
        for &v in list {
            for j in 0..h.ncols() {
                out[[g, j]] += h[[ptr[g] + v, j]];
            }
        }
        for j in 0..h.ncols() {
            out[[g, j]] /= list.len() as f64;
        }
    }
    out
}

#[test]
fn aspect_mean_matches_a_dense_reference_and_batch_equals_graphs_alone() {
    let mut rng = StdRng::seed_from_u64(8);
    let r = readouts(&mut rng);
    let ptr = ptr_of(&SIZES);
    let h = rand_mat(&mut rng, *ptr.last().unwrap(), F);
    let nodes = selected();
    let out = run_nodes(&MeanReadout, &h, &ptr, &nodes).unwrap();
    let expect = aspect_mean_reference(&h, &ptr, &nodes);
    let err = (&out - &expect)
        .mapv(f64::abs)
        .fold(0.0, |a: f64, &b| a.max(b));
    assert!(err < 1e-12, "{out} vs {expect}");
    // Every readout over a node set is the readout of the selected rows.
    for kind in KINDS {
        let ro = get(&r, kind);
        let out = run_nodes(ro, &h, &ptr, &nodes).unwrap();
        for (g, list) in nodes.iter().enumerate() {
            let rows: Vec<usize> = list.iter().map(|&v| ptr[g] + v).collect();
            let block = h.select(Axis(0), &rows);
            let expect = reference(kind, &block, &r.gated, &r.att);
            for (a, b) in out.row(g).iter().zip(expect.iter()) {
                assert!((a - b).abs() < 1e-12, "{kind} graph {g}");
            }
        }
    }
    // Pooling every node in order is the plain readout.
    let all: Vec<Vec<usize>> = SIZES.iter().map(|&n| (0..n).collect()).collect();
    assert_eq!(
        run_nodes(&MeanReadout, &h, &ptr, &all).unwrap(),
        run(&MeanReadout, &h, &ptr).unwrap()
    );
}

#[test]
fn aspect_mean_gradients_match_finite_differences() {
    let mut rng = StdRng::seed_from_u64(9);
    let r = readouts(&mut rng);
    let ptr = ptr_of(&SIZES);
    let h = rand_mat(&mut rng, *ptr.last().unwrap(), F);
    let cpu = C::new();
    let seg = Segments::new(&cpu, &ptr).unwrap();
    let set = NodeSet::new(&cpu, &ptr, &selected()).unwrap();
    for kind in ["mean", "gated"] {
        let ro = get(&r, kind);
        let w = rand_mat(&mut rng, SIZES.len(), ro.out_channels(F));
        let rep = check_inputs(
            std::slice::from_ref(&h),
            |t, v| loss(t, &ro.forward_nodes(t, &v[0], &seg, &set)?, &w),
            1e-6,
        )
        .unwrap();
        assert!(rep.max_error < 1e-7, "{kind} inputs: {rep:?}");
    }
    // The rows outside the set get no gradient.
    let tape = Tape::new(&cpu);
    let x = tape.input(hdgcn::backend::Backend::upload(&cpu, h.view()));
    let g = MeanReadout
        .forward_nodes(&tape, &x, &seg, &set)
        .unwrap()
        .sum_all()
        .backward()
        .unwrap();
    let grad = g.wrt(&x).unwrap();
    // Graph 0 (rows 0..3) pools nodes 0 and 2: row 1 is outside.
    assert!(grad.row(1).iter().all(|&v| v == 0.0));
    assert!(grad.row(0).iter().all(|&v| (v - 0.5).abs() < 1e-15));
}

#[test]
fn bad_node_sets_are_errors() {
    let cpu = C::new();
    let ptr = [0, 2, 5];
    let cases: [(&[Vec<usize>], &str); 4] = [
        (&[vec![0]], "ShapeMismatch"),
        (&[vec![0], vec![]], "Empty"),
        (&[vec![2], vec![0]], "NodeOutOfRange"),
        (&[vec![1, 1], vec![0]], "InvalidConfig"),
    ];
    for (nodes, want) in cases {
        let err = NodeSet::new(&cpu, &ptr, nodes).unwrap_err();
        let got = format!("{err:?}");
        assert!(got.starts_with(want), "{nodes:?}: {got}");
    }
    match NodeSet::new(&cpu, &ptr, &[vec![0], vec![]]) {
        Err(Error::Empty(m)) => assert!(m.contains("graph 1"), "{m}"),
        other => panic!("{other:?}"),
    }
    // A set made for another batch is rejected at the readout.
    let set = NodeSet::new(&cpu, &[0, 3, 5], &[vec![0], vec![1]]).unwrap();
    let tape = Tape::inference(&cpu);
    let h = tape.constant_array(&Array2::<f64>::ones((5, F)));
    let seg = Segments::new(&cpu, &ptr).unwrap();
    assert!(matches!(
        MeanReadout.forward_nodes(&tape, &h, &seg, &set),
        Err(Error::ShapeMismatch { .. })
    ));
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    /// Batch = graphs alone for the aspect mean: over a random batch and
    /// random node sets, each graph's row is the row of that graph pooled
    /// on its own, and the dense reference.
    #[test]
    fn aspect_mean_of_a_batch_is_each_graph_alone(
        seed in proptest::prelude::any::<u64>(),
        sizes in proptest::collection::vec(1usize..9, 1..6),
    ) {
        use rand::Rng;
        use rand::seq::SliceRandom;
        let mut rng = StdRng::seed_from_u64(seed);
        let ptr = ptr_of(&sizes);
        let h = rand_mat(&mut rng, *ptr.last().unwrap(), F);
        let nodes: Vec<Vec<usize>> = sizes
            .iter()
            .map(|&n| {
                let mut all: Vec<usize> = (0..n).collect();
                all.shuffle(&mut rng);
                all.truncate(rng.random_range(1..=n));
                all
            })
            .collect();
        let batch = run_nodes(&MeanReadout, &h, &ptr, &nodes).unwrap();
        let expect = aspect_mean_reference(&h, &ptr, &nodes);
        for (g, list) in nodes.iter().enumerate() {
            let block = h.slice(s![ptr[g]..ptr[g + 1], ..]).to_owned();
            let alone = run_nodes(&MeanReadout, &block, &[0, block.nrows()], std::slice::from_ref(list)).unwrap();
            proptest::prop_assert_eq!(alone.row(0), batch.row(g));
            for (a, b) in batch.row(g).iter().zip(expect.row(g).iter()) {
                proptest::prop_assert!((a - b).abs() < 1e-12);
            }
        }
    }
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
