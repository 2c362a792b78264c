//! `MessagePassing`: edge order and self-loops, gather / aggregate / edge
//! softmax against dense loops over the edge list, f64 gradient checks of
//! each aggregation and of the softmax, the softmax's rows summing to one
//! per target (property), and the errors for bad input.

use hdgcn::Error;
use hdgcn::autograd::Tape;
use hdgcn::autograd::gradcheck::check_inputs;
use hdgcn::backend::{Cpu, SegmentReduce};
use hdgcn::conv::{DeviceGraph, MessagePassing, SelfLoops};
use hdgcn::graph::Graph;
use ndarray::Array2;
use proptest::prelude::*;
use rand::{Rng, SeedableRng, rngs::StdRng};

mod common;
use common::{assert_ok, max_abs_diff, rand_mat_wide};

type C = Cpu<f64>;

/// A random directed edge list on `n` nodes: repeated edges, self-loops
/// and (when `n > 3`) a node without incoming edges.
fn random_edges(rng: &mut StdRng, n: usize, m: usize) -> Vec<(usize, usize)> {
    let lonely = n - 1;
    let mut e: Vec<(usize, usize)> = (0..m)
        .map(|_| (rng.random_range(0..n), rng.random_range(0..n)))
        .filter(|&(_, d)| n <= 3 || d != lonely)
        .collect();
    e.push((1 % n, 1 % n));
    if let Some(&first) = e.first() {
        e.push(first);
    }
    e
}

/// `(s, d)` edges after PyG's `remove_self_loops` + `add_self_loops`.
fn with_loops(n: usize, e: &[(usize, usize)]) -> Vec<(usize, usize)> {
    let mut out: Vec<_> = e.iter().copied().filter(|(s, d)| s != d).collect();
    out.extend((0..n).map(|i| (i, i)));
    out
}

/// Dense loops over the edge list: the sum, mean or max of `msg[e]` over
/// the edges `e` into each node (zeros for none).
fn dense_aggregate(
    n: usize,
    targets: &[usize],
    msg: &Array2<f64>,
    op: SegmentReduce,
) -> Array2<f64> {
    let c = msg.ncols();
    let mut out = Array2::zeros((n, c));
    for i in 0..n {
        let rows: Vec<usize> = (0..targets.len()).filter(|&e| targets[e] == i).collect();
        for j in 0..c {
            let vals: Vec<f64> = rows.iter().map(|&e| msg[[e, j]]).collect();
            out[[i, j]] = if vals.is_empty() {
                0.0
            } else {
                match op {
                    SegmentReduce::Sum => vals.iter().sum(),
                    SegmentReduce::Mean => vals.iter().sum::<f64>() / vals.len() as f64,
                    SegmentReduce::Max => vals.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                }
            };
        }
    }
    out
}

/// `exp(s[e]) / Σ_{e' into target(e)} exp(s[e'])` per column, directly.
fn dense_softmax(targets: &[usize], s: &Array2<f64>) -> Array2<f64> {
    Array2::from_shape_fn(s.dim(), |(e, j)| {
        let z: f64 = (0..targets.len())
            .filter(|&f| targets[f] == targets[e])
            .map(|f| s[[f, j]].exp())
            .sum();
        s[[e, j]].exp() / z
    })
}

#[test]
fn edges_are_sorted_by_target_and_keep_their_multiset() {
    let cpu = C::new();
    let mut rng = StdRng::seed_from_u64(1);
    let n = 9;
    let e = random_edges(&mut rng, n, 30);
    for (loops, want) in [
        (SelfLoops::Keep, e.clone()),
        (SelfLoops::Add, with_loops(n, &e)),
    ] {
        let mp = MessagePassing::from_edges(&cpu, n, &e, loops).unwrap();
        assert_eq!(mp.num_nodes(), n);
        assert_eq!(mp.num_edges(), want.len(), "{loops:?}");
        let got: Vec<(usize, usize)> = mp
            .sources()
            .iter()
            .copied()
            .zip(mp.targets().iter().copied())
            .collect();
        assert!(mp.targets().windows(2).all(|w| w[0] <= w[1]), "sorted");
        let (mut a, mut b) = (got.clone(), want.clone());
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b, "{loops:?}: the same edges");
        let ptr = mp.ptr();
        assert_eq!(ptr.len(), n + 1);
        for i in 0..n {
            assert!(mp.targets()[ptr[i]..ptr[i + 1]].iter().all(|&t| t == i));
        }
    }
    // Add: exactly one self-loop per node.
    let mp = MessagePassing::from_edges(&cpu, n, &e, SelfLoops::Add).unwrap();
    for i in 0..n {
        let loops = (0..mp.num_edges())
            .filter(|&k| mp.sources()[k] == i && mp.targets()[k] == i)
            .count();
        assert_eq!(loops, 1, "node {i}");
    }
}

