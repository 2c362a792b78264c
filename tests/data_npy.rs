//! Features on disk (issue 71 items 5 and 6): `.npy` matrices written,
//! memory-mapped and gathered per batch; files numpy wrote; malformed
//! files refused with errors naming the file; sampled training over a
//! feature file larger than the memory budget.

use std::path::{Path, PathBuf};

use hdgcn::Error;
use hdgcn::backend::Cpu;
use hdgcn::data::FeatureStore;
use hdgcn::data::npy::{NpyDtype, NpyMatrix, write_npy};
use hdgcn::graph::generate::{GeneratorConfig, generate};
use hdgcn::graph::sampling::{
    NeighborLoader, NeighborLoaderConfig, NeighborSampler, SamplingConfig,
};
use hdgcn::limits::MemoryBudget;
use hdgcn::models::NodeClassifier;
use hdgcn::train::{SampledNodeStep, TrainConfig, Trainer, evaluate};
use ndarray::Array2;
use rand::SeedableRng;
use rand::rngs::StdRng;

/// A fresh folder for one test.
fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hdgcn-npy-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A `.npy` file with `dict` as its header (format 1.0, padded) and `data` after it.
fn raw_npy(path: &Path, dict: &str, data: &[u8]) {
    let unpadded = 10 + dict.len() + 1;
    let pad = unpadded.next_multiple_of(64) - unpadded;
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&((dict.len() + pad + 1) as u16).to_le_bytes());
    b.extend_from_slice(dict.as_bytes());
    b.extend(std::iter::repeat_n(b' ', pad));
    b.push(b'\n');
    b.extend_from_slice(data);
    std::fs::write(path, b).unwrap();
}

fn format_error(r: hdgcn::Result<NpyMatrix>, path: &Path, needle: &str) {
    match r {
        Err(e @ Error::Format { .. }) => {
            let text = e.to_string();
            assert!(
                text.contains(&path.display().to_string()),
                "file not named: {text}"
            );
            assert!(text.contains(needle), "{needle:?} not in {text}");
        }
        other => panic!("expected a Format error with {needle:?}, got {other:?}"),
    }
}

#[test]
fn write_then_map_round_trips_and_gathers_rows() {
    let d = tmp("roundtrip");
    let x = Array2::from_shape_fn((37, 5), |(i, j)| {
        (i as f64) * 0.5 - (j as f64) * 1.25 + 1e-3
    });
    let p64 = d.join("x64.npy");
    write_npy(&p64, x.view()).unwrap();
    let m = NpyMatrix::open(&p64).unwrap();
    assert_eq!(
        (m.shape(), m.dtype(), m.num_nodes(), m.dim()),
        ((37, 5), NpyDtype::F64, 37, 5)
    );
    assert_eq!(m.data_bytes(), 37 * 5 * 8);
    assert_eq!(
        (std::fs::metadata(&p64).unwrap().len() - m.data_bytes()) % 64,
        0,
        "header padded to 64 bytes"
    );
    assert_eq!(m.to_array::<f64>().unwrap(), x);
    let rows = [36, 0, 5, 5];
    let g: Array2<f64> = m.gather(&rows).unwrap();
    let g_mem: Array2<f64> = x.gather(&rows).unwrap();
    assert_eq!(g, g_mem);
    for (i, &r) in rows.iter().enumerate() {
        assert_eq!(g.row(i), x.row(r));
    }
    // f32 on disk, read as f32 and f64.
    let x32 = x.mapv(|v| v as f32);
    let p32 = d.join("x32.npy");
    write_npy(&p32, x32.view()).unwrap();
    let m32 = NpyMatrix::open(&p32).unwrap();
    assert_eq!(m32.dtype(), NpyDtype::F32);
    assert_eq!(m32.to_array::<f32>().unwrap(), x32);
    assert_eq!(m32.to_array::<f64>().unwrap(), x32.mapv(f64::from));
    assert!(matches!(
        m32.gather::<f32>(&[1, 37]),
        Err(Error::IndexOutOfRange {
            index: 37,
            len: 37,
            ..
        })
    ));
    // Zero columns and zero rows.
    let pe = d.join("empty.npy");
    write_npy(&pe, Array2::<f32>::zeros((4, 0)).view()).unwrap();
    assert_eq!(
        NpyMatrix::open(&pe)
            .unwrap()
            .gather::<f32>(&[3, 0])
            .unwrap()
            .dim(),
        (2, 0)
    );
    std::fs::remove_dir_all(&d).ok();
}

