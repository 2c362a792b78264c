//! Graph classification: learnable synthetic tasks, reproducibility,
//! validation-only model selection, batching, error paths.

use hdgcn::Error;
use hdgcn::autograd::gradcheck::check_params;
use hdgcn::autograd::{Index, Tape};
use hdgcn::backend::{Axis, Cpu};
use hdgcn::checkpoint::{load_checkpoint, save_checkpoint};
use hdgcn::conv::{DeviceGraph, GcnConv, GraphConv};
use hdgcn::graph::{Batch, Graph};
use hdgcn::models::{GraphClassifier, GraphInput, InputLayer, InputSpec, NodeWeighting};
use hdgcn::nn::{
    Activation, Embedding, Features, Linear, Module, PositionalEncoding, SubwordConfig,
    SubwordEmbedding,
};
use hdgcn::optim::{LrScheduleKind, OptimizerKind};
use hdgcn::readout::{AttentionPooling, MeanMaxReadout, MeanReadout};
use hdgcn::train::{
    GraphFeatures, GraphSample, GraphTrainConfig, SelectBy, evaluate_graphs, train_graph_classifier,
};
use ndarray::Array2;
use rand::{Rng, SeedableRng, rngs::StdRng};

fn undirected(n: usize, edges: &[(usize, usize)]) -> Graph {
    let both: Vec<_> = edges.iter().flat_map(|&(a, b)| [(a, b), (b, a)]).collect();
    Graph::from_edges(n, &both).unwrap()
}

/// Label 0: a cycle; label 1: a star. Sizes overlap, features are all ones,
/// so only the structure tells them apart.
fn cycles_and_stars(rng: &mut StdRng, count: usize) -> Vec<GraphSample> {
    (0..count)
        .map(|_| {
            let n = rng.random_range(4..=10);
            let label = rng.random_range(0..2);
            let edges: Vec<(usize, usize)> = if label == 0 {
                (0..n).map(|i| (i, (i + 1) % n)).collect()
            } else {
                (1..n).map(|i| (0, i)).collect()
            };
            GraphSample::new(
                undirected(n, &edges),
                GraphFeatures::Dense(Array2::ones((n, 1))),
                label,
            )
            .unwrap()
        })
        .collect()
}

/// Text-like documents: nodes are distinct words of a 20-word vocabulary,
/// edges join consecutive words. Class c draws 85% of its words from
/// `10c..10c+10` and the rest from the other half.
fn documents(rng: &mut StdRng, count: usize) -> Vec<GraphSample> {
    (0..count)
        .map(|_| {
            let label = rng.random_range(0..2usize);
            let len = rng.random_range(4..=8);
            let mut words: Vec<usize> = Vec::new();
            while words.len() < len {
                let own = rng.random_bool(0.85);
                let half = if own { label } else { 1 - label };
                let w = 10 * half + rng.random_range(0..10);
                if !words.contains(&w) {
                    words.push(w);
                }
            }
            let edges: Vec<(usize, usize)> = (1..len).map(|i| (i - 1, i)).collect();
            GraphSample::new(undirected(len, &edges), GraphFeatures::Tokens(words), label).unwrap()
        })
        .collect()
}

/// 200 [`documents`]: 120 for training, 40 for validation, 40 for test.
fn document_sets(rng: &mut StdRng) -> (Vec<GraphSample>, Vec<GraphSample>, Vec<GraphSample>) {
    let mut data = documents(rng, 200);
    let test = data.split_off(160);
    let val = data.split_off(120);
    (data, val, test)
}

fn cfg(epochs: usize, optimizer: OptimizerKind) -> GraphTrainConfig {
    GraphTrainConfig {
        epochs,
        batch_size: 16,
        lr: 0.01,
        lr_schedule: LrScheduleKind::Constant,
        lr_warmup_epochs: 0,
        weight_decay: 0.0,
        optimizer,
        patience: Some(15),
        select_by: SelectBy::Accuracy,
        clip_grad_norm: None,
        label_smoothing: 0.0,
        ema_decay: None,
        seed: 1,
        quiet: true,
    }
}

#[test]
fn learns_cycles_versus_stars() {
    let mut rng = StdRng::seed_from_u64(10);
    let data = cycles_and_stars(&mut rng, 140);
    let (train, rest) = data.split_at(80);
    let (val, test) = rest.split_at(30);
    let cpu = Cpu::<f32>::new();
    let mut model =
        GraphClassifier::gcn(&cpu, InputSpec::Dense(1), 16, 2, 2, 0.0, &mut rng).unwrap();
    let report =
        train_graph_classifier(&mut model, train, val, test, &cfg(40, OptimizerKind::Adam))
            .unwrap();
    assert!(report.val_acc >= 0.95, "{report:?}");
    assert!(report.test_acc >= 0.9, "{report:?}");
    assert_eq!(report.epoch_secs.len(), report.epochs_run);
    assert!(report.best_epoch < report.epochs_run);
    // The model holds the selected parameters.
    let (val_acc, val_loss) = evaluate_graphs(&mut model, val, 7).unwrap();
    assert_eq!(val_acc, report.val_acc);
    assert!((val_loss - report.val_loss).abs() < 1e-5);
    let (test_acc, _) = evaluate_graphs(&mut model, test, 64).unwrap();
    assert_eq!(test_acc, report.test_acc);
}

