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

use std::path::{Path, PathBuf};

use clap::Parser;
use common::absa::{AbsaSettings, run_absa};
use common::node::{NodeSettings, run_node};
use common::text::{TextSettings, run_text};
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

/// One axis of a `--grid`: a (possibly dotted) key and its values, in
/// order of preference.
#[derive(Debug, Clone)]
struct GridAxis {
    key: String,
    values: Vec<toml::Value>,
}

/// Parses `KEY=V1,V2,..`; each value is read as a TOML value (a bare word
/// that is not one is taken as a string).
fn parse_grid_axis(text: &str) -> Result<GridAxis, String> {
    let (key, values) = text
        .split_once('=')
        .ok_or_else(|| format!("--grid {text:?}: expected KEY=V1,V2,.."))?;
    let key = key.trim();
    if key.is_empty() || key.split('.').any(|k| k.trim().is_empty()) {
        return Err(format!("--grid {text:?}: empty key"));
    }
    let values = values
        .split(',')
        .map(|v| {
            let v = v.trim();
            if v.is_empty() {
                return Err(format!("--grid {text:?}: empty value"));
            }
            let doc: Result<toml::Table, _> = toml::from_str(&format!("v = {v}"));
            Ok(doc
                .ok()
                .and_then(|mut t| t.remove("v"))
                .unwrap_or_else(|| toml::Value::String(v.to_owned())))
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(GridAxis {
        key: key.to_owned(),
        values,
    })
}

/// Every point of the grid, in order of preference (the first axis
/// varies slowest).
fn grid_points(axes: &[GridAxis]) -> Vec<Vec<(String, toml::Value)>> {
    let mut points = vec![Vec::new()];
    for axis in axes {
        points = points
            .into_iter()
            .flat_map(|p: Vec<(String, toml::Value)>| {
                axis.values.iter().map(move |v| {
                    let mut q = p.clone();
                    q.push((axis.key.clone(), v.clone()));
                    q
                })
            })
            .collect();
    }
    points
}

/// `table` with the dotted `key` set to `value` (sub-tables made as needed).
fn set_dotted(table: &mut toml::Table, key: &str, value: toml::Value) -> hdgcn::Result<()> {
    let mut parts: Vec<&str> = key.split('.').map(str::trim).collect();
    let last = parts.pop().expect("split yields one part");
    let mut t = table;
    for part in parts {
        t = t
            .entry(part)
            .or_insert_with(|| toml::Value::Table(toml::Table::new()))
            .as_table_mut()
            .ok_or_else(|| {
                Error::InvalidConfig(format!("--grid {key}: `{part}` is not a table"))
            })?;
    }
    t.insert(last.to_owned(), value);
    Ok(())
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
mod tests {
    use super::*;

    fn configs_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("configs")
    }

    #[test]
    fn every_committed_config_reads_and_checks() {
        let files = config_files(&configs_dir()).unwrap();
        assert!(files.len() >= 4, "{files:?}");
        for f in &files {
            read(f, None).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        }
        assert!(
            files
                .iter()
                .any(|f| f.ends_with("paper/absa-lap14-hdgcn.toml"))
        );
    }

    /// Every row of configs/paper has both variants, and the two files
    /// differ only in `model` and `[reference]` (whatever their runner).
    #[test]
    fn the_two_variants_of_every_paper_row_share_every_setting_but_model() {
        let dir = configs_dir().join("paper");
        let table = |p: &Path| -> toml::Table {
            let mut t: toml::Table = toml::from_str(&std::fs::read_to_string(p).unwrap()).unwrap();
            t.remove("model");
            t.remove("reference");
            t
        };
        let mut rows = 0;
        for f in config_files(&dir).unwrap() {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            if let Some(row) = name.strip_suffix("-hdgcn.toml") {
                let static_file = dir.join(format!("{row}-hdgcn-static.toml"));
                assert!(static_file.exists(), "{name} has no static variant");
                assert_eq!(table(&f), table(&static_file), "{name}");
                rows += 1;
            }
        }
        // Table 1 (4 corpora), Table 3 (3 sets), Table 5 (3 graphs).
        assert_eq!(rows, 10);
    }

    #[test]
    fn a_bad_file_is_an_error_naming_the_file_and_the_key() {
        let dir = std::env::temp_dir().join(format!("reproduce_test_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let cases = [
            ("no_runner.toml", "dataset = \"cora\"\n", "`runner`"),
            (
                "bad_runner.toml",
                "runner = \"nope\"\ndataset = \"cora\"\n",
                "`runner`",
            ),
            (
                "unknown_key.toml",
                "runner = \"planetoid\"\ndataset = \"cora\"\nhiden = 16\n",
                "hiden",
            ),
            (
                "bad_train_key.toml",
                "runner = \"text_classification\"\n[train]\nlrr = 0.1\n",
                "lrr",
            ),
            (
                "bad_reference.toml",
                "runner = \"planetoid\"\n[reference]\naccuracy = \"high\"\nsource = \"x\"\n",
                "accuracy",
            ),
        ];
        for (name, text, key) in cases {
            let f = dir.join(name);
            std::fs::write(&f, text).unwrap();
            let err = read(&f, None)
                .err()
                .unwrap_or_else(|| panic!("{name} was accepted"));
            let msg = err.to_string();
            assert!(msg.contains(name), "{name}: {msg}");
            assert!(msg.contains(key), "{name}: {msg}");
        }
        // A folder is checked whole before anything runs: its first bad
        // file stops the run.
        let err = run(&Args {
            path: dir.clone(),
            runs: Some(1),
            data_dir: None,
            json: false,
            quiet: true,
            grid: Vec::new(),
        })
        .unwrap_err();
        assert!(matches!(err, Error::InvalidConfig(_)), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(matches!(
            config_files(&dir).unwrap_err(),
            Error::MissingFile(_)
        ));
    }

    #[test]
    fn a_grid_lists_points_in_order_of_preference() {
        let axes = [
            parse_grid_axis("train.lr=1e-5, 1e-3,1e-2").unwrap(),
            parse_grid_axis("dropout=0.5,0.3").unwrap(),
        ];
        let pts = grid_points(&axes);
        assert_eq!(pts.len(), 6);
        assert_eq!(show(&pts[0]), "train.lr = 0.00001, dropout = 0.5");
        assert_eq!(show(&pts[1]), "train.lr = 0.00001, dropout = 0.3");
        assert_eq!(show(&pts[5]), "train.lr = 0.01, dropout = 0.3");
        let words = parse_grid_axis("optimizer=adam,\"sgd\"").unwrap();
        assert_eq!(words.values, ["adam", "sgd"].map(toml::Value::from));
        for bad in ["lr", "=1", "lr=", "lr=1,,2", "train..lr=1"] {
            assert!(parse_grid_axis(bad).is_err(), "{bad}");
        }
        let mut t: toml::Table = toml::from_str("dropout = 0.1\n[train]\nlr = 1.0\n").unwrap();
        set_dotted(&mut t, "train.lr", 0.5.into()).unwrap();
        set_dotted(&mut t, "train.epochs", 3.into()).unwrap();
        assert_eq!(t["train"]["lr"].as_float(), Some(0.5));
        assert_eq!(t["train"]["epochs"].as_integer(), Some(3));
        assert!(set_dotted(&mut t, "dropout.x", 1.into()).is_err());
    }

    #[test]
    fn the_grid_chooses_by_validation_and_hides_the_test_split() {
        let report = serde_json::json!({
            "runs": 2, "val_acc_mean": 81.0, "val_accs": [80.0, 82.0],
            "test_acc_mean": 79.0, "test_accs": [78.0, 80.0], "test_acc_std": 1.0,
        });
        let point = vec![("dropout".to_string(), toml::Value::from(0.5))];
        let rec = grid_record(Path::new("a.toml"), &point, &report);
        assert!(!rec.to_string().contains("test"), "{rec}");
        assert_eq!(rec["val_acc_std"].as_f64(), Some(1.0));
        assert_eq!(rec["point"]["dropout"].as_f64(), Some(0.5));
        let at = |m: f64| serde_json::json!({ "val_acc_mean": m });
        // The best, or the first listed within 0.01 points of it.
        assert_eq!(choose(&[at(80.0), at(81.0), at(80.5)]), 1);
        assert_eq!(choose(&[at(80.0), at(80.995), at(81.0)]), 1);
        assert_eq!(choose(&[at(81.0), at(81.0)]), 0);
    }
}