#[test]
fn from_graph_and_device_graph_take_every_stored_edge() {
    let cpu = C::new();
    let e = [(0, 1, 2.0), (1, 0, 0.5), (2, 2, 3.0), (3, 1, 1.0)];
    let g = Graph::from_weighted_edges(4, &e).unwrap();
    let mp = MessagePassing::from_graph(&cpu, &g, SelfLoops::Keep).unwrap();
    assert_eq!(mp.sources(), &[1, 0, 3, 2]);
    assert_eq!(mp.targets(), &[0, 1, 1, 2]);
    let dg = DeviceGraph::new(&cpu, g);
    let cached = dg.message_passing(SelfLoops::Add).unwrap();
    assert_eq!(cached.num_edges(), 3 + 4);
    assert_eq!(cached.sources(), &[1, 0, 0, 3, 1, 2, 3]);
    assert_eq!(cached.targets(), &[0, 0, 1, 1, 1, 2, 3]);
    let again = dg.message_passing(SelfLoops::Add).unwrap();
    assert_eq!(again.sources(), cached.sources());
}

#[test]
fn gather_aggregate_and_softmax_match_dense_loops() {
    let cpu = C::new();
    let mut rng = StdRng::seed_from_u64(2);
    let n = 11;
    let e = random_edges(&mut rng, n, 40);
    for loops in [SelfLoops::Keep, SelfLoops::Add] {
        let mp = MessagePassing::from_edges(&cpu, n, &e, loops).unwrap();
        let x = rand_mat_wide(&mut rng, n, 4);
        let tape = Tape::new(&cpu);
        let xv = tape.constant_array(&x);
        let src = mp.gather_source(&xv).unwrap().to_array();
        let dst = mp.gather_target(&xv).unwrap().to_array();
        for k in 0..mp.num_edges() {
            assert_eq!(src.row(k), x.row(mp.sources()[k]));
            assert_eq!(dst.row(k), x.row(mp.targets()[k]));
        }
        let msg = rand_mat_wide(&mut rng, mp.num_edges(), 3);
        let mv = tape.constant_array(&msg);
        for op in [SegmentReduce::Sum, SegmentReduce::Mean, SegmentReduce::Max] {
            let got = mp.aggregate(&mv, op).unwrap().to_array();
            let want = dense_aggregate(n, mp.targets(), &msg, op);
            assert!(max_abs_diff(&got, &want) < 1e-12, "{loops:?} {op:?}");
            let prop = mp.propagate(&xv, op).unwrap().to_array();
            let want = dense_aggregate(n, mp.targets(), &src, op);
            assert!(max_abs_diff(&prop, &want) < 1e-12, "propagate {op:?}");
        }
        let got = mp.softmax(&mv).unwrap().to_array();
        let want = dense_softmax(mp.targets(), &msg);
        assert!(max_abs_diff(&got, &want) < 1e-12, "{loops:?} softmax");
    }
}

#[test]
fn a_node_without_incoming_edges_aggregates_to_zero() {
    let cpu = C::new();
    let mp = MessagePassing::from_edges(&cpu, 3, &[(0, 1), (2, 1)], SelfLoops::Keep).unwrap();
    let tape = Tape::new(&cpu);
    let x = tape.constant_array(&ndarray::arr2(&[[-1.0], [5.0], [-3.0]]));
    for op in [SegmentReduce::Sum, SegmentReduce::Mean, SegmentReduce::Max] {
        let y = mp.propagate(&x, op).unwrap().to_array();
        assert_eq!(y[[0, 0]], 0.0, "{op:?}");
        assert_eq!(y[[2, 0]], 0.0, "{op:?}");
    }
    let y = mp.propagate(&x, SegmentReduce::Max).unwrap().to_array();
    assert_eq!(y[[1, 0]], -1.0);
}

