//! Document-classification corpora of yao8839836/text_gcn (R8, R52, mr,
//! ohsumed), their vocabulary, one word graph per document (math notes §7),
//! seeded validation splits and a GloVe text-file reader.
//!
//! # File layout
//!
//! `<root>/text_gcn/<NAME>.txt` holds one line per document,
//! `id<TAB>split<TAB>label`, where `split` is `train` or `test` (ohsumed
//! writes `training`, accepted as `train`; its ids are paths). The matching
//! `<root>/text_gcn/corpus/<NAME>.clean.txt` holds the documents' text, one
//! line each, already lower-cased and cleaned; tokens are separated by
//! whitespace. Either file may lack a final newline, and `\r\n` line endings
//! are accepted.

use super::read_file_capped;
use crate::graph::Graph;
use crate::{Error, Result};
use ndarray::Array2;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};

/// Whether a document belongs to the training or the test part of a corpus.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DocSplit {
    /// Training document (`train`, or ohsumed's `training`).
    Train,
    /// Test document (`test`).
    Test,
}

/// One document of a [`TextCorpus`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    /// The document's id as written in `<NAME>.txt` (a number, or a path for
    /// ohsumed).
    pub id: String,
    /// Whitespace-separated tokens of its line in `corpus/<NAME>.clean.txt`.
    pub tokens: Vec<String>,
    /// Class id: an index into [`TextCorpus::labels`].
    pub label: usize,
    /// Train or test.
    pub split: DocSplit,
}

/// A text-classification corpus: documents in file order with their labels.
///
/// # Example
///
/// ```
/// use hdgcn::data::text::{DocSplit, TextCorpus, Vocab, doc_graph, validation_split};
///
/// // A tiny corpus in the text_gcn layout (real ones live in `<data>/text_gcn`).
/// let root = std::env::temp_dir().join(format!("hdgcn-doc-text-{}", std::process::id()));
/// std::fs::create_dir_all(root.join("corpus")).unwrap();
/// std::fs::write(root.join("mr.txt"), "0\ttrain\t1\n1\ttrain\t0\n2\ttest\t1").unwrap();
/// std::fs::write(
///     root.join("corpus/mr.clean.txt"),
///     "a fine film\na dull film\nfine fine acting",
/// )
/// .unwrap();
///
/// let corpus = TextCorpus::load(&root, "MR")?;
/// assert_eq!(corpus.docs.len(), 3);
/// assert_eq!(corpus.labels, ["0", "1"]);
/// assert_eq!(corpus.docs[2].split, DocSplit::Test);
///
/// // Vocabulary from the training documents only: "acting" is out of vocabulary.
/// let train = corpus.train_indices();
/// let vocab = Vocab::build(train.iter().map(|&i| &corpus.docs[i]), 1);
/// assert_eq!(vocab.id("acting"), 0); // <unk>
///
/// // One graph per document: nodes = distinct words, window of 3 tokens.
/// let g = doc_graph(&corpus.docs[0], &vocab, 3)?;
/// assert_eq!(g.graph.num_nodes(), 3);
/// assert_eq!(g.graph.num_edges(), 6); // a-fine, a-film, fine-film, both ways
///
/// let (rest, val) = validation_split(&train, 0.5, 0)?;
/// assert_eq!((rest.len(), val.len()), (1, 1));
/// # std::fs::remove_dir_all(&root).ok();
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextCorpus {
    /// Lower-case corpus name (`r8`, `r52`, `mr` or `ohsumed`; free-form for
    /// [`TextCorpus::from_files`]).
    pub name: String,
    /// Every document, in file order.
    pub docs: Vec<Document>,
    /// Class names, sorted ascending (byte order); [`Document::label`]
    /// indexes this.
    pub labels: Vec<String>,
}

/// Largest label or text file [`TextCorpus::load`] reads (the largest
/// text_gcn file, ohsumed's text, is under 10 MB).
pub const MAX_TEXT_FILE_BYTES: u64 = 64 << 20;

/// Known corpora: (lower-case name, file stem).
const CORPORA: [(&str, &str); 4] = [
    ("r8", "R8"),
    ("r52", "R52"),
    ("mr", "mr"),
    ("ohsumed", "ohsumed"),
];