/// Files numpy itself wrote (C order, float32 and float64, format 1.0),
/// read back and compared with what numpy printed.
#[test]
fn reads_files_numpy_wrote() {
    let py = Path::new("/tmp/venv/bin/python");
    if !py.exists() {
        eprintln!("skipped: no python with numpy at {}", py.display());
        return;
    }
    let d = tmp("numpy");
    let script = "import numpy as np, sys\n\
        d = sys.argv[1]\n\
        x = (np.arange(24).reshape(6, 4) * 0.37 - 3.1)\n\
        np.save(d + '/f8.npy', x)\n\
        np.save(d + '/f4.npy', x.astype(np.float32))\n\
        np.save(d + '/fortran.npy', np.asfortranarray(x))\n\
        np.save(d + '/i8.npy', np.arange(6).reshape(3, 2))\n\
        np.save(d + '/be.npy', x.astype('>f4'))\n\
        print(' '.join(repr(float(v)) for v in x.astype(np.float32).ravel()))\n";
    let out = std::process::Command::new(py)
        .args(["-c", script, d.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let want: Vec<f64> = String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .map(|t| t.parse().unwrap())
        .collect();
    let f4 = NpyMatrix::open(d.join("f4.npy")).unwrap();
    assert_eq!(f4.shape(), (6, 4));
    let got: Vec<f64> = f4.to_array::<f64>().unwrap().iter().copied().collect();
    assert_eq!(got, want);
    let f8 = NpyMatrix::open(d.join("f8.npy")).unwrap();
    let got8 = f8.to_array::<f64>().unwrap();
    for (i, v) in got8.iter().enumerate() {
        let (r, c) = (i / 4, i % 4);
        assert_eq!(*v, (r * 4 + c) as f64 * 0.37 - 3.1);
    }
    format_error(
        NpyMatrix::open(d.join("fortran.npy")),
        &d.join("fortran.npy"),
        "Fortran",
    );
    format_error(
        NpyMatrix::open(d.join("i8.npy")),
        &d.join("i8.npy"),
        "unsupported dtype \"<i8\"",
    );
    format_error(
        NpyMatrix::open(d.join("be.npy")),
        &d.join("be.npy"),
        "unsupported dtype \">f4\"",
    );
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn malformed_files_are_clear_errors_naming_the_file() {
    let d = tmp("bad");
    let dict = |descr: &str, fortran: &str, shape: &str| {
        format!("{{'descr': '{descr}', 'fortran_order': {fortran}, 'shape': {shape}, }}")
    };
    // The header disagrees with the size: too few, too many bytes.
    let p = d.join("short.npy");
    raw_npy(&p, &dict("<f4", "False", "(3, 4)"), &[0u8; 44]);
    format_error(
        NpyMatrix::open(&p),
        &p,
        "shape (3, 4) of <f4 = 48 bytes of data, but the file has 44 bytes",
    );
    let p = d.join("long.npy");
    raw_npy(&p, &dict("<f8", "False", "(2, 2)"), &[0u8; 40]);
    format_error(
        NpyMatrix::open(&p),
        &p,
        "= 32 bytes of data, but the file has 40 bytes",
    );
    let p = d.join("huge.npy");
    raw_npy(
        &p,
        &dict("<f8", "False", "(18446744073709551615, 2)"),
        &[0u8; 8],
    );
    format_error(NpyMatrix::open(&p), &p, "too many bytes of data");
    // Non-C order, other dtypes, other ranks.
    let p = d.join("fortran.npy");
    raw_npy(&p, &dict("<f4", "True", "(2, 2)"), &[0u8; 16]);
    format_error(NpyMatrix::open(&p), &p, "Fortran (column-major) order");
    for (name, descr) in [("i4", "<i4"), ("f2", "<f2"), ("c8", "<c8"), ("be", ">f8")] {
        let p = d.join(format!("{name}.npy"));
        raw_npy(&p, &dict(descr, "False", "(2, 2)"), &[0u8; 32]);
        format_error(
            NpyMatrix::open(&p),
            &p,
            &format!("unsupported dtype \"{descr}\""),
        );
    }
    let p = d.join("rank1.npy");
    raw_npy(&p, &dict("<f4", "False", "(4,)"), &[0u8; 16]);
    format_error(
        NpyMatrix::open(&p),
        &p,
        "expected a 2-D array, got shape (4,)",
    );
    let p = d.join("rank3.npy");
    raw_npy(&p, &dict("<f4", "False", "(1, 2, 2)"), &[0u8; 16]);
    format_error(NpyMatrix::open(&p), &p, "expected a 2-D array");
    // Not .npy at all, a truncated header.
    let p = d.join("magic.npy");
    std::fs::write(&p, b"PK\x03\x04 not numpy").unwrap();
    format_error(NpyMatrix::open(&p), &p, "bad magic");
    let p = d.join("trunc.npy");
    std::fs::write(&p, b"\x93NUMPY\x01\x00\xff\x00{'descr'").unwrap();
    format_error(NpyMatrix::open(&p), &p, "the header claims 255 bytes");
    let p = d.join("v9.npy");
    std::fs::write(&p, b"\x93NUMPY\x09\x00\x00\x00").unwrap();
    format_error(NpyMatrix::open(&p), &p, "unsupported .npy format version 9");
    assert!(matches!(
        NpyMatrix::open(d.join("absent.npy")),
        Err(Error::MissingFile(_))
    ));
    std::fs::remove_dir_all(&d).ok();
}

/// The feature file is larger than the memory budget: loading it whole is
/// refused, but sampled training gathers batch by batch and learns.
#[test]
fn sampled_training_over_a_feature_file_larger_than_the_budget() {
    let d = tmp("budget");
    let g = generate(&GeneratorConfig {
        num_nodes: 4000,
        degree: 6,
        classes: 4,
        feature_dim: 64,
        homophily: 0.9,
        feature_noise: 2.0,
        seed: 2,
        ..GeneratorConfig::default()
    })
    .unwrap();
    let path = d.join("features.npy");
    write_npy(&path, g.features.view()).unwrap();
    let features = NpyMatrix::open(&path).unwrap();
    assert_eq!(features.data_bytes(), 4000 * 64 * 4); // 1 MiB of float32
    let sampler = NeighborSampler::from_edges(g.num_nodes, &g.edges).unwrap();
    let cfg = |shuffle, seed| NeighborLoaderConfig {
        sampling: SamplingConfig::new(vec![4, 4]).unwrap(),
        batch_size: 32,
        shuffle,
        seed,
    };
    let mut train = NeighborLoader::new(&sampler, (0..2400).collect(), cfg(true, 0)).unwrap();
    let val = NeighborLoader::new(&sampler, (2400..2800).collect(), cfg(false, 1))
        .unwrap()
        .sample_epoch(0)
        .unwrap();
    let test = NeighborLoader::new(&sampler, (2800..4000).collect(), cfg(false, 2))
        .unwrap()
        .sample_epoch(0)
        .unwrap();
    let budget = MemoryBudget::from_bytes(512 << 10);
    assert!(features.data_bytes() > budget.bytes());
    budget.scope(|| {
        match features.to_array::<f32>() {
            Err(Error::OverBudget { what, .. }) => assert!(what.contains("features.npy"), "{what}"),
            other => panic!("loading the whole file must be refused, got {other:?}"),
        }
        let cpu = Cpu::<f32>::new();
        let mut model =
            NodeClassifier::gcn(&cpu, 64, 16, 4, 0.5, &mut StdRng::seed_from_u64(0)).unwrap();
        let mut step = SampledNodeStep::new(&mut model, &features, &g.labels, 4).unwrap();
        let fit = Trainer::new(TrainConfig {
            epochs: 3,
            lr: 0.01,
            ..TrainConfig::default()
        })
        .unwrap()
        .fit(&mut step, &mut train, &val)
        .unwrap();
        let acc = evaluate(&mut step, &test).unwrap().accuracy;
        assert!(
            fit.val_acc > 0.8 && acc > 0.8,
            "val {} test {acc}",
            fit.val_acc
        );
        // The same batches from the in-memory features give the same result.
        let mut model2 =
            NodeClassifier::gcn(&cpu, 64, 16, 4, 0.5, &mut StdRng::seed_from_u64(0)).unwrap();
        let mut step2 = SampledNodeStep::new(&mut model2, &g.features, &g.labels, 4).unwrap();
        let fit2 = Trainer::new(TrainConfig {
            epochs: 3,
            lr: 0.01,
            ..TrainConfig::default()
        })
        .unwrap()
        .fit(&mut step2, &mut train, &val)
        .unwrap();
        assert_eq!(
            fit.history.iter().map(|r| r.train_loss).collect::<Vec<_>>(),
            fit2.history
                .iter()
                .map(|r| r.train_loss)
                .collect::<Vec<_>>()
        );
    });
    std::fs::remove_dir_all(&d).ok();
}
