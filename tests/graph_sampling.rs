//! Neighbour sampling (issue 71 item 3): the sampled subgraph against its
//! definition (edges of the graph, within L hops, fan-out bounds, the full
//! L-hop neighbourhood for -1 against a BFS), relabelling, determinism
//! across thread counts, the loader, bad input (item 6) and training on
//! sampled batches.

use std::collections::{HashMap, HashSet};

use hdgcn::Error;
use hdgcn::backend::Cpu;
use hdgcn::graph::Graph;
use hdgcn::graph::generate::{GeneratorConfig, Topology, generate};
use hdgcn::graph::sampling::{
    NeighborLoader, NeighborLoaderConfig, NeighborSampler, SampledSubgraph, SamplingConfig,
};
use hdgcn::models::NodeClassifier;
use hdgcn::train::{Loader, SampledNodeStep, TrainConfig, TrainStep, Trainer, evaluate};
use proptest::prelude::*;
use rand::SeedableRng;
use rand::rngs::StdRng;

/// In-neighbour lists straight from the edge list (independent of the sampler).
fn in_lists(n: usize, edges: &[(usize, usize)]) -> Vec<Vec<usize>> {
    let mut inn = vec![Vec::new(); n];
    for &(s, d) in edges {
        inn[d].push(s);
    }
    inn
}

/// Hop distance of every node from `seeds` following edges backwards
/// (from a node to its in-neighbours), up to `depth`.
fn bfs_in(inn: &[Vec<usize>], seeds: &[usize], depth: usize) -> HashMap<usize, usize> {
    let mut dist: HashMap<usize, usize> = seeds.iter().map(|&s| (s, 0)).collect();
    let mut frontier: Vec<usize> = seeds.to_vec();
    for h in 1..=depth {
        let mut next = Vec::new();
        for &v in &frontier {
            for &u in &inn[v] {
                if let std::collections::hash_map::Entry::Vacant(e) = dist.entry(u) {
                    e.insert(h);
                    next.push(u);
                }
            }
        }
        frontier = next;
    }
    dist
}

