//! Standard layers: gradient checks (f64, central differences), reference
//! values and error paths.

use hdgcn::autograd::gradcheck::check_params;
use hdgcn::autograd::{Index, Param, Tape};
use hdgcn::backend::{Backend, Cpu};
use hdgcn::nn::{
    Activation, Dropout, Embedding, Features, LayerNorm, Linear, Mlp, Module, PositionalEncoding,
    SubwordConfig, SubwordEmbedding,
};
use ndarray::Array2;
use rand::{SeedableRng, rngs::StdRng};

mod common;
use common::rand_mat;

type C = Cpu<f64>;

/// A scalar that depends on every output entry differently.
fn loss(
    t: &Tape<C>,
    y: &hdgcn::autograd::Var<C>,
    w: &Array2<f64>,
) -> hdgcn::Result<hdgcn::autograd::Var<C>> {
    y.tanh()
        .mul(&t.constant(w.clone()))?
        .sum_all()
        .add(&y.square().mean_all())
}

#[test]
fn initialisers_reject_non_finite_settings() {
    let cpu = C::new();
    let mut rng = StdRng::seed_from_u64(4);
    for bad in [f64::NAN, f64::INFINITY, -1.0] {
        let err = hdgcn::nn::init::normal(&cpu, 2, 2, bad, &mut rng).unwrap_err();
        assert!(
            matches!(err, hdgcn::Error::InvalidConfig(_)),
            "{bad}: {err:?}"
        );
    }
    // std 0 is allowed: all zeros.
    let z = hdgcn::nn::init::normal(&cpu, 2, 3, 0.0, &mut rng).unwrap();
    assert_eq!(z.to_array(), Array2::<f64>::zeros((2, 3)));
    for bad in [f64::NAN, f64::NEG_INFINITY] {
        let err = hdgcn::nn::init::constant(&cpu, 1, 2, bad).unwrap_err();
        assert!(
            matches!(err, hdgcn::Error::NonFinite { .. }),
            "{bad}: {err:?}"
        );
    }
    let c = hdgcn::nn::init::constant(&cpu, 1, 2, 0.25).unwrap();
    assert_eq!(c.to_array(), ndarray::arr2(&[[0.25, 0.25]]));
}

#[test]
fn linear_on_no_rows_gives_no_rows_and_zero_gradients() {
    let mut rng = StdRng::seed_from_u64(3);
    let cpu = C::new();
    let lin = Linear::new(&cpu, 3, 2, true, &mut rng).unwrap();
    let t = Tape::new(&cpu);
    let y = lin
        .forward(&Features::Dense(t.constant(Array2::zeros((0, 3)))))
        .unwrap();
    assert_eq!(y.shape(), (0, 2));
    let grads = y.sum_all().backward().unwrap();
    for (name, p) in lin.named_params() {
        let g = cpu.download(grads.get(&p).unwrap());
        assert_eq!(g.dim(), p.shape(), "{name}");
        assert!(g.iter().all(|&v| v == 0.0), "{name}: {g}");
    }
}

#[test]
fn linear_matches_dense_formula_and_gradients() {
    let mut rng = StdRng::seed_from_u64(1);
    let cpu = C::new();
    let lin = Linear::new(&cpu, 5, 3, true, &mut rng).unwrap();
    let x = rand_mat(&mut rng, 4, 5);
    let t = Tape::inference(&cpu);
    let y = lin
        .forward(&Features::Dense(t.constant(x.clone())))
        .unwrap()
        .to_array();
    let expect = x.dot(&lin.weight.to_array()) + &lin.bias.as_ref().unwrap().to_array();
    assert!((&y - &expect).iter().all(|d| d.abs() < 1e-14));
    let w = rand_mat(&mut rng, 4, 3);
    let r = check_params(
        &lin.named_params(),
        |t| {
            loss(
                t,
                &lin.forward(&Features::Dense(t.constant(x.clone())))?,
                &w,
            )
        },
        1e-6,
    )
    .unwrap();
    assert!(r.max_error < 1e-7, "{r:?}");
    assert_eq!(
        lin.named_params()
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>(),
        ["weight", "bias"]
    );
}

