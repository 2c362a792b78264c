//! The Planetoid citation graphs (Cora, CiteSeer, PubMed) in the
//! `ind.<name>.*` format of kimiyoung/planetoid, assembled exactly as
//! PyTorch Geometric's `read_planetoid_data` does.

use super::pickle::{DenseMatrix, decode_csr, decode_dense_matrix, decode_int_list_dict};
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

/// What to do with nodes that the files give no label: CiteSeer's 15
/// featureless nodes (ids in the range of its `test.index` that the file
/// does not list, padded with a zero feature row and an all-zero label
/// row), and any other all-zero label row.
///
/// Planetoid's public split never uses them, but the geom-gcn
/// full-supervised splits put every CiteSeer node, these 15 included, in a
/// mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum UnlabelledNodes {
    /// Give them class 0, the argmax of an all-zero label row, as PyTorch
    /// Geometric's loader and geom-gcn's own do (the default). Their ids are
    /// listed in [`Planetoid::unlabelled`] so that a caller can say so.
    #[default]
    ClassZero,
    /// Leave them without a label (`None` in [`Planetoid::labels`]) and
    /// drop them from the masks of [`Planetoid::geom_gcn_split`] (and of any
    /// split passed to [`Planetoid::without_unlabelled`]).
    Drop,
}

crate::named::named_enum!(UnlabelledNodes, "treatment of unlabelled nodes", {
    ClassZero => "class-zero" | "class_zero",
    Drop => "drop",
});

/// A Planetoid citation graph with its public split.
#[derive(Debug, Clone)]
pub struct Planetoid {
    /// Lower-case dataset name (`cora`, `citeseer` or `pubmed`).
    pub name: String,
    /// Node features, `N x d`, CSR (kept sparse).
    pub features: CsMat<f32>,
    /// Class of each node. The nodes of [`Planetoid::unlabelled`] hold
    /// `Some(0)` under [`UnlabelledNodes::ClassZero`] (the default) and
    /// `None` under [`UnlabelledNodes::Drop`]; every other node holds the
    /// one-hot column of its label row.
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
    /// Nodes (ascending) that the files give no label: padded CiteSeer
    /// nodes and all-zero label rows. Empty for Cora and PubMed. What their
    /// entry in [`Planetoid::labels`] holds depends on
    /// [`Planetoid::unlabelled_policy`].
    pub unlabelled: Vec<usize>,
    /// How the nodes of [`Planetoid::unlabelled`] were treated.
    pub unlabelled_policy: UnlabelledNodes,
}

const NAMES: [&str; 3] = ["cora", "citeseer", "pubmed"];

/// Largest Planetoid pickle [`Planetoid::load`] reads (PubMed's `allx`, the
/// largest of the three datasets, is 7.6 MB). Larger files, and files that
/// are not regular files (FIFOs, devices, links to them), are refused
/// before they are read.
pub const MAX_PLANETOID_FILE_BYTES: u64 = 64 << 20;

/// Bytes a `test.index` line may take on average (a node id, a newline and
/// some blanks), from which the cap of that file derives: `tx` rows times
/// this, plus 4 KiB.
const TEST_INDEX_BYTES_PER_ROW: u64 = 32;

/// The raw contents of the eight `ind.<name>.*` files, for
/// [`Planetoid::from_bytes`].
#[derive(Debug, Clone, Copy, Default)]
pub struct PlanetoidFiles<'a> {
    /// `ind.<name>.x`: CSR pickle, labelled training rows.
    pub x: &'a [u8],
    /// `ind.<name>.tx`: CSR pickle, test rows.
    pub tx: &'a [u8],
    /// `ind.<name>.allx`: CSR pickle, all non-test rows.
    pub allx: &'a [u8],
    /// `ind.<name>.y`: dense one-hot labels of `x`.
    pub y: &'a [u8],
    /// `ind.<name>.ty`: dense one-hot labels of `tx`.
    pub ty: &'a [u8],
    /// `ind.<name>.ally`: dense one-hot labels of `allx`.
    pub ally: &'a [u8],
    /// `ind.<name>.graph`: pickled dict of adjacency lists.
    pub graph: &'a [u8],
    /// `ind.<name>.test.index`: text, one node id a line.
    pub test_index: &'a [u8],
}