#[test]
fn learns_text_like_documents_with_embeddings_and_adabelief() {
    let mut rng = StdRng::seed_from_u64(11);
    let (train, val, test) = &document_sets(&mut rng);
    let cpu = Cpu::<f32>::new();
    let spec = InputSpec::Tokens { vocab: 20, dim: 8 };
    let mut model = GraphClassifier::gcn(&cpu, spec, 16, 1, 2, 0.2, &mut rng).unwrap();
    let report = train_graph_classifier(
        &mut model,
        train,
        val,
        test,
        &cfg(40, OptimizerKind::AdaBelief),
    )
    .unwrap();
    assert!(report.val_acc >= 0.85, "{report:?}");
    assert!(report.test_acc >= 0.85, "{report:?}");

    // A checkpoint of the trained model reproduces its accuracy in a fresh one.
    let dir = std::env::temp_dir().join(format!("hdgcn-graphcls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("model.safetensors");
    save_checkpoint(&model, &path).unwrap();
    let mut fresh = GraphClassifier::gcn(&cpu, spec, 16, 1, 2, 0.2, &mut rng).unwrap();
    load_checkpoint(&fresh, &path).unwrap();
    assert_eq!(
        evaluate_graphs(&mut fresh, test, 16).unwrap(),
        evaluate_graphs(&mut model, test, 16).unwrap()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn runs_repeat_and_selection_never_looks_at_test_labels() {
    let mut data_rng = StdRng::seed_from_u64(12);
    let data = cycles_and_stars(&mut data_rng, 60);
    let (train, rest) = data.split_at(30);
    let (val, test) = rest.split_at(15);
    let flipped: Vec<GraphSample> = test
        .iter()
        .map(|s| GraphSample {
            label: 1 - s.label,
            ..s.clone()
        })
        .collect();
    let cpu = Cpu::<f64>::new();
    let run = |test: &[GraphSample]| {
        let mut rng = StdRng::seed_from_u64(5);
        let mut model =
            GraphClassifier::gcn(&cpu, InputSpec::Dense(1), 8, 2, 2, 0.3, &mut rng).unwrap();
        let mut c = cfg(8, OptimizerKind::Adam);
        c.batch_size = 7;
        c.patience = None;
        train_graph_classifier(&mut model, train, val, test, &c).unwrap()
    };
    let a = run(test);
    let b = run(test);
    let c = run(&flipped);
    for r in [&b, &c] {
        assert_eq!(r.best_epoch, a.best_epoch);
        assert_eq!(r.val_acc, a.val_acc);
        assert_eq!(r.val_loss, a.val_loss);
        assert_eq!(r.final_loss, a.final_loss);
    }
    assert_eq!(b.test_acc, a.test_acc);
    assert!((c.test_acc - (1.0 - a.test_acc)).abs() < 1e-12);
}

#[test]
fn each_metric_selects_its_best_epoch_of_the_same_run() {
    let mut data_rng = StdRng::seed_from_u64(12);
    let data = cycles_and_stars(&mut data_rng, 60);
    let (train, rest) = data.split_at(30);
    let (val, test) = rest.split_at(15);
    let cpu = Cpu::<f64>::new();
    let run = |select_by| {
        let mut rng = StdRng::seed_from_u64(5);
        let mut model =
            GraphClassifier::gcn(&cpu, InputSpec::Dense(1), 8, 2, 2, 0.3, &mut rng).unwrap();
        let c = GraphTrainConfig {
            patience: None,
            select_by,
            ..cfg(12, OptimizerKind::Adam)
        };
        let r = train_graph_classifier(&mut model, train, val, test, &c).unwrap();
        let (acc, loss) = evaluate_graphs(&mut model, val, 7).unwrap();
        assert_eq!(acc, r.val_acc, "the model holds the selected epoch");
        assert!((loss - r.val_loss).abs() < 1e-12);
        r
    };
    let a = run(SelectBy::Accuracy);
    let l = run(SelectBy::Loss);
    assert_eq!(
        a.history, l.history,
        "the metric changes the pick, not the run"
    );
    let h = &l.history;
    let lowest = (0..h.len())
        .min_by(|&x, &y| h[x].val_loss.total_cmp(&h[y].val_loss))
        .unwrap();
    let most_accurate = (0..h.len())
        .max_by(|&x, &y| {
            (h[x].val_acc.total_cmp(&h[y].val_acc)).then(h[y].val_loss.total_cmp(&h[x].val_loss))
        })
        .unwrap();
    assert_eq!(l.best_epoch, lowest, "{h:?}");
    assert_eq!(l.val_loss, h[lowest].val_loss);
    assert_eq!(a.best_epoch, most_accurate, "{h:?}");
    assert_eq!(a.val_acc, h[most_accurate].val_acc);
}

fn small_model(cpu: &Cpu<f64>, rng: &mut StdRng) -> GraphClassifier<Cpu<f64>> {
    let input = InputLayer::Linear(Linear::new(cpu, 2, 3, true, rng).unwrap());
    let convs: Vec<Box<dyn GraphConv<Cpu<f64>>>> = vec![
        Box::new(GcnConv::new(cpu, 3, 3, rng).unwrap()),
        Box::new(GcnConv::new(cpu, 3, 4, rng).unwrap()),
    ];
    let readout = Box::new(AttentionPooling::linear(cpu, 4, Some(5), rng).unwrap());
    let classifier = Linear::new(cpu, 5, 3, true, rng).unwrap();
    GraphClassifier::new(
        Some(input),
        convs,
        readout,
        classifier,
        0.0,
        Activation::Tanh,
    )
    .unwrap()
}

#[test]
fn batch_equals_graphs_one_at_a_time_and_gradients_check() {
    let cpu = Cpu::<f64>::new();
    let mut rng = StdRng::seed_from_u64(13);
    let model = small_model(&cpu, &mut rng);
    let graphs = [
        undirected(3, &[(0, 1), (1, 2)]),
        Graph::from_edges(1, &[]).unwrap(),
        undirected(4, &[(0, 1), (0, 2), (0, 3)]),
    ];
    let x = Array2::from_shape_fn((8, 2), |_| rng.random_range(-1.0..1.0));
    let all = batch_rows_match_graphs_alone(&model, &graphs, &x, &[2, 0, 1]);
    assert_eq!(all.dim(), (3, 3));
}

/// Asserts that each graph alone gives its row of the batch's logits and
/// that the batch's loss passes a gradient check; returns the batch logits.
fn batch_rows_match_graphs_alone(
    model: &GraphClassifier<Cpu<f64>>,
    graphs: &[Graph],
    x: &Array2<f64>,
    targets: &[usize],
) -> Array2<f64> {
    let cpu = *model.backend();
    let batch = DeviceGraph::from_batch(&cpu, &Batch::new(graphs).unwrap()).unwrap();
    let t = Tape::inference(&cpu);
    let feed = |x: Array2<f64>| GraphInput::Features(Features::Dense(t.constant(x)));
    let all = model
        .forward(&t, &batch, &feed(x.clone()))
        .unwrap()
        .to_array();
    let mut off = 0;
    for (g, graph) in graphs.iter().enumerate() {
        let n = graph.num_nodes();
        let one = DeviceGraph::new(&cpu, graph.clone());
        let xi = x.slice(ndarray::s![off..off + n, ..]).to_owned();
        let row = model.forward(&t, &one, &feed(xi)).unwrap().to_array();
        for (a, b) in row.row(0).iter().zip(all.row(g)) {
            assert!((a - b).abs() < 1e-12, "graph {g}: {a} vs {b}");
        }
        off += n;
    }
    let targets = Index::new(&cpu, targets).unwrap();
    let rep = check_params(
        &model.named_params(),
        |t| {
            let input = GraphInput::Features(Features::Dense(t.constant(x.clone())));
            model
                .forward(t, &batch, &input)?
                .log_softmax(Axis::Cols)
                .nll(&targets)
        },
        1e-6,
    )
    .unwrap();
    assert!(rep.max_error < 1e-6, "{rep:?}");
    all
}

#[test]
fn parameter_names_follow_the_layers() {
    let cpu = Cpu::<f32>::new();
    let mut rng = StdRng::seed_from_u64(14);
    let spec = InputSpec::Tokens { vocab: 9, dim: 4 };
    let model = GraphClassifier::gcn(&cpu, spec, 6, 2, 3, 0.5, &mut rng).unwrap();
    let names: Vec<String> = model.named_params().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "input.weight",
            "conv1.lin.weight",
            "conv1.bias",
            "conv2.lin.weight",
            "conv2.bias",
            "readout.f1.weight",
            "readout.f1.bias",
            "readout.f2.weight",
            "readout.f2.bias",
            "classifier.weight",
            "classifier.bias",
        ]
    );
}

#[test]
fn inconsistent_models_and_samples_are_errors() {
    let cpu = Cpu::<f32>::new();
    let mut rng = StdRng::seed_from_u64(15);
    // Widths that do not chain.
    let conv: Box<dyn GraphConv<Cpu<f32>>> = Box::new(GcnConv::new(&cpu, 3, 4, &mut rng).unwrap());
    let cls = Linear::new(&cpu, 5, 2, true, &mut rng).unwrap();
    assert!(matches!(
        GraphClassifier::new(
            None,
            vec![conv],
            Box::new(MeanMaxReadout),
            cls,
            0.0,
            Activation::Relu
        ),
        Err(Error::InvalidConfig(_))
    ));
    assert!(matches!(
        GraphClassifier::gcn(&cpu, InputSpec::Dense(1), 4, 0, 2, 0.0, &mut rng),
        Err(Error::InvalidConfig(_))
    ));
    // Samples.
    assert!(matches!(
        GraphSample::new(Graph::empty(), GraphFeatures::Tokens(vec![]), 0),
        Err(Error::Empty(_))
    ));
    assert!(matches!(
        GraphSample::new(
            undirected(3, &[(0, 1)]),
            GraphFeatures::Tokens(vec![1, 2]),
            0
        ),
        Err(Error::ShapeMismatch { .. })
    ));
    let mut model =
        GraphClassifier::gcn(&cpu, InputSpec::Dense(1), 4, 1, 2, 0.0, &mut rng).unwrap();
    let good = cycles_and_stars(&mut rng, 6);
    let c = cfg(2, OptimizerKind::Adam);
    let mut bad = good.clone();
    bad[2].graph = Graph::empty();
    bad[2].features = GraphFeatures::Dense(Array2::ones((0, 1)));
    match train_graph_classifier(&mut model, &bad, &good, &good, &c) {
        Err(Error::Empty(m)) => assert!(m.contains("training sample 2"), "{m}"),
        other => panic!("expected Error::Empty, got {other:?}"),
    }
    let mut bad = good.clone();
    bad[1].label = 2;
    assert!(matches!(
        train_graph_classifier(&mut model, &good, &bad, &good, &c),
        Err(Error::IndexOutOfRange {
            index: 2,
            len: 2,
            ..
        })
    ));
    let mut bad = good.clone();
    bad[0].features = GraphFeatures::Tokens(vec![0; bad[0].graph.num_nodes()]);
    assert!(matches!(
        train_graph_classifier(&mut model, &good, &good, &bad, &c),
        Err(Error::InvalidConfig(_))
    ));
    let mut bad = good.clone();
    let n = bad[0].graph.num_nodes();
    bad[0].features = GraphFeatures::Dense(Array2::ones((n, 2)));
    assert!(matches!(
        train_graph_classifier(&mut model, &bad, &good, &good, &c),
        Err(Error::ShapeMismatch { .. })
    ));
    assert!(matches!(
        train_graph_classifier(&mut model, &good, &[], &good, &c),
        Err(Error::Empty(_))
    ));
    let zero = GraphTrainConfig {
        batch_size: 0,
        ..c.clone()
    };
    assert!(matches!(
        train_graph_classifier(&mut model, &good, &good, &good, &zero),
        Err(Error::InvalidConfig(_))
    ));
    for eps in [-0.1, 1.5, f64::NAN] {
        let bad = GraphTrainConfig {
            label_smoothing: eps,
            ..c.clone()
        };
        let err = train_graph_classifier(&mut model, &good, &good, &good, &bad).unwrap_err();
        assert!(
            matches!(&err, Error::InvalidConfig(m) if m.contains("label_smoothing")),
            "{eps}: {err:?}"
        );
    }
    // Token ids for a model without an embedding, at the model level.
    let t = Tape::inference(&cpu);
    let g = DeviceGraph::new(&cpu, undirected(2, &[(0, 1)]));
    let idx = Index::new(&cpu, &[0, 1]).unwrap();
    assert!(matches!(
        model.forward(&t, &g, &GraphInput::Tokens(idx)),
        Err(Error::InvalidConfig(_))
    ));
}

#[test]
fn clipping_bounds_each_step_and_history_records_every_epoch() {
    let mut rng = StdRng::seed_from_u64(12);
    let data = cycles_and_stars(&mut rng, 60);
    let (train, val) = data.split_at(40);
    let cpu = Cpu::<f32>::new();
    let fresh = |rng: &mut StdRng| {
        GraphClassifier::gcn(&cpu, InputSpec::Dense(1), 8, 2, 2, 0.0, rng).unwrap()
    };
    let base = GraphTrainConfig {
        patience: None,
        ..cfg(3, OptimizerKind::Adam)
    };
    // Without clipping the norm is still measured.
    let mut model = fresh(&mut StdRng::seed_from_u64(1));
    let plain = train_graph_classifier(&mut model, train, val, val, &base).unwrap();
    assert_eq!(plain.history.len(), plain.epochs_run);
    assert!(plain.history.iter().all(|h| h.grad_norm > 0.0));
    assert!(
        plain
            .history
            .iter()
            .all(|h| h.train_loss.is_finite() && (0.0..=1.0).contains(&h.val_acc))
    );
    assert_eq!(plain.history.last().unwrap().train_loss, plain.final_loss);
    // A huge bound measures without changing anything: same trajectory.
    let mut model = fresh(&mut StdRng::seed_from_u64(1));
    let loose = GraphTrainConfig {
        clip_grad_norm: Some(1e12),
        ..base.clone()
    };
    let measured = train_graph_classifier(&mut model, train, val, val, &loose).unwrap();
    for (a, b) in plain.history.iter().zip(&measured.history) {
        assert_eq!(a.train_loss, b.train_loss);
        assert_eq!(a.grad_norm, b.grad_norm);
    }
    // A tight bound changes the trajectory (every step is rescaled).
    let mut model = fresh(&mut StdRng::seed_from_u64(1));
    let tight = GraphTrainConfig {
        clip_grad_norm: Some(1e-4),
        optimizer: OptimizerKind::Adam,
        ..base.clone()
    };
    let clipped = train_graph_classifier(&mut model, train, val, val, &tight).unwrap();
    assert_ne!(clipped.history[1].train_loss, plain.history[1].train_loss);
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let c = GraphTrainConfig {
            clip_grad_norm: Some(bad),
            ..base.clone()
        };
        let err = train_graph_classifier(&mut fresh(&mut rng), train, val, val, &c).unwrap_err();
        assert!(err.to_string().contains("clip_grad_norm"), "{err}");
    }
}

/// A two-layer GCN classifier on one dense input feature, in `f64`.
fn small_f64_gcn(seed: u64) -> GraphClassifier<Cpu<f64>> {
    let cpu = Cpu::<f64>::new();
    GraphClassifier::gcn(
        &cpu,
        InputSpec::Dense(1),
        8,
        2,
        2,
        0.0,
        &mut StdRng::seed_from_u64(seed),
    )
    .unwrap()
}

/// Host copies of a model's parameters.
fn params(m: &GraphClassifier<Cpu<f64>>) -> Vec<Array2<f64>> {
    m.params().iter().map(|p| p.to_array()).collect()
}

#[test]
fn a_diverging_run_stops_before_a_non_finite_update() {
    let mut rng = StdRng::seed_from_u64(15);
    let data = cycles_and_stars(&mut rng, 40);
    let (train, val) = data.split_at(30);
    let mut m = small_f64_gcn(3);
    // Adam moves every weight by about lr per step: after the first step the
    // logits overflow, and the run must stop before that reaches the weights.
    let diverge = GraphTrainConfig {
        lr: 1e200,
        patience: None,
        ..cfg(3, OptimizerKind::Adam)
    };
    let err = train_graph_classifier(&mut m, train, val, val, &diverge).unwrap_err();
    // The loss or the gradient norm (whichever is first non-finite).
    assert!(matches!(err, Error::Numerical(_)), "{err:?}");
    assert!(
        params(&m).iter().all(|v| v.iter().all(|x| x.is_finite())),
        "no NaN or infinite parameter"
    );
}

#[test]
fn the_learning_rate_follows_the_schedule_every_epoch() {
    let mut rng = StdRng::seed_from_u64(14);
    let data = cycles_and_stars(&mut rng, 60);
    let (train, val) = data.split_at(40);
    let fresh = || small_f64_gcn(2);
    for optimizer in [OptimizerKind::Adam, OptimizerKind::AdaBelief] {
        let base = GraphTrainConfig {
            patience: None,
            weight_decay: 1e-2,
            lr: 0.05,
            ..cfg(1, optimizer)
        };
        let mut one = fresh();
        train_graph_classifier(&mut one, train, val, val, &base).unwrap();
        // Constant: later epochs move the parameters and the validation loss.
        let ten = GraphTrainConfig {
            epochs: 10,
            ..base.clone()
        };
        let mut constant = fresh();
        let c = train_graph_classifier(&mut constant, train, val, val, &ten).unwrap();
        assert_ne!(c.history[1].val_loss, c.history[2].val_loss);
        assert!(c.best_epoch > 0, "{optimizer}: {c:?}");
        assert_ne!(params(&constant), params(&one));
        // lr · 0 from epoch 1 on: nothing moves after the first epoch, not
        // even through weight decay, so every selected epoch holds the
        // one-epoch parameters.
        let frozen = GraphTrainConfig {
            lr_schedule: LrScheduleKind::Step {
                step_size: 1,
                gamma: 0.0,
            },
            ..ten.clone()
        };
        let mut stepped = fresh();
        let s = train_graph_classifier(&mut stepped, train, val, val, &frozen).unwrap();
        assert_eq!(s.epochs_run, 10);
        assert_eq!(s.history[0].lr, 0.05);
        assert!(s.history[1..].iter().all(|h| h.lr == 0.0));
        assert!(c.history.iter().all(|h| h.lr == 0.05));
        assert!(
            s.history[1..]
                .iter()
                .all(|h| h.val_loss == s.history[0].val_loss)
        );
        assert_eq!(params(&stepped), params(&one), "{optimizer}");
        // A bad schedule is refused before training.
        let bad = GraphTrainConfig {
            lr_schedule: LrScheduleKind::Cosine { eta_min: -1.0 },
            ..ten.clone()
        };
        let err = train_graph_classifier(&mut fresh(), train, val, val, &bad).unwrap_err();
        assert!(err.to_string().contains("eta_min"), "{err}");
        // A warm-up of 3 epochs: 0.0125, 0.025, 0.0375, then the cosine
        // over the 7 epochs left, starting at the full rate.
        let warm = GraphTrainConfig {
            lr_schedule: LrScheduleKind::Cosine { eta_min: 0.0 },
            lr_warmup_epochs: 3,
            ..ten.clone()
        };
        let w = train_graph_classifier(&mut fresh(), train, val, val, &warm).unwrap();
        let lrs: Vec<f64> = w.history.iter().map(|h| h.lr).collect();
        let want: Vec<f64> = (0..10)
            .map(|e| match e {
                0..3 => 0.05 * (e + 1) as f64 / 4.0,
                _ => 0.025 * (1.0 + (std::f64::consts::PI * (e - 3) as f64 / 7.0).cos()),
            })
            .collect();
        for (e, (g, t)) in lrs.iter().zip(&want).enumerate() {
            assert!((g - t).abs() < 1e-15, "{optimizer} epoch {e}: {g} vs {t}");
        }
        // Its first epoch is a one-epoch run at a quarter of the rate.
        let quarter = GraphTrainConfig {
            lr: 0.0125,
            ..base.clone()
        };
        let q = train_graph_classifier(&mut fresh(), train, val, val, &quarter).unwrap();
        assert_eq!(w.history[0].train_loss, q.history[0].train_loss);
        assert_eq!(w.history[0].val_loss, q.history[0].val_loss);
        assert_ne!(w.history[0].val_loss, c.history[0].val_loss);
        // A warm-up that leaves no epoch for the schedule is refused.
        let too_long = GraphTrainConfig {
            lr_warmup_epochs: 10,
            ..warm.clone()
        };
        let err = train_graph_classifier(&mut fresh(), train, val, val, &too_long).unwrap_err();
        assert!(err.to_string().contains("warm-up of 10 epochs"), "{err}");
    }
}

#[test]
fn a_graph_classifier_without_convolutions_is_an_error_not_a_panic() {
    let mut rng = StdRng::seed_from_u64(13);
    let data = cycles_and_stars(&mut rng, 8);
    let cpu = Cpu::<f32>::new();
    let mut model =
        GraphClassifier::gcn(&cpu, InputSpec::Dense(1), 4, 2, 1, 0.0, &mut rng).unwrap();
    model.convs.clear();
    let err = train_graph_classifier(
        &mut model,
        &data,
        &data,
        &data,
        &cfg(1, OptimizerKind::Adam),
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("at least one convolution"),
        "{err}"
    );
    // The forward pass says the same instead of pooling the raw input.
    let g =
        DeviceGraph::from_batch(&cpu, &Batch::new(&[undirected(2, &[(0, 1)])]).unwrap()).unwrap();
    let t = Tape::inference(&cpu);
    let x = GraphInput::Features(Features::Dense(t.constant_array(&Array2::ones((2, 1)))));
    let err = model.forward(&t, &g, &x).unwrap_err();
    assert!(
        err.to_string().contains("at least one convolution"),
        "{err}"
    );
}

#[test]
fn node_dropout_keeps_an_induced_subgraph_of_each_graph() {
    // A path whose token ids are the node ids, so a dropped graph says
    // which nodes it kept.
    let n = 2000;
    let edges: Vec<(usize, usize)> = (1..n).map(|i| (i - 1, i)).collect();
    let path = GraphSample::new(
        undirected(n, &edges),
        GraphFeatures::Tokens((0..n).collect()),
        1,
    )
    .unwrap();
    let mut rng = StdRng::seed_from_u64(3);
    assert_eq!(path.drop_nodes(0.0, &mut rng).unwrap(), path);
    let dropped = path.drop_nodes(0.3, &mut rng).unwrap();
    let GraphFeatures::Tokens(kept) = &dropped.features else {
        panic!("tokens stay tokens")
    };
    // Binomial(2000, 0.7): mean 1400, std 20.5.
    assert!((1300..=1500).contains(&kept.len()), "{} kept", kept.len());
    assert!(kept.windows(2).all(|w| w[0] < w[1]), "order kept");
    assert_eq!(dropped.label, 1);
    // Exactly the path edges between kept consecutive nodes survive.
    let mut want: Vec<(usize, usize)> = kept
        .windows(2)
        .filter(|w| w[1] == w[0] + 1)
        .flat_map(|w| [(w[0], w[1]), (w[1], w[0])])
        .collect();
    let mut got: Vec<(usize, usize)> = dropped
        .graph
        .adjacency()
        .iter()
        .map(|(_, (s, d))| (kept[s], kept[d]))
        .collect();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want);

    // Dense features follow their nodes; a graph never loses every node.
    let x = Array2::from_shape_fn((3, 2), |(i, j)| (10 * i + j) as f32);
    let tiny = GraphSample::new(
        undirected(3, &[(0, 1), (1, 2)]),
        GraphFeatures::Dense(x.clone()),
        0,
    )
    .unwrap();
    for _ in 0..50 {
        let d = tiny.drop_nodes(0.99, &mut rng).unwrap();
        assert!(d.graph.num_nodes() >= 1);
        let GraphFeatures::Dense(rows) = &d.features else {
            panic!("dense stays dense")
        };
        for r in rows.rows() {
            let i = (r[0] / 10.0) as usize;
            assert_eq!(r, x.row(i));
        }
    }
    for bad in [1.0, -0.1, f64::NAN] {
        assert!(matches!(
            path.drop_nodes(bad, &mut rng),
            Err(Error::InvalidConfig(_))
        ));
    }
}