#[test]
fn layer_norm_matches_torch_definition_and_gradients() {
    let mut rng = StdRng::seed_from_u64(2);
    let cpu = C::new();
    let ln = LayerNorm::new(&cpu, 6, 1e-5).unwrap();
    ln.weight.set(rand_mat(&mut rng, 1, 6)).unwrap();
    ln.bias.set(rand_mat(&mut rng, 1, 6)).unwrap();
    let x = rand_mat(&mut rng, 3, 6);
    let t = Tape::inference(&cpu);
    let y = ln.forward(&t.constant(x.clone())).unwrap().to_array();
    for i in 0..3 {
        let row = x.row(i);
        let mean = row.sum() / 6.0;
        let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / 6.0;
        for j in 0..6 {
            let e = (x[[i, j]] - mean) / (var + 1e-5).sqrt() * ln.weight.to_array()[[0, j]]
                + ln.bias.to_array()[[0, j]];
            assert!((y[[i, j]] - e).abs() < 1e-12);
        }
    }
    let w = rand_mat(&mut rng, 3, 6);
    let r = check_params(
        &ln.named_params(),
        |t| loss(t, &ln.forward(&t.constant(x.clone()))?, &w),
        1e-6,
    )
    .unwrap();
    assert!(r.max_error < 1e-7, "{r:?}");
    assert!(LayerNorm::new(&cpu, 0, 1e-5).is_err());
    assert!(LayerNorm::new(&cpu, 3, f64::NAN).is_err());
    let bad = t.constant(Array2::zeros((2, 5)));
    assert!(ln.forward(&bad).is_err());
}

#[test]
fn mlp_gradients_with_dropout_and_sparse_input() {
    let mut rng = StdRng::seed_from_u64(3);
    let cpu = C::new();
    let mlp = Mlp::new(&cpu, &[4, 7, 2], Activation::Elu(1.0), 0.3, &mut rng).unwrap();
    let names: Vec<String> = mlp.named_params().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "lins.0.weight",
            "lins.0.bias",
            "lins.1.weight",
            "lins.1.bias"
        ]
    );
    let x = rand_mat(&mut rng, 5, 4).mapv(|v| if v.abs() < 0.3 { 0.0 } else { v });
    let xs = hdgcn::autograd::SparseMatrix::from_csmat(
        &cpu,
        &sprs::CsMat::csr_from_dense(x.view(), 0.0),
    )
    .unwrap();
    let w = rand_mat(&mut rng, 5, 2);
    for sparse in [false, true] {
        let r = check_params(
            &mlp.named_params(),
            |t| {
                let f = if sparse {
                    Features::Sparse(xs.clone())
                } else {
                    Features::Dense(t.constant(x.clone()))
                };
                loss(t, &mlp.forward(t, &f)?, &w)
            },
            1e-6,
        )
        .unwrap();
        assert!(r.max_error < 1e-7, "sparse={sparse}: {r:?}");
    }
    assert!(Mlp::<C>::new(&cpu, &[4], Activation::Relu, 0.0, &mut rng).is_err());
}

#[test]
fn embedding_gathers_rows_and_accumulates_repeated_tokens() {
    let mut rng = StdRng::seed_from_u64(4);
    let cpu = C::new();
    let emb = Embedding::new(&cpu, 6, 3, &mut rng).unwrap();
    let idx = Index::new(&cpu, &[2, 5, 2, 0]).unwrap();
    let t = Tape::inference(&cpu);
    let y = emb.forward(&t, &idx).unwrap().to_array();
    let table = emb.weight.to_array();
    for (r, &i) in [2usize, 5, 2, 0].iter().enumerate() {
        assert_eq!(y.row(r), table.row(i));
    }
    let w = rand_mat(&mut rng, 4, 3);
    let r = check_params(
        &emb.named_params(),
        |t| loss(t, &emb.forward(t, &idx)?, &w),
        1e-6,
    )
    .unwrap();
    assert!(r.max_error < 1e-7, "{r:?}");
    let bad = Index::new(&cpu, &[6]).unwrap();
    assert!(emb.forward(&t, &bad).is_err());
    assert!(Embedding::<C>::new(&cpu, 0, 3, &mut rng).is_err());
    let mut nan = Array2::zeros((2, 2));
    nan[[1, 1]] = f64::NAN;
    assert!(Embedding::<C>::from_array(&cpu, &nan).is_err());
}

