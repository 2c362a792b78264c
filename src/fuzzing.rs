//! Entry points of the cargo-fuzz targets in `fuzz/`, one per reader.
//!
//! Each takes arbitrary bytes, runs one reader on them and returns whether
//! it accepted them. None may panic, hang or allocate without bound: the
//! fuzz targets call these functions, and `tests/fuzz_replay.rs` feeds them
//! every committed regression input (and a local `fuzz/corpus/`, if any),
//! so that what the fuzzer once found stays fixed.
//!
//! Not part of the stable API.

use crate::backend::Cpu;
use crate::checkpoint::load_checkpoint_bytes;
use crate::data::absa::{AbsaSample, aspect_graph, parse_asgcn, parse_dualgcn};
use crate::data::planetoid::parse_test_index;
use crate::data::splits::parse_geom_gcn_npz;
use crate::data::text::{DocSplit, Document, TextCorpus, Vocab, doc_graph, load_glove_from_reader};
use crate::data::{Planetoid, PlanetoidFiles, UnlabelledNodes};
use crate::nn::Linear;
use rand::SeedableRng;

/// Separates the eight files of a [`planetoid`] input, and the two files
/// of a [`text_corpus`] or an [`absa_asgcn`] input.
pub const FILE_SEPARATOR: &[u8] = b"\n--hdgcn-fuzz-next-file--\n";

/// A fuzz target's entry function: whether the reader accepted the bytes.
pub type Entry = fn(&[u8]) -> bool;

/// The names of the fuzz targets, in `fuzz/fuzz_targets/<name>.rs`, with
/// their entry functions.
pub const TARGETS: [(&str, Entry); 8] = [
    ("npz_split", npz_split),
    ("test_index", test_index),
    ("planetoid", planetoid),
    ("text_corpus", text_corpus),
    ("glove", glove),
    ("checkpoint", checkpoint),
    ("absa_dualgcn", absa_dualgcn),
    ("absa_asgcn", absa_asgcn),
];

/// Splits `data` on [`FILE_SEPARATOR`] into exactly `n` parts (missing ones
/// empty, extra separators kept in the last part).
fn split_files(data: &[u8], n: usize) -> Vec<&[u8]> {
    let mut out = Vec::with_capacity(n);
    let mut rest = data;
    while out.len() + 1 < n {
        match rest
            .windows(FILE_SEPARATOR.len())
            .position(|w| w == FILE_SEPARATOR)
        {
            Some(i) => {
                out.push(&rest[..i]);
                rest = &rest[i + FILE_SEPARATOR.len()..];
            }
            None => break,
        }
    }
    out.push(rest);
    out.resize(n, &[][..]);
    out
}

/// Joins files with [`FILE_SEPARATOR`] into one fuzz input.
pub fn join_files(files: &[&[u8]]) -> Vec<u8> {
    files.join(FILE_SEPARATOR)
}

/// A geom-gcn split `.npz`, read with and without a known node count.
pub fn npz_split(data: &[u8]) -> bool {
    let free = parse_geom_gcn_npz(data, "fuzz.npz", None);
    if let Ok(s) = &free {
        let n = s.train.len() + s.val.len() + s.test.len();
        let _ = parse_geom_gcn_npz(data, "fuzz.npz", Some(n));
    }
    let _ = parse_geom_gcn_npz(data, "fuzz.npz", Some(2708));
    free.is_ok()
}

/// A Planetoid `test.index` file.
pub fn test_index(data: &[u8]) -> bool {
    parse_test_index(data, "fuzz.test.index").is_ok()
}

/// The eight Planetoid files (`x`, `tx`, `allx`, `y`, `ty`, `ally`,
/// `graph`, `test.index`, joined by [`FILE_SEPARATOR`]), assembled as Cora
/// and as CiteSeer under both treatments of unlabelled nodes.
pub fn planetoid(data: &[u8]) -> bool {
    let p = split_files(data, 8);
    let files = PlanetoidFiles {
        x: p[0],
        tx: p[1],
        allx: p[2],
        y: p[3],
        ty: p[4],
        ally: p[5],
        graph: p[6],
        test_index: p[7],
    };
    let mut any = false;
    for name in ["cora", "citeseer"] {
        for policy in [UnlabelledNodes::ClassZero, UnlabelledNodes::Drop] {
            if let Ok(ds) = Planetoid::from_bytes(name, &files, policy) {
                any = true;
                let _ = ds.row_normalized_features();
                let _ = ds.without_unlabelled(&ds.public_split);
            }
        }
    }
    any
}

