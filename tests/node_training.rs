//! `train_node_classifier` with
//! dense input features and with inputs that must fail before (or without)
//! changing the model.

mod common;

use std::collections::HashMap;

use hdgcn::Error;
use hdgcn::autograd::{SparseMatrix, Tape};
use hdgcn::backend::Cpu;
use hdgcn::conv::{DeviceGraph, HdChebConfig};
use hdgcn::data::Split;
use hdgcn::graph::Graph;
use hdgcn::models::NodeClassifier;
use hdgcn::nn::{Activation, Features, Module};
use hdgcn::optim::LrScheduleKind;
use hdgcn::train::{
    NodeTask, NodeTrainConfig, NodeTrainReport, SelectBy, evaluate_nodes, train_node_classifier,
};
use ndarray::Array2;
use rand::{Rng, SeedableRng, rngs::StdRng};
use sprs::CsMat;

type C = Cpu<f64>;

/// Two 12-node cliques joined by one edge; the label is the clique, and
/// the first feature carries it under noise.
fn two_cliques(rng: &mut StdRng) -> (Graph, Array2<f64>, Vec<Option<usize>>, Split) {
    let per = 12;
    let mut edges = vec![(0, per), (per, 0)];
    for c in 0..2 {
        for i in 0..per {
            for j in 0..per {
                if i != j {
                    edges.push((c * per + i, c * per + j));
                }
            }
        }
    }
    let label = |v: usize| v / per;
    let x = Array2::from_shape_fn((2 * per, 4), |(v, j)| {
        let signal = if j == 0 { label(v) as f64 - 0.5 } else { 0.0 };
        signal + rng.random_range(-0.8..0.8)
    });
    let (mut train, mut val, mut test) = (Vec::new(), Vec::new(), Vec::new());
    for v in 0..2 * per {
        match v % per {
            0..3 => train.push(v),
            3..6 => val.push(v),
            _ => test.push(v),
        }
    }
    let labels = (0..2 * per).map(|v| Some(label(v))).collect();
    (
        Graph::from_edges(2 * per, &edges).unwrap(),
        x,
        labels,
        Split { train, val, test },
    )
}

fn task(cpu: &C, features: Features<C>, rng: &mut StdRng) -> NodeTask<C> {
    let (graph, _, labels, split) = two_cliques(rng);
    NodeTask {
        graph: DeviceGraph::new(cpu, graph),
        features,
        labels,
        num_classes: 2,
        split,
    }
}

fn model(cpu: &C) -> NodeClassifier<C> {
    NodeClassifier::gcn(cpu, 4, 8, 2, 0.0, &mut StdRng::seed_from_u64(5)).unwrap()
}

fn cfg() -> NodeTrainConfig {
    NodeTrainConfig {
        epochs: 30,
        lr: 0.05,
        quiet: true,
        ..NodeTrainConfig::default()
    }
}

/// The two-clique task with its own features as dense input.
fn dense_task(cpu: &C, seed: u64) -> NodeTask<C> {
    let (_, x, _, _) = two_cliques(&mut StdRng::seed_from_u64(seed));
    let features = Features::Dense(Tape::new(cpu).constant_array(&x));
    task(cpu, features, &mut StdRng::seed_from_u64(seed))
}

fn values(m: &NodeClassifier<C>) -> Vec<Array2<f64>> {
    m.params().iter().map(|p| p.to_array()).collect()
}

/// A fresh `model` trained on `task`: its parameters, the report, the model.
fn trained(
    cpu: &C,
    task: &NodeTask<C>,
    cfg: &NodeTrainConfig,
) -> (Vec<Array2<f64>>, NodeTrainReport, NodeClassifier<C>) {
    let mut m = model(cpu);
    let report = train_node_classifier(&mut m, task, cfg).unwrap();
    (values(&m), report, m)
}