/// Where a row of the assembled feature/label matrices comes from.
#[derive(Clone, Copy)]
enum Src {
    All(usize),
    Test(usize),
    Zero,
}

/// The decoded files, each with the name used in error messages.
struct Decoded {
    x: (String, CsMat<f32>),
    tx: (String, CsMat<f32>),
    allx: (String, CsMat<f32>),
    y: (String, DenseMatrix),
    ty: (String, DenseMatrix),
    ally: (String, DenseMatrix),
    graph: (String, Vec<(usize, Vec<usize>)>),
    test_index: (String, Vec<usize>),
}

/// Decodes the files in order; `fetch(ext, cap)` returns a file's label
/// and bytes (`cap`: the most bytes the format allows for it).
fn decode_all(mut fetch: impl FnMut(&str, u64) -> Result<(String, Vec<u8>)>) -> Result<Decoded> {
    let mut csr = |ext: &str| -> Result<(String, CsMat<f32>)> {
        let (p, b) = fetch(ext, MAX_PLANETOID_FILE_BYTES)?;
        let m = decode_csr(&b, &p)?;
        Ok((p, m))
    };
    let x = csr("x")?;
    let tx = csr("tx")?;
    let allx = csr("allx")?;
    let mut dense = |ext: &str| -> Result<(String, DenseMatrix)> {
        let (p, b) = fetch(ext, MAX_PLANETOID_FILE_BYTES)?;
        let m = decode_dense_matrix(&b, &p)?;
        Ok((p, m))
    };
    let y = dense("y")?;
    let ty = dense("ty")?;
    let ally = dense("ally")?;
    let (gp, gb) = fetch("graph", MAX_PLANETOID_FILE_BYTES)?;
    let graph = decode_int_list_dict(&gb, &gp)?;
    drop(gb);
    let ti_cap = (tx.1.rows() as u64)
        .saturating_mul(TEST_INDEX_BYTES_PER_ROW)
        .saturating_add(4096);
    let (tp, tb) = fetch("test.index", ti_cap)?;
    let test_index = parse_test_index(&tb, &tp)?;
    Ok(Decoded {
        x,
        tx,
        allx,
        y,
        ty,
        ally,
        graph: (gp, graph),
        test_index: (tp, test_index),
    })
}

fn check_name(name: &str) -> Result<String> {
    let name = name.to_lowercase();
    if !NAMES.contains(&name.as_str()) {
        return Err(Error::InvalidConfig(format!(
            "unknown Planetoid dataset {name:?} (expected cora, citeseer or pubmed)"
        )));
    }
    Ok(name)
}

impl Planetoid {
    /// Loads `dir/ind.<name>.{x,y,tx,ty,allx,ally,graph,test.index}`, with
    /// the nodes that have no label given class 0
    /// ([`UnlabelledNodes::ClassZero`]; see [`Planetoid::load_with`]).
    ///
    /// `name` is case-insensitive and must be `cora`, `citeseer` or `pubmed`
    /// ([`Error::InvalidConfig`] otherwise). A missing file gives
    /// [`Error::MissingFile`]; a path that is not a regular file (a FIFO, a
    /// device, a link to one) [`Error::Io`]; malformed contents give
    /// [`Error::Format`] naming the file (and the line, row or key), a NaN
    /// or infinite feature [`Error::NonFinite`] naming the file and row.
    ///
    /// Every file is read with a cap: [`MAX_PLANETOID_FILE_BYTES`] for the
    /// pickles, and for `test.index` a size derived from the number of `tx`
    /// rows. Declared shapes are checked against the data present before
    /// anything is allocated from them: a CSR `_shape` may not declare more
    /// feature columns than the feature files store values (unless they use
    /// those columns), the three feature widths and the label widths must
    /// agree, row counts must match between features and labels and between
    /// `tx` and `test.index`, label rows must be one-hot (or all zero),
    /// `test.index` may not name a node of `allx` (a training or validation
    /// node) or a node twice, and graph ids must lie below the node count.
    ///
    /// # CiteSeer's featureless nodes
    ///
    /// CiteSeer's `test.index` skips 15 ids of its range: those nodes have
    /// no feature row and no label row, and the standard fix pads them
    /// with zeros. The geom-gcn splits nonetheless put them in a mask.
    /// Here they get class 0, as in PyG and geom-gcn (see
    /// [`UnlabelledNodes`]), and [`Planetoid::unlabelled`] lists them.
    pub fn load(dir: &Path, name: &str) -> Result<Planetoid> {
        Planetoid::load_with(dir, name, UnlabelledNodes::default())
    }

