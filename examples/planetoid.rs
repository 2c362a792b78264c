//! Node classification on Planetoid citation graphs (Cora, CiteSeer, PubMed)
//! with GCN or ChebNet, on the public split or the geom-gcn full-supervised
//! splits.
//!
//! ```text
//! cargo run --release --example planetoid -- --dataset cora --model gcn --runs 10 --json
//! ```
//!
//! Accuracies are printed in percent. With `--json` the last stdout line is
//! one JSON object (dataset, model, split, runs, test_acc_mean, test_acc_std,
//! val_acc_mean, train_step_ms_median, peak_rss_mb, ...).

mod common;
#[cfg(test)]
#[path = "common/testing.rs"]
mod testing;

use std::path::PathBuf;

use clap::{Parser, ValueEnum};
use common::{Accuracies, AttnFlags, Example, ModelKind, Report, RunFlags, flag_name, parse_runs};
use hdgcn::autograd::SparseMatrix;
use hdgcn::backend::{Backend, Device};
use hdgcn::checkpoint::{load_checkpoint, save_checkpoint};
use hdgcn::conv::{DeviceGraph, HdChebConfig};
use hdgcn::data::{Planetoid, data_root, geom_gcn_dir, geom_gcn_split, planetoid_dir};
use hdgcn::graph::Graph;
use hdgcn::models::NodeClassifier;
use hdgcn::nn::{Activation, Features};
use hdgcn::optim::LrScheduleKind;
use hdgcn::train::{
    NodeTask, NodeTrainConfig, SelectBy, evaluate_nodes, refit_node_classifier,
    train_node_classifier,
};
use hdgcn::util::{median, peak_rss_mb};
use rand::SeedableRng;

