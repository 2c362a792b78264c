//! geom-gcn splits (real files) and seeded random splits.

use hdgcn::Error;
use hdgcn::data::{geom_gcn_split, masks_to_split, random_split};
use std::collections::HashSet;
use std::path::{Path, PathBuf};

mod common;

fn splits_dir() -> PathBuf {
    common::benchmark_root("geom-gcn-splits").join("geom-gcn-splits")
}

#[test]
#[cfg_attr(
    not(hdgcn_data_tests),
    ignore = "needs the benchmark data: set HDGCN_DATA or put ../shared/data beside the crate"
)]
fn geom_gcn_cora_split0_counts() {
    let dir = splits_dir();
    // Reference: numpy.load(...)['train_mask'].sum() etc. -> 1192 / 796 / 497.
    let s = geom_gcn_split(&dir, "cora", 0).unwrap();
    assert_eq!((s.train.len(), s.val.len(), s.test.len()), (1192, 796, 497));
    // The 223 unconnected nodes are in no split.
    let text = std::fs::read_to_string(dir.join("cora_unconnected_nodes.txt")).unwrap();
    let unconnected: HashSet<usize> = text
        .split_whitespace()
        .filter_map(|t| t.parse().ok())
        .collect();
    assert_eq!(unconnected.len(), 223);
    let all: Vec<usize> = s
        .train
        .iter()
        .chain(&s.val)
        .chain(&s.test)
        .copied()
        .collect();
    assert_eq!(all.len(), 2708 - 223);
    assert!(all.iter().all(|i| !unconnected.contains(i) && *i < 2708));
    assert!(s.train.windows(2).all(|w| w[0] < w[1]));
}

#[test]
#[cfg_attr(
    not(hdgcn_data_tests),
    ignore = "needs the benchmark data: set HDGCN_DATA or put ../shared/data beside the crate"
)]
fn geom_gcn_all_splits_are_valid() {
    let dir = splits_dir();
    for (name, n) in [("cora", 2708), ("pubmed", 19717)] {
        let mut distinct = HashSet::new();
        for i in 0..10 {
            let s = geom_gcn_split(&dir, name, i).unwrap();
            let total = s.train.len() + s.val.len() + s.test.len();
            assert!(total <= n && total > n * 9 / 10, "{name} {i}: {total}");
            // About 48 / 32 / 20 per cent.
            let frac = s.train.len() as f64 / total as f64;
            assert!((frac - 0.48).abs() < 0.01, "{name} {i}: {frac}");
            let mut seen = HashSet::new();
            for &v in s.train.iter().chain(&s.val).chain(&s.test) {
                assert!(v < n && seen.insert(v), "disjoint and in range");
            }
            distinct.insert(s.train.clone());
        }
        assert_eq!(distinct.len(), 10, "{name}: ten different splits");
    }
}