    /// [`Planetoid::load`] with an explicit treatment of the nodes without
    /// a label.
    ///
    /// ```no_run
    /// use hdgcn::data::{Planetoid, UnlabelledNodes, geom_gcn_dir, planetoid_dir};
    /// use std::path::Path;
    /// let root = Path::new("data");
    /// let ds = Planetoid::load_with(&planetoid_dir(root), "citeseer", UnlabelledNodes::Drop)?;
    /// // The 15 featureless nodes are in no mask of the split.
    /// let split = ds.geom_gcn_split(&geom_gcn_dir(root), 0)?;
    /// assert!(split.train.iter().all(|&i| ds.labels[i].is_some()));
    /// # Ok::<(), hdgcn::Error>(())
    /// ```
    pub fn load_with(dir: &Path, name: &str, unlabelled: UnlabelledNodes) -> Result<Planetoid> {
        let name = check_name(name)?;
        let decoded = decode_all(|ext, cap| {
            let p = dir.join(format!("ind.{name}.{ext}"));
            let what = format!("a Planetoid {ext} file");
            let b = super::read_file_capped(&p, cap, &what)?;
            Ok((p.display().to_string(), b))
        })?;
        assemble(name, decoded, unlabelled)
    }

    /// Assembles a dataset from the contents of its eight files (errors
    /// name them `ind.<name>.<ext>`). Same checks and errors as
    /// [`Planetoid::load_with`], without the size caps of reading.
    pub fn from_bytes(
        name: &str,
        files: &PlanetoidFiles<'_>,
        unlabelled: UnlabelledNodes,
    ) -> Result<Planetoid> {
        let name = check_name(name)?;
        let decoded = decode_all(|ext, _| {
            let b = match ext {
                "x" => files.x,
                "tx" => files.tx,
                "allx" => files.allx,
                "y" => files.y,
                "ty" => files.ty,
                "ally" => files.ally,
                "graph" => files.graph,
                _ => files.test_index,
            };
            Ok((format!("ind.{name}.{ext}"), b.to_vec()))
        })?;
        assemble(name, decoded, unlabelled)
    }

    /// The geom-gcn split `<splits_dir>/<name>_split_0.6_0.2_<index>.npz` of
    /// this dataset, its masks checked to have one entry per node
    /// ([`Error::Format`] naming the file and both lengths otherwise).
    /// Under [`UnlabelledNodes::Drop`] the nodes of
    /// [`Planetoid::unlabelled`] are removed from the three masks; under
    /// [`UnlabelledNodes::ClassZero`] they stay, with class 0.
    pub fn geom_gcn_split(&self, splits_dir: &Path, index: usize) -> Result<Split> {
        let split =
            super::splits::geom_gcn_split_sized(splits_dir, &self.name, index, self.num_nodes())?;
        Ok(match self.unlabelled_policy {
            UnlabelledNodes::Drop => self.without_unlabelled(&split),
            UnlabelledNodes::ClassZero => split,
        })
    }

