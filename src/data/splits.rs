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

/// Upper bound on the decompressed size of one `.npy` entry when the node
/// count is not known (real masks are a few kilobytes; 64 Mi nodes is far
/// above any geom-gcn dataset).
const MAX_NPY_BYTES: u64 = 64 << 20;

/// Upper bound on the `.npy` header (format 1.0 stores its length in 16
/// bits; the 10-byte preamble and some slack on top).
const NPY_HEADER_BYTES: u64 = (1 << 16) + 16;

/// Node counts of the datasets that geom-gcn publishes splits for, so that
/// [`geom_gcn_split`] can check mask lengths by name.
const GEOM_GCN_NODES: [(&str, usize); 9] = [
    ("cora", 2708),
    ("citeseer", 3327),
    ("pubmed", 19717),
    ("chameleon", 2277),
    ("squirrel", 5201),
    ("film", 7600),
    ("cornell", 183),
    ("texas", 183),
    ("wisconsin", 251),
];

/// Reads the geom-gcn split `<dir>/<name>_split_0.6_0.2_<index>.npz`
/// (arrays `train_mask`, `val_mask`, `test_mask`, 1-D, dtype `|b1` or `|u1`
/// holding only 0/1 — the published files use both).
///
/// For the datasets geom-gcn publishes (`cora`, `citeseer`, `pubmed`,
/// `chameleon`, `squirrel`, `film`, `cornell`, `texas`, `wisconsin`) each
/// mask must have one entry per node of the dataset; for another name the
/// three masks must merely have equal lengths. Prefer
/// [`Planetoid::geom_gcn_split`](super::Planetoid::geom_gcn_split), which
/// checks against the loaded graph.
///
/// A missing file gives [`Error::MissingFile`], a path that is not a regular
/// file [`Error::Io`]; a damaged archive, a missing array, another dtype,
/// a mask of the wrong length (the error names the file and both lengths),
/// unequal lengths or overlapping masks give [`Error::Format`].
pub fn geom_gcn_split(root_splits_dir: &Path, name: &str, index: usize) -> Result<Split> {
    let name = name.to_lowercase();
    let known = GEOM_GCN_NODES
        .iter()
        .find(|(k, _)| *k == name)
        .map(|&(_, n)| n);
    read_geom_gcn(root_splits_dir, &name, index, known)
}

/// [`geom_gcn_split`] for a graph of `num_nodes` nodes: each mask must have
/// exactly `num_nodes` entries ([`Error::Format`] naming the file and both
/// lengths otherwise), whatever the dataset's name.
pub fn geom_gcn_split_sized(
    root_splits_dir: &Path,
    name: &str,
    index: usize,
    num_nodes: usize,
) -> Result<Split> {
    read_geom_gcn(
        root_splits_dir,
        &name.to_lowercase(),
        index,
        Some(num_nodes),
    )
}

fn read_geom_gcn(dir: &Path, name: &str, index: usize, nodes: Option<usize>) -> Result<Split> {
    let path = dir.join(format!("{name}_split_0.6_0.2_{index}.npz"));
    let ps = path.display().to_string();
    // Three masks of one byte a node, their headers and the zip records.
    let cap = match nodes {
        Some(n) => (n as u64)
            .saturating_add(NPY_HEADER_BYTES + 1024)
            .saturating_mul(3),
        None => 3 * MAX_NPY_BYTES,
    };
    let bytes = super::read_file_capped(&path, cap, "a geom-gcn split")?;
    parse_geom_gcn_npz(&bytes, &ps, nodes)
}

/// Parses the contents of a geom-gcn split `.npz` (see [`geom_gcn_split`]);
/// `path` names it in errors. With `num_nodes`, every mask must have that
/// many entries; decompressed entries are read with a cap derived from it
/// (or from the archive's size), so no length field drives an allocation.
pub fn parse_geom_gcn_npz(bytes: &[u8], path: &str, num_nodes: Option<usize>) -> Result<Split> {
    // Deflate cannot expand more than ~1032:1.
    let cap = match num_nodes {
        Some(n) => n as u64,
        None => (bytes.len() as u64).saturating_mul(1100).min(MAX_NPY_BYTES),
    };
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes))
        .map_err(|e| Error::format(path, format!("not an npz archive: {e}")))?;
    let mut mask = |key: &str| -> Result<Vec<bool>> {
        let mut entry = zip
            .by_name(&format!("{key}.npy"))
            .map_err(|e| Error::format(path, format!("array {key}: {e}")))?;
        read_npy_mask(&mut entry, cap, num_nodes)
            .map_err(|r| Error::format(path, format!("array {key}: {r}")))
    };
    let train = mask("train_mask")?;
    let val = mask("val_mask")?;
    let test = mask("test_mask")?;
    masks_to_split(&train, &val, &test).map_err(|e| Error::format(path, e.to_string()))
}

/// Reads one `.npy` mask from `r`: the header first (capped), then exactly
/// the declared number of entries, which must be `expected` if given and
/// at most `cap`.
fn read_npy_mask(
    r: &mut impl Read,
    cap: u64,
    expected: Option<usize>,
) -> std::result::Result<Vec<bool>, String> {
    let mut raw = Vec::new();
    r.take(NPY_HEADER_BYTES)
        .read_to_end(&mut raw)
        .map_err(|e| e.to_string())?;
    let (n, data_start) = parse_npy_header(&raw)?;
    if let Some(e) = expected {
        if n != e {
            return Err(format!("mask of length {n}, but the graph has {e} nodes"));
        }
    }
    if n as u64 > cap {
        return Err(format!(
            "mask of length {n}, more than the {cap} this archive can hold"
        ));
    }
    let mut data = raw.split_off(data_start);
    drop(raw);
    let want = n.saturating_sub(data.len()) as u64;
    r.take(want + 1)
        .read_to_end(&mut data)
        .map_err(|e| e.to_string())?;
    if data.len() != n {
        return Err(format!(
            "shape ({n},) but {} data bytes{}",
            data.len().min(n + 1),
            if data.len() > n { " or more" } else { "" }
        ));
    }
    data.iter()
        .map(|&b| match b {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(format!("mask value {other} is not 0 or 1")),
        })
        .collect()
}

/// Parses the header of a 1-D `.npy` array of dtype `|b1` / `|u1`: returns
/// its length and where its data starts in `raw`.
fn parse_npy_header(raw: &[u8]) -> std::result::Result<(usize, usize), String> {
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
        return Err("truncated or oversized .npy header".into());
    }
    let header = std::str::from_utf8(&rest[..hlen]).map_err(|_| "non-text .npy header")?;
    let data_start = raw.len() - rest.len() + hlen;
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
    Ok((n, data_start))
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