#[test]
fn position_encoding_adds_each_nodes_index_in_its_graph_and_gradients_check() {
    let cpu = Cpu::<f64>::new();
    let mut rng = StdRng::seed_from_u64(29);
    let build = |rng: &mut StdRng| {
        GraphClassifier::new(
            None,
            vec![Box::new(GcnConv::new(&cpu, 4, 3, rng).unwrap())],
            Box::new(AttentionPooling::linear(&cpu, 3, None, rng).unwrap()),
            Linear::new(&cpu, 3, 2, true, rng).unwrap(),
            0.0,
            Activation::Tanh,
        )
        .unwrap()
    };
    // A wrong width is refused.
    let err = build(&mut rng).with_position_encoding(PositionalEncoding::new(6).unwrap());
    assert!(
        matches!(err, Err(Error::InvalidConfig(ref m)) if m.contains("6 wide")),
        "{err:?}"
    );
    let pe = PositionalEncoding::new(4).unwrap().with_scale(0.7).unwrap();
    let mut model = build(&mut rng).with_position_encoding(pe).unwrap();
    let graphs = [
        undirected(2, &[(0, 1)]),
        Graph::from_edges(1, &[]).unwrap(),
        undirected(3, &[(0, 1), (1, 2)]),
    ];
    let x = Array2::from_shape_fn((6, 4), |_| rng.random_range(-1.0..1.0));
    // Positions restart at 0 in every graph, so each graph alone gives its
    // row of the batch; gradients flow through the sum.
    let with_pe = batch_rows_match_graphs_alone(&model, &graphs, &x, &[1, 0, 1]);
    // The same model without the encoding, fed x + PE(0, 1 | 0 | 0, 1, 2).
    let batch = DeviceGraph::from_batch(&cpu, &Batch::new(&graphs).unwrap()).unwrap();
    let t = Tape::inference(&cpu);
    let feed = |x: &Array2<f64>| GraphInput::Features(Features::Dense(t.constant(x.clone())));
    model.position_encoding = None;
    let shifted = &x + &pe.encode::<f64>(&[0.0, 1.0, 0.0, 0.0, 1.0, 2.0]).unwrap();
    let by_hand = model
        .forward(&t, &batch, &feed(&shifted))
        .unwrap()
        .to_array();
    let plain = model.forward(&t, &batch, &feed(&x)).unwrap().to_array();
    for ((a, b), c) in with_pe.iter().zip(&by_hand).zip(&plain) {
        assert!((a - b).abs() < 1e-12, "{a} vs {b}");
        assert!(
            (a - c).abs() > 1e-6,
            "the encoding changed nothing: {a} vs {c}"
        );
    }
    // Sparse features cannot take the encoding.
    model.position_encoding = Some(pe);
    let sparse = hdgcn::autograd::SparseMatrix::from_csmat(
        &cpu,
        &sprs::CsMat::csr_from_dense(x.view(), 0.0),
    )
    .unwrap();
    let err = model.forward(&t, &batch, &GraphInput::Features(Features::Sparse(sparse)));
    assert!(
        matches!(err, Err(Error::InvalidConfig(ref m)) if m.contains("dense")),
        "{:?}",
        err.err()
    );
}

