//! Node splits: the geom-gcn full-supervised splits and seeded random splits.

use super::Split;
use crate::{Error, Result};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use std::collections::BTreeMap;
use std::io::Read;
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

/// Upper bound on the decompressed size of one `.npy` entry (deflate cannot
/// expand more than ~1032:1, and real masks are a few kilobytes).
const MAX_NPY_BYTES: u64 = 256 << 20;

/// Reads the geom-gcn split `<dir>/<name>_split_0.6_0.2_<index>.npz`
/// (arrays `train_mask`, `val_mask`, `test_mask`, 1-D, dtype `|b1` or `|u1`
/// holding only 0/1 — the published files use both).
///
/// A missing file gives [`Error::MissingFile`]; a damaged archive, a missing
/// array, another dtype, unequal lengths or overlapping masks give
/// [`Error::Format`].
pub fn geom_gcn_split(root_splits_dir: &Path, name: &str, index: usize) -> Result<Split> {
    let name = name.to_lowercase();
    let path = root_splits_dir.join(format!("{name}_split_0.6_0.2_{index}.npz"));
    let ps = path.display().to_string();
    let bytes = super::read_file(&path)?;
    let cap = (bytes.len() as u64).saturating_mul(1100).min(MAX_NPY_BYTES);
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes))
        .map_err(|e| Error::format(&ps, format!("not an npz archive: {e}")))?;
    let mut mask = |key: &str| -> Result<Vec<bool>> {
        let mut entry = zip
            .by_name(&format!("{key}.npy"))
            .map_err(|e| Error::format(&ps, format!("array {key}: {e}")))?;
        let mut raw = Vec::new();
        (&mut entry)
            .take(cap + 1)
            .read_to_end(&mut raw)
            .map_err(|e| Error::format(&ps, format!("array {key}: {e}")))?;
        if raw.len() as u64 > cap {
            return Err(Error::format(&ps, format!("array {key}: entry too large")));
        }
        parse_npy_mask(&raw).map_err(|r| Error::format(&ps, format!("array {key}: {r}")))
    };
    let train = mask("train_mask")?;
    let val = mask("val_mask")?;
    let test = mask("test_mask")?;
    masks_to_split(&train, &val, &test).map_err(|e| Error::format(&ps, e.to_string()))
}

/// Parses a 1-D `.npy` array of dtype `|b1` / `|u1` (values 0 or 1).
fn parse_npy_mask(raw: &[u8]) -> std::result::Result<Vec<bool>, String> {
    let rest = raw
        .strip_prefix(b"\x93NUMPY")
        .ok_or("not an .npy file (bad magic)")?;
    let (major, rest) = match rest {
        [major, _minor, rest @ ..] => (*major, rest),
        _ => return Err("truncated .npy header".into()),
    };
    let (hlen, rest) = match (major, rest) {
        (1, [a, b, rest @ ..]) => (usize::from(u16::from_le_bytes([*a, *b])), rest),
        (2 | 3, [a, b, c, d, rest @ ..]) => (u32::from_le_bytes([*a, *b, *c, *d]) as usize, rest),
        _ => return Err(format!("unsupported .npy version {major}")),
    };
    if hlen > rest.len() {
        return Err("truncated .npy header".into());
    }
    let header = std::str::from_utf8(&rest[..hlen]).map_err(|_| "non-text .npy header")?;
    let data = &rest[hlen..];
    let field = |key: &str| -> std::result::Result<&str, String> {
        let pat = format!("'{key}':");
        let i = header
            .find(&pat)
            .ok_or_else(|| format!(".npy header lacks {key:?}"))?;
        Ok(header[i + pat.len()..].trim_start())
    };
    let descr = field("descr")?;
    if !(descr.starts_with("'|b1'") || descr.starts_with("'|u1'")) {
        return Err(format!(
            "dtype {} is not bool or uint8",
            descr.split(',').next().unwrap_or("")
        ));
    }
    let fortran = field("fortran_order")?;
    if !(fortran.starts_with("False") || fortran.starts_with("True")) {
        return Err("bad fortran_order".into());
    }
    let shape = field("shape")?;
    let inner = shape
        .strip_prefix('(')
        .and_then(|s| s.split(')').next())
        .ok_or("bad shape")?;
    let dims: Vec<&str> = inner
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    let [n] = dims[..] else {
        return Err(format!("expected a 1-D array, got shape ({inner})"));
    };
    let n: usize = n.parse().map_err(|_| format!("bad shape ({inner})"))?;
    if n != data.len() {
        return Err(format!("shape ({n},) but {} data bytes", data.len()));
    }
    data.iter()
        .map(|&b| match b {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(format!("mask value {other} is not 0 or 1")),
        })
        .collect()
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
    // A map of the classes actually present, in class order (never sized
    // by a label value or the caller's `num_classes`, which may be huge).
    let mut per_class: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (i, l) in labels.iter().enumerate() {
        if let Some(c) = *l {
            if c >= num_classes {
                return Err(Error::IndexOutOfRange {
                    what: "class label",
                    index: c,
                    len: num_classes,
                });
            }
            per_class.entry(c).or_default().push(i);
        }
    }
    if train_per_class > 0 {
        if let Some(c) = (0..num_classes).find(|c| !per_class.contains_key(c)) {
            return Err(Error::InvalidConfig(format!(
                "class {c} has 0 labelled nodes, fewer than train_per_class = {train_per_class}"
            )));
        }
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let mut in_train = vec![false; labels.len()];
    let mut train = Vec::with_capacity(train_per_class.saturating_mul(num_classes));
    for (c, nodes) in per_class.iter_mut() {
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