/// `root/text_gcn`: folder of the `<NAME>.txt` files and `corpus/`.
pub fn text_gcn_dir(root: &Path) -> PathBuf {
    root.join("text_gcn")
}

/// Splits file contents into lines: `\n` separated, an optional trailing
/// `\r` removed, no phantom empty line after a final newline. Yields
/// `(1-based line number, line)`; non-UTF-8 is an [`Error::Format`].
fn lines_of<'a>(bytes: &'a [u8], path: &Path) -> Result<Vec<(usize, &'a str)>> {
    let mut out = Vec::new();
    if bytes.is_empty() {
        return Ok(out);
    }
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    for (i, raw) in body.split(|&b| b == b'\n').enumerate() {
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let line = std::str::from_utf8(raw).map_err(|e| {
            Error::format(
                path.display().to_string(),
                format!("line {}: invalid UTF-8 ({e})", i + 1),
            )
        })?;
        out.push((i + 1, line));
    }
    Ok(out)
}

impl TextCorpus {
    /// Loads `root/<NAME>.txt` and `root/corpus/<NAME>.clean.txt`, where
    /// `root` is the `text_gcn` folder (see [`text_gcn_dir`]).
    ///
    /// `name` is case-insensitive: `r8`, `r52`, `mr` or `ohsumed` (file
    /// stems `R8`, `R52`, `mr`, `ohsumed`); anything else is
    /// [`Error::InvalidConfig`].
    ///
    /// Both files are `\n`-separated (a `\r` before it is dropped); the
    /// final newline is optional, so a text file whose last document is
    /// empty must end with one (without it that document's line is not
    /// there, and the line counts differ).
    ///
    /// # Errors
    /// [`Error::MissingFile`] for a missing file; [`Error::Format`] (naming
    /// the file and line) for a line that is not `id<TAB>split<TAB>label`,
    /// an unknown split, an empty label, a label that only test documents
    /// carry (a class no training document can teach), invalid UTF-8, a
    /// label file with no documents, or different numbers of lines in the
    /// two files; [`Error::Io`] for a path that is not a regular file, and
    /// [`Error::Format`] for a file larger than [`MAX_TEXT_FILE_BYTES`].
    pub fn load(root: &Path, name: &str) -> Result<TextCorpus> {
        let lower = name.to_lowercase();
        let Some(&(key, stem)) = CORPORA.iter().find(|(k, _)| *k == lower) else {
            return Err(Error::InvalidConfig(format!(
                "unknown text corpus {name:?} (expected r8, r52, mr or ohsumed)"
            )));
        };
        TextCorpus::from_files(
            key,
            &root.join(format!("{stem}.txt")),
            &root.join("corpus").join(format!("{stem}.clean.txt")),
        )
    }

    /// Loads a corpus in the text_gcn format from explicit paths: the label
    /// file (`id<TAB>split<TAB>label` lines) and the text file (one document
    /// a line). `name` is stored as given. Errors as [`TextCorpus::load`].
    ///
    /// Each file is read only if it is a regular file (a FIFO or device is
    /// an [`Error::Io`]) of at most [`MAX_TEXT_FILE_BYTES`].
    pub fn from_files(name: &str, labels_path: &Path, text_path: &Path) -> Result<TextCorpus> {
        let meta_bytes = read_file_capped(labels_path, MAX_TEXT_FILE_BYTES, "a label file")?;
        let text_bytes = read_file_capped(text_path, MAX_TEXT_FILE_BYTES, "a corpus text file")?;
        TextCorpus::parse(name, labels_path, &meta_bytes, text_path, &text_bytes)
    }

    /// Parses a corpus from the contents of its label file and text file
    /// (see [`TextCorpus::load`]); errors name them `<name>.txt` and
    /// `corpus/<name>.clean.txt`.
    pub fn from_bytes(name: &str, labels: &[u8], text: &[u8]) -> Result<TextCorpus> {
        let lp = PathBuf::from(format!("{name}.txt"));
        let tp = PathBuf::from(format!("corpus/{name}.clean.txt"));
        TextCorpus::parse(name, &lp, labels, &tp, text)
    }

