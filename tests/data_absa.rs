//! ABSA loaders (`data::absa`): the real LAP14 / REST14 / REST15 files,
//! every malformed case on small synthetic files, and the §9 graph.

mod common;

use common::pickle::{binint, nd_frag_protocol3};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use hdgcn::Error;
use hdgcn::data::absa::{
    self, AbsaSample, AbsaSplit, Polarity, aspect_graph, build_vocab, read_asgcn, read_dualgcn,
};

fn tmpdir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hdgcn-absa-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn counts(samples: &[AbsaSample]) -> [usize; 3] {
    let mut c = [0; 3];
    for s in samples {
        c[s.label()] += 1;
    }
    c
}

// ---------------------------------------------------------------------------
// Real data
// ---------------------------------------------------------------------------

/// `(name, split, [negative, neutral, positive])`: the totals are the
/// absa README's table (LAP14 2282 / 632, REST14 3608 / 1119, REST15
/// 1204 / 542); the split by polarity was counted from the files.
const REAL: &[(&str, AbsaSplit, [usize; 3])] = &[
    ("lap14", AbsaSplit::Train, [851, 455, 976]),
    ("lap14", AbsaSplit::Test, [128, 167, 337]),
    ("rest14", AbsaSplit::Train, [807, 637, 2164]),
    ("rest14", AbsaSplit::Test, [196, 196, 727]),
    ("rest15", AbsaSplit::Train, [256, 36, 912]),
    ("rest15", AbsaSplit::Test, [182, 34, 326]),
];

#[test]
#[cfg_attr(not(hdgcn_data_tests), ignore = "needs the benchmark data: absa/")]
fn real_files_load_with_the_published_counts() {
    let root = common::benchmark_root("absa");
    let totals: BTreeMap<(&str, bool), usize> = [
        (("lap14", true), 2282),
        (("lap14", false), 632),
        (("rest14", true), 3608),
        (("rest14", false), 1119),
        (("rest15", true), 1204),
        (("rest15", false), 542),
    ]
    .into_iter()
    .collect();
    for &(name, split, by_class) in REAL {
        let s = absa::load(&root, name, split).unwrap();
        assert_eq!(
            s.len(),
            totals[&(name, split == AbsaSplit::Train)],
            "{name} {split:?}"
        );
        assert_eq!(counts(&s), by_class, "{name} {split:?}");
        for (i, x) in s.iter().enumerate() {
            let n = x.tokens.len();
            assert!(
                x.aspect.start < x.aspect.end && x.aspect.end <= n,
                "{name} {i}"
            );
            assert!(x.arcs.iter().all(|&(a, b)| a < b && b < n), "{name} {i}");
            // A dependency tree over n tokens has at most n - 1 arcs.
            assert!(x.arcs.len() < n, "{name} {i}");
            let g = aspect_graph(x).unwrap();
            assert_eq!(g.num_nodes(), n + x.aspect.len());
            assert!(g.is_symmetric() && !g.has_self_loops());
        }
    }
    // REST15 test's first sample: "love $T$" / "al di la" / 1.
    let s = absa::load(&root, "rest15", AbsaSplit::Test).unwrap();
    assert_eq!(s[0].tokens, ["love", "al", "di", "la"]);
    assert_eq!(s[0].aspect, 1..4);
    assert_eq!(s[0].polarity, Polarity::Positive);
    // The spaCy graph links every token to the tree.
    assert_eq!(s[0].arcs.len(), 3);
}

// ---------------------------------------------------------------------------
// Synthetic files
// ---------------------------------------------------------------------------

/// `(key, n, undirected edges)` of one adjacency in a graph pickle.
type GraphSpec = (i32, usize, Vec<(usize, usize)>);

