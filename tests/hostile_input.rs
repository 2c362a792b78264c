//! Hostile and damaged input (issue 70, and the CiteSeer featureless nodes
//! of issue 67): declared shapes checked against the data, bounded reads,
//! non-regular files refused, validated splits and labels, saves that never
//! replace what they should not, errors that name the file and row.

mod common;

use common::pickle::{csr_pickle, dense_pickle, diag_csr, graph_pickle, one_hot};
use hdgcn::Error;
use hdgcn::backend::Cpu;
use hdgcn::checkpoint::{load_checkpoint, save_checkpoint};
use hdgcn::data::text::{DocSplit, Document, TextCorpus, Vocab, load_glove};
use hdgcn::data::{Planetoid, PlanetoidFiles, UnlabelledNodes, geom_gcn_split};
use hdgcn::nn::Linear;
use rand::SeedableRng;
use std::io::Write;
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------
// A tiny pickle writer (the layout of the real Planetoid files).
// ---------------------------------------------------------------------------

const N_ALL: usize = 510;

/// A small, valid Planetoid set: 510 allx rows (the first 2 train), two
/// test rows with the given ids. 3 classes, 4 features.
fn synthetic(test_ids: &[usize]) -> Vec<(&'static str, Vec<u8>)> {
    let all_labels: Vec<Option<usize>> = (0..N_ALL).map(|i| Some(i % 3)).collect();
    let ti: String = test_ids.iter().map(|t| format!("{t}\n")).collect();
    let nt = test_ids.len();
    vec![
        ("x", diag_csr(2, 4, 4)),
        ("tx", diag_csr(nt, 4, 4)),
        ("allx", diag_csr(N_ALL, 4, 4)),
        ("y", one_hot(&all_labels[..2], 3)),
        ("ty", one_hot(&vec![Some(1); nt], 3)),
        ("ally", one_hot(&all_labels, 3)),
        ("graph", graph_pickle(&[(0, vec![1]), (2, vec![3])])),
        ("test.index", ti.into_bytes()),
    ]
}

fn set(files: &mut [(&'static str, Vec<u8>)], ext: &str, bytes: Vec<u8>) {
    files.iter_mut().find(|f| f.0 == ext).unwrap().1 = bytes;
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hdgcn-hostile-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write_dataset(dir: &Path, name: &str, files: &[(&str, Vec<u8>)]) {
    for (ext, b) in files {
        let p = dir.join(format!("ind.{name}.{ext}"));
        let _ = std::fs::remove_file(&p);
        std::fs::write(p, b).unwrap();
    }
}

fn files_of<'a>(f: &'a [(&str, Vec<u8>)]) -> PlanetoidFiles<'a> {
    let g = |ext: &str| f.iter().find(|x| x.0 == ext).unwrap().1.as_slice();
    PlanetoidFiles {
        x: g("x"),
        tx: g("tx"),
        allx: g("allx"),
        y: g("y"),
        ty: g("ty"),
        ally: g("ally"),
        graph: g("graph"),
        test_index: g("test.index"),
    }
}

/// The error's (path, reason) if it is a `Format` error; panics otherwise.
fn format_err<T: std::fmt::Debug>(r: hdgcn::Result<T>) -> (String, String) {
    match r {
        Err(Error::Format { path, reason }) => (path, reason),
        other => panic!("expected Error::Format, got {other:?}"),
    }
}

#[cfg(unix)]
fn mkfifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0, "mkfifo");
}

// ---------------------------------------------------------------------------
// Item 2: a header asking for gigabytes.
// ---------------------------------------------------------------------------