    fn parse(
        name: &str,
        labels_path: &Path,
        meta_bytes: &[u8],
        text_path: &Path,
        text_bytes: &[u8],
    ) -> Result<TextCorpus> {
        let meta = lines_of(meta_bytes, labels_path)?;
        let text = lines_of(text_bytes, text_path)?;
        let bad = |path: &Path, line: usize, why: String| {
            Error::format(path.display().to_string(), format!("line {line}: {why}"))
        };
        if meta.is_empty() {
            return Err(Error::format(
                labels_path.display().to_string(),
                "no documents",
            ));
        }
        if meta.len() != text.len() {
            // Report the first line present in one file and missing in the other.
            let (path, line) = if text.len() > meta.len() {
                (text_path, meta.len() + 1)
            } else {
                (labels_path, text.len() + 1)
            };
            return Err(bad(
                path,
                line,
                format!(
                    "{} lists {} documents but {} has {}",
                    labels_path.display(),
                    meta.len(),
                    text_path.display(),
                    text.len()
                ),
            ));
        }
        let mut raw = Vec::with_capacity(meta.len());
        for &(line, m) in &meta {
            let fields: Vec<&str> = m.split('\t').collect();
            if fields.len() != 3 {
                return Err(bad(
                    labels_path,
                    line,
                    format!(
                        "expected 3 tab-separated fields (id, split, label), found {}",
                        fields.len()
                    ),
                ));
            }
            let split = match fields[1].trim() {
                "train" | "training" => DocSplit::Train,
                "test" => DocSplit::Test,
                other => {
                    return Err(bad(
                        labels_path,
                        line,
                        format!("unknown split {other:?} (expected train, training or test)"),
                    ));
                }
            };
            let label = fields[2].trim();
            if label.is_empty() {
                return Err(bad(labels_path, line, "empty label".into()));
            }
            raw.push((fields[0].trim().to_string(), split, label));
        }
        let labels: Vec<String> = raw
            .iter()
            .map(|r| r.2)
            .collect::<BTreeSet<_>>()
            .into_iter()
            .map(str::to_string)
            .collect();
        let label_id: HashMap<&str, usize> = labels
            .iter()
            .enumerate()
            .map(|(i, l)| (l.as_str(), i))
            .collect();
        // A class that no training document carries cannot be learnt: refuse
        // it, naming its first line.
        let mut in_train = vec![false; labels.len()];
        for r in &raw {
            if r.1 == DocSplit::Train {
                in_train[label_id[r.2]] = true;
            }
        }
        if let Some((&(line, _), r)) = meta
            .iter()
            .zip(&raw)
            .find(|(_, r)| !in_train[label_id[r.2]])
        {
            return Err(bad(
                labels_path,
                line,
                format!(
                    "label {:?} occurs only in test documents: no training document \
                     teaches that class",
                    r.2
                ),
            ));
        }
        let docs = raw
            .into_iter()
            .zip(&text)
            .map(|((id, split, label), &(_, t))| Document {
                id,
                tokens: t.split_whitespace().map(str::to_string).collect(),
                label: label_id[label],
                split,
            })
            .collect();
        Ok(TextCorpus {
            name: name.to_string(),
            docs,
            labels,
        })
    }

    /// Indices (into [`TextCorpus::docs`], ascending) of the training documents.
    pub fn train_indices(&self) -> Vec<usize> {
        self.indices(DocSplit::Train)
    }

    /// Indices (into [`TextCorpus::docs`], ascending) of the test documents.
    pub fn test_indices(&self) -> Vec<usize> {
        self.indices(DocSplit::Test)
    }

    fn indices(&self, split: DocSplit) -> Vec<usize> {
        self.docs
            .iter()
            .enumerate()
            .filter(|(_, d)| d.split == split)
            .map(|(i, _)| i)
            .collect()
    }

    /// Number of classes (`labels.len()`).
    pub fn num_classes(&self) -> usize {
        self.labels.len()
    }
}

/// A word vocabulary: token -> id, with id 0 reserved for the
/// out-of-vocabulary token [`Vocab::UNK`].
///
/// Ids `1..` are assigned by decreasing count, ties broken by byte order of
/// the token, so a vocabulary is a deterministic function of its documents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Vocab {
    tokens: Vec<String>,
    ids: HashMap<String, usize>,
}