#[test]
fn embedding_with_std_scales_the_initialisation_and_rejects_bad_std() {
    let cpu = C::new();
    let moments = |std: f64| {
        let mut rng = StdRng::seed_from_u64(9);
        let w = Embedding::<C>::with_std(&cpu, 500, 20, std, &mut rng)
            .unwrap()
            .weight
            .to_array();
        let n = w.len() as f64;
        let mean = w.sum() / n;
        let var = w.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
        (mean, var.sqrt())
    };
    // 10,000 draws: the sample mean is within 4 standard errors of 0 and the
    // sample standard deviation within 3 % of the requested one.
    for std in [1.0, 0.1, 0.01] {
        let (mean, s) = moments(std);
        assert!(mean.abs() < 4.0 * std / 100.0, "std {std}: mean {mean}");
        assert!((s / std - 1.0).abs() < 0.03, "std {std}: sample std {s}");
    }
    // `new` is `with_std(.., 1.0, ..)`: same draws from the same seed.
    let a = Embedding::<C>::new(&cpu, 7, 3, &mut StdRng::seed_from_u64(5)).unwrap();
    let b = Embedding::<C>::with_std(&cpu, 7, 3, 1.0, &mut StdRng::seed_from_u64(5)).unwrap();
    assert_eq!(a.weight.to_array(), b.weight.to_array());
    let mut rng = StdRng::seed_from_u64(1);
    for bad in [0.0, -0.5, f64::NAN, f64::INFINITY] {
        let e = Embedding::<C>::with_std(&cpu, 4, 2, bad, &mut rng).unwrap_err();
        assert!(e.to_string().contains("init std"), "{e}");
    }
    assert!(Embedding::<C>::with_std(&cpu, 4, 0, 0.1, &mut rng).is_err());
}

#[test]
fn dropout_module_follows_train_eval_mode_and_keeps_expectation() {
    let cpu = C::new();
    let mut d = Dropout::new(0.5).unwrap();
    let t = Tape::with_seed(&cpu, 3);
    let x = t.constant(Array2::from_elem((200, 50), 1.0));
    let y = d.forward(&x).unwrap().to_array();
    let zeros = y.iter().filter(|&&v| v == 0.0).count() as f64 / y.len() as f64;
    assert!((zeros - 0.5).abs() < 0.03, "dropped fraction {zeros}");
    assert!(y.iter().all(|&v| v == 0.0 || v == 2.0));
    <Dropout as Module<C>>::set_training(&mut d, false);
    assert_eq!(d.forward(&x).unwrap().to_array(), x.to_array());
    assert!(Dropout::new(1.0).is_err() && Dropout::new(-0.1).is_err());
}

#[test]
fn params_are_shared_handles() {
    let cpu = C::new();
    let p = Param::from_array(&cpu, &Array2::zeros((1, 1)));
    let q = p.clone();
    q.set(Array2::from_elem((1, 1), 3.0)).unwrap();
    assert_eq!(p.to_array()[[0, 0]], 3.0);
    assert_eq!(p.id(), q.id());
}

