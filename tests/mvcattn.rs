//! MVCAttn: gradient checks, stochasticity of the maps, permutation
//! equivariance, batching, a dense reference (attention routing), a
//! hand-computed case (votes routing) and error handling.

use hdgcn::Error;
use hdgcn::attention::{
    AttentionMaps, MAX_DENSE_NODES, MvcAttn, MvcAttnConfig, Routing, normalized_entropy,
};
use hdgcn::autograd::gradcheck::{check_inputs, check_params};
use hdgcn::autograd::{Segments, Tape};
use hdgcn::backend::Cpu;
use hdgcn::nn::Module;
use ndarray::{Array2, Axis, s};
use proptest::prelude::*;
use rand::{Rng, SeedableRng, rngs::StdRng};

mod common;
use common::{max_abs_diff, ptr_of, rand_mat_wide, weigh};

type B = Cpu<f64>;

const H: f64 = 1e-6;
const TOL: f64 = 1e-7;

fn config(h: usize, m: usize, routing: Routing) -> MvcAttnConfig {
    let mut cfg = MvcAttnConfig::new(h);
    cfg.supernodes = m;
    cfg.d_c = 2;
    cfg.d_a = 3;
    cfg.routing = routing;
    cfg
}

/// A layer with every parameter (LayerNorm affine included) random.
fn layer(cfg: &MvcAttnConfig, seed: u64) -> MvcAttn<B> {
    let cpu = B::new();
    let mut rng = StdRng::seed_from_u64(seed);
    let l = cfg.build(&cpu, &mut rng).unwrap();
    for (_, p) in l.named_params() {
        let (r, c) = p.shape();
        p.set(rand_mat_wide(&mut rng, r, c)).unwrap();
    }
    l
}

fn param(l: &MvcAttn<B>, name: &str) -> Array2<f64> {
    l.named_params()
        .into_iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("no parameter {name}"))
        .1
        .to_array()
}

fn set_param(l: &MvcAttn<B>, name: &str, v: Array2<f64>) {
    let (_, p) = l
        .named_params()
        .into_iter()
        .find(|(n, _)| n == name)
        .unwrap();
    assert_eq!(p.shape(), v.dim(), "{name}");
    p.set(v).unwrap();
}

fn run(l: &MvcAttn<B>, z: &Array2<f64>, ptr: &[usize]) -> (Array2<f64>, AttentionMaps) {
    let cpu = B::new();
    let seg = Segments::new(&cpu, ptr).unwrap();
    let tape = Tape::inference(&cpu);
    let zv = tape.constant_array(z);
    let (out, maps) = l.forward_with_maps(&tape, &zv, &seg).unwrap();
    (out.to_array(), maps)
}

// ----- gradient checks -----------------------------------------------------------

fn gradcheck(routing: Routing, dropout: f64, score_norm: bool) {
    let cpu = B::new();
    let mut cfg = config(3, 2, routing);
    cfg.dropout = dropout;
    cfg.score_norm = score_norm;
    let l = layer(&cfg, 11);
    // Three graphs, the middle one a single node.
    let ptr = [0, 3, 4, 7];
    let seg = Segments::new(&cpu, &ptr).unwrap();
    let mut rng = StdRng::seed_from_u64(12);
    let z = rand_mat_wide(&mut rng, 7, 3);
    let r = check_params(
        &l.named_params(),
        |t| weigh(&l.forward(t, &t.constant_array(&z), &seg)?, 13),
        H,
    )
    .unwrap();
    assert!(
        r.max_error < TOL,
        "{routing:?} params: {} at {}",
        r.max_error,
        r.worst
    );
    assert_eq!(r.checked, l.num_params());
    let r = check_inputs(
        std::slice::from_ref(&z),
        |t, v| weigh(&l.forward(t, &v[0], &seg)?, 14),
        H,
    )
    .unwrap();
    assert!(
        r.max_error < TOL,
        "{routing:?} inputs: {} at {}",
        r.max_error,
        r.worst
    );
}

#[test]
fn gradcheck_attention_routing() {
    gradcheck(Routing::Attention, 0.0, false);
}

#[test]
fn gradcheck_votes_routing() {
    gradcheck(Routing::Votes, 0.0, false);
}

#[test]
fn gradcheck_with_score_norm() {
    gradcheck(Routing::Attention, 0.0, true);
    gradcheck(Routing::Votes, 0.0, true);
}

#[test]
fn gradcheck_with_attention_dropout() {
    // Masks repeat on tapes with the same seed, so the check is exact.
    gradcheck(Routing::Attention, 0.3, false);
}

// ----- stochasticity ------------------------------------------------------------------