#[test]
fn planetoid_csr_shape_wider_than_its_data_is_refused() {
    let good = synthetic(&[510, 511]);
    assert!(Planetoid::from_bytes("cora", &files_of(&good), UnlabelledNodes::ClassZero).is_ok());
    // Every feature file declares 10^8 columns (so the widths agree): the
    // three store a few hundred values in columns 0..4.
    let mut bad = good.clone();
    set(&mut bad, "x", diag_csr(2, 4, 100_000_000));
    set(&mut bad, "tx", diag_csr(2, 4, 100_000_000));
    set(&mut bad, "allx", diag_csr(N_ALL, 4, 100_000_000));
    let dir = scratch("wide");
    write_dataset(&dir, "cora", &bad);
    let (path, reason) = format_err(Planetoid::load(&dir, "cora"));
    assert!(path.ends_with("ind.cora.x"), "{path}");
    assert!(reason.contains("100000000 feature columns"), "{reason}");
    // One file alone: named as well.
    let mut bad = good.clone();
    set(&mut bad, "tx", diag_csr(2, 4, 100_000_000));
    let (path, _) = format_err(Planetoid::from_bytes(
        "cora",
        &files_of(&bad),
        UnlabelledNodes::ClassZero,
    ));
    assert_eq!(path, "ind.cora.tx");
    // A few unused trailing columns stay fine (fewer than the stored values).
    let mut ok = good.clone();
    set(&mut ok, "x", diag_csr(2, 4, 40));
    set(&mut ok, "tx", diag_csr(2, 4, 40));
    set(&mut ok, "allx", diag_csr(N_ALL, 4, 40));
    let ds = Planetoid::from_bytes("cora", &files_of(&ok), UnlabelledNodes::ClassZero).unwrap();
    assert_eq!(ds.num_features(), 40);
    std::fs::remove_dir_all(&dir).ok();
}

// ---------------------------------------------------------------------------
// Item 3: bounded reads, non-regular files.
// ---------------------------------------------------------------------------

fn io_reason(r: hdgcn::Result<impl std::fmt::Debug>) -> String {
    match r {
        Err(e @ Error::Io { .. }) => e.to_string(),
        other => panic!("expected Error::Io, got {other:?}"),
    }
}

#[cfg(unix)]
#[test]
fn planetoid_refuses_links_to_devices_and_fifos() {
    let dir = scratch("nonregular");
    write_dataset(&dir, "cora", &synthetic(&[510, 511]));
    let graph = dir.join("ind.cora.graph");
    std::fs::remove_file(&graph).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &graph).unwrap();
    let msg = io_reason(Planetoid::load(&dir, "cora"));
    assert!(
        msg.contains("ind.cora.graph") && msg.contains("character device"),
        "{msg}"
    );
    write_dataset(&dir, "cora", &synthetic(&[510, 511]));
    // A FIFO without a writer: refused at once instead of blocking.
    let tx = dir.join("ind.cora.tx");
    std::fs::remove_file(&tx).unwrap();
    mkfifo(&tx);
    let msg = io_reason(Planetoid::load(&dir, "cora"));
    assert!(msg.contains("ind.cora.tx") && msg.contains("FIFO"), "{msg}");
    // A link to a regular file is fine.
    std::fs::remove_file(&tx).unwrap();
    std::fs::write(dir.join("real_tx"), diag_csr(2, 4, 4)).unwrap();
    std::os::unix::fs::symlink(dir.join("real_tx"), &tx).unwrap();
    assert_eq!(Planetoid::load(&dir, "cora").unwrap().num_nodes(), 512);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn planetoid_files_beyond_their_cap_are_refused_unread() {
    let dir = scratch("cap");
    write_dataset(&dir, "cora", &synthetic(&[510, 511]));
    // A sparse 65 MiB pickle: refused from its length.
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("ind.cora.allx"))
        .unwrap();
    f.set_len(65 << 20).unwrap();
    drop(f);
    let (path, reason) = format_err(Planetoid::load(&dir, "cora"));
    assert!(path.ends_with("ind.cora.allx"), "{path}");
    assert!(reason.contains("more than the 67108864"), "{reason}");
    // test.index is capped by the number of tx rows (2 here).
    write_dataset(&dir, "cora", &synthetic(&[510, 511]));
    let mut ti = b"510\n511\n".to_vec();
    ti.resize(100_000, b'\n');
    std::fs::write(dir.join("ind.cora.test.index"), ti).unwrap();
    let (path, reason) = format_err(Planetoid::load(&dir, "cora"));
    assert!(path.ends_with("ind.cora.test.index"), "{path}");
    assert!(reason.contains("100000 bytes"), "{reason}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn glove_line_is_capped_while_reading() {
    let dir = scratch("glove");
    let vocab = Vocab::build([&doc("cat dog", DocSplit::Train)], 1);
    // 8 MiB without a newline (a sparse file of NUL bytes).
    let p = dir.join("long.txt");
    let f = std::fs::File::create(&p).unwrap();
    f.set_len(8 << 20).unwrap();
    drop(f);
    let (path, reason) = format_err(load_glove(&p, &vocab, None));
    assert!(path.ends_with("long.txt"), "{path}");
    assert!(reason.starts_with("line 1: longer than"), "{reason}");
    // Fine lines before it still count.
    let mut f = std::fs::File::create(&p).unwrap();
    f.write_all(b"cat 1 2\n").unwrap();
    f.write_all(&vec![b'7'; 2 << 20]).unwrap();
    drop(f);
    let (_, reason) = format_err(load_glove(&p, &vocab, None));
    assert!(reason.starts_with("line 2: longer than"), "{reason}");
    std::fs::remove_dir_all(&dir).ok();
}