#[test]
fn a_tape_shares_parameter_values_and_keeps_what_its_forward_saw() {
    let cpu = C::new();
    let ones = Array2::from_elem((2, 3), 1.0);
    let p = Param::from_array(&cpu, &ones);
    for t in [Tape::new(&cpu), Tape::inference(&cpu)] {
        let v = t.param(&p);
        // No copy: the tape holds the parameter's own storage.
        assert_eq!(v.value().as_ptr(), p.value().as_ptr());
    }
    let t = Tape::new(&cpu);
    let v = t.param(&p);
    // An update while the tape lives copies first (copy-on-write) ...
    p.value_mut().fill(5.0);
    assert_eq!(p.to_array(), Array2::from_elem((2, 3), 5.0));
    assert_eq!(v.to_array(), ones);
    // ... so the backward pass uses the value the forward pass saw.
    let grads = v.square().sum_all().backward().unwrap();
    assert_eq!(grads.get(&p).unwrap(), &Array2::from_elem((2, 3), 2.0));
    drop((v, t));
    // With no tape alive the update is in place.
    let before = p.value().as_ptr();
    p.value_mut().fill(7.0);
    assert_eq!(p.value().as_ptr(), before);
    assert_eq!(p.to_array(), Array2::from_elem((2, 3), 7.0));
}

#[test]
fn parameters_set_from_transposed_arrays_work_everywhere() {
    use hdgcn::backend::Axis;
    use hdgcn::optim::{AdamConfig, Optimizer};
    let cpu = C::new();
    let mut rng = StdRng::seed_from_u64(9);
    // A Fortran-order (transposed view) value: kernels must not assume row-major storage.
    let w_t = rand_mat(&mut rng, 3, 4).reversed_axes();
    let p = Param::from_array(&cpu, &Array2::zeros((4, 3)));
    p.set(w_t.clone()).unwrap();
    let t = Tape::new(&cpu);
    let wv = t.param(&p);
    let cat = hdgcn::autograd::Var::concat(&[&wv, &wv], Axis::Cols).unwrap();
    assert_eq!(cat.slice(Axis::Cols, 3, 6).unwrap().to_array(), w_t);
    let grads = cat
        .slice(Axis::Cols, 0, 3)
        .unwrap()
        .square()
        .sum_all()
        .backward()
        .unwrap();
    assert_eq!(grads.get(&p).unwrap(), &(w_t.clone() * 2.0));
    let mut opt = AdamConfig::default().lr(0.1).build::<C>().unwrap();
    opt.step(std::slice::from_ref(&p), &grads).unwrap();
    assert!(p.to_array().iter().zip(w_t.iter()).all(|(a, b)| a != b));
}

#[test]
fn parameter_shapes_too_large_to_allocate_are_errors_not_panics() {
    // Shapes whose size in bytes overflows: ndarray would panic, the
    // allocator abort. Each layer refuses them with an InvalidConfig naming
    // the tensor.
    let cpu = Cpu::<f32>::new();
    let mut rng = StdRng::seed_from_u64(8);
    let too_large = |r: hdgcn::Result<()>, what: &str| match r {
        Err(hdgcn::Error::InvalidConfig(m)) => assert!(m.contains("too large"), "{what}: {m}"),
        other => panic!("{what}: expected InvalidConfig, got {other:?}"),
    };
    too_large(
        Embedding::new(&cpu, usize::MAX, 2, &mut rng).map(drop),
        "embedding rows",
    );
    too_large(
        Embedding::new(&cpu, 1 << 40, 1 << 30, &mut rng).map(drop),
        "embedding size",
    );
    too_large(
        Linear::new(&cpu, usize::MAX, 2, true, &mut rng).map(drop),
        "Linear::new",
    );
    too_large(
        Linear::glorot(&cpu, 3, usize::MAX / 2, true, &mut rng).map(drop),
        "Linear::glorot",
    );
    too_large(
        LayerNorm::new(&cpu, usize::MAX, 1e-5).map(drop),
        "LayerNorm",
    );
    let mut attn = hdgcn::attention::MvcAttnConfig::new(64);
    // 2^40 supernodes: 2^52 MVProj entries, 16 PiB, more than any address
    // space (a product that overflows is refused by `validate`).
    attn.supernodes = 1 << 40;
    match attn.build(&cpu, &mut rng) {
        Err(hdgcn::Error::OverBudget { what, needed, .. }) => {
            assert!(what.contains("MvcAttn MVProj weight"), "{what}");
            assert_eq!(needed, 4 << 52);
        }
        other => panic!("MvcAttn supernodes: expected OverBudget, got {other:?}"),
    }
    // Every one of them still builds at an ordinary size.
    assert!(Embedding::new(&cpu, 10, 2, &mut rng).is_ok());
    assert!(LayerNorm::new(&cpu, 4, 1e-5).is_ok());
}

