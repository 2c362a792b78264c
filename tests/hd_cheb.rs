//! HdChebConv (static variant): dense reference, gradient check, validation.

mod common;
use common::rand_mat;

use hdgcn::autograd::Tape;
use hdgcn::autograd::gradcheck::check_params;
use hdgcn::backend::Cpu;
use hdgcn::conv::{DeviceGraph, GraphConv, HdChebConfig};
use hdgcn::graph::Graph;
use hdgcn::nn::{Activation, Module};
use ndarray::{Array2, Axis};
use rand::{Rng, SeedableRng, rngs::StdRng};

type C = Cpu<f64>;

fn random_graph(rng: &mut StdRng, n: usize) -> Graph {
    let mut edges = Vec::new();
    for i in 0..n {
        for j in i + 1..n {
            if rng.random_bool(0.35) {
                edges.push((i, j));
                edges.push((j, i));
            }
        }
    }
    Graph::from_edges(n, &edges).unwrap()
}

fn dense_gcn(g: &Graph) -> Array2<f64> {
    common::dense_gcn(&g.adjacency().to_dense())
}

fn relu(a: Array2<f64>) -> Array2<f64> {
    a.mapv(|v| v.max(0.0))
}

/// Gradient check of every parameter of `conv` on a weighted sum of its output.
fn assert_gradients<L: GraphConv<C>>(
    conv: &L,
    dg: &DeviceGraph<C>,
    x: &Array2<f64>,
    w: &Array2<f64>,
) {
    let r = check_params(
        &conv.named_params(),
        |t| {
            let y = conv.forward(t, dg, &t.constant(x.clone()).into())?;
            y.mul(&t.constant(w.clone()))?
                .sum_all()
                .add(&y.square().mean_all())
        },
        1e-6,
    )
    .unwrap();
    assert!(r.max_error < 1e-6, "{r:?}");
}

/// `LayerNorm(sum)` with the layer's affine parameters, written out densely.
fn dense_layer_norm<T>(conv: &hdgcn::conv::HdChebConv<C, T>, sum: &Array2<f64>) -> Array2<f64> {
    let mean = sum.mean_axis(Axis(1)).unwrap().insert_axis(Axis(1));
    let cen = sum - &mean;
    let var = cen
        .mapv(|v| v * v)
        .mean_axis(Axis(1))
        .unwrap()
        .insert_axis(Axis(1));
    cen / var.mapv(|v| (v + 1e-5).sqrt()) * conv.norm.weight.to_array() + conv.norm.bias.to_array()
}

#[test]
fn static_variant_equals_dense_reference() {
    let mut rng = StdRng::seed_from_u64(21);
    let cpu = C::new();
    for (n, k) in [(7, 2), (10, 6), (1, 4)] {
        let g = random_graph(&mut rng, n);
        let ah = dense_gcn(&g);
        let mut cfg = HdChebConfig::new(3, 5, k);
        cfg.dropout = 0.0;
        cfg.input_dropout = 0.0;
        let conv = cfg.build_static(&cpu, &mut rng).unwrap();
        // Random biases and norm affine so that every parameter matters.
        for (_, p) in conv.named_params() {
            let (r, c) = p.shape();
            if r == 1 {
                p.set(rand_mat(&mut rng, r, c));
            }
        }
        let x = rand_mat(&mut rng, n, 3);
        let dg = DeviceGraph::new(&cpu, g);
        let t = Tape::inference(&cpu);
        let y = conv
            .forward(&t, &dg, &t.constant(x.clone()).into())
            .unwrap()
            .to_array();

        let gcn = |c: &hdgcn::conv::GcnConv<C>, h: &Array2<f64>| {
            ah.dot(&h.dot(&c.lin.weight.to_array())) + &c.bias.as_ref().unwrap().to_array()
        };
        let z0 = relu(gcn(&conv.prime, &x));
        let mut sum = z0.clone();
        let mut prev = z0;
        for u in &conv.units {
            let zk = ah.dot(&ah.dot(&prev)).dot(&u.wd.weight.to_array());
            sum = sum + relu(gcn(&u.conv, &zk));
            prev = zk;
        }
        let expect = dense_layer_norm(&conv, &sum);
        let err = (&y - &expect).mapv(f64::abs).fold(0.0f64, |m, &v| m.max(v));
        assert!(err < 1e-12, "n={n} K={k}: max error {err}");
        assert_eq!(conv.units.len(), k / 2);
    }
}