/// Every invariant of a sample of `seeds` with `cfg` on the graph of `edges`.
fn check_sample(
    n: usize,
    edges: &[(usize, usize)],
    seeds: &[usize],
    cfg: &SamplingConfig,
    sub: &SampledSubgraph,
) {
    let inn = in_lists(n, edges);
    let edge_count: HashMap<(usize, usize), usize> =
        edges.iter().fold(HashMap::new(), |mut m, &e| {
            *m.entry(e).or_default() += 1;
            m
        });
    let fan = cfg.num_neighbors();
    let depth = fan.len();
    // Seeds first, in order; node ids distinct and in range.
    assert_eq!(sub.num_seeds(), seeds.len());
    assert_eq!(sub.seeds(), seeds);
    assert_eq!(&sub.nodes()[..seeds.len()], seeds);
    let distinct: HashSet<usize> = sub.nodes().iter().copied().collect();
    assert_eq!(distinct.len(), sub.num_nodes(), "a node sampled twice");
    assert!(sub.nodes().iter().all(|&v| v < n));
    // Per-hop counts add up.
    assert_eq!(sub.num_sampled_nodes().len(), depth + 1);
    assert_eq!(
        sub.num_sampled_nodes().iter().sum::<usize>(),
        sub.num_nodes()
    );
    assert_eq!(sub.num_sampled_edges().len(), depth);
    assert_eq!(
        sub.num_sampled_edges().iter().sum::<usize>(),
        sub.edges().len()
    );
    // Hop of every node: the block it was added in.
    let mut hop_of = vec![0; sub.num_nodes()];
    let mut at = 0;
    for (h, &c) in sub.num_sampled_nodes().iter().enumerate() {
        hop_of[at..at + c].fill(h);
        at += c;
    }
    // Within L hops of a seed (at least as close as its hop says).
    let dist = bfs_in(&inn, seeds, depth);
    for (i, &v) in sub.nodes().iter().enumerate() {
        let d = *dist
            .get(&v)
            .unwrap_or_else(|| panic!("node {v} not within {depth} hops"));
        assert!(d <= hop_of[i], "node {v}: hop {} < distance {d}", hop_of[i]);
    }
    // Edges: local ids in range, they exist in the graph, relabelling round-trips,
    // the target was reached one hop before its source block was drawn.
    let mut per_dst: HashMap<usize, Vec<usize>> = HashMap::new();
    for (&(s, d), (gs, gd)) in sub.edges().iter().zip(sub.global_edges()) {
        assert!(s < sub.num_nodes() && d < sub.num_nodes());
        assert_eq!((sub.nodes()[s], sub.nodes()[d]), (gs, gd));
        assert!(
            edge_count.contains_key(&(gs, gd)),
            "({gs}, {gd}) not an edge"
        );
        assert!(hop_of[d] < depth);
        assert!(hop_of[s] <= hop_of[d] + 1);
        per_dst.entry(d).or_default().push(gs);
    }
    // Fan-out bounds for every node expanded (all nodes of hops < L).
    for (d, &v) in sub.nodes().iter().enumerate() {
        if hop_of[d] >= depth {
            assert!(!per_dst.contains_key(&d), "node of the last hop expanded");
            continue;
        }
        let got = per_dst.remove(&d).unwrap_or_default();
        let deg = inn[v].len();
        let k = fan[hop_of[d]];
        if k < 0 {
            let mut a = got.clone();
            let mut b = inn[v].clone();
            a.sort_unstable();
            b.sort_unstable();
            assert_eq!(a, b, "node {v}: -1 must take every in-edge");
        } else if cfg.replace() {
            assert_eq!(got.len(), if deg == 0 { 0 } else { k as usize });
        } else {
            assert_eq!(got.len(), deg.min(k as usize), "node {v}");
            // Distinct edges: no edge drawn more often than it is stored.
            let mut c: HashMap<usize, usize> = HashMap::new();
            for &u in &got {
                *c.entry(u).or_default() += 1;
            }
            for (u, m) in c {
                assert!(m <= edge_count[&(u, v)], "edge ({u}, {v}) drawn {m} times");
            }
        }
    }
}

fn sbm(
    n: usize,
    degree: usize,
    seed: u64,
    topology: Topology,
) -> (Vec<(usize, usize)>, NeighborSampler) {
    let g = generate(&GeneratorConfig {
        num_nodes: n,
        degree,
        topology,
        feature_dim: 4,
        seed,
        ..GeneratorConfig::default()
    })
    .unwrap();
    let edges: Vec<(usize, usize)> = g
        .edges
        .iter()
        .map(|&(s, d)| (s as usize, d as usize))
        .collect();
    (edges, NeighborSampler::from_edges(n, &g.edges).unwrap())
}

#[test]
fn samples_satisfy_their_definition_with_and_without_replacement() {
    for topology in [Topology::Uniform, Topology::RMAT] {
        let (edges, sampler) = sbm(600, 6, 3, topology);
        for replace in [false, true] {
            for fan in [vec![3, 2], vec![10, 4, 2], vec![-1, 2], vec![1]] {
                let cfg = SamplingConfig::new(fan).unwrap().with_replacement(replace);
                let seeds = [5, 17, 300, 599, 42];
                let mut rng = StdRng::seed_from_u64(11);
                let sub = sampler.sample(&seeds, &cfg, &mut rng).unwrap();
                check_sample(600, &edges, &seeds, &cfg, &sub);
            }
        }
    }
}

