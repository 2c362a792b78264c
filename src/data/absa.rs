//! Aspect-based sentiment classification data (math notes §9): SemEval
//! laptops and restaurants as the ABSA literature ships them.
//!
//! Each [`AbsaSample`] is one aspect of one sentence: the sentence's
//! tokens, the aspect's token span, its [`Polarity`] and the sentence's
//! dependency arcs. Two formats are read:
//!
//! - DualGCN's JSON ([`read_dualgcn`]; LAP14, REST14): an array of
//!   sentences with tokens and Stanza heads (1-based, 0 = root) and a list
//!   of aspects; each aspect is one sample;
//! - ASGCN's `<split>.raw` + `<split>.raw.graph` ([`read_asgcn`]; REST15,
//!   REST16): three lines per sample (the sentence with `$T$` for the
//!   aspect, the aspect, the polarity `-1`/`0`/`1`) and a pickled dict from
//!   the sample's first line number to its `n x n` dependency adjacency.
//!
//! `conflict` aspects are dropped. [`load`] picks the files of a dataset by
//! name under the data root; [`aspect_graph`] builds the §9 graph of a
//! sample and [`AbsaSample::lookup_ids`] its lower-cased vocabulary ids.

use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::pickle::{ArrayData, decode_int_ndarray_dict};
use super::read_file_capped;
use super::text::{DocSplit, Document, Vocab};
use crate::graph::Graph;
use crate::{Error, Result};

/// Largest DualGCN JSON file read (the public ones are under 4 MB).
pub const MAX_JSON_BYTES: u64 = 256 << 20;
/// Largest ASGCN `.raw` file read (the public ones are under 200 kB).
pub const MAX_RAW_BYTES: u64 = 64 << 20;
/// Largest ASGCN `.raw.graph` pickle read (the public ones are under 2 MB).
pub const MAX_GRAPH_BYTES: u64 = 512 << 20;

/// Polarity of an aspect; its class label is the discriminant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Polarity {
    /// Label 0.
    Negative = 0,
    /// Label 1.
    Neutral = 1,
    /// Label 2.
    Positive = 2,
}

impl Polarity {
    /// Number of classes.
    pub const NUM_CLASSES: usize = 3;
    /// Class names in label order.
    pub const NAMES: [&'static str; 3] = ["negative", "neutral", "positive"];

    /// The class label, `0..3`.
    pub fn label(self) -> usize {
        self as usize
    }

    /// The polarity of class `label`, `None` if `label >= 3`.
    pub fn from_label(label: usize) -> Option<Polarity> {
        match label {
            0 => Some(Polarity::Negative),
            1 => Some(Polarity::Neutral),
            2 => Some(Polarity::Positive),
            _ => None,
        }
    }

    /// The lower-case name (`"negative"`, `"neutral"`, `"positive"`).
    pub fn name(self) -> &'static str {
        Self::NAMES[self.label()]
    }
}

/// Train or test file of a dataset (the public sets have no validation
/// file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbsaSplit {
    /// The training file.
    Train,
    /// The test file.
    Test,
}

impl AbsaSplit {
    fn file_stem(self) -> &'static str {
        match self {
            AbsaSplit::Train => "train",
            AbsaSplit::Test => "test",
        }
    }
}

/// One aspect of one sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AbsaSample {
    /// The sentence's tokens, as in the file (DualGCN keeps case; ASGCN's
    /// text is lower-cased), with the aspect in place.
    pub tokens: Vec<String>,
    /// The aspect's tokens: `tokens[aspect]` (0-based, end exclusive,
    /// never empty).
    pub aspect: Range<usize>,
    /// The aspect's polarity.
    pub polarity: Polarity,
    /// The sentence's dependency arcs, undirected, each once as `(i, j)`
    /// with `i < j < tokens.len()`, sorted; no self-loops.
    pub arcs: Vec<(usize, usize)>,
}