fn sizes_strategy() -> impl Strategy<Value = (Vec<usize>, usize, usize, u64)> {
    (
        prop::collection::vec(1usize..6, 1..4),
        1usize..5,
        1usize..4,
        any::<u64>(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn attention_maps_are_row_stochastic((sizes, h, m, seed) in sizes_strategy()) {
        let ptr = ptr_of(&sizes);
        let mut cfg = config(h, m, Routing::Attention);
        cfg.score_norm = seed % 2 == 1;
        let l = layer(&cfg, seed);
        let mut rng = StdRng::seed_from_u64(seed ^ 1);
        let z = rand_mat_wide(&mut rng, *ptr.last().unwrap(), h).mapv(|v| 3.0 * v);
        let (_, maps) = run(&l, &z, &ptr);
        prop_assert_eq!(maps.forward.len(), sizes.len());
        for (g, &n) in sizes.iter().enumerate() {
            prop_assert_eq!(maps.forward[g].dim(), (m, n));
            prop_assert_eq!(maps.backward[g].dim(), (n, m));
            let ad = maps.dynamic_adjacency(g).unwrap();
            prop_assert_eq!(ad.dim(), (n, n));
            for a in [&maps.forward[g], &maps.backward[g], &ad] {
                prop_assert!(a.iter().all(|&v| v >= 0.0));
                for row in a.rows() {
                    prop_assert!((row.sum() - 1.0).abs() < 1e-12, "row sum {}", row.sum());
                }
            }
        }
    }

    #[test]
    fn vote_maps_are_column_stochastic((sizes, h, m, seed) in sizes_strategy()) {
        let ptr = ptr_of(&sizes);
        let l = layer(&config(h, m, Routing::Votes), seed);
        let mut rng = StdRng::seed_from_u64(seed ^ 2);
        let z = rand_mat_wide(&mut rng, *ptr.last().unwrap(), h);
        let (_, maps) = run(&l, &z, &ptr);
        for g in 0..sizes.len() {
            for a in [&maps.forward[g], &maps.backward[g]] {
                for col in a.columns() {
                    prop_assert!((col.sum() - 1.0).abs() < 1e-12, "column sum {}", col.sum());
                }
            }
        }
    }
}

// ----- structure ---------------------------------------------------------------------------

/// Both routings, each with and without `score_norm`.
fn every_variant(h: usize, m: usize) -> Vec<MvcAttnConfig> {
    let mut out = Vec::new();
    for routing in [Routing::Attention, Routing::Votes] {
        for score_norm in [false, true] {
            let mut cfg = config(h, m, routing);
            cfg.score_norm = score_norm;
            out.push(cfg);
        }
    }
    out
}

#[test]
fn permutation_equivariance() {
    for cfg in every_variant(4, 3) {
        let routing = cfg.routing;
        let l = layer(&cfg, 21);
        let ptr = [0, 4, 9];
        let mut rng = StdRng::seed_from_u64(22);
        let z = rand_mat_wide(&mut rng, 9, 4);
        // Permute the nodes of graph 1 (rows 4..9).
        let perm = [0, 1, 2, 3, 7, 5, 8, 4, 6];
        let zp = z.select(Axis(0), &perm);
        let (out, maps) = run(&l, &z, &ptr);
        let (outp, mapsp) = run(&l, &zp, &ptr);
        assert!(max_abs_diff(&outp, &out.select(Axis(0), &perm)) < 1e-12);
        let local: Vec<usize> = perm[4..].iter().map(|&p| p - 4).collect();
        assert!(max_abs_diff(&mapsp.forward[1], &maps.forward[1].select(Axis(1), &local)) < 1e-12);
        assert!(
            max_abs_diff(
                &mapsp.backward[1],
                &maps.backward[1].select(Axis(0), &local)
            ) < 1e-12
        );
        assert!(max_abs_diff(&mapsp.forward[0], &maps.forward[0]) < 1e-12);
        // A non-trivial permutation really moves rows (the test can fail).
        assert!(max_abs_diff(&outp, &out) > 1e-6, "{routing:?}");
    }
}

#[test]
fn batch_equals_graphs_alone() {
    for cfg in every_variant(5, 3) {
        let routing = cfg.routing;
        let l = layer(&cfg, 31);
        let sizes = [3, 1, 6];
        let ptr = ptr_of(&sizes);
        let mut rng = StdRng::seed_from_u64(32);
        let z = rand_mat_wide(&mut rng, 10, 5);
        let (out, maps) = run(&l, &z, &ptr);
        for g in 0..sizes.len() {
            let zg = z.slice(s![ptr[g]..ptr[g + 1], ..]).to_owned();
            let (og, mg) = run(&l, &zg, &[0, sizes[g]]);
            let part = out.slice(s![ptr[g]..ptr[g + 1], ..]).to_owned();
            assert!(max_abs_diff(&og, &part) < 1e-12, "{routing:?} graph {g}");
            assert!(max_abs_diff(&mg.forward[0], &maps.forward[g]) < 1e-12);
            assert!(max_abs_diff(&mg.backward[0], &maps.backward[g]) < 1e-12);
        }
    }
}

fn softmax_rows(a: &Array2<f64>) -> Array2<f64> {
    let mut out = a.clone();
    for mut row in out.rows_mut() {
        let mx = row.fold(f64::NEG_INFINITY, |a, &b| a.max(b));
        row.mapv_inplace(|v| (v - mx).exp());
        let s = row.sum();
        row.mapv_inplace(|v| v / s);
    }
    out
}

/// Row-wise LayerNorm with the affine parameters `{prefix}.weight` and
/// `{prefix}.bias` of `l`.
fn layer_norm_rows(l: &MvcAttn<B>, prefix: &str, x: &Array2<f64>, eps: f64) -> Array2<f64> {
    let (gamma, beta) = (
        param(l, &format!("{prefix}.weight")),
        param(l, &format!("{prefix}.bias")),
    );
    let mut out = x.clone();
    for mut row in out.rows_mut() {
        let mean = row.mean().unwrap();
        let var = row.mapv(|v| (v - mean) * (v - mean)).mean().unwrap();
        for (c, v) in row.iter_mut().enumerate() {
            *v = (*v - mean) / (var + eps).sqrt() * gamma[[0, c]] + beta[[0, c]];
        }
    }
    out
}

#[test]
fn attention_routing_matches_dense_reference() {
    dense_reference(false);
}

#[test]
fn score_norm_matches_dense_reference() {
    dense_reference(true);
}

fn dense_reference(score_norm: bool) {
    let (h, m, n) = (4, 3, 6);
    let mut cfg = config(h, m, Routing::Attention);
    cfg.score_norm = score_norm;
    let l = layer(&cfg, 41);
    let mut rng = StdRng::seed_from_u64(42);
    let z = rand_mat_wide(&mut rng, n, h);

    // 1. S = LayerNorm(mean_v z_v W^V_m) with the affine part.
    let wv = param(&l, "mvproj.weight");
    let (gamma, beta) = (
        param(&l, "mvproj_norm.weight"),
        param(&l, "mvproj_norm.bias"),
    );
    let zbar = z.mean_axis(Axis(0)).unwrap();
    let mut s_mat = Array2::zeros((m, h));
    for j in 0..m {
        let x = zbar.dot(&wv.slice(s![.., j * h..(j + 1) * h]));
        let mean = x.mean().unwrap();
        let var = x.mapv(|v| (v - mean) * (v - mean)).mean().unwrap();
        for c in 0..h {
            s_mat[[j, c]] =
                (x[c] - mean) / (var + cfg.layer_norm_eps).sqrt() * gamma[[0, c]] + beta[[0, c]];
        }
    }
    // With score_norm, the scores see LayerNorm(Z) and LayerNorm(Ŝ).
    let eps = cfg.layer_norm_eps;
    let z_score = if score_norm {
        layer_norm_rows(&l, "score_norm.nodes", &z, eps)
    } else {
        z.clone()
    };
    // 2. E_f = (S W_fq)(Z W_fk)ᵀ / sqrt(d_c), softmax over nodes.
    let e_f = s_mat
        .dot(&param(&l, "fcattn.q.weight"))
        .dot(&z_score.dot(&param(&l, "fcattn.k.weight")).t())
        / (cfg.d_c as f64).sqrt();
    let a_f = softmax_rows(&e_f);
    let s_hat = a_f.dot(&z).dot(&param(&l, "fcattn.v.weight"));
    // 3. E_b = (Z W_bk)(Ŝ W_bq)ᵀ / sqrt(d_a), softmax over supernodes.
    let s_hat_score = if score_norm {
        layer_norm_rows(&l, "score_norm.supernodes", &s_hat, eps)
    } else {
        s_hat.clone()
    };
    let e_b = z_score
        .dot(&param(&l, "bcattn.k.weight"))
        .dot(&s_hat_score.dot(&param(&l, "bcattn.q.weight")).t())
        / (cfg.d_a as f64).sqrt();
    let a_b = softmax_rows(&e_b);
    let want = a_b.dot(&s_hat.dot(&param(&l, "bcattn.v.weight")));

    let (out, maps) = run(&l, &z, &[0, n]);
    assert!(max_abs_diff(&out, &want) < 1e-12);
    assert!(max_abs_diff(&maps.forward[0], &a_f) < 1e-12);
    assert!(max_abs_diff(&maps.backward[0], &a_b) < 1e-12);
    assert!(max_abs_diff(&maps.dynamic_adjacency(0).unwrap(), &a_b.dot(&a_f)) < 1e-12);
    // Z' = A_d Z W_fv W_bv: the layer is the rank-M transition A_d applied to Z.
    let w = param(&l, "fcattn.v.weight").dot(&param(&l, "bcattn.v.weight"));
    let via_ad = maps.dynamic_adjacency(0).unwrap().dot(&z).dot(&w);
    assert!(max_abs_diff(&out, &via_ad) < 1e-12);
}

#[test]
fn votes_routing_hand_computed() {
    // N = 2, M = 2, h = d_c = d_a = 2, LayerNorm eps = 0, Z = I.
    let mut cfg = MvcAttnConfig::new(2);
    cfg.supernodes = 2;
    cfg.routing = Routing::Votes;
    cfg.layer_norm_eps = 0.0;
    let l = cfg.build(&B::new(), &mut StdRng::seed_from_u64(0)).unwrap();
    let eye = ndarray::arr2(&[[1.0, 0.0], [0.0, 1.0]]);
    let r2 = 2f64.sqrt();
    // mean z = (1/2, 1/2); W^V_1 = [[2,0],[0,0]] gives (1, 0), LayerNorm -> s_1 = (1, -1);
    // W^V_2 = [[0,0],[0,2]] gives (0, 1), LayerNorm -> s_2 = (-1, 1).
    set_param(
        &l,
        "mvproj.weight",
        ndarray::arr2(&[[2.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 2.0]]),
    );
    // W_fq = I, W_fk = c I with c = sqrt(2) ln(3) / 2: E_f = S Zᵀ c / sqrt(2)
    //   = (ln 3 / 2) [[1, -1], [-1, 1]].
    // Votes: softmax over supernodes per node (columns of E_f): node 0 gets
    //   (e^{ln3/2}, e^{-ln3/2}) / sum = (3/4, 1/4); node 1 gets (1/4, 3/4).
    //   A_f = [[3/4, 1/4], [1/4, 3/4]].
    set_param(&l, "fcattn.q.weight", eye.clone());
    set_param(
        &l,
        "fcattn.k.weight",
        eye.mapv(|v| v * r2 * 3f64.ln() / 2.0),
    );
    // W_fv = I: Ŝ = A_f Z W_fv = A_f.
    set_param(&l, "fcattn.v.weight", eye.clone());
    // W_bq = I, W_bk = k I with k = 2 sqrt(2) ln 2: E_b = Z Ŝᵀ k / sqrt(2)
    //   = 2 ln 2 [[3/4, 1/4], [1/4, 3/4]].
    // Votes: softmax over nodes per supernode (columns of E_b): supernode 0
    //   scores differ by 2 ln2 (3/4 - 1/4) = ln 2, so (2/3, 1/3); supernode 1
    //   (1/3, 2/3). A_b = [[2/3, 1/3], [1/3, 2/3]].
    set_param(&l, "bcattn.q.weight", eye.clone());
    set_param(
        &l,
        "bcattn.k.weight",
        eye.mapv(|v| v * 2.0 * r2 * 2f64.ln()),
    );
    // W_bv = [[1, 2], [0, 1]].
    // A_b Ŝ = [[2/3·3/4 + 1/3·1/4, 2/3·1/4 + 1/3·3/4], ...] = [[7/12, 5/12], [5/12, 7/12]];
    // Z' = (A_b Ŝ) W_bv = [[7/12, 14/12 + 5/12], [5/12, 10/12 + 7/12]]
    //    = [[7/12, 19/12], [5/12, 17/12]].
    set_param(
        &l,
        "bcattn.v.weight",
        ndarray::arr2(&[[1.0, 2.0], [0.0, 1.0]]),
    );

    let (out, maps) = run(&l, &eye, &[0, 2]);
    let want = ndarray::arr2(&[[7.0, 19.0], [5.0, 17.0]]).mapv(|v| v / 12.0);
    assert!(max_abs_diff(&out, &want) < 1e-12, "{out}");
    let af = ndarray::arr2(&[[0.75, 0.25], [0.25, 0.75]]);
    let ab = ndarray::arr2(&[[2.0, 1.0], [1.0, 2.0]]).mapv(|v| v / 3.0);
    assert!(max_abs_diff(&maps.forward[0], &af) < 1e-12);
    assert!(max_abs_diff(&maps.backward[0], &ab) < 1e-12);
}

// ----- module behaviour and errors ---------------------------------------------------------

fn names_and_shapes(score_norm: bool) -> Vec<(String, (usize, usize))> {
    let mut cfg = config(4, 3, Routing::Attention);
    cfg.score_norm = score_norm;
    let l = cfg.build(&B::new(), &mut StdRng::seed_from_u64(0)).unwrap();
    l.named_params()
        .into_iter()
        .map(|(n, p)| (n, p.shape()))
        .collect()
}

#[test]
fn parameter_names_and_shapes() {
    let want = [
        ("mvproj.weight", (4, 12)),
        ("mvproj_norm.weight", (1, 4)),
        ("mvproj_norm.bias", (1, 4)),
        ("fcattn.q.weight", (4, 2)),
        ("fcattn.k.weight", (4, 2)),
        ("fcattn.v.weight", (4, 4)),
        ("bcattn.q.weight", (4, 3)),
        ("bcattn.k.weight", (4, 3)),
        ("bcattn.v.weight", (4, 4)),
    ];
    let want: Vec<(String, (usize, usize))> =
        want.iter().map(|(n, s)| (n.to_string(), *s)).collect();
    assert_eq!(names_and_shapes(false), want);

    // With score_norm, its two LayerNorms follow the supernode norm.
    let extra = [
        ("score_norm.nodes.weight", (1, 4)),
        ("score_norm.nodes.bias", (1, 4)),
        ("score_norm.supernodes.weight", (1, 4)),
        ("score_norm.supernodes.bias", (1, 4)),
    ];
    let want: Vec<(String, (usize, usize))> = want[..3]
        .iter()
        .cloned()
        .chain(extra.iter().map(|(n, s)| (n.to_string(), *s)))
        .chain(want[3..].iter().cloned())
        .collect();
    assert_eq!(names_and_shapes(true), want);
}

/// With `score_norm` (and `eps = 0`) the maps do not depend on the scale of
/// the node states and the output is linear in it; without it, shrinking
/// the states flattens the maps towards uniform.
#[test]
fn score_norm_makes_the_maps_scale_invariant() {
    let mut rng = StdRng::seed_from_u64(51);
    let z = rand_mat_wide(&mut rng, 7, 4);
    let ptr = [0, 3, 7];
    for score_norm in [false, true] {
        let mut cfg = config(4, 3, Routing::Attention);
        cfg.layer_norm_eps = 0.0;
        cfg.score_norm = score_norm;
        let l = layer(&cfg, 52);
        let (out, maps) = run(&l, &z, &ptr);
        let (out_small, maps_small) = run(&l, &z.mapv(|v| v * 1e-3), &ptr);
        let drift = (0..2)
            .map(|g| {
                max_abs_diff(&maps.forward[g], &maps_small.forward[g])
                    .max(max_abs_diff(&maps.backward[g], &maps_small.backward[g]))
            })
            .fold(0.0, f64::max);
        let entropy_small = normalized_entropy(maps_small.backward[1].view()).unwrap();
        if score_norm {
            assert!(drift < 1e-10, "maps moved by {drift}");
            assert!(max_abs_diff(&out.mapv(|v| v * 1e-3), &out_small) < 1e-12);
        } else {
            assert!(drift > 1e-3, "maps moved by only {drift}");
            assert!(entropy_small > 1.0 - 1e-6, "{entropy_small}");
        }
    }
}

#[test]
fn dropout_only_in_training_mode() {
    let cpu = B::new();
    let mut cfg = config(4, 3, Routing::Attention);
    cfg.dropout = 0.5;
    let mut l = layer(&cfg, 51);
    let seg = Segments::new(&cpu, &[0, 8]).unwrap();
    let z = rand_mat_wide(&mut StdRng::seed_from_u64(52), 8, 4);
    let eval = |l: &MvcAttn<B>, seed| {
        let t = Tape::with_seed(&cpu, seed);
        l.forward(&t, &t.constant_array(&z), &seg)
            .unwrap()
            .to_array()
    };
    let (a, b) = (eval(&l, 1), eval(&l, 2));
    assert!(max_abs_diff(&a, &b) > 1e-6, "dropout masks should differ");
    l.set_training(false);
    let (c, d) = (eval(&l, 1), eval(&l, 2));
    assert_eq!(c, d);
    let mut no_drop = cfg.clone();
    no_drop.dropout = 0.0;
    let l0 = layer(&no_drop, 51);
    assert!(max_abs_diff(&c, &eval(&l0, 1)) < 1e-15);
}

#[test]
fn invalid_configs_are_errors() {
    let cpu = B::new();
    let mut rng = StdRng::seed_from_u64(0);
    let base = MvcAttnConfig::new(4);
    assert!(base.validate().is_ok());
    let mut bad = Vec::new();
    for f in [
        (|c: &mut MvcAttnConfig| c.hidden = 0) as fn(&mut MvcAttnConfig),
        |c| c.supernodes = 0,
        |c| c.d_c = 0,
        |c| c.d_a = 0,
        |c| c.dropout = 1.0,
        |c| c.dropout = -0.1,
        |c| c.dropout = f64::NAN,
        |c| c.layer_norm_eps = -1.0,
        |c| c.layer_norm_eps = f64::INFINITY,
    ] {
        let mut c = base.clone();
        f(&mut c);
        bad.push(c);
    }
    for c in bad {
        assert!(
            matches!(c.validate(), Err(Error::InvalidConfig(_))),
            "{c:?}"
        );
        assert!(matches!(
            c.build(&cpu, &mut rng),
            Err(Error::InvalidConfig(_))
        ));
    }
}

#[test]
fn shape_mismatches_and_empty_graphs_are_errors() {
    let cpu = B::new();
    let l = layer(&config(4, 2, Routing::Attention), 61);
    let tape = Tape::new(&cpu);
    let seg = Segments::new(&cpu, &[0, 3, 5]).unwrap();
    let wrong_cols = tape.constant_array(&Array2::zeros((5, 3)));
    let wrong_rows = tape.constant_array(&Array2::zeros((6, 4)));
    for z in [&wrong_cols, &wrong_rows] {
        assert!(matches!(
            l.forward(&tape, z, &seg),
            Err(Error::ShapeMismatch { .. })
        ));
    }
    let empty_seg = Segments::new(&cpu, &[0, 3, 3, 5]).unwrap();
    let z = tape.constant_array(&Array2::ones((5, 4)));
    assert!(matches!(
        l.forward_with_maps(&tape, &z, &empty_seg),
        Err(Error::Empty(_))
    ));
    let none = Segments::new(&cpu, &[0, 0]).unwrap();
    let z0 = tape.constant_array(&Array2::zeros((0, 4)));
    assert!(matches!(l.forward(&tape, &z0, &none), Err(Error::Empty(_))));
}

#[test]
fn dynamic_adjacency_limits() {
    let maps = AttentionMaps {
        forward: vec![Array2::from_elem((1, MAX_DENSE_NODES + 1), 1.0)],
        backward: vec![Array2::from_elem((MAX_DENSE_NODES + 1, 1), 1.0)],
    };
    assert!(matches!(
        maps.dynamic_adjacency(0),
        Err(Error::InvalidConfig(_))
    ));
    assert!(matches!(
        maps.dynamic_adjacency(1),
        Err(Error::IndexOutOfRange { .. })
    ));
    let mismatched = AttentionMaps {
        forward: vec![Array2::zeros((2, 3))],
        backward: vec![Array2::zeros((3, 1))],
    };
    assert!(matches!(
        mismatched.dynamic_adjacency(0),
        Err(Error::ShapeMismatch { .. })
    ));
}

// ----- normalised entropy of the maps --------------------------------------------

#[test]
fn normalized_entropy_matches_hand_computed_values() {
    // One row (1/2, 1/4, 1/4): H = (1/2) ln 2 + 2 (1/4) ln 4 = 1.5 ln 2, over ln 3.
    let e = normalized_entropy(ndarray::array![[0.5, 0.25, 0.25]].view()).unwrap();
    assert!((e - 1.5 * 2f64.ln() / 3f64.ln()).abs() < 1e-15, "{e}");
    // The mean over rows: a uniform row (1) and a one-hot row (0) give 1/2.
    let e = normalized_entropy(ndarray::array![[0.5, 0.5], [1.0, 0.0]].view()).unwrap();
    assert!((e - 0.5).abs() < 1e-15, "{e}");
    // Uniform rows of any width give 1, one-hot rows 0, in any column order.
    for w in 2..9 {
        let u = Array2::from_elem((3, w), 1.0 / w as f64);
        assert!((normalized_entropy(u.view()).unwrap() - 1.0).abs() < 1e-12);
        let mut o = Array2::zeros((3, w));
        for r in 0..3 {
            o[[r, (r * 5) % w]] = 1.0;
        }
        assert_eq!(normalized_entropy(o.view()).unwrap(), 0.0);
    }
}

#[test]
fn normalized_entropy_rejects_what_is_not_a_distribution() {
    let bad = [
        Array2::<f64>::zeros((0, 3)),
        Array2::from_elem((2, 1), 1.0),
        ndarray::array![[0.5, f64::NAN]],
        ndarray::array![[1.5, -0.5]],
        ndarray::array![[0.5, 0.4]],
        ndarray::array![[0.5, 0.5003]],
    ];
    for m in &bad {
        assert!(normalized_entropy(m.view()).is_err(), "{m:?}");
    }
    assert!(matches!(
        normalized_entropy(bad[0].view()),
        Err(Error::Empty(_))
    ));
    assert!(matches!(
        normalized_entropy(bad[2].view()),
        Err(Error::NonFinite { .. })
    ));
    // Rounding of an f32 map (rows off by up to 1e-4) is accepted.
    assert!(normalized_entropy(ndarray::array![[0.5, 0.50005]].view()).is_ok());
    // A long row may be off by its f32 summation bound, n 2^-24 (1.19e-3
    // for 20,000 entries), and no more.
    let n = 20_000;
    let row = |total: f64| Array2::from_elem((1, n), total / n as f64);
    assert!(normalized_entropy(row(1.0 + 1.1e-3).view()).is_ok());
    assert!(normalized_entropy(row(1.0 - 1.1e-3).view()).is_ok());
    assert!(normalized_entropy(row(1.0 + 1.3e-3).view()).is_err());
    assert!(normalized_entropy(row(1.0 - 1.3e-3).view()).is_err());
}

/// A supernode's attention over a PubMed-sized graph in `f32` (the maps a
/// trained `f32` model reports; near-uniform logits, as trained maps are):
/// the CPU kernel's row sums carry `f32` rounding (here up to 7e-5; 1.8e-4
/// on a model trained on PubMed), the entropy is still measured, and it
/// equals the one of the same softmax in `f64` to that rounding.
#[test]
fn normalized_entropy_takes_f32_maps_of_large_graphs() {
    let n = 19_717;
    let mut rng = StdRng::seed_from_u64(31);
    let logits64 = Array2::from_shape_fn((n, 3), |(i, c)| {
        if i == 0 {
            0.0
        } else {
            -0.3567 - 0.1 * c as f64 - 1e-3 * rng.random::<f64>()
        }
    });
    let softmax_t = |logits: &Array2<f64>, f32_model: bool| -> Array2<f64> {
        if f32_model {
            let cpu = Cpu::<f32>::new();
            let seg = Segments::new(&cpu, &[0, n]).unwrap();
            let tape = Tape::inference(&cpu);
            let x = tape.constant_array(&logits.mapv(|v| v as f32));
            x.segment_softmax(&seg)
                .unwrap()
                .to_array()
                .t()
                .mapv(f64::from)
        } else {
            let cpu = B::new();
            let seg = Segments::new(&cpu, &[0, n]).unwrap();
            let tape = Tape::inference(&cpu);
            let x = tape.constant_array(logits);
            x.segment_softmax(&seg).unwrap().to_array().t().to_owned()
        }
    };
    let af32 = softmax_t(&logits64, true);
    let worst = af32
        .rows()
        .into_iter()
        .map(|r| (r.sum() - 1.0).abs())
        .fold(0.0, f64::max);
    assert!(worst < 1.2e-3, "row sums off by {worst}");
    let e32 = normalized_entropy(af32.view()).unwrap();
    let e64 = normalized_entropy(softmax_t(&logits64, false).view()).unwrap();
    // A row scaled by `1 + d` moves the entropy by about `d (1 + 1/ln n)`.
    assert!((e32 - e64).abs() <= 2.0 * worst + 1e-9, "{e32} vs {e64}");
}

/// Nodes with identical states cannot be told apart: every supernode attends
/// uniformly over them, every supernode then holds the same `Ŝ` row, and
/// every node reads the supernodes back uniformly. Both maps have entropy
/// 1 and every output row is the same vector (the broadcast that
/// docs/hdgcn.md measures in trained text models).
#[test]
fn identical_nodes_give_uniform_maps_and_one_output_row() {
    let l = layer(&config(4, 3, Routing::Attention), 21);
    let mut rng = StdRng::seed_from_u64(22);
    let row = rand_mat_wide(&mut rng, 1, 4);
    let z = Array2::from_shape_fn((5, 4), |(_, c)| row[[0, c]]);
    let (out, maps) = run(&l, &z, &[0, 5]);
    assert!((normalized_entropy(maps.forward[0].view()).unwrap() - 1.0).abs() < 1e-12);
    assert!((normalized_entropy(maps.backward[0].view()).unwrap() - 1.0).abs() < 1e-12);
    for r in 1..5 {
        for c in 0..4 {
            assert!((out[[r, c]] - out[[0, c]]).abs() < 1e-12);
        }
    }
    // Distinct random nodes (with the same layer) give maps below 1.
    let (_, maps) = run(&l, &rand_mat_wide(&mut rng, 5, 4), &[0, 5]);
    assert!(normalized_entropy(maps.forward[0].view()).unwrap() < 1.0 - 1e-6);
    assert!(normalized_entropy(maps.backward[0].view()).unwrap() < 1.0 - 1e-6);
}

/// The largest 2 x 2 minor of `g` relative to `|g|_F²`: 0 exactly when `g`
/// has rank at most one.
fn rank_one_defect(g: &Array2<f64>) -> f64 {
    let (r, c) = g.dim();
    let mut worst: f64 = 0.0;
    for i in 0..r {
        for k in 0..r {
            for j in 0..c {
                for l in 0..c {
                    worst = worst.max((g[[i, j]] * g[[k, l]] - g[[i, l]] * g[[k, j]]).abs());
                }
            }
        }
    }
    worst / g.iter().map(|v| v * v).sum::<f64>()
}

/// With the forward query weights at zero, `A_f` is uniform, every supernode
/// receives the same `Ŝ` row and every node the same output row. Then the
/// gradients of both value weights are outer products (rank one), and the
/// backward query and key weights get no gradient at all: the mechanism
/// behind the collapse of wide HDGCN layers under Adam (the earlier lab notebook,
/// `git show 949970a:docs/results.md`, "Why wide dynamic layers collapse"). With a random query weight none of
/// this holds.
#[test]
fn uniform_forward_attention_gives_rank_one_value_gradients() {
    use hdgcn::backend::Backend;
    let cpu = B::new();
    let (h, n) = (4, 6);
    let seg = Segments::new(&cpu, &[0, n]).unwrap();
    let z = rand_mat_wide(&mut StdRng::seed_from_u64(61), n, h);
    for uniform in [true, false] {
        let l = layer(&config(h, 3, Routing::Attention), 62);
        if uniform {
            set_param(&l, "fcattn.q.weight", Array2::zeros((h, 2)));
        }
        let tape = Tape::with_seed(&cpu, 0);
        let out = l.forward(&tape, &tape.constant_array(&z), &seg).unwrap();
        let rows_spread = {
            let o = out.to_array();
            max_abs_diff(&o, &o.row(0).broadcast((n, h)).unwrap().to_owned())
        };
        let grads = weigh(&out, 63).unwrap().backward().unwrap();
        let grad = |name: &str| {
            let (_, p) = l
                .named_params()
                .into_iter()
                .find(|(n, _)| n == name)
                .unwrap();
            cpu.download(grads.get(&p).expect(name))
        };
        let norm = |g: &Array2<f64>| g.iter().map(|v| v * v).sum::<f64>().sqrt();
        let (fv, bv) = (grad("fcattn.v.weight"), grad("bcattn.v.weight"));
        let (bq, bk) = (grad("bcattn.q.weight"), grad("bcattn.k.weight"));
        assert!(norm(&fv) > 1e-3 && norm(&bv) > 1e-3, "{fv} {bv}");
        if uniform {
            assert!(rows_spread < 1e-12, "output rows differ by {rows_spread}");
            for (name, g) in [("fcattn.v", &fv), ("bcattn.v", &bv)] {
                let d = rank_one_defect(g);
                assert!(d < 1e-12, "{name}: rank-one defect {d}");
            }
            assert!(norm(&bq) < 1e-12 && norm(&bk) < 1e-12, "{bq} {bk}");
        } else {
            assert!(rows_spread > 1e-3, "{rows_spread}");
            for (name, g) in [("fcattn.v", &fv), ("bcattn.v", &bv)] {
                let d = rank_one_defect(g);
                assert!(d > 1e-3, "{name}: rank-one defect only {d}");
            }
            assert!(norm(&bq) > 1e-3 && norm(&bk) > 1e-3, "{bq} {bk}");
        }
    }
}

// ----- the output weight folded into the values -------------------------------------

/// `forward_then(z, w)` is `forward(z) · w` (computed as `A_b (Ŝ (W_bv w))`)
/// for every variant, to rounding, with a `w` of another width.
#[test]
fn forward_then_is_the_output_times_the_weight() {
    let cpu = B::new();
    let ptr = [0, 3, 4, 9];
    let seg = Segments::new(&cpu, &ptr).unwrap();
    let mut rng = StdRng::seed_from_u64(21);
    let z = rand_mat_wide(&mut rng, 9, 4);
    let w = rand_mat_wide(&mut rng, 4, 5);
    for cfg in every_variant(4, 3) {
        let l = layer(&cfg, 22);
        let tape = Tape::inference(&cpu);
        let zv = tape.constant_array(&z);
        let wv = tape.constant_array(&w);
        let folded = l.forward_then(&tape, &zv, &seg, &wv).unwrap().to_array();
        let plain = l.forward(&tape, &zv, &seg).unwrap().to_array().dot(&w);
        assert_eq!(folded.dim(), (9, 5));
        let d = max_abs_diff(&folded, &plain);
        assert!(
            d < 1e-12,
            "{:?} score_norm {}: {d}",
            cfg.routing,
            cfg.score_norm
        );
    }
}

#[test]
fn gradcheck_forward_then() {
    let cpu = B::new();
    let ptr = [0, 3, 4, 7];
    let seg = Segments::new(&cpu, &ptr).unwrap();
    let mut rng = StdRng::seed_from_u64(23);
    let z = rand_mat_wide(&mut rng, 7, 3);
    let w = rand_mat_wide(&mut rng, 3, 2);
    for score_norm in [false, true] {
        let mut cfg = config(3, 2, Routing::Attention);
        cfg.score_norm = score_norm;
        let l = layer(&cfg, 24);
        let r = check_inputs(
            &[z.clone(), w.clone()],
            |t, v| weigh(&l.forward_then(t, &v[0], &seg, &v[1])?, 25),
            H,
        )
        .unwrap();
        assert!(r.max_error < TOL, "inputs: {} at {}", r.max_error, r.worst);
        let r = check_params(
            &l.named_params(),
            |t| {
                let wv = t.constant_array(&w);
                weigh(&l.forward_then(t, &t.constant_array(&z), &seg, &wv)?, 26)
            },
            H,
        )
        .unwrap();
        assert!(r.max_error < TOL, "params: {} at {}", r.max_error, r.worst);
        assert_eq!(r.checked, l.num_params());
    }
}

#[test]
fn forward_then_rejects_a_weight_of_the_wrong_height() {
    let cpu = B::new();
    let seg = Segments::new(&cpu, &[0, 2]).unwrap();
    let l = layer(&config(3, 2, Routing::Attention), 27);
    let tape = Tape::inference(&cpu);
    let z = tape.constant_array(&Array2::ones((2, 3)));
    let w = tape.constant_array(&Array2::ones((4, 3)));
    let err = l.forward_then(&tape, &z, &seg, &w).unwrap_err();
    assert!(matches!(err, Error::ShapeMismatch { .. }), "{err}");
    assert!(err.to_string().contains("output weight"), "{err}");
}
