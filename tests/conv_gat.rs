//! GatConv and GatV2Conv: against PyTorch Geometric 2.8.1 (float64 outputs
//! and attention coefficients recorded in `tests/fixtures/gat*_*.json` by
//! `gen_conv_gat.py`), f64 gradient checks, permutation equivariance, a
//! batch equal to its graphs alone, and the errors for bad input.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use hdgcn::Error;
use hdgcn::autograd::gradcheck::{check_inputs, check_params};
use hdgcn::autograd::{Param, Tape};
use hdgcn::backend::Cpu;
use hdgcn::conv::{DeviceGraph, GatConv, GatConvConfig, GatV2Conv, GatV2ConvConfig, GraphConv};
use hdgcn::graph::{Batch, Graph};
use hdgcn::nn::Module;
use ndarray::Array2;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng, rngs::StdRng};
use serde_json::Value;

mod common;
use common::{assert_ok, max_abs_diff, rand_mat, rand_mat_wide};

type C = Cpu<f64>;

/// Required agreement with PyG (float64 on both sides).
const TOL: f64 = 1e-5;

fn fixtures() -> Vec<(String, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.starts_with("gat") && name.ends_with(".json") && name != "gat_versions.json"
        })
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|p| {
            let v = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
            (p.file_name().unwrap().to_string_lossy().into_owned(), v)
        })
        .collect()
}

/// Every number of a nested JSON array, in row-major order.
fn flat(v: &Value, out: &mut Vec<f64>) {
    match v {
        Value::Array(a) => a.iter().for_each(|x| flat(x, out)),
        Value::Number(n) => out.push(n.as_f64().unwrap()),
        other => panic!("not a number: {other}"),
    }
}

fn matrix(v: &Value) -> Array2<f64> {
    let rows = v.as_array().unwrap();
    let mut all = Vec::new();
    flat(v, &mut all);
    Array2::from_shape_vec((rows.len(), all.len() / rows.len()), all).unwrap()
}

fn usizes(v: &Value) -> Vec<usize> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as usize)
        .collect()
}

/// Sets every parameter of `m` from PyG's state_dict entry of the same
/// name: `weight`s are `[out, in]` (transposed here), the rest are read
/// row-major into the parameter's shape (`att*` `[1, heads, out]` ->
/// `heads x out`, biases `[n]` -> `1 x n`).
fn load_pyg<M: Module<C>>(m: &M, params: &Value) {
    let mut want: Vec<String> = params.as_object().unwrap().keys().cloned().collect();
    for (name, p) in m.named_params() {
        let v = &params[&name];
        assert!(!v.is_null(), "{name} missing from the fixture");
        let a = if name.ends_with("weight") {
            matrix(v).t().to_owned()
        } else {
            let mut all = Vec::new();
            flat(v, &mut all);
            Array2::from_shape_vec(p.shape(), all).unwrap()
        };
        p.set(a).unwrap();
        want.retain(|k| k != &name);
    }
    // Only the aliases of a shared lin_l may be left over.
    for k in &want {
        let alias = k.replacen("lin_r.", "lin_l.", 1);
        assert!(k.starts_with("lin_r."), "{k} not loaded");
        assert_eq!(params[k], params[&alias], "{k} differs from {alias}");
    }
}

/// The fixture's graph (weighted when it records weights, which GAT
/// ignores), or the batch of its graphs.
fn device_graph(fx: &Value) -> DeviceGraph<C> {
    let cpu = C::new();
    let n = fx["num_nodes"].as_u64().unwrap() as usize;
    let ei = fx["edge_index"].as_array().unwrap();
    let (src, dst) = (usizes(&ei[0]), usizes(&ei[1]));
    let w: Vec<f64> = if fx["edge_weight"].is_null() {
        vec![1.0; src.len()]
    } else {
        let mut v = Vec::new();
        flat(&fx["edge_weight"], &mut v);
        v
    };
    let e: Vec<(usize, usize, f64)> = (0..src.len()).map(|k| (src[k], dst[k], w[k])).collect();
    if fx["batch"].is_null() {
        return DeviceGraph::new(&cpu, Graph::from_weighted_edges(n, &e).unwrap());
    }
    let batch = usizes(&fx["batch"]);
    let split = batch.iter().position(|&g| g == 1).unwrap();
    let part = |lo: usize, hi: usize| {
        let sub: Vec<_> = e
            .iter()
            .filter(|&&(s, _, _)| (lo..hi).contains(&s))
            .map(|&(s, d, w)| (s - lo, d - lo, w))
            .collect();
        Graph::from_weighted_edges(hi - lo, &sub).unwrap()
    };
    let b = Batch::new(&[part(0, split), part(split, n)]).unwrap();
    DeviceGraph::from_batch(&cpu, &b).unwrap()
}

