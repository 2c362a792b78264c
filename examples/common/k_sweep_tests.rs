//! Tests of the `k_sweep` example.

use super::plot::entropies;
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
