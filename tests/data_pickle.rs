//! The pickle reader: real files, hostile and truncated input, synthetic
//! pickles (including the CiteSeer padding quirk), fuzz regressions.

mod common;

use common::pickle::*;
use hdgcn::Error;
use hdgcn::data::Planetoid;
use hdgcn::data::pickle::{
    ArrayData, DType, Pickle, Value, decode_csr, decode_dense_matrix, decode_int_list_dict,
    decode_ndarray,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::{Path, PathBuf};

fn cora(ext: &str) -> Vec<u8> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("data/planetoid/ind.cora.{ext}"));
    std::fs::read(p).unwrap()
}

/// Runs every decoder; returns whether each succeeded. Must never panic.
fn all_decoders(b: &[u8]) -> [bool; 5] {
    [
        Pickle::parse(b, "t").is_ok(),
        decode_csr(b, "t").is_ok(),
        decode_ndarray(b, "t").is_ok(),
        decode_dense_matrix(b, "t").is_ok(),
        decode_int_list_dict(b, "t").is_ok(),
    ]
}

// ---------------------------------------------------------------------------
// A tiny pickle writer for synthetic inputs (same layout as the real files).
// ---------------------------------------------------------------------------

// ---------------------------------------------------------------------------

#[test]
fn real_files_decode() {
    let x = decode_csr(&cora("x"), "x").unwrap();
    assert_eq!(x.shape(), (140, 1433));
    let allx = decode_csr(&cora("allx"), "allx").unwrap();
    assert_eq!(allx.shape(), (1708, 1433));
    let y = decode_ndarray(&cora("y"), "y").unwrap();
    assert_eq!(y.shape, vec![140, 7]);
    assert_eq!(y.dtype, DType::I32);
    let ArrayData::Int(v) = &y.data else {
        panic!("int labels expected")
    };
    assert_eq!(v.iter().sum::<i64>(), 140, "one-hot");
    let g = decode_int_list_dict(&cora("graph"), "graph").unwrap();
    assert_eq!(g.len(), 2708);
    assert_eq!(g[0], (0, vec![633, 1862, 2582]));
    assert_eq!(g.iter().map(|(_, v)| v.len()).sum::<usize>(), 10858);
    // Wrong decoder for the file type is an error, not a panic.
    assert!(decode_csr(&cora("y"), "y").is_err());
    assert!(decode_int_list_dict(&cora("x"), "x").is_err());
    assert!(decode_ndarray(&cora("graph"), "graph").is_err());
}

#[test]
fn truncated_prefixes_are_errors() {
    for ext in ["x", "y", "tx", "ty", "allx", "ally", "graph"] {
        let full = cora(ext);
        let n = full.len();
        let step = (n / 200).max(1);
        let mut cuts: Vec<usize> = (0..n).step_by(step).collect();
        cuts.extend(n.saturating_sub(40)..n);
        for cut in cuts {
            let b = &full[..cut];
            assert!(
                Pickle::parse(b, ext).is_err(),
                "{ext}: prefix {cut} of {n} parsed"
            );
            let decoded = match ext {
                "graph" => decode_int_list_dict(b, ext).is_ok(),
                "y" | "ty" | "ally" => decode_ndarray(b, ext).is_ok(),
                _ => decode_csr(b, ext).is_ok(),
            };
            assert!(!decoded, "{ext}: prefix {cut} decoded");
        }
        assert!(Pickle::parse(&full, ext).is_ok());
    }
}

#[test]
fn random_byte_flips_never_panic() {
    let mut rng = StdRng::seed_from_u64(0x5eed);
    let mut oks = 0usize;
    for ext in ["x", "y", "ty", "graph", "tx"] {
        let full = cora(ext);
        // Mutate mostly the structural head of big files (where opcodes are).
        let hot = full.len().min(4096);
        for _ in 0..150 {
            let mut b = full.clone();
            for _ in 0..rng.random_range(1..=6) {
                let i = if rng.random_bool(0.7) {
                    rng.random_range(0..hot)
                } else {
                    rng.random_range(0..b.len())
                };
                b[i] = rng.random();
            }
            oks += all_decoders(&b).iter().filter(|&&o| o).count();
        }
    }
    // Some flips land in raw data and still decode: the test exercised both paths.
    assert!(oks > 0);
}

