//! text_gcn corpora (R8, R52, mr, ohsumed): loading against the published
//! document counts, vocabulary, per-document word graphs, validation splits
//! and the GloVe reader.

use hdgcn::Error;
use hdgcn::data::text::{
    DocSplit, Document, MAX_GLOVE_DIM, TextCorpus, TfIdf, Vocab, doc_graph, load_glove,
    validation_split,
};
use hdgcn::data::text_gcn_dir;
use std::path::{Path, PathBuf};

mod common;

/// A fresh, empty temporary folder unique to this process and `tag`.
fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hdgcn-text-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("corpus")).unwrap();
    dir
}

/// Writes `<dir>/<stem>.txt` and `<dir>/corpus/<stem>.clean.txt`.
fn write_corpus(dir: &Path, stem: &str, meta: &str, text: &str) {
    std::fs::write(dir.join(format!("{stem}.txt")), meta).unwrap();
    std::fs::write(dir.join(format!("corpus/{stem}.clean.txt")), text).unwrap();
}

fn doc(tokens: &str) -> Document {
    Document {
        id: "t".into(),
        tokens: tokens.split_whitespace().map(str::to_string).collect(),
        label: 0,
        split: DocSplit::Train,
    }
}

fn format_reason(e: Error) -> (String, String) {
    match e {
        Error::Format { path, reason } => (path, reason),
        other => panic!("expected Error::Format, got {other:?}"),
    }
}

/// (name, train docs, test docs, classes, vocab size min_count 1, min_count 5,
/// total nodes, total undirected edges of the window-3 graphs of all
/// documents over the min_count-1 vocabulary) — vocabulary sizes count
/// `<unk>` and use the training documents only. Vocabulary and graph figures
/// were computed independently with a short Python script over the same files.
type Real = (
    &'static str,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
    usize,
);
const REAL: [Real; 4] = [
    ("R8", 5485, 2189, 8, 7523, 6455, 323_590, 844_171),
    ("r52", 6532, 2568, 52, 8696, 7465, 406_998, 1_071_924),
    ("MR", 7108, 3554, 2, 15525, 3343, 195_062, 389_374),
    ("ohsumed", 3357, 4043, 23, 13025, 9241, 588_048, 1_682_677),
];

#[test]
#[cfg_attr(
    not(hdgcn_data_tests),
    ignore = "needs the benchmark data: set HDGCN_DATA or put ../shared/data beside the crate"
)]
fn real_corpora_match_published_counts() {
    let root = common::benchmark_root("text_gcn");
    let dir = text_gcn_dir(&root);
    for (name, train, test, classes, v1, v5, total_nodes, total_edges) in REAL {
        let c = TextCorpus::load(&dir, name).unwrap();
        assert_eq!(c.name, name.to_lowercase());
        assert_eq!(c.docs.len(), train + test, "{name}");
        assert_eq!(c.train_indices().len(), train, "{name}");
        assert_eq!(c.test_indices().len(), test, "{name}");
        assert_eq!(c.num_classes(), classes, "{name}");
        assert!(
            c.labels.windows(2).all(|w| w[0] < w[1]),
            "{name} labels sorted"
        );
        // Every class is used; every document has tokens.
        let mut used = vec![0usize; classes];
        for d in &c.docs {
            used[d.label] += 1;
            assert!(!d.tokens.is_empty(), "{name} doc {}", d.id);
        }
        assert!(used.iter().all(|&n| n > 0), "{name}: {used:?}");

        let tr = c.train_indices();
        let vocab1 = Vocab::build(tr.iter().map(|&i| &c.docs[i]), 1);
        let vocab5 = Vocab::build(tr.iter().map(|&i| &c.docs[i]), 5);
        let (mut nodes, mut edges) = (0usize, 0usize);
        for d in &c.docs {
            let g = doc_graph(d, &vocab1, 3).unwrap();
            assert!(g.graph.is_symmetric() && !g.graph.has_self_loops());
            nodes += g.graph.num_nodes();
            edges += g.graph.num_edges() / 2;
        }
        let n = c.docs.len() as f64;
        eprintln!(
            "{name}: docs {train}/{test}, classes {classes}, vocab(min1) {}, vocab(min5) {}, \
             mean nodes {:.2}, mean undirected edges {:.2}",
            vocab1.len(),
            vocab5.len(),
            nodes as f64 / n,
            edges as f64 / n
        );
        assert_eq!((vocab1.len(), vocab5.len()), (v1, v5), "{name} vocab sizes");
        assert_eq!(
            (nodes, edges),
            (total_nodes, total_edges),
            "{name} graph sizes"
        );
    }
}