#[test]
fn an_emptied_mlp_is_an_error_not_a_panic() {
    let cpu = C::new();
    let mut rng = StdRng::seed_from_u64(6);
    let mut mlp = Mlp::new(&cpu, &[3, 2], Activation::Relu, 0.0, &mut rng).unwrap();
    mlp.lins.clear();
    let t = Tape::new(&cpu);
    let x = Features::Dense(t.constant(Array2::zeros((2, 3))));
    let err = mlp.forward(&t, &x).unwrap_err();
    assert!(matches!(err, hdgcn::Error::InvalidConfig(_)), "{err:?}");
}

#[test]
fn positional_encoding_matches_hand_values_and_pyg_frequencies() {
    // Width 6: three frequencies 1e-4^(i/2) = 1, 1e-2, 1e-4 (torch.logspace(0, 1, 3, 1e-4)).
    let pe = PositionalEncoding::new(6).unwrap();
    let f = pe.frequencies();
    assert_eq!(f.len(), 3);
    for (a, b) in f.iter().zip([1.0, 1e-2, 1e-4]) {
        assert!((a - b).abs() < 1e-17, "{f:?}");
    }
    // Position 3 at granularity 2 is x = 1.5; amplitude 0.5. Values from
    // Python's math.sin / math.cos.
    let pe = pe.with_granularity(2.0).unwrap().with_scale(0.5).unwrap();
    let e = pe.encode::<f64>(&[0.0, 3.0]).unwrap();
    assert_eq!(e.dim(), (2, 6));
    assert_eq!(e.row(0).to_vec(), vec![0.0, 0.0, 0.0, 0.5, 0.5, 0.5]);
    let want = [
        0.4987474933020272,
        0.007499718753164045,
        7.499999971875e-05,
        0.03536860083385145,
        0.4999437510546796,
        0.49999999437500003,
    ];
    for (j, (a, b)) in e.row(1).iter().zip(want).enumerate() {
        assert!((a - b).abs() < 1e-16, "column {j}: {a} vs {b}");
    }
    // Width 2 has the one frequency 1.
    let two = PositionalEncoding::new(2)
        .unwrap()
        .encode::<f64>(&[1.0])
        .unwrap();
    assert_eq!(two.row(0).to_vec(), vec![1f64.sin(), 1f64.cos()]);
    // f32 output is the f64 value rounded.
    let e32 = pe.encode::<f32>(&[3.0]).unwrap();
    for (a, b) in e32.row(0).iter().zip(e.row(1)) {
        assert_eq!(*a, *b as f32);
    }
}

#[test]
fn positional_encoding_of_node_indices_restarts_in_every_graph() {
    let pe = PositionalEncoding::new(8)
        .unwrap()
        .with_base_freq(1e-3)
        .unwrap();
    // Graphs of 2, 0 and 3 nodes.
    let by_graph = pe.encode_node_indices::<f64>(&[0, 2, 2, 5]).unwrap();
    let direct = pe.encode::<f64>(&[0.0, 1.0, 0.0, 1.0, 2.0]).unwrap();
    assert_eq!(by_graph, direct);
    // Each frequency's sine and cosine lie on the circle of radius scale.
    let pe = pe.with_scale(0.25).unwrap();
    let e = pe.encode::<f64>(&[0.0, 7.0, 123.5, 1e6]).unwrap();
    for row in e.rows() {
        for i in 0..4 {
            let r2 = row[i] * row[i] + row[4 + i] * row[4 + i];
            assert!((r2 - 0.0625).abs() < 1e-15, "{r2}");
        }
    }
}