#[test]
fn hostile_lengths_are_errors() {
    // BINSTRING claiming 2 GiB with 3 bytes present.
    let b = b"\x80\x02T\xff\xff\xff\x7fabc.";
    assert!(matches!(Pickle::parse(b, "t"), Err(Error::Format { .. })));
    // Negative BINSTRING length.
    assert!(Pickle::parse(b"T\xff\xff\xff\xffabc.", "t").is_err());
    // BINUNICODE / BINBYTES / LONG4 claiming 4 GiB.
    assert!(Pickle::parse(b"X\xff\xff\xff\xff.", "t").is_err());
    assert!(Pickle::parse(b"B\xff\xff\xff\xff.", "t").is_err());
    assert!(Pickle::parse(b"\x8b\xff\xff\xff\x7f.", "t").is_err());
    // Unsupported protocol and opcodes.
    assert!(Pickle::parse(b"\x80\x05N.", "t").is_err());
    assert!(Pickle::parse(b"\x95\x00.", "t").is_err());
    // Stack underflows, APPEND / SETITEM / BUILD on wrong types.
    for b in [
        &b"."[..],
        b"a.",
        b"N)b.",
        b"K\x01K\x02a.",
        b"}K\x01s.",
        b"(t(e.",
        b"NNR.",
        b"h\x05.",
        b"q\x00.",
        b"(K\x01d.",
        b"(}K\x01u.",
        b")1.",
    ] {
        assert!(Pickle::parse(b, "t").is_err(), "{b:?}");
    }
    // A million MARKs: bounded, still an error (no STOP), no stack overflow.
    let mut b = vec![b'('; 1 << 20];
    b.push(b'.');
    assert!(Pickle::parse(&b, "t").is_err());
}

#[test]
fn self_referencing_values_are_safe() {
    // l = []; l.append(l); also a dict containing itself.
    let b = b"\x80\x02]q\x00h\x00a.";
    let p = Pickle::parse(b, "t").unwrap();
    match p.get(p.root()) {
        Value::List(items) => assert_eq!(items, &vec![p.root()]),
        other => panic!("{other:?}"),
    }
    assert!(all_decoders(b)[1..].iter().all(|ok| !ok));
    let b = b"\x80\x02}q\x00K\x01h\x00s.";
    assert!(decode_int_list_dict(b, "t").is_err());
    // 100k BINGETs of the same list: shared, not copied.
    let mut b = b"\x80\x02]q\x00(".to_vec();
    for _ in 0..100_000 {
        b.extend_from_slice(b"h\x00");
    }
    b.extend_from_slice(b"e.");
    let p = Pickle::parse(&b, "t").unwrap();
    assert!(p.len() < 10);
}