    /// `split` without the nodes of [`Planetoid::unlabelled`].
    pub fn without_unlabelled(&self, split: &Split) -> Split {
        let keep = |v: &[usize]| -> Vec<usize> {
            v.iter()
                .copied()
                .filter(|i| self.unlabelled.binary_search(i).is_err())
                .collect()
        };
        Split {
            train: keep(&split.train),
            val: keep(&split.val),
            test: keep(&split.test),
        }
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

/// Parses a Planetoid `test.index` file: one node id a line (blank lines
/// skipped); `path` names the file in errors. A line that is not a
/// non-negative integer is an [`Error::Format`] naming the line, as is an
/// empty file.
pub fn parse_test_index(bytes: &[u8], path: &str) -> Result<Vec<usize>> {
    let text = std::str::from_utf8(bytes).map_err(|_| Error::format(path, "not UTF-8 text"))?;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        let v = t
            .parse::<usize>()
            .map_err(|_| Error::format(path, format!("line {}: {t:?} is not a node id", i + 1)))?;
        out.push(v);
    }
    if out.is_empty() {
        return Err(Error::format(path, "no test indices"));
    }
    Ok(out)
}

/// Checks that every row of the label matrix `m` (file `path`) is one-hot
/// or all zero, and returns each row's class (`None` for an all-zero row).
fn one_hot_labels(m: &DenseMatrix, path: &str) -> Result<Vec<Option<usize>>> {
    let mut out = Vec::with_capacity(m.rows);
    for (r, row) in m.data.chunks_exact(m.cols.max(1)).take(m.rows).enumerate() {
        let mut label = None;
        for (j, &v) in row.iter().enumerate() {
            if v == 0.0 {
                continue;
            }
            if v != 1.0 {
                return Err(Error::format(
                    path,
                    format!("row {r}, column {j}: label value {v} is not 0 or 1 (one-hot rows)"),
                ));
            }
            if let Some(first) = label {
                return Err(Error::format(
                    path,
                    format!("row {r}: two classes ({first} and {j}) in a one-hot label row"),
                ));
            }
            label = Some(j);
        }
        out.push(label);
    }
    Ok(out)
}

/// Checks that every stored feature of `m` (file `path`) is finite.
fn check_finite(m: &CsMat<f32>, path: &str) -> Result<()> {
    for (r, row) in m.outer_iterator().enumerate() {
        if let Some((c, &v)) = row.iter().find(|(_, v)| !v.is_finite()) {
            return Err(Error::NonFinite {
                what: format!("features of {path}, row {r} column {c}"),
                value: f64::from(v),
            });
        }
    }
    Ok(())
}

/// One past the largest column index stored in `m` (0 if none).
fn used_width(m: &CsMat<f32>) -> usize {
    m.indices().iter().max().map_or(0, |&c| c + 1)
}

fn assemble(name: String, files: Decoded, policy: UnlabelledNodes) -> Result<Planetoid> {
    let Decoded {
        x: (x_path, x),
        tx: (tx_path, tx),
        allx: (allx_path, allx),
        y: (y_path, y),
        ty: (ty_path, ty),
        ally: (ally_path, ally),
        graph: (graph_path, graph),
        test_index: (ti_path, test_index),
    } = files;
    let fmt = |what: &str| Error::format(format!("ind.{name}.*"), what.to_string());

    // Declared widths must be backed by data: a feature column that no row
    // uses is possible, but not more of them than there are stored values.
    let stored = x.nnz().saturating_add(tx.nnz()).saturating_add(allx.nnz());
    let used = used_width(&x).max(used_width(&tx)).max(used_width(&allx));
    for (path, m) in [(&x_path, &x), (&tx_path, &tx), (&allx_path, &allx)] {
        if m.cols() > used.max(stored) {
            return Err(Error::format(
                path.as_str(),
                format!(
                    "the CSR shape declares {} feature columns, but the feature files store \
                     {stored} values, all in columns below {used}",
                    m.cols()
                ),
            ));
        }
    }
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
    for (fp, f, lp, l) in [
        (&x_path, &x, &y_path, &y),
        (&tx_path, &tx, &ty_path, &ty),
        (&allx_path, &allx, &ally_path, &ally),
    ] {
        if f.rows() != l.rows {
            return Err(Error::format(
                lp.as_str(),
                format!(
                    "{} label rows, but {fp} has {} feature rows",
                    l.rows,
                    f.rows()
                ),
            ));
        }
    }
    if x.rows() > allx.rows() {
        return Err(Error::format(
            x_path.as_str(),
            format!(
                "{} training rows, more than the {} rows of {allx_path}",
                x.rows(),
                allx.rows()
            ),
        ));
    }
    check_finite(&x, &x_path)?;
    check_finite(&tx, &tx_path)?;
    check_finite(&allx, &allx_path)?;
    one_hot_labels(&y, &y_path)?;
    let ty_labels = one_hot_labels(&ty, &ty_path)?;
    let ally_labels = one_hot_labels(&ally, &ally_path)?;

    if tx.rows() != test_index.len() {
        return Err(Error::format(
            ti_path.as_str(),
            format!(
                "{} entries, but {tx_path} has {} rows",
                test_index.len(),
                tx.rows()
            ),
        ));
    }
    // Test nodes come after the allx rows: the first len(y) nodes train,
    // the next 500 validate, and the rest of allx is unlabelled context.
    let n_train = y.rows;
    let n_all = allx.rows();
    if let Some((i, &t)) = test_index.iter().enumerate().find(|(_, t)| **t < n_all) {
        let role = if t < n_train {
            "a training node (train and test would overlap)"
        } else if t < n_train + 500 {
            "a validation node (validation and test would overlap)"
        } else {
            "a row of allx"
        };
        return Err(Error::format(
            ti_path.as_str(),
            format!(
                "entry {}: node {t} is {role}; test ids must be at least {n_all}, the number of \
                 allx rows",
                i + 1
            ),
        ));
    }
    let mut sorted = test_index.clone();
    sorted.sort_unstable();
    if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
        return Err(Error::format(
            ti_path.as_str(),
            format!("node {} listed twice", w[0]),
        ));
    }
    let (min, max) = (sorted[0], sorted[sorted.len() - 1]);

