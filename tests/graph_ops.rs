//! Graph construction, PyG-compatible operators and batches, checked against
//! dense references written directly from PyG's formulas.

use hdgcn::Error;
use hdgcn::graph::{Batch, Graph, LambdaMax, Normalization};
use ndarray::{Array2, array};
use proptest::prelude::*;
use rand::{Rng, SeedableRng, rngs::StdRng};
use sprs::CsMat;

/// Random weighted graph as a dense matrix `a[src][dst]` (0 = no edge).
/// Nodes `n - isolated..n` have no edges; some nodes get self-loops.
fn random_dense(
    n: usize,
    p: f64,
    symmetric: bool,
    weighted: bool,
    isolated: usize,
    seed: u64,
) -> Array2<f64> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut a = Array2::zeros((n, n));
    let m = n - isolated;
    for i in 0..m {
        for j in 0..m {
            if (symmetric && j < i) || !rng.random_bool(p) {
                continue;
            }
            let w = if weighted {
                rng.random_range(0.1..3.0)
            } else {
                1.0
            };
            a[[i, j]] = w;
            if symmetric {
                a[[j, i]] = w;
            }
        }
    }
    a
}

fn assert_close(got: &CsMat<f64>, want: &Array2<f64>, tol: f64, what: &str) {
    assert!(got.is_csr(), "{what}: not CSR");
    for row in got.outer_iterator() {
        assert!(
            row.indices().windows(2).all(|w| w[0] < w[1]),
            "{what}: unsorted row"
        );
    }
    let d = got.to_dense();
    assert_eq!(d.dim(), want.dim(), "{what}: shape");
    for ((i, j), &v) in want.indexed_iter() {
        assert!(
            (d[[i, j]] - v).abs() <= tol,
            "{what}: entry ({i}, {j}) = {} but reference {v}",
            d[[i, j]]
        );
    }
}

/// GCN operator following PyG's gcn_norm line by line, dense.
fn gcn_reference(a: &Array2<f64>) -> Array2<f64> {
    let n = a.nrows();
    let mut ahat = a.clone();
    for i in 0..n {
        if ahat[[i, i]] == 0.0 {
            ahat[[i, i]] = 1.0; // add_remaining_self_loops, fill 1
        }
    }
    // deg = scatter_add(w, col): in-degree.
    let deg: Vec<f64> = (0..n).map(|i| (0..n).map(|j| ahat[[j, i]]).sum()).collect();
    let dis = |x: f64| if x == 0.0 { 0.0 } else { 1.0 / x.sqrt() };
    // out[i] = Σ_j dis[j] w_{j->i} dis[i] x_j.
    Array2::from_shape_fn((n, n), |(i, j)| dis(deg[j]) * ahat[[j, i]] * dis(deg[i]))
}

/// Laplacian in propagation form following PyG's get_laplacian, dense.
fn laplacian_reference(a: &Array2<f64>, norm: Normalization) -> Array2<f64> {
    let n = a.nrows();
    let mut a0 = a.clone();
    for i in 0..n {
        a0[[i, i]] = 0.0;
    }
    // deg = scatter(w, row): out-degree.
    let deg: Vec<f64> = (0..n).map(|i| a0.row(i).sum()).collect();
    let inv = |x: f64| if x == 0.0 { 0.0 } else { 1.0 / x };
    Array2::from_shape_fn((n, n), |(i, j)| {
        let delta = if i == j { 1.0 } else { 0.0 };
        // edge j -> i carries the message into row i.
        match norm {
            Normalization::None => delta * deg[i] - a0[[j, i]],
            Normalization::Sym => delta - a0[[j, i]] * inv(deg[i]).sqrt() * inv(deg[j]).sqrt(),
            Normalization::Rw => delta - a0[[j, i]] * inv(deg[j]),
        }
    })
}

const NORMS: [Normalization; 3] = [Normalization::Sym, Normalization::Rw, Normalization::None];