/// A protocol-3 pickle of `{key: n x n float32 adjacency}`.
fn graph_pickle(graphs: &[GraphSpec]) -> Vec<u8> {
    let mut out = b"\x80\x03}(".to_vec();
    for (key, n, edges) in graphs {
        binint(&mut out, *key);
        let mut m = vec![0f32; n * n];
        for i in 0..*n {
            m[i * n + i] = 1.0;
        }
        for &(i, j) in edges {
            m[i * n + j] = 1.0;
            m[j * n + i] = 1.0;
        }
        let raw: Vec<u8> = m.iter().flat_map(|x| x.to_le_bytes()).collect();
        nd_frag_protocol3(&mut out, &[*n as i32, *n as i32], "f4", &raw);
    }
    out.extend_from_slice(b"u.");
    out
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// The message of a [`Error::Format`], checked to name `file`.
fn format_error(e: Error, file: &Path) -> String {
    let Error::Format { path, reason } = &e else {
        panic!("expected a format error, got {e:?}");
    };
    assert_eq!(path, &file.display().to_string(), "{e}");
    reason.clone()
}

const GOOD_JSON: &str = r#"[
 {"token": ["The", "food", "was", "great"], "pos": [], "head": [2, 4, 4, 0], "deprel": [],
  "aspects": [{"term": ["food"], "from": 1, "to": 2, "polarity": "positive"},
              {"term": ["The"], "from": 0, "to": 1, "polarity": "conflict"}]},
 {"token": ["Bad", "battery", "life"], "pos": [], "head": [3, 3, 0], "deprel": [],
  "aspects": [{"term": ["battery", "life"], "from": 1, "to": 3, "polarity": "negative"},
              {"term": ["Bad"], "from": 0, "to": 1, "polarity": "neutral"}]}
]"#;

#[test]
fn dualgcn_reads_one_sample_per_aspect_and_drops_conflict() {
    let dir = tmpdir("dual-good");
    let p = write(&dir, "train.json", GOOD_JSON.as_bytes());
    let s = read_dualgcn(&p).unwrap();
    assert_eq!(s.len(), 3);
    assert_eq!(s[0].tokens, ["The", "food", "was", "great"]);
    assert_eq!(s[0].aspect, 1..2);
    assert_eq!(s[0].polarity, Polarity::Positive);
    assert_eq!(s[0].arcs, [(0, 1), (1, 3), (2, 3)]);
    assert_eq!(
        (s[1].aspect.clone(), s[1].polarity),
        (1..3, Polarity::Negative)
    );
    assert_eq!(s[1].arcs, [(0, 2), (1, 2)]);
    assert_eq!(s[2].polarity, Polarity::Neutral);
    assert_eq!(counts(&s), [1, 1, 1]);
}

#[test]
fn dualgcn_malformed_files_name_file_and_sentence() {
    let dir = tmpdir("dual-bad");
    let cases: [(&str, String, &str); 6] = [
        (
            "truncated.json",
            GOOD_JSON[..GOOD_JSON.len() - 40].to_string(),
            "sentence 1",
        ),
        (
            "head.json",
            GOOD_JSON.replace("[3, 3, 0]", "[3, 4, 0]"),
            "sentence 1: head 4 of token 1 is out of range",
        ),
        (
            "negative_head.json",
            GOOD_JSON.replace("[2, 4, 4, 0]", "[2, -1, 4, 0]"),
            "sentence 0: head -1 of token 1 is out of range",
        ),
        (
            "polarity.json",
            GOOD_JSON.replace("\"neutral\"", "\"mixed\""),
            "sentence 1: aspect 1: unknown polarity \"mixed\"",
        ),
        (
            "span.json",
            GOOD_JSON.replace("\"from\": 1, \"to\": 3", "\"from\": 1, \"to\": 4"),
            "sentence 1: aspect 0: span from 1 to 4",
        ),
        (
            "heads_len.json",
            GOOD_JSON.replace("[3, 3, 0]", "[3, 0]"),
            "sentence 1: 3 tokens but 2 heads",
        ),
    ];
    for (name, text, want) in cases {
        let p = write(&dir, name, text.as_bytes());
        let reason = format_error(read_dualgcn(&p).unwrap_err(), &p);
        assert!(reason.contains(want), "{name}: {reason}");
    }
}

