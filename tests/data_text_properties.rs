//! Property tests of the text pipeline: per-document word graphs against a
//! brute-force construction over all token pairs, the validation split's
//! invariants, and the corpus and word-vector readers on arbitrary bytes
//! (an error or a consistent result, never a panic).

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;

use hdgcn::Error;
use hdgcn::data::text::{
    DocSplit, Document, TextCorpus, Vocab, doc_graph, load_glove, validation_split,
};
use proptest::prelude::*;

/// A fresh folder unique to this process, `tag` and a case counter.
fn scratch(tag: &str) -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static CASE: AtomicUsize = AtomicUsize::new(0);
    let n = CASE.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("hdgcn-textprop-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn document(tokens: Vec<String>) -> Document {
    Document {
        id: "p".into(),
        tokens,
        label: 0,
        split: DocSplit::Train,
    }
}

/// Tokens from a small alphabet, so that repeats and out-of-vocabulary
/// words are common.
fn tokens(max_len: usize) -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec(
        prop::sample::select(vec!["a", "b", "c", "d", "e", "f", "g", "h"]),
        1..max_len,
    )
    .prop_map(|v| v.into_iter().map(str::to_string).collect())
}

/// The graph of a document computed the slow way: every ordered pair of
/// positions `i < j` with `j - i < window` whose vocabulary ids differ is
/// an edge between those ids, in both directions.
fn brute_force_edges(doc: &Document, vocab: &Vocab, window: usize) -> BTreeSet<(usize, usize)> {
    let ids: Vec<usize> = doc.tokens.iter().map(|t| vocab.id(t)).collect();
    let mut edges = BTreeSet::new();
    for i in 0..ids.len() {
        for j in i + 1..ids.len() {
            if j - i < window && ids[i] != ids[j] {
                edges.insert((ids[i], ids[j]));
                edges.insert((ids[j], ids[i]));
            }
        }
    }
    edges
}

/// One document of a generated corpus: (split field, label field, text).
type GenDoc = (&'static str, &'static str, String);

/// A corpus in the text_gcn layout, valid unless a field drawn is not
/// ("dev", an empty label).
fn corpus_docs() -> impl Strategy<Value = Vec<GenDoc>> {
    let split = prop_oneof![
        10 => prop::sample::select(vec!["train", "training", "test"]),
        1 => Just("dev"),
    ];
    let label = prop_oneof![
        10 => prop::sample::select(vec!["acq", "earn", "crude", " earn "]),
        1 => Just(""),
    ];
    let text = prop::collection::vec(prop::sample::select(vec!["oil", "price", "é", "x"]), 0..5)
        .prop_map(|w| w.join(" "));
    prop::collection::vec((split, label, text), 1..7)
}

/// Damage done to a generated file's bytes.
#[derive(Clone, Copy, Debug)]
enum Damage {
    None,
    /// Overwrite the byte at this position (modulo the length) with 0xff.
    InvalidUtf8(usize),
    /// Delete the byte at this position.
    DropByte(usize),
    /// Cut the file at this position.
    Truncate(usize),
    /// Remove the final newline.
    NoFinalNewline,
    /// Windows line ends.
    Crlf,
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        8 => Just(Damage::None),
        1 => any::<usize>().prop_map(Damage::InvalidUtf8),
        1 => any::<usize>().prop_map(Damage::DropByte),
        1 => any::<usize>().prop_map(Damage::Truncate),
        1 => Just(Damage::NoFinalNewline),
        1 => Just(Damage::Crlf),
    ]
}

fn apply(damage: Damage, bytes: &mut Vec<u8>) {
    let len = bytes.len().max(1);
    match damage {
        Damage::None => {}
        Damage::InvalidUtf8(i) if !bytes.is_empty() => bytes[i % len] = 0xff,
        Damage::DropByte(i) if !bytes.is_empty() => {
            bytes.remove(i % len);
        }
        Damage::Truncate(i) => bytes.truncate(i % len),
        Damage::NoFinalNewline if bytes.last() == Some(&b'\n') => {
            bytes.pop();
        }
        Damage::Crlf => {
            *bytes = String::from_utf8_lossy(bytes)
                .replace('\n', "\r\n")
                .into_bytes();
        }
        _ => {}
    }
}

