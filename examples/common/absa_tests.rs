//! Tests of the `absa` example (`cargo test --example absa`), kept beside
//! the shared code so that the example itself reads top to bottom.

use super::common::absa::{AbsaReadout, AbsaSettings};
use super::common::{flag_name, run_on_cpu};
use super::testing::{assert_runs_average, parse_args, scratch};
use super::*;
use std::path::Path;

fn parse(flags: &[&str]) -> Args {
    parse_args(flags)
}

fn try_parse(flags: &[&str]) -> Result<Args, clap::Error> {
    Args::try_parse_from(std::iter::once("absa").chain(flags.iter().copied()))
}

fn run_err(args: &Args) -> String {
    args.run(&hdgcn::backend::Cpu::<f32>::new(), Device::Cpu)
        .unwrap_err()
        .to_string()
}

/// Writes a synthetic LAP14 in DualGCN's layout under `root`: 90 training
/// and 45 test sentences of six words from a pool (a fixed LCG), one aspect
/// each, whose polarity the opinion word next to it mostly decides.
fn write_lap14(root: &Path) {
    let dir = root.join("absa/dualgcn/Laptops_stanza");
    std::fs::create_dir_all(&dir).unwrap();
    let fillers = ["the", "a", "is", "and", "it", "this", "my", "very"];
    let aspects = ["battery", "screen", "keyboard", "price"];
    let opinions = [["awful", "poor"], ["okay", "average"], ["great", "superb"]];
    let polarities = ["negative", "neutral", "positive"];
    let mut state = 987654321u64;
    let mut next = |n: usize| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 33) % n as u64) as usize
    };
    let mut sentences = (Vec::new(), Vec::new());
    for i in 0..135 {
        let class = i % 3;
        // One sentence in five carries another class's word.
        let word_class = if next(5) == 0 { next(3) } else { class };
        let mut tokens: Vec<String> = (0..6).map(|_| fillers[next(8)].to_string()).collect();
        let at = next(4);
        tokens[at] = aspects[next(4)].into();
        tokens[at + 1] = opinions[word_class][next(2)].into();
        let heads: Vec<usize> = (0..6).map(|j| if j == 5 { 0 } else { j + 2 }).collect();
        let s = serde_json::json!({
            "token": tokens, "pos": [], "head": heads, "deprel": [],
            "aspects": [{"term": [tokens[at].clone()], "from": at, "to": at + 1,
                         "polarity": polarities[class]}],
        });
        if i < 90 {
            sentences.0.push(s);
        } else {
            sentences.1.push(s);
        }
    }
    for (name, list) in [("train.json", sentences.0), ("test.json", sentences.1)] {
        std::fs::write(dir.join(name), serde_json::Value::from(list).to_string()).unwrap();
    }
}

/// Writes `body` as the settings file `name` under `root`.
fn write_config(root: &Path, name: &str, body: &str) -> PathBuf {
    let path = root.join(name);
    std::fs::write(&path, body).unwrap();
    path
}

/// A small model the tests train on the synthetic LAP14.
const SMALL: &str = "dataset = \"lap14\"\nk = 2\nsupernodes = 2\nhidden = 8\n\
                     [train]\nepochs = 4\nlr = 1e-2\nbatch_size = 16\n";

/// The fields the issue names for the last `--json` line.
const CONTRACT_FIELDS: [&str; 9] = [
    "dataset",
    "model",
    "runs",
    "test_acc_mean",
    "test_acc_std",
    "test_f1_mean",
    "val_acc_mean",
    "epoch_s_median",
    "peak_rss_mb",
];