#[derive(Parser, Debug)]
#[command(about = "GCN / ChebNet node classification on Planetoid datasets")]
struct Args {
    /// cora | citeseer | pubmed
    #[arg(long, default_value = "cora")]
    dataset: String,
    /// gcn | cheb | hdgcn | hdgcn-static
    #[arg(long, value_enum, ignore_case = true, default_value = "gcn")]
    model: ModelKind,
    /// Chebyshev terms (cheb: default 3) or order K (hdgcn*: even, default 6).
    #[arg(long)]
    k: Option<usize>,
    /// public | full (geom-gcn 60/20/20 splits; run r uses split r mod 10)
    #[arg(long, value_enum, ignore_case = true, default_value = "public")]
    split: Split,
    /// Independent runs (seeds seed, seed+1, ...).
    #[arg(long, default_value_t = 10, value_parser = parse_runs)]
    runs: usize,
    /// Training epochs per run [default: 200 on the public split; 1000 on the
    /// full split, the GCNII full-supervised protocol].
    #[arg(long)]
    epochs: Option<usize>,
    /// Stop after this many epochs without a better validation score (by
    /// --select-by) [default: none on the public split; 100 on the full
    /// split].
    #[arg(long)]
    patience: Option<usize>,
    /// Which validation score picks each run's epoch and resets
    /// --patience: accuracy (the highest; ties: the lower loss) | loss (the
    /// lowest cross-entropy, as GCNII's full-supervised.py)
    /// (`NodeTrainConfig::select_by`).
    #[arg(long, default_value = "accuracy")]
    select_by: SelectBy,
    /// Hidden width [default: 16; 64 for hdgcn models, as the paper].
    #[arg(long)]
    hidden: Option<usize>,
    /// Adam learning rate.
    #[arg(long, default_value_t = 0.01)]
    lr: f64,
    /// Learning-rate schedule over the epoch budget: constant | cosine |
    /// cosine:ETA_MIN | step:STEP_SIZE:GAMMA.
    #[arg(long, default_value = "constant")]
    lr_schedule: LrScheduleKind,
    /// Epochs of linear warm-up to --lr before the schedule, which then
    /// runs over the epochs left (must be below --epochs; 0: none).
    #[arg(long, default_value_t = 0)]
    warmup_epochs: usize,
    /// L2 weight decay (first layer, as Kipf & Welling and PyG's gcn.py).
    #[arg(long, default_value_t = 5e-4)]
    weight_decay: f64,
    /// Label smoothing of the training loss, in [0, 1] (PyTorch's
    /// `CrossEntropyLoss(label_smoothing=...)`; default 0: none).
    #[arg(long, default_value_t = 0.0)]
    label_smoothing: f64,
    /// Evaluates and selects with an exponential moving average of the
    /// weights with this decay, in [0, 1), updated after every step
    /// (`optim::ExponentialMovingAverage`, with warm-up; default: none).
    #[arg(long)]
    ema: Option<f64>,
    /// Adversarial training of the input layer: each step also trains with
    /// the first layer's input weights moved by this L2 norm along their
    /// gradient (the fast gradient method, as text_classification's
    /// `--adversarial` on the embedding table;
    /// `NodeTrainConfig::adversarial_epsilon`; default: off; a step costs
    /// about twice as much).
    #[arg(long)]
    adversarial: Option<f64>,
    /// Epochs trained without `--adversarial` before its step starts
    /// (`NodeTrainConfig::adversarial_warmup_epochs`; default 0: from the
    /// first epoch; below --epochs). Needs `--adversarial`.
    #[arg(long, default_value_t = 0)]
    adversarial_warmup: usize,
    /// Dropout probability.
    #[arg(long, default_value_t = 0.5)]
    dropout: f64,
    /// Data root (holds planetoid/ and geom-gcn-splits/); default $HDGCN_DATA, else ./data
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Keep raw bag-of-words features (default: row-normalised, as PyG's
    /// NormalizeFeatures and Kipf & Welling).
    #[arg(long)]
    raw_features: bool,
    #[command(flatten)]
    attn: AttnFlags,
    /// Output layer of the hdgcn models: linear (the paper's softmax
    /// classifier on H) | gcn (a GCN layer to the classes, `Â H W + b`,
    /// `NodeClassifier::with_gcn_head`) [default: linear].
    #[arg(long, value_enum, ignore_case = true)]
    head: Option<Head>,
    /// Non-linearity of the hdgcn models: σ inside the HD-ChebConv and the
    /// activation before the output layer: relu | leaky_relu | elu | gelu |
    /// tanh | sigmoid | identity (`nn::Activation`) [default: relu].
    #[arg(long)]
    activation: Option<String>,
    /// After each run's selection, train a fresh model (same seed and
    /// initialisation) on the training and validation nodes together for
    /// the selected number of epochs and report its test accuracy
    /// (`train::refit_node_classifier`, scikit-learn's `refit=True`);
    /// validation accuracy and the selected epochs stay the selection
    /// run's. `--save` then saves the refit model. Not with `--load`.
    #[arg(long)]
    refit: bool,
    /// Base seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Save the parameters of the last run (at its best validation epoch) as safetensors.
    #[arg(long)]
    save: Option<PathBuf>,
    /// Load parameters from a checkpoint and evaluate them (no training).
    #[arg(long)]
    load: Option<PathBuf>,
    #[command(flatten)]
    run: RunFlags,
    /// No progress bar, no per-run lines.
    #[arg(long)]
    quiet: bool,
}

/// `--split`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Split {
    /// The Planetoid split (20 labels per class, 500 validation, 1000 test).
    Public,
    /// The geom-gcn 60/20/20 splits.
    Full,
}

/// `--head`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Head {
    /// `Linear(hidden -> classes)` after dropout (the paper's classifier).
    Linear,
    /// `GcnConv(hidden -> classes)` after the activation and dropout.
    Gcn,
}

fn main() {
    common::main::<Args>();
}

impl Example for Args {
    fn flags(&self) -> &RunFlags {
        &self.run
    }

    fn run<B: Backend<Elem = f32>>(&self, backend: &B, device: Device) -> hdgcn::Result<Report> {
        run(self, backend, device)
    }
}