impl AbsaSample {
    /// The class label of the polarity ([`Polarity::label`]).
    pub fn label(&self) -> usize {
        self.polarity.label()
    }

    /// The tokens of the nodes of [`aspect_graph`], lower-cased: the
    /// sentence's tokens, then the aspect's tokens again.
    pub fn node_tokens(&self) -> Vec<String> {
        self.tokens
            .iter()
            .chain(self.tokens.get(self.aspect.clone()).unwrap_or(&[]))
            .map(|t| t.to_lowercase())
            .collect()
    }

    /// Vocabulary ids of [`AbsaSample::node_tokens`] (lower-cased lookup;
    /// an unknown word is 0, [`Vocab::UNK`]): one id per node of
    /// [`aspect_graph`], in node order.
    pub fn lookup_ids(&self, vocab: &Vocab) -> Vec<usize> {
        self.node_tokens().iter().map(|t| vocab.id(t)).collect()
    }
}

/// The vocabulary of the lower-cased node tokens of `samples` (pass the
/// training samples only), every word seen at least `min_count` times
/// ([`Vocab::build`]).
pub fn build_vocab<'a>(
    samples: impl IntoIterator<Item = &'a AbsaSample>,
    min_count: usize,
) -> Vocab {
    let docs: Vec<Document> = samples
        .into_iter()
        .map(|s| Document {
            id: String::new(),
            tokens: s.node_tokens(),
            label: s.label(),
            split: DocSplit::Train,
        })
        .collect();
    Vocab::build(&docs, min_count)
}

/// The graph of a sample, as math notes §9 reads the paper:
///
/// > - nodes: the sentence's tokens, then the aspect's tokens appended;
/// > - edges: the dependency arcs of the sentence, undirected (a GCN
/// >   operator adds the self-loops); each appended aspect token is joined
/// >   to the same token at the aspect's position in the sentence and to
/// >   its neighbours in the aspect;
///
/// So with `n` sentence tokens and an aspect `a..b` of `m = b - a` tokens
/// there are `n + m` nodes; node `n + k` is the aspect's `k`-th token. The
/// edges, each stored in both directions with weight 1, are every arc of
/// [`AbsaSample::arcs`], `(n + k, a + k)` for `k < m`, and
/// `(n + k, n + k + 1)` for `k + 1 < m` ("neighbours in the aspect" are
/// the tokens next to it in the aspect). No self-loops.
///
/// # Errors
/// [`Error::NodeOutOfRange`] if the sample's span or arcs point past its
/// tokens (never for a sample from this module's readers);
/// [`Error::Empty`] for a sample with no tokens.
pub fn aspect_graph(sample: &AbsaSample) -> Result<Graph> {
    let n = sample.tokens.len();
    let Range { start: a, end: b } = sample.aspect;
    if a >= b || b > n {
        return Err(Error::NodeOutOfRange {
            index: b.max(a),
            num_nodes: n,
        });
    }
    let m = b - a;
    let mut edges = Vec::with_capacity(2 * (sample.arcs.len() + 2 * m));
    let mut both = |i: usize, j: usize| {
        edges.push((i, j));
        edges.push((j, i));
    };
    for &(i, j) in &sample.arcs {
        both(i, j);
    }
    for k in 0..m {
        both(n + k, a + k);
        if k + 1 < m {
            both(n + k, n + k + 1);
        }
    }
    Graph::from_edges(n + m, &edges)
}

