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

use std::path::PathBuf;

use clap::Parser;
use hdgcn::autograd::SparseMatrix;
use hdgcn::backend::{Backend, Device, WithBackend};
use hdgcn::checkpoint::{load_checkpoint, save_checkpoint};
use hdgcn::conv::DeviceGraph;
use hdgcn::data::{Planetoid, data_root, geom_gcn_dir, geom_gcn_split, planetoid_dir};
use hdgcn::graph::Graph;
use hdgcn::models::NodeClassifier;
use hdgcn::nn::Features;
use hdgcn::train::{NodeTask, NodeTrainConfig, evaluate_nodes, train_node_classifier};
use hdgcn::util::{mean_std, median, peak_rss_mb};
use rand::SeedableRng;

#[derive(Parser, Debug)]
#[command(about = "GCN / ChebNet node classification on Planetoid datasets")]
struct Args {
    /// cora | citeseer | pubmed
    #[arg(long, default_value = "cora")]
    dataset: String,
    /// gcn | cheb | hdgcn | hdgcn-static
    #[arg(long, default_value = "gcn")]
    model: String,
    /// Chebyshev terms (cheb: default 3) or order K (hdgcn*: even, default 6).
    #[arg(long)]
    k: Option<usize>,
    /// public | full (geom-gcn 60/20/20 splits; run r uses split r mod 10)
    #[arg(long, default_value = "public")]
    split: String,
    /// Independent runs (seeds seed, seed+1, ...).
    #[arg(long, default_value_t = 10)]
    runs: usize,
    /// Training epochs per run [default: 200 on the public split; 1000 on the
    /// full split, the GCNII full-supervised protocol].
    #[arg(long)]
    epochs: Option<usize>,
    /// Stop after this many epochs without a better validation accuracy
    /// [default: none on the public split; 100 on the full split].
    #[arg(long)]
    patience: Option<usize>,
    /// Hidden width [default: 16; 64 for hdgcn models, as the paper].
    #[arg(long)]
    hidden: Option<usize>,
    /// Adam learning rate.
    #[arg(long, default_value_t = 0.01)]
    lr: f64,
    /// L2 weight decay (first layer, as Kipf & Welling and PyG's gcn.py).
    #[arg(long, default_value_t = 5e-4)]
    weight_decay: f64,
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
    /// Supernodes M of MVCAttn (hdgcn).
    #[arg(long, default_value_t = 10)]
    supernodes: usize,
    /// Base seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Save the parameters of the last run (at its best validation epoch) as safetensors.
    #[arg(long)]
    save: Option<PathBuf>,
    /// Load parameters from a checkpoint and evaluate them (no training).
    #[arg(long)]
    load: Option<PathBuf>,
    /// cpu | wgpu (the wgpu backend needs `--features wgpu`; the adapter is
    /// chosen by WGPU_BACKEND / WGPU_ADAPTER_NAME).
    #[arg(long, default_value = "cpu")]
    device: String,
    /// Print one JSON summary as the last stdout line.
    #[arg(long)]
    json: bool,
    /// No progress bar, no per-run lines.
    #[arg(long)]
    quiet: bool,
}

fn main() {
    let args = Args::parse();
    let result = args
        .device
        .parse::<Device>()
        .and_then(|device| {
            device.run(Job {
                args: &args,
                device,
            })
        })
        .and_then(|r| r);
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

/// The whole run, generic over the backend `--device` picks.
struct Job<'a> {
    args: &'a Args,
    device: Device,
}

impl WithBackend for Job<'_> {
    type Output = hdgcn::Result<()>;
    fn run<B: Backend<Elem = f32>>(self, backend: B) -> hdgcn::Result<()> {
        run(self.args, &backend, self.device)
    }
}