#[test]
fn minus_one_gives_the_whole_l_hop_neighbourhood() {
    let (edges, sampler) = sbm(400, 3, 5, Topology::RMAT);
    let inn = in_lists(400, &edges);
    let seeds = [0, 7, 123];
    for depth in 1..=3 {
        let cfg = SamplingConfig::new(vec![-1; depth]).unwrap();
        let sub = sampler
            .sample(&seeds, &cfg, &mut StdRng::seed_from_u64(0))
            .unwrap();
        let want: HashSet<usize> = bfs_in(&inn, &seeds, depth).into_keys().collect();
        let got: HashSet<usize> = sub.nodes().iter().copied().collect();
        assert_eq!(got, want, "depth {depth}");
        // The edges: every in-edge of every node closer than `depth`, once.
        let dist = bfs_in(&inn, &seeds, depth);
        let mut want_edges: Vec<(usize, usize)> = edges
            .iter()
            .copied()
            .filter(|&(_, d)| dist.get(&d).is_some_and(|&h| h < depth))
            .collect();
        let mut got_edges: Vec<(usize, usize)> = sub.global_edges().collect();
        want_edges.sort_unstable();
        got_edges.sort_unstable();
        assert_eq!(got_edges, want_edges, "depth {depth}");
        check_sample(400, &edges, &seeds, &cfg, &sub);
    }
}

#[test]
fn a_graph_and_its_edge_list_give_the_same_sampler_and_samples() {
    let edges = [(1, 0), (2, 0), (3, 0), (4, 1), (0, 4), (2, 2)];
    let g = Graph::from_edges(5, &edges).unwrap();
    let a = NeighborSampler::new(&g).unwrap();
    let e32: Vec<(u32, u32)> = edges.iter().map(|&(s, d)| (s as u32, d as u32)).collect();
    let b = NeighborSampler::from_edges(5, &e32).unwrap();
    assert_eq!(a, b);
    assert_eq!(a.in_neighbors(0), &[1, 2, 3]);
    assert_eq!(a.in_neighbors(2), &[2]);
    let cfg = SamplingConfig::new(vec![2, 2]).unwrap();
    let s1 = a
        .sample(&[0, 2], &cfg, &mut StdRng::seed_from_u64(9))
        .unwrap();
    let s2 = b
        .sample(&[0, 2], &cfg, &mut StdRng::seed_from_u64(9))
        .unwrap();
    assert_eq!(s1, s2);
    // The sampled subgraph as a Graph: its edges are the sampled ones.
    let sg = s1.to_graph().unwrap();
    assert_eq!(sg.num_nodes(), s1.num_nodes());
    let mut got: Vec<(usize, usize)> = sg.adjacency().iter().map(|(_, e)| e).collect();
    let mut want = s1.edges().to_vec();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want);
}

fn loader_cfg(fan: Vec<i64>, batch_size: usize, shuffle: bool, seed: u64) -> NeighborLoaderConfig {
    NeighborLoaderConfig {
        sampling: SamplingConfig::new(fan).unwrap(),
        batch_size,
        shuffle,
        seed,
    }
}

fn epoch_of(loader: &mut NeighborLoader<'_>, epoch: usize) -> Vec<SampledSubgraph> {
    loader.epoch(epoch).collect::<hdgcn::Result<_>>().unwrap()
}

#[test]
fn same_seed_same_batches_at_one_and_two_threads() {
    let (_, sampler) = sbm(3000, 8, 1, Topology::RMAT);
    let seeds: Vec<usize> = (0..2000).collect();
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let mut l = NeighborLoader::new(
                &sampler,
                seeds.clone(),
                loader_cfg(vec![5, 5], 128, true, 7),
            )
            .unwrap();
            (
                epoch_of(&mut l, 0),
                epoch_of(&mut l, 1),
                l.sample_epoch(1).unwrap(),
            )
        })
    };
    let (a0, a1, a1_all) = run(1);
    let (b0, b1, b1_all) = run(2);
    assert_eq!(a0, b0);
    assert_eq!(a1, b1);
    assert_eq!(a1, a1_all, "sample_epoch gives the loader's batches");
    assert_eq!(b1, b1_all);
    assert_ne!(a0, a1, "epochs reshuffle");
    assert_eq!(a0.len(), 16);
    // Every seed once per epoch.
    let mut all: Vec<usize> = a0.iter().flat_map(|b| b.seeds().to_vec()).collect();
    all.sort_unstable();
    assert_eq!(all, seeds);
    // Another seed, other batches.
    let mut other = NeighborLoader::new(
        &sampler,
        seeds.clone(),
        loader_cfg(vec![5, 5], 128, true, 8),
    )
    .unwrap();
    assert_ne!(epoch_of(&mut other, 0), a0);
}