fn run<B: Backend<Elem = f32>>(args: &Args, backend: &B, device: Device) -> hdgcn::Result<Report> {
    let model_kind = args.model;
    let hd = matches!(model_kind, ModelKind::Hdgcn | ModelKind::HdgcnStatic);
    let k = args.k.unwrap_or(if hd { 6 } else { 3 });
    let hidden = args.hidden.unwrap_or(if hd { 64 } else { 16 });
    let head = match (hd, args.head) {
        (true, h) => Some(h.unwrap_or(Head::Linear)),
        (false, None) => None,
        (false, Some(_)) => {
            return Err(hdgcn::Error::InvalidConfig(format!(
                "--head applies to --model hdgcn and hdgcn-static, not {}",
                flag_name(&model_kind)
            )));
        }
    };
    let activation = match (hd, args.activation.as_deref()) {
        (_, None) => Activation::Relu,
        (true, Some(name)) => name.parse::<Activation>()?,
        (false, Some(_)) => {
            return Err(hdgcn::Error::InvalidConfig(format!(
                "--activation applies to --model hdgcn and hdgcn-static, not {}",
                flag_name(&model_kind)
            )));
        }
    };
    if args.refit && args.load.is_some() {
        return Err(hdgcn::Error::InvalidConfig(
            "--refit trains a model; it cannot be combined with --load".into(),
        ));
    }
    if args.adversarial.is_none() && args.adversarial_warmup > 0 {
        return Err(hdgcn::Error::InvalidConfig(format!(
            "--adversarial-warmup {} delays the adversarial step: give --adversarial",
            args.adversarial_warmup
        )));
    }
    if let Some(warning) = lr_width_warning(model_kind, args.lr, hidden) {
        eprintln!("{warning}");
    }
    if let Some(warning) = args.attn.ignored_warning(model_kind) {
        eprintln!("{warning}");
    }
    let root = data_root(args.data_dir.as_deref());
    let data = Planetoid::load(&planetoid_dir(&root), &args.dataset)?;
    let graph = Graph::from_edges(data.num_nodes(), &data.edges)?;
    let x = if args.raw_features {
        data.features.clone()
    } else {
        data.row_normalized_features()
    };
    let features = Features::Sparse(SparseMatrix::from_csmat(backend, &x)?);
    let mut task = NodeTask {
        graph: DeviceGraph::new(backend, graph),
        features,
        labels: data.labels.clone(),
        num_classes: data.num_classes,
        split: data.public_split.clone(),
    };
    let full = args.split == Split::Full;
    let epochs = args.epochs.unwrap_or(if full { 1000 } else { 200 });
    let patience = args.patience.or(if full { Some(100) } else { None });
    let (d, h, c) = (data.num_features(), hidden, data.num_classes);
    // A freshly initialised model of run seed `seed` (a refit starts from
    // the same initialisation as its selection run).
    let build = |seed: u64| -> hdgcn::Result<NodeClassifier<B>> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        Ok(match model_kind {
            ModelKind::Gcn => NodeClassifier::gcn(backend, d, h, c, args.dropout, &mut rng)?,
            ModelKind::Cheb => NodeClassifier::cheb(backend, d, h, c, k, args.dropout, &mut rng)?,
            ModelKind::Hdgcn | ModelKind::HdgcnStatic => {
                let mut cfg = HdChebConfig::in_model(d, h, k, args.dropout);
                cfg.activation = activation;
                let conv = args
                    .attn
                    .hd_cheb_conv(backend, model_kind, &cfg, &mut rng)?;
                let model = NodeClassifier::new(vec![conv], args.dropout, activation)?;
                match head {
                    Some(Head::Gcn) => model.with_gcn_head(backend, c, &mut rng)?,
                    _ => model.with_head(backend, c, &mut rng)?,
                }
            }
        })
    };
    let (mut acc, mut steps) = (Accuracies::default(), Vec::new());
    let mut selected_test = Vec::new();
    for r in 0..args.runs {
        let seed = args.seed + r as u64;
        if full {
            task.split = geom_gcn_split(&geom_gcn_dir(&root), &data.name, r % 10)?;
        }
        let mut model = build(seed)?;
        let cfg = NodeTrainConfig {
            epochs,
            patience,
            select_by: args.select_by,
            lr: args.lr,
            lr_schedule: args.lr_schedule,
            lr_warmup_epochs: args.warmup_epochs,
            weight_decay: args.weight_decay,
            label_smoothing: args.label_smoothing,
            ema_decay: args.ema,
            adversarial_epsilon: args.adversarial,
            adversarial_warmup_epochs: args.adversarial_warmup,
            seed,
            quiet: args.quiet,
            ..NodeTrainConfig::default()
        };
        if let Some(path) = &args.load {
            load_checkpoint(&model, path)?;
            let va = evaluate_nodes(&mut model, &task, &task.split.val)?;
            let (te, _) = evaluate_nodes(&mut model, &task, &task.split.test)?;
            acc.push_loaded(path, va, te);
            continue;
        }
        let mut rep = train_node_classifier(&mut model, &task, &cfg)?;
        if args.refit {
            selected_test.push(100.0 * rep.test_acc);
            model = build(seed)?;
            let refit = refit_node_classifier(&mut model, &task, &cfg, rep.best_epoch + 1)?;
            if !args.quiet {
                eprintln!(
                    "run {r}: refit on {} nodes for {} epochs: test {:.2} (selection run {:.2})",
                    task.split.train.len() + task.split.val.len(),
                    rep.best_epoch + 1,
                    100.0 * refit.test_acc,
                    100.0 * rep.test_acc
                );
            }
            rep.test_acc = refit.test_acc;
        }
        if let (Some(path), true) = (&args.save, r + 1 == args.runs) {
            save_checkpoint(&model, path)?;
            eprintln!("saved {}", path.display());
        }
        if !args.quiet {
            eprintln!(
                "run {r}: best epoch {:3}  val {:.2}  test {:.2}  step {:.3} ms",
                rep.best_epoch,
                100.0 * rep.val_acc,
                100.0 * rep.test_acc,
                median(&rep.step_ms)
            );
        }
        acc.push((rep.val_acc, rep.val_loss), rep.test_acc, rep.best_epoch);
        steps.extend(rep.step_ms);
    }
    let (tm, ts, vm) = acc.summary();
    let (model_name, split_kind) = (flag_name(&model_kind), flag_name(&args.split));
    let step = median(&steps);
    let rss = peak_rss_mb().unwrap_or(f64::NAN);
    let line = format!(
        "{} {} ({} split, {} runs): test accuracy {tm:.2} ± {ts:.2} %, val {vm:.2} %, \
         train step median {step:.3} ms, peak RSS {rss:.0} MiB",
        data.name, model_name, split_kind, args.runs
    );
    let json = serde_json::json!({
            "dataset": data.name,
            "model": model_name,
            "split": split_kind,
            "runs": args.runs,
            "k": if model_kind == ModelKind::Gcn { None } else { Some(k) },
            "hidden": hidden,
            "supernodes": (model_kind == ModelKind::Hdgcn).then_some(args.attn.supernodes),
            "routing": (model_kind == ModelKind::Hdgcn).then_some(args.attn.routing.as_str()),
            "score_norm": (model_kind == ModelKind::Hdgcn).then_some(args.attn.score_norm),
            "attn_dropout": (model_kind == ModelKind::Hdgcn).then_some(args.attn.attn_dropout),
            "head": head.map(|h| flag_name(&h)),
            "activation": hd.then(|| activation.name()),
            "epochs": epochs,
            "patience": patience,
            "select_by": args.select_by.as_str(),
            "lr": args.lr,
            "lr_schedule": args.lr_schedule.to_string(),
            "warmup_epochs": args.warmup_epochs,
            "label_smoothing": args.label_smoothing,
            "ema": args.ema,
            "adversarial": args.adversarial,
            "adversarial_warmup": args.adversarial.map(|_| args.adversarial_warmup),
            "refit": args.refit,
            "selected_test_accs": args.refit.then_some(&selected_test),
            "test_acc_mean": tm,
            "test_acc_std": ts,
            "val_acc_mean": vm,
            "val_accs": acc.val,
            "val_loss_mean": acc.val_loss_mean(),
            "val_losses": acc.val_losses,
            "test_accs": acc.test,
            "best_epochs": acc.best_epochs,
            "train_step_ms_median": step,
            "peak_rss_mb": rss,
            "malloc": args.run.malloc.in_effect(),
            "device": device.as_str(),
            "adapter": backend.name(),
    });
    Ok(Report { line, json })
}

