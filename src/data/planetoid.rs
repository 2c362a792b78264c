//! The Planetoid citation graphs (Cora, CiteSeer, PubMed) in the
//! `ind.<name>.*` format of kimiyoung/planetoid, assembled exactly as
//! PyTorch Geometric's `read_planetoid_data` does.

use super::pickle::{DenseMatrix, decode_csr, decode_dense_matrix, decode_int_list_dict};
use super::read_file;
use crate::{Error, Result};
use sprs::CsMat;
use std::path::Path;

/// A train / validation / test partition of node ids (each sorted ascending
/// unless documented otherwise).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Split {
    /// Training node ids.
    pub train: Vec<usize>,
    /// Validation node ids.
    pub val: Vec<usize>,
    /// Test node ids.
    pub test: Vec<usize>,
}

/// A Planetoid citation graph with its public split.
#[derive(Debug, Clone)]
pub struct Planetoid {
    /// Lower-case dataset name (`cora`, `citeseer` or `pubmed`).
    pub name: String,
    /// Node features, `N x d`, CSR (kept sparse).
    pub features: CsMat<f32>,
    /// Class of each node; `None` for nodes without a label (CiteSeer's
    /// padded, featureless test-range nodes).
    pub labels: Vec<Option<usize>>,
    /// Number of classes (width of the one-hot label matrices).
    pub num_classes: usize,
    /// Directed edge list holding both directions of every undirected edge,
    /// without self loops, deduplicated and sorted by `(src, dst)` — the same
    /// set as PyG's `edge_index`.
    pub edges: Vec<(usize, usize)>,
    /// Public split: train = first `len(y)` nodes, val = the next 500,
    /// test = sorted `test.index`.
    pub public_split: Split,
}

const NAMES: [&str; 3] = ["cora", "citeseer", "pubmed"];

/// Where a row of the assembled feature/label matrices comes from.
#[derive(Clone, Copy)]
enum Src {
    All(usize),
    Test(usize),
    Zero,
}

impl Planetoid {
    /// Loads `dir/ind.<name>.{x,y,tx,ty,allx,ally,graph,test.index}`.
    ///
    /// `name` is case-insensitive and must be `cora`, `citeseer` or `pubmed`
    /// ([`Error::InvalidConfig`] otherwise). A missing file gives
    /// [`Error::MissingFile`]; malformed contents give [`Error::Format`].
    pub fn load(dir: &Path, name: &str) -> Result<Planetoid> {
        let name = name.to_lowercase();
        if !NAMES.contains(&name.as_str()) {
            return Err(Error::InvalidConfig(format!(
                "unknown Planetoid dataset {name:?} (expected cora, citeseer or pubmed)"
            )));
        }
        let file = |ext: &str| dir.join(format!("ind.{name}.{ext}"));
        let load_csr = |ext: &str| -> Result<CsMat<f32>> {
            let p = file(ext);
            decode_csr(&read_file(&p)?, &p.display().to_string())
        };
        let load_dense = |ext: &str| -> Result<DenseMatrix> {
            let p = file(ext);
            decode_dense_matrix(&read_file(&p)?, &p.display().to_string())
        };
        // Read every file first so that a missing one is reported as such.
        let x = load_csr("x")?;
        let tx = load_csr("tx")?;
        let allx = load_csr("allx")?;
        let y = load_dense("y")?;
        let ty = load_dense("ty")?;
        let ally = load_dense("ally")?;
        let graph_path = file("graph");
        let graph =
            decode_int_list_dict(&read_file(&graph_path)?, &graph_path.display().to_string())?;
        let ti_path = file("test.index");
        let test_index = parse_test_index(&read_file(&ti_path)?, &ti_path)?;
        assemble(name, x, tx, allx, y, ty, ally, graph, test_index)
    }

    /// Number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.labels.len()
    }

    /// Number of input features per node.
    pub fn num_features(&self) -> usize {
        self.features.cols()
    }

    /// Features with every row scaled to sum to 1 (rows summing to 0 are
    /// left at 0): PyG's `NormalizeFeatures`, Kipf & Welling's
    /// `preprocess_features`.
    pub fn row_normalized_features(&self) -> CsMat<f32> {
        let m = &self.features;
        let mut data = m.data().to_vec();
        for w in m.indptr().to_proper().windows(2) {
            let row = &mut data[w[0]..w[1]];
            let sum: f32 = row.iter().sum();
            if sum != 0.0 {
                row.iter_mut().for_each(|v| *v /= sum);
            }
        }
        CsMat::new(
            m.shape(),
            m.indptr().to_proper().into_owned(),
            m.indices().to_vec(),
            data,
        )
    }
}

fn parse_test_index(bytes: &[u8], path: &Path) -> Result<Vec<usize>> {
    let ps = path.display().to_string();
    let text = std::str::from_utf8(bytes).map_err(|_| Error::format(&ps, "not UTF-8 text"))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        let v = t
            .parse::<usize>()
            .map_err(|_| Error::format(&ps, format!("line {}: {t:?} is not a node id", i + 1)))?;
        out.push(v);
    }
    if out.is_empty() {
        return Err(Error::format(&ps, "no test indices"));
    }
    Ok(out)
}

