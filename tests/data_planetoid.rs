//! Planetoid loading against known Cora / PubMed statistics (PyG's values)
//! and reference values computed once with scipy (see comments).

use hdgcn::Error;
use hdgcn::data::{Planetoid, data_root, geom_gcn_dir, planetoid_dir};
use std::path::{Path, PathBuf};

fn vendored() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data")
}

mod common;

/// The shared benchmark folder.
fn shared() -> PathBuf {
    common::benchmark_root("planetoid/ind.pubmed.x")
}

fn row_sum(ds: &Planetoid, r: usize) -> (usize, f64) {
    let row = ds.features.outer_view(r).unwrap();
    (row.nnz(), row.data().iter().map(|&v| f64::from(v)).sum())
}

#[test]
fn cora_matches_pyg() {
    let ds = Planetoid::load(&planetoid_dir(&vendored()), "Cora").unwrap();
    assert_eq!(ds.name, "cora");
    assert_eq!(ds.num_nodes(), 2708);
    assert_eq!(ds.num_features(), 1433);
    assert_eq!(ds.num_classes, 7);
    assert_eq!(ds.features.rows(), 2708);
    assert!(ds.features.is_csr());
    assert_eq!(ds.features.nnz(), 49216);
    assert!(ds.features.data().iter().all(|&v| v == 1.0));
    assert_eq!(ds.edges.len(), 10556);
    assert!(
        ds.edges
            .iter()
            .all(|&(u, v)| u != v && u < 2708 && v < 2708)
    );
    assert!(
        ds.edges.windows(2).all(|w| w[0] < w[1]),
        "sorted, no duplicates"
    );
    for &(u, v) in &ds.edges {
        assert!(ds.edges.binary_search(&(v, u)).is_ok(), "symmetric");
    }
    let s = &ds.public_split;
    assert_eq!((s.train.len(), s.val.len(), s.test.len()), (140, 500, 1000));
    assert_eq!(s.train, (0..140).collect::<Vec<_>>());
    assert_eq!(s.val, (140..640).collect::<Vec<_>>());
    assert_eq!(s.test, (1708..2708).collect::<Vec<_>>());
    assert!(ds.labels.iter().all(|l| l.is_some()));

    // Reference (scipy, PyG assembly):
    //   x = vstack(allx, tx).tolil(); x[ti] = x[st]; y likewise, argmax
    //   np.bincount(y) -> [351 217 418 818 426 298 180]; y[:5] -> [3 4 4 0 3]
    //   ti[:3] = [2692 2532 2050], y -> [3 1 6], row nnz -> [15 17 19]
    //   x[0].indices[:5] -> [19 81 146 315 774]
    let mut counts = [0usize; 7];
    for l in &ds.labels {
        counts[l.unwrap()] += 1;
    }
    assert_eq!(counts, [351, 217, 418, 818, 426, 298, 180]);
    let first5: Vec<usize> = ds.labels[..5].iter().map(|l| l.unwrap()).collect();
    assert_eq!(first5, [3, 4, 4, 0, 3]);
    assert_eq!(ds.labels[2692], Some(3));
    assert_eq!(ds.labels[2532], Some(1));
    assert_eq!(ds.labels[2050], Some(6));
    assert_eq!(row_sum(&ds, 2692), (15, 15.0));
    assert_eq!(row_sum(&ds, 2532), (17, 17.0));
    assert_eq!(row_sum(&ds, 2050), (19, 19.0));
    let row0 = ds.features.outer_view(0).unwrap();
    assert_eq!(&row0.indices()[..5], &[19, 81, 146, 315, 774]);
    // 20 training nodes per class.
    let mut train_counts = [0usize; 7];
    for &i in &s.train {
        train_counts[ds.labels[i].unwrap()] += 1;
    }
    assert_eq!(train_counts, [20; 7]);
}

#[test]
#[cfg_attr(
    not(hdgcn_data_tests),
    ignore = "needs the benchmark data: set HDGCN_DATA or put ../shared/data beside the crate"
)]
fn pubmed_matches_pyg() {
    let root = shared();
    let ds = Planetoid::load(&planetoid_dir(&root), "pubmed").unwrap();
    assert_eq!(ds.num_nodes(), 19717);
    assert_eq!(ds.num_features(), 500);
    assert_eq!(ds.num_classes, 3);
    assert_eq!(ds.edges.len(), 88648);
    let s = &ds.public_split;
    assert_eq!((s.train.len(), s.val.len(), s.test.len()), (60, 500, 1000));
    // Reference (scipy, PyG assembly): nnz 988031, label counts
    // [4103 7739 7875], y[18747]=1 with 65 nonzeros summing to 1.7602917,
    // total feature sum 38716.297.
    assert_eq!(ds.features.nnz(), 988031);
    let mut counts = [0usize; 3];
    for l in &ds.labels {
        counts[l.unwrap()] += 1;
    }
    assert_eq!(counts, [4103, 7739, 7875]);
    assert_eq!(ds.labels[18747], Some(1));
    let (nnz, sum) = row_sum(&ds, 18747);
    assert_eq!(nnz, 65);
    assert!((sum - 1.760_291_7).abs() < 1e-5, "{sum}");
    let total: f64 = ds.features.data().iter().map(|&v| f64::from(v)).sum();
    assert!((total - 38716.297).abs() < 0.05, "{total}");
}

#[test]
fn bad_name_is_invalid_config() {
    let err = Planetoid::load(&planetoid_dir(&vendored()), "reddit").unwrap_err();
    assert!(matches!(err, Error::InvalidConfig(_)), "{err:?}");
}