/// The largest `lr × hidden` at which HDGCN (the dynamic variant) trained in
/// every measured 50-epoch run on Cora with Adam (docs/results.md, "Why wide dynamic
/// layers collapse"): the collapse sets in between 0.9 and 1.1.
const HDGCN_MAX_LR_WIDTH: f64 = 0.75;

/// A warning for an HDGCN run whose learning rate times hidden width lies
/// above [`HDGCN_MAX_LR_WIDTH`]. At initialisation the dynamic transition
/// hands every node the same vector, so the gradients of its `h x h`
/// weights are rank one, and Adam's first steps (`lr · sign(G)`) change
/// each of them by `lr · h` in spectral norm.
fn lr_width_warning(model: ModelKind, lr: f64, hidden: usize) -> Option<String> {
    let product = lr * hidden as f64;
    (model == ModelKind::Hdgcn && product > HDGCN_MAX_LR_WIDTH).then(|| {
        format!(
            "warning: --lr {lr} x --hidden {hidden} = {product:.2}. In 50-epoch runs on Cora (K = 6) \
             HDGCN ended at the majority class whenever lr x hidden was 1.1 or more, and \
             trained whenever it was at most {HDGCN_MAX_LR_WIDTH}: use --lr {:.2e} or lower \
             (docs/results.md, \"Why wide dynamic layers collapse\")",
            HDGCN_MAX_LR_WIDTH / hidden as f64
        )
    })
}

