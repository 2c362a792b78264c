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

use std::path::{Path, PathBuf};

use clap::Parser;
use common::ModelKind;
use common::node::{NodeSettings, run_node};
use common::text::{TextSettings, run_text};
use hdgcn::backend::{Cpu, Device};
use hdgcn::{Error, Result};
use plotters::prelude::*;

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
        plot(png, &points, &title)?;
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

/// Per unit `(a_f, a_b)` of a point's `attention_entropy` (empty when null).
fn entropies(p: &Point) -> Vec<(f64, f64)> {
    p.attention_entropy
        .as_array()
        .map(|units| {
            units
                .iter()
                .map(|u| {
                    let f = |key: &str| u[key].as_f64().unwrap_or(f64::NAN);
                    (f("a_f"), f("a_b"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Where the entropy panel's axis ends: distances from uniform below it
/// are `f32` rounding of a uniform map and are drawn on it.
const DEFICIT_FLOOR: f64 = 1e-9;

/// `1 - entropy`, at least [`DEFICIT_FLOOR`].
fn deficit(entropy: f64) -> f64 {
    (1.0 - entropy).max(DEFICIT_FLOOR)
}

fn plot_error(e: impl std::fmt::Display) -> Error {
    Error::InvalidConfig(format!("drawing the plot: {e}"))
}

/// Two panels: accuracy against K, and entropy per unit.
fn plot(path: &Path, points: &[Point], title: &str) -> Result<()> {
    if points.is_empty() {
        return Err(Error::Empty("no sweep points to plot".into()));
    }
    let labels = font::register_font(None);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    // Drawn to a temporary file beside the target, then renamed.
    let tmp = path.with_extension(format!("{}.tmp.png", std::process::id()));
    {
        let root = BitMapBackend::new(&tmp, (1200, 480)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_error)?;
        let (left, right) = root.split_horizontally(600);
        let font = |size: u32| ("sans-serif", size).into_font();
        let ks: Vec<usize> = points.iter().map(|p| p.k).collect();
        let (kmin, kmax) = (
            *ks.iter().min().unwrap_or(&2) as f64,
            *ks.iter().max().unwrap_or(&10) as f64,
        );
        let lo = points
            .iter()
            .map(|p| p.test_acc_mean - p.test_acc_std)
            .fold(f64::INFINITY, f64::min);
        let hi = points
            .iter()
            .map(|p| p.test_acc_mean + p.test_acc_std)
            .fold(f64::NEG_INFINITY, f64::max);
        let pad = ((hi - lo) * 0.1).max(0.5);
        let mut chart = ChartBuilder::on(&left)
            .margin(20)
            .caption(
                if labels {
                    format!("{title}: test accuracy against K")
                } else {
                    String::new()
                },
                font(20),
            )
            .x_label_area_size(if labels { 40 } else { 0 })
            .y_label_area_size(if labels { 50 } else { 0 })
            .build_cartesian_2d((kmin - 0.5)..(kmax + 0.5), (lo - pad)..(hi + pad))
            .map_err(plot_error)?;
        let mut mesh = chart.configure_mesh();
        mesh.x_desc("K")
            .y_desc("test accuracy (%)")
            .x_labels((kmax - kmin) as usize + 2)
            .x_label_formatter(&|x| format!("{x:.0}"));
        if !labels {
            mesh.disable_x_axis().disable_y_axis();
        }
        mesh.draw().map_err(plot_error)?;
        for (model, colour) in [("hdgcn", RED), ("hdgcn-static", BLUE)] {
            let mut line: Vec<&Point> = points.iter().filter(|p| p.model == model).collect();
            line.sort_by_key(|p| p.k);
            let xy: Vec<(f64, f64)> = line.iter().map(|p| (p.k as f64, p.test_acc_mean)).collect();
            let series = chart
                .draw_series(std::iter::once(PathElement::new(
                    xy.clone(),
                    colour.stroke_width(2),
                )))
                .map_err(plot_error)?;
            if labels {
                series.label(model).legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                });
            }
            chart
                .draw_series(xy.iter().map(|&c| Circle::new(c, 4, colour.filled())))
                .map_err(plot_error)?;
            chart
                .draw_series(line.iter().map(|p| {
                    let x = p.k as f64;
                    PathElement::new(
                        vec![
                            (x, p.test_acc_mean - p.test_acc_std),
                            (x, p.test_acc_mean + p.test_acc_std),
                        ],
                        colour.stroke_width(1),
                    )
                }))
                .map_err(plot_error)?;
        }
        if labels {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(plot_error)?;
        }

        let dynamic: Vec<&Point> = points
            .iter()
            .filter(|p| p.model == "hdgcn" && !entropies(p).is_empty())
            .collect();
        let units = dynamic
            .iter()
            .map(|p| entropies(p).len())
            .max()
            .unwrap_or(1);
        // Drawn as the distance from uniform, 1 - entropy, on a log scale:
        // trained maps sit anywhere from 1e-1 to f32 rounding (1e-7 and
        // below), which a linear axis near 1 cannot tell apart.
        let e_hi = dynamic
            .iter()
            .flat_map(|p| entropies(p).into_iter().flat_map(|(f, b)| [f, b]))
            .filter(|v| v.is_finite())
            .map(deficit)
            .fold(DEFICIT_FLOOR * 10.0, f64::max);
        let mut chart = ChartBuilder::on(&right)
            .margin(20)
            .caption(
                if labels {
                    "HDGCN: 1 - entropy of A_b (solid), A_f (dashed)".to_string()
                } else {
                    String::new()
                },
                font(20),
            )
            .x_label_area_size(if labels { 40 } else { 0 })
            .y_label_area_size(if labels { 60 } else { 0 })
            .build_cartesian_2d(
                0.5..(units as f64 + 0.5),
                (DEFICIT_FLOOR * 0.5..(e_hi * 2.0).min(1.0)).log_scale(),
            )
            .map_err(plot_error)?;
        let mut mesh = chart.configure_mesh();
        mesh.x_desc("HD unit")
            .y_desc("1 - normalised row entropy")
            .x_labels(units + 2)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y:.0e}"));
        if !labels {
            mesh.disable_x_axis().disable_y_axis();
        }
        mesh.draw().map_err(plot_error)?;
        for (i, p) in dynamic.iter().enumerate() {
            let colour = Palette99::pick(i).to_rgba();
            let e = entropies(p);
            let ab: Vec<(f64, f64)> = e
                .iter()
                .enumerate()
                .map(|(u, v)| (u as f64 + 1.0, deficit(v.1)))
                .collect();
            let af: Vec<(f64, f64)> = e
                .iter()
                .enumerate()
                .map(|(u, v)| (u as f64 + 1.0, deficit(v.0)))
                .collect();
            let series = chart
                .draw_series(std::iter::once(PathElement::new(
                    ab.clone(),
                    colour.stroke_width(2),
                )))
                .map_err(plot_error)?;
            if labels {
                series.label(format!("K = {}", p.k)).legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                });
            }
            chart
                .draw_series(ab.iter().map(|&c| Circle::new(c, 3, colour.filled())))
                .map_err(plot_error)?;
            // Dashes: every other segment of the A_f line, cut in eight.
            let dashes = af.windows(2).flat_map(|w| {
                let (a, b) = (w[0], w[1]);
                (0..8).step_by(2).map(move |j| {
                    let t0 = j as f64 / 8.0;
                    let t1 = (j + 1) as f64 / 8.0;
                    let at = |t: f64| (a.0 + t * (b.0 - a.0), a.1 + t * (b.1 - a.1));
                    PathElement::new(vec![at(t0), at(t1)], colour.stroke_width(2))
                })
            });
            chart.draw_series(dashes).map_err(plot_error)?;
            chart
                .draw_series(af.iter().map(|&c| Cross::new(c, 4, colour.stroke_width(2))))
                .map_err(plot_error)?;
        }
        if labels && !dynamic.is_empty() {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::MiddleLeft)
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(plot_error)?;
        }
        root.present().map_err(plot_error)?;
    }
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vendored Cora (data/planetoid).
    fn data() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("data")
    }

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("hdgcn-k-sweep-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn a_short_sweep_reports_both_variants_the_dynamic_entropies_and_draws_the_plot() {
        let dir = scratch("cora");
        let config = dir.join("cora.toml");
        std::fs::write(
            &config,
            "runner = \"planetoid\"\ndataset = \"cora\"\nmodel = \"hdgcn-static\"\nhidden = 16\n\
             [train]\nlr = 0.01\nepochs = 3\n",
        )
        .unwrap();
        let png = dir.join("sweep.png");
        let data = data();
        let args = Args::parse_from([
            "k_sweep",
            config.to_str().unwrap(),
            "--k",
            "2,4",
            "--runs",
            "1",
            "--quiet",
            "--data-dir",
            data.to_str().unwrap(),
            "--plot",
            png.to_str().unwrap(),
        ]);
        let points = run(&args).unwrap();
        let got: Vec<(&str, usize)> = points.iter().map(|p| (p.model.as_str(), p.k)).collect();
        assert_eq!(
            got,
            [
                ("hdgcn", 2),
                ("hdgcn", 4),
                ("hdgcn-static", 2),
                ("hdgcn-static", 4)
            ]
        );
        for p in &points {
            assert!((0.0..=100.0).contains(&p.test_acc_mean), "{p:?}");
            let e = entropies(p);
            if p.model == "hdgcn" {
                // One entry per HD unit (K / 2), each a normalised entropy;
                // the maps are f32, so a near-uniform row can exceed 1 by
                // f32 rounding (about 1e-7).
                assert_eq!(e.len(), p.k / 2, "{p:?}");
                let unit = 0.0..=1.0 + 1e-6;
                for (f, b) in e {
                    assert!(unit.contains(&f) && unit.contains(&b), "{p:?}");
                }
                assert_eq!(p.attention_entropy[0]["graphs"], 1, "one graph, one run");
            } else {
                assert!(p.attention_entropy.is_null(), "{p:?}");
            }
        }
        let bytes = std::fs::read(&png).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");

        // Redrawn from the JSON lines, without training.
        let records = dir.join("points.jsonl");
        let lines: Vec<String> = points
            .iter()
            .map(|p| serde_json::to_string(p).unwrap())
            .collect();
        std::fs::write(&records, lines.join("\n")).unwrap();
        let png2 = dir.join("again.png");
        let again = Args::parse_from([
            "k_sweep",
            "--from",
            records.to_str().unwrap(),
            "--plot",
            png2.to_str().unwrap(),
        ]);
        assert_eq!(run(&again).unwrap(), points);
        assert!(png2.exists());
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn odd_orders_and_other_models_are_refused_by_name() {
        let dir = scratch("bad");
        let config = dir.join("gcn.toml");
        std::fs::write(&config, "runner = \"planetoid\"\nmodel = \"gcn\"\n").unwrap();
        let err = Settings::read(&config).unwrap_err().to_string();
        assert!(err.contains("`model`") && err.contains("gcn"), "{err}");
        let ok = dir.join("hd.toml");
        std::fs::write(&ok, "runner = \"planetoid\"\nmodel = \"hdgcn\"\n").unwrap();
        let args = Args::parse_from(["k_sweep", ok.to_str().unwrap(), "--k", "2,5"]);
        let err = run(&args).unwrap_err().to_string();
        assert!(err.contains("--k 5"), "{err}");
        let bad = dir.join("bad.jsonl");
        std::fs::write(&bad, "{\"config\": 1}\n").unwrap();
        let args = Args::parse_from(["k_sweep", "--from", bad.to_str().unwrap()]);
        let err = run(&args).unwrap_err().to_string();
        assert!(err.contains("line 1"), "{err}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
