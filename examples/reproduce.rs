//! Runs experiments described by TOML files: one file, or every `*.toml`
//! under a folder (recursively, in path order), and prints one JSON record
//! per file.
//!
//! ```text
//! cargo run --release --example reproduce -- configs/planetoid --json > records.jsonl
//! cargo run --release --example results_table -- records.jsonl
//! ```
//!
//! A file names its runner (`runner = "planetoid"`,
//! `runner = "text_classification"` or `runner = "absa"`); its other keys are that runner's
//! settings, exactly as its `--config FILE` reads them, and an optional
//! `[reference]` table (`accuracy`, `source`) holds the published number
//! the run is compared with. Every file is read and checked before the
//! first run starts: a bad file stops everything with an error naming the
//! file, the key and the problem.

// The runners' shared code; reproduce uses their settings and run functions only.
#[allow(dead_code)]
mod common;
#[path = "common/grid.rs"]
mod grid;

use std::path::{Path, PathBuf};

use clap::Parser;
use common::absa::{AbsaSettings, run_absa};
use common::node::{NodeSettings, run_node};
use common::text::{TextSettings, run_text};
use grid::{GridAxis, grid_points, parse_grid_axis, set_dotted};
use hdgcn::Error;
use hdgcn::backend::{Cpu, Device};

#[derive(Parser, Debug)]
#[command(about = "Run the experiments of TOML config files and print their records")]
struct Args {
    /// A config file, or a folder whose `*.toml` files (recursively) are run.
    path: PathBuf,
    /// Override every file's number of runs.
    #[arg(long, value_parser = common::parse_runs)]
    runs: Option<usize>,
    /// Folder holding the benchmark data (default: $HDGCN_DATA, then ../shared/data).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Print one JSON record per file on stdout (one line each; the
    /// summary lines go to stderr).
    #[arg(long)]
    json: bool,
    /// Hide progress bars.
    #[arg(long)]
    quiet: bool,
    /// Run every point of a grid and report validation accuracy only
    /// (`KEY=V1,V2,..`, repeatable; values in order of preference).
    #[arg(long, value_parser = parse_grid_axis)]
    grid: Vec<GridAxis>,
}

/// One experiment, read and checked.
enum Experiment {
    Node(Box<NodeSettings>),
    Text(Box<TextSettings>),
    Absa(Box<AbsaSettings>),
}

/// Every `*.toml` file at `path` (a file, or a folder searched
/// recursively), sorted.
fn config_files(path: &Path) -> hdgcn::Result<Vec<PathBuf>> {
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Error::MissingFile(path.to_path_buf()),
        _ => Error::Io {
            path: path.to_path_buf(),
            source: e,
        },
    })?;
    if meta.is_file() {
        return Ok(vec![path.to_path_buf()]);
    }
    let mut out = Vec::new();
    let mut stack = vec![path.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| Error::Io {
            path: dir.clone(),
            source: e,
        })?;
        for entry in entries {
            let p = entry
                .map_err(|e| Error::Io {
                    path: dir.clone(),
                    source: e,
                })?
                .path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "toml") {
                out.push(p);
            }
        }
    }
    out.sort();
    if out.is_empty() {
        return Err(Error::InvalidConfig(format!(
            "{}: no *.toml config file in this folder",
            path.display()
        )));
    }
    Ok(out)
}

/// Reads `path`: its `runner` key picks the settings type.
fn read(path: &Path, runs: Option<usize>) -> hdgcn::Result<Experiment> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::Io {
        path: path.to_path_buf(),
        source: e,
    })?;
    let table: toml::Table = toml::from_str(&text)
        .map_err(|e| Error::InvalidConfig(format!("{}: {}", path.display(), e.message())))?;
    let runner = table.get("runner").and_then(|v| v.as_str());
    let mut exp = match runner {
        Some("planetoid") => Experiment::Node(Box::new(NodeSettings::from_toml_file(path)?)),
        Some("text_classification") => {
            Experiment::Text(Box::new(TextSettings::from_toml_file(path)?))
        }
        Some("absa") => Experiment::Absa(Box::new(AbsaSettings::from_toml_file(path)?)),
        Some(other) => {
            return Err(Error::InvalidConfig(format!(
                "{}: key `runner`: unknown runner {other:?} (planetoid | text_classification | absa)",
                path.display()
            )));
        }
        None => {
            return Err(Error::InvalidConfig(format!(
                "{}: key `runner` is missing: say which runner the file is for \
                 (planetoid | text_classification | absa)",
                path.display()
            )));
        }
    };
    if let Some(n) = runs {
        match &mut exp {
            Experiment::Node(s) => s.runs = n,
            Experiment::Text(s) => s.runs = n,
            Experiment::Absa(s) => s.runs = n,
        }
    }
    Ok(exp)
}

