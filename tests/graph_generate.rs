//! The graph generator (issue 71 item 2): seeded uniform and R-MAT graphs
//! with stochastic-block-model labels and class-correlated features.

use hdgcn::Error;
use hdgcn::graph::generate::{GeneratedGraph, GeneratorConfig, Topology, generate};
use hdgcn::limits::MemoryBudget;

fn uniform(n: usize, degree: usize, seed: u64) -> GeneratorConfig {
    GeneratorConfig {
        num_nodes: n,
        degree,
        topology: Topology::Uniform,
        seed,
        ..GeneratorConfig::default()
    }
}

fn rmat(n: usize, degree: usize, seed: u64) -> GeneratorConfig {
    GeneratorConfig {
        topology: Topology::RMAT,
        ..uniform(n, degree, seed)
    }
}

#[test]
fn same_seed_same_graph_different_seed_different() {
    for cfg in [uniform(5_000, 6, 7), rmat(5_000, 6, 7)] {
        let a = generate(&cfg).unwrap();
        let b = generate(&cfg).unwrap();
        assert_eq!(a, b, "{:?}", cfg.topology);
        let c = generate(&GeneratorConfig {
            seed: 8,
            ..cfg.clone()
        })
        .unwrap();
        assert_ne!(a.edges, c.edges, "{:?}", cfg.topology);
        assert_ne!(a.features, c.features, "{:?}", cfg.topology);
        assert_eq!(a.labels, c.labels);
    }
}

#[test]
fn output_does_not_depend_on_the_thread_count() {
    for cfg in [uniform(20_000, 4, 3), rmat(20_000, 4, 3)] {
        let many = generate(&cfg).unwrap();
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap()
            .install(|| generate(&cfg).unwrap());
        assert_eq!(many, one, "{:?}", cfg.topology);
    }
}

#[test]
fn uniform_degrees_are_as_asked_without_loops_or_repeats() {
    for (n, d, classes) in [(3_000, 7, 4), (50, 49, 5), (12, 5, 12)] {
        let cfg = GeneratorConfig {
            classes,
            ..uniform(n, d, 1)
        };
        let g = generate(&cfg).unwrap();
        assert_eq!(g.edges.len(), n * d);
        assert!(g.out_degrees().iter().all(|&k| k as usize == d));
        for (u, row) in g.edges.chunks(d).enumerate() {
            let mut targets: Vec<u32> = row
                .iter()
                .map(|&(s, t)| {
                    assert_eq!(s as usize, u);
                    t
                })
                .collect();
            assert!(targets.iter().all(|&t| t as usize != u && (t as usize) < n));
            targets.sort_unstable();
            targets.dedup();
            assert_eq!(targets.len(), d, "repeated neighbour of node {u}");
        }
        // No repeats: the graph keeps every edge with weight 1.
        let graph = g.to_graph().unwrap();
        assert_eq!(graph.num_edges(), n * d);
        assert!(!graph.has_self_loops());
    }
}

/// Total (in + out) degree of every node.
fn total_degrees(g: &GeneratedGraph) -> Vec<f64> {
    g.out_degrees()
        .iter()
        .zip(g.in_degrees())
        .map(|(&o, i)| f64::from(o + i))
        .collect()
}

/// Least-squares slope of log P(D >= x) against log x, at x = mean · 2^j.
fn ccdf_slope(deg: &[f64]) -> f64 {
    let mean = deg.iter().sum::<f64>() / deg.len() as f64;
    let mut pts = Vec::new();
    let mut x = mean;
    loop {
        let frac = deg.iter().filter(|&&d| d >= x).count() as f64 / deg.len() as f64;
        if frac * deg.len() as f64 <= 5.0 {
            break;
        }
        pts.push((x.ln(), frac.ln()));
        x *= 2.0;
    }
    assert!(pts.len() >= 3, "too few points for a slope: {pts:?}");
    let k = pts.len() as f64;
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / k;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / k;
    let cov: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let var: f64 = pts.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    cov / var
}

