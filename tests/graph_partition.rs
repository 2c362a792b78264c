//! Cluster-GCN batches (issue 71 item 4): the loader's batches against
//! their definition on any partition, bad input (item 6), and, with the
//! `metis` feature, METIS partitions and Cluster-GCN training.

use std::collections::HashSet;

use hdgcn::Error;
use hdgcn::graph::Graph;
use hdgcn::graph::generate::{GeneratorConfig, generate};
use hdgcn::graph::partition::{ClusterLoader, ClusterLoaderConfig, check_partition};
use hdgcn::graph::sampling::SampledSubgraph;
use hdgcn::train::Loader;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn community_graph(n: usize, seed: u64) -> (Graph, Vec<usize>, ndarray::Array2<f32>) {
    let g = generate(&GeneratorConfig {
        num_nodes: n,
        degree: 6,
        classes: 4,
        feature_dim: 8,
        homophily: 0.9,
        feature_noise: 2.0,
        seed,
        ..GeneratorConfig::default()
    })
    .unwrap();
    (g.to_graph().unwrap().symmetrized(), g.labels, g.features)
}

fn cfg(k: usize, shuffle: bool, seed: u64) -> ClusterLoaderConfig {
    ClusterLoaderConfig {
        clusters_per_batch: k,
        shuffle,
        seed,
    }
}

fn epoch(l: &mut ClusterLoader<'_>, e: usize) -> Vec<SampledSubgraph> {
    l.epoch(e).collect::<hdgcn::Result<_>>().unwrap()
}

#[test]
fn batches_are_the_induced_subgraphs_of_groups_of_parts() {
    let (g, _, _) = community_graph(500, 1);
    let mut rng = StdRng::seed_from_u64(3);
    let parts: Vec<usize> = (0..500).map(|_| rng.random_range(0..10)).collect();
    let scored: Vec<bool> = (0..500).map(|i| i % 3 != 0).collect();
    let mut l = ClusterLoader::new(&g, &parts, 10, &scored, cfg(3, true, 5)).unwrap();
    let edges: HashSet<(usize, usize)> = g.adjacency().iter().map(|(_, e)| e).collect();
    let b0 = epoch(&mut l, 0);
    assert_eq!(b0.len(), 4); // 3 + 3 + 3 + 1 parts
    let mut seen = vec![0; 500];
    for b in &b0 {
        let group: HashSet<usize> = b.nodes().iter().map(|&v| parts[v]).collect();
        // The nodes are exactly those of the group's parts, scored ones first.
        let want: HashSet<usize> = (0..500).filter(|v| group.contains(&parts[*v])).collect();
        assert_eq!(b.nodes().iter().copied().collect::<HashSet<_>>(), want);
        assert_eq!(want.len(), b.num_nodes());
        assert!(b.seeds().iter().all(|&v| scored[v]));
        assert!(b.nodes()[b.num_seeds()..].iter().all(|&v| !scored[v]));
        // The edges are every edge between two of its nodes.
        let got: HashSet<(usize, usize)> = b.global_edges().collect();
        let want_e: HashSet<(usize, usize)> = edges
            .iter()
            .copied()
            .filter(|(s, d)| want.contains(s) && want.contains(d))
            .collect();
        assert_eq!(got, want_e);
        assert_eq!(got.len(), b.edges().len());
        for &v in b.nodes() {
            seen[v] += 1;
        }
    }
    assert!(seen.iter().all(|&c| c == 1), "every node once an epoch");
    // Deterministic under the seed, reshuffled between epochs, the same
    // at one thread.
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let again = one.install(|| epoch(&mut l, 0));
    assert_eq!(again, b0);
    assert_ne!(epoch(&mut l, 1), b0);
    assert_eq!(l.batches(1).unwrap(), epoch(&mut l, 1));
}

#[test]
fn groups_without_scored_nodes_are_skipped() {
    let g = Graph::from_edges(4, &[(0, 1), (1, 0), (2, 3), (3, 2)]).unwrap();
    let mut l = ClusterLoader::new(
        &g,
        &[0, 0, 1, 1],
        2,
        &[true, false, false, false],
        cfg(1, false, 0),
    )
    .unwrap();
    let b = epoch(&mut l, 0);
    assert_eq!(b.len(), 1);
    assert_eq!(b[0].nodes(), &[0, 1]);
    assert_eq!(b[0].num_seeds(), 1);
}