fn main() {
    let args = Args::parse();
    common::configure_malloc(common::Malloc::Reuse);
    if let Err(e) = run(&args) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> hdgcn::Result<()> {
    if !args.grid.is_empty() {
        return run_grid(args);
    }
    let files = config_files(&args.path)?;
    // Every file is checked before the first run.
    let experiments = files
        .iter()
        .map(|f| read(f, args.runs))
        .collect::<hdgcn::Result<Vec<_>>>()?;
    let cpu = Cpu::<f32>::new();
    let data_dir = args.data_dir.as_deref();
    for (file, exp) in files.iter().zip(&experiments) {
        eprintln!("== {}", file.display());
        let (report, reference) = run_one(exp, &cpu, data_dir, args.quiet)?;
        // With --json, stdout holds only the records (one JSON line each).
        if args.json {
            eprintln!("{}: {}", file.display(), report.line);
            println!("{}", record(file, &report.json, reference));
        } else {
            println!("{}: {}", file.display(), report.line);
        }
    }
    Ok(())
}

/// Runs one experiment: its report and its reference.
fn run_one<'a>(
    exp: &'a Experiment,
    cpu: &Cpu<f32>,
    data_dir: Option<&Path>,
    quiet: bool,
) -> hdgcn::Result<(common::Report, &'a Option<common::Reference>)> {
    Ok(match exp {
        Experiment::Node(s) => (
            run_node(s, cpu, Device::Cpu, data_dir, quiet)?,
            &s.reference,
        ),
        Experiment::Text(s) => (
            run_text(s, cpu, Device::Cpu, data_dir, quiet)?,
            &s.reference,
        ),
        Experiment::Absa(s) => (
            run_absa(s, cpu, Device::Cpu, data_dir, quiet)?,
            &s.reference,
        ),
    })
}

/// `--grid`: every file at every point, validation numbers only.
fn run_grid(args: &Args) -> hdgcn::Result<()> {
    let files = config_files(&args.path)?;
    let points = grid_points(&args.grid);
    let scratch = std::env::temp_dir().join(format!("hdgcn-grid-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).map_err(|e| Error::Io {
        path: scratch.clone(),
        source: e,
    })?;
    // Every point of every file is read and checked before the first run.
    let mut plan = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).map_err(|e| Error::Io {
            path: file.clone(),
            source: e,
        })?;
        let base: toml::Table = toml::from_str(&text)
            .map_err(|e| Error::InvalidConfig(format!("{}: {}", file.display(), e.message())))?;
        let mut exps = Vec::new();
        for (i, point) in points.iter().enumerate() {
            let mut table = base.clone();
            for (k, v) in point {
                set_dotted(&mut table, k, v.clone())?;
            }
            let stem = file.file_stem().unwrap_or_default().to_string_lossy();
            let tmp = scratch.join(format!("{stem}.grid-{i}.toml"));
            let body = toml::to_string(&table).map_err(|e| Error::InvalidConfig(e.to_string()))?;
            std::fs::write(&tmp, body).map_err(|e| Error::Io {
                path: tmp.clone(),
                source: e,
            })?;
            let exp = read(&tmp, args.runs).map_err(|e| {
                Error::InvalidConfig(format!(
                    "{} at grid point {}: {e}",
                    file.display(),
                    show(point)
                ))
            })?;
            exps.push(exp);
        }
        plan.push((file, exps));
    }
    let _ = std::fs::remove_dir_all(&scratch);
    let cpu = Cpu::<f32>::new();
    for (file, exps) in plan {
        let mut results = Vec::new();
        for (point, exp) in points.iter().zip(&exps) {
            eprintln!("== {} at {}", file.display(), show(point));
            // Quiet: the runners' per-run lines name test accuracy.
            let (report, _) = run_one(exp, &cpu, args.data_dir.as_deref(), true)?;
            let rec = grid_record(file, point, &report.json);
            eprintln!(
                "{} at {}: val {:.2} ± {:.2} over {} runs",
                file.display(),
                show(point),
                rec["val_acc_mean"].as_f64().unwrap_or(f64::NAN),
                rec["val_acc_std"].as_f64().unwrap_or(f64::NAN),
                rec["runs"]
            );
            if args.json {
                println!("{rec}");
            }
            results.push(rec);
        }
        let best = choose(&results);
        let chosen = serde_json::json!({
            "config": file.display().to_string(),
            "chosen": results[best]["point"],
            "val_acc_mean": results[best]["val_acc_mean"],
            "val_acc_std": results[best]["val_acc_std"],
            "rule": "highest val_acc_mean; within 0.01 points the values listed first",
        });
        eprintln!("{}: chosen {}", file.display(), show(&points[best]));
        if args.json {
            println!("{chosen}");
        }
    }
    Ok(())
}