fn run<B: Backend<Elem = f32>>(args: &Args, backend: &B, device: Device) -> hdgcn::Result<()> {
    let model_kind = args.model.to_ascii_lowercase();
    if !matches!(
        model_kind.as_str(),
        "gcn" | "cheb" | "hdgcn" | "hdgcn-static"
    ) {
        return Err(hdgcn::Error::InvalidConfig(format!(
            "unknown --model '{}' (gcn | cheb | hdgcn | hdgcn-static)",
            args.model
        )));
    }
    let hd = model_kind.starts_with("hdgcn");
    let k = args.k.unwrap_or(if hd { 6 } else { 3 });
    let hidden = args.hidden.unwrap_or(if hd { 64 } else { 16 });
    let split_kind = args.split.to_ascii_lowercase();
    if !matches!(split_kind.as_str(), "public" | "full") {
        return Err(hdgcn::Error::InvalidConfig(format!(
            "unknown --split '{}' (public | full)",
            args.split
        )));
    }
    if args.runs == 0 {
        return Err(hdgcn::Error::InvalidConfig(
            "--runs must be at least 1".into(),
        ));
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
    let full = split_kind == "full";
    let epochs = args.epochs.unwrap_or(if full { 1000 } else { 200 });
    let patience = args.patience.or(if full { Some(100) } else { None });
    let (mut test, mut val, mut steps) = (Vec::new(), Vec::new(), Vec::new());
    for r in 0..args.runs {
        let seed = args.seed + r as u64;
        if split_kind == "full" {
            task.split = geom_gcn_split(&geom_gcn_dir(&root), &data.name, r % 10)?;
        }
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let (d, h, c) = (data.num_features(), hidden, data.num_classes);
        let mut model = match model_kind.as_str() {
            "gcn" => NodeClassifier::gcn(backend, d, h, c, args.dropout, &mut rng)?,
            "cheb" => NodeClassifier::cheb(backend, d, h, c, k, args.dropout, &mut rng)?,
            "hdgcn" => {
                NodeClassifier::hdgcn(backend, d, h, c, k, args.supernodes, args.dropout, &mut rng)?
            }
            _ => NodeClassifier::hdgcn_static(backend, d, h, c, k, args.dropout, &mut rng)?,
        };
        let cfg = NodeTrainConfig {
            epochs,
            patience,
            lr: args.lr,
            weight_decay: args.weight_decay,
            seed,
            quiet: args.quiet,
            ..NodeTrainConfig::default()
        };
        if let Some(path) = &args.load {
            load_checkpoint(&model, path)?;
            let (va, _) = evaluate_nodes(&mut model, &task, &task.split.val)?;
            let (te, _) = evaluate_nodes(&mut model, &task, &task.split.test)?;
            eprintln!(
                "loaded {}: val {:.2}  test {:.2}",
                path.display(),
                100.0 * va,
                100.0 * te
            );
            test.push(100.0 * te);
            val.push(100.0 * va);
            continue;
        }
        let rep = train_node_classifier(&mut model, &task, &cfg)?;
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
        test.push(100.0 * rep.test_acc);
        val.push(100.0 * rep.val_acc);
        steps.extend(rep.step_ms);
    }
    let (tm, ts) = mean_std(&test);
    let (vm, _) = mean_std(&val);
    let step = median(&steps);
    let rss = peak_rss_mb().unwrap_or(f64::NAN);
    println!(
        "{} {} ({} split, {} runs): test accuracy {tm:.2} ± {ts:.2} %, val {vm:.2} %, \
         train step median {step:.3} ms, peak RSS {rss:.0} MiB",
        data.name, model_kind, split_kind, args.runs
    );
    if args.json {
        let j = serde_json::json!({
            "dataset": data.name,
            "model": model_kind,
            "split": split_kind,
            "runs": args.runs,
            "k": if model_kind == "gcn" { None } else { Some(k) },
            "hidden": hidden,
            "epochs": epochs,
            "patience": patience,
            "test_acc_mean": tm,
            "test_acc_std": ts,
            "val_acc_mean": vm,
            "test_accs": test,
            "train_step_ms_median": step,
            "peak_rss_mb": rss,
            "device": device.as_str(),
            "adapter": backend.name(),
        });
        println!("{j}");
    }
    Ok(())
}