#[test]
#[cfg_attr(
    not(hdgcn_data_tests),
    ignore = "needs the benchmark data: set HDGCN_DATA or put ../shared/data beside the crate"
)]
fn geom_gcn_errors() {
    let dir = splits_dir();
    let err = geom_gcn_split(&dir, "cora", 10).unwrap_err();
    assert!(matches!(err, Error::MissingFile(_)), "{err:?}");
    // A file that is not an npz archive.
    let tmp = std::env::temp_dir().join(format!("hdgcn-npz-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::write(tmp.join("cora_split_0.6_0.2_0.npz"), b"not a zip").unwrap();
    let err = geom_gcn_split(&tmp, "cora", 0).unwrap_err();
    assert!(matches!(err, Error::Format { .. }), "{err:?}");
    // Truncated archive.
    let real = std::fs::read(dir.join("cora_split_0.6_0.2_0.npz")).unwrap();
    std::fs::write(
        tmp.join("cora_split_0.6_0.2_0.npz"),
        &real[..real.len() / 2],
    )
    .unwrap();
    let err = geom_gcn_split(&tmp, "cora", 0).unwrap_err();
    assert!(matches!(err, Error::Format { .. }), "{err:?}");
    std::fs::remove_dir_all(&tmp).ok();
}

#[test]
fn masks_to_split_checks() {
    let s = masks_to_split(
        &[true, false, false, false],
        &[false, true, false, false],
        &[false, false, false, true],
    )
    .unwrap();
    assert_eq!((s.train, s.val, s.test), (vec![0], vec![1], vec![3]));
    let err = masks_to_split(&[true], &[false, true], &[false]).unwrap_err();
    assert!(matches!(err, Error::ShapeMismatch { .. }), "{err:?}");
    let err = masks_to_split(&[true, false], &[true, false], &[false, false]).unwrap_err();
    assert!(matches!(err, Error::InvalidConfig(_)), "{err:?}");
}

fn labels() -> Vec<Option<usize>> {
    // 3 classes x 30 nodes, plus 5 unlabelled nodes.
    let mut l: Vec<Option<usize>> = (0..90).map(|i| Some(i % 3)).collect();
    l.extend([None; 5]);
    l
}

#[test]
fn random_split_counts_and_determinism() {
    let l = labels();
    let a = random_split(&l, 3, 5, 20, 30, 42).unwrap();
    assert_eq!((a.train.len(), a.val.len(), a.test.len()), (15, 20, 30));
    for c in 0..3 {
        assert_eq!(a.train.iter().filter(|&&i| l[i] == Some(c)).count(), 5);
    }
    let mut seen = HashSet::new();
    for &i in a.train.iter().chain(&a.val).chain(&a.test) {
        assert!(l[i].is_some(), "unlabelled node {i} used");
        assert!(seen.insert(i), "node {i} in two sets");
    }
    assert!(a.val.windows(2).all(|w| w[0] < w[1]));
    let b = random_split(&l, 3, 5, 20, 30, 42).unwrap();
    assert_eq!(a, b);
    let c = random_split(&l, 3, 5, 20, 30, 43).unwrap();
    assert_ne!(a, c);
    // Exactly enough nodes: 90 - 15 = 75 remain.
    let d = random_split(&l, 3, 5, 25, 50, 1).unwrap();
    assert_eq!(d.val.len() + d.test.len(), 75);
}

#[test]
fn random_split_errors() {
    let l = labels();
    let err = random_split(&l, 3, 31, 0, 0, 0).unwrap_err();
    assert!(matches!(err, Error::InvalidConfig(_)), "{err:?}");
    let err = random_split(&l, 3, 5, 50, 26, 0).unwrap_err();
    assert!(matches!(err, Error::InvalidConfig(_)), "{err:?}");
    let err = random_split(&l, 2, 5, 1, 1, 0).unwrap_err();
    assert!(
        matches!(err, Error::IndexOutOfRange { index: 2, .. }),
        "{err:?}"
    );
    let err = random_split(&l, 3, 0, usize::MAX, 1, 0).unwrap_err();
    assert!(matches!(err, Error::InvalidConfig(_)), "{err:?}");
}

#[test]
fn random_split_on_cora() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/planetoid");
    let ds = hdgcn::data::Planetoid::load(&dir, "cora").unwrap();
    let s = random_split(&ds.labels, ds.num_classes, 20, 500, 1000, 0).unwrap();
    assert_eq!((s.train.len(), s.val.len(), s.test.len()), (140, 500, 1000));
}

#[test]
fn random_split_huge_num_classes() {
    let l = labels();
    // Label range is validated without allocating per possible class.
    let e = random_split(&l, usize::MAX, 1, 1, 1, 0).unwrap_err();
    assert!(matches!(e, Error::InvalidConfig(_)), "{e:?}");
    let s = random_split(&l, usize::MAX, 0, 10, 10, 0).unwrap();
    assert_eq!((s.train.len(), s.val.len(), s.test.len()), (0, 10, 10));
    // Nor per label value: a far-out class id is one more class.
    let far = 1usize << 40;
    let sparse = [Some(0), Some(far), Some(0), Some(far)];
    let s = random_split(&sparse, far + 1, 0, 1, 1, 0).unwrap();
    assert_eq!((s.val.len(), s.test.len()), (1, 1));
    let e = random_split(&sparse, far + 1, 1, 0, 0, 0).unwrap_err();
    assert!(e.to_string().contains("class 1 has 0"), "{e}");
}