#[test]
fn dense_features_train_like_the_same_sparse_features() {
    let cpu = C::new();
    let (_, x, _, _) = two_cliques(&mut StdRng::seed_from_u64(1));
    // Dense features built once on a tape of their own, as a user would.
    let dense = Features::Dense(Tape::new(&cpu).constant_array(&x));
    let sparse = Features::Sparse(
        SparseMatrix::from_csmat(&cpu, &CsMat::csr_from_dense(x.view(), 0.0)).unwrap(),
    );
    let mut reports = Vec::new();
    for features in [dense, sparse] {
        let t = task(&cpu, features, &mut StdRng::seed_from_u64(1));
        let mut m = model(&cpu);
        reports.push(train_node_classifier(&mut m, &t, &cfg()).unwrap());
    }
    let (d, s) = (&reports[0], &reports[1]);
    assert_eq!(d.epochs_run, 30);
    assert!(d.test_acc >= 0.85, "dense test accuracy {}", d.test_acc);
    // Same numbers up to f64 rounding of the two products.
    assert!(
        (d.final_loss - s.final_loss).abs() <= 1e-9 * s.final_loss.abs(),
        "dense {} vs sparse {}",
        d.final_loss,
        s.final_loss
    );
    assert_eq!(d.test_acc, s.test_acc);
}

#[test]
fn an_unlabelled_or_empty_test_split_fails_before_training() {
    let cpu = C::new();
    let mut rng = StdRng::seed_from_u64(2);
    let (_, x, _, _) = two_cliques(&mut StdRng::seed_from_u64(2));
    let features = Features::Dense(Tape::new(&cpu).constant_array(&x));
    let mut t = task(&cpu, features, &mut rng);
    let unlabelled = t.split.test[0];
    t.labels[unlabelled] = None;
    let mut m = model(&cpu);
    let before = values(&m);
    let err = train_node_classifier(&mut m, &t, &cfg()).unwrap_err();
    assert!(matches!(err, Error::InvalidConfig(_)), "{err:?}");
    assert!(
        err.to_string()
            .contains(&format!("test node {unlabelled} has no label")),
        "{err}"
    );
    assert_eq!(values(&m), before, "nothing was trained");

    t.labels[unlabelled] = Some(0);
    t.split.test.clear();
    let err = train_node_classifier(&mut m, &t, &cfg()).unwrap_err();
    assert!(matches!(err, Error::Empty(_)), "{err:?}");
    assert_eq!(values(&m), before);
}

#[test]
fn non_finite_dense_features_are_an_error_before_training() {
    let cpu = C::new();
    let (_, mut x, _, _) = two_cliques(&mut StdRng::seed_from_u64(3));
    x[[5, 2]] = f64::NAN;
    let features = Features::Dense(Tape::new(&cpu).constant_array(&x));
    let t = task(&cpu, features, &mut StdRng::seed_from_u64(3));
    let mut m = model(&cpu);
    let before = values(&m);
    let err = train_node_classifier(&mut m, &t, &cfg()).unwrap_err();
    assert!(matches!(err, Error::NonFinite { .. }), "{err:?}");
    assert!(err.to_string().contains("row 5 column 2"), "{err}");
    assert_eq!(values(&m), before);
}

#[test]
fn a_diverging_run_stops_before_a_non_finite_update() {
    let cpu = C::new();
    let t = dense_task(&cpu, 4);
    let mut m = model(&cpu);
    // Adam moves every weight by about lr per step: after the first step the
    // logits overflow, and the run must stop before that reaches the weights.
    let diverge = NodeTrainConfig { lr: 1e200, ..cfg() };
    let err = train_node_classifier(&mut m, &t, &diverge).unwrap_err();
    assert!(matches!(err, Error::Numerical(_)), "{err:?}");
    assert!(
        values(&m).iter().all(|v| v.iter().all(|x| x.is_finite())),
        "no NaN or infinite parameter"
    );
}

