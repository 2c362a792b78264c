//! Tests of the `attention_map` example (`cargo test --example attention_map`), kept
//! beside the shared code so that the example itself reads top to bottom.

use super::testing::{parse_args, scratch, write_corpus};
use super::*;

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

#[test]
fn writes_row_stochastic_maps_of_every_unit_and_a_reloaded_checkpoint_repeats_them() {
    let root = scratch("attention-map");
    write_corpus(&root, "mr");
    let (out1, out2, ckpt) = (root.join("a"), root.join("b"), root.join("m.safetensors"));
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let sentence = "Grain oil zzzunseen grain";
    let common = [
        "--sentence",
        sentence,
        "--hidden",
        "8",
        "--supernodes",
        "3",
        "--data-dir",
        &s(&root),
    ];
    run(&parse(
        &[
            &common[..],
            &["--epochs", "1", "--out-dir", &s(&out1), "--save", &s(&ckpt)],
        ]
        .concat(),
    ))
    .unwrap();
    assert!(vocab_path(&ckpt).exists());
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
    // Other shape options are refused, naming what differs.
    let mut other = common.to_vec();
    other[3] = "16";
    let err = run(&parse(
        &[&other[..], &["--load", &s(&ckpt), "--out-dir", &s(&out2)]].concat(),
    ))
    .unwrap_err();
    assert!(err.to_string().contains("other options"), "{err}");
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn an_empty_sentence_is_an_error() {
    let err = run(&parse(&["--sentence", "  "])).unwrap_err();
    assert!(err.to_string().contains("--sentence is empty"), "{err}");
}

#[test]
fn glove_vectors_set_the_embedding_width_and_a_checkpoint_remembers_it() {
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
    let common = [
        "--sentence",
        "grain oil",
        "--hidden",
        "8",
        "--supernodes",
        "2",
        "--data-dir",
        &s(&root),
        "--out-dir",
        &s(&out),
    ];
    let glove = ["--embeddings", "glove/tiny.txt"];
    run(&parse(
        &[
            &common[..],
            &glove[..],
            &["--epochs", "1", "--save", &s(&ckpt)],
        ]
        .concat(),
    ))
    .unwrap();
    let saved = std::fs::read_to_string(vocab_path(&ckpt)).unwrap();
    assert!(
        saved.lines().next().unwrap().ends_with("embed=5"),
        "{saved}"
    );
    assert!(out.join("unit1_product.csv").exists());
    // Without the vectors the model is 8 wide at the input: refused on load.
    let err = run(&parse(&[&common[..], &["--load", &s(&ckpt)]].concat())).unwrap_err();
    assert!(err.to_string().contains("other options"), "{err}");
    run(&parse(
        &[&common[..], &glove[..], &["--load", &s(&ckpt)]].concat(),
    ))
    .unwrap();
    // A vectors file that does not exist is named.
    let err = run(&parse(
        &[
            &common[..],
            &["--embeddings", "glove/none.txt", "--epochs", "1"],
        ]
        .concat(),
    ))
    .unwrap_err();
    assert!(err.to_string().contains("none.txt"), "{err}");
    std::fs::remove_dir_all(&root).unwrap();
}