/// Attention coefficients (one per head) keyed by `(source, target)`.
type Attention = HashMap<(usize, usize), Vec<f64>>;

/// Our output and attention coefficients.
fn run(fx: &Value) -> (Array2<f64>, Attention) {
    let cpu = C::new();
    let g = device_graph(fx);
    let tape = Tape::inference(&cpu);
    let x = tape.constant_array(&matrix(&fx["x"])).into();
    let (y, edges, alpha) = if fx["layer"] == "GATConv" {
        let conv = gat_of(fx);
        let (e, a, _) = conv.attention(&tape, &g, &x).unwrap();
        (conv.forward(&tape, &g, &x).unwrap(), e, a)
    } else {
        assert_eq!(fx["layer"], "GATv2Conv");
        let conv = gatv2_of(fx);
        let (e, a, _) = conv.attention(&tape, &g, &x).unwrap();
        (conv.forward(&tape, &g, &x).unwrap(), e, a)
    };
    let a = alpha.to_array();
    let map = (0..edges.num_edges())
        .map(|k| ((edges.sources()[k], edges.targets()[k]), a.row(k).to_vec()))
        .collect();
    (y.to_array(), map)
}

fn gat_of(fx: &Value) -> GatConv<C> {
    let x = matrix(&fx["x"]);
    let mut cfg = GatConvConfig::new(x.ncols(), fx["out_channels"].as_u64().unwrap() as usize);
    cfg.heads = fx["heads"].as_u64().unwrap() as usize;
    cfg.concat = fx["concat"].as_bool().unwrap();
    cfg.negative_slope = fx["negative_slope"].as_f64().unwrap();
    cfg.add_self_loops = fx["add_self_loops"].as_bool().unwrap();
    cfg.bias = fx["bias"].as_bool().unwrap();
    let conv = cfg.build(&C::new(), &mut StdRng::seed_from_u64(0)).unwrap();
    load_pyg(&conv, &fx["params"]);
    conv
}

fn gatv2_of(fx: &Value) -> GatV2Conv<C> {
    let x = matrix(&fx["x"]);
    let mut cfg = GatV2ConvConfig::new(x.ncols(), fx["out_channels"].as_u64().unwrap() as usize);
    cfg.heads = fx["heads"].as_u64().unwrap() as usize;
    cfg.concat = fx["concat"].as_bool().unwrap();
    cfg.negative_slope = fx["negative_slope"].as_f64().unwrap();
    cfg.add_self_loops = fx["add_self_loops"].as_bool().unwrap();
    cfg.bias = fx["bias"].as_bool().unwrap();
    cfg.share_weights = fx["share_weights"].as_bool().unwrap();
    let conv = cfg.build(&C::new(), &mut StdRng::seed_from_u64(0)).unwrap();
    load_pyg(&conv, &fx["params"]);
    conv
}

#[test]
fn every_gat_fixture_matches_pyg() {
    let all = fixtures();
    assert!(
        all.len() >= 13,
        "expected the committed fixtures, found {}",
        all.len()
    );
    let mut failures = Vec::new();
    for (name, fx) in &all {
        let (y, alpha) = run(fx);
        let err = max_abs_diff(&y, &matrix(&fx["out"]));
        // PyG's attention, per (source, target) pair (no fixture repeats an edge).
        let aei = fx["attention_edge_index"].as_array().unwrap();
        let (s, d) = (usizes(&aei[0]), usizes(&aei[1]));
        let want = matrix(&fx["attention"]);
        assert_eq!(alpha.len(), s.len(), "{name}: edge count");
        let mut aerr = 0.0f64;
        for k in 0..s.len() {
            let got = alpha
                .get(&(s[k], d[k]))
                .unwrap_or_else(|| panic!("{name}: edge {:?} missing", (s[k], d[k])));
            for (g, w) in got.iter().zip(want.row(k)) {
                aerr = aerr.max((g - w).abs());
            }
        }
        eprintln!("{name}: output {err:.3e}, attention {aerr:.3e}");
        if !(err <= TOL && aerr <= TOL) {
            failures.push(format!("{name}: output {err:e}, attention {aerr:e}"));
        }
    }
    assert!(failures.is_empty(), "off by more than {TOL}: {failures:#?}");
}

fn random_graph(rng: &mut StdRng, n: usize, p: f64) -> Graph {
    let mut e = Vec::new();
    for i in 0..n {
        for j in 0..n {
            if rng.random_bool(p) {
                e.push((i, j, rng.random_range(0.5..2.0)));
            }
        }
    }
    Graph::from_weighted_edges(n, &e).unwrap()
}