#[test]
fn gradients_of_every_aggregation_and_of_the_softmax() {
    let mut rng = StdRng::seed_from_u64(3);
    let n = 7;
    let e = random_edges(&mut rng, n, 18);
    let cpu = C::new();
    let mp = MessagePassing::from_edges(&cpu, n, &e, SelfLoops::Add).unwrap();
    let x = rand_mat_wide(&mut rng, n, 3);
    let w = rand_mat_wide(&mut rng, 3, 2);
    for op in [SegmentReduce::Sum, SegmentReduce::Mean, SegmentReduce::Max] {
        // Messages from both endpoints, so both gathers are checked.
        let report = check_inputs(
            &[x.clone(), w.clone()],
            |_, v| {
                let m = mp
                    .gather_source(&v[0])?
                    .mul(&mp.gather_target(&v[0])?.tanh())?
                    .matmul(&v[1])?;
                common::weigh(&mp.aggregate(&m, op)?, 11)
            },
            1e-6,
        )
        .unwrap();
        assert_ok(&format!("aggregate {op:?}"), report);
    }
    let s = rand_mat_wide(&mut rng, mp.num_edges(), 3);
    let report = check_inputs(&[s], |_, v| common::weigh(&mp.softmax(&v[0])?, 12), 1e-6).unwrap();
    assert_ok("edge softmax", report);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn edge_softmax_sums_to_one_at_every_target(
        seed in 0u64..10_000,
        n in 1usize..12,
        m in 0usize..40,
        cols in 1usize..4,
        add in any::<bool>(),
        scale in 0.1f64..30.0,
    ) {
        let cpu = C::new();
        let mut rng = StdRng::seed_from_u64(seed);
        let e = random_edges(&mut rng, n, m);
        let loops = if add { SelfLoops::Add } else { SelfLoops::Keep };
        let mp = MessagePassing::from_edges(&cpu, n, &e, loops).unwrap();
        let s = rand_mat_wide(&mut rng, mp.num_edges(), cols) * scale;
        let tape = Tape::inference(&cpu);
        let a = mp.softmax(&tape.constant_array(&s)).unwrap().to_array();
        let sums = dense_aggregate(n, mp.targets(), &a, SegmentReduce::Sum);
        let ptr = mp.ptr();
        for i in 0..n {
            for j in 0..cols {
                let want = if ptr[i + 1] > ptr[i] { 1.0 } else { 0.0 };
                prop_assert!((sums[[i, j]] - want).abs() < 1e-12, "node {} col {}: {}", i, j, sums[[i, j]]);
            }
        }
        prop_assert!(a.iter().all(|&v| (0.0..=1.0).contains(&v)));
    }
}

#[test]
fn bad_input_is_a_clear_error() {
    let cpu = C::new();
    let err = MessagePassing::from_edges(&cpu, 3, &[(0, 1), (1, 3)], SelfLoops::Keep).unwrap_err();
    assert!(
        matches!(
            err,
            Error::NodeOutOfRange {
                index: 3,
                num_nodes: 3
            }
        ),
        "{err}"
    );
    let err = MessagePassing::from_edges(&cpu, 0, &[], SelfLoops::Add).unwrap_err();
    assert!(matches!(err, Error::Empty(_)), "{err}");

    let mp = MessagePassing::from_edges(&cpu, 3, &[(0, 1), (1, 2)], SelfLoops::Keep).unwrap();
    let tape = Tape::new(&cpu);
    let wrong = tape.constant_array(&Array2::zeros((4, 2)));
    for err in [
        mp.gather_source(&wrong).unwrap_err(),
        mp.gather_target(&wrong).unwrap_err(),
        mp.aggregate(&wrong, SegmentReduce::Sum).unwrap_err(),
        mp.softmax(&wrong).unwrap_err(),
    ] {
        assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");
        let text = err.to_string();
        assert!(text.contains("MessagePassing::"), "{text}");
        assert!(text.contains("(4, 2)"), "{text}");
    }
    let err = mp
        .gather_source(&tape.constant_array(&Array2::zeros((2, 1))))
        .unwrap_err();
    assert!(err.to_string().contains("one per node"), "{err}");
}