#[test]
fn ndarray_validation() {
    let ok = ndarray_pickle(&[2, 2], "f8", "<", &[0u8; 32]);
    assert_eq!(decode_dense_matrix(&ok, "t").unwrap().rows, 2);
    // Big-endian data.
    let be: Vec<u8> = [1i32, -2, 3].iter().flat_map(|x| x.to_be_bytes()).collect();
    let a = decode_ndarray(&ndarray_pickle(&[3], "i4", ">", &be), "t").unwrap();
    assert_eq!(a.data, ArrayData::Int(vec![1, -2, 3]));
    // Byte length disagreeing with the shape.
    assert!(decode_ndarray(&ndarray_pickle(&[3], "i4", "<", &[0u8; 8]), "t").is_err());
    // Huge shape with tiny data: no allocation, an error.
    assert!(
        decode_ndarray(
            &ndarray_pickle(&[1 << 30, 1 << 30], "f8", "<", &[0u8; 8]),
            "t"
        )
        .is_err()
    );
    let mut huge = vec![i32::MAX; 4];
    huge[0] = 1 << 30;
    assert!(decode_ndarray(&ndarray_pickle(&huge, "i8", "<", &[]), "t").is_err());
    // Negative dimension, unknown dtype, invalid byte order.
    assert!(decode_ndarray(&ndarray_pickle(&[-1], "i4", "<", &[]), "t").is_err());
    assert!(decode_ndarray(&ndarray_pickle(&[1], "f2", "<", &[0, 0]), "t").is_err());
    assert!(decode_ndarray(&ndarray_pickle(&[1], "O", "|", &[0; 8]), "t").is_err());
    assert!(decode_ndarray(&ndarray_pickle(&[1], "i4", "?", &[0; 4]), "t").is_err());
    // 3-D is an ndarray but not a dense matrix.
    let three = ndarray_pickle(&[1, 1, 1], "i4", "<", &[0; 4]);
    assert!(decode_ndarray(&three, "t").is_ok());
    assert!(decode_dense_matrix(&three, "t").is_err());
}

#[test]
fn csr_validation() {
    // [[0, 2, 1], [0, 0, 0]] with row 0 stored unsorted and with a duplicate.
    let m = decode_csr(
        &csr_pickle((2, 3), &[0, 3, 3], &[2, 1, 2], &[0.5, 2.0, 0.5]),
        "t",
    )
    .unwrap();
    assert_eq!(m.shape(), (2, 3));
    assert_eq!(m.indices(), &[1, 2]);
    assert_eq!(m.data(), &[2.0, 1.0]);
    let bad: [(&str, Vec<u8>); 7] = [
        (
            "indptr too short",
            csr_pickle((2, 3), &[0, 1], &[0], &[1.0]),
        ),
        (
            "not monotone",
            csr_pickle((2, 3), &[0, 2, 1], &[0, 1], &[1.0, 1.0]),
        ),
        ("index >= cols", csr_pickle((1, 3), &[0, 1], &[3], &[1.0])),
        ("negative index", csr_pickle((1, 3), &[0, 1], &[-1], &[1.0])),
        ("data length", csr_pickle((1, 3), &[0, 2], &[0, 1], &[1.0])),
        (
            "end != nnz",
            csr_pickle((1, 3), &[0, 1], &[0, 1], &[1.0, 1.0]),
        ),
        (
            "start != 0",
            csr_pickle((1, 3), &[1, 2], &[0, 1], &[1.0, 1.0]),
        ),
    ];
    for (why, b) in bad {
        let e = decode_csr(&b, "t").unwrap_err();
        assert!(matches!(e, Error::Format { .. }), "{why}: {e:?}");
    }
    // Negative shape.
    assert!(decode_csr(&csr_pickle((-1, 3), &[0], &[], &[]), "t").is_err());
}

fn write_dataset(dir: &Path, name: &str, files: &[(&str, Vec<u8>)]) {
    std::fs::create_dir_all(dir).unwrap();
    for (ext, b) in files {
        std::fs::write(dir.join(format!("ind.{name}.{ext}")), b).unwrap();
    }
}

fn tmpdir(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("hdgcn-{tag}-{}", std::process::id()))
}