/// The files of a dataset: one file for DualGCN, `.raw` and `.raw.graph`
/// for ASGCN.
fn dataset_files(root: &Path, name: &str, split: AbsaSplit) -> Result<(PathBuf, Option<PathBuf>)> {
    let absa = root.join("absa");
    let stem = split.file_stem();
    let dual = |dir: &str| absa.join("dualgcn").join(dir).join(format!("{stem}.json"));
    let asgcn = |set: &str| {
        let raw = absa
            .join("asgcn")
            .join(set)
            .join(format!("restaurant_{stem}.raw"));
        let graph = raw.with_extension("raw.graph");
        (raw, Some(graph))
    };
    Ok(match name {
        "lap14" => (dual("Laptops_stanza"), None),
        "rest14" => (dual("Restaurants_stanza"), None),
        "rest15" => asgcn("semeval15"),
        "rest16" => asgcn("semeval16"),
        other => {
            return Err(Error::InvalidConfig(format!(
                "unknown ABSA dataset {other:?}: expected lap14, rest14, rest15 or rest16"
            )));
        }
    })
}

/// Loads a dataset's split from the data root `root` (see
/// [`crate::data::data_root`]), laid out as `../shared/data` is:
///
/// | name | files under `root/absa/` |
/// |---|---|
/// | `lap14` | `dualgcn/Laptops_stanza/{train,test}.json` |
/// | `rest14` | `dualgcn/Restaurants_stanza/{train,test}.json` |
/// | `rest15` | `asgcn/semeval15/restaurant_{train,test}.raw` + `.raw.graph` |
/// | `rest16` | `asgcn/semeval16/restaurant_{train,test}.raw` + `.raw.graph` |
///
/// # Errors
/// [`Error::InvalidConfig`] for another name; otherwise as
/// [`read_dualgcn`] / [`read_asgcn`].
pub fn load(root: &Path, name: &str, split: AbsaSplit) -> Result<Vec<AbsaSample>> {
    match dataset_files(root, name, split)? {
        (json, None) => read_dualgcn(&json),
        (raw, Some(graph)) => read_asgcn(&raw, &graph),
    }
}

// ---------------------------------------------------------------------------
// DualGCN JSON
// ---------------------------------------------------------------------------

#[derive(Deserialize)]
struct DualSentence {
    token: Vec<String>,
    head: Vec<i64>,
    aspects: Vec<DualAspect>,
}

#[derive(Deserialize)]
struct DualAspect {
    from: i64,
    to: i64,
    polarity: String,
}

/// A JSON array of sentences, deserialised one element at a time so that
/// an error names the sentence it is in.
struct Sentences(Vec<DualSentence>);

impl<'de> Deserialize<'de> for Sentences {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Sentences;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON array of sentences")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<Sentences, A::Error> {
                let mut out = Vec::new();
                loop {
                    match seq.next_element::<DualSentence>() {
                        Ok(Some(s)) => out.push(s),
                        Ok(None) => return Ok(Sentences(out)),
                        Err(e) => {
                            return Err(serde::de::Error::custom(format!(
                                "sentence {}: {e}",
                                out.len()
                            )));
                        }
                    }
                }
            }
        }
        d.deserialize_seq(V)
    }
}

/// Reads one DualGCN JSON file (at most [`MAX_JSON_BYTES`]): one sample
/// per non-`conflict` aspect, in file order.
///
/// The aspect is the `from..to` token span, as DualGCN's own code reads
/// it; the `term` field is not read. In the public files the span does not
/// spell the `term` for 78 training / 32 test aspects of LAP14 and 81 / 43
/// of REST14; those samples keep the span.
///
/// # Errors
/// [`Error::MissingFile`] / [`Error::Io`] as the crate's other readers
/// (regular files only); [`Error::Format`] naming the file and the
/// sentence (0-based index in the array, and the aspect) for invalid or
/// truncated JSON, token and head lists of different lengths, a head
/// outside `0..=n`, an aspect span outside the sentence or empty, an
/// unknown polarity, or a sentence without tokens.
pub fn read_dualgcn(path: &Path) -> Result<Vec<AbsaSample>> {
    let bytes = read_file_capped(path, MAX_JSON_BYTES, "a DualGCN JSON file")?;
    parse_dualgcn(&bytes, &path.display().to_string())
}