/// Both layers in several settings (biases random so they take part).
fn layers(seed: u64, d_in: usize) -> Vec<(String, Box<dyn GraphConv<C>>)> {
    let cpu = C::new();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut out: Vec<(String, Box<dyn GraphConv<C>>)> = Vec::new();
    for (heads, concat, loops) in [(1, true, true), (3, true, true), (2, false, false)] {
        let mut g = GatConvConfig::new(d_in, 2);
        (g.heads, g.concat, g.add_self_loops) = (heads, concat, loops);
        out.push((
            format!("gat {g:?}"),
            Box::new(g.build(&cpu, &mut rng).unwrap()),
        ));
        let mut v = GatV2ConvConfig::new(d_in, 2);
        (v.heads, v.concat, v.add_self_loops) = (heads, concat, loops);
        v.share_weights = heads == 3;
        out.push((
            format!("gatv2 {v:?}"),
            Box::new(v.build(&cpu, &mut rng).unwrap()),
        ));
    }
    for (_, l) in &out {
        for p in l.params() {
            let (r, c) = p.shape();
            if r == 1 {
                p.set(rand_mat(&mut rng, r, c)).unwrap();
            }
        }
    }
    out
}

#[test]
fn gradients_of_parameters_and_inputs() {
    let mut rng = StdRng::seed_from_u64(4);
    let g = random_graph(&mut rng, 6, 0.35);
    let x = rand_mat_wide(&mut rng, 6, 3);
    for (name, conv) in layers(5, 3) {
        let dg = DeviceGraph::new(&C::new(), g.clone());
        let params: Vec<(String, Param<C>)> = conv.named_params();
        let report = check_params(
            &params,
            |t| {
                let y = conv.forward(t, &dg, &t.constant_array(&x).into())?;
                common::weigh(&y, 6)
            },
            1e-6,
        )
        .unwrap();
        assert_ok(&format!("{name}: parameters"), report);
        let report = check_inputs(
            std::slice::from_ref(&x),
            |t, v| common::weigh(&conv.forward(t, &dg, &v[0].clone().into())?, 7),
            1e-6,
        )
        .unwrap();
        assert_ok(&format!("{name}: input"), report);
    }
}

#[test]
fn attention_dropout_is_gradient_checked_in_training_mode() {
    let cpu = C::new();
    let mut rng = StdRng::seed_from_u64(8);
    let g = DeviceGraph::new(&cpu, random_graph(&mut rng, 7, 0.4));
    let x = rand_mat_wide(&mut rng, 7, 3);
    let mut cfg = GatConvConfig::new(3, 2);
    (cfg.heads, cfg.dropout) = (2, 0.4);
    let mut conv = cfg.build(&cpu, &mut rng).unwrap();
    let report = check_params(
        &conv.named_params(),
        |t| common::weigh(&conv.forward(t, &g, &t.constant_array(&x).into())?, 9),
        1e-6,
    )
    .unwrap();
    assert_ok("gat with attention dropout", report);
    // Dropout draws a mask in training mode and none in evaluation mode.
    let y = |c: &GatConv<C>, seed| {
        let t = Tape::with_seed(&cpu, seed);
        c.forward(&t, &g, &t.constant_array(&x).into())
            .unwrap()
            .to_array()
    };
    assert!(max_abs_diff(&y(&conv, 1), &y(&conv, 2)) > 1e-6);
    conv.set_training(false);
    assert_eq!(y(&conv, 1), y(&conv, 2));
}

#[test]
fn permutation_equivariance() {
    for seed in 0..4u64 {
        let mut rng = StdRng::seed_from_u64(100 + seed);
        let n = 9;
        let g = random_graph(&mut rng, n, 0.3);
        let mut perm: Vec<usize> = (0..n).collect();
        perm.shuffle(&mut rng);
        let pe: Vec<(usize, usize, f64)> = g
            .adjacency()
            .iter()
            .map(|(&w, (s, d))| (perm[s], perm[d], w))
            .collect();
        let pg = Graph::from_weighted_edges(n, &pe).unwrap();
        let x = rand_mat(&mut rng, n, 4);
        let mut px = Array2::zeros((n, 4));
        for (i, &p) in perm.iter().enumerate() {
            px.row_mut(p).assign(&x.row(i));
        }
        let cpu = C::new();
        for (name, conv) in layers(seed, 4) {
            let t = Tape::inference(&cpu);
            let run = |g: &Graph, x: &Array2<f64>| {
                let dg = DeviceGraph::new(&cpu, g.clone());
                conv.forward(&t, &dg, &t.constant_array(x).into())
                    .unwrap()
                    .to_array()
            };
            let (y, py) = (run(&g, &x), run(&pg, &px));
            let err = (0..n)
                .flat_map(|i| (0..y.ncols()).map(move |j| (i, j)))
                .map(|(i, j)| (y[[i, j]] - py[[perm[i], j]]).abs())
                .fold(0.0, f64::max);
            assert!(err < 1e-12, "{name}, seed {seed}: {err:e}");
        }
    }
}