impl Vocab {
    /// The out-of-vocabulary token, id 0.
    pub const UNK: &'static str = "<unk>";

    /// Builds the vocabulary of the given documents (pass the training
    /// documents only, so that no test word leaks in): every token occurring
    /// at least `min_count` times in total (`0` acts as `1`). A literal
    /// `<unk>` token in the documents is not added (it already has id 0).
    ///
    /// A `min_count` above every count leaves `<unk>` alone; use
    /// [`Vocab::try_build`] to refuse that.
    pub fn build<'a>(docs: impl IntoIterator<Item = &'a Document>, min_count: usize) -> Vocab {
        let mut counts: HashMap<&'a str, usize> = HashMap::new();
        for d in docs {
            for t in &d.tokens {
                *counts.entry(t.as_str()).or_insert(0) += 1;
            }
        }
        let mut kept: Vec<(&str, usize)> = counts
            .into_iter()
            .filter(|&(t, c)| c >= min_count.max(1) && t != Self::UNK)
            .collect();
        kept.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let tokens: Vec<String> = std::iter::once(Self::UNK)
            .chain(kept.into_iter().map(|(t, _)| t))
            .map(str::to_string)
            .collect();
        let ids = tokens
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), i))
            .collect();
        Vocab { tokens, ids }
    }

    /// [`Vocab::build`], refusing a vocabulary left with `<unk>` alone:
    /// [`Error::InvalidConfig`] naming `min_count` and the largest count
    /// found when no token occurs `min_count` times (every word would map
    /// to `<unk>`), [`Error::Empty`] when the documents hold no token.
    pub fn try_build<'a>(
        docs: impl IntoIterator<Item = &'a Document>,
        min_count: usize,
    ) -> Result<Vocab> {
        let docs: Vec<&Document> = docs.into_iter().collect();
        let v = Vocab::build(docs.iter().copied(), min_count);
        if v.len() > 1 {
            return Ok(v);
        }
        let all = Vocab::build(docs.iter().copied(), 1);
        if all.len() <= 1 {
            return Err(Error::Empty(
                "no word to build a vocabulary from (the documents have no tokens)".into(),
            ));
        }
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for d in &docs {
            for t in &d.tokens {
                *counts.entry(t.as_str()).or_insert(0) += 1;
            }
        }
        let top = counts.values().copied().max().unwrap_or(0);
        Err(Error::InvalidConfig(format!(
            "min_count {min_count} leaves an empty vocabulary: the most frequent word occurs \
             {top} times, so every word would be <unk>"
        )))
    }

    /// This vocabulary with the tokens of `docs` that it lacks appended,
    /// in order of first occurrence: every known token keeps its id, a new
    /// one gets the next id. For layers that can represent words they never
    /// trained on ([`SubwordEmbedding::extend_vocabulary`]): build the
    /// vocabulary on the training documents, extend it with the others,
    /// and train only on the first.
    ///
    /// [`SubwordEmbedding::extend_vocabulary`]: crate::nn::SubwordEmbedding::extend_vocabulary
    ///
    /// ```
    /// use hdgcn::data::text::{DocSplit, Document, Vocab};
    /// let doc = |text: &str| Document {
    ///     id: String::new(),
    ///     tokens: text.split(' ').map(str::to_string).collect(),
    ///     label: 0,
    ///     split: DocSplit::Train,
    /// };
    /// let vocab = Vocab::build(&[doc("a b a")], 1);
    /// let ext = vocab.extended(&[doc("c a d c")]);
    /// assert_eq!((vocab.len(), ext.len()), (3, 5));
    /// assert_eq!((ext.id("a"), ext.id("b")), (vocab.id("a"), vocab.id("b")));
    /// assert_eq!((ext.id("c"), ext.id("d")), (3, 4));
    /// assert_eq!(vocab.id("c"), 0);
    /// ```
    pub fn extended<'a>(&self, docs: impl IntoIterator<Item = &'a Document>) -> Vocab {
        let mut out = self.clone();
        for d in docs {
            for t in &d.tokens {
                if !out.ids.contains_key(t.as_str()) {
                    out.ids.insert(t.clone(), out.tokens.len());
                    out.tokens.push(t.clone());
                }
            }
        }
        out
    }

    /// Id of `tok`, or 0 (`<unk>`) if it is not in the vocabulary.
    pub fn id(&self, tok: &str) -> usize {
        self.ids.get(tok).copied().unwrap_or(0)
    }

    /// Whether `tok` has its own id (is not out of vocabulary).
    pub fn contains(&self, tok: &str) -> bool {
        tok != Self::UNK && self.ids.contains_key(tok)
    }

    /// Number of ids, `<unk>` included (so at least 1).
    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Always `false`: a vocabulary holds at least `<unk>`.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The token with id `id` (`Some("<unk>")` for 0), `None` if out of range.
    pub fn token(&self, id: usize) -> Option<&str> {
        self.tokens.get(id).map(String::as_str)
    }
}