/// CiteSeer quirk: test ids 510..=512 with 511 missing; PyG pads 511 with a
/// zero feature row and (here) no label, and node 512 gets tx[0], 510 tx[1].
#[test]
fn citeseer_padding_quirk() {
    let n_all = 510;
    let all_labels: Vec<Option<usize>> = (0..n_all).map(|i| Some(i % 3)).collect();
    let files = vec![
        ("x", diag_csr(2, 4, 4)),
        ("y", one_hot(&all_labels[..2], 3)),
        ("allx", diag_csr(n_all, 4, 4)),
        ("ally", one_hot(&all_labels, 3)),
        // tx[0] = (col 0, 100.0), tx[1] = (col 3, 200.0)
        (
            "tx",
            csr_pickle((2, 4), &[0, 1, 2], &[0, 3], &[100.0, 200.0]),
        ),
        ("ty", one_hot(&[Some(2), Some(1)], 3)),
        (
            "graph",
            graph_pickle(&[(0, vec![1, 1, 0]), (1, vec![0]), (2, vec![512])]),
        ),
        ("test.index", b"512\n510\n".to_vec()),
    ];
    let dir = tmpdir("citeseer");
    write_dataset(&dir, "citeseer", &files);
    let ds = Planetoid::load(&dir, "citeseer").unwrap();
    assert_eq!(ds.num_nodes(), 513);
    assert_eq!(ds.num_features(), 4);
    assert_eq!(ds.num_classes, 3);
    let row = |r: usize| {
        let v = ds.features.outer_view(r).unwrap();
        v.iter().map(|(j, &x)| (j, x)).collect::<Vec<_>>()
    };
    assert_eq!(row(512), vec![(0, 100.0)]);
    assert_eq!(row(510), vec![(3, 200.0)]);
    assert_eq!(row(511), vec![]);
    assert_eq!(row(7), vec![(3, 8.0)]);
    assert_eq!(ds.labels[512], Some(2));
    assert_eq!(ds.labels[510], Some(1));
    // The featureless node gets class 0 by default, as in PyG, and is listed.
    assert_eq!(ds.labels[511], Some(0));
    assert_eq!(ds.unlabelled, vec![511]);
    assert_eq!(ds.labels[4], Some(1));
    assert_eq!(ds.edges, vec![(0, 1), (1, 0), (2, 512), (512, 2)]);
    assert_eq!(ds.public_split.train, vec![0, 1]);
    assert_eq!(ds.public_split.val, (2..502).collect::<Vec<_>>());
    assert_eq!(ds.public_split.test, vec![510, 512]);

    // Without the CiteSeer rule the same files place node 512 out of range.
    write_dataset(&dir, "cora", &files);
    let e = Planetoid::load(&dir, "cora").unwrap_err();
    assert!(
        matches!(&e, Error::Format { path, reason }
            if path.ends_with("ind.cora.test.index") && reason.contains("node 512 out of range for 512 nodes")),
        "{e:?}"
    );

    // A graph edge to a node that does not exist.
    let mut bad = files.clone();
    bad[6] = ("graph", graph_pickle(&[(0, vec![600])]));
    write_dataset(&dir, "citeseer", &bad);
    let e = Planetoid::load(&dir, "citeseer").unwrap_err();
    assert!(
        matches!(&e, Error::Format { path, reason }
            if path.ends_with("ind.citeseer.graph") && reason.contains("key 0: neighbour 600")),
        "{e:?}"
    );
    // Duplicate test ids.
    let mut bad = files.clone();
    bad[7] = ("test.index", b"510\n510\n".to_vec());
    write_dataset(&dir, "citeseer", &bad);
    assert!(matches!(
        Planetoid::load(&dir, "citeseer"),
        Err(Error::Format { .. })
    ));
    std::fs::remove_dir_all(&dir).ok();
}

/// Every file in tests/fuzz_regressions/ once crashed or hung a decoder (or
/// is a hand-made hostile input). Files ending in `.ok` must parse as a
/// pickle; all others must be rejected by every typed decoder.
#[test]
fn fuzz_regressions() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_regressions");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        // Sub-folders hold the other fuzz targets' inputs (tests/fuzz_replay.rs).
        if path.is_dir() || path.extension().is_some_and(|e| e == "md") {
            continue;
        }
        let b = std::fs::read(&path).unwrap();
        let r = all_decoders(&b);
        if path.extension().is_some_and(|e| e == "ok") {
            assert!(r[0], "{path:?} should parse");
        } else {
            assert!(
                !r[1] && !r[2] && !r[4],
                "{path:?} should be rejected: {r:?}"
            );
        }
        n += 1;
    }
    assert!(n > 0, "no regression inputs found in {dir:?}");
}
