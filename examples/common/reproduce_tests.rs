//! Tests of the `reproduce` example.

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