#[test]
fn missing_file_is_reported() {
    let dir = std::env::temp_dir().join(format!("hdgcn-missing-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let err = Planetoid::load(&dir, "cora").unwrap_err();
    match err {
        Error::MissingFile(p) => assert!(p.ends_with("ind.cora.x"), "{p:?}"),
        other => panic!("expected MissingFile, got {other:?}"),
    }
    // CiteSeer is a valid name: it must fail on the missing file, not the name.
    let err = Planetoid::load(&dir, "CiteSeer").unwrap_err();
    assert!(matches!(err, Error::MissingFile(_)), "{err:?}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn corrupt_file_is_format_error() {
    let dir = std::env::temp_dir().join(format!("hdgcn-corrupt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = planetoid_dir(&vendored());
    for ext in ["x", "y", "tx", "ty", "allx", "ally", "graph", "test.index"] {
        std::fs::copy(
            src.join(format!("ind.cora.{ext}")),
            dir.join(format!("ind.cora.{ext}")),
        )
        .unwrap();
    }
    // Sanity: the copy loads.
    assert_eq!(Planetoid::load(&dir, "cora").unwrap().num_nodes(), 2708);
    // Truncated tx.
    let tx = std::fs::read(src.join("ind.cora.tx")).unwrap();
    std::fs::write(dir.join("ind.cora.tx"), &tx[..tx.len() / 2]).unwrap();
    let err = Planetoid::load(&dir, "cora").unwrap_err();
    assert!(matches!(err, Error::Format { .. }), "{err:?}");
    std::fs::write(dir.join("ind.cora.tx"), &tx).unwrap();
    // Garbage in test.index.
    std::fs::write(dir.join("ind.cora.test.index"), "12\nabc\n").unwrap();
    let err = Planetoid::load(&dir, "cora").unwrap_err();
    assert!(matches!(err, Error::Format { .. }), "{err:?}");
    // test.index with the wrong number of entries.
    std::fs::write(dir.join("ind.cora.test.index"), "1708\n1709\n").unwrap();
    let err = Planetoid::load(&dir, "cora").unwrap_err();
    assert!(matches!(err, Error::Format { .. }), "{err:?}");
    std::fs::copy(
        src.join("ind.cora.test.index"),
        dir.join("ind.cora.test.index"),
    )
    .unwrap();
    // Labels in place of features: wrong object type.
    std::fs::copy(src.join("ind.cora.y"), dir.join("ind.cora.x")).unwrap();
    let err = Planetoid::load(&dir, "cora").unwrap_err();
    assert!(matches!(err, Error::Format { .. }), "{err:?}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn citeseer_test_index_spanning_too_many_ids_is_format_error() {
    // CiteSeer's loader extends tx over the test ids' whole range; a corrupt
    // id far out must be an error, not an impossible allocation.
    let dir = std::env::temp_dir().join(format!("hdgcn-citeseer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = planetoid_dir(&vendored());
    for ext in ["x", "y", "tx", "ty", "allx", "ally", "graph", "test.index"] {
        std::fs::copy(
            src.join(format!("ind.cora.{ext}")),
            dir.join(format!("ind.citeseer.{ext}")),
        )
        .unwrap();
    }
    // Sanity: Cora's files load through the CiteSeer path.
    assert_eq!(Planetoid::load(&dir, "citeseer").unwrap().num_nodes(), 2708);
    let index = std::fs::read_to_string(src.join("ind.cora.test.index")).unwrap();
    let mut ids: Vec<&str> = index.lines().collect();
    for far in ["1000000000000", "18446744073709551615"] {
        *ids.last_mut().unwrap() = far;
        std::fs::write(dir.join("ind.citeseer.test.index"), ids.join("\n")).unwrap();
        let err = Planetoid::load(&dir, "citeseer").unwrap_err();
        assert!(matches!(err, Error::Format { .. }), "{far}: {err:?}");
        assert!(err.to_string().contains("test.index"), "{far}: {err}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn data_root_precedence() {
    assert_eq!(data_root(Some(Path::new("/x/y"))), PathBuf::from("/x/y"));
    // SAFETY: only this test touches HDGCN_DATA in this test binary, and no
    // other thread reads the environment concurrently in a way that matters.
    unsafe { std::env::set_var("HDGCN_DATA", "/from/env") };
    assert_eq!(data_root(None), PathBuf::from("/from/env"));
    assert_eq!(data_root(Some(Path::new("flag"))), PathBuf::from("flag"));
    // SAFETY: as above.
    unsafe { std::env::remove_var("HDGCN_DATA") };
    assert_eq!(data_root(None), PathBuf::from("data"));
    assert_eq!(planetoid_dir(Path::new("r")), PathBuf::from("r/planetoid"));
    assert_eq!(
        geom_gcn_dir(Path::new("r")),
        PathBuf::from("r/geom-gcn-splits")
    );
}

#[test]
fn row_normalized_features_sum_to_one_per_nonempty_row() {
    let ds = Planetoid::load(&planetoid_dir(&vendored()), "cora").unwrap();
    let n = ds.row_normalized_features();
    assert_eq!(n.nnz(), ds.features.nnz());
    for (r, row) in n.outer_iterator().enumerate() {
        let orig: f32 = ds.features.outer_view(r).unwrap().data().iter().sum();
        let s: f32 = row.data().iter().sum();
        if orig == 0.0 {
            assert_eq!(s, 0.0);
        } else {
            assert!((s - 1.0).abs() < 1e-5, "row {r} sums to {s}");
        }
    }
}
