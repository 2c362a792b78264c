//! Aspect-based sentiment classification (the paper's Section 4.3 and
//! Table 3) on SemEval LAP14, REST14, REST15 and REST16: one graph per
//! aspect (the sentence's dependency arcs, the aspect's tokens appended and
//! linked to their place in the sentence; math notes §9), GloVe word
//! vectors looked up lower-cased, graph convolutions, a readout over every
//! node (the paper's gated readout) or over the aspect's tokens (the
//! aspect mean, as ASGCN), and a linear classifier over the three
//! polarities.
//!
//! ```text
//! cargo run --release --example absa -- --dataset lap14 --model hdgcn --embeddings glove/glove.6B.50d.subset.txt --json
//! cargo run --release --example absa -- --config configs/paper/absa-lap14-hdgcn.toml --json
//! ```
//!
//! Data, under the data root (`--data-dir`, else `$HDGCN_DATA`, else
//! `./data`): `absa/dualgcn/{Laptops,Restaurants}_stanza/{train,test}.json`
//! for lap14 and rest14, `absa/asgcn/semeval{15,16}/restaurant_{train,test}.raw`
//! with their `.raw.graph` pickles for rest15 and rest16. Every setting can
//! come from a TOML file (`--config`, the keys of
//! `common::absa::AbsaSettings`; `configs/paper/absa-*.toml` hold the
//! paper's rows); the flags below override the file. Validation is a
//! seeded 10 % of the training samples (key `split`); the epoch is chosen
//! on validation only and the test samples are read once, at the end of
//! each run. With `--json` the last stdout line is one JSON object
//! (dataset, model, runs, test_acc_mean, test_acc_std, test_f1_mean,
//! val_acc_mean, epoch_s_median, peak_rss_mb, ...), accuracies and
//! macro-F1 in percent.

mod common;
#[cfg(test)]
#[path = "common/testing.rs"]
mod testing;

use std::path::PathBuf;

use clap::Parser;
use common::absa::{AbsaModel, AbsaSettings, run_absa};
use common::{Example, Report, RunFlags, parse_runs};
use hdgcn::backend::{Backend, Device};

#[derive(Parser, Debug)]
#[command(about = "HDGCN / GCN aspect-based sentiment classification (SemEval 2014-2016)")]
struct Args {
    /// lap14 | rest14 | rest15 | rest16 [default: lap14]
    #[arg(long)]
    dataset: Option<String>,
    /// hdgcn | hdgcn-static | gcn [default: hdgcn]
    #[arg(long, value_enum, ignore_case = true)]
    model: Option<AbsaModel>,
    /// GloVe text file (`word v1 v2 ...`) to initialise the embeddings; a
    /// relative path that does not exist is looked up under the data root.
    #[arg(long)]
    embeddings: Option<PathBuf>,
    /// Independent runs, seeds seed, seed+1, ... [default: 5].
    #[arg(long, value_parser = parse_runs)]
    runs: Option<usize>,
    /// Base seed [default: 0].
    #[arg(long)]
    seed: Option<u64>,
    /// Data root (holds absa/); default $HDGCN_DATA, else ./data
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// TOML settings file (keys of `AbsaSettings`, e.g.
    /// configs/paper/absa-lap14-hdgcn.toml); the flags above override it.
    #[arg(long)]
    config: Option<PathBuf>,
    #[command(flatten)]
    run: RunFlags,
    /// No progress bar, no per-run lines.
    #[arg(long)]
    quiet: bool,
}

impl Args {
    /// The settings of the run: the `--config` file's (or the defaults),
    /// then the flags given.
    fn settings(&self) -> hdgcn::Result<AbsaSettings> {
        let mut s = match &self.config {
            Some(path) => AbsaSettings::from_toml_file(path)?,
            None => AbsaSettings::default(),
        };
        if let Some(v) = &self.dataset {
            s.dataset.clone_from(v);
        }
        if let Some(v) = self.model {
            s.model = v;
            // gcn has no Chebyshev order: a file's `k` is for its hdgcn model.
            if v == AbsaModel::Gcn {
                s.k = None;
            }
        }
        if let Some(v) = &self.embeddings {
            s.embeddings = Some(v.clone());
        }
        if let Some(v) = self.runs {
            s.runs = v;
        }
        if let Some(v) = self.seed {
            s.seed = v;
        }
        s.validate()?;
        Ok(s)
    }
}

fn main() {
    common::main::<Args>();
}

impl Example for Args {
    fn flags(&self) -> &RunFlags {
        &self.run
    }

    fn run<B: Backend<Elem = f32>>(&self, backend: &B, device: Device) -> hdgcn::Result<Report> {
        let settings = self.settings()?;
        let mut report = run_absa(
            &settings,
            backend,
            device,
            self.data_dir.as_deref(),
            self.quiet,
        )?;
        if let Some(obj) = report.json.as_object_mut() {
            obj.insert("malloc".into(), self.run.malloc.in_effect().into());
            obj.insert(
                "config".into(),
                self.config.as_ref().map(|p| p.display().to_string()).into(),
            );
        }
        Ok(report)
    }
}

#[cfg(test)]
#[path = "common/absa_tests.rs"]
mod tests;
