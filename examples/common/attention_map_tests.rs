//! Tests of the `attention_map` example (`cargo test --example attention_map`), kept
//! beside the shared code so that the example itself reads top to bottom.

use super::testing::{parse_args, scratch, write_corpus};
use super::*;
use std::path::Path;

fn parse(flags: &[&str]) -> Args {
    parse_args(flags)
}

/// `(header, rows)` of a CSV map: the column labels, then each row's
/// label and values.
fn read_csv(path: &Path) -> (Vec<String>, Vec<(String, Vec<f64>)>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<String> = lines.next().unwrap().split(',').map(String::from).collect();
    let rows = lines
        .map(|l| {
            let mut f = l.split(',');
            let label = f.next().unwrap().to_string();
            (label, f.map(|v| v.parse().unwrap()).collect())
        })
        .collect();
    (header, rows)
}

/// Writes a `text_classification` config for the small MR corpus of
/// [`write_corpus`]: hidden 8, `supernodes` supernodes, one epoch, plus
/// `extra` lines (top-level keys); returns its path.
fn write_config(root: &Path, name: &str, supernodes: usize, extra: &str) -> std::path::PathBuf {
    let path = root.join(name);
    std::fs::write(
        &path,
        format!(
            "runner = \"text_classification\"\ndataset = \"mr\"\nmodel = \"hdgcn\"\n\
             hidden = 8\nsupernodes = {supernodes}\n{extra}\n[train]\nepochs = 1\nlr = 1e-3\n"
        ),
    )
    .unwrap();
    path
}