#[test]
fn a_batch_equals_its_graphs_alone() {
    let mut rng = StdRng::seed_from_u64(12);
    let sizes = [5, 1, 8, 3];
    let graphs: Vec<Graph> = sizes
        .iter()
        .map(|&n| random_graph(&mut rng, n, 0.3))
        .collect();
    let xs: Vec<Array2<f64>> = sizes.iter().map(|&n| rand_mat(&mut rng, n, 4)).collect();
    let batch = Batch::new(&graphs).unwrap();
    let views: Vec<_> = xs.iter().map(|x| x.view()).collect();
    let bx = ndarray::concatenate(ndarray::Axis(0), &views).unwrap();
    let cpu = C::new();
    let bg = DeviceGraph::from_batch(&cpu, &batch).unwrap();
    for (name, conv) in layers(13, 4) {
        let t = Tape::inference(&cpu);
        let y = conv
            .forward(&t, &bg, &t.constant_array(&bx).into())
            .unwrap()
            .to_array();
        let mut row = 0;
        for (g, x) in graphs.iter().zip(&xs) {
            let dg = DeviceGraph::new(&cpu, g.clone());
            let alone = conv
                .forward(&t, &dg, &t.constant_array(x).into())
                .unwrap()
                .to_array();
            let part = y
                .slice(ndarray::s![row..row + g.num_nodes(), ..])
                .to_owned();
            assert!(max_abs_diff(&part, &alone) < 1e-12, "{name}");
            row += g.num_nodes();
        }
    }
}

#[test]
fn bad_configuration_and_input_are_clear_errors() {
    let cpu = C::new();
    let mut rng = StdRng::seed_from_u64(0);
    let mut cfg = GatConvConfig::new(4, 2);
    cfg.heads = 0;
    let err = cfg.build::<C, _>(&cpu, &mut rng).unwrap_err();
    assert!(err.to_string().contains("head"), "{err}");
    let mut cfg = GatV2ConvConfig::new(4, 2);
    cfg.dropout = 1.0;
    let err = cfg.build::<C, _>(&cpu, &mut rng).unwrap_err();
    assert!(err.to_string().contains("dropout"), "{err}");
    let mut cfg = GatConvConfig::new(4, 2);
    cfg.negative_slope = f64::NAN;
    assert!(matches!(
        cfg.build::<C, _>(&cpu, &mut rng),
        Err(Error::InvalidConfig(_))
    ));
    assert!(
        GatConvConfig::new(0, 2)
            .build::<C, _>(&cpu, &mut rng)
            .is_err()
    );

    let conv = GatConv::new(&cpu, 4, 2, 2, &mut rng).unwrap();
    let v2 = GatV2Conv::new(&cpu, 4, 2, 2, &mut rng).unwrap();
    let g = DeviceGraph::new(&cpu, Graph::from_edges(3, &[(0, 1), (1, 2)]).unwrap());
    let t = Tape::inference(&cpu);
    for x in [Array2::zeros((3, 5)), Array2::zeros((2, 4))] {
        let xv = t.constant_array(&x).into();
        let e1 = conv.forward(&t, &g, &xv).unwrap_err();
        let e2 = v2.forward(&t, &g, &xv).unwrap_err();
        assert!(e1.to_string().contains("GatConv"), "{e1}");
        assert!(e2.to_string().contains("GatV2Conv"), "{e2}");
    }
}

#[test]
fn widths_and_parameter_names_follow_pyg() {
    let cpu = C::new();
    let mut rng = StdRng::seed_from_u64(0);
    let mut cfg = GatConvConfig::new(5, 4);
    cfg.heads = 3;
    let conv = cfg.clone().build(&cpu, &mut rng).unwrap();
    assert_eq!((conv.in_channels(), conv.out_channels()), (5, 12));
    let names: Vec<String> = conv.named_params().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["lin.weight", "att_src", "att_dst", "bias"]);
    assert_eq!(conv.att_src.shape(), (3, 4));
    cfg.concat = false;
    assert_eq!(cfg.build(&cpu, &mut rng).unwrap().out_channels(), 4);
    let v2 = GatV2Conv::new(&cpu, 5, 4, 2, &mut rng).unwrap();
    let names: Vec<String> = v2.named_params().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "lin_l.weight",
            "lin_l.bias",
            "lin_r.weight",
            "lin_r.bias",
            "att",
            "bias"
        ]
    );
}