#[cfg(test)]
mod tests {
    use super::common::run_on_cpu;
    use super::testing::{assert_runs_average, parse_args, scratch};
    use super::*;
    use std::path::Path;

    fn parse(flags: &[&str]) -> Args {
        parse_args(flags)
    }

    /// The fields README.md lists for `planetoid --json`.
    const README_FIELDS: [&str; 37] = [
        "dataset",
        "model",
        "split",
        "runs",
        "test_acc_mean",
        "test_acc_std",
        "val_acc_mean",
        "train_step_ms_median",
        "peak_rss_mb",
        "malloc",
        "device",
        "adapter",
        "val_accs",
        "test_accs",
        "best_epochs",
        "hidden",
        "k",
        "epochs",
        "patience",
        "lr",
        "lr_schedule",
        "warmup_epochs",
        "label_smoothing",
        "ema",
        "supernodes",
        "routing",
        "score_norm",
        "attn_dropout",
        "head",
        "activation",
        "refit",
        "selected_test_accs",
        "adversarial",
        "adversarial_warmup",
        "select_by",
        "val_loss_mean",
        "val_losses",
    ];

    #[test]
    fn the_hdgcn_flags_of_issue_3_parse() {
        let a = parse(&["--model", "hdgcn", "--k", "4", "--supernodes", "12"]);
        assert_eq!(
            (a.model, a.k, a.attn.supernodes),
            (ModelKind::Hdgcn, Some(4), 12)
        );
        assert_eq!(
            parse(&["--model", "hdgcn-static"]).model,
            ModelKind::HdgcnStatic
        );
        assert_eq!(parse(&["--split", "full"]).split, Split::Full);
        assert!(Args::try_parse_from(["planetoid", "--model", "gat"]).is_err());
    }

    #[test]
    fn json_summary_has_the_readme_fields_and_a_saved_checkpoint_reloads() {
        // The vendored Cora (data/planetoid), public split.
        let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("data");
        let dir = scratch("planetoid");
        let ckpt = dir.join("model.safetensors");
        let mut common: Vec<&str> =
            "--model hdgcn --k 2 --supernodes 3 --hidden 8 --epochs 5 --quiet --json"
                .split_whitespace()
                .collect();
        common.extend(["--data-dir", data.to_str().unwrap()]);
        let trained = run_on_cpu::<Args>(&parse(
            &[
                &common[..],
                &["--runs", "2", "--save", ckpt.to_str().unwrap()],
            ]
            .concat(),
        ));
        let j = &trained.json;
        for field in README_FIELDS {
            assert!(j.get(field).is_some(), "missing {field:?} in {j}");
        }
        assert_eq!(
            (j["dataset"].as_str(), j["model"].as_str()),
            (Some("cora"), Some("hdgcn"))
        );
        assert_eq!(
            (j["split"].as_str(), j["runs"].as_u64()),
            (Some("public"), Some(2))
        );
        assert_eq!(
            (j["k"].as_u64(), j["supernodes"].as_u64()),
            (Some(2), Some(3))
        );
        assert_eq!(j["head"], "linear");
        let tests = assert_runs_average(j, "test_accs", "test_acc_mean", 2);
        assert_runs_average(j, "val_accs", "val_acc_mean", 2);
        assert_runs_average(j, "val_losses", "val_loss_mean", 2);
        assert!(
            j["train_step_ms_median"].as_f64().is_some_and(|v| v > 0.0),
            "{j}"
        );
        // The checkpoint is the last run's (seed 1) at its best epoch.
        let loaded = run_on_cpu::<Args>(&parse(
            &[
                &common[..],
                &[
                    "--runs",
                    "1",
                    "--seed",
                    "1",
                    "--load",
                    ckpt.to_str().unwrap(),
                ],
            ]
            .concat(),
        ));
        assert_eq!(loaded.json["test_accs"][0], tests[1], "{}", loaded.json);
        std::fs::remove_dir_all(&dir).unwrap();
        // The static variant reports no MVCAttn settings.
        let st = run_on_cpu::<Args>(&parse(
            &[
                &["--model", "hdgcn-static", "--runs", "1"][..],
                &common[2..],
            ]
            .concat(),
        ));
        assert_eq!(st.json["model"], "hdgcn-static");
        assert_eq!(st.json["supernodes"], serde_json::Value::Null);
        assert_eq!(st.json["k"].as_u64(), Some(2));
    }