#[test]
fn rmat_degrees_are_heavy_tailed_uniform_ones_are_not() {
    let n = 1 << 15;
    let g = generate(&rmat(n, 8, 2)).unwrap();
    assert_eq!(g.edges.len(), n * 8);
    assert!(g.edges.iter().all(|&(s, t)| s != t));
    let deg = total_degrees(&g);
    let mean = deg.iter().sum::<f64>() / n as f64;
    let max = deg.iter().copied().fold(0.0, f64::max);
    assert!((mean - 16.0).abs() < 1e-9);
    assert!(max > 20.0 * mean, "R-MAT max degree {max}, mean {mean}");
    let slope = ccdf_slope(&deg);
    assert!(
        (-3.5..=-0.3).contains(&slope),
        "log-log CCDF slope {slope} is not a power law's"
    );

    let u = generate(&uniform(n, 8, 2)).unwrap();
    let deg = total_degrees(&u);
    let max = deg.iter().copied().fold(0.0, f64::max);
    assert!(max < 3.0 * 16.0, "uniform max degree {max}");
}

#[test]
fn homophily_is_within_tolerance_over_1e5_edges() {
    for (topology, h, classes) in [
        (Topology::Uniform, 0.7, 5),
        (Topology::Uniform, 0.1, 3),
        (Topology::RMAT, 0.8, 4),
        (Topology::RMAT, 0.3, 7),
    ] {
        let cfg = GeneratorConfig {
            num_nodes: 10_000,
            degree: 10,
            topology,
            classes,
            homophily: h,
            seed: 11,
            ..GeneratorConfig::default()
        };
        let g = generate(&cfg).unwrap();
        assert_eq!(g.edges.len(), 100_000);
        let got = g.edge_homophily();
        assert!(
            (got - h).abs() < 0.015,
            "{topology:?} classes {classes}: asked {h}, got {got}"
        );
    }
}

#[test]
fn features_separate_the_classes() {
    let classes = 6;
    let cfg = GeneratorConfig {
        num_nodes: 6_000,
        degree: 3,
        classes,
        feature_dim: 16,
        feature_noise: 2.0,
        seed: 5,
        ..GeneratorConfig::default()
    };
    let g = generate(&cfg).unwrap();
    let (n, f) = g.features.dim();
    assert_eq!((n, f), (6_000, 16));
    assert!(g.labels.iter().all(|&c| c < classes));
    // Class means from the first half, nearest-mean accuracy on the second.
    let half = n / 2;
    let mut means = vec![vec![0.0f64; f]; classes];
    let mut counts = vec![0.0f64; classes];
    for i in 0..half {
        counts[g.labels[i]] += 1.0;
        for (m, &x) in means[g.labels[i]].iter_mut().zip(g.features.row(i)) {
            *m += f64::from(x);
        }
    }
    for (m, c) in means.iter_mut().zip(&counts) {
        m.iter_mut().for_each(|v| *v /= c);
    }
    let correct = (half..n)
        .filter(|&i| {
            let dist = |c: usize| -> f64 {
                (0..f)
                    .map(|j| (f64::from(g.features[[i, j]]) - means[c][j]).powi(2))
                    .sum()
            };
            let best = (0..classes)
                .min_by(|&a, &b| dist(a).total_cmp(&dist(b)))
                .unwrap();
            best == g.labels[i]
        })
        .count();
    let acc = correct as f64 / (n - half) as f64;
    assert!(acc > 3.0 / classes as f64, "nearest-mean accuracy {acc}");
    // Noise-free features are exactly the class means.
    let clean = generate(&GeneratorConfig {
        feature_noise: 0.0,
        ..cfg
    })
    .unwrap();
    for i in 0..classes {
        assert_eq!(clean.features.row(i), clean.features.row(i + classes));
    }
}

#[test]
fn csr_and_graph_agree_with_the_edge_list() {
    let g = generate(&rmat(2_000, 5, 9)).unwrap();
    let (indptr, indices) = g.to_csr().unwrap();
    assert_eq!(indptr.len(), 2_001);
    assert_eq!(indptr[2_000], g.edges.len());
    let out = g.out_degrees();
    for u in 0..2_000 {
        let row = &indices[indptr[u]..indptr[u + 1]];
        assert_eq!(row.len(), out[u] as usize);
        assert!(row.windows(2).all(|w| w[0] <= w[1]));
    }
    let graph = g.to_graph().unwrap();
    let total: f64 = graph.adjacency().data().iter().sum();
    assert_eq!(total as usize, g.edges.len(), "repeats are summed");
    let mut uniq = g.edges.clone();
    uniq.sort_unstable();
    uniq.dedup();
    assert_eq!(graph.num_edges(), uniq.len());
}

