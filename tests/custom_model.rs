//! The generic training loop trains a model the crate does not ship: a
//! two-layer mean-aggregation network written with `Var` ops, its own
//! batch type, and hooks.

use hdgcn::autograd::{Gradients, Index, Param, SparseMatrix, Tape, Var};
use hdgcn::backend::{Axis, Cpu};
use hdgcn::nn::{Module, ParamVisitor};
use hdgcn::optim::{AdamConfig, Optimizer, OptimizerKind};
use hdgcn::train::{
    EpochRecord, Hook, StepContext, StepOutput, TrainConfig, TrainStep, Trainer, evaluate,
};
use ndarray::Array2;
use rand::{Rng, SeedableRng, rngs::StdRng};
use sprs::TriMat;

type C = Cpu<f64>;

/// `logits = M relu(M X W1) W2`, `M = D⁻¹A` the mean over each node's
/// neighbours (self included): GraphSAGE's mean aggregator without a root
/// weight, built from public ops only.
struct MeanAgg {
    w1: Param<C>,
    w2: Param<C>,
    mean: SparseMatrix<C>,
    x: Array2<f64>,
    labels: Vec<usize>,
    dropout: f64,
    training: bool,
}

impl Module<C> for MeanAgg {
    fn visit_params(&self, v: &mut ParamVisitor<'_, C>) {
        v.param("w1", &self.w1);
        v.param("w2", &self.w2);
    }

    fn set_training(&mut self, training: bool) {
        self.training = training;
    }
}

/// A batch: the nodes whose predictions count.
#[derive(Clone)]
struct Nodes(Vec<usize>);

impl MeanAgg {
    fn logits(&self, tape: &Tape<C>) -> hdgcn::Result<Var<C>> {
        let x = tape.constant_array(&self.x);
        let h = Var::spmm(&self.mean, &x.matmul(&tape.param(&self.w1))?, false)?.relu();
        let h = if self.training && self.dropout > 0.0 {
            h.dropout(self.dropout)?
        } else {
            h
        };
        Var::spmm(&self.mean, &h.matmul(&tape.param(&self.w2))?, false)
    }
}

impl TrainStep<C> for MeanAgg {
    type Batch = Nodes;

    fn train_step(&self, tape: &Tape<C>, batch: &Nodes) -> hdgcn::Result<StepOutput<C>> {
        let cpu = tape.backend();
        let idx = Index::new(cpu, &batch.0)?;
        let y: Vec<usize> = batch.0.iter().map(|&i| self.labels[i]).collect();
        StepOutput::new(self.logits(tape)?.gather_rows(&idx)?, Index::new(cpu, &y)?)
    }
}

/// Two communities of 30 nodes (dense inside, sparse across) whose
/// features are the class one-hot drowned in noise: a node alone is hard
/// to classify, its neighbourhood mean is not.
fn two_communities(dropout: f64, seed: u64) -> MeanAgg {
    let cpu = C::new();
    let mut rng = StdRng::seed_from_u64(seed);
    let n = 60;
    let class = |i: usize| usize::from(i >= n / 2);
    let mut adj = vec![vec![false; n]; n];
    let pairs: Vec<(usize, usize)> = (0..n)
        .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
        .collect();
    for (i, j) in pairs {
        let p = if class(i) == class(j) { 0.3 } else { 0.02 };
        if rng.random_bool(p) {
            adj[i][j] = true;
            adj[j][i] = true;
        }
    }
    for (i, row) in adj.iter_mut().enumerate() {
        row[i] = true;
    }
    let mut tri = TriMat::new((n, n));
    for (i, row) in adj.iter().enumerate() {
        let deg = row.iter().filter(|&&a| a).count() as f64;
        for (j, _) in row.iter().enumerate().filter(|(_, a)| **a) {
            tri.add_triplet(i, j, 1.0 / deg);
        }
    }
    let x = Array2::from_shape_fn((n, 4), |(i, j)| {
        f64::from(u8::from(j == class(i))) + rng.random_range(-1.5..1.5)
    });
    let init = |r: usize, c: usize, rng: &mut StdRng| {
        Param::from_array(
            &cpu,
            &Array2::from_shape_fn((r, c), |_| rng.random_range(-0.5..0.5)),
        )
    };
    MeanAgg {
        w1: init(4, 8, &mut rng),
        w2: init(8, 2, &mut rng),
        mean: SparseMatrix::from_csmat(&cpu, &tri.to_csr()).unwrap(),
        x,
        labels: (0..n).map(class).collect(),
        dropout,
        training: true,
    }
}