#[test]
fn positional_encoding_rejects_bad_settings_and_positions() {
    for w in [0, 3, 7] {
        assert!(
            matches!(PositionalEncoding::new(w), Err(hdgcn::Error::InvalidConfig(m)) if m.contains(&w.to_string()))
        );
    }
    let pe = PositionalEncoding::new(4).unwrap();
    for b in [0.0, -1e-4, 1.5, f64::NAN] {
        assert!(
            matches!(pe.with_base_freq(b), Err(hdgcn::Error::InvalidConfig(_))),
            "{b}"
        );
    }
    for g in [0.0, -1.0, f64::INFINITY, f64::NAN] {
        assert!(
            matches!(pe.with_granularity(g), Err(hdgcn::Error::InvalidConfig(_))),
            "{g}"
        );
        assert!(
            matches!(pe.with_scale(g), Err(hdgcn::Error::InvalidConfig(_))),
            "{g}"
        );
    }
    assert!(matches!(
        pe.encode::<f64>(&[0.0, f64::NAN]),
        Err(hdgcn::Error::NonFinite { ref what, .. }) if what.contains("position 1")
    ));
    for ptr in [vec![], vec![1, 2], vec![0, 3, 2]] {
        assert!(
            matches!(
                pe.encode_node_indices::<f64>(&ptr),
                Err(hdgcn::Error::InvalidConfig(_))
            ),
            "{ptr:?}"
        );
    }
    assert_eq!(pe.encode::<f64>(&[]).unwrap().dim(), (0, 4));
}

#[test]
fn activation_names_parse_back_to_their_kind() {
    for a in [
        Activation::Relu,
        Activation::LeakyRelu(0.01),
        Activation::Elu(1.0),
        Activation::Sigmoid,
        Activation::Tanh,
        Activation::Gelu,
        Activation::Identity,
    ] {
        assert_eq!(a.name().parse::<Activation>().unwrap(), a, "{}", a.name());
    }
    assert_eq!(
        "LEAKY_RELU".parse::<Activation>().unwrap().name(),
        "leaky_relu"
    );
    assert_eq!("none".parse::<Activation>().unwrap().name(), "identity");
    let err = "swish".parse::<Activation>().unwrap_err().to_string();
    assert!(err.contains("swish"), "{err}");
}

#[test]
fn subword_ngrams_are_the_bracketed_substrings() {
    let cfg = SubwordConfig {
        min_n: 3,
        max_n: 4,
        min_words: 1,
    };
    // "<abab>": 3-grams <ab, aba, bab, ab> (aba repeats once), 4-grams
    // <aba, abab, bab>.
    assert_eq!(
        cfg.ngrams("abab"),
        ["<ab", "aba", "bab", "ab>", "<aba", "abab", "bab>"]
    );
    // Shorter than min_n once bracketed: no n-grams; chars, not bytes.
    assert!(cfg.ngrams("").is_empty());
    assert_eq!(cfg.ngrams("é"), ["<é>"]);
}

/// 3-grams only, kept when two words share them.
const TRIGRAMS: SubwordConfig = SubwordConfig {
    min_n: 3,
    max_n: 3,
    min_words: 2,
};