/// A text_gcn corpus: the label file and the text file joined by
/// [`FILE_SEPARATOR`]; if it loads, its vocabulary and document graphs.
pub fn text_corpus(data: &[u8]) -> bool {
    let p = split_files(data, 2);
    let Ok(c) = TextCorpus::from_bytes("fuzz", p[0], p[1]) else {
        return false;
    };
    let train = c.train_indices();
    let vocab = Vocab::build(train.iter().map(|&i| &c.docs[i]), 1);
    let _ = Vocab::try_build(train.iter().map(|&i| &c.docs[i]), 2);
    for d in &c.docs {
        let _ = doc_graph(d, &vocab, 3);
    }
    true
}

/// A GloVe text file, read for a small fixed vocabulary, with the
/// dimension found from the file and given as 3.
pub fn glove(data: &[u8]) -> bool {
    let doc = Document {
        id: String::new(),
        tokens: ["the", "cat", "<unk>", "7"].map(str::to_string).to_vec(),
        label: 0,
        split: DocSplit::Train,
    };
    let vocab = Vocab::build([&doc], 1);
    let found = load_glove_from_reader(data, "fuzz.glove", &vocab, None).is_ok();
    let _ = load_glove_from_reader(data, "fuzz.glove", &vocab, Some(3));
    found
}

/// A safetensors checkpoint, loaded into a 3 x 2 `Linear` layer with bias
/// (parameters `weight` and `bias`) in `f32` and in `f64`.
pub fn checkpoint(data: &[u8]) -> bool {
    let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    let f32_ok = Linear::new(&Cpu::<f32>::new(), 3, 2, true, &mut rng)
        .is_ok_and(|m| load_checkpoint_bytes(&m, data, "fuzz.safetensors").is_ok());
    let f64_ok = Linear::new(&Cpu::<f64>::new(), 3, 2, true, &mut rng)
        .is_ok_and(|m| load_checkpoint_bytes(&m, data, "fuzz.safetensors").is_ok());
    f32_ok || f64_ok
}

/// Whether every sample of an accepted ABSA file makes a §9 graph (the
/// readers' promise: a sample they return never points past its tokens).
fn absa_graphs(samples: &[AbsaSample]) -> bool {
    samples.iter().all(|s| aspect_graph(s).is_ok())
}

/// A DualGCN ABSA JSON file (LAP14, REST14); if it loads, every sample's
/// aspect graph must build.
pub fn absa_dualgcn(data: &[u8]) -> bool {
    match parse_dualgcn(data, "fuzz.json") {
        Ok(samples) => {
            assert!(absa_graphs(&samples), "a DualGCN sample has no graph");
            true
        }
        Err(_) => false,
    }
}

/// An ASGCN ABSA pair (the `.raw` text and the `.raw.graph` pickle, joined
/// by [`FILE_SEPARATOR`]); if it loads, every sample's aspect graph must
/// build.
pub fn absa_asgcn(data: &[u8]) -> bool {
    let p = split_files(data, 2);
    match parse_asgcn(p[0], p[1], "fuzz.raw", "fuzz.raw.graph") {
        Ok(samples) => {
            assert!(absa_graphs(&samples), "an ASGCN sample has no graph");
            true
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_files_pads_and_keeps_extra_separators() {
        let s = FILE_SEPARATOR;
        let data = [b"a".as_slice(), s, b"b", s, b"c"].concat();
        let parts: Vec<Vec<u8>> = split_files(&data, 2).iter().map(|p| p.to_vec()).collect();
        assert_eq!(parts, [b"a".to_vec(), [b"b".as_slice(), s, b"c"].concat()]);
        let parts: Vec<Vec<u8>> = split_files(b"a", 3).iter().map(|p| p.to_vec()).collect();
        assert_eq!(parts, [b"a".to_vec(), vec![], vec![]]);
        assert_eq!(
            join_files(&[b"x", b"y"]),
            [b"x".as_slice(), s, b"y"].concat()
        );
    }
}