    // Row sources of cat([allx, tx]) (CiteSeer: tx extended to the full
    // min..=max range, tx rows placed at sorted[i] - min, as PyG does).
    let mut src: Vec<Src> = (0..n_all).map(Src::All).collect();
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
            return Err(Error::format(
                ti_path.as_str(),
                format!(
                    "test ids span {min}..={max}, more than the {graph_ids} node ids of \
                     {graph_path}"
                ),
            ));
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
        let line = test_index
            .iter()
            .position(|&t| t == max)
            .map_or(0, |i| i + 1);
        return Err(Error::format(
            ti_path.as_str(),
            format!("entry {line}: node {max} out of range for {n} nodes (allx rows + test rows)"),
        ));
    }
    // x[test_index] = x[sorted_test_index]
    let old = src.clone();
    for (&t, &s) in test_index.iter().zip(&sorted) {
        src[t] = old[s];
    }

    // Edges: drop self loops, symmetrise, sort, dedup (checked before the
    // features are assembled).
    let mut edges = Vec::new();
    for (u, nbrs) in &graph {
        if *u >= n {
            return Err(Error::format(
                graph_path.as_str(),
                format!("key {u} is out of range for {n} nodes"),
            ));
        }
        for &v in nbrs {
            if v >= n {
                return Err(Error::format(
                    graph_path.as_str(),
                    format!("key {u}: neighbour {v} is out of range for {n} nodes"),
                ));
            }
            if *u != v {
                edges.push((*u, v));
                edges.push((v, *u));
            }
        }
    }
    edges.sort_unstable();
    edges.dedup();

    if n_train + 500 > n {
        return Err(fmt("too few nodes for the public split"));
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

    let mut labels: Vec<Option<usize>> = src
        .iter()
        .map(|s| match *s {
            Src::All(r) => ally_labels[r],
            Src::Test(r) => ty_labels[r],
            Src::Zero => None,
        })
        .collect();
    let unlabelled: Vec<usize> = (0..n).filter(|&i| labels[i].is_none()).collect();
    if policy == UnlabelledNodes::ClassZero {
        for &i in &unlabelled {
            labels[i] = Some(0);
        }
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
        unlabelled,
        unlabelled_policy: policy,
    })
}