#[test]
fn the_learning_rate_follows_the_schedule_every_epoch() {
    let cpu = C::new();
    let task = dense_task(&cpu, 3);
    let run = |cfg: &NodeTrainConfig| {
        let (values, report, _) = trained(&cpu, &task, cfg);
        (values, report)
    };
    let (one, _) = run(&NodeTrainConfig { epochs: 1, ..cfg() });
    let (constant, _) = run(&NodeTrainConfig { epochs: 5, ..cfg() });
    assert_ne!(constant, one);
    // lr · 0 from the second epoch on (for both parameter groups, weight
    // decay included): the selected parameters are the one-epoch ones.
    let frozen = NodeTrainConfig {
        epochs: 5,
        lr_schedule: LrScheduleKind::Step {
            step_size: 1,
            gamma: 0.0,
        },
        ..cfg()
    };
    let (stepped, report) = run(&frozen);
    assert_eq!(report.epochs_run, 5);
    assert_eq!(stepped, one);
    let bad = NodeTrainConfig {
        lr_schedule: LrScheduleKind::Step {
            step_size: 0,
            gamma: 0.5,
        },
        ..cfg()
    };
    let err = train_node_classifier(&mut model(&cpu), &task, &bad).unwrap_err();
    assert!(err.to_string().contains("step_size"), "{err}");
    // One warm-up epoch (lr / 2), then the frozen schedule starting over:
    // its first epoch at the full rate, nothing after. So five epochs end
    // where two epochs of a warmed-up constant rate do, and not where two
    // at the full rate do.
    let warm = NodeTrainConfig {
        lr_warmup_epochs: 1,
        ..frozen.clone()
    };
    let (warmed, report) = run(&warm);
    assert_eq!(report.epochs_run, 5);
    let (two_warmed, _) = run(&NodeTrainConfig {
        epochs: 2,
        lr_warmup_epochs: 1,
        ..cfg()
    });
    assert_eq!(warmed, two_warmed);
    let (two, _) = run(&NodeTrainConfig { epochs: 2, ..cfg() });
    assert_ne!(warmed, two);
    let too_long = NodeTrainConfig {
        lr_warmup_epochs: 5,
        ..warm
    };
    let err = train_node_classifier(&mut model(&cpu), &task, &too_long).unwrap_err();
    assert!(err.to_string().contains("warm-up of 5 epochs"), "{err}");
}

#[test]
fn label_smoothing_bounds_the_training_loss_by_the_targets_entropy() {
    let cpu = C::new();
    let task = dense_task(&cpu, 7);
    // Training loss of the last epoch (the model fits the six training
    // nodes long before 300 epochs).
    let final_loss = |eps: f64| {
        let cfg = NodeTrainConfig {
            epochs: 300,
            label_smoothing: eps,
            weight_decay: 0.0,
            ..cfg()
        };
        train_node_classifier(&mut model(&cpu), &task, &cfg)
            .unwrap()
            .final_loss
    };
    // The cross-entropy against q = (1 - ε)·onehot + ε/C is at least the
    // entropy H(q), reached only at p = q. Two classes, ε = 0.4: q = (0.8, 0.2).
    let entropy = -(0.8f64 * 0.8f64.ln() + 0.2 * 0.2f64.ln());
    let smoothed = final_loss(0.4);
    assert!(
        smoothed >= entropy - 1e-12,
        "{smoothed} below H(q) = {entropy}"
    );
    assert!(
        smoothed < entropy + 1e-3,
        "{smoothed} not near H(q) = {entropy}"
    );
    // Without smoothing the same fit drives the loss towards 0.
    let plain = final_loss(0.0);
    assert!(plain < 1e-2, "plain cross-entropy: {plain}");
    let bad = NodeTrainConfig {
        label_smoothing: 1.5,
        ..cfg()
    };
    let err = train_node_classifier(&mut model(&cpu), &task, &bad).unwrap_err();
    assert!(err.to_string().contains("label_smoothing"), "{err}");
}

#[test]
fn a_node_classifier_without_convolutions_is_an_error_not_a_panic() {
    let cpu = C::new();
    let t = dense_task(&cpu, 6);
    let mut m = model(&cpu);
    m.convs.clear();
    let err = train_node_classifier(&mut m, &t, &cfg()).unwrap_err();
    assert!(matches!(err, Error::InvalidConfig(_)), "{err:?}");
    assert!(m.first_layer_params().is_empty());
    let err = m
        .with_head(&cpu, 2, &mut StdRng::seed_from_u64(0))
        .unwrap_err();
    assert!(
        err.to_string().contains("at least one convolution"),
        "{err}"
    );
}