/// The product `Π_{i<n} d_i` of the warmed-up decays of the first `n`
/// updates (`d_i = min(decay, (1 + i) / (10 + i))`), computed here
/// independently of the crate.
fn warmed_up_decay_product(decay: f64, n: usize) -> f64 {
    (0..n)
        .map(|i| decay.min((1.0 + i as f64) / (10.0 + i as f64)))
        .product()
}

/// Asserts that `model` holds the average (decay 0.5, warmed up) after
/// `n` updates of weights that went `w0 -> w1` in the first step and
/// stayed: `w1 + (w0 - w1) · Π_{i<n} d_i`.
fn assert_frozen_average(
    model: &GraphClassifier<Cpu<f64>>,
    w0: &[Array2<f64>],
    w1: &[Array2<f64>],
    n: usize,
) {
    let c = warmed_up_decay_product(0.5, n);
    for ((got, a), b) in params(model).iter().zip(w0).zip(w1) {
        let want = b + &((a - b) * c);
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-12 * (1.0 + w.abs()), "{g} vs {w}");
        }
    }
}

#[test]
fn the_moving_average_of_the_weights_is_what_gets_selected() {
    let mut rng = StdRng::seed_from_u64(15);
    let data = cycles_and_stars(&mut rng, 60);
    let (train, val) = data.split_at(40);
    let fresh = || small_f64_gcn(3);
    // One step per epoch (the batch holds every training graph).
    let base = GraphTrainConfig {
        patience: None,
        batch_size: 64,
        lr: 0.05,
        ..cfg(6, OptimizerKind::Adam)
    };
    // Decay 0 is the plain run, to the last bit.
    let mut plain_model = fresh();
    let plain = train_graph_classifier(&mut plain_model, train, val, val, &base).unwrap();
    let mut zero_model = fresh();
    let zero = GraphTrainConfig {
        ema_decay: Some(0.0),
        ..base.clone()
    };
    let z = train_graph_classifier(&mut zero_model, train, val, val, &zero).unwrap();
    assert_eq!(z.history, plain.history);
    assert_eq!(
        (z.best_epoch, z.test_acc),
        (plain.best_epoch, plain.test_acc)
    );
    assert_eq!(params(&zero_model), params(&plain_model));

    // Frozen after the first step (lr · 0 from epoch 1): the optimiser's
    // weights go w0 -> w1 and stay, so after n updates the average is
    // w1 + (w0 - w1) · Π_{i<n} d_i, and the selected epoch e holds n = e + 1.
    let w0 = params(&fresh());
    let mut one = fresh();
    train_graph_classifier(
        &mut one,
        train,
        val,
        val,
        &GraphTrainConfig {
            epochs: 1,
            ..base.clone()
        },
    )
    .unwrap();
    let w1 = params(&one);
    let frozen = GraphTrainConfig {
        lr_schedule: LrScheduleKind::Step {
            step_size: 1,
            gamma: 0.0,
        },
        ema_decay: Some(0.5),
        ..base.clone()
    };
    let mut averaged = fresh();
    let r = train_graph_classifier(&mut averaged, train, val, val, &frozen).unwrap();
    // The averages move every epoch, so validation sees different weights.
    assert_ne!(r.history[0].val_loss, r.history[1].val_loss);
    assert_frozen_average(&averaged, &w0, &w1, r.best_epoch + 1);
    // The restored weights are the ones validation selected.
    let (val_acc, val_loss) = evaluate_graphs(&mut averaged, val, 64).unwrap();
    assert_eq!((val_acc, val_loss), (r.val_acc, r.val_loss));
    for bad in [1.0, -0.5, f64::NAN] {
        let c = GraphTrainConfig {
            ema_decay: Some(bad),
            ..base.clone()
        };
        let err = train_graph_classifier(&mut fresh(), train, val, val, &c).unwrap_err();
        assert!(err.to_string().contains("decay"), "{err}");
    }
}