#[test]
#[cfg_attr(
    not(hdgcn_data_tests),
    ignore = "needs the benchmark data: set HDGCN_DATA or put ../shared/data beside the crate"
)]
fn real_class_sizes() {
    let root = common::benchmark_root("text_gcn");
    let dir = text_gcn_dir(&root);
    // R8 documents per class (train + test), counted independently with Python.
    let c = TextCorpus::load(&dir, "r8").unwrap();
    let mut per = vec![0usize; c.num_classes()];
    for d in &c.docs {
        per[d.label] += 1;
    }
    assert_eq!(
        c.labels,
        [
            "acq", "crude", "earn", "grain", "interest", "money-fx", "ship", "trade"
        ]
    );
    assert_eq!(per, [2292, 374, 3923, 51, 271, 293, 144, 326]);
    let mr = TextCorpus::load(&dir, "mr").unwrap();
    assert_eq!(mr.labels, ["0", "1"]);
    let pos = mr.docs.iter().filter(|d| d.label == 1).count();
    assert_eq!(pos, 5331);
}

#[test]
#[cfg_attr(
    not(hdgcn_data_tests),
    ignore = "needs the benchmark data: set HDGCN_DATA or put ../shared/data beside the crate"
)]
fn ohsumed_training_quirk_and_path_ids() {
    let root = common::benchmark_root("text_gcn");
    let c = TextCorpus::load(&text_gcn_dir(&root), "OHSUMED").unwrap();
    let first_train = &c.docs[c.train_indices()[0]];
    assert!(first_train.id.contains("/training/"), "{}", first_train.id);
    assert!(c.docs[0].id.starts_with("data/ohsumed_single_23/test/C01/"));
    assert_eq!(c.labels.first().map(String::as_str), Some("C01"));
    assert_eq!(c.labels.last().map(String::as_str), Some("C23"));
}