const GOOD_RAW: &str =
    "the $T$ was great\nfood\n1\nbad $T$ .\nbattery life\n-1\nok $T$\nstaff\n0\n";

/// Graphs of `GOOD_RAW`: keys 0, 3, 6.
fn good_graphs() -> Vec<GraphSpec> {
    vec![
        (0, 4, vec![(0, 1), (1, 3), (2, 3)]),
        (3, 4, vec![(0, 2), (1, 2), (2, 3)]),
        (6, 2, vec![(0, 1)]),
    ]
}

#[test]
fn asgcn_reads_samples_and_their_graphs() {
    let dir = tmpdir("asgcn-good");
    let raw = write(
        &dir,
        "x.raw",
        GOOD_RAW.replace("\n0\n", "\nconflict\n").as_bytes(),
    );
    let graph = write(&dir, "x.raw.graph", &graph_pickle(&good_graphs()));
    let s = read_asgcn(&raw, &graph).unwrap();
    assert_eq!(s.len(), 2, "the conflict sample is dropped");
    assert_eq!(s[1].tokens, ["bad", "battery", "life", "."]);
    assert_eq!(s[1].aspect, 1..3);
    assert_eq!(s[1].polarity, Polarity::Negative);
    assert_eq!(s[1].arcs, [(0, 2), (1, 2), (2, 3)]);
    // Without a final newline, and with the third sample kept.
    let raw = write(&dir, "y.raw", GOOD_RAW.trim_end().as_bytes());
    let s = read_asgcn(&raw, &graph).unwrap();
    assert_eq!(counts(&s), [1, 1, 1]);
    assert_eq!((s[2].tokens.len(), s[2].aspect.clone()), (2, 1..2));
}

#[test]
fn asgcn_malformed_files_name_file_and_sample() {
    let dir = tmpdir("asgcn-bad");
    let good_graph = write(&dir, "good.raw.graph", &graph_pickle(&good_graphs()));
    // Errors in the .raw file.
    let raw_cases: [(&str, String, &str); 4] = [
        (
            "cut.raw",
            GOOD_RAW.trim_end().trim_end_matches("\n0").to_string(),
            "sample 2 (line 7): cut off at the end of the file: 2 of its 3 lines",
        ),
        (
            "polarity.raw",
            GOOD_RAW.replace("\n-1\n", "\n2\n"),
            "sample 1 (line 4): unknown polarity \"2\"",
        ),
        (
            "no_t.raw",
            GOOD_RAW.replace("bad $T$ .", "bad ."),
            "sample 1 (line 4): the sentence must hold exactly one $T$",
        ),
        (
            "two_t.raw",
            GOOD_RAW.replace("ok $T$", "$T$ ok $T$"),
            "sample 2 (line 7): the sentence must hold exactly one $T$",
        ),
    ];
    for (name, text, want) in raw_cases {
        let p = write(&dir, name, text.as_bytes());
        let reason = format_error(read_asgcn(&p, &good_graph).unwrap_err(), &p);
        assert!(reason.contains(want), "{name}: {reason}");
    }
    // Errors in the graph file.
    let raw = write(&dir, "good.raw", GOOD_RAW.as_bytes());
    let mut missing = good_graphs();
    missing.remove(1);
    let mut wrong_size = good_graphs();
    wrong_size[2].1 = 3;
    let graph_cases = [
        (
            "missing.raw.graph",
            graph_pickle(&missing),
            "sample 1 (line 4): no graph (key 3)",
        ),
        (
            "size.raw.graph",
            graph_pickle(&wrong_size),
            "sample 2 (line 7): graph of shape [3, 3] but the sentence has 2 tokens",
        ),
    ];
    for (name, bytes, want) in graph_cases {
        let g = write(&dir, name, &bytes);
        let reason = format_error(read_asgcn(&raw, &g).unwrap_err(), &g);
        assert!(reason.contains(want), "{name}: {reason}");
    }
    // A truncated pickle is an error naming the graph file.
    let bytes = graph_pickle(&good_graphs());
    let g = write(&dir, "truncated.raw.graph", &bytes[..bytes.len() / 2]);
    format_error(read_asgcn(&raw, &g).unwrap_err(), &g);
}