#[test]
fn the_moving_average_of_the_weights_is_what_gets_selected() {
    let cpu = C::new();
    let task = dense_task(&cpu, 9);
    let run = |cfg: &NodeTrainConfig| trained(&cpu, &task, cfg);
    let base = NodeTrainConfig { epochs: 8, ..cfg() };
    // Decay 0 is the plain run, to the last bit.
    let (plain, p, _) = run(&base);
    let (zero, z, _) = run(&NodeTrainConfig {
        ema_decay: Some(0.0),
        ..base.clone()
    });
    assert_eq!(zero, plain);
    assert_eq!(
        (z.best_epoch, z.val_acc, z.test_acc, z.final_loss),
        (p.best_epoch, p.val_acc, p.test_acc, p.final_loss)
    );
    // Frozen after the first step (lr · 0 from epoch 1): the optimiser's
    // weights go w0 -> w1 and stay, so after n updates the average is
    // w1 + (w0 - w1) · Π_{i<n} min(d, (1 + i) / (10 + i)), and the
    // selected epoch e holds n = e + 1.
    let w0 = values(&model(&cpu));
    let (w1, _, _) = run(&NodeTrainConfig {
        epochs: 1,
        ..base.clone()
    });
    let frozen = NodeTrainConfig {
        lr_schedule: LrScheduleKind::Step {
            step_size: 1,
            gamma: 0.0,
        },
        ema_decay: Some(0.6),
        ..base.clone()
    };
    let (got, r, mut m) = run(&frozen);
    assert_ne!(got, w1);
    let c: f64 = (0..=r.best_epoch)
        .map(|i| 0.6f64.min((1.0 + i as f64) / (10.0 + i as f64)))
        .product();
    for ((g, a), b) in got.iter().zip(&w0).zip(&w1) {
        let want = b + &((a - b) * c);
        for (g, w) in g.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-12 * (1.0 + w.abs()), "{g} vs {w}");
        }
    }
    // The restored weights are the ones validation selected.
    let (val_acc, _) = evaluate_nodes(&mut m, &task, &task.split.val).unwrap();
    assert_eq!(val_acc, r.val_acc);
    let bad = NodeTrainConfig {
        ema_decay: Some(1.0),
        ..cfg()
    };
    let err = train_node_classifier(&mut model(&cpu), &task, &bad).unwrap_err();
    assert!(err.to_string().contains("decay"), "{err}");
}

#[test]
fn selection_by_loss_keeps_the_epoch_of_the_lowest_validation_loss() {
    let cpu = C::new();
    // Two validation nodes carry the other clique's label, so the
    // validation loss falls and then rises as the model grows confident,
    // and its lowest point is not where the accuracy peaks.
    let mut task = dense_task(&cpu, 8);
    for &v in &task.split.val[..2] {
        task.labels[v] = task.labels[v].map(|y| 1 - y);
    }
    let by_acc = NodeTrainConfig {
        epochs: 25,
        lr: 0.01,
        ..cfg()
    };
    let by_loss = NodeTrainConfig {
        select_by: SelectBy::Loss,
        ..by_acc.clone()
    };
    let (_, a, _) = trained(&cpu, &task, &by_acc);
    let (got, r, mut m) = trained(&cpu, &task, &by_loss);
    let h = &r.val_history;
    assert_eq!(
        h, &a.val_history,
        "the metric changes the pick, not the run"
    );
    assert_eq!(h.len(), by_loss.epochs);
    let lowest = (0..h.len())
        .min_by(|&x, &y| h[x].1.total_cmp(&h[y].1))
        .unwrap();
    let most_accurate = (0..h.len())
        .max_by(|&x, &y| h[x].0.total_cmp(&h[y].0).then(h[y].1.total_cmp(&h[x].1)))
        .unwrap();
    assert_ne!(
        lowest, most_accurate,
        "the task must tell the two apart: {h:?}"
    );
    assert_eq!(a.best_epoch, most_accurate, "{h:?}");
    assert_eq!(r.best_epoch, lowest, "{h:?}");
    assert_eq!((r.val_acc, r.val_loss), h[lowest]);
    // The restored weights are that epoch's: a run cut after it (which
    // picks its own last epoch, the lowest loss so far) ends on them, and
    // they evaluate to the recorded numbers.
    let (cut, _, _) = trained(
        &cpu,
        &task,
        &NodeTrainConfig {
            epochs: lowest + 1,
            ..by_loss.clone()
        },
    );
    assert_eq!(got, cut);
    assert_eq!(
        evaluate_nodes(&mut m, &task, &task.split.val).unwrap(),
        h[lowest]
    );
    // The patience counts epochs without a lower loss.
    let first_rise = (1..h.len())
        .find(|&e| h[e].1 >= h[e - 1].1)
        .expect("the validation loss rises");
    let (_, p, _) = trained(
        &cpu,
        &task,
        &NodeTrainConfig {
            patience: Some(1),
            ..by_loss
        },
    );
    assert_eq!(p.epochs_run, first_rise + 1);
    assert_eq!(p.best_epoch, first_rise - 1);
}