/// The word graph of one document (math notes §7).
#[derive(Debug, Clone, PartialEq)]
pub struct DocGraph {
    /// Unweighted, undirected (both directions stored), no self loops.
    pub graph: Graph,
    /// Vocabulary id of each node: the document's distinct vocabulary ids in
    /// order of first occurrence. All out-of-vocabulary words share one
    /// `<unk>` node (id 0).
    pub node_tokens: Vec<usize>,
    /// How often each node's word occurs in the document (its term
    /// frequency; every out-of-vocabulary occurrence counts for `<unk>`).
    pub node_counts: Vec<usize>,
    /// The document's class id.
    pub label: usize,
}

/// Builds the graph of `doc`: one node per distinct word (after mapping
/// through `vocab`, so all out-of-vocabulary words are one `<unk>` node),
/// and an edge between two distinct nodes whose words occur at token
/// distance `<= window - 1` somewhere in the document (`window = 3` in the
/// paper). Edges are unweighted (weight 1 however often the pair co-occurs)
/// and stored in both directions; no self loops (a repeated word is one
/// node). A one-word document gives one node and no edge.
///
/// # Errors
/// [`Error::InvalidConfig`] if `window == 0`; [`Error::Empty`] (naming the document id) for a
/// document without tokens — the caller decides whether to skip it.
pub fn doc_graph(doc: &Document, vocab: &Vocab, window: usize) -> Result<DocGraph> {
    if window == 0 {
        return Err(Error::InvalidConfig(
            "doc_graph window must be at least 1".into(),
        ));
    }

    if doc.tokens.is_empty() {
        return Err(Error::Empty(format!("document {:?} has no tokens", doc.id)));
    }
    let mut node_of: HashMap<usize, usize> = HashMap::new();
    let mut node_tokens = Vec::new();
    let mut node_counts: Vec<usize> = Vec::new();
    let seq: Vec<usize> = doc
        .tokens
        .iter()
        .map(|t| {
            let v = vocab.id(t);
            let node = *node_of.entry(v).or_insert_with(|| {
                node_tokens.push(v);
                node_counts.push(0);
                node_tokens.len() - 1
            });
            node_counts[node] += 1;
            node
        })
        .collect();
    let mut edges = BTreeSet::new();
    for (i, &a) in seq.iter().enumerate() {
        for &b in seq.iter().skip(i + 1).take(window - 1) {
            if a != b {
                edges.insert((a, b));
                edges.insert((b, a));
            }
        }
    }
    let edges: Vec<(usize, usize)> = edges.into_iter().collect();
    Ok(DocGraph {
        graph: Graph::from_edges(node_tokens.len(), &edges)?,
        node_tokens,
        node_counts,
        label: doc.label,
    })
}

