//! Is HDGCN's multi-hop mechanism alive? Test accuracy of HDGCN and
//! HDGCN-static against the Chebyshev order K, and the trained dynamic
//! model's attention entropies per HD unit (issue 67, item 6).
//!
//! ```text
//! cargo run --release --example k_sweep -- configs/paper/table5-cora-hdgcn.toml \
//!     --k 2,4,6,8,10 --plot docs/img/k_sweep_cora.png --json > docs/records/k_sweep/cora.jsonl
//! cargo run --release --example k_sweep -- --from docs/records/k_sweep/cora.jsonl --plot out.png
//! ```
//!
//! The config is a `planetoid` or `text_classification` file of either
//! variant; every other setting stays as the file has it, so each (variant,
//! K) point is the file with `model` and `k` replaced. For each point the
//! runner trains its runs and reports test and validation accuracy (mean ±
//! std) and, for the dynamic model, `attention_entropy`: per HD unit the
//! normalised row entropy of `A_f` and `A_b` (1 = uniform) of the model
//! the run selected, on the whole graph (nodes) or over the test documents
//! (text), averaged over the runs. With `--json` every point is one JSON
//! line on stdout. This is an analysis of trained models, not a model
//! choice: nothing here feeds back into the configs.
//!
//! `--plot FILE` draws two panels: test accuracy against K for both
//! variants (mean ± std over the runs), and the dynamic model's distance
//! from uniform, `1 - entropy` on a log axis (floored at 1e-9, `f32`
//! rounding), of `A_b` (solid) and `A_f` (dashed) per unit, one line per K. `--from
//! RECORDS` redraws the plot from such JSON lines without training.

#[allow(dead_code)]
mod common;
#[path = "common/font.rs"]
mod font;
#[path = "common/k_sweep_plot.rs"]
mod plot;

use std::path::{Path, PathBuf};

use clap::Parser;
use common::ModelKind;
use common::node::{NodeSettings, run_node};
use common::text::{TextSettings, run_text};
use hdgcn::backend::{Cpu, Device};
use hdgcn::{Error, Result};

#[derive(Parser, Debug)]
#[command(
    about = "Test accuracy against K for HDGCN and HDGCN-static, and the attention entropies"
)]
struct Args {
    /// A `planetoid` or `text_classification` config of hdgcn or hdgcn-static.
    config: Option<PathBuf>,
    /// The Chebyshev orders (even), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "2,4,6,8,10")]
    k: Vec<usize>,
    /// Override the config's number of runs.
    #[arg(long, value_parser = common::parse_runs)]
    runs: Option<usize>,
    /// Override the config's epoch budget (for quick checks).
    #[arg(long)]
    epochs: Option<usize>,
    /// Folder holding the benchmark data (default: $HDGCN_DATA, then ./data).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Draw the plot (PNG) here.
    #[arg(long)]
    plot: Option<PathBuf>,
    /// Redraw from these JSON records instead of training.
    #[arg(long, conflicts_with = "config")]
    from: Option<PathBuf>,
    /// Title of the plot (default: the dataset's name).
    #[arg(long)]
    title: Option<String>,
    /// Print one JSON record per point on stdout.
    #[arg(long)]
    json: bool,
    /// Hide progress bars and per-run lines.
    #[arg(long)]
    quiet: bool,
}

/// The settings of one config file, of either runner.
#[derive(Debug, Clone)]
enum Settings {
    Node(Box<NodeSettings>),
    Text(Box<TextSettings>),
}

