//! HdChebConv: dense references, gradient checks and validation of both
//! readings, the default [`HdChaining::Output`] (each unit takes the
//! previous unit's output, static `T = Â`) and the earlier
//! [`HdChaining::Transition`] (units chained through the transition
//! outputs, static `T = Â²`).

mod common;
use common::rand_mat;

use hdgcn::autograd::Tape;
use hdgcn::autograd::gradcheck::check_params;
use hdgcn::backend::Cpu;
use hdgcn::conv::{DeviceGraph, GraphConv, HdChaining, HdChebConfig, StaticTransition};
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
fn transition_chaining_static_equals_dense_reference() {
    let mut rng = StdRng::seed_from_u64(21);
    let cpu = C::new();
    for (n, k) in [(7, 2), (10, 6), (1, 4)] {
        let g = random_graph(&mut rng, n);
        let ah = dense_gcn(&g);
        let mut cfg = HdChebConfig::new(3, 5, k);
        cfg.chaining = HdChaining::Transition;
        cfg.dropout = 0.0;
        cfg.input_dropout = 0.0;
        let conv = cfg.build_static(&cpu, &mut rng).unwrap();
        // Random biases and norm affine so that every parameter matters.
        for (_, p) in conv.named_params() {
            let (r, c) = p.shape();
            if r == 1 {
                p.set(rand_mat(&mut rng, r, c)).unwrap();
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
fn transition_chaining_static_gradients_with_dropout() {
    let mut rng = StdRng::seed_from_u64(22);
    let cpu = C::new();
    let g = random_graph(&mut rng, 6);
    let mut cfg = HdChebConfig::new(3, 4, 4);
    cfg.chaining = HdChaining::Transition;
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
fn transition_chaining_dynamic_with_uniform_attention_is_a_graph_mean_transition() {
    // With zero query/key weights every score is 0, so A_f and A_b are
    // uniform: T(Z) = 1 · mean_v(Z) W_fv W_bv for every node of the graph.
    use hdgcn::attention::MvcAttnConfig;
    let mut rng = StdRng::seed_from_u64(23);
    let cpu = C::new();
    let n = 6;
    let g = random_graph(&mut rng, n);
    let ah = dense_gcn(&g);
    let mut cfg = HdChebConfig::new(3, 4, 4);
    cfg.chaining = HdChaining::Transition;
    cfg.dropout = 0.0;
    cfg.input_dropout = 0.0;
    let mut attn = MvcAttnConfig::new(4);
    attn.supernodes = 3;
    let conv = cfg.build_dynamic(&cpu, &mut rng, &attn).unwrap();
    let mut wv = Vec::new();
    for (name, p) in conv.named_params() {
        if name.ends_with(".q.weight") || name.ends_with(".k.weight") {
            let (r, c) = p.shape();
            p.set(Array2::zeros((r, c))).unwrap();
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
fn transition_chaining_dynamic_gradients() {
    use hdgcn::attention::MvcAttnConfig;
    let mut rng = StdRng::seed_from_u64(24);
    let cpu = C::new();
    let g = random_graph(&mut rng, 5);
    let mut cfg = HdChebConfig::new(3, 4, 2);
    cfg.chaining = HdChaining::Transition;
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

// ---------------------------------------------------------------------
// The default reading, `HdChaining::Output` (hdgcn-math.md §3):
//   Z0 = σ(Â X W0 + b0),  Z_k = σ(Â T_k(Z_{k-1}) Wd_k W_k + b_k),
//   H = LayerNorm(Z0 + Σ_k Z_k),  static T = Â.
// ---------------------------------------------------------------------

fn max_abs_diff(a: &Array2<f64>, b: &Array2<f64>) -> f64 {
    assert_eq!(a.dim(), b.dim());
    (a - b).mapv(f64::abs).fold(0.0f64, |m, &v| m.max(v))
}

/// Sets every row-vector parameter (biases, LayerNorm affine) to random
/// values, so that every parameter takes part.
fn randomize_rows<M: Module<C> + ?Sized>(conv: &M, rng: &mut StdRng) {
    for (_, p) in conv.named_params() {
        let (r, c) = p.shape();
        if r == 1 {
            p.set(rand_mat(rng, r, c)).unwrap();
        }
    }
}

/// Identity `h x h` weights, zero biases, zero attention queries and keys
/// (so every MVCAttn softmax is uniform); the LayerNorms keep their
/// identity initialisation and MVProj its random weights (it only enters
/// the scores, which are then 0).
fn identity_weights<T>(conv: &hdgcn::conv::HdChebConv<C, T>, h: usize)
where
    T: hdgcn::conv::Transition<C>,
{
    for (name, p) in conv.named_params() {
        let (r, c) = p.shape();
        let query_or_key = name.ends_with(".q.weight") || name.ends_with(".k.weight");
        let bias = name.ends_with("bias") && !name.contains("norm");
        if query_or_key || bias {
            p.set(Array2::zeros((r, c))).unwrap();
        } else if (r, c) == (h, h) && !name.contains("mvproj") {
            p.set(Array2::eye(h)).unwrap();
        }
    }
}

/// `Â H W + b` of a GCN layer, densely.
fn dense_gcn_layer(ah: &Array2<f64>, c: &hdgcn::conv::GcnConv<C>, h: &Array2<f64>) -> Array2<f64> {
    ah.dot(&h.dot(&c.lin.weight.to_array())) + &c.bias.as_ref().unwrap().to_array()
}

#[test]
fn output_chaining_is_the_default_and_picks_a_hat() {
    let cfg = HdChebConfig::new(3, 4, 6);
    assert_eq!(cfg.chaining, HdChaining::Output);
    assert_eq!(HdChaining::default(), HdChaining::Output);
    assert_eq!(
        HdChebConfig::in_model(3, 4, 6, 0.5).chaining,
        HdChaining::Output
    );
    assert_eq!(StaticTransition::default(), StaticTransition::a_hat());
    let cpu = C::new();
    let mut rng = StdRng::seed_from_u64(40);
    let conv = cfg.build_static(&cpu, &mut rng).unwrap();
    assert!(conv.units.iter().all(|u| u.transition.hops == 1));
    let mut earlier = HdChebConfig::new(3, 4, 6);
    earlier.chaining = HdChaining::Transition;
    let conv = earlier.build_static(&cpu, &mut rng).unwrap();
    assert!(conv.units.iter().all(|u| u.transition.hops == 2));
    // A zero-hop transition is refused, not taken as the identity.
    let conv = HdChebConfig::new(3, 4, 2)
        .build(&cpu, &mut rng, |_, _| Ok(StaticTransition { hops: 0 }))
        .unwrap();
    let dg = DeviceGraph::new(&cpu, random_graph(&mut rng, 4));
    let t = Tape::inference(&cpu);
    let x = t.constant(rand_mat(&mut rng, 4, 3)).into();
    assert!(matches!(
        conv.forward(&t, &dg, &x),
        Err(hdgcn::Error::InvalidConfig(_))
    ));
}

#[test]
fn output_chaining_static_equals_dense_formula() {
    let mut rng = StdRng::seed_from_u64(41);
    let cpu = C::new();
    for (n, k) in [(7, 2), (10, 6), (1, 4), (9, 8)] {
        let g = random_graph(&mut rng, n);
        let ah = dense_gcn(&g);
        let mut cfg = HdChebConfig::new(3, 5, k);
        cfg.dropout = 0.0;
        cfg.input_dropout = 0.0;
        let conv = cfg.build_static(&cpu, &mut rng).unwrap();
        randomize_rows(&conv, &mut rng);
        let x = rand_mat(&mut rng, n, 3);
        let dg = DeviceGraph::new(&cpu, g);
        let t = Tape::inference(&cpu);
        let xf = t.constant(x.clone()).into();
        let y = conv.forward(&t, &dg, &xf).unwrap().to_array();
        let units = conv.forward_units(&t, &dg, &xf).unwrap();

        // Z0 = σ(Â X W0 + b0), Z_k = σ(Â (Â Z_{k-1}) Wd_k W_k + b_k).
        let mut expect = vec![relu(dense_gcn_layer(&ah, &conv.prime, &x))];
        for u in &conv.units {
            let prev = expect.last().unwrap();
            let t_z = ah.dot(prev).dot(&u.wd.weight.to_array());
            expect.push(relu(dense_gcn_layer(&ah, &u.conv, &t_z)));
        }
        assert_eq!(units.len(), k / 2 + 1);
        for (i, (got, want)) in units.iter().zip(&expect).enumerate() {
            let err = max_abs_diff(&got.to_array(), want);
            assert!(err < 1e-12, "n={n} K={k} unit {i}: max error {err}");
        }
        let sum = expect.iter().fold(Array2::zeros((n, 5)), |s, z| s + z);
        let err = max_abs_diff(&y, &dense_layer_norm(&conv, &sum));
        assert!(err < 1e-12, "n={n} K={k}: max error {err}");
    }
}

#[test]
fn output_chaining_static_unit_k_is_a_hat_power_2k_times_a_hat_x() {
    // Identity weights, zero biases and a non-negative input: every ReLU
    // is the identity, so unit k is exactly Â^{2k} Â X (paper Eq. 3rdcheb).
    let mut rng = StdRng::seed_from_u64(42);
    let cpu = C::new();
    let (n, h, k) = (9, 3, 8);
    let g = random_graph(&mut rng, n);
    let ah = dense_gcn(&g);
    let dg = DeviceGraph::new(&cpu, g);
    let x = Array2::from_shape_fn((n, h), |_| rng.random_range(0.0..1.0));
    let units_of = |chaining: HdChaining| {
        let mut cfg = HdChebConfig::new(h, h, k);
        cfg.dropout = 0.0;
        cfg.input_dropout = 0.0;
        cfg.chaining = chaining;
        let conv = cfg
            .build_static(&cpu, &mut StdRng::seed_from_u64(1))
            .unwrap();
        identity_weights(&conv, h);
        let t = Tape::inference(&cpu);
        let xf = t.constant(x.clone()).into();
        let y = conv.forward(&t, &dg, &xf).unwrap().to_array();
        let units: Vec<Array2<f64>> = conv
            .forward_units(&t, &dg, &xf)
            .unwrap()
            .iter()
            .map(|v| v.to_array())
            .collect();
        (units, y, conv)
    };

    let (units, y, conv) = units_of(HdChaining::Output);
    assert_eq!(units.len(), k / 2 + 1);
    let mut power = ah.dot(&x); // Â^{2k} Â X for k = 0
    let mut sum = Array2::zeros((n, h));
    for (i, u) in units.iter().enumerate() {
        let err = max_abs_diff(u, &power);
        assert!(err < 1e-12, "unit {i}: max error {err}");
        sum += &power;
        power = ah.dot(&ah.dot(&power));
    }
    let err = max_abs_diff(&y, &dense_layer_norm(&conv, &sum));
    assert!(err < 1e-12, "H: max error {err}");

    // The earlier reading (static Â², chained through the transitions)
    // gives Â · Â^{2k} (Â X) = Â^{2k+2} X instead: one more hop in every unit.
    let (units, _, _) = units_of(HdChaining::Transition);
    let mut power = ah.dot(&ah.dot(&ah.dot(&ah.dot(&x))));
    for (i, u) in units.iter().enumerate().skip(1) {
        let err = max_abs_diff(u, &power);
        assert!(err < 1e-12, "earlier reading, unit {i}: max error {err}");
        power = ah.dot(&ah.dot(&power));
    }
}

#[test]
fn output_chaining_dynamic_uniform_attention_hand_computed() {
    // Path 0 - 1 - 2; with self-loops the degrees are 2, 3, 2, so
    //   Â = [[1/2, 1/√6, 0], [1/√6, 1/3, 1/√6], [0, 1/√6, 1/2]].
    // Identity weights, zero biases, zero query/key weights: A_f has rows
    // 1/N and A_b rows 1/M, so T(Z) = 1 mean_v(z_v) (every node gets the
    // graph mean). With X ≥ 0 every ReLU is the identity:
    //   Z0 = Â X,
    //   Z1 = Â 1 m0ᵀ = c m0ᵀ          (m0 = mean of Z0's rows, c = Â 1),
    //   Z2 = Â 1 (c̄ m0)ᵀ = c̄ c m0ᵀ   (c̄ = mean of c).
    use hdgcn::attention::MvcAttnConfig;
    let cpu = C::new();
    let g = Graph::from_edges(3, &[(0, 1), (1, 0), (1, 2), (2, 1)]).unwrap();
    let dg = DeviceGraph::new(&cpu, g);
    let x = ndarray::arr2(&[[1.0, 0.0], [0.0, 2.0], [3.0, 1.0]]);
    let r6 = 1.0 / 6f64.sqrt();
    let z0 = ndarray::arr2(&[
        [0.5, 2.0 * r6],
        [4.0 * r6, 2.0 / 3.0 + r6],
        [1.5, 2.0 * r6 + 0.5],
    ]);
    let m0 = ndarray::arr2(&[[(2.0 + 4.0 * r6) / 3.0, (5.0 * r6 + 7.0 / 6.0) / 3.0]]);
    let c = ndarray::arr2(&[[0.5 + r6], [2.0 * r6 + 1.0 / 3.0], [0.5 + r6]]);
    let c_bar = (4.0 / 3.0 + 4.0 * r6) / 3.0;
    let z1 = c.dot(&m0);
    let z2 = &z1 * c_bar;

    let run = |chaining: HdChaining| {
        let mut cfg = HdChebConfig::new(2, 2, 4);
        cfg.dropout = 0.0;
        cfg.input_dropout = 0.0;
        cfg.chaining = chaining;
        let mut attn = MvcAttnConfig::new(2);
        attn.supernodes = 3;
        let conv = cfg
            .build_dynamic(&cpu, &mut StdRng::seed_from_u64(43), &attn)
            .unwrap();
        identity_weights(&conv, 2);
        let t = Tape::inference(&cpu);
        let xf = t.constant(x.clone()).into();
        let y = conv.forward(&t, &dg, &xf).unwrap().to_array();
        let units: Vec<Array2<f64>> = conv
            .forward_units(&t, &dg, &xf)
            .unwrap()
            .iter()
            .map(|v| v.to_array())
            .collect();
        (units, y, conv)
    };

    let (units, y, conv) = run(HdChaining::Output);
    for (i, want) in [&z0, &z1, &z2].into_iter().enumerate() {
        let err = max_abs_diff(&units[i], want);
        assert!(err < 1e-12, "unit {i}: max error {err}\n{:?}", units[i]);
    }
    let err = max_abs_diff(&y, &dense_layer_norm(&conv, &(&z0 + &z1 + &z2)));
    assert!(err < 1e-12, "H: max error {err}");
    // c̄ ≠ 1, so unit 2 differs from unit 1 ...
    assert!(max_abs_diff(&units[1], &units[2]) > 1e-3);
    // ... while under the earlier reading unit 2's transition reads
    // 1 m0ᵀ again and both units give c m0ᵀ.
    let (units, _, _) = run(HdChaining::Transition);
    for i in [1, 2] {
        let err = max_abs_diff(&units[i], &z1);
        assert!(err < 1e-12, "earlier reading, unit {i}: max error {err}");
    }
}

#[test]
fn output_chaining_dynamic_uniform_attention_equals_dense_formula() {
    // Random weights and biases, zero query/key weights:
    // T(Z) = 1 mean_v(Z) W_fv W_bv, Z_k = σ(Â T(Z_{k-1}) Wd_k W_k + b_k).
    use hdgcn::attention::MvcAttnConfig;
    let mut rng = StdRng::seed_from_u64(44);
    let cpu = C::new();
    let n = 7;
    let g = random_graph(&mut rng, n);
    let ah = dense_gcn(&g);
    let mut cfg = HdChebConfig::new(3, 4, 6);
    cfg.dropout = 0.0;
    cfg.input_dropout = 0.0;
    let mut attn = MvcAttnConfig::new(4);
    attn.supernodes = 3;
    let conv = cfg.build_dynamic(&cpu, &mut rng, &attn).unwrap();
    randomize_rows(&conv, &mut rng);
    let mut wv = Vec::new();
    for (name, p) in conv.named_params() {
        if name.ends_with(".q.weight") || name.ends_with(".k.weight") {
            let (r, c) = p.shape();
            p.set(Array2::zeros((r, c))).unwrap();
        }
        if name.contains("transition") && name.ends_with(".v.weight") {
            wv.push((name, p.to_array()));
        }
    }
    assert_eq!(wv.len(), 6, "fcattn.v and bcattn.v of three units");
    let x = rand_mat(&mut rng, n, 3);
    let dg = DeviceGraph::new(&cpu, g);
    let t = Tape::inference(&cpu);
    let y = conv
        .forward(&t, &dg, &t.constant(x.clone()).into())
        .unwrap()
        .to_array();

    let mut prev = relu(dense_gcn_layer(&ah, &conv.prime, &x));
    let mut sum = prev.clone();
    for (i, u) in conv.units.iter().enumerate() {
        let find = |s: &str| {
            wv.iter()
                .find(|(n, _)| n.starts_with(&format!("units.{i}.")) && n.contains(s))
                .unwrap()
                .1
                .clone()
        };
        let mean = prev.mean_axis(Axis(0)).unwrap().insert_axis(Axis(0));
        let t_z = Array2::ones((n, 1)).dot(&mean.dot(&find("fcattn.v")).dot(&find("bcattn.v")));
        let zk = relu(dense_gcn_layer(
            &ah,
            &u.conv,
            &t_z.dot(&u.wd.weight.to_array()),
        ));
        sum += &zk;
        prev = zk;
    }
    let err = max_abs_diff(&y, &dense_layer_norm(&conv, &sum));
    assert!(err < 1e-10, "max error {err}");
}

#[test]
fn static_gradients_of_both_readings() {
    for (seed, chaining) in [(45, HdChaining::Output), (46, HdChaining::Transition)] {
        let mut rng = StdRng::seed_from_u64(seed);
        let cpu = C::new();
        let g = random_graph(&mut rng, 6);
        let mut cfg = HdChebConfig::new(3, 4, 6);
        cfg.chaining = chaining;
        cfg.dropout = 0.3;
        cfg.input_dropout = 0.2;
        cfg.activation = Activation::Tanh; // smooth, for central differences
        let conv = cfg.build_static(&cpu, &mut rng).unwrap();
        randomize_rows(&conv, &mut rng);
        let dg = DeviceGraph::new(&cpu, g);
        let x = rand_mat(&mut rng, 6, 3);
        let w = rand_mat(&mut rng, 6, 4);
        assert_gradients(&conv, &dg, &x, &w);
    }
}

#[test]
fn dynamic_gradients_of_both_readings() {
    use hdgcn::attention::MvcAttnConfig;
    for (seed, chaining) in [(47, HdChaining::Output), (48, HdChaining::Transition)] {
        let mut rng = StdRng::seed_from_u64(seed);
        let cpu = C::new();
        let g = random_graph(&mut rng, 5);
        let mut cfg = HdChebConfig::new(3, 4, 4);
        cfg.chaining = chaining;
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
}

#[test]
fn both_readings_share_parameters_and_differ_from_the_second_unit_on() {
    // Same parameter names and shapes (checkpoints load across readings);
    // with the same transition one unit (K = 2) computes the same thing
    // under both, two units (K = 4) do not.
    let cpu = C::new();
    let mut rng = StdRng::seed_from_u64(49);
    let dg = DeviceGraph::new(&cpu, random_graph(&mut rng, 8));
    let x = rand_mat(&mut rng, 8, 3);
    let out = |chaining: HdChaining, k: usize| {
        let mut cfg = HdChebConfig::new(3, 4, k);
        cfg.chaining = chaining;
        let mut conv = cfg
            .build(&cpu, &mut StdRng::seed_from_u64(7), |_, _| {
                Ok(StaticTransition::squared())
            })
            .unwrap();
        conv.set_training(false);
        let names: Vec<(String, (usize, usize))> = conv
            .named_params()
            .into_iter()
            .map(|(n, p)| (n, p.shape()))
            .collect();
        let t = Tape::inference(&cpu);
        let y = conv
            .forward(&t, &dg, &t.constant(x.clone()).into())
            .unwrap()
            .to_array();
        (names, y)
    };
    let (n_out, y_out) = out(HdChaining::Output, 2);
    let (n_tr, y_tr) = out(HdChaining::Transition, 2);
    assert_eq!(n_out, n_tr);
    assert!(max_abs_diff(&y_out, &y_tr) < 1e-12);
    let (n_out, y_out) = out(HdChaining::Output, 4);
    let (n_tr, y_tr) = out(HdChaining::Transition, 4);
    assert_eq!(n_out, n_tr);
    assert!(max_abs_diff(&y_out, &y_tr) > 1e-3);
}

/// Output and parameter gradients (of `sum(y ⊙ w)`) of an HD-ChebConv on
/// backend `b`, in `f64`, after setting its parameters to `params`.
fn outputs_on<B: hdgcn::backend::Backend>(
    b: &B,
    cfg: &HdChebConfig,
    dynamic: bool,
    params: &[Array2<f64>],
    g: &Graph,
    x: &Array2<f64>,
    w: &Array2<f64>,
) -> (Array2<f64>, Vec<Array2<f64>>) {
    use hdgcn::Float;
    use hdgcn::attention::MvcAttnConfig;
    let mut rng = StdRng::seed_from_u64(51);
    let conv: Box<dyn GraphConv<B>> = if dynamic {
        let mut attn = MvcAttnConfig::new(cfg.hidden);
        attn.supernodes = 3;
        Box::new(cfg.build_dynamic(b, &mut rng, &attn).unwrap())
    } else {
        Box::new(cfg.build_static(b, &mut rng).unwrap())
    };
    let lossy = |a: &Array2<f64>| a.mapv(B::Elem::from_f64_lossy);
    let exact = |a: Array2<B::Elem>| a.mapv(Float::to_f64_exact);
    let named = conv.named_params();
    assert_eq!(named.len(), params.len());
    for ((_, p), v) in named.iter().zip(params) {
        p.set(b.upload(lossy(v).view())).unwrap();
    }
    let t = Tape::with_seed(b, 3);
    let dg = DeviceGraph::new(b, g.clone());
    let y = conv
        .forward(&t, &dg, &t.constant_array(&lossy(x)).into())
        .unwrap();
    let grads = y
        .mul(&t.constant_array(&lossy(w)))
        .unwrap()
        .sum_all()
        .backward()
        .unwrap();
    let grads = named
        .iter()
        .map(|(n, p)| exact(b.download(grads.get(p).unwrap_or_else(|| panic!("{n}: no gradient")))))
        .collect();
    (exact(y.to_array()), grads)
}

#[cfg(feature = "wgpu")]
#[test]
fn both_readings_on_wgpu_match_the_f64_cpu() {
    let gpu = match hdgcn::backend::Wgpu::new() {
        Ok(b) => b,
        Err(e) => {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("CI=true but the wgpu backend is unavailable: {e}");
            }
            eprintln!("skipping the wgpu check: {e}");
            return;
        }
    };
    both_readings_match_the_f64_cpu(&gpu);
}

#[test]
fn both_readings_in_f32_match_the_f64_cpu() {
    both_readings_match_the_f64_cpu(&Cpu::<f32>::new());
}

/// Both readings, static and dynamic, on backend `b` against `Cpu<f64>`
/// with the same parameters: outputs and gradients within 1e-4 relative.
fn both_readings_match_the_f64_cpu<B: hdgcn::backend::Backend>(b: &B) {
    use hdgcn::attention::MvcAttnConfig;
    let cpu = C::new();
    let mut rng = StdRng::seed_from_u64(50);
    let g = random_graph(&mut rng, 9);
    let x = rand_mat(&mut rng, 9, 3);
    let w = rand_mat(&mut rng, 9, 4);
    let close = |what: &str, got: &Array2<f64>, want: &Array2<f64>| {
        let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
        let err = max_abs_diff(got, want) / scale;
        assert!(err < 1e-4, "{what}: relative error {err}");
    };
    for chaining in [HdChaining::Output, HdChaining::Transition] {
        for dynamic in [false, true] {
            let mut cfg = HdChebConfig::new(3, 4, 6);
            cfg.chaining = chaining;
            cfg.dropout = 0.0;
            cfg.input_dropout = 0.0;
            let mut rng = StdRng::seed_from_u64(52);
            let reference: Box<dyn GraphConv<C>> = if dynamic {
                let mut attn = MvcAttnConfig::new(4);
                attn.supernodes = 3;
                Box::new(cfg.build_dynamic(&cpu, &mut rng, &attn).unwrap())
            } else {
                Box::new(cfg.build_static(&cpu, &mut rng).unwrap())
            };
            randomize_rows(&*reference, &mut rng);
            let params: Vec<Array2<f64>> = reference
                .named_params()
                .iter()
                .map(|(_, p)| p.to_array())
                .collect();
            let (y64, g64) = outputs_on(&cpu, &cfg, dynamic, &params, &g, &x, &w);
            let (y32, g32) = outputs_on(b, &cfg, dynamic, &params, &g, &x, &w);
            let what = format!("{chaining:?} dynamic={dynamic}");
            close(&format!("{what} output"), &y32, &y64);
            for (i, (a, e)) in g32.iter().zip(&g64).enumerate() {
                close(&format!("{what} gradient {i}"), a, e);
            }
        }
    }
}