/// `train.lr = 0.001, dropout = 0.5`.
fn show(point: &[(String, toml::Value)]) -> String {
    point
        .iter()
        .map(|(k, v)| format!("{k} = {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The record of one grid point: validation numbers and the report with
/// every test field removed.
fn grid_record(
    file: &Path,
    point: &[(String, toml::Value)],
    report: &serde_json::Value,
) -> serde_json::Value {
    let mut report = report.clone();
    if let Some(obj) = report.as_object_mut() {
        obj.retain(|k, _| !k.contains("test"));
    }
    let val: Vec<f64> = report["val_accs"]
        .as_array()
        .map(|a| a.iter().filter_map(|v| v.as_f64()).collect())
        .unwrap_or_default();
    let point: serde_json::Map<String, serde_json::Value> = point
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::to_value(v).unwrap_or_default()))
        .collect();
    serde_json::json!({
        "config": file.display().to_string(),
        "point": point,
        "runs": report.get("runs").cloned().unwrap_or_default(),
        "val_acc_mean": report.get("val_acc_mean").cloned().unwrap_or_default(),
        "val_acc_std": std_dev(&val),
        "val_accs": val,
        "report": report,
    })
}

/// Population standard deviation (0 for fewer than two values).
fn std_dev(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let m = v.iter().sum::<f64>() / v.len() as f64;
    (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / v.len() as f64).sqrt()
}

/// The index of the chosen point: the highest `val_acc_mean`; the first
/// listed among those within 0.01 percentage points of it.
fn choose(results: &[serde_json::Value]) -> usize {
    let mean = |r: &serde_json::Value| r["val_acc_mean"].as_f64().unwrap_or(f64::NEG_INFINITY);
    let best = results.iter().map(mean).fold(f64::NEG_INFINITY, f64::max);
    results
        .iter()
        .position(|r| mean(r) >= best - 0.01)
        .unwrap_or(0)
}

/// The record of one file: the fields the results tables read, then the
/// runner's whole report.
fn record(
    file: &Path,
    report: &serde_json::Value,
    reference: &Option<common::Reference>,
) -> serde_json::Value {
    let field = |k: &str| report.get(k).cloned().unwrap_or(serde_json::Value::Null);
    let config = file.display().to_string();
    serde_json::json!({
        "config": config,
        "command": format!("cargo run --release --example reproduce -- {config}"),
        "dataset": field("dataset"),
        "model": field("model"),
        "runs": field("runs"),
        "test_acc_mean": field("test_acc_mean"),
        "test_acc_std": field("test_acc_std"),
        "val_acc_mean": field("val_acc_mean"),
        "test_f1_mean": field("test_f1_mean"),
        "test_accs": field("test_accs"),
        "val_accs": field("val_accs"),
        "reference": reference,
        "report": report,
    })
}

#[cfg(test)]
#[path = "common/reproduce_tests.rs"]
mod tests;