#[cfg(unix)]
#[test]
fn other_readers_refuse_devices_and_fifos() {
    let dir = scratch("readers");
    let vocab = Vocab::build([&doc("cat dog", DocSplit::Train)], 1);
    let zero = dir.join("zero");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let msg = io_reason(load_glove(&zero, &vocab, None));
    assert!(msg.contains("character device"), "{msg}");
    let fifo = dir.join("fifo");
    mkfifo(&fifo);
    let msg = io_reason(load_glove(&fifo, &vocab, None));
    assert!(msg.contains("FIFO"), "{msg}");
    // Text corpora.
    std::fs::write(dir.join("t.clean.txt"), "a b\n").unwrap();
    let msg = io_reason(TextCorpus::from_files("t", &fifo, &dir.join("t.clean.txt")));
    assert!(msg.contains("FIFO"), "{msg}");
    // geom-gcn splits.
    let npz = dir.join("cora_split_0.6_0.2_0.npz");
    std::os::unix::fs::symlink("/dev/zero", &npz).unwrap();
    let msg = io_reason(geom_gcn_split(&dir, "cora", 0));
    assert!(msg.contains("character device"), "{msg}");
    // Checkpoints.
    let cpu = Cpu::<f32>::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    let m = Linear::new(&cpu, 3, 2, true, &mut rng).unwrap();
    let msg = io_reason(load_checkpoint(&m, &fifo));
    assert!(msg.contains("FIFO"), "{msg}");
    let msg = io_reason(load_checkpoint(&m, &zero));
    assert!(msg.contains("character device"), "{msg}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn checkpoint_larger_than_the_model_can_need_is_refused() {
    let dir = scratch("ckptcap");
    let cpu = Cpu::<f32>::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    let m = Linear::new(&cpu, 3, 2, true, &mut rng).unwrap();
    let p = dir.join("big.safetensors");
    let f = std::fs::File::create(&p).unwrap();
    f.set_len(17 << 20).unwrap();
    drop(f);
    let (path, reason) = format_err(load_checkpoint(&m, &p));
    assert!(path.ends_with("big.safetensors"), "{path}");
    assert!(reason.contains("more than"), "{reason}");
    std::fs::remove_dir_all(&dir).ok();
}

// ---------------------------------------------------------------------------
// Item 4: splits and labels.
// ---------------------------------------------------------------------------

fn npy(mask: &[bool]) -> Vec<u8> {
    let mut header = format!(
        "{{'descr': '|b1', 'fortran_order': False, 'shape': ({},), }}",
        mask.len()
    );
    while (header.len() + 11) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    out.extend(mask.iter().map(|&b| u8::from(b)));
    out
}

fn write_npz(path: &Path, train: &[bool], val: &[bool], test: &[bool]) {
    let f = std::fs::File::create(path).unwrap();
    let mut z = zip::ZipWriter::new(f);
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    for (k, m) in [
        ("train_mask", train),
        ("val_mask", val),
        ("test_mask", test),
    ] {
        z.start_file(format!("{k}.npy"), opts).unwrap();
        z.write_all(&npy(m)).unwrap();
    }
    z.finish().unwrap();
}

/// Masks over `n` nodes: train 0..n/2, val n/2..3n/4, test the rest.
fn masks(n: usize) -> [Vec<bool>; 3] {
    [
        (0..n).map(|i| i < n / 2).collect(),
        (0..n).map(|i| i >= n / 2 && i < 3 * n / 4).collect(),
        (0..n).map(|i| i >= 3 * n / 4).collect(),
    ]
}

#[test]
fn geom_gcn_masks_of_the_wrong_length_name_file_and_lengths() {
    let dir = scratch("masks");
    let path = dir.join("cora_split_0.6_0.2_0.npz");
    for n in [2707, 2713, 100_000] {
        let [a, b, c] = masks(n);
        write_npz(&path, &a, &b, &c);
        let (p, reason) = format_err(geom_gcn_split(&dir, "cora", 0));
        assert!(p.ends_with("cora_split_0.6_0.2_0.npz"), "{p}");
        assert!(
            reason.contains(&format!("length {n}")) && reason.contains("2708 nodes"),
            "{reason}"
        );
    }
    let [a, b, c] = masks(2708);
    write_npz(&path, &a, &b, &c);
    let s = geom_gcn_split(&dir, "cora", 0).unwrap();
    assert_eq!(s.train.len() + s.val.len() + s.test.len(), 2708);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn test_index_naming_a_training_or_validation_node_is_refused() {
    let mut bad = synthetic(&[510, 511]);
    set(&mut bad, "test.index", b"511\n1\n".to_vec());
    let (path, reason) = format_err(Planetoid::from_bytes(
        "cora",
        &files_of(&bad),
        UnlabelledNodes::ClassZero,
    ));
    assert_eq!(path, "ind.cora.test.index");
    assert!(
        reason.contains("entry 2: node 1 is a training node"),
        "{reason}"
    );
    set(&mut bad, "test.index", b"300\n511\n".to_vec());
    let (_, reason) = format_err(Planetoid::from_bytes(
        "cora",
        &files_of(&bad),
        UnlabelledNodes::ClassZero,
    ));
    assert!(reason.contains("node 300 is a validation node"), "{reason}");
}

#[test]
fn label_rows_that_are_not_one_hot_are_refused() {
    for (values, why) in [
        (vec![5; 2 * 3], "label value 5"),
        (vec![0, -1, 0, 1, 0, 0], "label value -1"),
        (vec![1, 1, 0, 1, 0, 0], "two classes (0 and 1)"),
    ] {
        let mut bad = synthetic(&[510, 511]);
        set(&mut bad, "ty", dense_pickle(2, 3, &values));
        let (path, reason) = format_err(Planetoid::from_bytes(
            "cora",
            &files_of(&bad),
            UnlabelledNodes::ClassZero,
        ));
        assert_eq!(path, "ind.cora.ty");
        assert!(reason.contains("row 0") && reason.contains(why), "{reason}");
    }
    let mut ally = vec![0i32; N_ALL * 3];
    for (i, v) in ally.chunks_mut(3).enumerate() {
        v[i % 3] = 1;
    }
    ally[7 * 3] = 5;
    let mut bad = synthetic(&[510, 511]);
    set(&mut bad, "ally", dense_pickle(N_ALL, 3, &ally));
    let (path, reason) = format_err(Planetoid::from_bytes(
        "cora",
        &files_of(&bad),
        UnlabelledNodes::ClassZero,
    ));
    assert_eq!(path, "ind.cora.ally");
    assert!(reason.starts_with("row 7, column 0"), "{reason}");
}

fn doc(text: &str, split: DocSplit) -> Document {
    Document {
        id: String::new(),
        tokens: text.split_whitespace().map(str::to_string).collect(),
        label: 0,
        split,
    }
}

#[test]
fn text_label_only_in_test_documents_is_refused() {
    let (path, reason) = format_err(TextCorpus::from_bytes(
        "r8",
        b"0\ttrain\tacq\n1\ttest\tearn\n2\ttest\tacq\n",
        b"a b\nc d\ne f\n",
    ));
    assert_eq!(path, "r8.txt");
    assert!(
        reason.starts_with("line 2: label \"earn\" occurs only in test documents"),
        "{reason}"
    );
}

#[test]
fn vocabulary_empty_after_min_count_is_refused() {
    let docs = [doc("a b a", DocSplit::Train), doc("c", DocSplit::Train)];
    assert_eq!(Vocab::try_build(&docs, 2).unwrap().len(), 2);
    match Vocab::try_build(&docs, 1_000_000) {
        Err(Error::InvalidConfig(m)) => {
            assert!(
                m.contains("min_count 1000000") && m.contains("occurs 2 times"),
                "{m}"
            )
        }
        other => panic!("expected InvalidConfig, got {other:?}"),
    }
    assert!(matches!(
        Vocab::try_build(&[doc("", DocSplit::Train)], 1),
        Err(Error::Empty(_))
    ));
}

// ---------------------------------------------------------------------------
// Issue 67: CiteSeer's featureless nodes in the geom-gcn masks.
// ---------------------------------------------------------------------------

/// CiteSeer in miniature: test ids 510 and 512, id 511 missing (no
/// features, no label), as CiteSeer's 15 missing ids.
#[test]
fn citeseer_featureless_nodes_get_class_zero_or_leave_the_masks() {
    let dir = scratch("citeseer67");
    let files = synthetic(&[512, 510]);
    write_dataset(&dir, "citeseer", &files);
    let n = 513;
    let [a, b, c] = masks(n);
    assert!(c[511], "node 511 is in the test mask");
    write_npz(&dir.join("citeseer_split_0.6_0.2_3.npz"), &a, &b, &c);

    // Default: class 0 (argmax of an all-zero row, as PyG and geom-gcn),
    // recorded.
    let ds = Planetoid::load(&dir, "citeseer").unwrap();
    assert_eq!(ds.unlabelled_policy, UnlabelledNodes::ClassZero);
    assert_eq!(ds.unlabelled, [511]);
    assert_eq!(ds.labels[511], Some(0));
    assert!(ds.labels.iter().all(Option::is_some));
    let split = ds.geom_gcn_split(&dir, 3).unwrap();
    assert!(split.test.contains(&511));
    assert_eq!(split.train.len() + split.val.len() + split.test.len(), n);
    assert!(ds.features.outer_view(511).unwrap().nnz() == 0);

    // Option: no label, and out of every mask.
    let ds = Planetoid::load_with(&dir, "citeseer", UnlabelledNodes::Drop).unwrap();
    assert_eq!(ds.unlabelled, [511]);
    assert_eq!(ds.labels[511], None);
    let split = ds.geom_gcn_split(&dir, 3).unwrap();
    assert!(!split.test.contains(&511));
    assert_eq!(
        split.train.len() + split.val.len() + split.test.len(),
        n - 1
    );
    for i in split.train.iter().chain(&split.val).chain(&split.test) {
        assert!(ds.labels[*i].is_some(), "node {i} has no label");
    }
    // The split is checked against the loaded graph's node count.
    let [a, b, c] = masks(3327);
    write_npz(&dir.join("citeseer_split_0.6_0.2_4.npz"), &a, &b, &c);
    let (_, reason) = format_err(ds.geom_gcn_split(&dir, 4));
    assert!(
        reason.contains("length 3327, but the graph has 513 nodes"),
        "{reason}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

// ---------------------------------------------------------------------------
// Item 5: saves.
// ---------------------------------------------------------------------------

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[cfg(unix)]
#[test]
fn save_refuses_links_read_only_files_and_fifos() {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let dir = scratch("save");
    let cpu = Cpu::<f32>::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let m = Linear::new(&cpu, 3, 2, true, &mut rng).unwrap();

    // A symbolic link (to a regular file) stays a link, its target intact.
    std::fs::write(dir.join("target"), b"keep").unwrap();
    std::os::unix::fs::symlink(dir.join("target"), dir.join("link")).unwrap();
    let msg = io_reason(save_checkpoint(&m, &dir.join("link")));
    assert!(msg.contains("symbolic link"), "{msg}");
    assert!(
        std::fs::symlink_metadata(dir.join("link"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read(dir.join("target")).unwrap(), b"keep");

    // A read-only file is not overwritten (even by root).
    let ro = dir.join("ro.safetensors");
    std::fs::write(&ro, b"read only").unwrap();
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o444)).unwrap();
    let msg = io_reason(save_checkpoint(&m, &ro));
    assert!(msg.contains("read-only"), "{msg}");
    assert_eq!(std::fs::read(&ro).unwrap(), b"read only");
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o644)).unwrap();

    // A FIFO stays a FIFO.
    let fifo = dir.join("fifo");
    mkfifo(&fifo);
    let msg = io_reason(save_checkpoint(&m, &fifo));
    assert!(msg.contains("FIFO"), "{msg}");
    assert!(
        std::fs::symlink_metadata(&fifo)
            .unwrap()
            .file_type()
            .is_fifo()
    );

    // No temporary file left by any of them.
    assert_eq!(entries(&dir), ["fifo", "link", "ro.safetensors", "target"]);

    // A regular file and a missing path are fine.
    save_checkpoint(&m, &ro).unwrap();
    save_checkpoint(&m, &dir.join("new.safetensors")).unwrap();
    load_checkpoint(&m, &dir.join("new.safetensors")).unwrap();
    std::fs::remove_dir_all(&dir).ok();
}

// ---------------------------------------------------------------------------
// Item 6: errors that say where.
// ---------------------------------------------------------------------------

#[test]
fn non_finite_features_name_file_row_and_value() {
    for (v, shown) in [
        (f32::INFINITY, "inf"),
        (f32::NEG_INFINITY, "-inf"),
        (f32::NAN, "NaN"),
    ] {
        let mut bad = synthetic(&[510, 511]);
        let indptr: Vec<i32> = (0..=N_ALL as i32).collect();
        let indices: Vec<i32> = (0..N_ALL).map(|r| (r % 4) as i32).collect();
        let mut data: Vec<f32> = vec![1.0; N_ALL];
        data[7] = v;
        set(
            &mut bad,
            "allx",
            csr_pickle((N_ALL as i32, 4), &indptr, &indices, &data),
        );
        let dir = scratch("nonfinite");
        write_dataset(&dir, "cora", &bad);
        let e = Planetoid::load(&dir, "cora").unwrap_err();
        assert!(matches!(e, Error::NonFinite { .. }), "{e:?}");
        let msg = e.to_string();
        assert!(
            msg.contains(&format!("non-finite value {shown} "))
                && msg.contains("ind.cora.allx, row 7 column 3"),
            "{msg}"
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}

#[test]
fn out_of_range_nodes_name_the_file() {
    let mut bad = synthetic(&[510, 511]);
    set(
        &mut bad,
        "graph",
        graph_pickle(&[(0, vec![1]), (4, vec![9999])]),
    );
    let (path, reason) = format_err(Planetoid::from_bytes(
        "cora",
        &files_of(&bad),
        UnlabelledNodes::ClassZero,
    ));
    assert_eq!(path, "ind.cora.graph");
    assert_eq!(
        reason,
        "key 4: neighbour 9999 is out of range for 512 nodes"
    );
    set(&mut bad, "graph", graph_pickle(&[(7777, vec![1])]));
    let (_, reason) = format_err(Planetoid::from_bytes(
        "cora",
        &files_of(&bad),
        UnlabelledNodes::ClassZero,
    ));
    assert_eq!(reason, "key 7777 is out of range for 512 nodes");
    let mut bad = synthetic(&[510, 600]);
    set(&mut bad, "graph", graph_pickle(&[(0, vec![1])]));
    let (path, reason) = format_err(Planetoid::from_bytes(
        "cora",
        &files_of(&bad),
        UnlabelledNodes::ClassZero,
    ));
    assert_eq!(path, "ind.cora.test.index");
    assert!(
        reason.contains("entry 2: node 600 out of range"),
        "{reason}"
    );
}