    #[test]
    fn refit_reports_the_refit_models_test_accuracy() {
        // The vendored Cora: the public split's 140 training and 500
        // validation nodes, so the refit trains on 640.
        let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("data");
        let mut common: Vec<&str> = "--model gcn --hidden 8 --epochs 20 --runs 2 --quiet --json"
            .split_whitespace()
            .collect();
        common.extend(["--data-dir", data.to_str().unwrap()]);
        let plain = run_on_cpu::<Args>(&parse(&common)).json;
        assert_eq!(plain["refit"], false);
        assert_eq!(plain["selected_test_accs"], serde_json::Value::Null);
        let refit = run_on_cpu::<Args>(&parse(&[&common[..], &["--refit"]].concat())).json;
        assert_eq!(refit["refit"], true);
        // The selection runs are those of the plain command.
        assert_eq!(refit["selected_test_accs"], plain["test_accs"]);
        assert_eq!(refit["best_epochs"], plain["best_epochs"]);
        assert_eq!(refit["val_acc_mean"], plain["val_acc_mean"]);
        // The reported test accuracies are the refit models'; with 4.6
        // times the labelled nodes at least one run ends elsewhere.
        assert_ne!(refit["test_accs"], plain["test_accs"], "{refit}");
        let err = run(
            &parse(&[&common[..], &["--refit", "--load", "x.safetensors"]].concat()),
            &hdgcn::backend::Cpu::<f32>::new(),
            Device::Cpu,
        )
        .unwrap_err();
        assert!(err.to_string().contains("--refit"), "{err}");
    }

    #[test]
    fn attention_dropout_reaches_mvcattn_and_is_checked() {
        let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("data");
        let mut common: Vec<&str> =
            "--k 2 --supernodes 3 --hidden 8 --epochs 8 --runs 1 --quiet --json"
                .split_whitespace()
                .collect();
        common.extend(["--data-dir", data.to_str().unwrap()]);
        let static_ = run_on_cpu::<Args>(&parse(
            &[&common[..], &["--model", "hdgcn-static"]].concat(),
        ))
        .json;
        assert_eq!(static_["attn_dropout"], serde_json::Value::Null);
        common.extend(["--model", "hdgcn"]);
        let plain = run_on_cpu::<Args>(&parse(&common)).json;
        assert_eq!(plain["attn_dropout"].as_f64(), Some(0.0));
        let dropped =
            run_on_cpu::<Args>(&parse(&[&common[..], &["--attn-dropout", "0.5"]].concat())).json;
        assert_eq!(dropped["attn_dropout"].as_f64(), Some(0.5));
        assert_ne!(dropped["val_accs"], plain["val_accs"], "{dropped}");
        let cpu = hdgcn::backend::Cpu::<f32>::new();
        let err = run(
            &parse(&[&common[..], &["--attn-dropout", "1"]].concat()),
            &cpu,
            Device::Cpu,
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("dropout must be in [0, 1)"),
            "{err}"
        );
    }

    #[test]
    fn select_by_reports_its_metric_and_picks_epochs_by_it() {
        let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("data");
        let mut common: Vec<&str> = "--model gcn --hidden 8 --epochs 40 --runs 1 --quiet --json"
            .split_whitespace()
            .collect();
        common.extend(["--data-dir", data.to_str().unwrap()]);
        let acc = run_on_cpu::<Args>(&parse(&common)).json;
        assert_eq!(acc["select_by"], "accuracy");
        let loss =
            run_on_cpu::<Args>(&parse(&[&common[..], &["--select-by", "loss"]].concat())).json;
        assert_eq!(loss["select_by"], "loss");
        // One training run, two picks: on the public split the validation
        // loss bottoms out at another epoch than the accuracy peaks.
        assert_ne!(loss["best_epochs"], acc["best_epochs"], "{loss}");
        let err = Args::try_parse_from(["planetoid", "--select-by", "f1"]).unwrap_err();
        assert!(err.to_string().contains("'f1'"), "{err}");
    }