#[test]
fn training_quirk_and_missing_final_newline() {
    let dir = temp_dir("quirk");
    // No final newline in either file; ohsumed-style `training` and path ids.
    write_corpus(
        &dir,
        "ohsumed",
        "data/x/training/C02/1\ttraining\tC02\ndata/x/test/C02/2\ttest\tC02",
        "heart attack\r\nvalve",
    );
    let c = TextCorpus::load(&dir, "ohsumed").unwrap();
    assert_eq!(c.docs.len(), 2);
    assert_eq!(c.labels, ["C02"]);
    assert_eq!(c.docs[0].split, DocSplit::Train);
    assert_eq!(c.docs[0].label, 0);
    assert_eq!(c.docs[0].id, "data/x/training/C02/1");
    assert_eq!(c.docs[0].tokens, ["heart", "attack"]);
    assert_eq!(c.docs[1].tokens, ["valve"]);
    assert_eq!(c.train_indices(), [0]);
    assert_eq!(c.test_indices(), [1]);

    // With a final newline in one file and not the other: same corpus.
    write_corpus(
        &dir,
        "ohsumed",
        "data/x/training/C02/1\ttraining\tC02\ndata/x/test/C02/2\ttest\tC02\n",
        "heart attack\nvalve",
    );
    assert_eq!(TextCorpus::load(&dir, "ohsumed").unwrap(), c);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn malformed_files_are_format_errors() {
    let dir = temp_dir("bad");
    // Text file has one more document than the label file.
    write_corpus(
        &dir,
        "R8",
        "0\ttrain\tacq\n1\ttest\tearn\n",
        "a b\nc d\ne f\n",
    );
    let (path, reason) = format_reason(TextCorpus::load(&dir, "r8").unwrap_err());
    assert!(path.ends_with("R8.clean.txt"), "{path}");
    assert!(reason.contains("line 3"), "{reason}");
    // Label file has one more line.
    write_corpus(
        &dir,
        "R8",
        "0\ttrain\tacq\n1\ttest\tearn\n2\ttest\tacq",
        "a b\nc d",
    );
    let (path, reason) = format_reason(TextCorpus::load(&dir, "r8").unwrap_err());
    assert!(path.ends_with("R8.txt"), "{path}");
    assert!(reason.contains("line 3"), "{reason}");
    // Unknown split.
    write_corpus(&dir, "R8", "0\ttrain\tacq\n1\tdev\tearn\n", "a\nb\n");
    let (path, reason) = format_reason(TextCorpus::load(&dir, "r8").unwrap_err());
    assert!(
        path.ends_with("R8.txt") && reason.contains("line 2"),
        "{reason}"
    );
    // Wrong field count.
    write_corpus(&dir, "R8", "0 train acq\n", "a\n");
    let (_, reason) = format_reason(TextCorpus::load(&dir, "r8").unwrap_err());
    assert!(reason.contains("line 1"), "{reason}");
    // Empty label file, invalid UTF-8.
    write_corpus(&dir, "R8", "", "");
    assert!(matches!(
        TextCorpus::load(&dir, "r8"),
        Err(Error::Format { .. })
    ));
    std::fs::write(dir.join("R8.txt"), "0\ttrain\tacq\n").unwrap();
    std::fs::write(dir.join("corpus/R8.clean.txt"), b"ok\xff\n").unwrap();
    let (_, reason) = format_reason(TextCorpus::load(&dir, "r8").unwrap_err());
    assert!(reason.contains("line 1"), "{reason}");
    // Missing file, unknown name.
    std::fs::remove_file(dir.join("corpus/R8.clean.txt")).unwrap();
    assert!(matches!(
        TextCorpus::load(&dir, "r8"),
        Err(Error::MissingFile(_))
    ));
    assert!(matches!(
        TextCorpus::load(&dir, "r9"),
        Err(Error::InvalidConfig(_))
    ));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn vocab_from_training_docs_only() {
    let dir = temp_dir("vocab");
    write_corpus(
        &dir,
        "mr",
        "0\ttrain\t1\n1\ttrain\t0\n2\ttest\t1\n",
        "good good film\ngood bad film plot\nunseen good\n",
    );
    let c = TextCorpus::load(&dir, "mr").unwrap();
    let tr = c.train_indices();
    let v = Vocab::build(tr.iter().map(|&i| &c.docs[i]), 1);
    // <unk>, then by count: good (3), film (2), then bad, plot (1, byte order).
    assert_eq!(v.len(), 5);
    assert_eq!(v.token(0), Some("<unk>"));
    assert_eq!(v.id("good"), 1);
    assert_eq!(v.id("film"), 2);
    assert_eq!(v.id("bad"), 3);
    assert_eq!(v.id("plot"), 4);
    assert_eq!(v.token(5), None);
    // A word only in the test document is out of vocabulary.
    assert_eq!(v.id("unseen"), 0);
    assert!(!v.contains("unseen") && v.contains("plot"));

    // min_count: only words seen at least twice.
    let v2 = Vocab::build(tr.iter().map(|&i| &c.docs[i]), 2);
    assert_eq!(v2.len(), 3);
    assert_eq!(v2.id("bad"), 0);
    assert_eq!(v2.id("film"), 2);
    let v4 = Vocab::build(tr.iter().map(|&i| &c.docs[i]), 4);
    assert_eq!(v4.len(), 1);
    assert!(!v4.is_empty());
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn doc_graph_window_three() {
    let d = doc("the cat sat on the mat");
    let v = Vocab::build([&d], 1);
    let g = doc_graph(&d, &v, 3).unwrap();
    // Nodes in order of first occurrence; the repeated "the" is one node.
    let words: Vec<&str> = g.node_tokens.iter().map(|&i| v.token(i).unwrap()).collect();
    assert_eq!(words, ["the", "cat", "sat", "on", "mat"]);
    // Pairs at token distance <= 2:
    // the-cat, the-sat, cat-sat, cat-on, sat-on, sat-the, on-the, on-mat, the-mat.
    let expected_undirected = [
        (0, 1), // the-cat
        (0, 2), // the-sat
        (1, 2), // cat-sat
        (1, 3), // cat-on
        (2, 3), // sat-on
        (2, 0), // sat-the (positions 2, 4)
        (3, 0), // on-the
        (3, 4), // on-mat
        (0, 4), // the-mat
    ];
    let mut expected: Vec<(usize, usize)> = expected_undirected
        .iter()
        .flat_map(|&(a, b)| [(a, b), (b, a)])
        .collect();
    expected.sort_unstable();
    expected.dedup();
    let mut got: Vec<(usize, usize)> = g
        .graph
        .adjacency()
        .iter()
        .map(|(w, (s, t))| {
            assert_eq!(*w, 1.0, "unweighted");
            (s, t)
        })
        .collect();
    got.sort_unstable();
    assert_eq!(got, expected);
    assert_eq!(g.graph.num_edges(), 16); // 8 distinct pairs, both directions
    assert_eq!(g.label, 0);

    // Window 2: only neighbours.
    let g2 = doc_graph(&d, &v, 2).unwrap();
    assert_eq!(g2.graph.num_edges(), 10);
    // Window 1: no edges.
    assert_eq!(doc_graph(&d, &v, 1).unwrap().graph.num_edges(), 0);
    assert!(matches!(doc_graph(&d, &v, 0), Err(Error::InvalidConfig(_))));
}

#[test]
fn doc_graph_merges_repeats_and_unknown_words() {
    let train = doc("a b");
    let v = Vocab::build([&train], 1);
    // x, y, z are all <unk>: one node. "a a a" repeated: one node.
    let d = doc("x a a a y z");
    let g = doc_graph(&d, &v, 3).unwrap();
    assert_eq!(g.node_tokens, [0, v.id("a")]);
    assert_eq!(g.node_counts, [3, 3], "three unknown words, three a's");
    assert_eq!(g.graph.num_edges(), 2);
    assert!(!g.graph.has_self_loops());
    // One distinct word: one node, no edge.
    let g1 = doc_graph(&doc("a a a"), &v, 3).unwrap();
    assert_eq!((g1.graph.num_nodes(), g1.graph.num_edges()), (1, 0));
    // Empty document: Error::Empty naming the document.
    match doc_graph(&doc(""), &v, 3) {
        Err(Error::Empty(msg)) => assert!(msg.contains("\"t\""), "{msg}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn validation_split_sizes_determinism_disjointness() {
    let train: Vec<usize> = (0..100).map(|i| i * 2).collect();
    let (rest, val) = validation_split(&train, 0.1, 7).unwrap();
    assert_eq!((rest.len(), val.len()), (90, 10));
    assert!(val.iter().all(|v| !rest.contains(v)));
    let mut all: Vec<usize> = rest.iter().chain(&val).copied().collect();
    all.sort_unstable();
    assert_eq!(all, train);
    assert!(val.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(
        validation_split(&train, 0.1, 7).unwrap(),
        (rest.clone(), val.clone())
    );
    let (_, other) = validation_split(&train, 0.1, 8).unwrap();
    assert_ne!(other, val, "different seeds, different validation sets");
    // floor(0.1 * 5485) = 548, as text_gcn.
    let big: Vec<usize> = (0..5485).collect();
    assert_eq!(validation_split(&big, 0.1, 0).unwrap().1.len(), 548);
    assert_eq!(validation_split(&train, 0.0, 0).unwrap().1.len(), 0);
    assert!(matches!(
        validation_split(&train, 1.5, 0),
        Err(Error::InvalidConfig(_))
    ));
    assert!(matches!(
        validation_split(&train, f64::NAN, 0),
        Err(Error::InvalidConfig(_))
    ));
    assert!(matches!(
        validation_split(&[1, 1], 0.5, 0),
        Err(Error::InvalidConfig(_))
    ));
}

#[test]
#[cfg_attr(
    not(hdgcn_data_tests),
    ignore = "needs the benchmark data: set HDGCN_DATA or put ../shared/data beside the crate"
)]
fn validation_split_on_real_corpus_leaves_test_alone() {
    let root = common::benchmark_root("text_gcn");
    let c = TextCorpus::load(&text_gcn_dir(&root), "r8").unwrap();
    let (rest, val) = validation_split(&c.train_indices(), 0.1, 0).unwrap();
    assert_eq!((rest.len(), val.len()), (4937, 548));
    assert!(
        val.iter()
            .chain(&rest)
            .all(|&i| c.docs[i].split == DocSplit::Train)
    );
}

#[test]
fn glove_loader() {
    let dir = temp_dir("glove");
    let v = Vocab::build([&doc("cat dog cat bird")], 1); // <unk>, cat, bird, dog
    let path = dir.join("vec.txt");
    std::fs::write(
        &path,
        "dog 0.5 -1 2\nfish 1 1 1\n\ncat 1e-3 0 3.25\ndog 9 9 9",
    )
    .unwrap();
    let (m, found) = load_glove(&path, &v, None).unwrap();
    assert_eq!(m.dim(), (4, 3));
    assert_eq!(found, 2);
    assert_eq!(m.row(v.id("dog")).to_vec(), [0.5, -1.0, 2.0]); // first line wins
    assert_eq!(m.row(v.id("cat")).to_vec(), [1e-3, 0.0, 3.25]);
    assert_eq!(m.row(v.id("bird")).to_vec(), [0.0; 3]); // missing: zeros
    assert_eq!(m.row(0).to_vec(), [0.0; 3]);
    assert_eq!(load_glove(&path, &v, Some(3)).unwrap().0, m);

    // Explicit dimension that disagrees with the file: error on line 1.
    let (_, reason) = format_reason(load_glove(&path, &v, Some(4)).unwrap_err());
    assert!(reason.contains("line 1"), "{reason}");
    // Inconsistent dimension inside the file.
    std::fs::write(&path, "dog 1 2 3\ncat 1 2\n").unwrap();
    let (p, reason) = format_reason(load_glove(&path, &v, None).unwrap_err());
    assert!(
        p.ends_with("vec.txt") && reason.contains("line 2"),
        "{reason}"
    );
    // NaN and non-numbers.
    std::fs::write(&path, "dog 1 2 3\nbird 1 2 3\ncat 1 NaN 3\n").unwrap();
    let (_, reason) = format_reason(load_glove(&path, &v, None).unwrap_err());
    assert!(reason.contains("line 3"), "{reason}");
    std::fs::write(&path, "dog 1 2 x3\n").unwrap();
    let (_, reason) = format_reason(load_glove(&path, &v, None).unwrap_err());
    assert!(reason.contains("line 1"), "{reason}");
    // word2vec header is skipped; empty file without dim is an error.
    std::fs::write(&path, "2 3\ndog 1 2 3\ncat 4 5 6").unwrap();
    assert_eq!(load_glove(&path, &v, None).unwrap().1, 2);
    // Too many values on a line; dimension out of range.
    std::fs::write(&path, format!("dog{}\n", " 1".repeat(MAX_GLOVE_DIM + 1))).unwrap();
    let (_, reason) = format_reason(load_glove(&path, &v, None).unwrap_err());
    assert!(reason.contains("line 1"), "{reason}");
    for d in [0, MAX_GLOVE_DIM + 1, usize::MAX] {
        assert!(matches!(
            load_glove(&path, &v, Some(d)),
            Err(Error::InvalidConfig(_))
        ));
    }
    // A `<unk>` line fills row 0.
    std::fs::write(&path, "<unk> 7 7\nbird 1 2").unwrap();
    let (m, found) = load_glove(&path, &v, None).unwrap();
    assert_eq!((found, m.row(0).to_vec()), (2, vec![7.0, 7.0]));
    std::fs::write(&path, "").unwrap();
    assert!(matches!(
        load_glove(&path, &v, None),
        Err(Error::Format { .. })
    ));
    assert_eq!(load_glove(&path, &v, Some(2)).unwrap().0.dim(), (4, 2));
    assert!(matches!(
        load_glove(&dir.join("none.txt"), &v, None),
        Err(Error::MissingFile(_))
    ));
    std::fs::remove_dir_all(&dir).ok();
}

/// TF-IDF computed the slow way: document frequency by scanning every
/// training document for the word, term frequency by counting the word's
/// tokens in the document.
fn tfidf_reference(train: &[Document], d: &Document, word: &str, sublinear: bool) -> f64 {
    let n = train.len() as f64;
    let df = train
        .iter()
        .filter(|t| t.tokens.iter().any(|w| w == word))
        .count() as f64;
    let count = d.tokens.iter().filter(|w| *w == word).count() as f64;
    let tf = if sublinear { 1.0 + count.ln() } else { count };
    tf * (((1.0 + n) / (1.0 + df)).ln() + 1.0)
}

#[test]
fn tfidf_node_weights_match_a_direct_count() {
    let train = [
        doc("heart attack heart failure"),
        doc("heart valve"),
        doc("attack of the valve valve valve"),
        doc("failure"),
    ];
    let vocab = Vocab::build(&train, 1);
    let tfidf = TfIdf::fit(&train, &vocab).unwrap();
    let test = doc("valve heart unseen heart heart failure unseen");
    for sublinear in [true, false] {
        let t = tfidf.clone().with_sublinear_tf(sublinear);
        for d in train.iter().chain([&test]) {
            let g = doc_graph(d, &vocab, 3).unwrap();
            let w = t.node_weights(&g).unwrap();
            assert_eq!(w.len(), g.graph.num_nodes());
            for (v, &id) in g.node_tokens.iter().enumerate() {
                let word = vocab.token(id).unwrap();
                let want = if id == 0 {
                    0.0 // <unk> is ignored, as scikit-learn does
                } else {
                    tfidf_reference(&train, d, word, sublinear)
                };
                assert!(
                    (w[v] - want).abs() < 1e-12,
                    "{word} in {:?}: {} vs {want}",
                    d.tokens,
                    w[v]
                );
            }
        }
    }
    // Hand-computed: "valve" is in 2 of 4 documents and 3 times in the
    // third one: (1 + ln 3)(ln(5/3) + 1).
    let g = doc_graph(&train[2], &vocab, 3).unwrap();
    let w = tfidf.node_weights(&g).unwrap();
    let valve = g
        .node_tokens
        .iter()
        .position(|&id| id == vocab.id("valve"))
        .unwrap();
    assert!((w[valve] - (1.0 + 3f64.ln()) * ((5.0f64 / 3.0).ln() + 1.0)).abs() < 1e-12);
    assert!(w.iter().all(|&x| x > 0.0));
    // A document of unknown words only pools its one node evenly.
    let g = doc_graph(&doc("zz yy zz"), &vocab, 3).unwrap();
    assert_eq!(tfidf.node_weights(&g).unwrap(), [1.0]);
    assert_eq!(tfidf.idf(0).unwrap(), 0.0);
}

#[test]
fn tfidf_rejects_bad_input() {
    let train = [doc("a b"), doc("b c")];
    let vocab = Vocab::build(&train, 1);
    assert!(matches!(
        TfIdf::fit(std::iter::empty::<&Document>(), &vocab),
        Err(Error::Empty(_))
    ));
    let tfidf = TfIdf::fit(&train, &vocab).unwrap();
    assert!(matches!(
        tfidf.idf(vocab.len()),
        Err(Error::IndexOutOfRange { .. })
    ));
    // A graph built on a larger vocabulary than the one fitted.
    let big = Vocab::build(&[doc("a b c d e f")], 1);
    let g = doc_graph(&doc("f e"), &big, 3).unwrap();
    assert!(matches!(
        tfidf.node_weights(&g),
        Err(Error::IndexOutOfRange { .. })
    ));
    // Counts that do not describe the nodes.
    let mut g = doc_graph(&doc("a b"), &vocab, 3).unwrap();
    g.node_counts.pop();
    assert!(matches!(
        tfidf.node_weights(&g),
        Err(Error::ShapeMismatch { .. })
    ));
    g.node_counts = vec![1, 0];
    assert!(matches!(
        tfidf.node_weights(&g),
        Err(Error::InvalidConfig(_))
    ));
}

#[test]
fn extended_vocabulary_keeps_ids_and_its_new_words_weigh_zero() {
    let train = [doc("heart attack heart"), doc("valve attack")];
    let vocab = Vocab::build(&train, 1);
    let test = [doc("heart murmur valve"), doc("murmur stenosis heart")];
    let ext = vocab.extended(&test);
    // Known words keep their ids; new ones follow, in order of first use.
    for id in 0..vocab.len() {
        let t = vocab.token(id).unwrap();
        assert_eq!(ext.id(t), id, "{t}");
    }
    assert_eq!(ext.len(), vocab.len() + 2);
    assert_eq!(ext.id("murmur"), vocab.len());
    assert_eq!(ext.id("stenosis"), vocab.len() + 1);
    assert!(ext.contains("murmur") && !vocab.contains("murmur"));
    // Extending with the training documents themselves adds nothing.
    assert_eq!(vocab.extended(&train), vocab);
    // Fitted on the training documents, the new words weigh 0 and the
    // others what they weigh with the training vocabulary.
    let on_ext = TfIdf::fit(&train, &ext).unwrap();
    let on_vocab = TfIdf::fit(&train, &vocab).unwrap();
    for d in &test {
        let g = doc_graph(d, &ext, 3).unwrap();
        let w = on_ext.node_weights(&g).unwrap();
        for (v, &id) in g.node_tokens.iter().enumerate() {
            let word = ext.token(id).unwrap();
            let want = if vocab.contains(word) {
                tfidf_reference(&train, d, word, true)
            } else {
                0.0
            };
            assert!((w[v] - want).abs() < 1e-12, "{word}: {} vs {want}", w[v]);
        }
        let heart = vocab.id("heart");
        assert_eq!(on_ext.idf(heart).unwrap(), on_vocab.idf(heart).unwrap());
    }
}
