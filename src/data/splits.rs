//! Node splits: the geom-gcn full-supervised splits and seeded random splits.

use super::Split;
use crate::{Error, Result};
use ndarray::Array1;
use ndarray_npy::NpzReader;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use std::path::Path;

/// Converts three boolean masks over the node order into a [`Split`]
/// (sorted node ids).
///
/// The masks must have equal lengths ([`Error::ShapeMismatch`]) and be
/// pairwise disjoint ([`Error::InvalidConfig`]).
pub fn masks_to_split(train: &[bool], val: &[bool], test: &[bool]) -> Result<Split> {
    if val.len() != train.len() {
        return Err(Error::shape(
            "masks_to_split(val)",
            train.len().to_string(),
            val.len().to_string(),
        ));
    }
    if test.len() != train.len() {
        return Err(Error::shape(
            "masks_to_split(test)",
            train.len().to_string(),
            test.len().to_string(),
        ));
    }
    for i in 0..train.len() {
        let count = usize::from(train[i]) + usize::from(val[i]) + usize::from(test[i]);
        if count > 1 {
            return Err(Error::InvalidConfig(format!(
                "split masks overlap at node {i}"
            )));
        }
    }
    let ids = |m: &[bool]| {
        m.iter()
            .enumerate()
            .filter(|(_, b)| **b)
            .map(|(i, _)| i)
            .collect()
    };
    Ok(Split {
        train: ids(train),
        val: ids(val),
        test: ids(test),
    })
}

/// Reads the geom-gcn split `<dir>/<name>_split_0.6_0.2_<index>.npz`
/// (boolean arrays `train_mask`, `val_mask`, `test_mask`).
///
/// A missing file gives [`Error::MissingFile`]; a missing array, wrong dtype,
/// unequal lengths or overlapping masks give [`Error::Format`].
pub fn geom_gcn_split(root_splits_dir: &Path, name: &str, index: usize) -> Result<Split> {
    let name = name.to_lowercase();
    let path = root_splits_dir.join(format!("{name}_split_0.6_0.2_{index}.npz"));
    let ps = path.display().to_string();
    let file = std::fs::File::open(&path).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            Error::MissingFile(path.clone())
        } else {
            Error::io(&path, e)
        }
    })?;
    let mut npz =
        NpzReader::new(file).map_err(|e| Error::format(&ps, format!("not an npz archive: {e}")))?;
    let mut mask = |key: &str| -> Result<Vec<bool>> {
        let a: Array1<bool> = npz
            .by_name(key)
            .map_err(|e| Error::format(&ps, format!("array {key}: {e}")))?;
        Ok(a.to_vec())
    };
    let train = mask("train_mask")?;
    let val = mask("val_mask")?;
    let test = mask("test_mask")?;
    masks_to_split(&train, &val, &test).map_err(|e| Error::format(&ps, e.to_string()))
}

/// Seeded random split in the manner of PyG's `RandomNodeSplit(split="random")`.
///
/// For each class, `train_per_class` labelled nodes are drawn for training;
/// `num_val` and then `num_test` nodes are drawn from the remaining labelled
/// nodes. Unlabelled nodes (`None`) are never used. Each list is sorted.
/// Deterministic for a given `seed` (`StdRng::seed_from_u64`).
///
/// Errors: a label `>= num_classes` gives [`Error::IndexOutOfRange`]; a class
/// with fewer than `train_per_class` nodes, or too few remaining nodes for
/// `num_val + num_test`, gives [`Error::InvalidConfig`].
pub fn random_split(
    labels: &[Option<usize>],
    num_classes: usize,
    train_per_class: usize,
    num_val: usize,
    num_test: usize,
    seed: u64,
) -> Result<Split> {
    let mut per_class: Vec<Vec<usize>> = vec![Vec::new(); num_classes];
    for (i, l) in labels.iter().enumerate() {
        if let Some(c) = *l {
            per_class
                .get_mut(c)
                .ok_or(Error::IndexOutOfRange {
                    what: "class label",
                    index: c,
                    len: num_classes,
                })?
                .push(i);
        }
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let mut in_train = vec![false; labels.len()];
    let mut train = Vec::with_capacity(train_per_class.saturating_mul(num_classes));
    for (c, nodes) in per_class.iter_mut().enumerate() {
        if nodes.len() < train_per_class {
            return Err(Error::InvalidConfig(format!(
                "class {c} has {} labelled nodes, fewer than train_per_class = {train_per_class}",
                nodes.len()
            )));
        }
        nodes.shuffle(&mut rng);
        for &i in &nodes[..train_per_class] {
            in_train[i] = true;
            train.push(i);
        }
    }
    let mut rest: Vec<usize> = (0..labels.len())
        .filter(|&i| labels[i].is_some() && !in_train[i])
        .collect();
    let needed = num_val
        .checked_add(num_test)
        .ok_or_else(|| Error::InvalidConfig("num_val + num_test overflows".into()))?;
    if rest.len() < needed {
        return Err(Error::InvalidConfig(format!(
            "{} labelled nodes remain after training, need {needed} for val + test",
            rest.len()
        )));
    }
    rest.shuffle(&mut rng);
    let mut val = rest[..num_val].to_vec();
    let mut test = rest[num_val..needed].to_vec();
    train.sort_unstable();
    val.sort_unstable();
    test.sort_unstable();
    Ok(Split { train, val, test })
}