/// [`read_dualgcn`] on the bytes of a file; `path` names it in errors.
pub fn parse_dualgcn(bytes: &[u8], path: &str) -> Result<Vec<AbsaSample>> {
    let Sentences(sentences) = serde_json::from_slice(bytes)
        .map_err(|e| Error::format(path, format!("invalid DualGCN JSON: {e}")))?;
    let mut out = Vec::new();
    for (si, s) in sentences.into_iter().enumerate() {
        let err = |what: String| Error::format(path, format!("sentence {si}: {what}"));
        let n = s.token.len();
        if n == 0 {
            return Err(err("no tokens".into()));
        }
        if s.head.len() != n {
            return Err(err(format!("{n} tokens but {} heads", s.head.len())));
        }
        let mut arcs = Vec::with_capacity(n);
        for (i, &h) in s.head.iter().enumerate() {
            let h = usize::try_from(h).ok().filter(|&h| h <= n).ok_or_else(|| {
                err(format!(
                    "head {h} of token {i} is out of range 0..={n} (1-based, 0 = root)"
                ))
            })?;
            // Stanza occasionally heads a token on itself: no arc.
            if h > 0 && h - 1 != i {
                arcs.push(((h - 1).min(i), (h - 1).max(i)));
            }
        }
        arcs.sort_unstable();
        arcs.dedup();
        for (ai, a) in s.aspects.iter().enumerate() {
            let err = |what: String| err(format!("aspect {ai}: {what}"));
            let Some(polarity) = parse_polarity_word(&a.polarity)
                .map_err(|()| err(format!("unknown polarity {:?}", a.polarity)))?
            else {
                continue;
            };
            let span = usize::try_from(a.from)
                .ok()
                .zip(usize::try_from(a.to).ok())
                .filter(|&(f, t)| f < t && t <= n)
                .ok_or_else(|| {
                    err(format!(
                        "span from {} to {} is not a non-empty range within the {n} tokens",
                        a.from, a.to
                    ))
                })?;
            out.push(AbsaSample {
                tokens: s.token.clone(),
                aspect: span.0..span.1,
                polarity,
                arcs: arcs.clone(),
            });
        }
    }
    Ok(out)
}

/// `Ok(None)` for `conflict`, `Err(())` for an unknown word.
fn parse_polarity_word(w: &str) -> std::result::Result<Option<Polarity>, ()> {
    match w {
        "negative" => Ok(Some(Polarity::Negative)),
        "neutral" => Ok(Some(Polarity::Neutral)),
        "positive" => Ok(Some(Polarity::Positive)),
        "conflict" => Ok(None),
        _ => Err(()),
    }
}

// ---------------------------------------------------------------------------
// ASGCN .raw + .raw.graph
// ---------------------------------------------------------------------------

/// Reads an ASGCN `.raw` file (at most [`MAX_RAW_BYTES`]) and its
/// `.raw.graph` pickle (at most [`MAX_GRAPH_BYTES`]): one sample per three
/// lines, `conflict` dropped, in file order.
///
/// The tokens are the space-separated words of the sentence with the
/// aspect put back in place of `$T$` (ASGCN's `left + ' ' + aspect + ' ' +
/// right`, lower-cased and split); the arcs are the off-diagonal non-zero
/// entries of the sample's adjacency (key: the 0-based line number of the
/// sample's first line).
///
/// # Errors
/// [`Error::MissingFile`] / [`Error::Io`] as the crate's other readers;
/// [`Error::Format`] naming the file and the sample (0-based index and the
/// 1-based line of its first line) for a sample cut off at the end of the
/// file, a sentence line without exactly one `$T$`, an empty aspect, an
/// unknown polarity, a sample with no graph, a graph that is not
/// `n x n` for the `n` tokens, or a non-finite entry; an unreadable pickle
/// is an [`Error::Format`] naming the graph file.
pub fn read_asgcn(raw: &Path, graph: &Path) -> Result<Vec<AbsaSample>> {
    let raw_bytes = read_file_capped(raw, MAX_RAW_BYTES, "an ASGCN .raw file")?;
    let graph_bytes = read_file_capped(graph, MAX_GRAPH_BYTES, "an ASGCN .raw.graph pickle")?;
    parse_asgcn(
        &raw_bytes,
        &graph_bytes,
        &raw.display().to_string(),
        &graph.display().to_string(),
    )
}