#[test]
fn operators_match_dense_references_on_random_graphs() {
    let mut seed = 0;
    for &n in &[1usize, 2, 5, 17, 40] {
        for &symmetric in &[true, false] {
            for &weighted in &[true, false] {
                for &isolated in &[0usize, 1, 3] {
                    if isolated > n {
                        continue;
                    }
                    seed += 1;
                    let a = random_dense(n, 0.3, symmetric, weighted, isolated, seed);
                    let g = Graph::from_dense(a.view()).unwrap();
                    let what = format!("n={n} sym={symmetric} w={weighted} iso={isolated}");
                    assert_close(
                        &g.gcn_operator().unwrap(),
                        &gcn_reference(&a),
                        1e-12,
                        &format!("gcn {what}"),
                    );
                    for norm in NORMS {
                        let l = laplacian_reference(&a, norm);
                        assert_close(
                            &g.laplacian(norm).unwrap(),
                            &l,
                            1e-12,
                            &format!("{norm} {what}"),
                        );
                        for lam in [2.0, 1.3, 7.5] {
                            let want = &l * (2.0 / lam) - Array2::<f64>::eye(n);
                            assert_close(
                                &g.scaled_laplacian(norm, lam).unwrap(),
                                &want,
                                1e-12,
                                &format!("scaled {norm} λ={lam} {what}"),
                            );
                        }
                    }
                }
            }
        }
    }
}

/// Hand-computed, non-symmetric, weighted, with an existing self-loop.
/// Edges (src, dst, w): 0->1 (2), 1->2 (3), 0->2 (1), 2->2 (4).
fn hand_graph() -> Graph {
    Graph::from_weighted_edges(3, &[(0, 1, 2.0), (1, 2, 3.0), (0, 2, 1.0), (2, 2, 4.0)]).unwrap()
}

#[test]
fn gcn_operator_hand_computed_non_symmetric() {
    // Â adds loops (weight 1) at 0 and 1; node 2 keeps its loop of 4.
    // In-degrees: d0 = 1, d1 = 2 + 1 = 3, d2 = 1 + 3 + 4 = 8.
    // P[i][j] = Â[j][i] / sqrt(d_i d_j).
    let s3 = 3f64.sqrt();
    let want = array![
        [1.0, 0.0, 0.0],
        [2.0 / s3, 1.0 / 3.0, 0.0],
        [1.0 / 8f64.sqrt(), 3.0 / 24f64.sqrt(), 0.5],
    ];
    assert_close(
        &hand_graph().gcn_operator().unwrap(),
        &want,
        1e-15,
        "gcn hand",
    );
    // out = P X: node 1 receives from 0 and itself only.
    let x = array![[1.0], [10.0], [100.0]];
    let out = hand_graph().gcn_operator().unwrap().to_dense().dot(&x);
    assert!((out[[1, 0]] - (2.0 / s3 + 10.0 / 3.0)).abs() < 1e-13);
}