    #[test]
    fn adversarial_reports_its_settings_and_changes_the_runs() {
        let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("data");
        let mut common: Vec<&str> = "--model gcn --hidden 8 --epochs 6 --runs 1 --quiet --json"
            .split_whitespace()
            .collect();
        common.extend(["--data-dir", data.to_str().unwrap()]);
        let plain = run_on_cpu::<Args>(&parse(&common)).json;
        assert_eq!(plain["adversarial"], serde_json::Value::Null);
        assert_eq!(plain["adversarial_warmup"], serde_json::Value::Null);
        let adv = run_on_cpu::<Args>(&parse(
            &[
                &common[..],
                &["--adversarial", "2", "--adversarial-warmup", "1"],
            ]
            .concat(),
        ))
        .json;
        assert_eq!(adv["adversarial"].as_f64(), Some(2.0));
        assert_eq!(adv["adversarial_warmup"].as_u64(), Some(1));
        assert_ne!(adv["val_accs"], plain["val_accs"], "{adv}");
        let cpu = hdgcn::backend::Cpu::<f32>::new();
        for (flags, needle) in [
            (&["--adversarial-warmup", "2"][..], "give --adversarial"),
            (
                &["--adversarial", "0.5", "--adversarial-warmup", "6"],
                "adversarial_warmup_epochs of 6",
            ),
            (&["--adversarial", "0"], "adversarial_epsilon"),
        ] {
            let err = run(&parse(&[&common[..], flags].concat()), &cpu, Device::Cpu).unwrap_err();
            assert!(err.to_string().contains(needle), "{err}");
        }
    }

    #[test]
    fn mvcattn_flags_warn_for_models_without_mvcattn() {
        let warning = |flags: &[&str]| parse(flags).attn.ignored_warning(parse(flags).model);
        let w = warning(&[
            "--model",
            "hdgcn-static",
            "--supernodes",
            "20",
            "--score-norm",
        ])
        .expect("two flags the static variant ignores");
        assert!(
            w.contains("--supernodes, --score-norm configure MVCAttn"),
            "{w}"
        );
        assert!(w.contains("--model hdgcn-static"), "{w}");
        for (flag, value) in [
            ("--supernodes", Some("4")),
            ("--routing", Some("votes")),
            ("--score-norm", None),
            ("--attn-dropout", Some("0.3")),
        ] {
            let flags: Vec<&str> = ["--model", "gcn", flag].into_iter().chain(value).collect();
            let w = warning(&flags).unwrap_or_else(|| panic!("{flag} is not reported"));
            assert!(
                w.starts_with(&format!("warning: {flag} configures MVCAttn")),
                "{w}"
            );
            let mut dynamic = flags.clone();
            dynamic[1] = "hdgcn";
            assert_eq!(warning(&dynamic), None, "{flag} applies to hdgcn");
        }
        // Nothing set away from its default: nothing to report.
        for model in ["gcn", "cheb", "hdgcn-static"] {
            assert_eq!(warning(&["--model", model]), None);
            assert_eq!(warning(&["--model", model, "--supernodes", "10"]), None);
        }
    }

    #[test]
    fn warns_only_for_the_dynamic_variant_above_the_measured_boundary() {
        let w = lr_width_warning(ModelKind::Hdgcn, 0.01, 128).expect("1.28 is above 0.75");
        assert!(w.contains("= 1.28"), "{w}");
        assert!(w.contains("--lr 5.86e-3"), "{w}");
        // The paper's width at the default rate: 0.64.
        assert_eq!(lr_width_warning(ModelKind::Hdgcn, 0.01, 64), None);
        assert_eq!(lr_width_warning(ModelKind::Hdgcn, 0.005, 150), None);
        assert!(lr_width_warning(ModelKind::Hdgcn, 0.005, 151).is_some());
        for m in [ModelKind::HdgcnStatic, ModelKind::Gcn, ModelKind::Cheb] {
            assert_eq!(lr_width_warning(m, 0.01, 128), None, "{m:?}");
        }
    }
}