#[test]
fn a_gcn_head_propagates_the_logits_over_the_graph() {
    let cpu = C::new();
    let (graph, x, _, _) = two_cliques(&mut StdRng::seed_from_u64(11));
    // HDGCN-static (4 -> 6, K = 2), then GCN(6 -> 2 classes).
    let gcn_head = |seed: u64| {
        let mut rng = StdRng::seed_from_u64(seed);
        let conv = HdChebConfig::in_model(4, 6, 2, 0.5)
            .build_static(&cpu, &mut rng)
            .unwrap();
        NodeClassifier::new(vec![Box::new(conv)], 0.5, Activation::Relu)
            .unwrap()
            .with_gcn_head(&cpu, 2, &mut rng)
            .unwrap()
    };
    let mut m = gcn_head(3);
    let names: Vec<String> = m.named_params().into_iter().map(|(s, _)| s).collect();
    assert!(names.contains(&"conv2.lin.weight".to_string()), "{names:?}");
    assert!(names.contains(&"conv2.bias".to_string()), "{names:?}");
    assert!(!names.iter().any(|s| s.starts_with("head")), "{names:?}");
    // One output layer at most.
    let linear = NodeClassifier::hdgcn_static(&cpu, 4, 6, 2, 2, 0.5, &mut StdRng::seed_from_u64(3));
    let err = linear
        .unwrap()
        .with_gcn_head(&cpu, 2, &mut StdRng::seed_from_u64(3))
        .unwrap_err();
    assert!(
        err.to_string().contains("already has a linear head"),
        "{err}"
    );

    // Reference: Â relu(HD layer) W + b with Â written out densely.
    m.set_training(false);
    let dgraph = DeviceGraph::new(&cpu, graph.clone());
    let tape = Tape::inference(&cpu);
    let xf = Features::Dense(tape.constant_array(&x));
    let h = m.convs[0]
        .forward(&tape, &dgraph, &xf)
        .unwrap()
        .to_array()
        .mapv(|v| v.max(0.0));
    let params: HashMap<String, Array2<f64>> = m
        .named_params()
        .into_iter()
        .map(|(s, p)| (s, p.to_array()))
        .collect();
    let (w, b) = (&params["conv2.lin.weight"], &params["conv2.bias"]);
    let want = common::dense_gcn(&graph.adjacency().to_dense())
        .dot(&h)
        .dot(w)
        + b;
    let got = m.forward(&tape, &dgraph, &xf).unwrap().to_array();
    assert_eq!(got.dim(), (graph.num_nodes(), 2));
    for (g, w) in got.iter().zip(want.iter()) {
        assert!((g - w).abs() < 1e-12, "{g} vs {w}");
    }
    // The propagation matters: the linear-head logits H W + b differ.
    let diff = (&got - &(h.dot(w) + b)).mapv(f64::abs).sum();
    assert!(diff > 1e-3, "{diff}");

    // And it trains: the two cliques are separated on the test nodes.
    let report = train_node_classifier(&mut gcn_head(4), &dense_task(&cpu, 11), &cfg()).unwrap();
    assert!(report.test_acc >= 0.9, "{report:?}");
}

/// `DeviceGraph::release_host` after the GCN operator is cached: training
/// runs from the cache and gives the same model to the bit; an operator
/// that was not built before the release is an error naming the release,
/// not a panic; the node count and segments stay.
#[test]
fn a_released_host_graph_trains_from_the_cached_operator() {
    let cpu = C::new();
    let (_, reference_report, reference) = trained(&cpu, &dense_task(&cpu, 3), &cfg());
    let mut t = dense_task(&cpu, 3);
    let n = t.graph.num_nodes();
    t.graph.gcn_operator().unwrap();
    let host = t.graph.release_host().expect("the host graph is there");
    assert_eq!(host.num_nodes(), n);
    assert!(t.graph.release_host().is_none());
    assert_eq!(t.graph.num_nodes(), n);
    assert_eq!(t.graph.ptr(), vec![0, n]);
    let (params, report, _) = trained(&cpu, &t, &cfg());
    assert_eq!(params, values(&reference));
    assert_eq!(report.final_loss, reference_report.final_loss);
    for err in [
        t.graph.graph().map(|_| ()),
        t.graph
            .scaled_laplacian(
                hdgcn::graph::Normalization::Sym,
                &hdgcn::graph::LambdaMax::Fixed(2.0),
            )
            .map(|_| ()),
    ] {
        match err {
            Err(Error::InvalidConfig(m)) => assert!(m.contains("release_host"), "{m}"),
            other => panic!("expected the release to be named, got {other:?}"),
        }
    }
}