/// TF-IDF weights of the word nodes of [`DocGraph`]s, scikit-learn's
/// `TfidfVectorizer(sublinear_tf=True)` weighting without its norm:
///
/// - `idf(t) = ln((1 + n) / (1 + df(t))) + 1` (smoothed), where `n` is the
///   number of documents the weights were fitted on (pass the training
///   documents only) and `df(t)` how many of them contain word `t`;
/// - `tf(v) = 1 + ln(count)` (sublinear, the default) or `count`
///   ([`TfIdf::with_sublinear_tf`]), where `count` is how often node `v`'s
///   word occurs in the document ([`DocGraph::node_counts`]);
/// - `w_v = tf(v) · idf(t_v)`, except that `<unk>` and words in none of
///   the fitted documents (those of an extended vocabulary,
///   [`Vocab::extended`]) weigh 0, as scikit-learn ignores words outside
///   its vocabulary, and a document
///   whose nodes all weigh 0 gets weight 1 on every node.
///
/// The weights feed a weighted readout
/// ([`GraphSample::with_node_weights`](crate::train::GraphSample::with_node_weights)):
/// a mean readout of node states weighted by TF-IDF is what a linear model
/// on TF-IDF features sees, the term frequency a graph of distinct words
/// otherwise loses.
///
/// ```
/// use hdgcn::data::text::{DocSplit, Document, TfIdf, Vocab, doc_graph};
/// let doc = |text: &str| Document {
///     id: String::new(),
///     tokens: text.split(' ').map(str::to_string).collect(),
///     label: 0,
///     split: DocSplit::Train,
/// };
/// let train = [doc("a b a"), doc("a c")];
/// let vocab = Vocab::build(&train, 1);
/// let tfidf = TfIdf::fit(&train, &vocab)?;
/// // "a" is in both documents, "b" in one: idf 1 and ln(3/2) + 1.
/// let g = doc_graph(&train[0], &vocab, 3)?;
/// let w = tfidf.node_weights(&g)?;
/// assert!((w[0] - (1.0 + 2f64.ln())).abs() < 1e-12); // "a", twice
/// assert!((w[1] - (1.5f64.ln() + 1.0)).abs() < 1e-12); // "b", once
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct TfIdf {
    idf: Vec<f64>,
    sublinear_tf: bool,
}

impl TfIdf {
    /// Document frequencies of `vocab`'s words in `docs` (the training
    /// documents), sublinear term frequency.
    ///
    /// # Errors
    /// [`Error::Empty`] for no documents.
    pub fn fit<'a>(docs: impl IntoIterator<Item = &'a Document>, vocab: &Vocab) -> Result<TfIdf> {
        let mut df = vec![0usize; vocab.len()];
        let mut n = 0usize;
        let mut seen = vec![false; vocab.len()];
        for d in docs {
            n += 1;
            let ids: Vec<usize> = d.tokens.iter().map(|t| vocab.id(t)).collect();
            for &id in &ids {
                if !seen[id] {
                    seen[id] = true;
                    df[id] += 1;
                }
            }
            for &id in &ids {
                seen[id] = false;
            }
        }
        if n == 0 {
            return Err(Error::Empty("TF-IDF fitted on no documents".into()));
        }
        let n = n as f64;
        // A word in none of the documents (a vocabulary extended past them,
        // `Vocab::extended`) is unknown to the weighting: 0, as `<unk>`.
        let mut idf: Vec<f64> = df
            .iter()
            .map(|&c| {
                if c == 0 {
                    0.0
                } else {
                    ((1.0 + n) / (1.0 + c as f64)).ln() + 1.0
                }
            })
            .collect();
        idf[0] = 0.0;
        Ok(TfIdf {
            idf,
            sublinear_tf: true,
        })
    }

    /// `true`: `tf = 1 + ln(count)` (the default); `false`: `tf = count`.
    pub fn with_sublinear_tf(mut self, sublinear: bool) -> TfIdf {
        self.sublinear_tf = sublinear;
        self
    }

    /// The smoothed idf of vocabulary id `id` (0 for `<unk>`, id 0).
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] for an id outside the fitted vocabulary.
    pub fn idf(&self, id: usize) -> Result<f64> {
        self.idf.get(id).copied().ok_or(Error::IndexOutOfRange {
            what: "vocabulary id for idf",
            index: id,
            len: self.idf.len(),
        })
    }

    /// One weight per node of `g`, in node order (see the type's docs).
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] for a token outside the fitted
    /// vocabulary; [`Error::ShapeMismatch`] if `g` has not one count per
    /// node; [`Error::InvalidConfig`] for a zero count.
    pub fn node_weights(&self, g: &DocGraph) -> Result<Vec<f64>> {
        if g.node_counts.len() != g.node_tokens.len() {
            return Err(Error::shape(
                "TF-IDF node weights",
                format!("{} node counts (one per node)", g.node_tokens.len()),
                format!("{}", g.node_counts.len()),
            ));
        }
        let mut w = Vec::with_capacity(g.node_tokens.len());
        for (&id, &count) in g.node_tokens.iter().zip(&g.node_counts) {
            if count == 0 {
                return Err(Error::InvalidConfig(format!(
                    "node of vocabulary id {id} has term count 0"
                )));
            }
            let tf = if self.sublinear_tf {
                1.0 + (count as f64).ln()
            } else {
                count as f64
            };
            w.push(tf * self.idf(id)?);
        }
        if w.iter().all(|&x| x == 0.0) {
            w.fill(1.0);
        }
        Ok(w)
    }
}