#[test]
fn the_json_summary_has_the_contract_fields_and_averages_the_runs() {
    let root = scratch("absa-json");
    write_lap14(&root);
    for (model, readout) in [
        ("hdgcn", "gated"),
        ("hdgcn", "aspect-mean"),
        ("hdgcn-static", "gated"),
        ("gcn", "aspect-mean"),
    ] {
        let config = write_config(
            &root,
            "small.toml",
            &SMALL.replace("k = 2", &format!("k = 2\nreadout = \"{readout}\"")),
        );
        let args = parse(&[
            "--config",
            config.to_str().unwrap(),
            "--model",
            model,
            "--runs",
            "2",
            "--seed",
            "3",
            "--data-dir",
            root.to_str().unwrap(),
            "--json",
            "--quiet",
        ]);
        let j = run_on_cpu(&args).json;
        for f in CONTRACT_FIELDS {
            assert!(
                j.get(f).is_some_and(|v| !v.is_null()),
                "{model} {readout}: {f} in {j}"
            );
        }
        assert_eq!(j["dataset"], "lap14");
        assert_eq!(j["model"], model);
        assert_eq!(j["k"].as_u64(), (model != "gcn").then_some(2));
        assert_eq!(j["runs"], 2);
        assert_eq!(j["seed"], 3);
        assert_eq!(j["readout"], readout);
        assert_eq!(j["train_samples"], 90);
        assert_eq!(j["test_samples"], 45);
        let accs = assert_runs_average(&j, "test_accs", "test_acc_mean", 2);
        assert_runs_average(&j, "val_accs", "val_acc_mean", 2);
        let f1s = assert_runs_average(&j, "test_f1s", "test_f1_mean", 2);
        for (a, f) in accs.iter().zip(&f1s) {
            // Percentages; macro-F1 of 45 samples of three classes.
            assert!(
                (0.0..=100.0).contains(a) && (0.0..=100.0).contains(f),
                "{j}"
            );
        }
        // Validation is 10 % of the 90 training samples: accuracies are
        // multiples of 1/9.
        for v in j["val_accs"].as_array().unwrap() {
            let k = v.as_f64().unwrap() * 9.0 / 100.0;
            assert!((k - k.round()).abs() < 1e-9, "{v}");
        }
        assert!(j["epoch_s_median"].as_f64().unwrap() > 0.0);
        assert!(j["peak_rss_mb"].as_f64().unwrap() > 0.0);
    }
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn every_flag_parses_and_overrides_the_file() {
    let root = scratch("absa-flags");
    let config = write_config(
        &root,
        "c.toml",
        "dataset = \"rest14\"\nmodel = \"hdgcn\"\nk = 4\n",
    );
    let args = parse(&[
        "--dataset",
        "rest15",
        "--model",
        "hdgcn-static",
        "--embeddings",
        "glove/x.txt",
        "--runs",
        "3",
        "--seed",
        "7",
        "--data-dir",
        "somewhere",
        "--config",
        config.to_str().unwrap(),
        "--json",
        "--quiet",
    ]);
    assert!(args.run.json && args.quiet);
    assert_eq!(args.data_dir.as_deref(), Some(Path::new("somewhere")));
    let s = args.settings().unwrap();
    assert_eq!(
        (s.dataset.as_str(), s.model, s.k, s.runs, s.seed),
        ("rest15", AbsaModel::HdgcnStatic, Some(4), 3, 7)
    );
    assert_eq!(s.embeddings.as_deref(), Some(Path::new("glove/x.txt")));
    // `--model gcn` over a file with `k`: gcn has none.
    let s = parse(&["--config", config.to_str().unwrap(), "--model", "gcn"])
        .settings()
        .unwrap();
    assert_eq!((s.model, s.k), (AbsaModel::Gcn, None));
    // The defaults are the paper's settings, at the lr that validation
    // chose for every ABSA file of configs/paper.
    let s = parse(&[]).settings().unwrap();
    assert_eq!(s, AbsaSettings::default());
    assert_eq!(
        (s.k(), s.hidden, s.supernodes, s.layers, s.runs, s.split),
        (6, 64, 10, 1, 5, 0.1)
    );
    assert_eq!((s.train.lr, s.dropout), (1e-3, 0.5));
    assert_eq!(s.readout, AbsaReadout::Gated);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn unknown_flags_and_bad_values_are_errors() {
    for flags in [
        &["--epochs", "2"][..],
        &["--model", "cheb"],
        &["--model", "bert"],
        &["--runs", "0"],
        &["--runs", "x"],
        &["--seed", "-1"],
        &["--readout", "gated"],
    ] {
        let err = try_parse(flags)
            .err()
            .unwrap_or_else(|| panic!("{flags:?} parsed"));
        assert!(
            matches!(
                err.kind(),
                clap::error::ErrorKind::UnknownArgument
                    | clap::error::ErrorKind::InvalidValue
                    | clap::error::ErrorKind::ValueValidation
            ),
            "{flags:?}: {:?} {err}",
            err.kind()
        );
    }
    let err = parse(&["--dataset", "twitter"]).settings().unwrap_err();
    assert!(
        err.to_string().contains("dataset") && err.to_string().contains("twitter"),
        "{err}"
    );
}

#[test]
fn a_bad_config_fails_naming_the_file_and_the_key() {
    let root = scratch("absa-badconfig");
    for (name, body, key) in [
        (
            "unknown.toml",
            "dataset = \"lap14\"\nsupernode = 4\n",
            "supernode",
        ),
        ("train.toml", "[train]\nlrr = 0.1\n", "lrr"),
        ("readout.toml", "readout = \"mean-max\"\n", "aspect-mean"),
        (
            "runner.toml",
            "runner = \"text_classification\"\n",
            "runner",
        ),
        ("k.toml", "k = 3\n", "k"),
        ("gcn_k.toml", "model = \"gcn\"\nk = 2\n", "k"),
        ("split.toml", "split = 1.0\n", "split"),
        ("seed.toml", "[train]\nseed = 3\n", "train.seed"),
        ("huge.toml", "hidden = 100000000\n", "hidden 100000000"),
    ] {
        let path = write_config(&root, name, body);
        let err = parse(&["--config", path.to_str().unwrap()])
            .settings()
            .unwrap_err()
            .to_string();
        assert!(err.contains(name) && err.contains(key), "{name}: {err}");
    }
    let err = parse(&["--config", root.join("none.toml").to_str().unwrap()])
        .settings()
        .unwrap_err();
    assert!(err.to_string().contains("none.toml"), "{err}");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn missing_data_is_an_error_naming_the_file() {
    let root = scratch("absa-missing");
    for (dataset, file) in [
        ("lap14", "dualgcn/Laptops_stanza/train.json"),
        ("rest14", "dualgcn/Restaurants_stanza/train.json"),
        ("rest15", "asgcn/semeval15/restaurant_train.raw"),
        ("rest16", "asgcn/semeval16/restaurant_train.raw"),
    ] {
        let args = parse(&["--dataset", dataset, "--data-dir", root.to_str().unwrap()]);
        let err = run_err(&args);
        assert!(err.contains(file), "{dataset}: {err}");
    }
    // A missing GloVe file is named too.
    write_lap14(&root);
    let args = parse(&[
        "--embeddings",
        "nowhere/glove.txt",
        "--data-dir",
        root.to_str().unwrap(),
    ]);
    assert!(run_err(&args).contains("nowhere/glove.txt"));
    std::fs::remove_dir_all(&root).unwrap();
}

/// The ABSA configs of configs/paper (paper Table 3), by file name.
fn paper_configs() -> Vec<(String, AbsaSettings)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/paper");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        if path.extension().is_some_and(|e| e == "toml") && text.contains("runner = \"absa\"") {
            let s = AbsaSettings::from_toml_file(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            out.push((name, s));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn the_paper_configs_are_the_plain_commands() {
    let configs = paper_configs();
    let names: Vec<&str> = configs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "absa-lap14-hdgcn-static.toml",
            "absa-lap14-hdgcn.toml",
            "absa-rest14-hdgcn-static.toml",
            "absa-rest14-hdgcn.toml",
            "absa-rest15-hdgcn-static.toml",
            "absa-rest15-hdgcn.toml",
        ]
    );
    let glove = "glove/glove.6B.50d.subset.txt";
    for (name, file) in &configs {
        assert!(file.reference.is_some(), "{name}: no [reference]");
        assert_eq!(file.runs, 5, "{name}");
        assert_eq!(file.embeddings.as_deref(), Some(Path::new(glove)), "{name}");
        // `absa --dataset D --model M --embeddings E`: the config differs
        // from it only in what names the row.
        let model = flag_name(&file.model);
        let plain = parse(&[
            "--dataset",
            &file.dataset,
            "--model",
            &model,
            "--embeddings",
            glove,
        ])
        .settings()
        .unwrap();
        let file = AbsaSettings {
            k: Some(file.k()),
            ..file.clone()
        };
        let expected = AbsaSettings {
            runner: file.runner.clone(),
            reference: file.reference.clone(),
            k: Some(plain.k()),
            ..plain
        };
        assert_eq!(file, expected, "{name}");
    }
    // The two variants of a row share every setting but the model.
    for pair in configs.chunks(2) {
        let [(a_name, a), (b_name, b)] = pair else {
            panic!("{pair:?}")
        };
        assert_eq!(a.model, AbsaModel::HdgcnStatic, "{a_name}");
        assert_eq!(b.model, AbsaModel::Hdgcn, "{b_name}");
        let a = AbsaSettings {
            model: b.model,
            reference: b.reference.clone(),
            ..a.clone()
        };
        assert_eq!(&a, b, "{a_name} vs {b_name}");
    }
}

#[test]
#[cfg_attr(not(hdgcn_data_tests), ignore = "needs the benchmark data: absa/")]
fn the_real_lap14_runs_end_to_end() {
    let root = PathBuf::from(env!("HDGCN_TEST_DATA_ROOT"));
    let scratch_dir = scratch("absa-real");
    // One epoch of a small model over the real files: the runner loads,
    // builds the §9 graphs, trains and reports.
    let config = write_config(
        &scratch_dir,
        "tiny.toml",
        "dataset = \"lap14\"\nk = 2\nsupernodes = 2\nhidden = 8\nreadout = \"aspect-mean\"\n\
         embeddings = \"glove/glove.6B.50d.subset.txt\"\n[train]\nepochs = 1\nlr = 1e-3\n",
    );
    let args = parse(&[
        "--config",
        config.to_str().unwrap(),
        "--runs",
        "1",
        "--data-dir",
        root.to_str().unwrap(),
        "--quiet",
    ]);
    let j = run_on_cpu(&args).json;
    assert_eq!(
        (j["train_samples"].as_u64(), j["test_samples"].as_u64()),
        (Some(2282), Some(632))
    );
    assert_eq!(j["embed_dim"], 50);
    std::fs::remove_dir_all(&scratch_dir).unwrap();
}