#[test]
fn static_variant_gradients_with_dropout() {
    let mut rng = StdRng::seed_from_u64(22);
    let cpu = C::new();
    let g = random_graph(&mut rng, 6);
    let mut cfg = HdChebConfig::new(3, 4, 4);
    cfg.dropout = 0.3;
    cfg.activation = Activation::Tanh; // smooth, so central differences are exact enough
    let conv = cfg.build_static(&cpu, &mut rng).unwrap();
    let dg = DeviceGraph::new(&cpu, g);
    let x = rand_mat(&mut rng, 6, 3);
    let w = rand_mat(&mut rng, 6, 4);
    assert_gradients(&conv, &dg, &x, &w);
    let names: Vec<String> = conv.named_params().into_iter().map(|(n, _)| n).collect();
    assert!(
        names.contains(&"units.1.wd.weight".to_string()),
        "{names:?}"
    );
    assert!(names.contains(&"norm.weight".to_string()));
}

#[test]
fn invalid_configurations_are_errors() {
    let cpu = C::new();
    let mut rng = StdRng::seed_from_u64(0);
    for (d, h, k) in [(3, 4, 0), (3, 4, 3), (0, 4, 2), (3, 0, 2)] {
        assert!(
            matches!(
                HdChebConfig::new(d, h, k).build_static(&cpu, &mut rng),
                Err(hdgcn::Error::InvalidConfig(_))
            ),
            "{d} {h} {k}"
        );
    }
    // An even K whose units cannot be allocated: an error, not an abort.
    match HdChebConfig::new(3, 4, usize::MAX - 1).build_static(&cpu, &mut rng) {
        Err(hdgcn::Error::InvalidConfig(m)) => assert!(m.contains("too large"), "{m}"),
        other => panic!("expected InvalidConfig, got {other:?}"),
    }
    let mut cfg = HdChebConfig::new(3, 4, 2);
    cfg.dropout = 1.0;
    assert!(cfg.build_static(&cpu, &mut rng).is_err());
    let mut cfg = HdChebConfig::new(3, 4, 2);
    cfg.input_dropout = -0.1;
    let err = cfg.build_static(&cpu, &mut rng).unwrap_err().to_string();
    assert!(err.contains("input_dropout"), "{err}");
}

#[test]
fn dynamic_variant_with_uniform_attention_is_a_graph_mean_transition() {
    // With zero query/key weights every score is 0, so A_f and A_b are
    // uniform: T(Z) = 1 · mean_v(Z) W_fv W_bv for every node of the graph.
    use hdgcn::attention::MvcAttnConfig;
    let mut rng = StdRng::seed_from_u64(23);
    let cpu = C::new();
    let n = 6;
    let g = random_graph(&mut rng, n);
    let ah = dense_gcn(&g);
    let mut cfg = HdChebConfig::new(3, 4, 4);
    cfg.dropout = 0.0;
    cfg.input_dropout = 0.0;
    let mut attn = MvcAttnConfig::new(4);
    attn.supernodes = 3;
    let conv = cfg.build_dynamic(&cpu, &mut rng, &attn).unwrap();
    let mut wv = Vec::new();
    for (name, p) in conv.named_params() {
        if name.ends_with(".q.weight") || name.ends_with(".k.weight") {
            let (r, c) = p.shape();
            p.set(Array2::zeros((r, c)));
        }
        if name.contains("transition") && name.ends_with(".v.weight") {
            wv.push((name, p.to_array()));
        }
    }
    assert_eq!(wv.len(), 4, "fcattn.v and bcattn.v of two units: {wv:?}");
    let x = rand_mat(&mut rng, n, 3);
    let dg = DeviceGraph::new(&cpu, g);
    let t = Tape::inference(&cpu);
    let y = conv
        .forward(&t, &dg, &t.constant(x.clone()).into())
        .unwrap()
        .to_array();

    let gcn = |c: &hdgcn::conv::GcnConv<C>, h: &Array2<f64>| {
        ah.dot(&h.dot(&c.lin.weight.to_array())) + &c.bias.as_ref().unwrap().to_array()
    };
    let z0 = relu(gcn(&conv.prime, &x));
    let mut sum = z0.clone();
    let mut prev = z0;
    for (i, u) in conv.units.iter().enumerate() {
        let find = |s: &str| {
            wv.iter()
                .find(|(n, _)| n.starts_with(&format!("units.{i}.")) && n.contains(s))
                .unwrap()
                .1
                .clone()
        };
        let (w_fv, w_bv) = (find("fcattn.v"), find("bcattn.v"));
        let mean = prev.mean_axis(Axis(0)).unwrap().insert_axis(Axis(0));
        let t_z = Array2::ones((n, 1)).dot(&mean.dot(&w_fv).dot(&w_bv));
        let zk = t_z.dot(&u.wd.weight.to_array());
        sum = sum + relu(gcn(&u.conv, &zk));
        prev = zk;
    }
    let expect = dense_layer_norm(&conv, &sum);
    let err = (&y - &expect).mapv(f64::abs).fold(0.0f64, |m, &v| m.max(v));
    assert!(err < 1e-10, "max error {err}");
}