#[test]
fn node_weights_pool_a_weighted_mean_and_gradients_check() {
    let cpu = Cpu::<f64>::new();
    let mut rng = StdRng::seed_from_u64(31);
    // A mean readout: with each graph's weights at mean 1 the weighted
    // node states pool into Σ_v w_v h_v / Σ_v w_v.
    let mut model =
        GraphClassifier::gcn(&cpu, InputSpec::Dense(2), 4, 2, 3, 0.0, &mut rng).unwrap();
    model.readout = Box::new(MeanReadout);
    let graphs = [
        undirected(3, &[(0, 1), (1, 2)]),
        Graph::from_edges(1, &[]).unwrap(),
        undirected(4, &[(0, 1), (0, 2), (0, 3)]),
    ];
    let raw: [&[f64]; 3] = [&[1.0, 2.0, 3.0], &[5.0], &[0.0, 1.0, 1.0, 2.0]];
    // Each graph's weights divided by their mean, as the training helpers batch them.
    let unit: Vec<f64> = raw
        .iter()
        .flat_map(|w| {
            let mean = w.iter().sum::<f64>() / w.len() as f64;
            w.iter().map(move |v| v / mean)
        })
        .collect();
    let w = Array2::from_shape_vec((8, 1), unit).unwrap();
    let x = Array2::from_shape_fn((8, 2), |_| rng.random_range(-1.0..1.0));
    let batch = DeviceGraph::from_batch(&cpu, &Batch::new(&graphs).unwrap()).unwrap();
    let t = Tape::inference(&cpu);
    let input = GraphInput::Features(Features::Dense(t.constant(x.clone())));
    let logits = model
        .forward_weighted(&t, &batch, &input, Some(&t.constant(w.clone())))
        .unwrap()
        .to_array();
    // Reference on the host: weighted mean of the node states, then the classifier.
    let h = model.node_states(&t, &batch, &input).unwrap().to_array();
    let (cw, cb) = (
        model.classifier.weight.to_array(),
        model.classifier.bias.as_ref().unwrap().to_array(),
    );
    let mut off = 0;
    for (g, wg) in raw.iter().enumerate() {
        let total: f64 = wg.iter().sum();
        let mut pooled = ndarray::Array1::<f64>::zeros(4);
        for (v, &wv) in wg.iter().enumerate() {
            pooled.scaled_add(wv / total, &h.row(off + v));
        }
        let want = pooled.dot(&cw) + cb.row(0);
        for (a, b) in logits.row(g).iter().zip(&want) {
            assert!((a - b).abs() < 1e-12, "graph {g}: {a} vs {b}");
        }
        off += wg.len();
    }
    // Weighting changes the pooled rows of graphs with uneven weights only.
    let plain = model.forward(&t, &batch, &input).unwrap().to_array();
    assert!(
        (&plain.row(0) - &logits.row(0))
            .iter()
            .any(|d| d.abs() > 1e-6)
    );
    assert_eq!(plain.row(1), logits.row(1));
    // Wrong shape: an error, not a panic.
    let bad = t.constant(Array2::ones((8, 2)));
    assert!(matches!(
        model.forward_weighted(&t, &batch, &input, Some(&bad)),
        Err(Error::ShapeMismatch { .. })
    ));
    let targets = Index::new(&cpu, &[2, 0, 1]).unwrap();
    let rep = check_params(
        &model.named_params(),
        |t| {
            let input = GraphInput::Features(Features::Dense(t.constant(x.clone())));
            model
                .forward_weighted(t, &batch, &input, Some(&t.constant(w.clone())))?
                .log_softmax(Axis::Cols)
                .nll(&targets)
        },
        1e-6,
    )
    .unwrap();
    assert!(rep.max_error < 1e-6, "{rep:?}");
}

