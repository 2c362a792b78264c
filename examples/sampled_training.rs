//! Node classification with neighbour sampling on a generated graph
//! (compare PyTorch Geometric's `examples/reddit.py`: a `NeighborLoader`
//! over the training nodes, a two-layer GNN, the loss on the seed nodes).
//!
//! ```text
//! cargo run --release --example sampled_training -- \
//!     --nodes 100000 --degree 10 --features 128 --fanouts 10,10 --batch-size 1024 --epochs 3 --json
//! ```
//!
//! `--features-file x.npy` writes the features to a `.npy` file and trains
//! from it memory-mapped (`hdgcn::data::npy`), gathering each batch's rows,
//! so the features need not fit in memory. `--full-batch` trains on the
//! whole graph instead, through the same step, for comparison. `--model gcn` (`GcnConv`, the
//! GCN operator of each sampled subgraph) or `--model sage` (`SageConv`, mean aggregation with a
//! root weight, the better fit for sampled neighbourhoods).

use std::cell::Cell;
use std::path::PathBuf;
use std::time::Instant;

use clap::{Parser, ValueEnum};
use hdgcn::Result;
use hdgcn::backend::Cpu;
use hdgcn::conv::SageConv;
use hdgcn::data::FeatureStore;
use hdgcn::data::npy::{NpyMatrix, write_npy};
use hdgcn::graph::Graph;
use hdgcn::graph::generate::{GeneratorConfig, generate};
use hdgcn::graph::partition::{ClusterLoader, ClusterLoaderConfig};
use hdgcn::graph::sampling::{
    NeighborLoader, NeighborLoaderConfig, NeighborSampler, SampledSubgraph, SamplingConfig,
};
use hdgcn::models::NodeClassifier;
use hdgcn::nn::Activation;
use hdgcn::train::{Loader, SampledNodeStep, TrainConfig, Trainer, evaluate};
use rand::seq::SliceRandom;
use rand::{SeedableRng, rngs::StdRng};

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Model {
    /// Two `GcnConv` layers (the GCN operator of each sampled subgraph).
    Gcn,
    /// Two `SageConv` layers (mean aggregation and a root weight, as
    /// GraphSAGE and PyG's `graph_sage_unsup`/`reddit` examples).
    Sage,
}

#[derive(Parser, Debug)]
#[command(about = "Neighbour-sampled node classification on a generated graph")]
struct Args {
    #[arg(long, value_enum, default_value = "gcn")]
    model: Model,
    #[arg(long, default_value_t = 100_000)]
    nodes: usize,
    /// Out-degree of every node (the uniform generator).
    #[arg(long, default_value_t = 10)]
    degree: usize,
    #[arg(long, default_value_t = 128)]
    features: usize,
    #[arg(long, default_value_t = 10)]
    classes: usize,
    /// Standard deviation of the feature noise around the class means
    /// (which are standard normal): higher is harder.
    #[arg(long, default_value_t = 16.0)]
    noise: f64,
    /// Fraction of edges within a class.
    #[arg(long, default_value_t = 0.5)]
    homophily: f64,
    #[arg(long, default_value_t = 64)]
    hidden: usize,
    /// Neighbours per layer, comma-separated; -1 takes them all.
    #[arg(
        long,
        default_value = "10,10",
        value_delimiter = ',',
        allow_hyphen_values = true
    )]
    fanouts: Vec<i64>,
    #[arg(long, default_value_t = 1024)]
    batch_size: usize,
    #[arg(long, default_value_t = 3)]
    epochs: usize,
    #[arg(long, default_value_t = 0.01)]
    lr: f64,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Train from the features written to this `.npy` file, memory-mapped.
    #[arg(long)]
    features_file: Option<PathBuf>,
    /// Train full-batch instead, through the same step: one batch, the
    /// whole graph, the training nodes scored (for comparison).
    #[arg(long)]
    full_batch: bool,
    /// One JSON line of results instead of text.
    #[arg(long)]
    json: bool,
}