#[test]
fn writes_row_stochastic_maps_of_every_unit_and_a_reloaded_checkpoint_repeats_them() {
    let root = scratch("attention-map");
    write_corpus(&root, "mr");
    let (out1, out2, ckpt) = (root.join("a"), root.join("b"), root.join("m.safetensors"));
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let config = write_config(&root, "m.toml", 3, "");
    let sentence = "Grain oil zzzunseen grain";
    let common = [
        "--sentence",
        sentence,
        "--config",
        &s(&config),
        "--data-dir",
        &s(&root),
    ];
    run(&parse(
        &[&common[..], &["--out-dir", &s(&out1), "--save", &s(&ckpt)]].concat(),
    ))
    .unwrap();
    assert!(ckpt.exists());
    // "grain" twice is one node; the unseen word is <unk>.
    let words = ["grain", "oil", "<unk>"];
    for k in 1..=3 {
        let png = std::fs::read(out1.join(format!("unit{k}_forward.png"))).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        assert!(out1.join(format!("unit{k}_backward.png")).exists());
        let (head_f, af) = read_csv(&out1.join(format!("unit{k}_forward.csv")));
        let (head_b, ab) = read_csv(&out1.join(format!("unit{k}_backward.csv")));
        assert_eq!(head_f[1..], words);
        assert_eq!(head_b[1..], ["s1", "s2", "s3"]);
        assert_eq!(af.len(), 3, "A_f: one row per supernode");
        assert_eq!(
            ab.iter().map(|(w, _)| w.as_str()).collect::<Vec<_>>(),
            words
        );
        for (label, row) in af.iter().chain(&ab) {
            let sum: f64 = row.iter().sum();
            assert!(
                (sum - 1.0).abs() < 1e-6,
                "unit {k} row {label} sums to {sum}"
            );
            assert!(
                row.iter().all(|&p| p >= 0.0),
                "unit {k} row {label}: {row:?}"
            );
        }
    }
    // A_d = A_b A_f, words on both axes, computed here from the two CSVs.
    for k in 1..=3 {
        let (_, af) = read_csv(&out1.join(format!("unit{k}_forward.csv")));
        let (_, ab) = read_csv(&out1.join(format!("unit{k}_backward.csv")));
        let (head_d, ad) = read_csv(&out1.join(format!("unit{k}_product.csv")));
        assert!(out1.join(format!("unit{k}_product.png")).exists());
        assert_eq!(head_d[1..], words);
        assert_eq!(ad.len(), words.len());
        for (i, (label, row)) in ad.iter().enumerate() {
            assert_eq!(label, words[i]);
            for (j, &d) in row.iter().enumerate() {
                let want: f64 = (0..af.len()).map(|m| ab[i].1[m] * af[m].1[j]).sum();
                assert!(
                    (d - want).abs() < 1e-9,
                    "unit {k} A_d[{i},{j}] = {d}, want {want}"
                );
            }
            let sum: f64 = row.iter().sum();
            assert!(
                (sum - 1.0).abs() < 1e-6,
                "unit {k} A_d row {label} sums to {sum}"
            );
        }
    }
    // Loaded with the same options, the checkpoint draws the same maps.
    run(&parse(
        &[&common[..], &["--load", &s(&ckpt), "--out-dir", &s(&out2)]].concat(),
    ))
    .unwrap();
    for k in 1..=3 {
        for name in ["forward", "backward", "product"] {
            let f = format!("unit{k}_{name}.csv");
            let (a, b) = (
                std::fs::read(out1.join(&f)).unwrap(),
                std::fs::read(out2.join(&f)).unwrap(),
            );
            assert_eq!(a, b, "{f}");
        }
    }
    // Without --save the model goes to OUT_DIR/model.safetensors.
    let out3 = root.join("c");
    run(&parse(&[&common[..], &["--out-dir", &s(&out3)]].concat())).unwrap();
    assert!(out3.join("model.safetensors").exists());
    // A config of another shape does not take the checkpoint, naming the
    // tensor that differs.
    let wider = write_config(&root, "wide.toml", 4, "");
    let err = run(&parse(&[
        "--sentence",
        sentence,
        "--config",
        &s(&wider),
        "--data-dir",
        &s(&root),
        "--load",
        &s(&ckpt),
        "--out-dir",
        &s(&out2),
    ]))
    .unwrap_err();
    assert!(
        matches!(err, Error::CheckpointMismatch { .. }) && err.to_string().contains("shape"),
        "{err}"
    );
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn an_empty_sentence_is_an_error() {
    let err = run(&parse(&["--sentence", "  "])).unwrap_err();
    assert!(err.to_string().contains("--sentence is empty"), "{err}");
}

#[test]
fn the_default_config_is_the_papers_glove_initialised_mr_row() {
    let args = parse(&["--sentence", "a film"]);
    assert_eq!(
        args.config,
        Path::new("configs/paper/table1-mr-hdgcn.toml"),
        "the default model is Table 1's MR HDGCN row"
    );
    let s = TextSettings::from_toml_file(&args.config).unwrap();
    assert_eq!((s.dataset.as_str(), s.model), ("mr", ModelKind::Hdgcn));
    assert!(s.embeddings.is_some(), "GloVe-initialised");
}

#[test]
fn a_model_without_maps_and_load_with_save_are_errors() {
    let root = scratch("attention-map-static");
    let config = root.join("static.toml");
    std::fs::write(&config, "dataset = \"mr\"\nmodel = \"hdgcn-static\"\n").unwrap();
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let err = run(&parse(&["--sentence", "a film", "--config", &s(&config)])).unwrap_err();
    assert!(
        err.to_string().contains("hdgcn-static") && err.to_string().contains("no MVCAttn maps"),
        "{err}"
    );
    let err = run(&parse(&[
        "--sentence",
        "a film",
        "--load",
        "a.safetensors",
        "--save",
        "b.safetensors",
    ]))
    .unwrap_err();
    assert!(err.to_string().contains("--load and --save"), "{err}");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn glove_vectors_set_the_embedding_width_and_a_checkpoint_needs_them() {
    let root = scratch("attention-map-glove");
    write_corpus(&root, "mr");
    // Five-dimensional vectors for two words; under the data root.
    let glove_dir = root.join("glove");
    std::fs::create_dir_all(&glove_dir).unwrap();
    std::fs::write(
        glove_dir.join("tiny.txt"),
        "grain 0.1 0.2 0.3 0.4 0.5\noil -0.5 0.4 -0.3 0.2 -0.1\n",
    )
    .unwrap();
    let (out, ckpt) = (root.join("g"), root.join("g.safetensors"));
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let with_glove = write_config(&root, "g.toml", 2, "embeddings = \"glove/tiny.txt\"");
    let without = write_config(&root, "n.toml", 2, "");
    let common = [
        "--sentence",
        "grain oil",
        "--data-dir",
        &s(&root),
        "--out-dir",
        &s(&out),
    ];
    let cfg = |c: &Path| ["--config".to_string(), s(c)];
    let [gk, gv] = cfg(&with_glove);
    run(&parse(
        &[
            &common[..],
            &[gk.as_str(), gv.as_str(), "--save", &s(&ckpt)],
        ]
        .concat(),
    ))
    .unwrap();
    assert!(out.join("unit1_product.csv").exists());
    // The embedding table is 5 wide: a model trained from scratch (8 wide)
    // does not take it.
    let [nk, nv] = cfg(&without);
    let err = run(&parse(
        &[
            &common[..],
            &[nk.as_str(), nv.as_str(), "--load", &s(&ckpt)],
        ]
        .concat(),
    ))
    .unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains(", 5) in the file, (") && msg.contains(", 8) in the model"),
        "{msg}"
    );
    run(&parse(
        &[
            &common[..],
            &[gk.as_str(), gv.as_str(), "--load", &s(&ckpt)],
        ]
        .concat(),
    ))
    .unwrap();
    // A vectors file that does not exist is named.
    let missing = write_config(&root, "m.toml", 2, "embeddings = \"glove/none.txt\"");
    let [mk, mv] = cfg(&missing);
    let err = run(&parse(&[&common[..], &[mk.as_str(), mv.as_str()]].concat())).unwrap_err();
    assert!(err.to_string().contains("none.txt"), "{err}");
    std::fs::remove_dir_all(&root).unwrap();
}