#[test]
fn missing_files_and_unknown_names() {
    let dir = tmpdir("names");
    let e = absa::load(&dir, "rest16", AbsaSplit::Test).unwrap_err();
    assert!(
        matches!(e, Error::MissingFile(ref p) if p.ends_with("absa/asgcn/semeval16/restaurant_test.raw")),
        "{e:?}"
    );
    let e = absa::load(&dir, "lap14", AbsaSplit::Train).unwrap_err();
    assert!(
        matches!(e, Error::MissingFile(ref p) if p.ends_with("absa/dualgcn/Laptops_stanza/train.json")),
        "{e:?}"
    );
    let e = absa::load(&dir, "twitter", AbsaSplit::Train).unwrap_err();
    assert!(matches!(e, Error::InvalidConfig(_)), "{e:?}");
    // A directory is refused, not read.
    let e = read_dualgcn(&dir).unwrap_err();
    assert!(matches!(e, Error::Io { .. }), "{e:?}");
}

// ---------------------------------------------------------------------------
// The §9 graph
// ---------------------------------------------------------------------------

#[test]
fn section9_graph_of_a_hand_made_sentence() {
    // "The battery life is short": the -> life, battery -> life,
    // life -> short, is -> short, short = root. Aspect "battery life" (1..3).
    let s = AbsaSample {
        tokens: ["The", "battery", "life", "is", "short"]
            .map(String::from)
            .to_vec(),
        aspect: 1..3,
        polarity: Polarity::Negative,
        arcs: vec![(0, 2), (1, 2), (2, 4), (3, 4)],
    };
    let g = aspect_graph(&s).unwrap();
    assert_eq!(g.num_nodes(), 7);
    // Nodes 5, 6 are the appended "battery", "life".
    let undirected = [
        (0, 2),
        (1, 2),
        (2, 4),
        (3, 4),
        (1, 5), // battery (aspect) - battery (sentence)
        (2, 6), // life (aspect) - life (sentence)
        (5, 6), // neighbours within the aspect
    ];
    let mut want: Vec<(usize, usize)> = undirected
        .iter()
        .flat_map(|&(a, b)| [(a, b), (b, a)])
        .collect();
    want.sort_unstable();
    let mut got: Vec<(usize, usize)> = g
        .adjacency()
        .iter()
        .map(|(&w, (i, j))| {
            assert_eq!(w, 1.0);
            (i, j)
        })
        .collect();
    got.sort_unstable();
    assert_eq!(got, want);

    // Lower-cased lookup, one id per node.
    let vocab = build_vocab([&s], 1);
    let ids = s.lookup_ids(&vocab);
    assert_eq!(ids.len(), 7);
    assert_eq!(vocab.token(ids[0]), Some("the"));
    assert_eq!((ids[5], ids[6]), (ids[1], ids[2]));
    assert_eq!(s.node_tokens()[5..], ["battery", "life"]);
    let other = AbsaSample {
        tokens: vec!["THE".into(), "unseen".into()],
        aspect: 0..1,
        polarity: Polarity::Neutral,
        arcs: vec![(0, 1)],
    };
    let ids = other.lookup_ids(&vocab);
    assert_eq!(ids, [vocab.id("the"), 0, vocab.id("the")]);

    // A one-token aspect adds one node and one link.
    let g = aspect_graph(&other).unwrap();
    assert_eq!((g.num_nodes(), g.num_edges()), (3, 4));
    // A span outside the sentence is an error, not a panic.
    let bad = AbsaSample {
        aspect: 1..3,
        ..other
    };
    assert!(matches!(
        aspect_graph(&bad),
        Err(Error::NodeOutOfRange { .. })
    ));
    assert_eq!(
        Polarity::from_label(2).map(Polarity::name),
        Some("positive")
    );
}