/// A loader that counts the nodes of the batches it hands out.
struct Counting<'a> {
    inner: Box<dyn Loader<SampledSubgraph> + 'a>,
    nodes: Cell<usize>,
}

impl Loader<SampledSubgraph> for Counting<'_> {
    fn num_batches(&self) -> usize {
        self.inner.num_batches()
    }

    fn epoch(&mut self, epoch: usize) -> Box<dyn Iterator<Item = Result<SampledSubgraph>> + '_> {
        let nodes = &self.nodes;
        Box::new(self.inner.epoch(epoch).inspect(move |b| {
            if let Ok(b) = b {
                nodes.set(nodes.get() + b.num_nodes());
            }
        }))
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    let t = Instant::now();
    let g = generate(&GeneratorConfig {
        num_nodes: args.nodes,
        degree: args.degree,
        classes: args.classes,
        feature_dim: args.features,
        feature_noise: args.noise,
        homophily: args.homophily,
        seed: args.seed,
        ..GeneratorConfig::default()
    })?;
    // Messages flow both ways, as in an undirected graph.
    let both: Vec<(u32, u32)> = g
        .edges
        .iter()
        .flat_map(|&(s, d)| [(s, d), (d, s)])
        .collect();
    let sampler = NeighborSampler::from_edges(g.num_nodes, &both)?;
    let n = g.num_nodes;
    let graph = if args.full_batch {
        let pairs: Vec<(usize, usize)> = both
            .iter()
            .map(|&(s, d)| (s as usize, d as usize))
            .collect();
        Some(Graph::from_edges(n, &pairs)?)
    } else {
        None
    };
    drop(both);
    let generate_s = t.elapsed().as_secs_f64();

    // 60 / 20 / 20 random split of the nodes.
    let mut order: Vec<usize> = (0..g.num_nodes).collect();
    order.shuffle(&mut StdRng::seed_from_u64(args.seed));
    let (n_train, n_val) = (g.num_nodes * 6 / 10, g.num_nodes * 2 / 10);
    let (train, rest) = order.split_at(n_train);
    let (val, test) = rest.split_at(n_val);

    let loader = |seeds: &[usize], shuffle: bool, seed: u64| {
        let cfg = NeighborLoaderConfig {
            sampling: SamplingConfig::new(args.fanouts.clone())?,
            batch_size: args.batch_size,
            shuffle,
            seed,
        };
        NeighborLoader::new(&sampler, seeds.to_vec(), cfg)
    };
    let (inner, val_batches, test_batches): (Box<dyn Loader<SampledSubgraph>>, _, _) = match &graph
    {
        Some(graph) => (
            Box::new(whole(graph, train)?),
            whole(graph, val)?.batches(0)?,
            whole(graph, test)?.batches(0)?,
        ),
        None => (
            Box::new(loader(train, true, args.seed)?),
            loader(val, false, args.seed + 1)?.sample_epoch(0)?,
            loader(test, false, args.seed + 2)?.sample_epoch(0)?,
        ),
    };
    let mut train_loader = Counting {
        inner,
        nodes: Cell::new(0),
    };

    let cpu = Cpu::<f32>::new();
    let mut rng = StdRng::seed_from_u64(args.seed);
    let (f, h, c) = (args.features, args.hidden, args.classes);
    let mut model = match args.model {
        Model::Gcn => NodeClassifier::gcn(&cpu, f, h, c, 0.5, &mut rng)?,
        Model::Sage => NodeClassifier::new(
            vec![
                Box::new(SageConv::new(&cpu, f, h, &mut rng)?),
                Box::new(SageConv::new(&cpu, h, c, &mut rng)?),
            ],
            0.5,
            Activation::Relu,
        )?,
    };
    let cfg = TrainConfig {
        epochs: args.epochs,
        lr: args.lr,
        weight_decay: 0.0,
        seed: args.seed,
        quiet: args.json,
        ..TrainConfig::default()
    };
    let labels = g.labels.clone();
    let (fit, test_acc) = if let Some(path) = &args.features_file {
        write_npy(path, g.features.view())?;
        drop(g);
        let x = NpyMatrix::open(path)?;
        train_and_test(
            &mut model,
            &x,
            &labels,
            args.classes,
            cfg,
            &mut train_loader,
            &val_batches,
            &test_batches,
        )?
    } else {
        train_and_test(
            &mut model,
            &g.features,
            &labels,
            args.classes,
            cfg,
            &mut train_loader,
            &val_batches,
            &test_batches,
        )?
    };

    let train_s: f64 = fit.epoch_secs.iter().sum();
    let epoch_s = train_s / fit.epoch_secs.len() as f64;
    let nodes_per_s = train_loader.nodes.get() as f64 / train_s;
    // The steps (gather, forward, backward, update); the rest of an epoch is sampling.
    let step_s = fit.step_ms.iter().sum::<f64>() / 1e3 / fit.epoch_secs.len() as f64;
    let peak_rss_mb = hdgcn::util::peak_rss_mb();
    if args.json {
        let out = serde_json::json!({
            "model": format!("{:?}", args.model).to_lowercase(), "nodes": args.nodes, "degree": args.degree, "features": args.features,
            "fanouts": args.fanouts, "batch_size": args.batch_size, "epochs": fit.epochs_run,
            "from_file": args.features_file.is_some(), "full_batch": args.full_batch, "threads": rayon::current_num_threads(),
            "generate_s": generate_s, "epoch_s": epoch_s, "step_s_per_epoch": step_s, "sampled_nodes_per_s": nodes_per_s,
            "val_acc": fit.val_acc, "test_acc": test_acc, "peak_rss_mb": peak_rss_mb,
        });
        println!("{out}");
    } else {
        for r in &fit.history {
            println!(
                "Epoch {:02}: loss {:.4}, val {:.4}",
                r.epoch + 1,
                r.train_loss,
                r.val_acc
            );
        }
        println!(
            "epoch {epoch_s:.2} s ({step_s:.2} s in steps), {nodes_per_s:.0} sampled nodes/s, val {:.4}, test {test_acc:.4}, peak RSS {:.0} MB",
            fit.val_acc,
            peak_rss_mb.unwrap_or(f64::NAN)
        );
    }
    Ok(())
}

