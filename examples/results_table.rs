//! Turns the JSON records of `reproduce --json` into the markdown tables
//! of `docs/results.md`: one table per config folder, one row per config
//! (the latest record of each), with the published number beside ours.
//!
//! ```text
//! cargo run --release --example reproduce -- configs/planetoid --json > records.jsonl
//! cargo run --release --example results_table -- records.jsonl               # print
//! cargo run --release --example results_table -- records.jsonl --write docs/results.md
//! ```
//!
//! `--write FILE` replaces everything after the line
//! `<!-- generated tables below: do not edit by hand -->` of FILE (which
//! must hold it), through a temporary file and a rename.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Parser;
use serde::Deserialize;

const MARKER: &str = "<!-- generated tables below: do not edit by hand -->";

#[derive(Parser, Debug)]
#[command(about = "Markdown tables from reproduce's JSON records")]
struct Args {
    /// Files of records, one JSON object per line (later records of the
    /// same config replace earlier ones).
    #[arg(required = true)]
    records: Vec<PathBuf>,
    /// Write the tables into this markdown file, after its marker line.
    #[arg(long)]
    write: Option<PathBuf>,
}

/// The fields of a record the tables read.
#[derive(Debug, Clone, Deserialize)]
struct Record {
    config: String,
    command: String,
    dataset: String,
    model: String,
    runs: usize,
    test_acc_mean: f64,
    test_acc_std: f64,
    val_acc_mean: f64,
    /// Mean test macro-F1 in percent (the absa runner's; absent or null
    /// for the others).
    #[serde(default)]
    test_f1_mean: Option<f64>,
    reference: Option<Reference>,
}

#[derive(Debug, Clone, Deserialize)]
struct Reference {
    accuracy: f64,
    source: String,
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(&args) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> Result<(), String> {
    let mut latest: BTreeMap<String, Record> = BTreeMap::new();
    for file in &args.records {
        let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let r: Record = serde_json::from_str(line)
                .map_err(|e| format!("{} line {}: not a record: {e}", file.display(), i + 1))?;
            latest.insert(r.config.clone(), r);
        }
    }
    if latest.is_empty() {
        return Err("no records in the given files".into());
    }
    let tables = tables(&latest);
    match &args.write {
        None => print!("{tables}"),
        Some(path) => write_after_marker(path, &tables)?,
    }
    Ok(())
}

/// One table per folder of configs.
fn tables(records: &BTreeMap<String, Record>) -> String {
    let mut by_folder: BTreeMap<String, Vec<&Record>> = BTreeMap::new();
    for r in records.values() {
        let folder = Path::new(&r.config)
            .parent()
            .map_or_else(String::new, |p| p.display().to_string());
        by_folder.entry(folder).or_default().push(r);
    }
    let mut out = String::new();
    for (folder, rows) in by_folder {
        out.push_str(&format!("\n### `{folder}`\n\n"));
        out.push_str(
            "| config | dataset | model | published | ours: test acc. (%) | val. acc. (%) | runs | command |\n",
        );
        out.push_str("|---|---|---|---|---|---|---|---|\n");
        for r in rows {
            let name = Path::new(&r.config)
                .file_name()
                .map_or_else(|| r.config.clone(), |n| n.to_string_lossy().into_owned());
            let published = r.reference.as_ref().map_or_else(
                || "–".to_string(),
                |p| format!("{:.2} ({})", p.accuracy, p.source),
            );
            // Macro-F1 beside the accuracy where the runner reports it (ABSA).
            let f1 = r
                .test_f1_mean
                .map_or_else(String::new, |f| format!(" (macro-F1 {f:.2})"));
            out.push_str(&format!(
                "| [`{name}`](../{}) | {} | {} | {published} | {:.2} ± {:.2}{f1} | {:.2} | {} | `{}` |\n",
                r.config,
                r.dataset,
                r.model,
                r.test_acc_mean,
                r.test_acc_std,
                r.val_acc_mean,
                r.runs,
                r.command
            ));
        }
    }
    out
}

/// Replaces what follows the marker line of `path` by `tables`, through a
/// temporary file in the same folder and a rename.
fn write_after_marker(path: &Path, tables: &str) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let at = text
        .find(MARKER)
        .ok_or_else(|| format!("{}: no line {MARKER:?} to write after", path.display()))?;
    let new = format!("{}{MARKER}\n{tables}", &text[..at]);
    let tmp = path.with_extension(format!("md.{}.tmp", std::process::id()));
    std::fs::write(&tmp, new).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("{}: {e}", path.display())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(config: &str, acc: f64) -> Record {
        Record {
            config: config.into(),
            command: format!("cargo run --release --example reproduce -- {config}"),
            dataset: "cora".into(),
            model: "gcn".into(),
            runs: 10,
            test_acc_mean: acc,
            test_acc_std: 0.5,
            val_acc_mean: 79.0,
            test_f1_mean: None,
            reference: Some(Reference {
                accuracy: 81.5,
                source: "Kipf & Welling 2017".into(),
            }),
        }
    }

    #[test]
    fn one_table_per_folder_one_row_per_config() {
        let mut m = BTreeMap::new();
        for (c, a) in [
            ("configs/planetoid/cora-gcn.toml", 81.234),
            ("configs/planetoid/cora-cheb.toml", 80.0),
            ("configs/text/mr-hdgcn.toml", 77.0),
        ] {
            m.insert(c.to_string(), record(c, a));
        }
        let t = tables(&m);
        assert_eq!(t.matches("### ").count(), 2);
        assert!(t.contains("| 81.50 (Kipf & Welling 2017) | 81.23 ± 0.50 | 79.00 | 10 |"));
        assert!(t.contains("[`cora-cheb.toml`](../configs/planetoid/cora-cheb.toml)"));
    }

    #[test]
    fn an_absa_record_shows_its_macro_f1_beside_the_accuracy() {
        let line = r#"{"config": "configs/paper/absa-lap14-hdgcn.toml", "command": "c",
            "dataset": "lap14", "model": "hdgcn", "runs": 5, "test_acc_mean": 70.126,
            "test_acc_std": 1.0, "val_acc_mean": 71.0, "test_f1_mean": 64.5,
            "reference": {"accuracy": 76.8, "source": "HDGCN (GloVe)"}}"#;
        let r: Record = serde_json::from_str(line).unwrap();
        let mut m = BTreeMap::new();
        m.insert(r.config.clone(), r);
        assert!(tables(&m).contains("| 70.13 ± 1.00 (macro-F1 64.50) | 71.00 | 5 |"));
        // A record of another runner has no F1 (null or absent).
        let other: Record = serde_json::from_str(
            &line.replace("\"test_f1_mean\": 64.5,", "\"test_f1_mean\": null,"),
        )
        .unwrap();
        assert_eq!(other.test_f1_mean, None);
    }

    #[test]
    fn writing_keeps_what_precedes_the_marker_and_refuses_a_file_without_it() {
        let dir = std::env::temp_dir().join(format!("results_table_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("results.md");
        std::fs::write(&f, format!("# Results\n\nprose\n{MARKER}\nold table\n")).unwrap();
        write_after_marker(&f, "new table\n").unwrap();
        assert_eq!(
            std::fs::read_to_string(&f).unwrap(),
            format!("# Results\n\nprose\n{MARKER}\nnew table\n")
        );
        std::fs::write(&f, "no marker").unwrap();
        assert!(write_after_marker(&f, "x").unwrap_err().contains("no line"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