#[test]
fn node_weights_at_the_input_scale_what_the_convolutions_read() {
    let cpu = Cpu::<f64>::new();
    let mut rng = StdRng::seed_from_u64(43);
    let graphs = [
        undirected(3, &[(0, 1), (1, 2)]),
        undirected(4, &[(0, 1), (0, 2), (2, 3)]),
    ];
    let batch = DeviceGraph::from_batch(&cpu, &Batch::new(&graphs).unwrap()).unwrap();
    let w = Array2::from_shape_vec((7, 1), vec![0.5, 1.0, 1.5, 2.0, 0.25, 1.25, 0.5]).unwrap();
    let x = Array2::from_shape_fn((7, 2), |_| rng.random_range(-1.0..1.0));
    // Reference: the same model fed `w_v · x_v`, scaled on the host.
    let scaled = &x * &w;
    let build = |weighting: NodeWeighting| {
        let mut rng = StdRng::seed_from_u64(7);
        let mut model =
            GraphClassifier::gcn(&cpu, InputSpec::Dense(2), 4, 2, 3, 0.0, &mut rng).unwrap();
        model.readout = Box::new(MeanReadout);
        model.with_node_weighting(weighting)
    };
    let t = Tape::inference(&cpu);
    let dense = |a: &Array2<f64>| GraphInput::Features(Features::Dense(t.constant(a.clone())));
    let wv = t.constant(w.clone());
    let logits = |m: &GraphClassifier<Cpu<f64>>, a: &Array2<f64>, weights| {
        m.forward_weighted(&t, &batch, &dense(a), weights)
            .unwrap()
            .to_array()
    };
    let (readout, input, both) = (
        build(NodeWeighting::Readout),
        build(NodeWeighting::Input),
        build(NodeWeighting::Both),
    );
    let close =
        |a: &Array2<f64>, b: &Array2<f64>| a.iter().zip(b).all(|(p, q)| (p - q).abs() < 1e-12);
    // Input: the plain model on the scaled features.
    assert!(close(
        &logits(&input, &x, Some(&wv)),
        &logits(&readout, &scaled, None)
    ));
    // Both: the readout-weighted model on the scaled features.
    assert!(close(
        &logits(&both, &x, Some(&wv)),
        &logits(&readout, &scaled, Some(&wv))
    ));
    // And the placements differ from one another.
    assert!(!close(
        &logits(&input, &x, Some(&wv)),
        &logits(&readout, &x, Some(&wv))
    ));
    assert!(!close(
        &logits(&input, &x, Some(&wv)),
        &logits(&both, &x, Some(&wv))
    ));
    // A wrong shape is an error at every placement, before any layer runs.
    let bad = t.constant(Array2::ones((6, 1)));
    for m in [&readout, &input, &both] {
        assert!(matches!(
            m.forward_weighted(&t, &batch, &dense(&x), Some(&bad)),
            Err(Error::ShapeMismatch { .. })
        ));
    }
    // Token inputs: scaling node v's embedding equals scaling the table's
    // row of v's token when every token occurs once.
    let spec = InputSpec::Tokens { vocab: 9, dim: 3 };
    let tokens = [4usize, 0, 7, 2, 8, 1, 5];
    let mut rng = StdRng::seed_from_u64(8);
    let model = GraphClassifier::gcn(&cpu, spec, 3, 1, 2, 0.0, &mut rng)
        .unwrap()
        .with_node_weighting(NodeWeighting::Input);
    let ids = GraphInput::Tokens(Index::new(&cpu, &tokens).unwrap());
    let got = model
        .forward_weighted(&t, &batch, &ids, Some(&wv))
        .unwrap()
        .to_array();
    let Some(InputLayer::Embedding(e)) = &model.input else {
        panic!("a token model embeds")
    };
    let mut table = e.weight.to_array();
    for (v, &tok) in tokens.iter().enumerate() {
        table.row_mut(tok).mapv_inplace(|a| a * w[[v, 0]]);
    }
    e.weight.set(table).unwrap();
    let want = model.forward(&t, &batch, &ids).unwrap().to_array();
    assert!(close(&got, &want), "{got} vs {want}");
    // Gradients through the scaled inputs, for both placements that use them.
    let targets = Index::new(&cpu, &[2, 0]).unwrap();
    for m in [&input, &both] {
        let rep = check_params(
            &m.named_params(),
            |t| {
                let input = GraphInput::Features(Features::Dense(t.constant(x.clone())));
                m.forward_weighted(t, &batch, &input, Some(&t.constant(w.clone())))?
                    .log_softmax(Axis::Cols)
                    .nll(&targets)
            },
            1e-6,
        )
        .unwrap();
        assert!(rep.max_error < 1e-6, "{:?}: {rep:?}", m.node_weighting);
    }
}