/// [`read_asgcn`] on the bytes of both files; `raw_path` and `graph_path`
/// name them in errors.
pub fn parse_asgcn(
    raw: &[u8],
    graph: &[u8],
    raw_path: &str,
    graph_path: &str,
) -> Result<Vec<AbsaSample>> {
    let text = std::str::from_utf8(raw).map_err(|e| {
        Error::format(
            raw_path,
            format!("not UTF-8 text (at byte {})", e.valid_up_to()),
        )
    })?;
    let mut lines: Vec<&str> = text.lines().collect();
    while lines.last().is_some_and(|l| l.trim().is_empty()) {
        lines.pop();
    }
    let graphs = decode_int_ndarray_dict(graph, graph_path)?;
    let graphs: std::collections::HashMap<usize, _> = graphs.into_iter().collect();
    let mut out = Vec::new();
    for (k, chunk) in lines.chunks(3).enumerate() {
        let first = 3 * k;
        let at = format!("sample {k} (line {})", first + 1);
        let err = |what: String| Error::format(raw_path, format!("{at}: {what}"));
        let [sentence, aspect, polarity] = chunk else {
            return Err(err(format!(
                "cut off at the end of the file: {} of its 3 lines",
                chunk.len()
            )));
        };
        let polarity = match polarity.trim() {
            "-1" => Polarity::Negative,
            "0" => Polarity::Neutral,
            "1" => Polarity::Positive,
            "conflict" => continue,
            other => {
                return Err(err(format!(
                    "unknown polarity {other:?} (line {}; expected -1, 0 or 1)",
                    first + 3
                )));
            }
        };
        let (left, right) = match sentence.split_once("$T$") {
            Some((l, r)) if !r.contains("$T$") => (l, r),
            _ => return Err(err("the sentence must hold exactly one $T$".into())),
        };
        let low =
            |s: &str| -> Vec<String> { s.split_whitespace().map(str::to_lowercase).collect() };
        let (left, aspect, right) = (low(left), low(aspect), low(right));
        if aspect.is_empty() {
            return Err(err(format!("empty aspect (line {})", first + 2)));
        }
        let a = left.len();
        let b = a + aspect.len();
        let tokens: Vec<String> = left.into_iter().chain(aspect).chain(right).collect();
        let n = tokens.len();
        let gerr = |what: String| Error::format(graph_path, format!("{at}: {what}"));
        let adj = graphs
            .get(&first)
            .ok_or_else(|| gerr(format!("no graph (key {first}) for this sample")))?;
        if adj.shape != [n, n] {
            return Err(gerr(format!(
                "graph of shape {:?} but the sentence has {n} tokens",
                adj.shape
            )));
        }
        let nonzero = |idx: usize| -> Result<bool> {
            match &adj.data {
                ArrayData::Int(v) => Ok(v.get(idx).is_some_and(|&x| x != 0)),
                ArrayData::Float(v) => {
                    let x = v.get(idx).copied().unwrap_or(0.0);
                    if x.is_finite() {
                        Ok(x != 0.0)
                    } else {
                        Err(gerr(format!(
                            "non-finite entry {x} at ({}, {})",
                            idx / n,
                            idx % n
                        )))
                    }
                }
            }
        };
        let mut arcs = Vec::new();
        for i in 0..n {
            for j in 0..n {
                let nz = nonzero(i * n + j)?;
                if i < j && (nz || nonzero(j * n + i)?) {
                    arcs.push((i, j));
                }
            }
        }
        out.push(AbsaSample {
            tokens,
            aspect: a..b,
            polarity,
            arcs,
        });
    }
    Ok(out)
}