/// Seeded random hold-out of a validation set from the training indices.
///
/// Shuffles a copy of `train` with `StdRng::seed_from_u64(seed)` and moves
/// the first `floor(fraction * train.len())` to the validation set (text_gcn
/// uses `fraction = 0.1`). Returns `(train_rest, val)`, each sorted
/// ascending; only the given indices are used, so the test set is never
/// touched.
///
/// # Errors
/// [`Error::InvalidConfig`] if `fraction` is not in `[0, 1]` or `train`
/// holds a duplicate index.
pub fn validation_split(
    train: &[usize],
    fraction: f64,
    seed: u64,
) -> Result<(Vec<usize>, Vec<usize>)> {
    if !(0.0..=1.0).contains(&fraction) {
        return Err(Error::InvalidConfig(format!(
            "validation fraction {fraction} not in [0, 1]"
        )));
    }
    let mut shuffled = train.to_vec();
    shuffled.sort_unstable();
    if let Some(w) = shuffled.windows(2).find(|w| w[0] == w[1]) {
        return Err(Error::InvalidConfig(format!(
            "duplicate training index {}",
            w[0]
        )));
    }
    // Shuffle in the caller's order so the result depends only on (train, seed).
    shuffled.copy_from_slice(train);
    shuffled.shuffle(&mut StdRng::seed_from_u64(seed));
    let n_val = ((fraction * train.len() as f64).floor() as usize).min(train.len());
    let mut val = shuffled[..n_val].to_vec();
    let mut rest = shuffled[n_val..].to_vec();
    val.sort_unstable();
    rest.sort_unstable();
    Ok((rest, val))
}

/// Largest vector dimension [`load_glove`] accepts (published word vectors
/// have 50 to 1024), so that one long line cannot demand a
/// `vocab x huge` matrix.
pub const MAX_GLOVE_DIM: usize = 16_384;

/// Reads word vectors from a GloVe text file (`word v1 v2 ... vd` a line,
/// separated by whitespace) for the words of `vocab`.
///
/// Returns a `vocab.len() x d` matrix whose row `i` is the vector of
/// `vocab.token(i)`, and the number of vocabulary ids found in the file.
/// Rows of words absent from the file (and the `<unk>` row, unless the file
/// has a `<unk>` line) are **zeros**; callers wanting random initialisation
/// fill those rows themselves. Words are matched exactly (the text_gcn
/// corpora are lower-case, like the `glove.6B` files); if a word occurs
/// twice, its first line wins. Blank lines are skipped. `d` is `dim` if
/// given, else the number of values on the first line; a word2vec-style
/// header line of two integers `count d` (`d > 1`, equal to `dim` if given)
/// as the first line is skipped.
///
/// # Errors
/// [`Error::MissingFile`] / [`Error::Io`] for the file;
/// [`Error::InvalidConfig`] for `dim` of `Some(0)` or above
/// [`MAX_GLOVE_DIM`]; [`Error::Format`] naming the line for a line with a
/// different number of values or more than [`MAX_GLOVE_DIM`], a value that is
/// not a number or is NaN/infinite, invalid UTF-8, or (with `dim = None`) a
/// file without any vector.
///
/// The file must be a regular file (a FIFO or device is an [`Error::Io`]);
/// it is streamed, and no line may be longer than [`MAX_GLOVE_LINE_BYTES`]
/// (checked while reading, so memory stays bounded whatever the file).
pub fn load_glove(path: &Path, vocab: &Vocab, dim: Option<usize>) -> Result<(Array2<f32>, usize)> {
    check_glove_dim(dim)?;
    let (file, _) = super::open_regular(path)?;
    read_glove(
        std::io::BufReader::new(file),
        &path.display().to_string(),
        path,
        vocab,
        dim,
    )
}