#[test]
fn node_weights_in_training_are_scale_free_and_checked() {
    let mut rng = StdRng::seed_from_u64(17);
    let (train, val, test) = document_sets(&mut rng);
    let weigh = |set: &[GraphSample], f: &dyn Fn(usize, usize) -> f64| -> Vec<GraphSample> {
        set.iter()
            .enumerate()
            .map(|(i, s)| {
                let n = s.graph.num_nodes();
                s.clone()
                    .with_node_weights((0..n).map(|v| f(i, v)).collect())
                    .unwrap()
            })
            .collect()
    };
    let cpu = Cpu::<f32>::new();
    let spec = InputSpec::Tokens { vocab: 20, dim: 8 };
    let run_at = |at: NodeWeighting, tr: &[GraphSample], va: &[GraphSample], te: &[GraphSample]| {
        let mut rng = StdRng::seed_from_u64(5);
        let mut model = GraphClassifier::gcn(&cpu, spec, 8, 1, 2, 0.0, &mut rng)
            .unwrap()
            .with_node_weighting(at);
        model.readout = Box::new(MeanReadout);
        let c = GraphTrainConfig {
            patience: None,
            ..cfg(4, OptimizerKind::Adam)
        };
        train_graph_classifier(&mut model, tr, va, te, &c)
    };
    let run = |tr: &[GraphSample], va: &[GraphSample], te: &[GraphSample]| {
        run_at(NodeWeighting::Readout, tr, va, te)
    };
    let losses = |r: &hdgcn::train::GraphTrainReport| -> Vec<f64> {
        r.history.iter().map(|h| h.train_loss).collect()
    };
    let uneven = |i: usize, v: usize| 1.0 + ((i + 3 * v) % 5) as f64;
    let ones = |s: &[GraphSample]| weigh(s, &|_, _| 2.5);
    let w1 = |s: &[GraphSample]| weigh(s, &uneven);
    let w3 = |s: &[GraphSample]| weigh(s, &|i, v| 3.0 * uneven(i, v));
    let mut uneven_runs = Vec::new();
    for at in [
        NodeWeighting::Readout,
        NodeWeighting::Input,
        NodeWeighting::Both,
    ] {
        let plain = run_at(at, &train, &val, &test).unwrap();
        let even = run_at(at, &ones(&train), &ones(&val), &ones(&test)).unwrap();
        let a = run_at(at, &w1(&train), &w1(&val), &w1(&test)).unwrap();
        let b = run_at(at, &w3(&train), &w3(&val), &w3(&test)).unwrap();
        assert_eq!(
            losses(&plain),
            losses(&even),
            "{at:?}: equal weights are no weights"
        );
        assert_eq!(
            losses(&a),
            losses(&b),
            "{at:?}: only ratios within a graph count"
        );
        assert_ne!(
            losses(&a),
            losses(&plain),
            "{at:?}: uneven weights change the run"
        );
        uneven_runs.push(losses(&a));
    }
    assert_ne!(
        uneven_runs[0], uneven_runs[1],
        "input weighting is not readout weighting"
    );
    assert_ne!(uneven_runs[1], uneven_runs[2], "both is not input alone");
    // Some samples weighted, others not: an error naming the set.
    let mut mixed = w1(&train);
    mixed[4] = train[4].clone();
    match run(&mixed, &val, &test) {
        Err(Error::InvalidConfig(m)) => assert!(m.contains("training"), "{m}"),
        other => panic!("expected InvalidConfig, got {other:?}"),
    }
    // Bad weights.
    let s = &train[0];
    let n = s.graph.num_nodes();
    assert!(matches!(
        s.clone().with_node_weights(vec![1.0; n + 1]),
        Err(Error::ShapeMismatch { .. })
    ));
    let mut nan = vec![1.0; n];
    nan[1] = f64::NAN;
    assert!(matches!(
        s.clone().with_node_weights(nan),
        Err(Error::NonFinite { .. })
    ));
    let mut neg = vec![1.0; n];
    neg[0] = -1.0;
    assert!(matches!(
        s.clone().with_node_weights(neg),
        Err(Error::InvalidConfig(_))
    ));
    assert!(matches!(
        s.clone().with_node_weights(vec![0.0; n]),
        Err(Error::InvalidConfig(_))
    ));
    // A subgraph keeps its nodes' weights; kept nodes that all weigh 0
    // pool evenly.
    let mut w = vec![0.0; n];
    w[0] = 4.0;
    let s = s.clone().with_node_weights(w).unwrap();
    let sub = s.subgraph(&[1, 0]).unwrap();
    assert_eq!(sub.node_weights, Some(vec![0.0, 4.0]));
    let sub = s.subgraph(&[2, 1]).unwrap();
    assert_eq!(sub.node_weights, Some(vec![1.0, 1.0]));
}

fn spelled_documents(
    rng: &mut StdRng,
    count: usize,
    seen: std::ops::Range<usize>,
) -> Vec<GraphSample> {
    (0..count)
        .map(|_| {
            let label = rng.random_range(0..2usize);
            let len = rng.random_range(2..=4);
            let mut words: Vec<usize> = Vec::new();
            while words.len() < len {
                let w = 50 * label + rng.random_range(seen.clone());
                if !words.contains(&w) {
                    words.push(w);
                }
            }
            let edges: Vec<(usize, usize)> = (1..len).map(|i| (i - 1, i)).collect();
            GraphSample::new(undirected(len, &edges), GraphFeatures::Tokens(words), label).unwrap()
        })
        .collect()
}

#[test]
fn subword_input_generalises_to_words_never_trained_on() {
    let mut rng = StdRng::seed_from_u64(21);
    // Training and validation see word slots 0..5 only; the test documents
    // use slots 5..50, whose own table rows never get a gradient.
    let train = spelled_documents(&mut rng, 120, 0..5);
    let val = spelled_documents(&mut rng, 40, 0..5);
    let test = spelled_documents(&mut rng, 100, 5..50);
    let words: Vec<String> = (0..100)
        .map(|i| format!("{}{}", if i < 50 { "aaa" } else { "zzz" }, i % 50))
        .collect();
    let cpu = Cpu::<f32>::new();
    let build = |input: InputLayer<Cpu<f32>>, rng: &mut StdRng| {
        let convs: Vec<Box<dyn GraphConv<Cpu<f32>>>> =
            vec![Box::new(GcnConv::new(&cpu, 8, 8, rng).unwrap())];
        let classifier = Linear::new(&cpu, 8, 2, true, rng).unwrap();
        GraphClassifier::new(
            Some(input),
            convs,
            Box::new(MeanReadout),
            classifier,
            0.0,
            Activation::Relu,
        )
        .unwrap()
    };
    let sub =
        SubwordEmbedding::new(&cpu, &words, SubwordConfig::default(), 8, 0.3, &mut rng).unwrap();
    let mut with_subwords = build(InputLayer::Subword(sub), &mut rng);
    let rep = train_graph_classifier(
        &mut with_subwords,
        &train,
        &val,
        &test,
        &cfg(30, OptimizerKind::Adam),
    )
    .unwrap();
    assert!(rep.val_acc >= 0.95, "{rep:?}");
    assert!(rep.test_acc >= 0.9, "{rep:?}");
    // One row per word: the unseen words keep their random rows, and the
    // test documents are classified near chance.
    let plain = Embedding::with_std(&cpu, 100, 8, 0.3, &mut rng).unwrap();
    let mut without = build(InputLayer::Embedding(plain), &mut rng);
    let base = train_graph_classifier(
        &mut without,
        &train,
        &val,
        &test,
        &cfg(30, OptimizerKind::Adam),
    )
    .unwrap();
    assert!(base.val_acc >= 0.95, "{base:?}");
    assert!(base.test_acc <= 0.75, "{base:?}");
    // Token ids past the vocabulary are caught before training.
    let mut bad = test.clone();
    bad[0].features = GraphFeatures::Tokens(vec![100; bad[0].graph.num_nodes()]);
    let err = train_graph_classifier(
        &mut with_subwords,
        &train,
        &val,
        &bad,
        &cfg(1, OptimizerKind::Adam),
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            Error::IndexOutOfRange {
                index: 100,
                len: 100,
                ..
            }
        ),
        "{err:?}"
    );
}