/// Training nodes, validation nodes, test nodes: both classes in each.
fn split() -> (Nodes, Nodes, Nodes) {
    let pick = |r: std::ops::Range<usize>| Nodes(r.clone().chain(r.map(|i| i + 30)).collect());
    (pick(0..8), pick(8..16), pick(16..30))
}

#[test]
fn a_model_written_outside_the_crate_learns_with_the_generic_loop() {
    let mut model = two_communities(0.2, 0);
    let (train, val, test) = split();
    let before = evaluate(&mut model, std::slice::from_ref(&test)).unwrap();
    let cfg = TrainConfig {
        epochs: 80,
        optimizer: OptimizerKind::AdaBelief,
        lr: 0.02,
        weight_decay: 1e-4,
        clip_grad_norm: Some(5.0),
        label_smoothing: 0.05,
        ema_decay: Some(0.9),
        ..TrainConfig::default()
    };
    let report = Trainer::new(cfg)
        .unwrap()
        .fit(&mut model, &mut vec![train], std::slice::from_ref(&val))
        .unwrap();
    assert_eq!(report.history.len(), report.epochs_run);
    assert_eq!(
        report.step_ms.len(),
        report.epochs_run,
        "one batch an epoch"
    );
    let first = report.history[0].train_loss;
    let last = report.history.last().unwrap().train_loss;
    assert!(last < 0.6 * first, "training loss {first} -> {last}");
    let after = evaluate(&mut model, &[test]).unwrap();
    assert!(
        after.accuracy >= 0.9,
        "test accuracy {} (before training {})",
        after.accuracy,
        before.accuracy
    );
    assert!(after.loss < before.loss);
    // The selected epoch's validation accuracy is the best of the run.
    let best = report.history.iter().map(|r| r.val_acc).fold(0.0, f64::max);
    assert_eq!(report.val_acc, best);
}

#[test]
fn the_loop_computes_what_a_loop_written_by_hand_computes() {
    // No dropout, no selection effects on the losses: every epoch's
    // training loss must equal a hand-written Adam loop's, step for step.
    let epochs = 12;
    let (train, val, _) = split();
    let mut by_loop = two_communities(0.0, 3);
    let cfg = TrainConfig {
        epochs,
        lr: 0.05,
        weight_decay: 1e-3,
        ..TrainConfig::default()
    };
    let report = Trainer::new(cfg)
        .unwrap()
        .fit(&mut by_loop, &mut vec![train.clone()], &[val])
        .unwrap();

    let by_hand = two_communities(0.0, 3);
    let cpu = C::new();
    let mut opt = AdamConfig::default()
        .lr(0.05)
        .weight_decay(1e-3)
        .build::<C>()
        .unwrap();
    let idx = Index::new(&cpu, &train.0).unwrap();
    let y: Vec<usize> = train.0.iter().map(|&i| by_hand.labels[i]).collect();
    let y = Index::new(&cpu, &y).unwrap();
    for (epoch, record) in report.history.iter().enumerate() {
        let tape = Tape::new(&cpu);
        let loss = by_hand
            .logits(&tape)
            .unwrap()
            .gather_rows(&idx)
            .unwrap()
            .log_softmax(Axis::Cols)
            .nll(&y)
            .unwrap();
        let grads = loss.backward().unwrap();
        let value = loss.scalar().unwrap();
        assert!(
            (value - record.train_loss).abs() < 1e-12,
            "epoch {epoch}: loop {} against hand {value}",
            record.train_loss
        );
        opt.step(&by_hand.params(), &grads).unwrap();
    }
}