#[test]
fn dynamic_variant_gradients() {
    use hdgcn::attention::MvcAttnConfig;
    let mut rng = StdRng::seed_from_u64(24);
    let cpu = C::new();
    let g = random_graph(&mut rng, 5);
    let mut cfg = HdChebConfig::new(3, 4, 2);
    cfg.dropout = 0.0;
    cfg.input_dropout = 0.0;
    cfg.activation = Activation::Tanh;
    let mut attn = MvcAttnConfig::new(4);
    attn.supernodes = 2;
    let conv = cfg.build_dynamic(&cpu, &mut rng, &attn).unwrap();
    let dg = DeviceGraph::new(&cpu, g);
    let x = rand_mat(&mut rng, 5, 3);
    let w = rand_mat(&mut rng, 5, 4);
    assert_gradients(&conv, &dg, &x, &w);
}

#[test]
fn dynamic_forward_with_maps_equals_forward() {
    use hdgcn::attention::MvcAttnConfig;
    use hdgcn::graph::Batch;
    let mut rng = StdRng::seed_from_u64(25);
    let cpu = C::new();
    let (n1, n2, m) = (5, 3, 4);
    let batch = Batch::new(&[random_graph(&mut rng, n1), random_graph(&mut rng, n2)]).unwrap();
    let dg = DeviceGraph::from_batch(&cpu, &batch).unwrap();
    let mut attn = MvcAttnConfig::new(6);
    attn.supernodes = m;
    let mut conv = HdChebConfig::new(3, 6, 6)
        .build_dynamic(&cpu, &mut rng, &attn)
        .unwrap();
    conv.set_training(false); // dropout off, so both passes are deterministic
    let x = rand_mat(&mut rng, n1 + n2, 3);
    let t = Tape::inference(&cpu);
    let xf = t.constant(x).into();
    let y = conv.forward(&t, &dg, &xf).unwrap().to_array();
    let (y2, maps) = conv.forward_with_maps(&t, &dg, &xf).unwrap();
    assert_eq!(y, y2.to_array());
    assert_eq!(maps.len(), 3, "K/2 = 3 HD units");
    for unit in &maps {
        assert_eq!(unit.forward.len(), 2);
        assert_eq!(unit.backward.len(), 2);
        for (g, n) in [(0, n1), (1, n2)] {
            let (af, ab) = (&unit.forward[g], &unit.backward[g]);
            assert_eq!(af.dim(), (m, n));
            assert_eq!(ab.dim(), (n, m));
            // Attention routing: rows of A_f and of A_b are distributions.
            for r in af.rows().into_iter().chain(ab.rows()) {
                assert!((r.sum() - 1.0).abs() < 1e-12);
            }
        }
    }
}

#[test]
fn input_dropout_acts_on_the_input_only() {
    // With every dropout 0 a training-mode pass equals an evaluation pass;
    // input dropout alone (Z_k dropout 0) makes them differ, and Z_k dropout
    // alone (input dropout 0) does too: the two are independent knobs.
    let mut rng = StdRng::seed_from_u64(31);
    let cpu = C::new();
    let dg = DeviceGraph::new(&cpu, random_graph(&mut rng, 8));
    let x = rand_mat(&mut rng, 8, 3);
    let pass = |input_dropout: f64, dropout: f64, training: bool| {
        let mut cfg = HdChebConfig::new(3, 4, 4);
        cfg.input_dropout = input_dropout;
        cfg.dropout = dropout;
        let mut conv = cfg
            .build_static(&cpu, &mut StdRng::seed_from_u64(5))
            .unwrap();
        conv.set_training(training);
        let t = Tape::with_seed(&cpu, 9);
        let xf = t.constant(x.clone()).into();
        conv.forward(&t, &dg, &xf).unwrap().to_array()
    };
    let eval = pass(0.0, 0.0, false);
    assert_eq!(pass(0.0, 0.0, true), eval);
    assert_eq!(pass(0.5, 0.5, false), eval);
    assert_ne!(pass(0.5, 0.0, true), eval);
    assert_ne!(pass(0.0, 0.5, true), eval);
    // The configuration for use inside a model keeps only the Z_k dropout.
    let m = HdChebConfig::in_model(3, 4, 4, 0.3);
    assert_eq!((m.dropout, m.input_dropout), (0.3, 0.0));
    assert_eq!(m.k, 4);
}