/// Full-batch as a cluster batch: one part, the whole graph, `nodes` scored.
fn whole<'g>(graph: &'g Graph, nodes: &[usize]) -> Result<ClusterLoader<'g>> {
    let n = graph.num_nodes();
    let mut scored = vec![false; n];
    nodes.iter().for_each(|&v| scored[v] = true);
    let cfg = ClusterLoaderConfig {
        clusters_per_batch: 1,
        shuffle: false,
        seed: 0,
    };
    ClusterLoader::new(graph, &vec![0; n], 1, &scored, cfg)
}

/// Trains on the sampled batches, keeps the best validation epoch and
/// returns the fit and the test accuracy there.
#[allow(clippy::too_many_arguments)]
fn train_and_test<S: FeatureStore>(
    model: &mut NodeClassifier<Cpu<f32>>,
    features: &S,
    labels: &[usize],
    classes: usize,
    cfg: TrainConfig,
    train: &mut Counting<'_>,
    val: &[SampledSubgraph],
    test: &[SampledSubgraph],
) -> Result<(hdgcn::train::FitReport, f64)> {
    let mut step = SampledNodeStep::new(model, features, labels, classes)?;
    let fit = Trainer::new(cfg)?.fit(&mut step, train, val)?;
    let test_acc = evaluate(&mut step, test)?.accuracy;
    Ok((fit, test_acc))
}