#[test]
fn without_shuffle_batches_follow_the_seed_order() {
    let (_, sampler) = sbm(500, 4, 2, Topology::Uniform);
    let seeds: Vec<usize> = (100..300).rev().collect();
    let mut l =
        NeighborLoader::new(&sampler, seeds.clone(), loader_cfg(vec![2], 64, false, 0)).unwrap();
    assert_eq!(l.num_batches(), 4);
    let b = epoch_of(&mut l, 3);
    let got: Vec<usize> = b.iter().flat_map(|x| x.seeds().to_vec()).collect();
    assert_eq!(got, seeds);
    assert_eq!(b.last().unwrap().num_seeds(), 200 - 3 * 64);
}

#[test]
fn bad_input_is_a_clear_error() {
    for (fan, needle) in [
        (vec![10, 0], "fan-out 0 at hop 2"),
        (vec![-2], "fan-out -2 at hop 1"),
        (vec![], "at least one fan-out"),
    ] {
        match SamplingConfig::new(fan) {
            Err(e @ Error::InvalidConfig(_)) => assert!(e.to_string().contains(needle), "{e}"),
            other => panic!("expected InvalidConfig, got {other:?}"),
        }
    }
    let g = Graph::from_edges(4, &[(0, 1), (1, 2), (2, 3)]).unwrap();
    let sampler = NeighborSampler::new(&g).unwrap();
    let cfg = SamplingConfig::new(vec![2]).unwrap();
    let mut rng = StdRng::seed_from_u64(0);
    assert!(
        matches!(sampler.sample(&[], &cfg, &mut rng), Err(Error::Empty(m)) if m.contains("empty seed set"))
    );
    assert!(matches!(
        sampler.sample(&[1, 4], &cfg, &mut rng),
        Err(Error::NodeOutOfRange {
            index: 4,
            num_nodes: 4
        })
    ));
    match sampler.sample(&[2, 1, 2], &cfg, &mut rng) {
        Err(e @ Error::InvalidConfig(_)) => {
            assert!(e.to_string().contains("seed node 2 listed twice"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    let lc = |b| loader_cfg(vec![2], b, true, 0);
    assert!(matches!(
        NeighborLoader::new(&sampler, vec![], lc(2)),
        Err(Error::Empty(_))
    ));
    assert!(matches!(
        NeighborLoader::new(&sampler, vec![0, 9], lc(2)),
        Err(Error::NodeOutOfRange {
            index: 9,
            num_nodes: 4
        })
    ));
    match NeighborLoader::new(&sampler, vec![0, 1], lc(0)) {
        Err(e @ Error::InvalidConfig(_)) => assert!(e.to_string().contains("batch_size"), "{e}"),
        other => panic!("{other:?}"),
    }
    match NeighborLoader::new(&sampler, vec![3, 1, 3], lc(2)) {
        Err(e @ Error::InvalidConfig(_)) => {
            assert!(e.to_string().contains("seed node 3 listed twice"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        NeighborSampler::from_edges(3, &[(0, 1), (1, 3)]),
        Err(Error::NodeOutOfRange {
            index: 3,
            num_nodes: 3
        })
    ));
    assert!(matches!(
        NeighborSampler::from_edges(0, &[]),
        Err(Error::Empty(_))
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Any small multigraph (self-loops and repeats included), any seeds,
    /// fan-outs and replacement: the sample satisfies its definition.
    #[test]
    fn any_graph_any_seeds(
        n in 1usize..25,
        raw_edges in prop::collection::vec((0usize..25, 0usize..25), 0..80),
        raw_seeds in prop::collection::vec(0usize..25, 1..6),
        fan in prop::collection::vec(prop_oneof![Just(-1i64), 1i64..5], 1..4),
        replace in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let edges: Vec<(usize, usize)> = raw_edges.into_iter().map(|(s, d)| (s % n, d % n)).collect();
        let mut seeds: Vec<usize> = Vec::new();
        for s in raw_seeds {
            if !seeds.contains(&(s % n)) {
                seeds.push(s % n);
            }
        }
        let e32: Vec<(u32, u32)> = edges.iter().map(|&(s, d)| (s as u32, d as u32)).collect();
        let sampler = NeighborSampler::from_edges(n, &e32).unwrap();
        let cfg = SamplingConfig::new(fan).unwrap().with_replacement(replace);
        let sub = sampler.sample(&seeds, &cfg, &mut StdRng::seed_from_u64(seed)).unwrap();
        check_sample(n, &edges, &seeds, &cfg, &sub);
        // Same stream, same sample.
        prop_assert_eq!(sampler.sample(&seeds, &cfg, &mut StdRng::seed_from_u64(seed)).unwrap(), sub);
    }
}

/// A step scores the seeds only, and sampled GCN training learns a
/// community graph (in memory).
#[test]
fn sampled_training_scores_seeds_and_learns() {
    let g = generate(&GeneratorConfig {
        num_nodes: 2000,
        degree: 6,
        classes: 4,
        feature_dim: 8,
        homophily: 0.9,
        feature_noise: 2.0,
        seed: 4,
        ..GeneratorConfig::default()
    })
    .unwrap();
    let sampler = NeighborSampler::from_edges(g.num_nodes, &g.edges).unwrap();
    let cpu = Cpu::<f32>::new();
    let mut model =
        NodeClassifier::gcn(&cpu, 8, 16, 4, 0.5, &mut StdRng::seed_from_u64(0)).unwrap();
    let mut train = NeighborLoader::new(
        &sampler,
        (0..1400).collect(),
        loader_cfg(vec![5, 5], 128, true, 0),
    )
    .unwrap();
    let val = NeighborLoader::new(
        &sampler,
        (1400..1700).collect(),
        loader_cfg(vec![5, 5], 128, false, 1),
    )
    .unwrap()
    .sample_epoch(0)
    .unwrap();
    let test = NeighborLoader::new(
        &sampler,
        (1700..2000).collect(),
        loader_cfg(vec![-1, -1], 300, false, 2),
    )
    .unwrap()
    .sample_epoch(0)
    .unwrap();
    let mut step = SampledNodeStep::new(&mut model, &g.features, &g.labels, 4).unwrap();
    let tape = hdgcn::autograd::Tape::inference(&cpu);
    let out = step.train_step(&tape, &val[0]).unwrap();
    assert_eq!(out.logits.shape(), (val[0].num_seeds(), 4));
    assert_eq!(
        out.targets.host(),
        &val[0]
            .seeds()
            .iter()
            .map(|&v| g.labels[v])
            .collect::<Vec<_>>()[..]
    );
    let before = evaluate(&mut step, &test).unwrap().accuracy;
    let fit = Trainer::new(TrainConfig {
        epochs: 8,
        lr: 0.01,
        ..TrainConfig::default()
    })
    .unwrap()
    .fit(&mut step, &mut train, &val)
    .unwrap();
    let after = evaluate(&mut step, &test).unwrap();
    assert_eq!(after.targets.len(), 300);
    assert!(
        fit.val_acc > 0.8 && after.accuracy > 0.8,
        "val {} test {} (before {before})",
        fit.val_acc,
        after.accuracy
    );
    assert!(
        after.accuracy > before + 0.2,
        "before {before}, after {}",
        after.accuracy
    );
    // Labels must match the features and the classes.
    let mut m2 = NodeClassifier::gcn(&cpu, 8, 16, 4, 0.5, &mut StdRng::seed_from_u64(0)).unwrap();
    assert!(matches!(
        SampledNodeStep::new(&mut m2, &g.features, &g.labels[1..], 4),
        Err(Error::ShapeMismatch { .. })
    ));
    assert!(matches!(
        SampledNodeStep::new(&mut m2, &g.features, &g.labels, 3),
        Err(Error::InvalidConfig(m)) if m.contains("label 3")
    ));
}