#[test]
fn bad_partitions_are_clear_errors() {
    let g = Graph::from_edges(3, &[(0, 1), (1, 2)]).unwrap();
    let all = [true; 3];
    match check_partition(3, &[0, 1, 2], 4) {
        Err(e @ Error::InvalidConfig(_)) => assert!(
            e.to_string()
                .contains("4 parts is more parts than nodes (3)"),
            "{e}"
        ),
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(check_partition(3, &[0, 0, 0], 0), Err(Error::InvalidConfig(m)) if m.contains("at least 1 part"))
    );
    assert!(matches!(
        check_partition(3, &[0, 0], 1),
        Err(Error::ShapeMismatch { .. })
    ));
    assert!(matches!(
        check_partition(3, &[0, 2, 1], 2),
        Err(Error::IndexOutOfRange {
            index: 2,
            len: 2,
            ..
        })
    ));
    assert!(check_partition(3, &[0, 0, 1], 2).is_ok());
    assert!(matches!(
        ClusterLoader::new(&g, &[0, 1, 2], 4, &all, cfg(1, false, 0)),
        Err(Error::InvalidConfig(m)) if m.contains("more parts than nodes")
    ));
    assert!(matches!(
        ClusterLoader::new(&g, &[0, 1, 1], 2, &all, cfg(0, false, 0)),
        Err(Error::InvalidConfig(m)) if m.contains("clusters_per_batch")
    ));
    assert!(matches!(
        ClusterLoader::new(&g, &[0, 1, 1], 2, &[true], cfg(1, false, 0)),
        Err(Error::ShapeMismatch { .. })
    ));
    assert!(matches!(
        ClusterLoader::new(&g, &[0, 1, 1], 2, &[false; 3], cfg(1, false, 0)),
        Err(Error::Empty(_))
    ));
}

#[cfg(feature = "metis")]
mod metis {
    use super::*;
    use hdgcn::backend::Cpu;
    use hdgcn::graph::partition::metis_partition;
    use hdgcn::models::NodeClassifier;
    use hdgcn::train::{SampledNodeStep, TrainConfig, Trainer, evaluate};

    fn cut(g: &Graph, parts: &[usize]) -> usize {
        g.adjacency()
            .iter()
            .filter(|(_, (s, d))| parts[*s] != parts[*d])
            .count()
    }

    #[test]
    fn metis_cuts_a_grid_far_less_than_a_random_partition() {
        let side = 30;
        let mut edges = Vec::new();
        for r in 0..side {
            for c in 0..side {
                let v = r * side + c;
                if c + 1 < side {
                    edges.extend([(v, v + 1), (v + 1, v)]);
                }
                if r + 1 < side {
                    edges.extend([(v, v + side), (v + side, v)]);
                }
            }
        }
        let g = Graph::from_edges(side * side, &edges).unwrap();
        let parts = metis_partition(&g, 4, 0).unwrap();
        check_partition(side * side, &parts, 4).unwrap();
        let mut sizes = [0usize; 4];
        for &p in &parts {
            sizes[p] += 1;
        }
        assert!(
            sizes.iter().all(|&s| (180..=270).contains(&s)),
            "unbalanced: {sizes:?}"
        );
        let mut rng = StdRng::seed_from_u64(0);
        let random: Vec<usize> = (0..side * side).map(|_| rng.random_range(0..4)).collect();
        // A 30 x 30 grid splits into quarters with a cut of 2 x 2 x 30 directed edges.
        assert!(cut(&g, &parts) <= 2 * 120, "METIS cut {}", cut(&g, &parts));
        assert!(
            cut(&g, &parts) * 5 < cut(&g, &random),
            "{} vs random {}",
            cut(&g, &parts),
            cut(&g, &random)
        );
        assert_eq!(
            metis_partition(&g, 4, 0).unwrap(),
            parts,
            "same seed, same partition"
        );
        assert_eq!(metis_partition(&g, 1, 0).unwrap(), vec![0; side * side]);
        match metis_partition(&g, 901, 0) {
            Err(e @ Error::InvalidConfig(_)) => {
                assert!(e.to_string().contains("more parts than nodes (900)"), "{e}")
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            metis_partition(&g, 0, 0),
            Err(Error::InvalidConfig(_))
        ));
    }

    #[test]
    fn cluster_gcn_trains_on_metis_batches() {
        let (g, labels, x) = community_graph(2000, 4);
        let parts = metis_partition(&g, 20, 0).unwrap();
        let train: Vec<bool> = (0..2000).map(|i| i < 1400).collect();
        let val: Vec<bool> = (0..2000).map(|i| (1400..1700).contains(&i)).collect();
        let test: Vec<bool> = (0..2000).map(|i| i >= 1700).collect();
        let mut loader = ClusterLoader::new(&g, &parts, 20, &train, cfg(4, true, 0)).unwrap();
        let val_b = ClusterLoader::new(&g, &parts, 20, &val, cfg(4, false, 0))
            .unwrap()
            .batches(0)
            .unwrap();
        let test_b = ClusterLoader::new(&g, &parts, 20, &test, cfg(4, false, 0))
            .unwrap()
            .batches(0)
            .unwrap();
        let cpu = Cpu::<f32>::new();
        let mut model =
            NodeClassifier::gcn(&cpu, 8, 16, 4, 0.5, &mut StdRng::seed_from_u64(0)).unwrap();
        let mut step = SampledNodeStep::new(&mut model, &x, &labels, 4).unwrap();
        let fit = Trainer::new(TrainConfig {
            epochs: 30,
            lr: 0.02,
            ..TrainConfig::default()
        })
        .unwrap()
        .fit(&mut step, &mut loader, &val_b)
        .unwrap();
        let acc = evaluate(&mut step, &test_b).unwrap();
        assert_eq!(acc.targets.len(), 300, "every test node scored once");
        assert!(
            fit.val_acc > 0.8 && acc.accuracy > 0.8,
            "val {} test {}",
            fit.val_acc,
            acc.accuracy
        );
    }
}