/// Counts the steps it sees, zeroes every gradient, stops after
/// `stop_after` epochs.
struct Freeze {
    steps: Vec<StepContext>,
    epochs: Vec<EpochRecord>,
    stop_after: usize,
}

impl Hook<C, MeanAgg> for Freeze {
    fn after_backward(
        &mut self,
        _model: &MeanAgg,
        batch: &Nodes,
        ctx: &StepContext,
        grads: &mut Gradients<C>,
    ) -> hdgcn::Result<()> {
        assert!(!batch.0.is_empty());
        self.steps.push(*ctx);
        for g in grads.tensors_mut() {
            g.fill(0.0);
        }
        Ok(())
    }

    fn on_epoch_end(&mut self, record: &EpochRecord) -> hdgcn::Result<bool> {
        self.epochs.push(*record);
        Ok(self.epochs.len() < self.stop_after)
    }
}

#[test]
fn hooks_see_every_step_can_change_the_gradients_and_can_stop_the_run() {
    let mut model = two_communities(0.0, 1);
    let before: Vec<_> = model.params().iter().map(|p| p.to_array()).collect();
    let (train, val, _) = split();
    // Two batches an epoch.
    let halves = vec![Nodes(train.0[..8].to_vec()), Nodes(train.0[8..].to_vec())];
    let mut hook = Freeze {
        steps: Vec::new(),
        epochs: Vec::new(),
        stop_after: 3,
    };
    let cfg = TrainConfig {
        epochs: 50,
        lr: 0.1,
        seed: 7,
        ..TrainConfig::default()
    };
    let report = Trainer::new(cfg)
        .unwrap()
        .with_hook(&mut hook)
        .fit(&mut model, &mut halves.clone(), &[val])
        .unwrap();
    assert_eq!(report.epochs_run, 3, "the hook stopped the run");
    assert_eq!(hook.epochs.len(), 3);
    assert_eq!(hook.steps.len(), 6);
    for (s, ctx) in hook.steps.iter().enumerate() {
        assert_eq!(ctx.step, s as u64);
        assert_eq!(ctx.epoch, s / 2);
        assert_eq!(
            ctx.seed,
            7u64.wrapping_mul(1_000_003).wrapping_add(s as u64)
        );
        assert_eq!(ctx.lr, 0.1);
    }
    // Zero gradients: Adam (no weight decay) moves nothing.
    let after: Vec<_> = model.params().iter().map(|p| p.to_array()).collect();
    assert_eq!(before, after);
}

#[test]
fn bad_settings_are_errors_before_training() {
    let bad = [
        TrainConfig {
            epochs: 0,
            ..TrainConfig::default()
        },
        TrainConfig {
            lr: f64::NAN,
            ..TrainConfig::default()
        },
        TrainConfig {
            label_smoothing: 1.5,
            ..TrainConfig::default()
        },
        TrainConfig {
            ema_decay: Some(1.0),
            ..TrainConfig::default()
        },
        TrainConfig {
            clip_grad_norm: Some(-1.0),
            ..TrainConfig::default()
        },
        TrainConfig {
            patience: Some(0),
            ..TrainConfig::default()
        },
        TrainConfig {
            epochs: 5,
            lr_warmup_epochs: 5,
            ..TrainConfig::default()
        },
    ];
    for cfg in bad {
        let err = Trainer::<C, MeanAgg>::new(cfg.clone()).unwrap_err();
        assert!(
            matches!(err, hdgcn::Error::InvalidConfig(_)),
            "{cfg:?}: {err}"
        );
    }
    // An empty loader is an error, not a silent pass.
    let mut model = two_communities(0.0, 2);
    let (_, val, _) = split();
    let err = Trainer::new(TrainConfig::default())
        .unwrap()
        .fit(&mut model, &mut Vec::<Nodes>::new(), &[val])
        .unwrap_err();
    assert!(matches!(err, hdgcn::Error::Empty(_)), "{err}");
}