/// Row-wise label: index of the first maximum, `None` for an all-zero row.
fn row_label(m: &DenseMatrix, r: usize) -> Option<usize> {
    let row = &m.data[r * m.cols..(r + 1) * m.cols];
    let mut best: Option<(usize, f64)> = None;
    for (j, &v) in row.iter().enumerate() {
        if v != 0.0 && best.is_none_or(|(_, b)| v > b) {
            best = Some((j, v));
        }
    }
    best.map(|(j, _)| j)
}

#[allow(clippy::too_many_arguments)]
fn assemble(
    name: String,
    x: CsMat<f32>,
    tx: CsMat<f32>,
    allx: CsMat<f32>,
    y: DenseMatrix,
    ty: DenseMatrix,
    ally: DenseMatrix,
    graph: Vec<(usize, Vec<usize>)>,
    test_index: Vec<usize>,
) -> Result<Planetoid> {
    let fmt = |what: &str| Error::format(format!("ind.{name}.*"), what.to_string());
    let d = allx.cols();
    if x.cols() != d || tx.cols() != d {
        return Err(fmt(&format!(
            "feature widths differ: x {}, tx {}, allx {d}",
            x.cols(),
            tx.cols()
        )));
    }
    let c = ally.cols;
    if y.cols != c || ty.cols != c || c == 0 {
        return Err(fmt(&format!(
            "label widths differ or are zero: y {}, ty {}, ally {c}",
            y.cols, ty.cols
        )));
    }
    if x.rows() != y.rows || tx.rows() != ty.rows || allx.rows() != ally.rows {
        return Err(fmt("feature and label row counts differ"));
    }
    if tx.rows() != test_index.len() {
        return Err(fmt(&format!(
            "tx has {} rows but test.index has {} entries",
            tx.rows(),
            test_index.len()
        )));
    }
    let mut sorted = test_index.clone();
    sorted.sort_unstable();
    if sorted.windows(2).any(|w| w[0] == w[1]) {
        return Err(fmt("duplicate node id in test.index"));
    }
    let (min, max) = (sorted[0], sorted[sorted.len() - 1]);

    // Row sources of cat([allx, tx]) (CiteSeer: tx extended to the full
    // min..=max range, tx rows placed at sorted[i] - min, as PyG does).
    let mut src: Vec<Src> = (0..allx.rows()).map(Src::All).collect();
    if name == "citeseer" {
        // The range cannot span more ids than the graph mentions (a
        // corrupt index would otherwise ask for an impossible allocation).
        let len = (max - min).saturating_add(1);
        let graph_ids = graph
            .iter()
            .flat_map(|(u, nbrs)| std::iter::once(u).chain(nbrs))
            .max()
            .map_or(0, |&m| m.saturating_add(1));
        if len > graph_ids.max(tx.rows()) {
            return Err(fmt(&format!(
                "test.index spans ids {min}..={max}, more than the graph's {graph_ids} node ids"
            )));
        }
        let mut ext = vec![Src::Zero; len];
        for (i, &s) in sorted.iter().enumerate() {
            ext[s - min] = Src::Test(i);
        }
        src.extend(ext);
    } else {
        src.extend((0..tx.rows()).map(Src::Test));
    }
    let n = src.len();
    if max >= n {
        return Err(Error::NodeOutOfRange {
            index: max,
            num_nodes: n,
        });
    }
    // x[test_index] = x[sorted_test_index]
    let old = src.clone();
    for (&t, &s) in test_index.iter().zip(&sorted) {
        src[t] = old[s];
    }

    // Features, row by row (stays sparse).
    let mut indptr = Vec::with_capacity(n + 1);
    let mut indices = Vec::with_capacity(allx.nnz() + tx.nnz());
    let mut data = Vec::with_capacity(allx.nnz() + tx.nnz());
    indptr.push(0);
    for s in &src {
        let row = match *s {
            Src::All(r) => allx.outer_view(r),
            Src::Test(r) => tx.outer_view(r),
            Src::Zero => None,
        };
        if let Some(row) = row {
            for (j, &v) in row.iter() {
                indices.push(j);
                data.push(v);
            }
        }
        indptr.push(indices.len());
    }
    let features = CsMat::try_new((n, d), indptr, indices, data)
        .map_err(|(_, _, _, e)| fmt(&format!("assembled features invalid: {e}")))?;

    let labels: Vec<Option<usize>> = src
        .iter()
        .map(|s| match *s {
            Src::All(r) => row_label(&ally, r),
            Src::Test(r) => row_label(&ty, r),
            Src::Zero => None,
        })
        .collect();

    // Edges: drop self loops, symmetrise, sort, dedup.
    let mut edges = Vec::new();
    for (u, nbrs) in &graph {
        for &v in nbrs {
            for idx in [*u, v] {
                if idx >= n {
                    return Err(Error::NodeOutOfRange {
                        index: idx,
                        num_nodes: n,
                    });
                }
            }
            if *u != v {
                edges.push((*u, v));
                edges.push((v, *u));
            }
        }
    }
    edges.sort_unstable();
    edges.dedup();

    let n_train = y.rows;
    if n_train + 500 > n {
        return Err(fmt("too few nodes for the public split"));
    }
    let public_split = Split {
        train: (0..n_train).collect(),
        val: (n_train..n_train + 500).collect(),
        test: sorted,
    };
    Ok(Planetoid {
        name,
        features,
        labels,
        num_classes: c,
        edges,
        public_split,
    })
}