/// Longest line [`load_glove`] accepts, in bytes: a word and
/// [`MAX_GLOVE_DIM`] values of up to 63 characters each.
pub const MAX_GLOVE_LINE_BYTES: usize = 64 * MAX_GLOVE_DIM;

fn check_glove_dim(dim: Option<usize>) -> Result<()> {
    if let Some(d) = dim {
        if d == 0 || d > MAX_GLOVE_DIM {
            return Err(Error::InvalidConfig(format!(
                "GloVe dimension {d} not in 1..={MAX_GLOVE_DIM}"
            )));
        }
    }
    Ok(())
}

/// [`load_glove`] from any buffered reader; `name` names the source in
/// errors. Same format, caps and errors.
pub fn load_glove_from_reader(
    reader: impl BufRead,
    name: &str,
    vocab: &Vocab,
    dim: Option<usize>,
) -> Result<(Array2<f32>, usize)> {
    check_glove_dim(dim)?;
    read_glove(reader, name, Path::new(name), vocab, dim)
}

fn read_glove(
    mut reader: impl BufRead,
    pname: &str,
    path: &Path,
    vocab: &Vocab,
    dim: Option<usize>,
) -> Result<(Array2<f32>, usize)> {
    let bad = |line: usize, why: String| Error::format(pname, format!("line {line}: {why}"));
    let mut dim = dim;
    let mut out: Option<Array2<f32>> = dim.map(|d| Array2::zeros((vocab.len(), d)));
    let mut seen = vec![false; vocab.len()];
    let mut found = 0;
    let mut buf = Vec::new();
    let mut line_no = 0;
    let mut values: Vec<f32> = Vec::new();
    loop {
        buf.clear();
        // At most one byte past the cap: an over-long line is never buffered.
        let n = (&mut reader)
            .take(MAX_GLOVE_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| Error::io(path, e))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        if buf.len() > MAX_GLOVE_LINE_BYTES && buf.last() != Some(&b'\n') {
            return Err(bad(
                line_no,
                format!("longer than {MAX_GLOVE_LINE_BYTES} bytes"),
            ));
        }
        let line =
            std::str::from_utf8(&buf).map_err(|e| bad(line_no, format!("invalid UTF-8 ({e})")))?;
        let mut fields = line.split_whitespace();
        let Some(word) = fields.next() else {
            continue;
        };
        values.clear();
        for f in fields {
            let v: f32 = f
                .parse()
                .map_err(|_| bad(line_no, format!("value {f:?} is not a number")))?;
            if !v.is_finite() {
                return Err(bad(line_no, format!("non-finite value {f:?}")));
            }
            if values.len() == MAX_GLOVE_DIM {
                return Err(bad(line_no, format!("more than {MAX_GLOVE_DIM} values")));
            }
            values.push(v);
        }
        if line_no == 1 && values.len() == 1 && word.parse::<u64>().is_ok() {
            // word2vec-style header `count dim` (a 1-d vector is not plausible).
            let h = values[0];
            if h.fract() == 0.0 && h > 1.0 && dim.is_none_or(|d| d as f32 == h) {
                continue;
            }
        }
        let d = match dim {
            Some(d) => d,
            None => {
                if values.is_empty() {
                    return Err(bad(line_no, format!("word {word:?} has no values")));
                }
                dim = Some(values.len());
                out = Some(Array2::zeros((vocab.len(), values.len())));
                values.len()
            }
        };
        if values.len() != d {
            return Err(bad(
                line_no,
                format!("word {word:?} has {} values, expected {d}", values.len()),
            ));
        }
        let id = vocab.id(word);
        if (id != 0 || word == Vocab::UNK) && !seen[id] {
            seen[id] = true;
            found += 1;
            if let Some(m) = out.as_mut() {
                m.row_mut(id)
                    .iter_mut()
                    .zip(&values)
                    .for_each(|(o, &v)| *o = v);
            }
        }
    }
    match out {
        Some(m) => Ok((m, found)),
        None => Err(Error::format(pname, "no word vectors (dimension unknown)")),
    }
}