impl Settings {
    fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        let table: toml::Table = toml::from_str(&text)
            .map_err(|e| Error::InvalidConfig(format!("{}: {}", path.display(), e.message())))?;
        let s = match table.get("runner").and_then(|v| v.as_str()) {
            Some("planetoid") => Settings::Node(Box::new(NodeSettings::from_toml_file(path)?)),
            Some("text_classification") => {
                Settings::Text(Box::new(TextSettings::from_toml_file(path)?))
            }
            other => {
                return Err(Error::InvalidConfig(format!(
                    "{}: key `runner`: {other:?}; k_sweep runs planetoid or text_classification files",
                    path.display()
                )));
            }
        };
        if !matches!(s.model(), ModelKind::Hdgcn | ModelKind::HdgcnStatic) {
            return Err(Error::InvalidConfig(format!(
                "{}: key `model`: k_sweep compares hdgcn and hdgcn-static, not {}",
                path.display(),
                common::flag_name(&s.model())
            )));
        }
        Ok(s)
    }

    fn model(&self) -> ModelKind {
        match self {
            Settings::Node(s) => s.model,
            Settings::Text(s) => s.model,
        }
    }

    /// This file at one point: `model`, `k` and the overrides set.
    fn at(&self, model: ModelKind, k: usize, args: &Args) -> Self {
        let mut s = self.clone();
        match &mut s {
            Settings::Node(n) => {
                n.model = model;
                n.k = Some(k);
                if let Some(r) = args.runs {
                    n.runs = r;
                }
                if let Some(e) = args.epochs {
                    n.set_epochs(e);
                }
            }
            Settings::Text(t) => {
                t.model = model;
                t.k = Some(k);
                if let Some(r) = args.runs {
                    t.runs = r;
                }
                if let Some(e) = args.epochs {
                    t.train.epochs = e;
                }
            }
        }
        s
    }

    fn run(&self, data_dir: Option<&Path>, quiet: bool) -> Result<common::Report> {
        let cpu = Cpu::<f32>::new();
        match self {
            Settings::Node(s) => run_node(s, &cpu, Device::Cpu, data_dir, quiet),
            Settings::Text(s) => run_text(s, &cpu, Device::Cpu, data_dir, quiet),
        }
    }
}

/// One (variant, K) point of the sweep, as its JSON line holds it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
struct Point {
    config: String,
    dataset: String,
    model: String,
    k: usize,
    runs: usize,
    test_acc_mean: f64,
    test_acc_std: f64,
    val_acc_mean: f64,
    test_accs: Vec<f64>,
    attention_entropy: serde_json::Value,
}

fn main() {
    let args = Args::parse();
    common::configure_malloc(common::Malloc::Reuse);
    if let Err(e) = run(&args) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> Result<Vec<Point>> {
    let points = match (&args.from, &args.config) {
        (Some(records), _) => read_points(records)?,
        (None, Some(config)) => sweep(config, args)?,
        (None, None) => {
            return Err(Error::InvalidConfig(
                "give a config file to sweep, or --from RECORDS to redraw".into(),
            ));
        }
    };
    if let Some(png) = &args.plot {
        let title = args
            .title
            .clone()
            .or_else(|| points.first().map(|p| p.dataset.clone()))
            .unwrap_or_default();
        plot::plot(png, &points, &title)?;
        eprintln!("wrote {}", png.display());
    }
    Ok(points)
}

/// Trains every point and prints its line.
fn sweep(config: &Path, args: &Args) -> Result<Vec<Point>> {
    if let Some(&k) = args.k.iter().find(|&&k| k < 2 || k % 2 == 1) {
        return Err(Error::InvalidConfig(format!(
            "--k {k}: HDGCN's order is even and at least 2"
        )));
    }
    let base = Settings::read(config)?;
    // Every point is checked before the first one trains.
    let mut plan = Vec::new();
    for model in [ModelKind::Hdgcn, ModelKind::HdgcnStatic] {
        for &k in &args.k {
            let s = base.at(model, k, args);
            match &s {
                Settings::Node(n) => n.validate()?,
                Settings::Text(t) => t.validate()?,
            }
            plan.push(s);
        }
    }
    let mut points = Vec::new();
    for s in &plan {
        let report = s.run(args.data_dir.as_deref(), args.quiet)?;
        let j = &report.json;
        let num = |key: &str| {
            j.get(key)
                .and_then(serde_json::Value::as_f64)
                .unwrap_or(f64::NAN)
        };
        let p = Point {
            config: config.display().to_string(),
            dataset: j["dataset"].as_str().unwrap_or_default().to_string(),
            model: j["model"].as_str().unwrap_or_default().to_string(),
            k: j["k"].as_u64().unwrap_or_default() as usize,
            runs: j["runs"].as_u64().unwrap_or_default() as usize,
            test_acc_mean: num("test_acc_mean"),
            test_acc_std: num("test_acc_std"),
            val_acc_mean: num("val_acc_mean"),
            test_accs: serde_json::from_value(j["test_accs"].clone()).unwrap_or_default(),
            attention_entropy: j["attention_entropy"].clone(),
        };
        eprintln!("k = {:2} {}: {}", p.k, p.model, report.line);
        if args.json {
            println!(
                "{}",
                serde_json::to_string(&p).map_err(|e| Error::InvalidConfig(e.to_string()))?
            );
        }
        points.push(p);
    }
    Ok(points)
}

fn read_points(path: &Path) -> Result<Vec<Point>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| {
                Error::InvalidConfig(format!("{} line {}: {e}", path.display(), i + 1))
            })
        })
        .collect()
}

#[cfg(test)]
#[path = "common/k_sweep_tests.rs"]
mod tests;