/// A word-vector file: an optional word2vec header, then lines of a word
/// and values, most of them `d` finite numbers, some of them not.
fn glove_lines() -> impl Strategy<Value = (Option<usize>, Vec<(String, Vec<String>)>)> {
    let word = prop::sample::select(vec!["a", "b", "<unk>", "zebra", "7"]).prop_map(str::to_string);
    let value = prop_oneof![
        12 => (-100i32..100).prop_map(|v| format!("{}", v as f32 / 8.0)),
        2 => (-9i32..9).prop_map(|e| format!("1e{e}")),
        1 => prop::sample::select(vec!["NaN", "inf", "1e99", "x"]).prop_map(str::to_string),
    ];
    (1usize..4).prop_flat_map(move |d| {
        let len = prop_oneof![8 => Just(d), 1 => Just(d + 1), 1 => Just(d - 1)];
        let line = (
            word.clone(),
            len.prop_flat_map({
                let value = value.clone();
                move |n| prop::collection::vec(value.clone(), n)
            }),
        );
        (
            prop::option::weighted(0.2, Just(d)),
            prop::collection::vec(line, 0..7),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// `doc_graph` equals the brute-force graph: nodes are the distinct
    /// vocabulary ids in order of first occurrence, counts add up to the
    /// document length, and the edge set is the one of all close pairs.
    #[test]
    fn doc_graph_matches_brute_force(
        train in tokens(12),
        doc in tokens(30),
        window in 1usize..6,
        min_count in 1usize..3,
    ) {
        let vocab = Vocab::build([&document(train)], min_count);
        let d = document(doc);
        let g = doc_graph(&d, &vocab, window).unwrap();

        let mut first_seen = Vec::new();
        let mut counts: HashMap<usize, usize> = HashMap::new();
        for t in &d.tokens {
            let id = vocab.id(t);
            if !first_seen.contains(&id) {
                first_seen.push(id);
            }
            *counts.entry(id).or_default() += 1;
        }
        prop_assert_eq!(&g.node_tokens, &first_seen);
        let expected_counts: Vec<usize> = first_seen.iter().map(|id| counts[id]).collect();
        prop_assert_eq!(&g.node_counts, &expected_counts);
        prop_assert_eq!(g.graph.num_nodes(), first_seen.len());

        let adj = g.graph.adjacency();
        let mut got = BTreeSet::new();
        for (&w, (r, c)) in adj.iter() {
            prop_assert_eq!(w, 1.0, "edge ({}, {}) has weight {}", r, c, w);
            got.insert((g.node_tokens[r], g.node_tokens[c]));
        }
        prop_assert_eq!(got, brute_force_edges(&d, &vocab, window));
        prop_assert!(g.graph.is_symmetric() && !g.graph.has_self_loops());
    }

    /// The validation split partitions the given indices, has the stated
    /// size, is sorted, and depends only on (indices, seed).
    #[test]
    fn validation_split_partitions(
        set in prop::collection::btree_set(0usize..500, 0..80),
        fraction in 0.0f64..=1.0,
        seed in any::<u64>(),
    ) {
        let mut train: Vec<usize> = set.into_iter().collect();
        // Not sorted on input: the result must still be sorted.
        train.reverse();
        let (rest, val) = validation_split(&train, fraction, seed).unwrap();
        prop_assert_eq!(val.len(), (fraction * train.len() as f64).floor() as usize);
        prop_assert!(rest.windows(2).all(|w| w[0] < w[1]));
        prop_assert!(val.windows(2).all(|w| w[0] < w[1]));
        let mut all: Vec<usize> = rest.iter().chain(&val).copied().collect();
        all.sort_unstable();
        let mut expected = train.clone();
        expected.sort_unstable();
        prop_assert_eq!(all, expected);
        prop_assert_eq!(validation_split(&train, fraction, seed).unwrap(), (rest, val));
    }

    /// A generated corpus loads exactly as generated when every field is
    /// valid and its files are undamaged; otherwise it either loads into a
    /// corpus consistent with its label file or gives a `Format` error
    /// naming one of the two files and a line. Nothing panics.
    #[test]
    fn corpus_reader_loads_or_names_the_line(
        docs in corpus_docs(),
        meta_damage in damage(),
        text_damage in damage(),
    ) {
        let mut meta: Vec<u8> = docs
            .iter()
            .enumerate()
            .flat_map(|(i, (split, label, _))| {
                format!("{i}\t{split}\t{label}\n").into_bytes()
            })
            .collect();
        let mut text: Vec<u8> = docs
            .iter()
            .flat_map(|d| format!("{}\n", d.2).into_bytes())
            .collect();
        apply(meta_damage, &mut meta);
        apply(text_damage, &mut text);
        // A label that only test documents carry is refused too.
        let taught: BTreeSet<&str> = docs
            .iter()
            .filter(|d| d.0 != "test")
            .map(|d| d.1.trim())
            .collect();
        let valid = docs.iter().all(|(split, label, _)| {
            *split != "dev" && !label.trim().is_empty() && taught.contains(label.trim())
        });
        // Without its final newline, a text file whose last document is
        // empty has one line fewer: the reader cannot tell it from a missing
        // document, so that case counts as damage.
        let last_empty = docs.last().is_some_and(|d| d.2.is_empty());
        let intact = matches!(meta_damage, Damage::None | Damage::NoFinalNewline | Damage::Crlf)
            && (matches!(text_damage, Damage::None | Damage::Crlf)
                || matches!(text_damage, Damage::NoFinalNewline) && !last_empty);

        let dir = scratch("corpus");
        let (labels_path, text_path) = (dir.join("x.txt"), dir.join("x.clean.txt"));
        std::fs::write(&labels_path, &meta).unwrap();
        std::fs::write(&text_path, &text).unwrap();
        let result = TextCorpus::from_files("x", &labels_path, &text_path);
        std::fs::remove_dir_all(&dir).ok();
        match result {
            Ok(c) => {
                let body = meta.strip_suffix(b"\n").unwrap_or(&meta);
                prop_assert_eq!(c.docs.len(), body.split(|&b| b == b'\n').count());
                prop_assert!(c.docs.iter().all(|d| d.label < c.num_classes()));
                prop_assert_eq!(c.train_indices().len() + c.test_indices().len(), c.docs.len());
                if intact {
                    // Class ids follow the sorted, trimmed label names.
                    let labels: BTreeSet<&str> = docs.iter().map(|d| d.1.trim()).collect();
                    let labels: Vec<String> = labels.into_iter().map(str::to_string).collect();
                    prop_assert_eq!(&c.labels, &labels);
                    for (got, (split, label, words)) in c.docs.iter().zip(&docs) {
                        prop_assert_eq!(&c.labels[got.label], label.trim());
                        let want = match *split {
                            "test" => DocSplit::Test,
                            _ => DocSplit::Train,
                        };
                        prop_assert_eq!(got.split, want);
                        prop_assert_eq!(got.tokens.join(" "), words.as_str());
                    }
                }
            }
            Err(Error::Format { path, reason }) => {
                prop_assert!(!(valid && intact), "valid corpus refused: {}", reason);
                let named = [&labels_path, &text_path].map(|p| p.display().to_string());
                prop_assert!(named.contains(&path), "{}", path);
                prop_assert!(reason.starts_with("line ") || reason == "no documents", "{}", reason);
            }
            Err(other) => prop_assert!(false, "unexpected error {:?}", other),
        }
    }

    /// Any word-vector file either loads into a finite `vocab x d` matrix
    /// whose found rows repeat the file's first line for the word, or gives
    /// a `Format` error; nothing panics.
    #[test]
    fn glove_reader_loads_or_names_the_line(
        (header, lines) in glove_lines(),
        blank_first in any::<bool>(),
        give_dim in any::<bool>(),
        damage in damage(),
    ) {
        let mut text = String::new();
        if blank_first {
            text.push('\n');
        }
        if let Some(d) = header {
            text.push_str(&format!("{} {d}\n", lines.len()));
        }
        for (word, values) in &lines {
            text.push_str(&format!("{word} {}\n", values.join(" ")));
        }
        let mut bytes = text.into_bytes();
        apply(damage, &mut bytes);
        let dim = if give_dim { lines.first().map(|l| l.1.len().max(1)) } else { None };
        let dir = scratch("glove");
        let path = dir.join("v.txt");
        std::fs::write(&path, &bytes).unwrap();
        let vocab = Vocab::build([&document(vec!["a".into(), "b".into()])], 1);
        let result = load_glove(&path, &vocab, dim);
        std::fs::remove_dir_all(&dir).ok();
        match result {
            Ok((m, found)) => {
                prop_assert_eq!(m.nrows(), vocab.len());
                if let Some(d) = dim {
                    prop_assert_eq!(m.ncols(), d);
                }
                prop_assert!(found <= vocab.len());
                prop_assert!(m.iter().all(|v| v.is_finite()));
                // The first line of each word, parsed here independently.
                let text = std::str::from_utf8(&bytes).unwrap();
                let mut firsts: HashMap<&str, Vec<f32>> = HashMap::new();
                for line in text.lines() {
                    let mut fields = line.split_whitespace();
                    if let Some(word) = fields.next() {
                        let values: Option<Vec<f32>> = fields.map(|f| f.parse().ok()).collect();
                        if let Some(values) = values.filter(|v| v.len() == m.ncols()) {
                            firsts.entry(word).or_insert(values);
                        }
                    }
                }
                let mut seen = 0;
                for id in 0..vocab.len() {
                    let word = vocab.token(id).unwrap();
                    if let Some(v) = firsts.get(word) {
                        seen += 1;
                        prop_assert_eq!(&m.row(id).to_vec(), v, "row of {}", word);
                    } else {
                        prop_assert!(m.row(id).iter().all(|&x| x == 0.0), "row of {}", word);
                    }
                }
                prop_assert_eq!(seen, found);
            }
            Err(Error::Format { reason, .. }) => {
                prop_assert!(
                    reason.starts_with("line ") || reason == "no word vectors (dimension unknown)",
                    "{}",
                    reason
                );
            }
            Err(other) => prop_assert!(false, "unexpected error {:?}", other),
        }
    }
}