/// A classifier whose readout pools chosen nodes (`GraphSample::readout_nodes`,
/// the ABSA aspect mean): the batch's rows are each graph's alone, the
/// loss passes a gradient check through the node set, and node sets
/// survive subgraphs and node dropout.
#[test]
fn readout_nodes_batch_like_graphs_alone_and_gradients_check() {
    use hdgcn::readout::NodeSet;
    use hdgcn::train::GraphBatch;
    let cpu = Cpu::<f64>::new();
    let mut rng = StdRng::seed_from_u64(21);
    let input = InputLayer::Linear(Linear::new(&cpu, 2, 3, true, &mut rng).unwrap());
    let convs: Vec<Box<dyn GraphConv<Cpu<f64>>>> =
        vec![Box::new(GcnConv::new(&cpu, 3, 4, &mut rng).unwrap())];
    let classifier = Linear::new(&cpu, 4, 3, true, &mut rng).unwrap();
    let model = GraphClassifier::new(
        Some(input),
        convs,
        Box::new(MeanReadout),
        classifier,
        0.0,
        Activation::Tanh,
    )
    .unwrap();
    let graphs = [
        undirected(3, &[(0, 1), (1, 2)]),
        Graph::from_edges(1, &[]).unwrap(),
        undirected(4, &[(0, 1), (0, 2), (0, 3)]),
    ];
    let nodes = [vec![2, 1], vec![0], vec![3]];
    let samples: Vec<GraphSample> = graphs
        .iter()
        .zip(&nodes)
        .enumerate()
        .map(|(i, (g, r))| {
            let x = Array2::from_shape_fn((g.num_nodes(), 2), |_| rng.random_range(-1.0f32..1.0));
            GraphSample::new(g.clone(), GraphFeatures::Dense(x), i % 3)
                .unwrap()
                .with_readout_nodes(r.clone())
                .unwrap()
        })
        .collect();
    let refs: Vec<&GraphSample> = samples.iter().collect();
    let batch = GraphBatch::new(&cpu, &refs).unwrap();
    assert_eq!(batch.readout_nodes().unwrap().rows(), [2, 1, 3, 7]);
    let t = Tape::inference(&cpu);
    let all = batch.forward(&model, &t).unwrap().to_array();
    for (g, s) in samples.iter().enumerate() {
        let one = GraphBatch::new(&cpu, &[s])
            .unwrap()
            .forward(&model, &t)
            .unwrap();
        for (a, b) in one.to_array().row(0).iter().zip(all.row(g)) {
            assert!((a - b).abs() < 1e-12, "graph {g}: {a} vs {b}");
        }
    }
    // The readout pools the selected nodes only: against the node states.
    let dg = batch.graph();
    let x: Vec<f64> = samples
        .iter()
        .flat_map(|s| match &s.features {
            GraphFeatures::Dense(x) => x.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(),
            GraphFeatures::Tokens(_) => unreachable!(),
        })
        .collect();
    let x = Array2::from_shape_vec((8, 2), x).unwrap();
    let feed = |t: &Tape<Cpu<f64>>| GraphInput::Features(Features::Dense(t.constant(x.clone())));
    let h = model.node_states(&t, dg, &feed(&t)).unwrap().to_array();
    let pooled_0 = (&h.row(2) + &h.row(1)) / 2.0;
    let logits_0 = pooled_0.dot(&model.classifier.weight.to_array())
        + model.classifier.bias.as_ref().unwrap().to_array().row(0);
    for (a, b) in logits_0.iter().zip(all.row(0)) {
        assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    }
    let set = NodeSet::new(&cpu, &dg.ptr(), &nodes).unwrap();
    let targets = Index::new(&cpu, &[0, 1, 2]).unwrap();
    let rep = check_params(
        &model.named_params(),
        |t| {
            model
                .forward_nodes(t, dg, &feed(t), None, &set)?
                .log_softmax(Axis::Cols)
                .nll(&targets)
        },
        1e-6,
    )
    .unwrap();
    assert!(rep.max_error < 1e-6, "{rep:?}");

    // A subgraph keeps the readout nodes it keeps, renumbered; keeping
    // none of them is an error, and node dropout always keeps one.
    let s = &samples[2]; // star 0-{1,2,3}, readout node 3
    let sub = s.subgraph(&[0, 3]).unwrap();
    assert_eq!(sub.readout_nodes, Some(vec![1]));
    assert!(matches!(s.subgraph(&[0, 1]), Err(Error::Empty(_))));
    for seed in 0..50 {
        let d = s.drop_nodes(0.9, &mut StdRng::seed_from_u64(seed)).unwrap();
        let r = d.readout_nodes.as_ref().unwrap();
        assert_eq!(r.len(), 1, "seed {seed}");
        // The kept readout node is node 3's row of features.
        let (GraphFeatures::Dense(a), GraphFeatures::Dense(b)) = (&d.features, &s.features) else {
            unreachable!()
        };
        assert_eq!(a.row(r[0]), b.row(3), "seed {seed}");
    }
    // Samples with and without readout nodes do not mix.
    let plain = GraphSample::new(graphs[0].clone(), samples[0].features.clone(), 0).unwrap();
    assert!(matches!(
        GraphBatch::new(&cpu, &[&samples[0], &plain]),
        Err(Error::InvalidConfig(_))
    ));
    let mut m = small_f64_gcn(1);
    let mixed = [samples[0].clone(), plain];
    let err = evaluate_graphs(&mut m, &mixed, 2);
    assert!(
        matches!(err, Err(Error::InvalidConfig(ref e)) if e.contains("readout nodes")),
        "{err:?}"
    );
}

#[test]
fn conv_input_is_what_each_convolution_reads() {
    // small_model: Linear(2 -> 3) + tanh input layer, GCN 3 -> 3, GCN 3 -> 4,
    // tanh between; dropout 0. Independently: the input layer by hand,
    // then each GcnConv applied to it.
    let cpu = Cpu::<f64>::new();
    let mut rng = StdRng::seed_from_u64(21);
    let mut model = small_model(&cpu, &mut rng);
    model.set_training(false);
    let graph = DeviceGraph::new(&cpu, undirected(4, &[(0, 1), (1, 2), (2, 3)]));
    let x = Array2::from_shape_fn((4, 2), |_| rng.random_range(-1.0..1.0));
    let t = Tape::inference(&cpu);
    let feed = GraphInput::Features(Features::Dense(t.constant(x.clone())));
    let [w, b] = [0, 1].map(|i| model.named_params()[i].1.value().clone());
    let names: Vec<String> = model.named_params().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names[0..2], ["input.weight", "input.bias"], "{names:?}");
    let h0 = (x.dot(&w) + b.row(0)).mapv(f64::tanh);
    let got0 = model.conv_input(&t, &graph, &feed, 0).unwrap();
    let got0 = got0.dense().unwrap().to_array();
    assert!(
        (&got0 - &h0).iter().all(|d| d.abs() < 1e-12),
        "{got0} vs {h0}"
    );

    let h1 = model.convs[0]
        .forward(&t, &graph, &Features::Dense(t.constant(h0)))
        .unwrap()
        .to_array()
        .mapv(f64::tanh);
    let got1 = model.conv_input(&t, &graph, &feed, 1).unwrap();
    let got1 = got1.dense().unwrap().to_array();
    assert!((&got1 - &h1).iter().all(|d| d.abs() < 1e-12));
    // The last convolution of that input gives the model's node states.
    let states = model.node_states(&t, &graph, &feed).unwrap().to_array();
    let last = model.convs[1]
        .forward(&t, &graph, &Features::Dense(t.constant(h1)))
        .unwrap()
        .to_array()
        .mapv(f64::tanh);
    assert!((&states - &last).iter().all(|d| d.abs() < 1e-12));

    let err = model.conv_input(&t, &graph, &feed, 2).unwrap_err();
    assert!(
        matches!(
            err,
            Error::IndexOutOfRange {
                index: 2,
                len: 2,
                ..
            }
        ),
        "{err}"
    );
}
