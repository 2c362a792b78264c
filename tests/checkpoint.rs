//! Checkpoints: round trip, every mismatch and I/O error, atomic writes,
//! and damaged files (a property test).

use std::fs;
use std::path::{Path, PathBuf};

use hdgcn::Error;
use hdgcn::autograd::Tape;
use hdgcn::backend::Cpu;
use hdgcn::checkpoint::{load_checkpoint, save_checkpoint};
use hdgcn::conv::DeviceGraph;
use hdgcn::graph::Graph;
use hdgcn::models::NodeClassifier;
use hdgcn::nn::{Linear, Module};
use ndarray::Array2;
use rand::{SeedableRng, rngs::StdRng};

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hdgcn-ckpt-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

fn dir_entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn snapshot<B: hdgcn::backend::Backend>(m: &dyn Module<B>) -> Vec<Array2<B::Elem>> {
    m.params().iter().map(|p| p.to_array()).collect()
}

fn mismatch(r: hdgcn::Result<()>) -> Vec<String> {
    match r {
        Err(Error::CheckpointMismatch { differences, .. }) => differences,
        other => panic!("expected CheckpointMismatch, got {other:?}"),
    }
}

#[test]
fn round_trip_gives_identical_predictions() {
    let cpu = Cpu::<f32>::new();
    let mut rng = StdRng::seed_from_u64(1);
    let g = Graph::from_edges(4, &[(0, 1), (1, 0), (1, 2), (2, 1), (2, 3), (3, 2)]).unwrap();
    let graph = DeviceGraph::new(&cpu, g);
    let x = Array2::from_shape_fn((4, 5), |(i, j)| ((i * 5 + j) as f32).sin());
    let mut a = NodeClassifier::gcn(&cpu, 5, 8, 3, 0.5, &mut rng).unwrap();
    let mut b = NodeClassifier::gcn(&cpu, 5, 8, 3, 0.5, &mut rng).unwrap();
    a.set_training(false);
    b.set_training(false);
    let predict = |m: &NodeClassifier<Cpu<f32>>| {
        let t = Tape::inference(&cpu);
        m.forward(&t, &graph, &t.constant_array(&x).into())
            .unwrap()
            .to_array()
    };
    assert_ne!(predict(&a), predict(&b), "two random models should differ");

    let dir = scratch("roundtrip");
    let path = dir.join("gcn.safetensors");
    save_checkpoint(&a, &path).unwrap();
    assert_eq!(
        dir_entries(&dir),
        ["gcn.safetensors"],
        "temporary file left"
    );
    load_checkpoint(&b, &path).unwrap();
    assert_eq!(predict(&a), predict(&b));
    for ((na, pa), (nb, pb)) in a.named_params().iter().zip(&b.named_params()) {
        assert_eq!(na, nb);
        assert_eq!(pa.to_array(), pb.to_array(), "{na}");
    }
    // The file is plain safetensors with the module's names, shapes and dtype.
    let bytes = fs::read(&path).unwrap();
    let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut names = st.names();
    names.sort();
    assert_eq!(
        names,
        [
            "conv1.bias",
            "conv1.lin.weight",
            "conv2.bias",
            "conv2.lin.weight"
        ]
    );
    let w = st.tensor("conv1.lin.weight").unwrap();
    assert_eq!(w.shape(), [5, 8]);
    assert_eq!(w.dtype(), safetensors::Dtype::F32);
    // Saving again over an existing checkpoint replaces it.
    save_checkpoint(&b, &path).unwrap();
    assert_eq!(dir_entries(&dir), ["gcn.safetensors"]);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn wrong_shape_is_rejected_and_model_unchanged() {
    let cpu = Cpu::<f32>::new();
    let mut rng = StdRng::seed_from_u64(2);
    let a = NodeClassifier::gcn(&cpu, 5, 8, 3, 0.0, &mut rng).unwrap();
    let b = NodeClassifier::gcn(&cpu, 5, 6, 3, 0.0, &mut rng).unwrap();
    let dir = scratch("shape");
    let path = dir.join("a.safetensors");
    save_checkpoint(&a, &path).unwrap();
    let before = snapshot(&b);
    let diffs = mismatch(load_checkpoint(&b, &path));
    assert!(
        diffs.iter().any(|d| d.contains("conv1.lin.weight")
            && d.contains("(5, 8)")
            && d.contains("(5, 6)")),
        "{diffs:?}"
    );
    assert_eq!(snapshot(&b), before, "a failed load changed the model");
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn missing_and_unexpected_names_are_reported() {
    let cpu = Cpu::<f64>::new();
    let mut rng = StdRng::seed_from_u64(3);
    let with_bias = Linear::new(&cpu, 3, 2, true, &mut rng).unwrap();
    let no_bias = Linear::new(&cpu, 3, 2, false, &mut rng).unwrap();
    let dir = scratch("names");
    let p_with = dir.join("with.safetensors");
    let p_without = dir.join("without.safetensors");
    save_checkpoint(&with_bias, &p_with).unwrap();
    save_checkpoint(&no_bias, &p_without).unwrap();

    let before = snapshot(&no_bias);
    let err = load_checkpoint(&no_bias, &p_with);
    let msg = err.as_ref().unwrap_err().to_string();
    assert!(msg.contains("with.safetensors"), "{msg}");
    assert_eq!(mismatch(err), ["unexpected parameter bias"]);
    // `weight` matched but must not have been assigned.
    assert_eq!(snapshot(&no_bias), before);

    let before = snapshot(&with_bias);
    assert_eq!(
        mismatch(load_checkpoint(&with_bias, &p_without)),
        ["missing parameter bias"]
    );
    assert_eq!(snapshot(&with_bias), before);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn wrong_dtype_is_rejected() {
    let mut rng = StdRng::seed_from_u64(4);
    let a = Linear::new(&Cpu::<f64>::new(), 3, 2, true, &mut rng).unwrap();
    let b = Linear::new(&Cpu::<f32>::new(), 3, 2, true, &mut rng).unwrap();
    let dir = scratch("dtype");
    let path = dir.join("f64.safetensors");
    save_checkpoint(&a, &path).unwrap();
    let before = snapshot(&b);
    let diffs = mismatch(load_checkpoint(&b, &path));
    assert_eq!(diffs.len(), 2, "{diffs:?}");
    assert!(
        diffs.iter().all(|d| d.contains("F64") && d.contains("F32")),
        "{diffs:?}"
    );
    assert_eq!(snapshot(&b), before);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn corrupt_files_are_format_errors() {
    let cpu = Cpu::<f32>::new();
    let mut rng = StdRng::seed_from_u64(5);
    let m = Linear::new(&cpu, 4, 3, true, &mut rng).unwrap();
    let dir = scratch("corrupt");
    let path = dir.join("m.safetensors");
    save_checkpoint(&m, &path).unwrap();
    let bytes = fs::read(&path).unwrap();
    let before = snapshot(&m);
    for (what, contents) in [
        ("truncated data", bytes[..bytes.len() - 5].to_vec()),
        ("truncated header", bytes[..12].to_vec()),
        ("empty", Vec::new()),
        ("garbage", b"definitely not a checkpoint".to_vec()),
    ] {
        let bad = dir.join("bad.safetensors");
        fs::write(&bad, &contents).unwrap();
        match load_checkpoint(&m, &bad) {
            Err(Error::Format { path, .. }) => assert!(path.contains("bad.safetensors"), "{what}"),
            other => panic!("{what}: expected Error::Format, got {other:?}"),
        }
        assert_eq!(snapshot(&m), before, "{what}");
    }
    // A 3-D tensor under a parameter's name.
    let data = vec![0u8; 4 * 3 * 4];
    let view = safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![1, 4, 3], &data)
        .unwrap();
    let bytes = safetensors::serialize([("weight", view)], None).unwrap();
    let bad = dir.join("rank3.safetensors");
    fs::write(&bad, bytes).unwrap();
    assert!(matches!(
        load_checkpoint(&m, &bad),
        Err(Error::Format { .. })
    ));
    assert_eq!(snapshot(&m), before);
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn nonexistent_path_is_an_io_error_with_the_path() {
    let cpu = Cpu::<f32>::new();
    let mut rng = StdRng::seed_from_u64(6);
    let m = Linear::new(&cpu, 2, 2, true, &mut rng).unwrap();
    let path = std::env::temp_dir().join("hdgcn-no-such-dir-xyz/none.safetensors");
    match load_checkpoint(&m, &path) {
        Err(Error::Io { path: p, .. }) => assert_eq!(p, path),
        other => panic!("expected Error::Io, got {other:?}"),
    }
    match save_checkpoint(&m, &path) {
        Err(Error::Io { path: p, .. }) => assert_eq!(p, path),
        other => panic!("expected Error::Io, got {other:?}"),
    }
}

#[test]
fn failed_write_leaves_previous_checkpoint_intact() {
    let cpu = Cpu::<f32>::new();
    let mut rng = StdRng::seed_from_u64(7);
    let a = Linear::new(&cpu, 2, 2, true, &mut rng).unwrap();
    let b = Linear::new(&cpu, 2, 2, true, &mut rng).unwrap();

    // 1. The target is a non-empty directory: the rename fails after the
    //    temporary file was written; it must be removed again.
    let dir = scratch("failrename");
    let target = dir.join("ckpt.safetensors");
    fs::create_dir(&target).unwrap();
    fs::write(target.join("keep"), b"x").unwrap();
    assert!(matches!(
        save_checkpoint(&a, &target),
        Err(Error::Io { .. })
    ));
    assert_eq!(
        dir_entries(&dir),
        ["ckpt.safetensors"],
        "temporary file left"
    );
    assert_eq!(fs::read(target.join("keep")).unwrap(), b"x");
    fs::remove_dir_all(&dir).unwrap();

    // 2. A read-only directory (not enforced for root, so probe first).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let dir = scratch("readonly");
        let path = dir.join("ckpt.safetensors");
        save_checkpoint(&a, &path).unwrap();
        let previous = fs::read(&path).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o555)).unwrap();
        let enforced = fs::write(dir.join("probe"), b"").is_err();
        if enforced {
            assert!(matches!(save_checkpoint(&b, &path), Err(Error::Io { .. })));
            assert_eq!(fs::read(&path).unwrap(), previous);
            assert_eq!(dir_entries(&dir), ["ckpt.safetensors"]);
            // And it still loads into a fresh model.
            load_checkpoint(&b, &path).unwrap();
            assert_eq!(a.weight.to_array(), b.weight.to_array());
        } else {
            eprintln!("read-only directories are writable here (root): part 2 skipped");
        }
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        fs::remove_dir_all(&dir).unwrap();
    }
}

/// Damage done to the bytes of a valid checkpoint.
#[derive(Clone, Copy, Debug)]
enum Damage {
    /// XOR the byte at this position (modulo the length) with a non-zero mask.
    Flip(usize, u8),
    /// Cut the file at this position.
    Truncate(usize),
    /// Insert a byte at this position.
    Insert(usize, u8),
}

fn damage() -> impl proptest::strategy::Strategy<Value = Damage> {
    use proptest::prelude::*;
    prop_oneof![
        6 => (any::<usize>(), 1u8..=255).prop_map(|(i, m)| Damage::Flip(i, m)),
        1 => any::<usize>().prop_map(Damage::Truncate),
        1 => (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Damage::Insert(i, b)),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

    /// A damaged checkpoint either loads, and then every parameter holds
    /// exactly what the safetensors crate decodes from the file, or gives a
    /// `Format`, `CheckpointMismatch` or `NonFinite` error and leaves every
    /// parameter as it was. Nothing panics.
    #[test]
    fn damaged_checkpoint_loads_exactly_or_changes_nothing(damage in damage()) {
        let cpu = Cpu::<f32>::new();
        let mut rng = StdRng::seed_from_u64(9);
        let saved = Linear::new(&cpu, 4, 3, true, &mut rng).unwrap();
        let target = Linear::new(&cpu, 4, 3, true, &mut rng).unwrap();
        let dir = scratch(&format!("damage-{damage:?}").replace(|c: char| !c.is_alphanumeric(), "-"));
        let path = dir.join("m.safetensors");
        save_checkpoint(&saved, &path).unwrap();
        let mut bytes = fs::read(&path).unwrap();
        let len = bytes.len();
        match damage {
            Damage::Flip(i, mask) => bytes[i % len] ^= mask,
            Damage::Truncate(i) => bytes.truncate(i % len),
            Damage::Insert(i, b) => bytes.insert(i % (len + 1), b),
        }
        fs::write(&path, &bytes).unwrap();
        let before = snapshot(&target);
        let result = load_checkpoint(&target, &path);
        fs::remove_dir_all(&dir).ok();
        match result {
            Ok(()) => {
                let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
                let names = target.named_params();
                proptest::prop_assert_eq!(st.names().len(), names.len());
                for (name, p) in names {
                    let view = st.tensor(&name).unwrap();
                    let values: Vec<f32> = view
                        .data()
                        .chunks_exact(4)
                        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
                        .collect();
                    proptest::prop_assert_eq!(p.to_array().iter().copied().collect::<Vec<_>>(), values);
                }
            }
            Err(Error::Format { .. } | Error::CheckpointMismatch { .. } | Error::NonFinite { .. }) => {
                proptest::prop_assert_eq!(snapshot(&target), before);
            }
            Err(other) => proptest::prop_assert!(false, "unexpected error {:?}", other),
        }
    }
}