#[test]
fn subword_embedding_averages_the_word_and_shared_ngram_rows() {
    let cpu = C::new();
    let mut rng = StdRng::seed_from_u64(11);
    let cfg = TRIGRAMS;
    // 3-grams: "abc" -> "<ab", "abc", "bc>"; "abd" -> "<ab", "abd", "bd>";
    // "xy" -> "<xy", "xy>".
    // Only "<ab" is in two words, so it is the one n-gram row (row 4).
    let words = ["<unk>", "abc", "abd", "xy"];
    let emb = SubwordEmbedding::new(&cpu, &words, cfg, 3, 0.5, &mut rng).unwrap();
    assert_eq!((emb.num_words(), emb.num_ngrams(), emb.dim()), (4, 1, 3));
    let table = emb.weight.to_array();
    assert_eq!(table.dim(), (5, 3));
    let ids = [1usize, 3, 0, 2, 1];
    let idx = Index::new(&cpu, &ids).unwrap();
    let y = emb
        .forward(&Tape::inference(&cpu), &idx)
        .unwrap()
        .to_array();
    for (r, &i) in ids.iter().enumerate() {
        let want = match i {
            1 | 2 => (&table.row(i) + &table.row(4)) / 2.0,
            _ => table.row(i).to_owned(), // <unk> is special; xy shares nothing
        };
        for c in 0..3 {
            assert!((y[[r, c]] - want[c]).abs() < 1e-15, "row {r} col {c}");
        }
    }
    let w = rand_mat(&mut rng, ids.len(), 3);
    let r = check_params(
        &emb.named_params(),
        |t| loss(t, &emb.forward(t, &idx)?, &w),
        1e-6,
    )
    .unwrap();
    assert!(r.max_error < 1e-7, "{r:?}");
    let bad = Index::new(&cpu, &[4]).unwrap();
    assert!(matches!(
        emb.forward(&Tape::inference(&cpu), &bad),
        Err(hdgcn::Error::IndexOutOfRange {
            index: 4,
            len: 4,
            ..
        })
    ));
}

#[test]
fn subword_embedding_rejects_bad_settings() {
    let cpu = C::new();
    let mut rng = StdRng::seed_from_u64(2);
    let ok = SubwordConfig::default();
    let words = ["<unk>", "word"];
    let bad_lengths = [(0, 3), (4, 3)];
    for (min_n, max_n) in bad_lengths {
        let cfg = SubwordConfig { min_n, max_n, ..ok };
        let e = SubwordEmbedding::<C>::new(&cpu, &words, cfg, 4, 0.1, &mut rng).unwrap_err();
        assert!(matches!(e, hdgcn::Error::InvalidConfig(_)), "{e:?}");
    }
    let none: [&str; 0] = [];
    assert!(SubwordEmbedding::<C>::new(&cpu, &none, ok, 4, 0.1, &mut rng).is_err());
    assert!(SubwordEmbedding::<C>::new(&cpu, &words, ok, 0, 0.1, &mut rng).is_err());
    for std in [0.0, f64::NAN] {
        assert!(SubwordEmbedding::<C>::new(&cpu, &words, ok, 4, std, &mut rng).is_err());
    }
}

#[test]
fn subword_embedding_composes_unseen_words_from_known_ngrams() {
    let cpu = C::new();
    let mut rng = StdRng::seed_from_u64(12);
    let cfg = TRIGRAMS;
    // Kept 3-grams: "<ab" (abc, abd) and "cd>" (acd, bcd): rows 5 and 6.
    let words = ["<unk>", "abc", "abd", "acd", "bcd"];
    let mut emb = SubwordEmbedding::new(&cpu, &words, cfg, 2, 0.5, &mut rng).unwrap();
    assert_eq!(emb.num_ngrams(), 2);
    let before = emb.weight.to_array();
    // "abcd": <ab, abc, bcd, cd> -> rows of <ab and cd>; "xyz": none;
    // "<pad>": a special token.
    let ids = emb.extend_vocabulary(&["abcd", "xyz", "<pad>"]);
    assert_eq!(ids, 5..8);
    assert_eq!(emb.num_words(), 8);
    assert_eq!(emb.weight.to_array(), before, "the table is unchanged");
    let y = emb
        .forward(
            &Tape::inference(&cpu),
            &Index::new(&cpu, &[5, 6, 7, 1]).unwrap(),
        )
        .unwrap()
        .to_array();
    let abcd = (&before.row(5) + &before.row(6)) / 2.0;
    let abc = (&before.row(1) + &before.row(5)) / 2.0;
    for c in 0..2 {
        assert!((y[[0, c]] - abcd[c]).abs() < 1e-15);
        assert_eq!((y[[1, c]], y[[2, c]]), (0.0, 0.0));
        assert!((y[[3, c]] - abc[c]).abs() < 1e-15);
    }
}