fn invalid_naming(cfg: GeneratorConfig, field: &str) {
    let e = generate(&cfg).unwrap_err();
    match &e {
        Error::InvalidConfig(m) => assert!(m.contains(field), "{field:?} not in {m}"),
        other => panic!("expected InvalidConfig naming {field}, got {other:?}"),
    }
    assert!(cfg.validate().is_err());
}

#[test]
fn bad_configs_are_errors_naming_the_field() {
    let ok = GeneratorConfig::default();
    ok.validate().unwrap();
    invalid_naming(
        GeneratorConfig {
            num_nodes: 0,
            ..ok.clone()
        },
        "num_nodes",
    );
    invalid_naming(
        GeneratorConfig {
            degree: 1_000,
            ..ok.clone()
        },
        "degree",
    );
    invalid_naming(
        GeneratorConfig {
            degree: usize::MAX,
            ..ok.clone()
        },
        "degree",
    );
    invalid_naming(
        GeneratorConfig {
            homophily: 1.5,
            ..ok.clone()
        },
        "homophily",
    );
    invalid_naming(
        GeneratorConfig {
            homophily: f64::NAN,
            ..ok.clone()
        },
        "homophily",
    );
    invalid_naming(
        GeneratorConfig {
            classes: 0,
            ..ok.clone()
        },
        "classes",
    );
    invalid_naming(
        GeneratorConfig {
            classes: 1_001,
            ..ok.clone()
        },
        "classes",
    );
    invalid_naming(
        GeneratorConfig {
            feature_noise: -1.0,
            ..ok.clone()
        },
        "feature_noise",
    );
    invalid_naming(
        GeneratorConfig {
            topology: Topology::Rmat {
                a: 1.2,
                b: 0.0,
                c: 0.0,
                d: -0.2,
            },
            ..ok.clone()
        },
        "topology.a",
    );
    invalid_naming(
        GeneratorConfig {
            topology: Topology::Rmat {
                a: 0.5,
                b: 0.2,
                c: 0.2,
                d: 0.2,
            },
            ..ok.clone()
        },
        "a + b + c + d",
    );
    // R-MAT allows degree >= num_nodes (a multigraph).
    generate(&GeneratorConfig {
        degree: 2_000,
        ..rmat(1_000, 0, 0)
    })
    .unwrap();
}

#[test]
fn degenerate_inputs_terminate() {
    // All R-MAT mass on the diagonal, one-node classes, two nodes.
    for cfg in [
        GeneratorConfig {
            topology: Topology::Rmat {
                a: 1.0,
                b: 0.0,
                c: 0.0,
                d: 0.0,
            },
            ..rmat(100, 3, 0)
        },
        GeneratorConfig {
            classes: 3,
            homophily: 1.0,
            ..rmat(3, 4, 0)
        },
        GeneratorConfig {
            classes: 2,
            homophily: 1.0,
            ..uniform(2, 1, 0)
        },
        GeneratorConfig {
            classes: 1,
            ..uniform(1, 0, 0)
        },
    ] {
        let g = generate(&cfg).unwrap();
        assert_eq!(g.edges.len(), cfg.num_nodes * cfg.degree);
        assert!(g.edges.iter().all(|&(s, t)| s != t));
    }
}

#[test]
fn over_budget_is_refused_before_allocating() {
    let cfg = GeneratorConfig {
        num_nodes: 10_000_000,
        degree: 10,
        feature_dim: 128,
        ..GeneratorConfig::default()
    };
    let r = MemoryBudget::from_bytes(1 << 20).scope(|| generate(&cfg));
    match r {
        Err(Error::OverBudget { what, needed, .. }) => {
            assert!(what.contains("generated graph"), "{what}");
            assert_eq!(needed, cfg.output_bytes().unwrap());
        }
        other => panic!("expected OverBudget, got {other:?}"),
    }
}
