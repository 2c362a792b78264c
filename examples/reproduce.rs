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
        let (report, reference) = match exp {
            Experiment::Node(s) => (
                run_node(s, &cpu, Device::Cpu, data_dir, args.quiet)?,
                &s.reference,
            ),
            Experiment::Text(s) => (
                run_text(s, &cpu, Device::Cpu, data_dir, args.quiet)?,
                &s.reference,
            ),
            Experiment::Absa(s) => (
                run_absa(s, &cpu, Device::Cpu, data_dir, args.quiet)?,
                &s.reference,
            ),
        };
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
        })
        .unwrap_err();
        assert!(matches!(err, Error::InvalidConfig(_)), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(matches!(
            config_files(&dir).unwrap_err(),
            Error::MissingFile(_)
        ));
    }
}
