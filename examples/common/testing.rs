//! What the examples' tests share: parsing a command line, scratch
//! folders and a small synthetic corpus in the TextGCN layout (included
//! with `#[cfg(test)] #[path = "common/testing.rs"] mod testing;`).

use std::path::Path;

use hdgcn::data::text::text_gcn_dir;

/// Writes a two-class corpus under `root/text_gcn` with the file stem
/// `stem` (`R8`, `mr`, ...: the loader knows the four corpora by name):
/// 160 training and 80 test documents of eight words drawn (by a fixed
/// LCG) from a shared pool of twelve, each class taking two words in three
/// from its own half, so that a trained model is neither at chance nor
/// perfect.
#[allow(dead_code)] // `planetoid`, which also includes this file, reads the vendored Cora
pub fn write_corpus(root: &Path, stem: &str) {
    let dir = text_gcn_dir(root);
    std::fs::create_dir_all(dir.join("corpus")).unwrap();
    let pool = [
        "grain", "wheat", "harvest", "crop", "corn", "barley", "oil", "crude", "barrel",
        "refinery", "pipeline", "fuel",
    ];
    let mut state = 12345u64;
    let mut next = |n: usize| {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 33) % n as u64) as usize
    };
    let (mut labels, mut text) = (String::new(), String::new());
    for i in 0..240 {
        let class = i % 2;
        let split = if i < 160 { "train" } else { "test" };
        let doc: Vec<&str> = (0..8)
            .map(|_| {
                let half = if next(3) < 2 { class } else { 1 - class };
                pool[half * 6 + next(6)]
            })
            .collect();
        labels.push_str(&format!("{i}\t{split}\tc{class}\n"));
        text.push_str(&format!("{}\n", doc.join(" ")));
    }
    std::fs::write(dir.join(format!("{stem}.txt")), labels).unwrap();
    std::fs::write(dir.join("corpus").join(format!("{stem}.clean.txt")), text).unwrap();
}

/// The example's arguments from `flags` (the program name is supplied);
/// panics with clap's message if they do not parse.
pub fn parse_args<A: clap::Parser>(flags: &[&str]) -> A {
    let argv = std::iter::once("example").chain(flags.iter().copied());
    A::try_parse_from(argv).unwrap_or_else(|e| panic!("{flags:?}: {e}"))
}

/// A fresh, empty scratch folder for one test.
pub fn scratch(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("hdgcn-example-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Asserts that the `--json` summary `j` lists `runs` per-run values
/// under `list` (e.g. `val_accs`) and that their mean is its `mean`
/// field (e.g. `val_acc_mean`); returns the values.
#[allow(dead_code)] // `attention_map`, which also includes this file, prints no summary
pub fn assert_runs_average(j: &serde_json::Value, list: &str, mean: &str, runs: usize) -> Vec<f64> {
    let values: Vec<f64> = j[list]
        .as_array()
        .unwrap_or_else(|| panic!("{list} is not a list in {j}"))
        .iter()
        .map(|v| v.as_f64().unwrap_or_else(|| panic!("{list} in {j}")))
        .collect();
    assert_eq!(values.len(), runs, "{list} in {j}");
    let expected = values.iter().sum::<f64>() / runs as f64;
    let got = j[mean].as_f64().unwrap_or_else(|| panic!("{mean} in {j}"));
    assert!(
        (got - expected).abs() < 1e-9,
        "{mean} {got} is not the mean of {list} in {j}"
    );
    values
}