#[test]
fn laplacians_hand_computed_non_symmetric() {
    let g = hand_graph();
    // Loop removed; out-degrees d0 = 3, d1 = 3, d2 = 0.
    let sym = array![[1.0, 0.0, 0.0], [-2.0 / 3.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
    assert_close(
        &g.laplacian(Normalization::Sym).unwrap(),
        &sym,
        1e-15,
        "sym",
    );
    let rw = array![
        [1.0, 0.0, 0.0],
        [-2.0 / 3.0, 1.0, 0.0],
        [-1.0 / 3.0, -1.0, 1.0]
    ];
    assert_close(&g.laplacian(Normalization::Rw).unwrap(), &rw, 1e-15, "rw");
    let none = array![[3.0, 0.0, 0.0], [-2.0, 3.0, 0.0], [-1.0, -3.0, 0.0]];
    assert_close(
        &g.laplacian(Normalization::None).unwrap(),
        &none,
        0.0,
        "none",
    );
    let scaled = array![[0.5, 0.0, 0.0], [-1.0, 0.5, 0.0], [-0.5, -1.5, -1.0]];
    assert_close(
        &g.scaled_laplacian(Normalization::None, 4.0).unwrap(),
        &scaled,
        0.0,
        "scaled none",
    );
}

#[test]
fn construction_sums_duplicates_and_agrees_across_constructors() {
    let g = Graph::from_weighted_edges(3, &[(2, 0, 1.5), (0, 1, 1.0), (2, 0, 0.5), (1, 1, 2.0)])
        .unwrap();
    assert_eq!(g.num_nodes(), 3);
    assert_eq!(g.num_edges(), 3);
    let want = array![[0.0, 1.0, 0.0], [0.0, 2.0, 0.0], [2.0, 0.0, 0.0]];
    assert_eq!(g.adjacency().to_dense(), want);
    assert!(g.has_self_loops());
    assert!(!g.is_symmetric());
    assert_eq!(g.degrees(), vec![2.0, 3.0, 0.0]);
    assert_eq!(Graph::from_dense(want.view()).unwrap(), g);
    let csc = g.adjacency().to_csc();
    assert_eq!(Graph::from_csmat(&csc).unwrap(), g);
    assert_eq!(Graph::from_csmat(g.adjacency()).unwrap(), g);
    let unweighted = Graph::from_edges(3, &[(0, 1), (0, 1), (2, 0)]).unwrap();
    assert_eq!(
        unweighted.adjacency().to_dense(),
        array![[0.0, 2.0, 0.0], [0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]
    );
    assert!(!unweighted.has_self_loops());
}

#[test]
fn symmetrized_follows_pyg_to_undirected_add() {
    let g = Graph::from_weighted_edges(3, &[(0, 1, 2.0), (1, 0, 3.0), (1, 2, 1.0), (2, 2, 5.0)])
        .unwrap();
    let s = g.symmetrized();
    let want = array![[0.0, 5.0, 0.0], [5.0, 0.0, 1.0], [0.0, 1.0, 10.0]];
    assert_eq!(s.adjacency().to_dense(), want);
    assert!(s.is_symmetric());
    // Random graphs: A + Aᵀ.
    for seed in 0..5 {
        let a = random_dense(12, 0.3, false, true, 2, 100 + seed);
        let s = Graph::from_dense(a.view()).unwrap().symmetrized();
        let want = &a + &a.t();
        assert_close(s.adjacency(), &want, 0.0, "symmetrized");
    }
}

#[test]
fn petgraph_constructors_match_from_edges() {
    use petgraph::graph::{DiGraph, UnGraph};
    use petgraph::stable_graph::StableDiGraph;
    let edges = [(0u32, 1u32), (1, 2), (2, 0), (3, 3), (1, 3)];
    let edges_usize: Vec<(usize, usize)> = edges
        .iter()
        .map(|&(a, b)| (a as usize, b as usize))
        .collect();
    let want = Graph::from_edges(5, &edges_usize).unwrap();

    let mut dg = DiGraph::<(), f64>::new();
    let nodes: Vec<_> = (0..5).map(|_| dg.add_node(())).collect();
    for &(a, b) in &edges {
        dg.add_edge(nodes[a as usize], nodes[b as usize], 2.5);
    }
    assert_eq!(Graph::from_petgraph_unweighted(&dg).unwrap(), want);
    let weighted = Graph::from_petgraph(&dg, |e| *e.weight()).unwrap();
    assert_eq!(
        weighted.adjacency().to_dense(),
        want.adjacency().to_dense() * 2.5
    );

    // StableGraph with a removed node in the middle: indices are compacted.
    let mut sg = StableDiGraph::<(), ()>::new();
    let sn: Vec<_> = (0..6).map(|_| sg.add_node(())).collect();
    let remap = [0usize, 1, 3, 4, 5]; // node 2 is removed
    for &(a, b) in &edges {
        sg.add_edge(sn[remap[a as usize]], sn[remap[b as usize]], ());
    }
    sg.remove_node(sn[2]);
    assert_eq!(Graph::from_petgraph_unweighted(&sg).unwrap(), want);

    // Undirected: both directions, self-loop once.
    let mut ug = UnGraph::<(), ()>::from_edges(edges);
    ug.add_node(()); // node 4, isolated
    let mut both: Vec<(usize, usize)> = edges_usize.clone();
    both.extend(
        edges_usize
            .iter()
            .filter(|(a, b)| a != b)
            .map(|&(a, b)| (b, a)),
    );
    let want_un = Graph::from_edges(5, &both).unwrap();
    let got = Graph::from_petgraph_unweighted(&ug).unwrap();
    assert_eq!(got, want_un);
    assert!(got.is_symmetric());

    let no_nodes = DiGraph::<(), ()>::new();
    assert!(matches!(
        Graph::from_petgraph_unweighted(&no_nodes),
        Err(Error::Empty(_))
    ));
}

#[test]
fn batch_is_block_diagonal() {
    let g0 = Graph::from_weighted_edges(3, &[(0, 1, 1.0), (1, 0, 1.0), (1, 2, 2.0), (2, 1, 2.0)])
        .unwrap();
    let g1 = Graph::empty();
    let g2 = Graph::from_dense(random_dense(4, 0.6, true, true, 0, 7).view()).unwrap();
    let g3 = Graph::from_edges(1, &[]).unwrap();
    let batch = Batch::new(&[g0.clone(), g1.clone(), g2.clone(), g3.clone()]).unwrap();
    assert_eq!(batch.num_graphs(), 4);
    assert_eq!(batch.ptr(), &[0, 3, 3, 7, 8]);
    assert_eq!(batch.node_to_graph(), &[0, 0, 0, 2, 2, 2, 2, 3]);
    assert_eq!(batch.graph().num_nodes(), 8);
    let parts = [&g0, &g1, &g2, &g3];
    for (g, part) in parts.iter().enumerate() {
        assert_eq!(&&batch.get(g).unwrap(), part);
    }
    assert!(matches!(batch.get(4), Err(Error::IndexOutOfRange { .. })));

    let dense = batch.graph().adjacency().to_dense();
    let lams = [1.5, 123.0, 3.0, 0.7]; // λ of the empty graph is unused
    let scaled = batch
        .scaled_laplacian(Normalization::Sym, &lams)
        .unwrap()
        .to_dense();
    let gcn = batch.graph().gcn_operator().unwrap().to_dense();
    let ptr = batch.ptr();
    for (g, part) in parts.iter().enumerate() {
        if part.num_nodes() == 0 {
            continue;
        }
        let r = ptr[g]..ptr[g + 1];
        let block = |m: &Array2<f64>| m.slice(ndarray::s![r.clone(), r.clone()]).to_owned();
        assert_eq!(block(&dense), part.adjacency().to_dense());
        let want = part
            .scaled_laplacian(Normalization::Sym, lams[g])
            .unwrap()
            .to_dense();
        assert_eq!(block(&scaled), want);
        assert_eq!(block(&gcn), part.gcn_operator().unwrap().to_dense());
    }
    // Off-block entries are zero.
    for i in 0..8 {
        for j in 0..8 {
            if batch.node_to_graph()[i] != batch.node_to_graph()[j] {
                assert_eq!(dense[[i, j]], 0.0);
                assert_eq!(scaled[[i, j]], 0.0);
                assert_eq!(gcn[[i, j]], 0.0);
            }
        }
    }
    // Per-graph λ.
    let method = LambdaMax::Estimate {
        tol: 1e-9,
        max_iter: 100,
        seed: 3,
    };
    let per = batch.lambda_max(Normalization::None, &method).unwrap();
    assert_eq!(per.len(), 4);
    assert_eq!(per[0], g0.lambda_max(Normalization::None, &method).unwrap());
    assert_eq!(per[1], 0.0);
    assert_eq!(per[2], g2.lambda_max(Normalization::None, &method).unwrap());
    // Path 0-1-2 with weights 1, 2: L = [[1,-1,0],[-1,3,-2],[0,-2,2]], λ_max = 3 + √3.
    assert!((per[0] - (3.0 + 3f64.sqrt())).abs() < 1e-9);
    assert_eq!(per[3], 0.0); // single node, L = [0]
    let fixed = batch
        .lambda_max(Normalization::Sym, &LambdaMax::default())
        .unwrap();
    assert_eq!(fixed, vec![2.0; 4]);
}

#[test]
fn error_paths_return_the_right_variant() {
    // Too many nodes to allocate the row pointers of: an error, not an
    // overflow or an aborted allocation.
    for n in [usize::MAX, usize::MAX / 2, 1 << 60] {
        match Graph::from_edges(n, &[]) {
            Err(Error::InvalidConfig(m)) => assert!(m.contains("too large"), "{m}"),
            other => panic!("{n} nodes: expected InvalidConfig, got {other:?}"),
        }
    }
    assert!(matches!(
        Graph::from_edges(3, &[(0, 3)]),
        Err(Error::NodeOutOfRange {
            index: 3,
            num_nodes: 3
        })
    ));
    assert!(matches!(
        Graph::from_weighted_edges(3, &[(5, 0, 1.0)]),
        Err(Error::NodeOutOfRange { index: 5, .. })
    ));
    assert!(matches!(
        Graph::from_weighted_edges(2, &[(0, 1, f64::NAN)]),
        Err(Error::NonFinite { .. })
    ));
    assert!(matches!(
        Graph::from_weighted_edges(2, &[(0, 1, f64::INFINITY)]),
        Err(Error::NonFinite { .. })
    ));
    assert!(matches!(
        Graph::from_weighted_edges(2, &[(0, 1, f64::MAX), (0, 1, f64::MAX)]),
        Err(Error::NonFinite { .. })
    ));
    assert!(matches!(
        Graph::from_dense(array![[0.0, f64::NAN], [0.0, 0.0]].view()),
        Err(Error::NonFinite { .. })
    ));
    assert!(matches!(Graph::from_edges(0, &[]), Err(Error::Empty(_))));
    assert!(matches!(
        Graph::from_dense(Array2::zeros((0, 0)).view()),
        Err(Error::Empty(_))
    ));
    assert!(matches!(
        Graph::from_dense(Array2::zeros((2, 3)).view()),
        Err(Error::ShapeMismatch { .. })
    ));
    let rect: CsMat<f64> = CsMat::zero((2, 3));
    assert!(matches!(
        Graph::from_csmat(&rect),
        Err(Error::ShapeMismatch { .. })
    ));

    let neg = Graph::from_weighted_edges(3, &[(0, 1, 1.0), (1, 2, -0.5)]).unwrap();
    for norm in [Normalization::Sym, Normalization::Rw] {
        assert!(matches!(
            neg.laplacian(norm),
            Err(Error::NegativeWeight { src: 1, dst: 2, .. })
        ));
        assert!(matches!(
            neg.scaled_laplacian(norm, 2.0),
            Err(Error::NegativeWeight { .. })
        ));
    }
    assert!(matches!(
        neg.gcn_operator(),
        Err(Error::NegativeWeight { .. })
    ));
    assert!(
        matches!(neg.validate_non_negative("test"), Err(Error::NegativeWeight { weight, .. }) if weight == -0.5)
    );
    assert!(neg.laplacian(Normalization::None).is_ok());

    let empty = Graph::empty();
    assert_eq!(empty.num_nodes(), 0);
    assert!(matches!(empty.gcn_operator(), Err(Error::Empty(_))));
    assert!(matches!(
        empty.laplacian(Normalization::Sym),
        Err(Error::Empty(_))
    ));
    assert!(matches!(
        empty.lambda_max(Normalization::Sym, &LambdaMax::default()),
        Err(Error::Empty(_))
    ));

    let g = Graph::from_edges(2, &[(0, 1), (1, 0)]).unwrap();
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        assert!(matches!(
            g.scaled_laplacian(Normalization::Sym, bad),
            Err(Error::InvalidConfig(_))
        ));
    }
    assert!(matches!(Batch::new(&[]), Err(Error::Empty(_))));
    assert!(matches!(
        Batch::new(&[Graph::empty()]),
        Err(Error::Empty(_))
    ));
    let batch = Batch::new(&[g.clone(), g.clone()]).unwrap();
    assert!(matches!(
        batch.scaled_laplacian(Normalization::Sym, &[2.0]),
        Err(Error::ShapeMismatch { .. })
    ));
    assert!(matches!(
        batch.scaled_laplacian(Normalization::Sym, &[2.0, -2.0]),
        Err(Error::InvalidConfig(_))
    ));

    match "symmetric".parse::<Normalization>() {
        Err(Error::InvalidConfig(msg)) => {
            assert!(
                msg.contains("'symmetric'") && msg.contains("sym | rw | none"),
                "{msg}"
            )
        }
        other => panic!("expected InvalidConfig, got {other:?}"),
    }
    // Names are read in any case, as every option enum of the crate.
    assert_eq!("Sym".parse::<Normalization>().unwrap(), Normalization::Sym);
    for norm in NORMS {
        assert_eq!(norm.to_string().parse::<Normalization>().unwrap(), norm);
    }
    assert_eq!("rw".parse::<Normalization>().unwrap(), Normalization::Rw);
    assert_eq!(Normalization::None.to_string(), "none");
}

fn arb_symmetric_graph() -> impl Strategy<Value = Array2<f64>> {
    (1usize..14).prop_flat_map(|n| {
        proptest::collection::vec(prop_oneof![Just(0.0), 0.01f64..5.0], n * n).prop_map(move |v| {
            let mut a = Array2::from_shape_vec((n, n), v).unwrap();
            for i in 0..n {
                for j in 0..i {
                    a[[j, i]] = a[[i, j]];
                }
            }
            a
        })
    })
}

proptest! {
    #[test]
    fn sym_operators_are_symmetric_on_symmetric_graphs(a in arb_symmetric_graph()) {
        let g = Graph::from_dense(a.view()).unwrap();
        prop_assert!(g.is_symmetric());
        for m in [g.gcn_operator().unwrap(), g.laplacian(Normalization::Sym).unwrap(),
                  g.laplacian(Normalization::None).unwrap()] {
            let d = m.to_dense();
            for ((i, j), &v) in d.indexed_iter() {
                prop_assert!((v - d[[j, i]]).abs() <= 1e-15 * (1.0 + v.abs()));
            }
        }
    }

    #[test]
    fn rw_transition_columns_sum_to_one(a in arb_symmetric_graph()) {
        // PyG's rw edge matrix I - L_rw = D⁻¹A is row-stochastic at nodes with
        // edges; in propagation form P = Lᵀ these are the columns of I - P.
        let g = Graph::from_dense(a.view()).unwrap();
        let n = g.num_nodes();
        let t = Array2::<f64>::eye(n) - g.laplacian(Normalization::Rw).unwrap().to_dense();
        for j in 0..n {
            let has_edges = (0..n).any(|k| k != j && a[[j, k]] != 0.0);
            let s = t.column(j).sum();
            if has_edges {
                prop_assert!((s - 1.0).abs() < 1e-12, "column {} sums to {}", j, s);
            } else {
                prop_assert_eq!(s, 0.0);
            }
        }
    }
}

/// A random subset of `0..n` of size `1..=n`, in random order.
fn arb_dense_and_subset() -> impl Strategy<Value = (Array2<f64>, Vec<usize>)> {
    (1usize..12).prop_flat_map(|n| {
        (
            proptest::collection::vec(prop_oneof![Just(0.0), -3.0f64..3.0], n * n)
                .prop_map(move |v| Array2::from_shape_vec((n, n), v).unwrap()),
            Just((0..n).collect::<Vec<usize>>()).prop_shuffle(),
            1..=n,
        )
            .prop_map(|(a, order, k)| (a, order[..k].to_vec()))
    })
}

proptest! {
    #[test]
    fn subgraph_is_the_induced_submatrix((a, nodes) in arb_dense_and_subset()) {
        // Dense reference: S[i][j] = A[nodes[i]][nodes[j]], the pattern included.
        let g = Graph::from_dense(a.view()).unwrap();
        let sub = g.subgraph(&nodes).unwrap();
        prop_assert_eq!(sub.num_nodes(), nodes.len());
        let want = Array2::from_shape_fn((nodes.len(), nodes.len()), |(i, j)| a[[nodes[i], nodes[j]]]);
        prop_assert_eq!(sub.adjacency().to_dense(), want.clone());
        let stored = want.iter().filter(|&&w| w != 0.0).count();
        prop_assert_eq!(sub.num_edges(), stored);
    }
}

#[test]
fn subgraph_rejects_empty_out_of_range_and_repeated_nodes() {
    let g = hand_graph();
    // Hand-computed: keeping 2 then 0 leaves 0->2 (1) as 1->0 and the loop 2->2 (4) as 0->0.
    let sub = g.subgraph(&[2, 0]).unwrap();
    assert_eq!(sub.adjacency().to_dense(), array![[4.0, 0.0], [1.0, 0.0]]);
    assert!(matches!(g.subgraph(&[]), Err(Error::Empty(_))));
    assert!(matches!(
        g.subgraph(&[0, 7]),
        Err(Error::NodeOutOfRange {
            index: 7,
            num_nodes: 3
        })
    ));
    match g.subgraph(&[2, 0, 2]) {
        Err(Error::InvalidConfig(m)) => assert!(m.contains("node 2 twice"), "{m}"),
        other => panic!("expected InvalidConfig, got {other:?}"),
    }
}
